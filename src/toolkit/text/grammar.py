"""A small English->German grammar: one structure, written out as two correct sentences.

Every sentence is built once, from frozen dataclasses (`Sentence`, `Clause`, `NounPhrase`),
and `render` writes it in both languages. So each German sentence is a correct translation
of its English one by construction, and `phenomena` can name the grammar a pair shows.

What the grammar covers: present tense, third person, no pronouns; the three genders in
the nominative, accusative and dative; adjective endings (weak after der/die/das, mixed
after ein/kein, strong after a number word); plurals and verb agreement; negation with
`nicht` or `kein`; an adverb first and the verb second ("Heute sieht der Hund die Katze");
subordinate clauses with the verb last (", weil der Hund die Katze sieht"); numbers 2..99.

Deliberate choices, so that each English sentence has exactly one German translation and
the German reads as a native speaker would write it:

- Numbers with units before tens are pre-segmented: 21 is "ein und zwanzig", not
  "einundzwanzig". Like compound splitting, this tokenisation convention lets a word-level
  model see the reordering against "twenty-one" word by word.
- No weak nouns (der Junge, der Student, der Bär): they add -n in every case but the
  nominative singular ("den Jungen", "dem Jungen"), a paradigm only a few words would show.
- No separable verbs (anrufen, "ruft ... an"), so the finite verb is always one word.
- Each English word has one German translation, fixed by the lexicon ("teacher" is always
  Lehrer, never Lehrerin), and no noun like "fish" whose plural looks like its singular.
- Negation rule: in a negated clause, every noun phrase after the verb takes "the", but the
  direct object may also take "a", which German negates with kein- ("sieht keine Katze").
  A negated number or indefinite dative ("sieht zwei Katzen nicht", "gibt einem Kind den
  Ball nicht") is grammatical but reads as a contrast, so `Clause` rejects it. The subject
  is free: "Zwei Hunde schlafen nicht" is plain German.
- English puts no comma before "because", "when" or "that"; German always puts one before
  a subordinate clause.
- "an" comes before a vowel letter, which is right for every word in this lexicon.
"""

import random
from dataclasses import dataclass
from typing import Literal, TypeVar

from toolkit.text.tokens import tokenize

Gender = Literal["m", "f", "n"]
Case = Literal["nom", "acc", "dat"]
VerbKind = Literal["intransitive", "transitive", "ditransitive", "saying"]
NounClass = Literal["person", "animal", "thing"]
Determiner = str | int  # "the", "a", or a number from 2 to 99

PHENOMENA = ("case", "adjective", "plural", "negation", "inversion", "subordinate", "number")


# --- The lexicon -----------------------------------------------------------------------


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


# --- The structure of a sentence ---------------------------------------------------------


@dataclass(frozen=True)
class NounPhrase:
    """A determiner, maybe an adjective, and a noun: "the big dog", "21 dogs"."""

    noun: Noun
    determiner: Determiner
    adjective: Adjective | None = None
    plural: bool = False  # "the dogs"; a number is always plural, "a" never

    def __post_init__(self) -> None:
        """Reject a phrase no sentence can hold, before it reaches `render`."""
        if isinstance(self.determiner, int):
            if not 2 <= self.determiner <= 99:
                raise ValueError(f"numbers run from 2 to 99, not {self.determiner}")
        elif self.determiner not in ("the", "a"):
            raise ValueError(f"a determiner is 'the', 'a' or a number, not {self.determiner!r}")
        if self.determiner == "a" and self.plural:
            raise ValueError("'a' counts one thing, so its phrase cannot be plural")

    @property
    def is_plural(self) -> bool:
        """A number word always counts more than one thing."""
        return self.plural or isinstance(self.determiner, int)


@dataclass(frozen=True)
class PrepPhrase:
    """A preposition and its noun phrase: "with the cat", "next to the car"."""

    preposition: Word
    phrase: NounPhrase


