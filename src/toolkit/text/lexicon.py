"""The grammar's words: each with every form spelled out and its one German translation.

Nouns, adjectives and verbs carry their irregular forms (Männer, sieht, mag) rather than
rules that could get one wrong; the closed classes (prepositions, adverbs, conjunctions)
are single words; numbers 2..99 are spelled out in both languages. `toolkit.text.grammar`
builds sentences from these words.
"""

from dataclasses import dataclass
from typing import Literal

Gender = Literal["m", "f", "n"]
VerbKind = Literal["intransitive", "transitive", "ditransitive", "saying"]
NounClass = Literal["person", "animal", "thing"]

@dataclass(frozen=True)
class Noun:
    """A noun with both plurals spelled out, so no spelling rule can get one wrong."""

    english: str
    english_plural: str
    german: str
    german_plural: str
    gender: Gender
    kind: NounClass

    @property
    def animate(self) -> bool:
        """Only people and animals act, so only they are subjects or receive things."""
        return self.kind != "thing"


@dataclass(frozen=True)
class Adjective:
    """An adjective; the German is the stem that the endings attach to."""

    english: str
    german: str
    fits: tuple[NounClass, ...] = ("person", "animal", "thing")  # "tired" fits no car


@dataclass(frozen=True)
class Verb:
    """A verb with all four forms spelled out, since German stems change (sieht, mag)."""

    english: str  # the base form, used after "does not": "see", "look for"
    english_3sg: str  # "sees", "looks for"
    german_3sg: str  # "sieht"
    german_3pl: str  # "sehen"
    kind: VerbKind
    objects: NounClass | Literal["any", "animate"] = "any"  # what the direct object may be


@dataclass(frozen=True)
class Word:
    """A closed-class word (adverb, preposition, conjunction) with its one translation."""

    english: str
    german: str


NOUNS = (
    Noun("man", "men", "Mann", "Männer", "m", "person"),
    Noun("teacher", "teachers", "Lehrer", "Lehrer", "m", "person"),
    Noun("king", "kings", "König", "Könige", "m", "person"),
    Noun("woman", "women", "Frau", "Frauen", "f", "person"),
    Noun("queen", "queens", "Königin", "Königinnen", "f", "person"),
    Noun("child", "children", "Kind", "Kinder", "n", "person"),
    Noun("girl", "girls", "Mädchen", "Mädchen", "n", "person"),
    Noun("baby", "babies", "Baby", "Babys", "n", "person"),
    Noun("dog", "dogs", "Hund", "Hunde", "m", "animal"),
    Noun("bird", "birds", "Vogel", "Vögel", "m", "animal"),
    Noun("fox", "foxes", "Fuchs", "Füchse", "m", "animal"),
    Noun("cat", "cats", "Katze", "Katzen", "f", "animal"),
    Noun("mouse", "mice", "Maus", "Mäuse", "f", "animal"),
    Noun("cow", "cows", "Kuh", "Kühe", "f", "animal"),
    Noun("horse", "horses", "Pferd", "Pferde", "n", "animal"),
    Noun("pig", "pigs", "Schwein", "Schweine", "n", "animal"),
    Noun("ball", "balls", "Ball", "Bälle", "m", "thing"),
    Noun("apple", "apples", "Apfel", "Äpfel", "m", "thing"),
    Noun("key", "keys", "Schlüssel", "Schlüssel", "m", "thing"),
    Noun("hat", "hats", "Hut", "Hüte", "m", "thing"),
    Noun("umbrella", "umbrellas", "Regenschirm", "Regenschirme", "m", "thing"),
    Noun("bag", "bags", "Tasche", "Taschen", "f", "thing"),
    Noun("flower", "flowers", "Blume", "Blumen", "f", "thing"),
    Noun("lamp", "lamps", "Lampe", "Lampen", "f", "thing"),
    Noun("orange", "oranges", "Orange", "Orangen", "f", "thing"),
    Noun("car", "cars", "Auto", "Autos", "n", "thing"),
    Noun("book", "books", "Buch", "Bücher", "n", "thing"),
    Noun("egg", "eggs", "Ei", "Eier", "n", "thing"),
    Noun("bed", "beds", "Bett", "Betten", "n", "thing"),
)

# Colours describe animals and things only: "the white men" would be about people's skin.
_ALIVE: tuple[NounClass, ...] = ("person", "animal")
_NOT_PEOPLE: tuple[NounClass, ...] = ("animal", "thing")
ADJECTIVES = (
    Adjective("big", "groß"),
    Adjective("small", "klein"),
    Adjective("old", "alt"),
    Adjective("young", "jung", fits=_ALIVE),
    Adjective("tired", "müde", fits=_ALIVE),
    Adjective("hungry", "hungrig", fits=_ALIVE),
    Adjective("red", "rot", fits=_NOT_PEOPLE),
    Adjective("black", "schwarz", fits=_NOT_PEOPLE),
    Adjective("white", "weiß", fits=_NOT_PEOPLE),
)

