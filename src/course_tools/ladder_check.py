"""`make ladder-check`: prove on one seed that changed code still computes the committed numbers.

The ladder's rungs and the ablation's rows carry stamps of what computed them: the code their
job imports, their job as data, the corpus and the libraries (`course_tools.staleness`). A
comment or a docstring leaves them as they are; any other edit to that code makes the rows it
feeds stale, though most such edits (a fix on a path training never takes, a clearer name)
compute the same numbers. This check reruns seed 0 of every stale row, two at a time, exactly
as `make ladder` and `make ablation` do, and compares every number with the committed run, bit
for bit: each figure unrounded, and sha256s of the loss history and of the trained weights
(`Rung.exact`; a row written before those were kept is compared as rounded in the file):

- every number equal: the row's runs, all seeds, are re-stamped with today's fingerprints;
- any number moved: it names the row, the figure and both values, re-stamps nothing of that
  row and exits 1, since the other seeds moved too: recompute them with `make ladder` or
  `make ablation`.

Seed 0 stands for the others: a change that moves seed 1 or 2 but keeps every number of
seed 0 would have to branch on the seed. The notebooks check the same seed-0 runs
(`staleness.reproduces`), so a stage notebook that reproduces its rung has proven that rung.

Bits repeat only on one numeric platform: the same code and seed train to other numbers on a
CPU with other vector instructions, or with another PyTorch (`numeric_platform`). A stale
row computed on another platform is therefore also rerun with the code that computed it (the
commit that last wrote the committed files, checked out beside this one), here, and the
current code must match that: twice the runs, and the same proof. A row proven so keeps its
seed 0's numbers on this platform as a witness (`Rung.witnesses`): the next check here
compares with them without the old code, and so do the notebooks' own checks. A proof on
one platform stands for the others as seed 0 stands for the other seeds: the committed
numbers and the other platforms' witnesses are kept, since a change that keeps every bit here
but moves them on another CPU would have to branch on the CPU.

    python -m course_tools.ladder_check                # every stale row; exit 1 if a number moved
    python -m course_tools.ladder_check --base COMMIT  # the code that computed the committed rows
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path

from course_tools import ablation, jobs, ladder, staleness
from course_tools.jobs import Job, Rung
from course_tools.numeric_platform import numeric_platform
from toolkit.learning.recipes import RECIPES, SEEDS


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
    return Results(ladder.LADDER_PATH, "rungs", "python -m course_tools.recompute ladder {stage}")


def ablation_results() -> Results:
    return Results(ablation.ABLATION_PATH, "rows",
                   'python -m course_tools.recompute ablation "{title}"')


def seed_zero_job(run: Rung) -> Job:
    """How `make ladder` or `make ablation` ran this row on seed 0."""
    if run.title in ablation.every_row():
        return next(job for job in ablation.jobs([run.title]) if job[1].seed == SEEDS[0])
    return (run.stage, replace(RECIPES[run.stage], seed=SEEDS[0]), None)


def restamp(run: Rung, witness: Rung | None = None) -> Rung:
    """The same numbers, stamped with the code, corpus and libraries as they are now and the
    job that reproduced them; a run that reproduced them on another platform kept as their
    witness there."""
    witnesses = dict(run.witnesses)
    if witness is not None and witness.platform != run.platform:
        witnesses[witness.platform] = ladder.numbers(witness)
    return staleness.stamped(replace(run, job=staleness.current_job(run), witnesses=witnesses))


Baseline = Callable[[list[Rung]], list[Rung]]  # committed runs -> the same runs, computed here


def check(files: list[Results], train_all=jobs.train_all,
          baseline: Baseline | None = None) -> list[str]:
    """Rerun seed 0 of every stale row of these files; re-stamp the rows that computed the
    same numbers and return one line for each number that moved.

    A row computed on another numeric platform (`numeric_platform`) cannot be
    compared bit for bit with a run here: `baseline` then reruns it with the code that
    computed it, here, and that is what the current code must match."""
    runs = {results: results.load() for results in files}
    stale = {(results, run.title): run for results, every in runs.items() for run in every
             if run.seed == SEEDS[0] and staleness.is_stale(run)}
    if not stale:
        print("nothing is stale: every committed row was computed by the code here now")
        return []
    here = numeric_platform()
    foreign = [row for row, run in stale.items() if ladder.on_platform(run, here) is None]
    if foreign and baseline is None:
        raise SystemExit(f"{len(foreign)} stale rows were computed on another numeric platform "
                         f"({stale[foreign[0]].platform or 'not recorded'}; here: {here}), where "
                         f"the same code rounds differently: give the commit whose code they "
                         f"were stamped with, BASE=<commit>, and its runs are made here too")
    # Longest first, by the committed clock, so the two workers end together.
    order = sorted(stale, key=lambda row: -stale[row].training_seconds)
    print(f"{len(order)} stale rows: rerunning seed {SEEDS[0]} of each, two at a time")
    for results, title in order:
        print(f"  {title}: {'; '.join(staleness.why_stale(stale[results, title]))} changed")
    reference = {row: ladder.on_platform(run, here) for row, run in stale.items()}

    def rerun() -> list[Rung]:
        done = train_all([seed_zero_job(stale[row]) for row in order])
        if foreign:
            print(f"{len(foreign)} of them were computed on another numeric platform: rerunning "
                  f"them with the code that computed them, here")
            reference.update(zip(foreign, baseline([stale[row] for row in foreign]),
                                 strict=True))
        return done

    fresh = dict(zip(order, staleness.unchanged_while([run.stage for run in stale.values()],
                                                      rerun), strict=True))
    moved: list[str] = []
    for (results, title), live in fresh.items():
        changes = ladder.differences(live, reference[results, title])
        command = results.recompute.format(stage=live.stage, title=title)
        for figure, old, new in changes:
            moved.append(f"{results.path.name}: {title!r}, seed {SEEDS[0]}: {figure} was "
                         f"{old!r}, now {new!r}: recompute its seeds with {command}")
        print(f"{title}: {'MOVED' if changes else 'every number the same'}")
    kept = {row: live for row, live in fresh.items()
            if not ladder.differences(live, reference[row])}
    for results, every in runs.items():
        if any(row[0] is results for row in kept):
            results.save([restamp(run, kept.get((results, run.title)) if run.seed == SEEDS[0]
                                  else None) if (results, run.title) in kept else run
                          for run in every])
    for line in moved:
        print(line)
    print("some numbers moved: the rows above are still stale (their other seeds moved too); "
          "recompute them" if moved else
          "every stale row computed the same numbers and is re-stamped, every seed")
    return moved


# Runs seed 0 of the rows given as [[stage, title], ...] with the code on PYTHONPATH, using
# only what every version of the toolkit has, and prints them as JSON.
BASELINE_RUNNER = """
import json, sys
from dataclasses import asdict, replace
from course_tools import ablation, ladder
from toolkit.learning.recipes import RECIPES
jobs = []
for stage, title in json.loads(sys.argv[1]):
    rows = [j for j in ablation.jobs([title]) if j[1].seed == 0] if title else [
        (stage, replace(RECIPES[stage], seed=0), None)]
    jobs += rows