@dataclass(frozen=True)
class Clause:
    """A subject, a verb and the objects the verb takes; optionally negated."""

    subject: NounPhrase
    verb: Verb
    obj: NounPhrase | None = None
    indirect: NounPhrase | None = None
    prep: PrepPhrase | None = None
    negated: bool = False

    def __post_init__(self) -> None:
        """Check the objects against the verb, so every clause renders to sound German."""
        _check_objects(self)
        if self.negated:
            _check_negation(self)


@dataclass(frozen=True)
class Sentence:
    """A main clause, maybe an adverb in front, maybe a subordinate clause after it."""

    main: Clause
    adverb: Word | None = None
    conjunction: Word | None = None
    sub: Clause | None = None

    def __post_init__(self) -> None:
        """Check that a verb of saying gets its "that" clause and nothing else does."""
        if (self.conjunction is None) != (self.sub is None):
            raise ValueError("a conjunction and a subordinate clause come together")
        says = self.main.verb.kind == "saying"
        introduces_that = self.conjunction is not None and self.conjunction.english == "that"
        if says != introduces_that:
            raise ValueError("a verb of saying, and only one, is followed by a 'that' clause")
        if self.sub is not None and self.sub.verb.kind == "saying":
            raise ValueError("a verb of saying cannot head a subordinate clause")


def _check_objects(clause: Clause) -> None:
    """Each kind of verb takes a fixed set of objects, which keeps word order simple."""
    verb, kind = clause.verb.english, clause.verb.kind
    wants_object = kind in ("transitive", "ditransitive")
    if (clause.obj is not None) != wants_object:
        needs = "needs a direct object" if wants_object else "takes no direct object"
        raise ValueError(f"'{verb}' is {kind}, so it {needs}")
    wants_indirect = kind == "ditransitive"
    if (clause.indirect is not None) != wants_indirect:
        needs = "needs an indirect object" if wants_indirect else "takes no indirect object"
        raise ValueError(f"'{verb}' is {kind}, so it {needs}")
    if clause.prep is not None and kind != "intransitive":
        raise ValueError(f"'{verb}' is {kind}; only intransitive verbs take a preposition here")


def _check_negation(clause: Clause) -> None:
    """Allow negation only where German has one natural form (see the module docstring)."""
    if clause.obj is not None and isinstance(clause.obj.determiner, int):
        raise ValueError("a negated clause cannot have a number as its direct object")
    datives = [clause.indirect, clause.prep.phrase if clause.prep else None]
    if any(phrase is not None and phrase.determiner != "the" for phrase in datives):
        raise ValueError("in a negated clause the dative objects must take 'the'")


def clauses(sentence: Sentence) -> list[Clause]:
    """The main clause and, if there is one, the subordinate clause."""
    return [sentence.main] if sentence.sub is None else [sentence.main, sentence.sub]


def noun_phrases(sentence: Sentence) -> list[NounPhrase]:
    """Every noun phrase in the sentence, in both clauses, wherever it stands."""
    phrases = []
    for clause in clauses(sentence):
        phrases += [clause.subject, clause.indirect, clause.obj]
        phrases.append(clause.prep.phrase if clause.prep else None)
    return [phrase for phrase in phrases if phrase is not None]


# --- English -----------------------------------------------------------------------------


def _english_noun_phrase(phrase: NounPhrase) -> str:
    """Write the phrase in English, where only "a"/"an" depends on its neighbour."""
    noun = phrase.noun.english_plural if phrase.is_plural else phrase.noun.english
    words = [phrase.adjective.english, noun] if phrase.adjective else [noun]
    return " ".join([_english_determiner(phrase.determiner, words[0]), *words])


def _english_determiner(determiner: Determiner, next_word: str) -> str:
    """Spell out numbers, and say "an" when the next word starts with a vowel."""
    if isinstance(determiner, int):
        return english_number(determiner)
    if determiner == "a" and next_word[0] in "aeiou":
        return "an"
    return determiner


