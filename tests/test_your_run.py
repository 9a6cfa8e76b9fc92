"""What a stage notebook tells the learner of its own run beside the committed rung: the
figures that differ, by the names the notebook prints, and never the maintainer's words."""

from dataclasses import replace

import pytest

from course_tools import ladder, staleness, your_run

MAINTAINERS_WORDS = ("witness", "sha256", "platform", "make ", "unrounded", "rung")


@pytest.fixture
def committed():
    return ladder.load_ladder()[3]


@pytest.fixture(autouse=True)
def current(monkeypatch):
    monkeypatch.setattr(staleness, "is_stale", lambda run: False)


def test_the_same_figures_are_said_to_be_the_same(committed):
    said = your_run.beside_the_ladder(committed, committed)
    assert said.startswith("Your run gave the ladder's seed-0 figures")


def test_a_run_equal_to_the_last_bit_is_said_to_be_exact(committed):
    exact = {"bleu": 0.123456789, "weights_sha256": "a" * 64}
    row = replace(committed, platform="here", exact=exact)
    said = your_run.beside_the_ladder(replace(row, witnesses={}), row)
    assert said.startswith("Your run gave the ladder's seed-0 figures exactly:")
    other_weights = replace(row, exact={**exact, "weights_sha256": "b" * 64}, witnesses={})
    assert "exactly" not in your_run.beside_the_ladder(other_weights, row)
    assert not any(word in said for word in MAINTAINERS_WORDS)


def test_a_figure_that_differs_is_named_as_the_notebook_prints_it(committed):
    live = replace(committed, bleu=committed.bleu + 0.01, validation_loss=1.0, platform="other")
    said = your_run.beside_the_ladder(live, committed)
    assert "seed-0 figures in validation loss, BLEU:" in said
    assert "CPU like yours" not in said  # no witness: the committed row is the one compared
    assert not any(word in said for word in MAINTAINERS_WORDS)


def test_a_run_set_beside_another_cpus_row_says_which_row_it_matches(committed):
    witness = {**ladder.numbers(replace(committed, bleu=committed.bleu + 1)), "exact": {}}
    witnessed = replace(committed, witnesses={"here": witness})
    live = replace(ladder.on_platform(witnessed, "here"), witnesses={})
    said = your_run.beside_the_ladder(live, witnessed)
    assert said.startswith("Your run gave the ladder's seed-0 figures as a CPU like yours")
    assert f"(the row {your_run.LIKE_YOURS!r}; the committed row is another" in said


def test_only_unrounded_digits_that_differ_leave_the_printed_figures_the_same(committed):
    witness = {**ladder.numbers(committed), "exact": {"bleu": 0.123456789}}
    witnessed = replace(committed, witnesses={"here": witness})
    live = replace(committed, platform="here", exact={"bleu": 0.123456780})
    assert ladder.differences(live, ladder.on_platform(witnessed, "here"))  # the digits differ
    said = your_run.beside_the_ladder(live, witnessed)
    assert said == "Your run gave the ladder's seed-0 figures, digit for digit as printed."


def test_an_ablation_row_is_named_as_one(committed):
    said = your_run.beside_the_ladder(committed, committed, results="ablation")
    assert "the ablation's seed-0 figures" in said


def test_a_stale_rung_is_said_to_be_possibly_not_this_codes(committed, monkeypatch):
    monkeypatch.setattr(staleness, "is_stale", lambda run: True)
    said = your_run.beside_the_ladder(committed, committed)
    assert "changed after the ladder's runs were trained" in said


def test_the_table_names_the_witness_row_for_a_learner(committed):
    witnessed = replace(committed, witnesses={"here": ladder.numbers(
        replace(committed, bleu=committed.bleu + 1))})
    live = replace(committed, platform="here")
    runs = [witnessed if run.stage == 3 and run.seed == 0 else run for run in ladder.load_runs()]
    rows = your_run.table(runs, live, up_to=3).index.get_level_values("run")
    assert your_run.LIKE_YOURS in rows and ladder.WITNESS_ROW not in rows
