"""The grammar against hand-written translations, plus properties of random sentences."""

import random

import pytest

from toolkit.text.grammar import (
    PHENOMENA,
    clause,
    np,
    phenomena,
    render,
    sentence,
)
from toolkit.text.random_sentences import MAX_TOKENS, MIN_TOKENS, random_sentence
from toolkit.text.sentences import (
    Clause,
    NounPhrase,
    clauses,
    noun_phrases,
)
from toolkit.text.tokens import tokenize

# Written by hand, as a native speaker would say them, before looking at the generator.
# If the generator disagrees, the generator is wrong.
GOLD = [
    # Case: the three genders in the nominative, accusative and dative.
    (
        clause("the dog", "sees", obj="the cat"),
        "The dog sees the cat.",
        "Der Hund sieht die Katze.",
    ),
    (
        clause("the cat", "sees", obj="the dog"),
        "The cat sees the dog.",
        "Die Katze sieht den Hund.",
    ),
    (
        clause("the child", "finds", obj="a ball"),
        "The child finds a ball.",
        "Das Kind findet einen Ball.",
    ),
    (
        clause("a woman", "carries", obj="the book"),
        "A woman carries the book.",
        "Eine Frau trägt das Buch.",
    ),
    (
        clause("the mouse", "hears", obj="the teacher"),
        "The mouse hears the teacher.",
        "Die Maus hört den Lehrer.",
    ),
    (
        clause("the man", "gives", indirect="the child", obj="an apple"),
        "The man gives the child an apple.",
        "Der Mann gibt dem Kind einen Apfel.",
    ),
    (
        clause("the girl", "shows", indirect="the woman", obj="the bag"),
        "The girl shows the woman the bag.",
        "Das Mädchen zeigt der Frau die Tasche.",
    ),
    (
        clause("a cat", "brings", indirect="a dog", obj="an egg"),
        "A cat brings a dog an egg.",
        "Eine Katze bringt einem Hund ein Ei.",
    ),
    (
        clause("the horse", "waits", prep="next to the car"),
        "The horse waits next to the car.",
        "Das Pferd wartet neben dem Auto.",
    ),
    (
        clause("the teacher", "plays", prep="with a mouse"),
        "The teacher plays with a mouse.",
        "Der Lehrer spielt mit einer Maus.",
    ),
    # Adjectives: weak after der/die/das, mixed after ein/kein, strong after a number.
    (clause("the big dog", "sleeps"), "The big dog sleeps.", "Der große Hund schläft."),
    (clause("a big dog", "sleeps"), "A big dog sleeps.", "Ein großer Hund schläft."),
    (clause("a small child", "laughs"), "A small child laughs.", "Ein kleines Kind lacht."),
    (clause("the tired cat", "sleeps"), "The tired cat sleeps.", "Die müde Katze schläft."),
    (clause("a tired man", "waits"), "A tired man waits.", "Ein müder Mann wartet."),
    (clause("2 tired dogs", "sleep"), "Two tired dogs sleep.", "Zwei müde Hunde schlafen."),
    (
        clause("the cat", "sees", obj="the big dog"),
        "The cat sees the big dog.",
        "Die Katze sieht den großen Hund.",
    ),
    (
        clause("the man", "finds", obj="a red ball"),
        "The man finds a red ball.",
        "Der Mann findet einen roten Ball.",
    ),
    (
        clause("the child", "carries", obj="a small book"),
        "The child carries a small book.",
        "Das Kind trägt ein kleines Buch.",
    ),
    (
        clause("the woman", "sees", obj="a tired horse"),
        "The woman sees a tired horse.",
        "Die Frau sieht ein müdes Pferd.",
    ),
    (
        clause("an old dog", "hears", obj="the old man"),
        "An old dog hears the old man.",
        "Ein alter Hund hört den alten Mann.",
    ),
    (
        clause("the old woman", "sings", prep="with the young girl"),
        "The old woman sings with the young girl.",
        "Die alte Frau singt mit dem jungen Mädchen.",
    ),
    (
        clause("the dog", "plays", prep="with the tired children"),
        "The dog plays with the tired children.",
        "Der Hund spielt mit den müden Kindern.",
    ),
    (
        clause("the girl", "gives", indirect="3 hungry horses", obj="an apple"),
        "The girl gives three hungry horses an apple.",
        "Das Mädchen gibt drei hungrigen Pferden einen Apfel.",
    ),
    (
        clause("the black cats", "look for", obj="a white mouse"),
        "The black cats look for a white mouse.",
        "Die schwarzen Katzen suchen eine weiße Maus.",
    ),
    (
        clause("the woman", "shows", indirect="an old man", obj="the red car"),
        "The woman shows an old man the red car.",
        "Die Frau zeigt einem alten Mann das rote Auto.",
    ),
    # Plurals, verb agreement, and the dative plural -n (not after -n or -s).
    (clause("the dogs", "sleep"), "The dogs sleep.", "Die Hunde schlafen."),
    (
        clause("the men", "see", obj="the women"),
        "The men see the women.",
        "Die Männer sehen die Frauen.",
    ),
    (
        clause("the child", "likes", obj="the horses"),
        "The child likes the horses.",
        "Das Kind mag die Pferde.",
    ),
    (
        clause("the children", "like", obj="the dog"),
        "The children like the dog.",
        "Die Kinder mögen den Hund.",
    ),
    (
        clause("the children", "run", prep="behind the mice"),
        "The children run behind the mice.",
        "Die Kinder laufen hinter den Mäusen.",
    ),
    (
        clause("the women", "wait", prep="next to the cars"),
        "The women wait next to the cars.",
        "Die Frauen warten neben den Autos.",
    ),
    (
        clause("the cat", "plays", prep="with the girls"),
        "The cat plays with the girls.",
        "Die Katze spielt mit den Mädchen.",
    ),
    (
        clause("the teachers", "give", indirect="the birds", obj="the keys"),
        "The teachers give the birds the keys.",
        "Die Lehrer geben den Vögeln die Schlüssel.",
    ),
    (
        clause("the man", "gives", indirect="the babies", obj="an apple"),
        "The man gives the babies an apple.",
        "Der Mann gibt den Babys einen Apfel.",
    ),
    (
        clause("the king", "shows", indirect="the queens", obj="a flower"),
        "The king shows the queens a flower.",
        "Der König zeigt den Königinnen eine Blume.",
    ),
    # Negation: kein- for an indefinite object, otherwise nicht, placed by the clause.
    (
        clause("the dog", "sees", obj="a cat", negated=True),
        "The dog does not see a cat.",
        "Der Hund sieht keine Katze.",
    ),
    (
        clause("the dog", "sees", obj="the cat", negated=True),
        "The dog does not see the cat.",
        "Der Hund sieht die Katze nicht.",
    ),
    (
        clause("the dog", "sleeps", negated=True),
        "The dog does not sleep.",
        "Der Hund schläft nicht.",
    ),
    (
        clause("the children", "laugh", negated=True),
        "The children do not laugh.",
        "Die Kinder lachen nicht.",
    ),
    (
        clause("the dog", "plays", prep="with the cat", negated=True),
        "The dog does not play with the cat.",
        "Der Hund spielt nicht mit der Katze.",
    ),
    (
        clause("the man", "finds", obj="a key", negated=True),
        "The man does not find a key.",
        "Der Mann findet keinen Schlüssel.",
    ),
    (
        clause("the girl", "carries", obj="a red book", negated=True),
        "The girl does not carry a red book.",
        "Das Mädchen trägt kein rotes Buch.",
    ),
    (
        clause("the man", "gives", indirect="the child", obj="a big apple", negated=True),
        "The man does not give the child a big apple.",
        "Der Mann gibt dem Kind keinen großen Apfel.",
    ),
    (
        clause("the women", "give", indirect="the dog", obj="the ball", negated=True),
        "The women do not give the dog the ball.",
        "Die Frauen geben dem Hund den Ball nicht.",
    ),
]

