"""Where text meets tokens: the word-level split and its inverse, and the whitespace split
that subwords read (each vocabulary's `split` and `join` use one pair)."""

import re
import unicodedata

import regex

# A word is a run of letters, digits and the marks that belong to them (Hindi's vowel signs, a
# decomposed umlaut), so no word is cut inside a character as a reader sees it; any other
# visible character (punctuation, an emoji with its modifiers) is a token of its own.
_TOKEN = regex.compile(r"\w+|(?=[^\w\s])\X")
_SPACE_BEFORE_PUNCT = re.compile(r" ([.,!?;:])")
_SPACED_HYPHEN = re.compile(r"(?<=\w) - (?=\w)")  # "twenty - one"; also glues a spaced dash


def tokenize(text: str) -> list[str]:
    """Split words from punctuation so that a word-level vocabulary stays small; text is
    first put in Unicode's composed form (NFC), so "Mädchen" is one word however typed."""
    return _TOKEN.findall(unicodedata.normalize("NFC", text))


def detokenize(tokens: list[str]) -> str:
    """Undo `tokenize` so sacreBLEU scores natural text, as its authors ask."""
    text = " ".join(tokens)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return _SPACED_HYPHEN.sub("-", text)


def split_words(text: str) -> list[str]:
    """Split only at whitespace, after NFC, so `" ".join` gives the text back: what a subword
    vocabulary reads, leaving punctuation to its own pre-tokenizer and decoder."""
    return unicodedata.normalize("NFC", text).split()