VERBS = (
    Verb("sleep", "sleeps", "schläft", "schlafen", "intransitive"),
    Verb("run", "runs", "läuft", "laufen", "intransitive"),
    Verb("wait", "waits", "wartet", "warten", "intransitive"),
    Verb("laugh", "laughs", "lacht", "lachen", "intransitive"),
    Verb("play", "plays", "spielt", "spielen", "intransitive"),
    Verb("sing", "sings", "singt", "singen", "intransitive"),
    Verb("see", "sees", "sieht", "sehen", "transitive"),
    Verb("hear", "hears", "hört", "hören", "transitive", objects="animate"),
    Verb("find", "finds", "findet", "finden", "transitive"),
    Verb("look for", "looks for", "sucht", "suchen", "transitive"),
    Verb("like", "likes", "mag", "mögen", "transitive"),
    Verb("visit", "visits", "besucht", "besuchen", "transitive", objects="animate"),
    Verb("carry", "carries", "trägt", "tragen", "transitive", objects="thing"),
    Verb("wash", "washes", "wäscht", "waschen", "transitive", objects="thing"),
    Verb("give", "gives", "gibt", "geben", "ditransitive", objects="thing"),
    Verb("show", "shows", "zeigt", "zeigen", "ditransitive", objects="thing"),
    Verb("bring", "brings", "bringt", "bringen", "ditransitive", objects="thing"),
    Verb("say", "says", "sagt", "sagen", "saying"),
    Verb("know", "knows", "weiß", "wissen", "saying"),
    Verb("believe", "believes", "glaubt", "glauben", "saying"),
)

# All three prepositions take the dative here: "mit" always, "neben" and "hinter" because
# they name where something is, not where it goes.
PREPOSITIONS = (Word("with", "mit"), Word("next to", "neben"), Word("behind", "hinter"))
ADVERBS = (
    Word("today", "heute"),
    Word("now", "jetzt"),
    Word("often", "oft"),
    Word("sometimes", "manchmal"),
    Word("here", "hier"),
)
# "that" follows a verb of saying; "when" is "wenn", since the grammar has no past tense.
CONJUNCTIONS = (Word("because", "weil"), Word("when", "wenn"), Word("that", "dass"))

CONJUNCTIONS_BY_ENGLISH = {conjunction.english: conjunction for conjunction in CONJUNCTIONS}

_ENGLISH_SMALL_NUMBERS = {
    1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
    8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen",
    14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen", 18: "eighteen",
    19: "nineteen",
}  # fmt: skip
_ENGLISH_TENS = {
    2: "twenty", 3: "thirty", 4: "forty", 5: "fifty",
    6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety",
}  # fmt: skip
# 1 is only ever a unit inside a larger number, where German writes "ein" (einundzwanzig).
_GERMAN_SMALL_NUMBERS = {
    1: "ein", 2: "zwei", 3: "drei", 4: "vier", 5: "fünf", 6: "sechs", 7: "sieben",
    8: "acht", 9: "neun", 10: "zehn", 11: "elf", 12: "zwölf", 13: "dreizehn",
    14: "vierzehn", 15: "fünfzehn", 16: "sechzehn", 17: "siebzehn", 18: "achtzehn",
    19: "neunzehn",
}  # fmt: skip
_GERMAN_TENS = {
    2: "zwanzig", 3: "dreißig", 4: "vierzig", 5: "fünfzig",
    6: "sechzig", 7: "siebzig", 8: "achtzig", 9: "neunzig",
}  # fmt: skip


def english_number(number: int) -> str:
    """Spell a number the English way, tens first: 72 is "seventy-two"."""
    if number < 20:
        return _ENGLISH_SMALL_NUMBERS[number]
    tens, units = divmod(number, 10)
    if units == 0:
        return _ENGLISH_TENS[tens]
    return f"{_ENGLISH_TENS[tens]}-{_ENGLISH_SMALL_NUMBERS[units]}"


def german_number(number: int) -> str:
    """Spell a number the German way, units first: 72 is "zwei und siebzig" (pre-segmented)."""
    if number < 20:
        return _GERMAN_SMALL_NUMBERS[number]
    tens, units = divmod(number, 10)
    if units == 0:
        return _GERMAN_TENS[tens]
    return f"{_GERMAN_SMALL_NUMBERS[units]} und {_GERMAN_TENS[tens]}"