# Sentences: an adverb first (inversion), or a subordinate clause with the verb last.
SENTENCE_GOLD = [
    (
        sentence(clause("the dog", "sees", obj="the cat"), adverb="today"),
        "Today the dog sees the cat.",
        "Heute sieht der Hund die Katze.",
    ),
    (
        sentence(clause("the children", "sing"), adverb="now"),
        "Now the children sing.",
        "Jetzt singen die Kinder.",
    ),
    (
        sentence(clause("the man", "finds", obj="the key", negated=True), adverb="often"),
        "Often the man does not find the key.",
        "Oft findet der Mann den Schlüssel nicht.",
    ),
    (
        sentence(clause("a tired horse", "sleeps", prep="next to the car"), adverb="sometimes"),
        "Sometimes a tired horse sleeps next to the car.",
        "Manchmal schläft ein müdes Pferd neben dem Auto.",
    ),
    (
        sentence(clause("the woman", "gives", indirect="the cat", obj="an egg"), adverb="here"),
        "Here the woman gives the cat an egg.",
        "Hier gibt die Frau der Katze ein Ei.",
    ),
    (
        sentence(clause("21 dogs", "wait"), adverb="today"),
        "Today twenty-one dogs wait.",
        "Heute warten ein und zwanzig Hunde.",
    ),
    (
        sentence(
            clause("the man", "laughs"),
            conjunction="because",
            sub=clause("the dog", "sees", obj="the cat"),
        ),
        "The man laughs because the dog sees the cat.",
        "Der Mann lacht, weil der Hund die Katze sieht.",
    ),
    (
        sentence(
            clause("the dog", "runs"),
            conjunction="because",
            sub=clause("the man", "sees", obj="the cat", negated=True),
        ),
        "The dog runs because the man does not see the cat.",
        "Der Hund läuft, weil der Mann die Katze nicht sieht.",
    ),
    (
        sentence(
            clause("the cat", "sleeps"),
            conjunction="because",
            sub=clause("the dog", "sees", obj="a mouse", negated=True),
        ),
        "The cat sleeps because the dog does not see a mouse.",
        "Die Katze schläft, weil der Hund keine Maus sieht.",
    ),
    (
        sentence(
            clause("the woman", "sings"),
            adverb="today",
            conjunction="because",
            sub=clause("the man", "plays", prep="with the dog", negated=True),
        ),
        "Today the woman sings because the man does not play with the dog.",
        "Heute singt die Frau, weil der Mann nicht mit dem Hund spielt.",
    ),
    (
        sentence(
            clause("the dog", "sleeps"), conjunction="when", sub=clause("the children", "sing")
        ),
        "The dog sleeps when the children sing.",
        "Der Hund schläft, wenn die Kinder singen.",
    ),
    (
        sentence(
            clause("the woman", "says"),
            conjunction="that",
            sub=clause("the dog", "sleeps", negated=True),
        ),
        "The woman says that the dog does not sleep.",
        "Die Frau sagt, dass der Hund nicht schläft.",
    ),
    (
        sentence(
            clause("the man", "knows"),
            conjunction="that",
            sub=clause("the children", "play", prep="with the ball"),
        ),
        "The man knows that the children play with the ball.",
        "Der Mann weiß, dass die Kinder mit dem Ball spielen.",
    ),
    (
        sentence(
            clause("the girl", "believes"),
            conjunction="that",
            sub=clause("the teacher", "gives", indirect="the child", obj="a book"),
        ),
        "The girl believes that the teacher gives the child a book.",
        "Das Mädchen glaubt, dass der Lehrer dem Kind ein Buch gibt.",
    ),
    (
        sentence(
            clause("the teacher", "says", negated=True),
            conjunction="that",
            sub=clause("the dog", "sleeps"),
        ),
        "The teacher does not say that the dog sleeps.",
        "Der Lehrer sagt nicht, dass der Hund schläft.",
    ),
]

