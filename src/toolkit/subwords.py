"""Subword vocabulary: byte-pair encoding from Hugging Face `tokenizers`, behind `Vocab`'s contract.

A word-level vocabulary can only turn a word it never saw into `<unk>`. Byte-pair encoding
(Sennrich et al., 2016, "Neural Machine Translation of Rare Words with Subword Units"; the
paper's choice) starts from characters and learns to merge the most frequent neighbouring
pair, again and again, until the vocabulary has the size you asked for. Frequent words end
up whole, rare ones as a few pieces, so almost any word can be written down.

As in the classic pipeline (words first, then BPE inside each word), `SubwordVocab` reads
the words `toolkit.tokens.tokenize` makes and never merges across them: `encode` takes a
list of words and `decode` gives a list of words back, exactly as `Vocab` does, so batches,
decoding and BLEU work unchanged. A piece that starts a word carries the marker "▁"
(`tokenizers`' Metaspace, as in SentencePiece); `pieces` shows them.
"""

from collections import Counter
from collections.abc import Iterable
from itertools import chain

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK

WORD_START = "▁"  # U+2581, marks a piece that begins a word
DEFAULT_SIZE = 8_000


class SubwordVocab:
    """Maps words to subword ids, `<pad>`, `<unk>`, `<bos>`, `<eos>` at ids 0-3 as in `Vocab`."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self._word_ids: dict[str, list[int]] = {}  # encode_batch's memory: word -> its ids
        self._characters: set[str] | None = None  # every piece's text, for `unknown`
        if [tokenizer.id_to_token(i) for i in range(len(SPECIALS))] != list(SPECIALS):
            raise ValueError(f"a subword vocabulary must start with {', '.join(SPECIALS)}")

    @classmethod
    def train(cls, sentences: Iterable[list[str]], max_size: int | None = None) -> "SubwordVocab":
        """Learn merges until there are `max_size` tokens (fewer if merges run out)."""
        size = DEFAULT_SIZE if max_size is None else max_size
        if size <= len(SPECIALS):
            raise ValueError(f"max_size must leave room for pieces after the {len(SPECIALS)} "
                             f"special tokens; got {max_size}")
        lines = [" ".join(words) for words in sentences]
        tokenizer = _train_bpe(lines, size)
        if tokenizer.get_vocab_size() > size:
            # BPE keeps every character it meets, however many: with more characters than
            # `size` the output layer would be larger than asked for, so choose them.
            tokenizer = _train_bpe(lines, size, _alphabet(lines, size - len(SPECIALS)))
        return cls(tokenizer)

    @classmethod
    def from_json(cls, text: str) -> "SubwordVocab":
        """Rebuild a saved vocabulary (what a checkpoint stores)."""
        return cls(Tokenizer.from_str(text))

    def to_json(self) -> str:
        """Everything the tokenizer knows, merges included, as one string."""
        return self.tokenizer.to_str()

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, tokens: list[str]) -> list[int]:
        """A word the vocabulary never saw becomes pieces; only an unseen character is <unk>."""
        return self.tokenizer.encode(tokens, is_pretokenized=True).ids

    def encode_batch(self, sentences: Iterable[list[str]]) -> list[list[int]]:
        """Many sentences at once: BPE never crosses words, so each distinct word is encoded
        once (in Rust, on every core) and remembered, and a sentence joins its words' ids."""
        sentences = list(sentences)
        new = list({word for words in sentences for word in words} - self._word_ids.keys())
        if new:
            encodings = self.tokenizer.encode_batch([[word] for word in new],
                                                    is_pretokenized=True)
            self._word_ids.update(zip(new, (e.ids for e in encodings), strict=True))
        table = self._word_ids
        return [[index for word in words for index in table[word]] for words in sentences]

    def unknown(self, tokens: list[str]) -> list[str]:
        """Name the characters no piece holds: BPE writes any word it never saw, except
        these, which become <unk> (as `Vocab.unknown` names unseen words)."""
        if self._characters is None:
            self._characters = {piece.removeprefix(WORD_START)
                                for piece in self.tokenizer.get_vocab()} - {""}
        return sorted({char for word in tokens for char in word} - self._characters)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """The subwords themselves, word starts marked with "▁": what the model reads."""
        return [self.tokenizer.id_to_token(int(index)) for index in ids]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Join pieces back into words, up to <eos>: the same output `Vocab.decode` gives."""
        words: list[str] = []
        for index in ids:
            index = int(index)
            if index == EOS_ID:
                break
            if index in (PAD_ID, BOS_ID):
                continue
            piece = self.tokenizer.id_to_token(index)
            if piece.startswith(WORD_START) or not words:
                words.append(piece.removeprefix(WORD_START))
            else:
                words[-1] += piece
        return [word for word in words if word]  # a lone "▁" whose character was <unk>


def _train_bpe(lines: list[str], size: int, alphabet: list[str] | None = None) -> Tokenizer:
    """BPE over words joined by spaces; with `alphabet`, every other character is <unk>."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    # Metaspace splits at the spaces and marks each word's first piece, so no merge ever
    # crosses two words.
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(WORD_START, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(WORD_START, prepend_scheme="always")
    # Characters given as initial_alphabet are always kept; limiting the alphabet to exactly
    # them drops all others (left to limit_alphabet alone, ties in count would be dropped in
    # an order that changes from run to run).
    limit = {} if alphabet is None else {"initial_alphabet": alphabet,
                                         "limit_alphabet": len(alphabet)}
    trainer = trainers.BpeTrainer(
        vocab_size=size, special_tokens=list(SPECIALS), show_progress=False, **limit)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def _alphabet(lines: list[str], room: int) -> list[str]:
    """The `room` most frequent characters, "▁" first, ties by code point: never by hash order."""
    counts = Counter(chain.from_iterable(lines))
    del counts[" "], counts[WORD_START]  # each space becomes the next word's "▁", put first
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [WORD_START] + [character for character, _ in ranked[: room - 1]]
