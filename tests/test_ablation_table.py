"""The README's ladder and ablation tables compare settings by the course's one rule: each seed
paired with the same seed (`toolkit.scoring.seed_pairs`), never a difference of means."""

import dataclasses
from itertools import pairwise

import pytest

from course_tools import ablation, ladder
from toolkit.learning.recipes import SEEDS


def cells(markdown: str) -> dict[str, list[str]]:
    """A markdown table's body rows, by their first cell."""
    rows = [line.strip("|").split("|") for line in markdown.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]
    return {row[0].strip(): [cell.strip() for cell in row[1:]] for row in rows[1:]}


def differences(cell: str) -> list[float]:
    return [float(number) for number in cell.split(", ")]


def on_each_seed(before: list, after: list) -> list[float]:
    """`after - before` on each seed, looked up seed by seed, as printed (one decimal)."""
    by_seed = {run.seed: run.exact_match for run in before}
    return [round(run.exact_match - by_seed[run.seed], 1) + 0.0
            for run in sorted(after, key=lambda run: run.seed)]


def commoner_sign(values: list[float]) -> str:
    up, down = sum(v > 0 for v in values), sum(v < 0 for v in values)
    return f"{max(up, down)} of {len(values)}"


def test_each_variant_is_paired_with_the_full_recipe_on_the_same_seed():
    rows = ablation.load_ablation()
    table = cells(ablation.markdown_table(rows))
    assert table[ablation.FULL][-2:] == ["", ""], "the full recipe is not compared with itself"
    for name in ablation.VARIANTS:
        if name == ablation.FULL:
            continue
        expected = on_each_seed(rows[ablation.FULL], rows[name])
        assert differences(table[name][-2]) == pytest.approx(expected, abs=1e-9), name
        assert table[name][-1] == commoner_sign(expected), name


def test_the_pairing_follows_the_seed_not_the_order_the_runs_come_in():
    rows = ablation.load_ablation()
    shuffled = {name: runs[::-1] if name == ablation.FULL else runs for name, runs in rows.items()}
    assert ablation.markdown_table(shuffled) == ablation.markdown_table(rows)
    assert ablation.table(shuffled).equals(ablation.table(rows))


def test_each_stage_is_paired_with_the_stage_before_on_the_same_seed():
    runs = ladder.load_runs()
    table = cells(ladder.markdown_table(runs))
    stages = sorted({run.stage for run in runs})
    titles = {run.stage: f"{run.stage:02d} {run.title}" for run in runs}
    assert table[titles[stages[0]]][-2:] == ["", ""], "the first stage has nothing before it"
    for before, stage in pairwise(stages):
        expected = on_each_seed([r for r in runs if r.stage == before],
                                [r for r in runs if r.stage == stage])
        assert differences(table[titles[stage]][-2]) == pytest.approx(expected, abs=1e-9)
        assert table[titles[stage]][-1] == commoner_sign(expected)


def test_the_agreement_count_follows_the_signs():
    rung = ladder.load_ladder()[7]

    def runs(scores: list[float]) -> list:
        return [dataclasses.replace(rung, seed=seed, exact_match=score)
                for seed, score in zip(SEEDS, scores, strict=True)]

    base = runs([50.0, 60.0, 70.0])
    for after, agreeing, agree in [([51.0, 61.0, 71.0], 3, True),
                                   ([49.0, 59.0, 69.0], 3, True),
                                   ([51.0, 59.0, 72.0], 2, False),
                                   ([50.0, 61.0, 71.0], 2, False)]:  # no change on one seed
        pairs = ladder.paired_runs("test", base, runs(after), "exact match %")
        assert (pairs.agreeing, pairs.agree) == (agreeing, agree), after
        assert ladder.agreement(pairs) == f"{agreeing} of {len(SEEDS)}"


def test_runs_on_different_seeds_or_twice_on_one_seed_are_not_paired():
    rung = ladder.load_ladder()[7]
    before = [dataclasses.replace(rung, seed=seed) for seed in (0, 1, 2)]
    with pytest.raises(ValueError, match="different seeds"):
        ladder.paired_runs("test", before, [dataclasses.replace(rung, seed=seed)
                                            for seed in (0, 1, 3)], "exact match %")
    with pytest.raises(ValueError, match="two runs on seed 1"):
        ladder.paired_runs("test", before, [dataclasses.replace(rung, seed=seed)
                                            for seed in (0, 1, 1, 2)], "exact match %")


def test_the_footnotes_state_the_rule_and_what_three_seeds_can_show():
    for table in (ladder.markdown_table(ladder.load_runs()),
                  ablation.markdown_table(ablation.load_ablation())):
        footnote = table.rsplit("\n\n", 1)[1]
        assert "only where every seed agrees in sign" in footnote
        assert f"with {len(SEEDS)} seeds, the exact sign test's p is 0.25 two-sided" in footnote
