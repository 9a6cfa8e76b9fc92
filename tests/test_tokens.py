"""Word-level tokens never cut a character as a reader sees it, in any script, and give the
text back as written (whitespace runs as one space)."""

import unicodedata

import pytest
import regex
from multilingual import SAMPLE

from toolkit.batching.data import load_data
from toolkit.text.tokens import detokenize, token_text, tokenize


def boundaries(text: str, pieces: list[str]) -> set[int]:
    """Where each piece ends, as positions in the text it was found in (whitespace skipped)."""
    ends, position = set(), 0
    for piece in pieces:
        position = text.index(piece, position) + len(piece)
        ends.add(position)
    return ends


def as_written(text: str) -> str:
    """What every round trip must give back: the NFC text, each run of whitespace one space."""
    return " ".join(unicodedata.normalize("NFC", text).split())


@pytest.mark.parametrize("name", SAMPLE)
def test_no_token_ends_inside_a_grapheme(name):
    text = unicodedata.normalize("NFC", SAMPLE[name])
    # Graphemes as a reader sees them, whitespace never inside one (a prepended mark would
    # take the space after it into its cluster).
    graphemes = boundaries(text, [g for word in text.split() for g in regex.findall(r"\X", word)])
    assert boundaries(text, [token_text(t) for t in tokenize(SAMPLE[name])]) <= graphemes


@pytest.mark.parametrize("name", SAMPLE)
def test_text_comes_back_as_written(name):
    """French elisions, contractions, decimals, URLs, quotes, CJK and Hindi punctuation, and
    the marks themselves written as text."""
    text = SAMPLE[name]
    assert detokenize(tokenize(text)) == as_written(text)
    assert detokenize(tokenize("  " + text.replace(" ", " \t ") + "\n")) == as_written(text)


@pytest.mark.parametrize("text", ["\u0600  a", "a \u070f ", "\U000110bd\u2028👍", "a\x1cb"])
def test_no_token_holds_whitespace_and_tokenizing_twice_changes_nothing(text):
    """A cluster may run on into the space after a prepended mark; tokens never do."""
    tokens = tokenize(text)
    assert not any(character.isspace() for token in tokens for character in token)
    assert detokenize(tokens) == as_written(text)
    assert tokenize(detokenize(tokens)) == tokens


def test_a_decomposed_word_is_the_composed_word():
    assert tokenize(SAMPLE["German, decomposed"]) == tokenize(
        "Das Mädchen läuft über die Straße.")
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # marks stay in their words


@pytest.mark.parametrize(("text", "tokens"), [
    ("l'herbe, n'est-ce pas ?", ["l", "￭'￭", "herbe", ",", "n", "￭'￭", "est", "-", "ce", "pas",
                                  "▁?"]),
    ("It costs 3.5%.", ["It", "costs", "3", ".￭", "5", "￭%", "."]),
    ('"Yes," she said.', ['"￭', "Yes", ",", '￭"', "she", "said", "."]),
    ("twenty-one and twenty - one", ["twenty", "-", "one", "and", "twenty", "▁-▁", "one"]),
    ("a ▁ b￭", ["a", "▁▁▁", "b", "￭￭￭"]),  # the marks as text: always both sides marked
])
def test_only_what_differs_from_the_usual_spaces_is_marked(text, tokens):
    """Words are never marked, so "herbe" is the same token glued or not."""
    assert tokenize(text) == tokens
    assert detokenize(tokens) == text


def test_the_built_in_corpus_has_no_marks_and_round_trips_exactly():
    """The course's own sentences get the tokens they always had, so no number moves."""
    data = load_data()
    for text in data.sources("test") + data.reference_texts("test"):
        tokens = tokenize(text)
        assert [token_text(token) for token in tokens] == tokens, text
        assert detokenize(tokens) == text


@pytest.mark.parametrize("tokens", [["￭￭"], ["a", "￭"], ["▁", "▁"], ["￭x", "y￭", "z"], []])
def test_any_output_of_a_model_joins_without_error(tokens):
    """A model may write marked tokens anywhere; the join reads each one as it can."""
    assert isinstance(detokenize(tokens), str)