# Numbers: units before tens in German, 16 and 17 shortened, 30 with ß, 77 not shortened.
NUMBER_GOLD = [
    (clause("21 dogs", "sleep"), "Twenty-one dogs sleep.", "Ein und zwanzig Hunde schlafen."),
    (
        clause("the cat", "sees", obj="16 birds"),
        "The cat sees sixteen birds.",
        "Die Katze sieht sechzehn Vögel.",
    ),
    (
        clause("17 children", "play", prep="with 30 balls"),
        "Seventeen children play with thirty balls.",
        "Siebzehn Kinder spielen mit dreißig Bällen.",
    ),
    (
        clause("the man", "gives", indirect="72 horses", obj="an apple"),
        "The man gives seventy-two horses an apple.",
        "Der Mann gibt zwei und siebzig Pferden einen Apfel.",
    ),
    (
        clause("99 mice", "look for", obj="the cat"),
        "Ninety-nine mice look for the cat.",
        "Neun und neunzig Mäuse suchen die Katze.",
    ),
    (
        clause("2 big dogs", "see", obj="11 small cats"),
        "Two big dogs see eleven small cats.",
        "Zwei große Hunde sehen elf kleine Katzen.",
    ),
    (
        clause("12 women", "wait", prep="next to 67 cars"),
        "Twelve women wait next to sixty-seven cars.",
        "Zwölf Frauen warten neben sieben und sechzig Autos.",
    ),
    (
        clause("77 cows", "sing"),
        "Seventy-seven cows sing.",
        "Sieben und siebzig Kühe singen.",
    ),
    # English a/an and irregular plurals.
    (clause("an old dog", "sleeps"), "An old dog sleeps.", "Ein alter Hund schläft."),
    (
        clause("the child", "finds", obj="an apple"),
        "The child finds an apple.",
        "Das Kind findet einen Apfel.",
    ),
    (
        clause("the mouse", "looks for", obj="an egg"),
        "The mouse looks for an egg.",
        "Die Maus sucht ein Ei.",
    ),
    (
        clause("the mice", "see", obj="the men"),
        "The mice see the men.",
        "Die Mäuse sehen die Männer.",
    ),
    (
        clause("the women", "give", indirect="the children", obj="the apples"),
        "The women give the children the apples.",
        "Die Frauen geben den Kindern die Äpfel.",
    ),
]


