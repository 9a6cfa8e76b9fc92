"""Word-level vocabulary: the bridge between sentences and the integer ids a model sees."""

from collections import Counter
from collections.abc import Iterable

from toolkit.text.tokens import detokenize, token_text, tokenize

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(len(SPECIALS))


class Vocab:
    """Maps tokens to ids with the special tokens first, so their ids are the same everywhere."""

    def __init__(self, tokens: Iterable[str]):
        self.itos = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.stoi = {token: index for index, token in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("a vocabulary cannot list the same token twice")

    @classmethod
    def build(
        cls, sentences: Iterable[list[str]], min_count: int = 1, max_size: int | None = None
    ) -> "Vocab":
        """Order by frequency, then alphabetically: never by set order, which changes per run.

        `max_size` counts the special tokens too and keeps the most frequent words, so a
        corpus of a million sentences gives an output layer of a size you chose.
        """
        if max_size is not None and max_size <= len(SPECIALS):
            raise ValueError(f"max_size must leave room for words after the {len(SPECIALS)} "
                             f"special tokens; got {max_size}")
        counts = Counter(token for sentence in sentences for token in sentence)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        kept = [token for token, count in ranked if count >= min_count]
        return cls(kept if max_size is None else kept[: max_size - len(SPECIALS)])

    def __len__(self) -> int:
        return len(self.itos)

    @staticmethod
    def split(text: str) -> list[str]:
        """Words and punctuation apart, each a token of its own, marked where the text's spaces
        are not the usual ones (`toolkit.text.tokens.tokenize`)."""
        return tokenize(text)

    @staticmethod
    def join(tokens: list[str]) -> str:
        """The text as written, for display and for BLEU (`tokens.detokenize`)."""
        return detokenize(tokens)

    def encode(self, tokens: list[str]) -> list[int]:
        """Unknown words become <unk> instead of failing, so any sentence can be translated; a
        token spaced in a way the vocabulary never saw ("sleeps ." gives "▁.") reads as its
        plain self."""
        return [self.stoi.get(token, self.stoi.get(token_text(token), UNK_ID)) for token in tokens]

    def encode_batch(self, sentences: Iterable[list[str]]) -> list[list[int]]:
        """Many sentences at once, the call a subword vocabulary makes fast (`subwords`)."""
        return [self.encode(tokens) for tokens in sentences]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Read a model's output up to <eos>, leaving out the tokens that carry no words."""
        tokens = []
        for index in ids:
            index = int(index)
            if index == EOS_ID:
                break
            if index not in (PAD_ID, BOS_ID):
                tokens.append(self.itos[index])
        return tokens

    def unknown(self, tokens: list[str]) -> list[str]:
        """Name the words this vocabulary has never seen, to explain an <unk> to a user."""
        return [token_text(token) for token in tokens
                if token not in self.stoi and token_text(token) not in self.stoi]
