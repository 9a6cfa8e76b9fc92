"""Scores for translations: exact match (strict) and corpus BLEU (lenient), per phenomenon."""

import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from toolkit.text.tokens import token_text, tokenize


def exact_match(hypotheses: Sequence[list[str]], references: Sequence[list[str]]) -> float:
    """Percentage of sentences translated token for token: a grammar leaves no excuse."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not references:
        raise ValueError("cannot score an empty set of translations")
    hits = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    return 100.0 * hits / len(references)


@dataclass(frozen=True)
class CorpusScore:
    """A BLEU or chrF score is only comparable together with the settings that produced it."""

    score: float
    signature: str


def bleu(hypotheses: Sequence[str], references: Sequence[str], tgt_lang: str = "de") -> CorpusScore:
    """Corpus BLEU as papers since Post (2018) report it: sacreBLEU on detokenised text against
    the raw reference strings, with the tokeniser the target language needs (13a; Chinese,
    Japanese and Korean have their own)."""
    _check_texts(hypotheses, references)
    try:
        metric = BLEU(trg_lang=tgt_lang)
    except RuntimeError:  # Japanese and Korean need MeCab, an optional extra of sacreBLEU
        print(f"BLEU for {tgt_lang!r} wants sacreBLEU's MeCab tokeniser (pip install "
              f"'sacrebleu[ja]' or 'sacrebleu[ko]'); scoring by characters instead (tok:char "
              f"in the signature)", file=sys.stderr)
        metric = BLEU(tokenize="char")
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return CorpusScore(result.score, str(metric.get_signature()))


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> CorpusScore:
    """sacreBLEU's chrF: character n-grams, so it needs no word tokeniser for any language."""
    _check_texts(hypotheses, references)
    metric = CHRF()
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return CorpusScore(result.score, str(metric.get_signature()))


def _check_texts(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    """Scores compare strings: tokens passed by mistake would be scored as nonsense, silently."""
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        if any(not isinstance(text, str) for text in texts):
            raise TypeError(f"scores take {name} as strings (text as written); join a "
                            f"translation's tokens with its vocabulary's join first")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")


@dataclass(frozen=True)
class Report:
    """How well a model translated a test set, overall and for each corpus phenomenon."""

    exact_match: float
    bleu: float
    bleu_signature: str
    sentences: int
    per_phenomenon: dict[str, float]
    chrf: float | None = None
    chrf_signature: str = ""

    def __str__(self) -> str:
        chrf = "" if self.chrf is None else f"   chrF {self.chrf:5.1f}"
        lines = [
            f"exact match {self.exact_match:5.1f}%   BLEU {self.bleu:5.1f}{chrf}"
            f"   ({self.sentences} sentences)",
            f"BLEU signature: {self.bleu_signature}",
        ]
        if self.chrf_signature:
            lines.append(f"chrF signature: {self.chrf_signature}")
        lines.append("exact match by phenomenon:")
        lines += [f"  {name:<12} {score:5.1f}%" for name, score in self.per_phenomenon.items()]
        return "\n".join(lines)


def score(
    hypotheses: Sequence[str],
    references: Sequence[str],
    phenomena: Sequence[Sequence[str]] | None = None,
    apart: str | None = None,
    tgt_lang: str = "de",
) -> Report:
    """Score translations against the raw reference strings, both as text; with phenomenon
    tags, also report exact match for each tag.

    BLEU and chrF compare the texts as they are. Exact match compares them word for word
    (`toolkit.text.tokens.tokenize` on both sides, its spacing marks left out), so only
    spacing around punctuation is forgiven. Sentences tagged `apart` (the held-out
    combinations) count for that tag alone, so each other phenomenon is scored on ordinary
    sentences and generalisation gets its own row.
    """
    _check_texts(hypotheses, references)
    words = [_words(hypothesis) for hypothesis in hypotheses]
    tokens = [_words(reference) for reference in references]
    groups: dict[str, list[int]] = defaultdict(list)
    for index, tags in enumerate(phenomena or []):
        for tag in [apart] if apart in tags else tags:
            groups[tag].append(index)
    per_phenomenon = {
        tag: exact_match([words[i] for i in indices], [tokens[i] for i in indices])
        for tag, indices in sorted(groups.items())
    }
    scored, characters = bleu(hypotheses, references, tgt_lang), chrf(hypotheses, references)
    return Report(
        exact_match(words, tokens), scored.score, scored.signature, len(references),
        per_phenomenon, characters.score, characters.signature,
    )


def _words(text: str) -> list[str]:
    """The word-level tokens of a text without their spacing marks: "don ' t" is "don't"."""
    return [token_text(token) for token in tokenize(text)]