@pytest.mark.parametrize(("structure", "english", "german"), GOLD + NUMBER_GOLD)
def test_clause_renders_its_gold_translation(structure, english, german):
    assert render(sentence(structure)) == (english, german)


@pytest.mark.parametrize(("structure", "english", "german"), SENTENCE_GOLD)
def test_sentence_renders_its_gold_translation(structure, english, german):
    assert render(structure) == (english, german)


def test_gold_pairs_cover_every_phenomenon_at_least_five_times():
    structures = [sentence(s) for s, _, _ in GOLD + NUMBER_GOLD]
    structures += [s for s, _, _ in SENTENCE_GOLD]
    for tag in PHENOMENA:
        assert sum(tag in phenomena(s) for s in structures) >= 5, tag


@pytest.mark.parametrize(
    ("structure", "tags"),
    [
        (sentence(clause("the dog", "sleeps")), []),
        (sentence(clause("the dog", "sees", obj="the cat")), []),  # die: no visible case
        (sentence(clause("the cat", "sees", obj="the dog")), ["case"]),  # den
        (sentence(clause("the children", "see", obj="the dogs")), ["plural"]),  # die Hunde
        (sentence(clause("the dog", "plays", prep="with the cat")), ["case"]),  # dative
        (
            sentence(
                clause("21 tired dogs", "sleep", negated=True),
                adverb="today",
                conjunction="because",
                sub=clause("the cat", "sings"),
            ),
            ["adjective", "plural", "negation", "inversion", "subordinate", "number"],
        ),
    ],
)
def test_phenomena_tags(structure, tags):
    assert phenomena(structure) == tags


