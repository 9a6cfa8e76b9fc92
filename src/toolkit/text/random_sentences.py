"""Random sentences with fixed shares of each construction: the built-in corpus's source.

`toolkit.text.corpus` draws every pair from one seeded stream of `random_sentence`.
"""

import random

from toolkit.text.grammar import render
from toolkit.text.lexicon import (
    ADJECTIVES,
    ADVERBS,
    CONJUNCTIONS_BY_ENGLISH,
    NOUNS,
    PREPOSITIONS,
    VERBS,
    Noun,
    Verb,
    VerbKind,
)
from toolkit.text.sentences import Clause, Determiner, NounPhrase, PrepPhrase, Sentence
from toolkit.text.tokens import tokenize

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
    conjunction = CONJUNCTIONS_BY_ENGLISH[_weighted_choice(rng, CONJUNCTION_WEIGHTS)]
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
