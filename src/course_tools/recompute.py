"""`make ladder` and `make ablation`: recompute committed rows on every seed, stamp them, and
write the files, the README's tables and the chart.

    python -m course_tools.recompute ladder [STAGE ...]       # every stage by default
    python -m course_tools.recompute ablation ["ROW NAME" ...]  # every row by default

Two runs go at a time, one thread each (`jobs.train_all`). Each row is stamped here with what
computed it (`course_tools.staleness`: refused if that changed while it trained), so the
module that runs the rows imports nothing of the gate that judges them.
"""

import sys

from course_tools import ablation, jobs, ladder, staleness
from course_tools.jobs import Rung
from toolkit.learning.recipes import RECIPES
from toolkit.outline import STAGES


def trained(to_run: list[jobs.Job]) -> list[Rung]:
    """The jobs' runs, two at a time, each stamped with the code, corpus and libraries they
    ran with (refused if those changed while they trained)."""
    runs = staleness.unchanged_while([job[0] for job in to_run], lambda: jobs.train_all(to_run))
    return [staleness.stamped(run) for run in runs]


def recompute_ladder(numbers: list[int]) -> None:
    """Recompute the given stages (all by default) on every seed, merged into the committed file."""
    numbers = numbers or [s.number for s in STAGES if s.number in RECIPES]
    fresh = trained([(number, recipe, None) for number in numbers
                     for recipe in jobs.with_seeds(RECIPES[number])])
    for run in fresh:
        print(f"stage {run.stage:02d} seed {run.seed}: exact match {run.exact_match:.1f}%, "
              f"BLEU {run.bleu:.1f}")
    runs = sorted([r for r in ladder.load_runs() if r.stage not in numbers] + fresh,
                  key=lambda r: (r.stage, r.seed))
    ladder.save_runs(runs)
    ladder.chart(runs).savefig(ladder.CHART_PATH, dpi=110)
    ladder.write_readme_section(ladder.TABLE_START, ladder.TABLE_END, ladder.markdown_table(runs))
    write_decoder_only_table()
    print(f"wrote {ladder.LADDER_PATH}, {ladder.CHART_PATH.name} and the README's results and "
          "decoder-only tables")


def recompute_ablation(names: list[str]) -> None:
    """Run the named rows (all by default) on every seed, merged into the committed file;
    write the table. A paper-recipe run took 2 to 9 minutes in the last `make ablation`
    (`training_seconds`, two runs sharing two cores with other work)."""
    every = ablation.every_row()
    if unknown := sorted(set(names) - set(every)):
        raise SystemExit(f"no ablation rows named {unknown}; the rows are: {every}")
    names = names or every
    fresh = trained(ablation.jobs(names))
    kept = {name: runs for name, runs in ablation.load_ablation().items() if name not in names}
    runs = [run for name in every for run in
            (kept.get(name, []) + [r for r in fresh if r.title == name])]
    ladder.save_runs(runs, ablation.ABLATION_PATH, key="rows")
    print(ablation.table(ablation.load_ablation()).to_string())
    ladder.write_readme_section(ablation.TABLE_START, ablation.TABLE_END,
                                ablation.markdown_table(ablation.load_ablation()))
    write_decoder_only_table()
    print(f"wrote {ablation.ABLATION_PATH} and the README's ablation and decoder-only tables")


def write_decoder_only_table() -> None:
    """Stage 07 (ladder.json) against stage 08 (ablation.json): either file can move it."""
    ladder.write_readme_section(ablation.DECODER_ONLY_START, ablation.DECODER_ONLY_END,
                                ablation.decoder_only_table(ablation.load_ablation(),
                                                            ladder.load_runs()))


def main(argv: list[str]) -> None:
    what, *names = argv or ["?"]
    if what == "ladder":
        recompute_ladder([int(name) for name in names])
    elif what == "ablation":
        recompute_ablation(names)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
