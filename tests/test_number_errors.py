"""The number-error classifier on hand-made translations, and on the whole test split."""

import pytest

from toolkit.scoring.number_errors import (
    CASE_ONLY,
    DROPPED_OR_ADDED,
    ENGLISH_ORDER,
    OTHER,
    RIGHT,
    TENS_SWAPPED,
    UNITS_WRONG,
    english_numbers,
    german_numbers,
    number_translations,
)
from toolkit.text.corpus import load_corpus
from toolkit.text.grammar import clause, render, sentence
from toolkit.text.lexicon import german_number
from toolkit.text.tokens import tokenize


def outcomes(english: str, german: str, model: str) -> list:
    """Classify the held-out numbers of one hand-made translation."""
    return number_translations([tokenize(english)], [tokenize(german)], [tokenize(model)])


# "Seventy-two dogs sleep." is "Zwei und siebzig Hunde schlafen."; each line is one mistake.
@pytest.mark.parametrize(("model", "kind"), [
    ("Zwei und siebzig Hunde schlafen.", RIGHT),
    ("Zwei und siebzig Hunde schlafen nicht.", RIGHT),  # wrong sentence, right number
    ("Zwei und fünfzig Hunde schlafen.", TENS_SWAPPED),
    ("Drei und siebzig Hunde schlafen.", UNITS_WRONG),
    ("Siebzig und zwei Hunde schlafen.", ENGLISH_ORDER),
    ("Siebzig und drei Hunde schlafen.", ENGLISH_ORDER),  # the order copied, a unit wrong
    ("Siebzig und dreißig Hunde schlafen.", OTHER),  # two tens words: no order to copy
    ("zwei und siebzig Hunde schlafen.", CASE_ONLY),
    ("Die Hunde schlafen.", DROPPED_OR_ADDED),
    ("Siebzig Hunde schlafen.", OTHER),
    ("Drei und fünfzig Hunde schlafen.", OTHER),
])
def test_each_kind_of_mistake_on_a_sentence_initial_number(model, kind):
    [found] = outcomes("Seventy-two dogs sleep.", "Zwei und siebzig Hunde schlafen.", model)
    assert found.kind == kind
    assert (found.value, found.source, found.reference) == (72, "Seventy-two", "Zwei und siebzig")
    assert found.sentence_initial and found.capitalised


def test_a_mid_sentence_number_is_lower_case_and_not_initial():
    [found] = outcomes("The kings wait behind seventy-two children.",
                       "Die Könige warten hinter zwei und siebzig Kindern.",
                       "Die Könige warten hinter zwei und fünfzig Kindern.")
    assert (found.sentence_initial, found.capitalised) == (False, False)
    assert (found.kind, found.hypothesis) == (TENS_SWAPPED, "zwei und fünfzig")


def test_numbers_pair_up_by_order_and_only_held_out_ones_are_reported():
    # 71 and 75 are held out, 20 is not: a mistake in the third number is the third's alone.
    english, german = render(sentence(clause("71 men", "give", obj="75 balls",
                                             indirect="20 children")))
    assert german == "Ein und siebzig Männer geben zwanzig Kindern fünf und siebzig Bälle."
    model = german.replace("fünf und siebzig", "fünf und sechzig")
    found = outcomes(english, german, model)
    assert [(f.value, f.kind) for f in found] == [(71, RIGHT), (75, TENS_SWAPPED)]
    assert [f.sentence_initial for f in found] == [True, False]


def test_the_article_ein_is_not_a_number():
    tokens = tokenize("Ein Hund sieht ein und zwanzig Katzen und zwei Bälle.")
    assert german_numbers(tokens) == [(3, 6), (8, 9)]


def test_every_number_of_the_test_split_pairs_up_with_its_german():
    rows = load_corpus()["test"]["translation"]
    sources = [tokenize(row["en"]) for row in rows]
    references = [tokenize(row["de"]) for row in rows]
    for src, ref in zip(sources, references, strict=True):
        values = [value for value, _, _ in english_numbers(src)]
        spans = [" ".join(ref[start:end]).lower() for start, end in german_numbers(ref)]
        assert spans == [german_number(value).lower() for value in values], (src, ref)
    found = number_translations(sources, references, references)
    assert found and {f.kind for f in found} == {RIGHT}
    assert {f.value for f in found} == set(range(71, 80))
    assert all(f.sentence_initial == f.capitalised for f in found)  # only first words are capitals