@pytest.mark.parametrize(
    "build",
    [
        lambda: np("a dogs"),  # "a" is never plural
        lambda: np("21 dog"),  # a number needs the plural
        lambda: np("the purple dog"),  # not in the lexicon
        lambda: NounPhrase(np("the dog").noun, 100),  # numbers stop at 99
        lambda: clause("the dog", "sleeps", obj="the cat"),  # intransitive
        lambda: clause("the dog", "sees"),  # transitive without an object
        lambda: clause("the dog", "sees", obj="2 cats", negated=True),  # negation rule
        lambda: clause("the man", "gives", indirect="a child", obj="the ball", negated=True),
        lambda: sentence(clause("the man", "says")),  # saying without "that"
        lambda: sentence(
            clause("the dog", "sleeps"), conjunction="that", sub=clause("a cat", "runs")
        ),
    ],
)
def test_builders_reject_what_the_grammar_cannot_say(build):
    with pytest.raises(ValueError):
        build()


@pytest.fixture(scope="module")
def random_sentences():
    rng = random.Random(0)
    return [random_sentence(rng) for _ in range(3000)]


def test_random_sentences_are_3_to_20_tokens_on_both_sides(random_sentences):
    for structure in random_sentences:
        for text in render(structure):
            assert MIN_TOKENS <= len(tokenize(text)) <= MAX_TOKENS, text


def test_random_sentences_are_reproducible():
    first, second = random.Random(7), random.Random(7)
    assert [random_sentence(first) for _ in range(50)] == [
        random_sentence(second) for _ in range(50)
    ]


def _finite_verb(part: Clause) -> str:
    return part.verb.german_3pl if part.subject.is_plural else part.verb.german_3sg


def test_german_subordinate_clause_ends_with_its_verb(random_sentences):
    for structure in random_sentences:
        if structure.sub is not None:
            german = render(structure)[1]
            assert tokenize(german)[-2] == _finite_verb(structure.sub), german


def test_german_verb_comes_right_after_a_leading_adverb(random_sentences):
    for structure in random_sentences:
        if structure.adverb is not None:
            german = render(structure)[1]
            assert tokenize(german)[1] == _finite_verb(structure.main), german


def test_each_negated_clause_has_exactly_one_nicht_or_kein(random_sentences):
    negators = {"nicht", "kein", "keine", "keinen", "keinem", "keiner"}
    for structure in random_sentences:
        german = render(structure)[1]
        negations = sum(token in negators for token in tokenize(german))
        assert negations == sum(part.negated for part in clauses(structure)), german


def test_random_adjectives_fit_their_nouns(random_sentences):
    for structure in random_sentences:
        for phrase in noun_phrases(structure):
            if phrase.adjective is not None:
                assert phrase.noun.kind in phrase.adjective.fits, render(structure)[0]


def test_random_sentences_show_every_phenomenon(random_sentences):
    seen = {tag for structure in random_sentences for tag in phenomena(structure)}
    assert seen == set(PHENOMENA)


def test_the_grammar_itself_is_unambiguous(random_sentences):
    """On an unfiltered stream: the corpus drops repeats, which would hide an ambiguity."""
    german_for: dict[str, set[str]] = {}
    english_for: dict[str, set[str]] = {}
    for structure in random_sentences:
        english, german = render(structure)
        german_for.setdefault(english, set()).add(german)
        english_for.setdefault(german, set()).add(english)
    assert all(len(german) == 1 for german in german_for.values())
    assert all(len(english) == 1 for english in english_for.values())
    assert len(german_for) < len(random_sentences)  # repeats occurred, so this was tested
