"""Two settings compared over the same seeds by one rule, so that every comparison in the
course reads alike: the per-seed differences, their mean and spread, how many seeds agree in
sign, and the exact sign test that so few seeds allow.

A difference is read as real only where every seed agrees in sign. Each seed fixes the
initial weights, the order of the pairs and the dropout masks for both settings, so the
difference on one seed is the setting's alone; the spread between seeds in the scores
themselves is the wrong yardstick for it. Three seeds that agree are still weak evidence: the
sign test's p is 0.125 one-sided, 0.25 two-sided, the least three seeds can give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import comb
from statistics import fmean, stdev


def sign_test(wins: int, trials: int, alternative: str = "two-sided") -> float:
    """The exact binomial sign test's p: how often a fair coin would do at least this well."""
    if not 0 <= wins <= trials:
        raise ValueError(f"wins must lie between 0 and trials ({trials}), not {wins}")
    if trials == 0:
        return 1.0

    def at_least(k: int) -> float:
        return sum(comb(trials, i) for i in range(k, trials + 1)) / 2 ** trials

    if alternative == "greater":
        return at_least(wins)
    if alternative == "less":
        return at_least(trials - wins)
    if alternative == "two-sided":
        return min(1.0, 2 * at_least(max(wins, trials - wins)))
    raise ValueError(f"alternative is 'two-sided', 'greater' or 'less', not {alternative!r}")


@dataclass(frozen=True)
class SeedPairs:
    """`after` minus `before` on each seed, rounded as printed, so the signs the reader sees
    are the signs that are counted."""

    label: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    digits: int = 1

    @property
    def mean(self) -> float:
        return fmean(self.differences)

    @property
    def sd(self) -> float:
        """The spread of the per-seed differences (sample standard deviation)."""
        return stdev(self.differences) if len(self.differences) > 1 else 0.0

    @property
    def up(self) -> int:
        return sum(d > 0 for d in self.differences)

    @property
    def down(self) -> int:
        return sum(d < 0 for d in self.differences)

    @property
    def agreeing(self) -> int:
        """How many seeds share the sign most of them have; a zero agrees with neither."""
        return max(self.up, self.down)

    @property
    def agree(self) -> bool:
        """The one rule: every seed moves the same way (none unchanged)."""
        return len(self.differences) > 0 and self.agreeing == len(self.differences)

    def p_value(self, alternative: str = "two-sided") -> float:
        """The sign test over the seeds that changed (a tie carries no sign)."""
        return sign_test(self.up, self.up + self.down, alternative)

    def verdict(self) -> str:
        if self.agree:
            return "higher on every seed" if self.up else "lower on every seed"
        return "the seeds disagree in sign" if self.up and self.down else "no change on some seed"

    def line(self, alternative: str = "two-sided") -> str:
        """The one printed line a sentence of the course cites."""
        each = ", ".join(f"{d:+.{self.digits}f}" for d in self.differences)
        mean = round(self.mean, self.digits) + 0.0  # never "-0"
        return (f"{self.label}: {each} (seeds {', '.join(map(str, self.seeds))}); "
                f"mean {mean:+.{self.digits}f}, sd {self.sd:.{self.digits}f}; "
                f"{self.agreeing} of {len(self.differences)} agree in sign, {self.verdict()}; "
                f"sign test p = {self.p_value(alternative):.3g} ({alternative})")

    def __str__(self) -> str:
        return self.line()


def paired(label: str, before: Mapping[int, float], after: Mapping[int, float],
           digits: int = 1) -> SeedPairs:
    """`after - before` seed by seed; both settings must have run on exactly the same seeds."""
    if set(before) != set(after):
        missing = sorted(set(before) ^ set(after))
        raise ValueError(f"{label}: the two settings ran on different seeds (seed {missing} is "
                         "in only one): run the missing seeds first, since only the same seed "
                         "pairs a setting with the other")
    if not before:
        raise ValueError(f"{label}: no seeds to compare")
    seeds = tuple(sorted(before))
    differences = tuple(round(after[s] - before[s], digits) + 0.0 for s in seeds)
    return SeedPairs(label, seeds, differences, digits)