def _english_clause(clause: Clause) -> str:
    """English keeps subject, verb, objects in that order in every kind of clause."""
    plural = clause.subject.is_plural
    if clause.negated:
        verb = f"{'do' if plural else 'does'} not {clause.verb.english}"
    else:
        verb = clause.verb.english if plural else clause.verb.english_3sg
    words = [_english_noun_phrase(clause.subject), verb]
    words += [_english_noun_phrase(p) for p in (clause.indirect, clause.obj) if p is not None]
    if clause.prep is not None:
        words += [clause.prep.preposition.english, _english_noun_phrase(clause.prep.phrase)]
    return " ".join(words)


def _english_sentence(sentence: Sentence) -> str:
    """Adverb, main clause, then conjunction and subordinate clause, all in one order."""
    words = [] if sentence.adverb is None else [sentence.adverb.english]
    words.append(_english_clause(sentence.main))
    if sentence.conjunction is not None and sentence.sub is not None:
        words += [sentence.conjunction.english, _english_clause(sentence.sub)]
    return " ".join(words)


# --- German ------------------------------------------------------------------------------

# Articles and adjective endings, by case and then by gender, or "pl" for any plural.
_DEFINITE_ARTICLES = {
    "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
_INDEFINITE_ARTICLES = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}
# The article already shows case and gender after der/die/das, so the adjective's weak
# ending need not; "ein" leaves some forms unmarked, so the mixed ending marks them (-er,
# -es); a number word shows nothing, so the strong ending carries it all.
_ADJECTIVE_ENDINGS = {
    "weak": {
        "nom": {"m": "e", "f": "e", "n": "e", "pl": "en"},
        "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
        "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"},
    },
    "mixed": {
        "nom": {"m": "er", "f": "e", "n": "es"},
        "acc": {"m": "en", "f": "e", "n": "es"},
        "dat": {"m": "en", "f": "en", "n": "en"},
    },
    "strong": {
        "nom": {"pl": "e"},
        "acc": {"pl": "e"},
        "dat": {"pl": "en"},
    },
}


def _declension(determiner: Determiner) -> str:
    """The determiner decides which table of adjective endings applies."""
    if isinstance(determiner, int):
        return "strong"
    return "weak" if determiner == "the" else "mixed"


def _add_ending(stem: str, ending: str) -> str:
    """Attach an ending without doubling an e: müde + en is "müden", not "müdeen"."""
    if stem.endswith("e") and ending.startswith("e"):
        return stem + ending[1:]
    return stem + ending


def _german_noun(phrase: NounPhrase, case: Case) -> str:
    """Dative plurals add -n, unless the plural already ends in -n or -s (Katzen, Autos)."""
    if not phrase.is_plural:
        return phrase.noun.german
    plural = phrase.noun.german_plural
    if case == "dat" and not plural.endswith(("n", "s")):
        return plural + "n"
    return plural


def _german_determiner(phrase: NounPhrase, case: Case, slot: str, kein: bool) -> str:
    """Pick the article for this case and gender; kein- takes exactly the endings of ein-."""
    if isinstance(phrase.determiner, int):
        return german_number(phrase.determiner)
    if phrase.determiner == "the":
        return _DEFINITE_ARTICLES[case][slot]
    article = _INDEFINITE_ARTICLES[case][slot]
    return "k" + article if kein else article


def _german_noun_phrase(phrase: NounPhrase, case: Case, kein: bool = False) -> str:
    """Decline determiner, adjective and noun together, as German agreement demands."""
    slot = "pl" if phrase.is_plural else phrase.noun.gender
    words = [_german_determiner(phrase, case, slot, kein)]
    if phrase.adjective is not None:
        ending = _ADJECTIVE_ENDINGS[_declension(phrase.determiner)][case][slot]
        words.append(_add_ending(phrase.adjective.german, ending))
    words.append(_german_noun(phrase, case))
    return " ".join(words)


def _german_verb(clause: Clause) -> str:
    """The finite verb agrees with the subject in number."""
    return clause.verb.german_3pl if clause.subject.is_plural else clause.verb.german_3sg


def _negates_with_kein(clause: Clause) -> bool:
    """German negates "a cat" as "keine Katze" instead of adding "nicht"."""
    return clause.negated and clause.obj is not None and clause.obj.determiner == "a"


