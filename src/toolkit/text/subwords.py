"""Subword vocabulary: byte-pair encoding from Hugging Face `tokenizers`, behind `Vocab`'s contract.

A word-level vocabulary can only turn a word it never saw into `<unk>`. Byte-pair encoding
(Sennrich et al., 2016, "Neural Machine Translation of Rare Words with Subword Units"; the
paper's choice) starts from characters and learns to merge the most frequent neighbouring
pair, again and again, until the vocabulary has the size you asked for. Frequent words end
up whole, rare ones as a few pieces, so almost any word can be written down.

Subwords read the text as written, so what goes in as a string comes out as the same string:
`split` cuts only at whitespace, and the tokenizer's own pipeline does the rest. Its
normalizer puts text in NFC; its pre-tokenizer (Metaspace, as in SentencePiece) marks each
word's first piece with "▁" and then sets punctuation apart, so no merge crosses a word or
glues a comma to it; its decoder turns every "▁" back into the space it stood for and joins
the rest, so "l'herbe" and "3.5%" come back as written, not as "l ' herbe" and "3. 5 %".
`encode` takes a list of whitespace words and `decode` gives one back, as `Vocab` does with
its tokens, so batches and decoding work unchanged; `join` makes the text.

Two kinds of text would not survive the tokenizer as it comes, so neither reaches it as is.
"<pad>", "<unk>", "<bos>" and "<eos>" written in a sentence are text, never the special ids
(the tokenizer is told to encode them as text: `encode_special_tokens`). A "▁" written in a
sentence would come back as a space, so `escape` writes it as "\ue000" + "1" (a character
of Unicode's private-use area, which the course keeps for this) and `unescape` turns it back.
"""

from collections import Counter
from collections.abc import Iterable
from itertools import chain

import regex
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from toolkit.text.tokens import split_words
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK

WORD_START = "▁"  # U+2581, marks a piece that begins a word
DEFAULT_SIZE = 8_000
ESCAPE = "\ue000"  # private use: with "0" it stands for itself, with "1" for a written "▁"
_ESCAPED = {ESCAPE: ESCAPE + "0", WORD_START: ESCAPE + "1"}
_UNESCAPE = regex.compile(ESCAPE + "([01])")


def escape(word: str) -> str:
    """Write a word so that no character of it is the tokenizer's "▁"."""
    return "".join(_ESCAPED.get(character, character) for character in word)


def unescape(word: str) -> str:
    """Undo `escape`; an escape the model wrote alone stays as it is."""
    return _UNESCAPE.sub(lambda match: (ESCAPE, WORD_START)[int(match[1])], word)


class SubwordVocab:
    """Maps words to subword ids, `<pad>`, `<unk>`, `<bos>`, `<eos>` at ids 0-3 as in `Vocab`."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        tokenizer.encode_special_tokens = True  # "<eos>" in a sentence is text (not saved)
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
        lines = [" ".join(map(escape, words)) for words in sentences]
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

    @staticmethod
    def split(text: str) -> list[str]:
        """Whitespace words, punctuation still attached: the tokenizer sets it apart itself
        and its decoder puts it back (`toolkit.text.tokens.split_words`)."""
        return split_words(text)

    @staticmethod
    def join(words: list[str]) -> str:
        """The words `decode` gave, with the spaces between them: the text as written."""
        return " ".join(words)

    def encode(self, tokens: list[str]) -> list[int]:
        """A word the vocabulary never saw becomes pieces; only an unseen character is <unk>."""
        return self.tokenizer.encode(list(map(escape, tokens)), is_pretokenized=True).ids

    def encode_batch(self, sentences: Iterable[list[str]]) -> list[list[int]]:
        """Many sentences at once: BPE never crosses words, so each distinct word is encoded
        once (in Rust, on every core) and remembered, and a sentence joins its words' ids."""
        sentences = list(sentences)
        new = list({word for words in sentences for word in words} - self._word_ids.keys())
        if new:
            encodings = self.tokenizer.encode_batch([[escape(word)] for word in new],
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
        return sorted(char for char in {char for word in tokens for char in word}
                      if not set(escape(char)) <= self._characters)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """The subwords themselves, word starts marked with "▁": what the model reads."""
        return [self.tokenizer.id_to_token(int(index)) for index in ids]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Read a model's output up to <eos> with the tokenizer's own decoder, which puts every
        space and punctuation mark back where it was; an unseen character stays "<unk>"."""
        kept = []
        for index in ids:
            index = int(index)
            if index == EOS_ID:
                break
            if index not in (PAD_ID, BOS_ID):
                kept.append(index)
        text = self.tokenizer.decode(kept, skip_special_tokens=False)
        return [unescape(word) for word in split_words(text)]

def _train_bpe(lines: list[str], size: int, alphabet: list[str] | None = None) -> Tokenizer:
    """BPE over text as written; with `alphabet`, every other character is <unk>."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.encode_special_tokens = True  # so "<eos>" in the text trains as text
    tokenizer.normalizer = normalizers.NFC()
    # Metaspace splits at the spaces and marks each word's first piece, so no merge ever
    # crosses two words; Punctuation then isolates each mark ("l'herbe": "▁l", "'", "herbe"),
    # so "Haus," and "Haus" share their pieces.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(WORD_START, prepend_scheme="always"),
        pre_tokenizers.Punctuation("isolated"),
    ])
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
