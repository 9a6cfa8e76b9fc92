"""Word-level tokens never cut a character as a reader sees it, in any script, and lose
nothing but whitespace."""

import unicodedata

import pytest
import regex

from toolkit.tokens import detokenize, tokenize

# One or more sentences per script or case the word level must survive, written here.
SAMPLE = {
    "German": "Das Mädchen läuft schnell über die Straße.",
    "German, decomposed": unicodedata.normalize("NFD", "Das Mädchen läuft über die Straße."),
    "French": "L'élève n'a pas vu l'herbe, n'est-ce pas ?",
    "Russian": "Съешь же ещё этих мягких французских булок.",
    "Greek": "Η γρήγορη καφέ αλεπού πηδά πάνω από τον σκύλο.",
    "Arabic": "العَرَبِيَّة لغة جميلة، أليس كذلك؟",
    "Hebrew": "עִבְרִית היא שפה שמית.",
    "Hindi": "हिन्दी भारत की एक भाषा है।",
    "Thai": "ภาษาไทย ง่ายนิดเดียว",
    "Chinese": "我们今天去公园散步。",
    "Japanese": "日本語の文章です。ありがとう！",
    "Korean": "한국어 문장입니다. 감사합니다!",
    "emoji": "Great job 👍🏽 🇩🇪 👨‍👩‍👧!",
    "quotes": "\"Yes,\" she said, «oui» and „ja“.",
    "apostrophes": "I don't know; it's Tom's.",
    "decimals": "It costs 3.5% more, about 1,250.75 euros.",
    "URL": "See https://example.org/a-b?x=1 for more.",
}


def boundaries(text: str, pieces: list[str]) -> set[int]:
    """Where each piece ends, as positions in the text it was found in (whitespace skipped)."""
    ends, position = set(), 0
    for piece in pieces:
        position = text.index(piece, position) + len(piece)
        ends.add(position)
    return ends


@pytest.mark.parametrize("name", SAMPLE)
def test_no_token_ends_inside_a_grapheme(name):
    text = unicodedata.normalize("NFC", SAMPLE[name])
    graphemes = boundaries(text, regex.findall(r"\X", text))
    assert boundaries(text, tokenize(SAMPLE[name])) <= graphemes


@pytest.mark.parametrize("name", SAMPLE)
def test_tokens_lose_nothing_but_whitespace(name):
    text = unicodedata.normalize("NFC", SAMPLE[name])
    assert "".join(tokenize(SAMPLE[name])) == "".join(text.split())


def test_a_decomposed_word_is_the_composed_word():
    assert tokenize(SAMPLE["German, decomposed"]) == tokenize(
        "Das Mädchen läuft über die Straße.")
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # marks stay in their words


def test_the_built_in_corpus_round_trips_exactly():
    """The course's own sentences come back as written, so its BLEU loses nothing."""
    for text in ["Der Hund sieht die Katze.", "Zwei und siebzig Hunde schlafen, weil es regnet.",
                 "Oft zeigt der Mann dem Kind die Lampe, wenn das Mädchen schläft."]:
        assert detokenize(tokenize(text)) == text
