"""Word-level tokenisation shared by the corpus, the vocabulary and BLEU."""

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
