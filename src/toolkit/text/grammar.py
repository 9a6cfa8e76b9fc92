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

The words live in `toolkit.text.lexicon`, what a sentence is in `toolkit.text.sentences`,
and the random draw that makes the corpus in `toolkit.text.random_sentences`; this module
writes a sentence out in both languages and names the phenomena it shows.
"""

from typing import TypeVar

from toolkit.text.lexicon import (
    ADJECTIVES,
    ADVERBS,
    CONJUNCTIONS_BY_ENGLISH,
    NOUNS,
    PREPOSITIONS,
    VERBS,
    Word,
    english_number,
    german_number,
)
from toolkit.text.sentences import (
    Case,
    Clause,
    Determiner,
    NounPhrase,
    PrepPhrase,
    Sentence,
    clauses,
    noun_phrases,
)

PHENOMENA = ("case", "adjective", "plural", "negation", "inversion", "subordinate", "number")


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


# --- Builders: a sentence in a few words, for tests and notebooks ------------------------

Entry = TypeVar("Entry")

_NOUN_FORMS = {noun.english: (noun, False) for noun in NOUNS} | {
    noun.english_plural: (noun, True) for noun in NOUNS
}
_ADJECTIVES_BY_ENGLISH = {adjective.english: adjective for adjective in ADJECTIVES}
_VERB_FORMS = {verb.english: verb for verb in VERBS} | {verb.english_3sg: verb for verb in VERBS}
_ADVERBS_BY_ENGLISH = {adverb.english: adverb for adverb in ADVERBS}


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
        conjunction=_find(CONJUNCTIONS_BY_ENGLISH, conjunction) if conjunction else None,
        sub=sub,
    )