def _german_middle(clause: Clause) -> list[str]:
    """Dative, accusative, then "nicht", then the prepositional phrase, in either clause."""
    words = []
    if clause.indirect is not None:
        words.append(_german_noun_phrase(clause.indirect, "dat"))
    if clause.obj is not None:
        words.append(_german_noun_phrase(clause.obj, "acc", kein=_negates_with_kein(clause)))
    if clause.negated and not _negates_with_kein(clause):
        words.append("nicht")
    if clause.prep is not None:
        words += [clause.prep.preposition.german, _german_noun_phrase(clause.prep.phrase, "dat")]
    return words


def _german_main_clause(clause: Clause, adverb: Word | None) -> str:
    """The finite verb comes second: after the subject, or after a leading adverb."""
    subject = _german_noun_phrase(clause.subject, "nom")
    verb = _german_verb(clause)
    front = [subject, verb] if adverb is None else [adverb.german, verb, subject]
    return " ".join(front + _german_middle(clause))


def _german_subordinate_clause(clause: Clause, conjunction: Word) -> str:
    """After weil, wenn or dass the finite verb goes to the very end."""
    subject = _german_noun_phrase(clause.subject, "nom")
    return " ".join([conjunction.german, subject, *_german_middle(clause), _german_verb(clause)])


def _german_sentence(sentence: Sentence) -> str:
    """Main clause, then a comma and the subordinate clause: German always sets the comma."""
    text = _german_main_clause(sentence.main, sentence.adverb)
    if sentence.conjunction is not None and sentence.sub is not None:
        text += ", " + _german_subordinate_clause(sentence.sub, sentence.conjunction)
    return text


# --- Both languages at once --------------------------------------------------------------


def _finish(text: str) -> str:
    """Capitalise the first letter and add the full stop, as in written text."""
    return text[0].upper() + text[1:] + "."


def render(sentence: Sentence) -> tuple[str, str]:
    """Write one sentence in English and German from the same structure."""
    return _finish(_english_sentence(sentence)), _finish(_german_sentence(sentence))


def _marks_case(clause: Clause) -> bool:
    """The case shows in a masculine singular accusative (den, einen) or in any dative."""
    obj = clause.obj
    masculine_object = obj is not None and obj.noun.gender == "m" and not obj.is_plural
    return masculine_object or clause.indirect is not None or clause.prep is not None


def phenomena(sentence: Sentence) -> list[str]:
    """Name the grammar a sentence shows, so a model can be scored per phenomenon."""
    phrases = noun_phrases(sentence)
    found = {
        "case": any(_marks_case(clause) for clause in clauses(sentence)),
        "adjective": any(phrase.adjective is not None for phrase in phrases),
        "plural": any(phrase.is_plural for phrase in phrases),
        "negation": any(clause.negated for clause in clauses(sentence)),
        "inversion": sentence.adverb is not None,
        "subordinate": sentence.sub is not None,
        "number": any(isinstance(phrase.determiner, int) for phrase in phrases),
    }
    return [tag for tag in PHENOMENA if found[tag]]


# --- Random sentences --------------------------------------------------------------------

# How often each construction is drawn. Fixed once, as design §3 asks: never tune these to
# make a model's score look better. Shares are probabilities, weights are relative.
ADVERB_SHARE = 0.25  # sentences that open with an adverb (inversion)
SUBORDINATE_SHARE = 0.3  # sentences with a subordinate clause
NEGATION_SHARE = 0.2  # clauses that are negated
ADJECTIVE_SHARE = 0.25  # noun phrases with an adjective
PREPOSITION_SHARE = 0.5  # intransitive clauses with a prepositional phrase
VERB_KIND_WEIGHTS = {"intransitive": 3, "transitive": 5, "ditransitive": 2}
CONJUNCTION_WEIGHTS = {"because": 2, "when": 1, "that": 2}
DETERMINER_WEIGHTS = {"the": 4, "the plural": 2, "a": 3, "number": 2}  # any of 2..99 alike
# Sentence length on each side, in `tokenize` tokens. A sentence outside is drawn again,
# which makes long constructions a little rarer than the shares above say.
MIN_TOKENS = 3
MAX_TOKENS = 20

