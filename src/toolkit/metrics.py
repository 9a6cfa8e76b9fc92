"""Scores for translations: exact match (strict) and corpus BLEU (lenient), per phenomenon."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU

from toolkit.tokens import detokenize


def exact_match(hypotheses: Sequence[list[str]], references: Sequence[list[str]]) -> float:
    """Percentage of sentences translated token for token: a grammar leaves no excuse."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not references:
        raise ValueError("cannot score an empty set of translations")
    hits = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    return 100.0 * hits / len(references)


@dataclass(frozen=True)
class BleuScore:
    """A BLEU score is only comparable together with the settings that produced it."""

    score: float
    signature: str


def bleu(hypotheses: Sequence[list[str]], references: Sequence[list[str]]) -> BleuScore:
    """Corpus BLEU from sacreBLEU on detokenised text, with its standard 13a tokeniser."""
    metric = BLEU()
    result = metric.corpus_score(
        [detokenize(h) for h in hypotheses], [[detokenize(r) for r in references]]
    )
    return BleuScore(result.score, str(metric.get_signature()))


@dataclass(frozen=True)
class Report:
    """How well a model translated a test set, overall and for each corpus phenomenon."""

    exact_match: float
    bleu: float
    bleu_signature: str
    sentences: int
    per_phenomenon: dict[str, float]

    def __str__(self) -> str:
        lines = [
            f"exact match {self.exact_match:5.1f}%   BLEU {self.bleu:5.1f}"
            f"   ({self.sentences} sentences)",
            f"BLEU signature: {self.bleu_signature}",
        ]
        lines.append("exact match by phenomenon:")
        lines += [f"  {name:<12} {score:5.1f}%" for name, score in self.per_phenomenon.items()]
        return "\n".join(lines)


def score(
    hypotheses: Sequence[list[str]],
    references: Sequence[list[str]],
    phenomena: Sequence[Sequence[str]] | None = None,
    apart: str | None = None,
) -> Report:
    """Score translations; with phenomenon tags, also report exact match for each tag.

    Sentences tagged `apart` (the held-out combinations) count for that tag alone, so each
    other phenomenon is scored on ordinary sentences and generalisation gets its own row.
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for index, tags in enumerate(phenomena or []):
        for tag in [apart] if apart in tags else tags:
            groups[tag].append(index)
    per_phenomenon = {
        tag: exact_match([hypotheses[i] for i in indices], [references[i] for i in indices])
        for tag, indices in sorted(groups.items())
    }
    result = bleu(hypotheses, references)
    return Report(
        exact_match(hypotheses, references), result.score, result.signature,
        len(references), per_phenomenon,
    )
