"""Word-level tokenisation shared by the corpus, the vocabulary and BLEU."""

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SPACE_BEFORE_PUNCT = re.compile(r" ([.,!?;:])")
_SPACED_HYPHEN = re.compile(r"(?<=\w) - (?=\w)")  # "twenty - one"; also glues a spaced dash


def tokenize(text: str) -> list[str]:
    """Split words from punctuation so that a word-level vocabulary stays small."""
    return _TOKEN.findall(text)


def detokenize(tokens: list[str]) -> str:
    """Undo `tokenize` so sacreBLEU scores natural text, as its authors ask."""
    text = " ".join(tokens)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return _SPACED_HYPHEN.sub("-", text)
