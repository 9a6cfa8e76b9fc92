"""Sort a model's translations of the held-out numbers 71-79 by what went wrong, in code.

Notebook 10 asks why the held-out numbers fail. A few printed errors can tell any story, so
this module counts every one. English writes 72 tens first ("seventy-two", three tokens:
`seventy - two`); the corpus writes German units first and pre-segmented ("zwei und
siebzig", see `toolkit.text.grammar`). Noun phrases come in the same order in both languages of
this grammar, so the k-th number of an English sentence is the k-th number of its German
reference, and of a hypothesis that holds as many numbers.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.text.corpus import HELD_OUT_TAG
from toolkit.text.lexicon import english_number, german_number

# The grammar's own number words, so this module cannot drift from the corpus it reads.
_ENGLISH_UNITS = {english_number(value): value for value in range(1, 20)}  # one .. nineteen
_ENGLISH_TENS = {english_number(value): value for value in range(20, 100, 10)}
_GERMAN_UNITS = {german_number(value): value for value in range(1, 10)}  # ein .. neun
_GERMAN_TENS = {german_number(value): value for value in range(20, 100, 10)}
_GERMAN_NUMBER_WORDS = {german_number(value) for value in range(2, 20)} | _GERMAN_TENS.keys()

# The kinds of outcome, in the order a table should list them.
RIGHT = "right"
TENS_SWAPPED = "units right, tens word swapped"
UNITS_WRONG = "tens right, units wrong"
ENGLISH_ORDER = "English order copied (tens word, then units)"
CASE_ONLY = "right words, wrong capital letter"
DROPPED_OR_ADDED = "a number dropped or added"
OTHER = "other"
KINDS = (RIGHT, TENS_SWAPPED, UNITS_WRONG, ENGLISH_ORDER, CASE_ONLY, DROPPED_OR_ADDED, OTHER)


# The two kinds of held-out combination, as labels (text.corpus holds the combinations).
NUMBERS_KIND, PAIRS_KIND = "number 71-79", "adjective + noun"


def held_out_kinds(sources: Sequence[str], tags: Sequence[Sequence[str]]) -> dict[str, list[int]]:
    """The held-out sentences of a split, by what they hold: a number 71-79 ("seventy-two"),
    or else a pair training never shows ("red dog"), so each kind can be scored apart."""
    held_out = [i for i, sentence_tags in enumerate(tags) if HELD_OUT_TAG in sentence_tags]
    numbers = [i for i in held_out if "seventy-" in sources[i].lower()]
    return {NUMBERS_KIND: numbers, PAIRS_KIND: [i for i in held_out if i not in numbers]}


@dataclass(frozen=True)
class NumberTranslation:
    """One held-out number in one test sentence, and what the model wrote for it."""

    sentence: int  # index of the sentence in the split
    value: int  # 72
    source: str  # "Seventy-two", as the English sentence spells it
    sentence_initial: bool  # the number is the sentence's first word
    capitalised: bool  # the source's tens token is "Seventy", not "seventy"
    reference: str  # "Zwei und siebzig"
    hypothesis: str  # what the model wrote in its place ("" if the numbers do not pair up)
    kind: str  # one of KINDS


def english_numbers(tokens: Sequence[str]) -> list[tuple[int, int, int]]:
    """Every number in English tokens, as (value, first token, end token): "seventy - two"."""
    numbers, i = [], 0
    while i < len(tokens):
        word = tokens[i].lower()
        if word in _ENGLISH_TENS:
            hyphenated = i + 2 < len(tokens) and tokens[i + 1] == "-"
            if hyphenated and tokens[i + 2].lower() in _ENGLISH_UNITS:
                units = _ENGLISH_UNITS[tokens[i + 2].lower()]
                numbers.append((_ENGLISH_TENS[word] + units, i, i + 3))
                i += 3
                continue
            numbers.append((_ENGLISH_TENS[word], i, i + 1))
        elif word in _ENGLISH_UNITS and word != "one":  # "one" only ever follows a hyphen
            numbers.append((_ENGLISH_UNITS[word], i, i + 1))
        i += 1
    return numbers


def german_numbers(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Every number in German tokens, as (first token, end token), whatever its words say.

    A number is a run of number words joined by "und" ("zwei und siebzig", or a wrong
    "siebzig und zwei"). "ein" counts only before "und": alone it is the article.
    """
    spans, i = [], 0
    while i < len(tokens):
        if not _starts_number(tokens, i):
            i += 1
            continue
        end = i + 1
        while end + 1 < len(tokens) and tokens[end] == "und" and _is_number_word(tokens[end + 1]):
            end += 2
        spans.append((i, end))
        i = end
    return spans


def _is_number_word(token: str) -> bool:
    """A German units, teens or tens word, at the start of a sentence or not."""
    return token.lower() in _GERMAN_NUMBER_WORDS or token.lower() == "ein"


def _starts_number(tokens: Sequence[str], i: int) -> bool:
    """A number word starts a number; "ein" only when "und" follows (ein und zwanzig)."""
    if tokens[i].lower() == "ein":
        return i + 1 < len(tokens) and tokens[i + 1] == "und"
    return tokens[i].lower() in _GERMAN_NUMBER_WORDS


def classify(reference: Sequence[str], hypothesis: Sequence[str]) -> str:
    """Name what the hypothesis did to a units-first number like ["Zwei", "und", "siebzig"]."""
    if list(hypothesis) == list(reference):
        return RIGHT
    ref, hyp = [t.lower() for t in reference], [t.lower() for t in hypothesis]
    if hyp == ref:
        return CASE_ONLY
    if len(ref) != 3 or len(hyp) != 3 or hyp[1] != "und":
        return OTHER
    units, tens = ref[0], ref[2]
    if hyp[0] == units and hyp[2] != tens and hyp[2] in _GERMAN_TENS:
        return TENS_SWAPPED
    if hyp[2] == tens and hyp[0] != units and hyp[0] in _GERMAN_UNITS:
        return UNITS_WRONG
    if hyp[0] in _GERMAN_TENS and hyp[2] in _GERMAN_UNITS:  # "siebzig und zwei"
        return ENGLISH_ORDER
    return OTHER


def number_translations(
    sources: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    hypotheses: Sequence[Sequence[str]],
    values: range = range(71, 80),
) -> list[NumberTranslation]:
    """Every number in `values` across the sentences, each with its kind of outcome.

    Sources, references and hypotheses are token lists (`toolkit.text.tokens.tokenize`). A
    hypothesis that holds fewer or more numbers than its reference cannot be paired up by
    order, so each held-out number in it counts as DROPPED_OR_ADDED, not as a guess.
    """
    found = []
    for index, (src, ref, hyp) in enumerate(zip(sources, references, hypotheses, strict=True)):
        english, german, written = english_numbers(src), german_numbers(ref), german_numbers(hyp)
        if len(english) != len(german):
            raise ValueError(f"sentence {index}: {len(english)} English numbers but "
                             f"{len(german)} in the reference; is it from this corpus?")
        aligned = len(written) == len(german)
        for k, (value, start, end) in enumerate(english):
            if value not in values:
                continue
            ref_span = list(ref[german[k][0]:german[k][1]])
            hyp_span = list(hyp[written[k][0]:written[k][1]]) if aligned else []
            found.append(NumberTranslation(
                sentence=index, value=value, source="".join(src[start:end]),
                sentence_initial=start == 0, capitalised=src[start][0].isupper(),
                reference=" ".join(ref_span), hypothesis=" ".join(hyp_span),
                kind=classify(ref_span, hyp_span) if aligned else DROPPED_OR_ADDED,
            ))
    return found
