"""The one rule by which the course compares two settings over seeds."""

from itertools import product

import pytest

from toolkit.scoring.seed_pairs import SeedPairs, paired, sign_test


def brute_force(wins: int, trials: int, alternative: str) -> float:
    """Every sequence of fair coin flips, counted: the sign test's definition itself."""
    outcomes = [sum(flips) for flips in product((0, 1), repeat=trials)]
    at_least = lambda k: sum(o >= k for o in outcomes) / len(outcomes)  # noqa: E731
    if alternative == "greater":
        return at_least(wins)
    if alternative == "less":
        return sum(o <= wins for o in outcomes) / len(outcomes)
    return min(1.0, 2 * at_least(max(wins, trials - wins)))


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_sign_test_counts_every_coin_flip(alternative):
    for trials in range(0, 9):
        for wins in range(trials + 1):
            assert sign_test(wins, trials, alternative) == pytest.approx(
                brute_force(wins, trials, alternative))


def test_three_seeds_that_agree_are_the_least_three_seeds_can_give():
    assert sign_test(3, 3, "greater") == 0.125
    assert sign_test(3, 3) == 0.25


def test_the_yardstick_is_the_spread_of_the_differences_not_of_the_scores():
    # Scores far apart from seed to seed, the setting's gain the same on each: the pairs agree
    # and their spread is nil, though the scores' own spread dwarfs the gain.
    before, after = {0: 50.0, 1: 70.0, 2: 90.0}, {0: 51.0, 1: 71.0, 2: 91.0}
    pairs = paired("gain", before, after)
    assert pairs.differences == (1.0, 1.0, 1.0)
    assert (pairs.mean, pairs.sd, pairs.agreeing, pairs.agree) == (1.0, 0.0, 3, True)
    assert pairs.verdict() == "higher on every seed"


def test_a_seed_against_the_others_breaks_the_agreement():
    pairs = paired("gain", {0: 63.1, 1: 67.5, 2: 70.5}, {0: 72.1, 1: 66.0, 2: 80.4})
    assert pairs.differences == (9.0, -1.5, 9.9)
    assert (pairs.up, pairs.down, pairs.agreeing, pairs.agree) == (2, 1, 2, False)
    assert pairs.verdict() == "the seeds disagree in sign"
    assert pairs.p_value() == 1.0


def test_what_rounds_to_zero_has_no_sign():
    # The line prints +0.0 there, so it must not be counted as a seed that went up.
    pairs = paired("gain", {0: 1.0, 1: 1.0, 2: 1.0}, {0: 2.0, 1: 1.04, 2: 3.0})
    assert pairs.differences == (1.0, 0.0, 2.0)
    assert not pairs.agree and pairs.verdict() == "no change on some seed"
    assert pairs.p_value("greater") == 0.25  # two seeds that moved, both up


def test_the_line_shows_every_number_the_rule_reads():
    pairs = paired("heads, exact match %", {0: 63.1, 1: 67.5, 2: 70.5},
                   {0: 72.1, 1: 72.7, 2: 73.1})
    assert pairs.line() == (
        "heads, exact match %: +9.0, +5.2, +2.6 (seeds 0, 1, 2); mean +5.6, sd 3.2; "
        "3 of 3 agree in sign, higher on every seed; sign test p = 0.25 (two-sided)")
    assert str(pairs) == pairs.line()


def test_settings_on_other_seeds_cannot_be_paired():
    with pytest.raises(ValueError, match=r"seed \[2\] is in only one.*run the missing seeds"):
        paired("gain", {0: 1.0, 1: 2.0, 2: 3.0}, {0: 1.0, 1: 2.0})
    with pytest.raises(ValueError, match="no seeds"):
        paired("gain", {}, {})
    with pytest.raises(ValueError, match="alternative"):
        sign_test(1, 2, "bigger")


def test_a_frozen_record():
    pairs = SeedPairs("x", (0,), (1.0,))
    with pytest.raises(AttributeError):
        pairs.label = "y"  # type: ignore[misc]


def test_a_mean_that_rounds_to_zero_reads_plus_zero():
    pairs = paired("held-out right", {0: 10, 1: 10, 2: 10}, {0: 9, 1: 10, 2: 10}, digits=0)
    assert "mean +0, sd 1;" in pairs.line()
