"""Where text meets tokens: the word-level split and its inverse, and the whitespace split
that subwords read (each vocabulary's `split` and `join` use one pair).

The word level gives text back as written. A reader puts no space before `.,!?;:` and none
around the hyphen of "twenty-one", and a space everywhere else; `detokenize` joins tokens by
that rule. Where a text does otherwise ("l'herbe", "3.5", "«oui»", "pas ?"), `tokenize`
marks the token that is not a word on the side that differs, as OpenNMT's tokenizer marks a
joiner: "￭" where the text has no space, "▁" where it has one. So "l'herbe" is `l ￭'￭ herbe`
and "3.5%" is `3 .￭ 5 ￭%`, and words themselves are never marked, so "herbe" is one token
however it is glued. Text that follows the rule, such as every sentence of the built-in
corpus, gets no marks at all. Whitespace is kept only as "a space or none": runs of
whitespace come back as one space, as they do from the subwords.
"""

import unicodedata

import regex

# A word is a run of letters, digits and the marks that belong to them (Hindi's vowel signs, a
# decomposed umlaut), so no word is cut inside a character as a reader sees it; any other
# visible character (punctuation, an emoji with its modifiers) is a token of its own.
_TOKEN = regex.compile(r"\w+|(?=[^\w\s])\X")
_WORD_CHARACTER = regex.compile(r"\w")
JOINED, SPACED = "￭", "▁"  # U+FFED: no space on this side; U+2581: a space on this side
_MARKS = (JOINED, SPACED)
_NO_SPACE_BEFORE = frozenset(".,!?;:")


def tokenize(text: str) -> list[str]:
    """Split words from punctuation so that a word-level vocabulary stays small, marking where
    the text's spaces differ from the rule `detokenize` follows; text is first put in Unicode's
    composed form (NFC), so "Mädchen" is one word however typed."""
    tokens: list[str] = []
    spaces: list[bool] = []  # whether the text has a space before each token
    # Whitespace first, as `split_words` finds it, so no token holds any: a grapheme cluster
    # may otherwise run on into a space (after Arabic's U+0600 number sign, for one).
    for word in split_words(text):
        end = 0
        for match in _TOKEN.finditer(word):
            tokens.append(match.group())
            spaces.append(bool(tokens[:-1]) and (end == 0 or match.start() > end))
            end = match.end()
    usual = _usual_spaces(tokens)
    left, right = [""] * len(tokens), [""] * len(tokens)
    for i in range(1, len(tokens)):
        if spaces[i] != usual[i]:  # marked on the side of the token that is not a word
            if _is_word(tokens[i]):
                right[i - 1] = _mark(spaces[i])
            else:
                left[i] = _mark(spaces[i])
    for i, token in enumerate(tokens):
        # A mark character written as text always gets both marks, so that no token reads
        # two ways ("￭▁" would be "▁" glued on its left, or "￭" spaced on its right).
        if token.startswith(_MARKS) or token.endswith(_MARKS):
            left[i] = _mark(spaces[i])
            right[i] = _mark(i + 1 < len(tokens) and spaces[i + 1])
    return [left[i] + token + right[i] for i, token in enumerate(tokens)]


def detokenize(tokens: list[str]) -> str:
    """Undo `tokenize` so sacreBLEU scores natural text, as its authors ask: a space between
    tokens where the rule puts one, unless a mark says otherwise."""
    parts = [_unmark(token) for token in tokens]  # (left mark, text, right mark)
    usual = _usual_spaces([text for _, text, _ in parts])
    pieces = []
    for i, (left, text, _) in enumerate(parts):
        if i > 0:
            mark = left if not _is_word(text) else parts[i - 1][2]
            pieces.append(" " if (mark == SPACED if mark else usual[i]) else "")
        pieces.append(text)
    return "".join(pieces)


def split_words(text: str) -> list[str]:
    """Split only at whitespace, after NFC, so `" ".join` gives the text back: what a subword
    vocabulary reads, leaving punctuation to its own pre-tokenizer and decoder."""
    return unicodedata.normalize("NFC", text).split()


def token_text(token: str) -> str:
    """The text a word-level token stands for, without its marks: what a reader would see."""
    return _unmark(token)[1]


def _usual_spaces(tokens: list[str]) -> list[bool]:
    """Whether a reader puts a space before each token: not before `.,!?;:`, not around a
    hyphen between two words, and everywhere else; never before the first."""
    spaces = [i > 0 and token not in _NO_SPACE_BEFORE for i, token in enumerate(tokens)]
    for i in range(1, len(tokens) - 1):
        if (tokens[i] == "-" and _WORD_CHARACTER.fullmatch(tokens[i - 1][-1])
                and _WORD_CHARACTER.fullmatch(tokens[i + 1][0])):
            spaces[i] = spaces[i + 1] = False
    return spaces


def _is_word(token: str) -> bool:
    """Words begin with a word character; every other token is one visible character."""
    return bool(_WORD_CHARACTER.match(token))


def _mark(space: bool) -> str:
    """The mark that says whether this side of a token has a space."""
    return SPACED if space else JOINED


def _unmark(token: str) -> tuple[str, str, str]:
    """A token's left mark, its text and its right mark ("" where it has none)."""
    if _is_word(token):
        return "", token, ""
    left = token[0] if token[0] in _MARKS else ""
    right = token[-1] if token[-1] in _MARKS else ""
    if len(token) <= len(left) + len(right):  # marks alone, never written by tokenize: text
        return "", token, ""
    return left, token[len(left) : len(token) - len(right)], right
