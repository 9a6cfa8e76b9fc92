"""`make ladder-check`: prove on one seed that changed code still computes the committed numbers.

The ladder's rungs and the ablation's rows carry fingerprints of the code and corpus that
computed them (`toolkit.fingerprints`). A comment or a docstring leaves them as they are; any
other edit to that code makes the rows it feeds stale, though most such edits (a fix on a
path training never takes, a clearer name) compute the same numbers. This check reruns
seed 0 of every stale row, two at a time, exactly as `make ladder` and `make ablation` do,
and compares every number with the committed run, bit for bit:

- every number equal: the row's runs, all seeds, are re-stamped with today's fingerprints;
- any number moved: it names the row, the figure and both values, re-stamps nothing of that
  row and exits 1, since the other seeds moved too: recompute them with `make ladder` or
  `make ablation`.

Seed 0 stands for the others: a change that moves seed 1 or 2 but keeps every number of
seed 0 would have to branch on the seed. The notebooks check the same seed-0 runs
(`ladder.reproduces`), so a stage notebook that reproduces its rung has proven that rung.

    python -m toolkit.ladder_check    # every stale row; exit 1 if a number moved
"""

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from toolkit import ablation, ladder
from toolkit.ladder import Job, Rung
from toolkit.recipes import RECIPES, SEEDS


@dataclass(frozen=True)
class Results:
    """One committed file of runs (the ladder's or the ablation's), row by row."""

    path: Path
    key: str  # the JSON key that holds the runs
    recompute: str  # the command that recomputes a row whose numbers moved, for str.format

    def load(self) -> list[Rung]:
        return ladder.load_runs(self.path, self.key)

    def save(self, runs: list[Rung]) -> None:
        ladder.save_runs(runs, self.path, self.key)


def ladder_results() -> Results:
    return Results(ladder.LADDER_PATH, "rungs", "python -m toolkit.ladder {stage}")


def ablation_results() -> Results:
    return Results(ablation.ABLATION_PATH, "rows", 'python -m toolkit.ablation "{title}"')


def seed_zero_job(run: Rung) -> Job:
    """How `make ladder` or `make ablation` ran this row on seed 0."""
    if run.title in ablation.every_row():
        return next(job for job in ablation.jobs([run.title]) if job[1].seed == SEEDS[0])
    return (run.stage, replace(RECIPES[run.stage], seed=SEEDS[0]), None)


def restamp(run: Rung) -> Rung:
    """The same numbers, with the fingerprints of the code and corpus as they are now."""
    return replace(run, stage_sha256=ladder.stage_hash(run.stage),
                   corpus_sha256=ladder.corpus_hash(), toolkit_sha256=ladder.toolkit_hash(run.data))


def check(files: list[Results], train_all=ladder.train_all) -> list[str]:
    """Rerun seed 0 of every stale row of these files; re-stamp the rows that computed the
    same numbers and return one line for each number that moved."""
    runs = {results: results.load() for results in files}
    stale = {(results, run.title): run for results, every in runs.items() for run in every
             if run.seed == SEEDS[0] and ladder.is_stale(run)}
    if not stale:
        print("nothing is stale: every committed row was computed by the code here now")
        return []
    # Longest first, by the committed clock, so the two workers end together.
    order = sorted(stale, key=lambda row: -stale[row].training_seconds)
    print(f"{len(order)} stale rows: rerunning seed {SEEDS[0]} of each, two at a time")
    fresh = dict(zip(order, train_all([seed_zero_job(stale[row]) for row in order]),
                     strict=True))
    moved: list[str] = []
    for (results, title), live in fresh.items():
        changes = ladder.differences(live, stale[results, title])
        command = results.recompute.format(stage=live.stage, title=title)
        for figure, old, new in changes:
            moved.append(f"{results.path.name}: {title!r}, seed {SEEDS[0]}: {figure} was "
                         f"{old!r}, now {new!r}: recompute its seeds with {command}")
        print(f"{title}: {'MOVED' if changes else 'every number the same'}")
    kept = {row for row, live in fresh.items() if not ladder.differences(live, stale[row])}
    for results, every in runs.items():
        if any(row[0] is results for row in kept):
            results.save([restamp(run) if (results, run.title) in kept else run
                          for run in every])
    for line in moved:
        print(line)
    print("some numbers moved: the rows above are still stale (their other seeds moved too); "
          "recompute them" if moved else
          "every stale row computed the same numbers and is re-stamped, every seed")
    return moved


def main() -> int:
    return 1 if check([ladder_results(), ablation_results()]) else 0


if __name__ == "__main__":
    sys.exit(main())
