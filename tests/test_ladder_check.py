"""make ladder-check: a stale row whose seed 0 computes the same numbers is re-stamped; one
whose numbers moved is named, figure by figure, and left stale."""

import dataclasses

import pytest

from course_tools import ablation, jobs, ladder, ladder_check, staleness
from course_tools.ladder_check import Results
from course_tools.numeric_platform import numeric_platform
from toolkit.learning.recipes import SEEDS

HERE = numeric_platform()


@pytest.fixture
def files(tmp_path):
    """Copies of the committed files, stamped by the code here now and made on this machine's
    numeric platform, so the check re-stamps copies and compares bit for bit without
    rerunning the old code."""
    copies = []
    for results in (ladder_check.ladder_results(), ladder_check.ablation_results()):
        copy = dataclasses.replace(results, path=tmp_path / results.path.name)
        copy.save([ladder_check.restamp(dataclasses.replace(run, platform=HERE, witnesses={}))
                   for run in results.load()])
        copies.append(copy)
    return copies


def never(runs):
    raise AssertionError("the old code was rerun, though the committed runs were made here")


def committed_seed_zero(results: Results, title: str) -> jobs.Rung:
    return next(r for r in results.load() if r.title == title and r.seed == SEEDS[0])


def replaying(files: list[Results], moved: dict[str, dict] | None = None):
    """A stand-in for jobs.train_all: each job gives its committed seed-0 run back, with the
    `moved` numbers changed, as a real rerun would after a change of behaviour."""
    moved = moved or {}
    runs = {run.title: run for results in files for run in results.load()
            if run.seed == SEEDS[0]}
    asked = []

    def replay(to_run):
        asked.extend(to_run)
        titles = [title or jobs.stage_info(number).title for number, _, title, *_ in to_run]
        return [dataclasses.replace(runs[title], training_seconds=1.0, platform=HERE,
                                    **moved.get(title, {})) for title in titles]

    return replay, asked


def edit_the_code(monkeypatch, stamp: str = "code_sha256", stages=None):
    """Stand for an edit to the code the rows of `stages` import (every row's by default)."""
    real = staleness.stamps

    def edited(number, src=staleness.SRC):
        stamps = real(number, src)
        return {**stamps, stamp: "edited" + stamps[stamp]} if number in (stages or [number]) \
            else stamps

    monkeypatch.setattr(staleness, "stamps", edited)


def edit_the_training_code(monkeypatch):
    """Every row's job imports it, so every row goes stale."""
    edit_the_code(monkeypatch)


def test_nothing_stale_reruns_nothing(files):
    replay, asked = replaying(files)
    assert ladder_check.check(files, replay, never) == [] and asked == []


def test_a_kept_number_re_stamps_every_seed_of_every_stale_row(files, monkeypatch):
    edit_the_training_code(monkeypatch)
    before = {results: results.load() for results in files}
    replay, asked = replaying(files)
    assert ladder_check.check(files, replay, never) == []
    assert sorted({job[1].seed for job in asked}) == [SEEDS[0]]  # seed 0 of each row, once
    assert len(asked) == len({r.title for results in files for r in before[results]})
    for results in files:
        after = results.load()
        assert not any(staleness.is_stale(run) for run in after)
        numbers = [{name: getattr(run, name) for name in (*ladder.NUMBERS, "seed", "title",
                                                          "training_seconds")} for run in after]
        assert numbers == [{name: getattr(run, name) for name in numbers[0]}
                           for run in before[results]]


def test_a_moved_number_is_named_with_both_values_and_its_row_stays_stale(files, monkeypatch):
    edit_the_training_code(monkeypatch)
    stage_03 = jobs.stage_info(3).title
    old = committed_seed_zero(files[0], stage_03).exact_match
    replay, _ = replaying(files, {stage_03: {"exact_match": old + 0.07},
                                     ablation.FULL: {"per_phenomenon": {}}})
    moved = ladder_check.check(files, replay, never)
    assert len(moved) == 2
    said = "\n".join(moved)
    assert (f"ladder.json: '{stage_03}', seed 0: exact_match was {old!r}, now {old + 0.07!r}: "
            f"recompute its seeds with python -m course_tools.recompute ladder 3") in said
    assert f"ablation.json: {ablation.FULL!r}, seed 0: per_phenomenon was {{" in said
    assert f'course_tools.recompute ablation "{ablation.FULL}"' in said
    still_stale = {r.title for results in files for r in results.load() if staleness.is_stale(r)}
    assert still_stale == {stage_03, ablation.FULL}


