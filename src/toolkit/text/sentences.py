"""What a sentence is: noun phrases, clauses and sentences, and the rules they must keep.

A `Sentence` is one structure that `toolkit.text.grammar` writes out in both languages, so
a pair is a correct translation by construction. The dataclasses reject what the grammar
leaves out (see grammar's docstring: a negated number object, a thing that sees).
"""

from dataclasses import dataclass
from typing import Literal

from toolkit.text.lexicon import Adjective, Noun, Verb, Word

Case = Literal["nom", "acc", "dat"]
Determiner = str | int  # "the", "a", or a number from 2 to 99

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