print(json.dumps([asdict(run) for run in jobs.train_all(jobs)]))
"""


def baseline_at(commit: str) -> Baseline:
    """Computes runs with the code of `commit`, checked out beside this one, on this machine."""

    def rerun(runs: list[Rung]) -> list[Rung]:
        with tempfile.TemporaryDirectory(prefix="ladder-base-") as folder:
            tree = Path(folder) / "tree"
            git("worktree", "add", "--detach", str(tree), commit)
            try:
                for run in runs:
                    stamps = staleness.stamps(run.stage, tree / "src")
                    if (stamps["stage_sha256"], stamps["code_sha256"]) != (run.stage_sha256,
                                                                           run.code_sha256):
                        raise SystemExit(f"{commit} is not the code {run.title!r} was stamped "
                                         f"with: give the commit that last changed "
                                         f"assets/ladder.json or assets/ablation.json")
                rows = [[run.stage, run.title if run.title in ablation.every_row() else None]
                        for run in runs]
                env = {**os.environ, "PYTHONPATH": str(tree / "src")}
                done = subprocess.run([sys.executable, "-c", BASELINE_RUNNER, json.dumps(rows)],
                                      cwd=tree, env=env, stdout=subprocess.PIPE, text=True,
                                      encoding="utf-8", check=True)
            finally:
                git("worktree", "remove", "--force", str(tree))
        return [Rung(**{name: value for name, value in entry.items() if name in RUNG_FIELDS})
                for entry in json.loads(done.stdout.strip().splitlines()[-1])]

    return rerun


RUNG_FIELDS = {field.name for field in fields(Rung)}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ladder.README_PATH.parent, check=True,
                          capture_output=True, text=True, encoding="utf-8").stdout.strip()


def last_stamping_commit() -> str:
    """The commit that last wrote the committed rows: its code is the code they describe."""
    return git("log", "-1", "--format=%H", "--", "assets/ladder.json", "assets/ablation.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the commit whose code computed the committed rows, to "
                        "rerun them here when they were computed on another numeric platform "
                        "(default: the last commit that changed them)")
    args = parser.parse_args(argv)
    baseline = baseline_at(args.base or last_stamping_commit())
    return 1 if check([ladder_results(), ablation_results()], baseline=baseline) else 0


if __name__ == "__main__":
    sys.exit(main())