def test_a_figure_that_moved_below_its_rounding_is_named(files, monkeypatch):
    """Where a row keeps its unrounded figures and the sha256s of its losses and weights,
    those are compared: a change the file's rounding would hide is still a move."""
    edit_the_training_code(monkeypatch)
    stage_02 = jobs.stage_info(2).title
    exact = {"train_loss": 0.123456789, "weights_sha256": "a" * 64}
    files[0].save([dataclasses.replace(run, exact=exact) if run.title == stage_02 else run
                   for run in files[0].load()])
    replay, _ = replaying(files, {stage_02: {"exact": {**exact, "train_loss": 0.1234567891}}})
    moved = ladder_check.check(files, replay, never)
    assert len(moved) == 1 and "train_loss (unrounded) was 0.123456789, now 0.1234567891" in \
        moved[0]
    replay, _ = replaying(files, {stage_02: {"exact": {**exact, "weights_sha256": "b" * 64}}})
    assert "weights_sha256 (unrounded)" in ladder_check.check(files, replay, never)[0]


def test_only_the_rows_whose_code_changed_are_rerun(files, monkeypatch):
    edit_the_code(monkeypatch, "stage_sha256", stages={4})
    replay, asked = replaying(files)
    assert ladder_check.check(files, replay, never) == []
    assert [(number, title) for number, _, title, *_ in asked] == [(4, None)]


def test_each_row_reruns_as_make_ladder_and_make_ablation_ran_it():
    for run in ladder_check.ladder_results().load() + ladder_check.ablation_results().load():
        if run.seed == SEEDS[0]:
            number, recipe, title, *data = ladder_check.seed_zero_job(run)
            assert (number, recipe.seed, data[0] if data else {}) == (run.stage, SEEDS[0],
                                                                      run.data)
            assert (recipe.steps, recipe.batch_size) == (run.steps, run.batch_size)
            assert title in (None, run.title)


def test_runs_made_on_another_platform_are_compared_with_the_old_code_rerun_here(
        files, monkeypatch):
    """The committed bits came from a machine that rounds differently: the current code is
    held to the old code's numbers on this machine, not to the committed ones."""
    edit_the_training_code(monkeypatch)
    elsewhere = files[0]
    elsewhere.save([dataclasses.replace(run, platform="another CPU") for run in elsewhere.load()])
    stage_05 = jobs.stage_info(5).title
    committed = committed_seed_zero(elsewhere, stage_05)
    replay, _ = replaying(files, {stage_05: {"exact_match": 42.0}})  # what the code gives here
    reran = []

    def old_code_here(runs):
        reran.extend(run.title for run in runs)
        return [dataclasses.replace(run, platform=HERE,
                                    exact_match=42.0 if run.title == stage_05 else run.exact_match)
                for run in runs]

    assert ladder_check.check(files, replay, old_code_here) == []
    assert sorted(reran) == sorted({r.title for r in elsewhere.load()})  # the ladder's only
    kept = committed_seed_zero(elsewhere, stage_05)
    assert kept.exact_match == committed.exact_match and kept.platform == "another CPU"
    assert not staleness.is_stale(kept)
    # Seed 0's numbers here are its witness: the next check here, and a notebook's run,
    # compare with them, without the old code.
    assert kept.witnesses[HERE]["exact_match"] == 42.0
    assert ladder.on_platform(kept, HERE).exact_match == 42.0
    live = dataclasses.replace(kept, platform=HERE, exact_match=42.0, witnesses={})
    verdict = staleness.reproduces(live, kept)
    assert "reproduces the seed-0 rung as this machine's numeric platform computes it" in verdict
    assert "computed on another platform (another CPU)" in verdict  # not the table's digits
    shown = ladder.table([kept], live)
    assert shown.loc[(f"05 {kept.title}", ladder.WITNESS_ROW), "exact match %"] == 42.0
    edit_the_training_code(monkeypatch)
    replay, asked = replaying(files, {stage_05: {"exact_match": 42.0}})
    assert ladder_check.check(files, replay, never) == [] and len(asked) > len(reran)


def test_without_the_old_code_runs_from_another_platform_are_not_compared(files, monkeypatch):
    edit_the_training_code(monkeypatch)
    files[1].save([dataclasses.replace(run, platform="") for run in files[1].load()])
    replay, asked = replaying(files)
    with pytest.raises(SystemExit, match="another numeric platform .* BASE=<commit>"):
        ladder_check.check(files, replay)
    assert asked == []  # refused before any training