# The negation rule (module docstring), as the determiners a negated clause may draw.
_NEGATED_OBJECT_DETERMINERS = ("the", "the plural", "a")
_NEGATED_DATIVE_DETERMINERS = ("the", "the plural")

_PLACE_PREPOSITIONS = tuple(p for p in PREPOSITIONS if p.english != "with")
_NOUNS_BY_CLASS = {
    "any": NOUNS,
    "animate": tuple(noun for noun in NOUNS if noun.animate),
    "person": tuple(noun for noun in NOUNS if noun.kind == "person"),
    "thing": tuple(noun for noun in NOUNS if noun.kind == "thing"),
}


def _weighted_choice(rng: random.Random, weights: dict[str, float]) -> str:
    """Draw one key of `weights`, each as often as its weight says."""
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _draw_determiner(rng: random.Random, allowed: tuple[str, ...]) -> tuple[Determiner, bool]:
    """Draw one of the allowed determiners; return it and whether the phrase is plural."""
    choice = _weighted_choice(rng, {name: DETERMINER_WEIGHTS[name] for name in allowed})
    if choice == "number":
        return rng.randint(2, 99), True
    if choice == "the plural":
        return "the", True
    return choice, False


def _draw_noun_phrase(
    rng: random.Random, nouns: tuple[Noun, ...], determiners: tuple[str, ...]
) -> NounPhrase:
    """Draw a noun, one of the allowed determiners, and sometimes a fitting adjective."""
    noun = rng.choice(nouns)
    determiner, plural = _draw_determiner(rng, determiners)
    adjective = None
    if rng.random() < ADJECTIVE_SHARE:
        adjective = rng.choice([a for a in ADJECTIVES if noun.kind in a.fits])
    return NounPhrase(noun, determiner, adjective, plural)


def _draw_prep_phrase(rng: random.Random, verb: Verb, determiners: tuple[str, ...]) -> PrepPhrase:
    """Draw a place or a companion; "sleeps with" reads as innuendo, so sleep gets places."""
    prepositions = _PLACE_PREPOSITIONS if verb.english == "sleep" else PREPOSITIONS
    return PrepPhrase(rng.choice(prepositions), _draw_noun_phrase(rng, NOUNS, determiners))


def _draw_clause(rng: random.Random, kind: VerbKind) -> Clause:
    """Draw a clause around a verb of the given kind, obeying the negation rule."""
    verb = rng.choice([verb for verb in VERBS if verb.kind == kind])
    negated = rng.random() < NEGATION_SHARE
    anything = tuple(DETERMINER_WEIGHTS)
    objects = _NEGATED_OBJECT_DETERMINERS if negated else anything
    datives = _NEGATED_DATIVE_DETERMINERS if negated else anything
    subjects = _NOUNS_BY_CLASS["person" if kind == "saying" else "animate"]
    subject = _draw_noun_phrase(rng, subjects, anything)
    obj = indirect = prep = None
    if kind in ("transitive", "ditransitive"):
        obj = _draw_noun_phrase(rng, _NOUNS_BY_CLASS[verb.objects], objects)
    if kind == "ditransitive":
        indirect = _draw_noun_phrase(rng, _NOUNS_BY_CLASS["animate"], datives)
    if kind == "intransitive" and rng.random() < PREPOSITION_SHARE:
        prep = _draw_prep_phrase(rng, verb, datives)
    return Clause(subject, verb, obj, indirect, prep, negated)


def _draw_verb_kind(rng: random.Random) -> VerbKind:
    """Draw a kind of verb for a clause that is free to have any."""
    return _weighted_choice(rng, VERB_KIND_WEIGHTS)


def _draw_sentence(rng: random.Random) -> Sentence:
    """Draw the sentence shape first, then fill in each clause."""
    adverb = rng.choice(ADVERBS) if rng.random() < ADVERB_SHARE else None
    if rng.random() >= SUBORDINATE_SHARE:
        return Sentence(_draw_clause(rng, _draw_verb_kind(rng)), adverb)
    conjunction = _CONJUNCTIONS_BY_ENGLISH[_weighted_choice(rng, CONJUNCTION_WEIGHTS)]
    main_kind = "saying" if conjunction.english == "that" else _draw_verb_kind(rng)
    main = _draw_clause(rng, main_kind)
    return Sentence(main, adverb, conjunction, _draw_clause(rng, _draw_verb_kind(rng)))


def _fits(sentence: Sentence) -> bool:
    """Both sides must have between MIN_TOKENS and MAX_TOKENS tokens."""
    return all(MIN_TOKENS <= len(tokenize(text)) <= MAX_TOKENS for text in render(sentence))


def random_sentence(rng: random.Random) -> Sentence:
    """Draw sentences until one fits the length limits on both sides."""
    while True:
        sentence = _draw_sentence(rng)
        if _fits(sentence):
            return sentence


# --- Builders: a sentence in a few words, for tests and notebooks ------------------------

Entry = TypeVar("Entry")

_NOUN_FORMS = {noun.english: (noun, False) for noun in NOUNS} | {
    noun.english_plural: (noun, True) for noun in NOUNS
}
_ADJECTIVES_BY_ENGLISH = {adjective.english: adjective for adjective in ADJECTIVES}
_VERB_FORMS = {verb.english: verb for verb in VERBS} | {verb.english_3sg: verb for verb in VERBS}
_ADVERBS_BY_ENGLISH = {adverb.english: adverb for adverb in ADVERBS}
_CONJUNCTIONS_BY_ENGLISH = {conjunction.english: conjunction for conjunction in CONJUNCTIONS}


def _find(table: dict[str, Entry], word: str) -> Entry:
    """Look a word up in the lexicon, with a clear error for a typo."""
    if word not in table:
        raise ValueError(f"{word!r} is not in the lexicon; choose one of {sorted(table)}")
    return table[word]


def np(text: str) -> NounPhrase:
    """Read "the big dog", "a small cat" or "21 dogs" into a `NounPhrase`."""
    first, *words = text.split()
    if len(words) not in (1, 2):
        raise ValueError(f"write a determiner, maybe an adjective, and a noun, not {text!r}")
    noun, plural = _find(_NOUN_FORMS, words[-1])
    adjective = _find(_ADJECTIVES_BY_ENGLISH, words[0]) if len(words) == 2 else None
    if first.isdigit():
        if not plural:
            raise ValueError(f"a number needs the plural noun: {text!r}")
        return NounPhrase(noun, int(first), adjective)
    determiner = "a" if first == "an" else first
    return NounPhrase(noun, determiner, adjective, plural)


def _prep_phrase(text: str) -> PrepPhrase:
    """Read "with the cat" or "next to a car" into a `PrepPhrase`."""
    for preposition in PREPOSITIONS:
        if text.startswith(preposition.english + " "):
            return PrepPhrase(preposition, np(text.removeprefix(preposition.english + " ")))
    raise ValueError(f"{text!r} does not start with one of {[p.english for p in PREPOSITIONS]}")


def clause(
    subject: str,
    verb: str,
    obj: str | None = None,
    indirect: str | None = None,
    prep: str | None = None,
    negated: bool = False,
) -> Clause:
    """Build a clause from English words: clause("the dog", "sees", obj="the cat")."""
    return Clause(
        subject=np(subject),
        verb=_find(_VERB_FORMS, verb),
        obj=np(obj) if obj else None,
        indirect=np(indirect) if indirect else None,
        prep=_prep_phrase(prep) if prep else None,
        negated=negated,
    )


def sentence(
    main: Clause,
    adverb: str | None = None,
    conjunction: str | None = None,
    sub: Clause | None = None,
) -> Sentence:
    """Build a sentence from clauses and English words: sentence(main, adverb="today")."""
    return Sentence(
        main=main,
        adverb=_find(_ADVERBS_BY_ENGLISH, adverb) if adverb else None,
        conjunction=_find(_CONJUNCTIONS_BY_ENGLISH, conjunction) if conjunction else None,
        sub=sub,
    )
