"""The ladder: every stage trained on one shared budget, so each rung shows what an idea buys.

`make ladder` (`course_tools.recompute`) trains each stage with its recipe, once
per seed in `recipes.SEEDS`, and writes `assets/ladder.json`, the one source of the numbers
in the README and notebooks. One seed is one run; each stage is paired seed by seed with the
one before it (`paired_runs`), and a step reads as real only where every seed agrees in sign.
`course_tools.jobs` runs every committed row; this module reads and writes them, compares
them and shows them. Each row records its job as data (stage, recipe, data options,
objective) and is stamped by `course_tools.staleness` with fingerprints of the code the job
imports, of the corpus and of the libraries, so stale numbers show: fingerprints of
behaviour, which a comment or a docstring never changes. When code changes and the numbers
may not have, `make ladder-check` (`course_tools.ladder_check`) proves it on one seed and
re-stamps the rows.
"""

import json
import textwrap
from dataclasses import asdict, replace
from itertools import pairwise
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure  # no pyplot: a script needs no GUI backend

from course_tools.jobs import Rung
from toolkit.learning.recipes import RECIPES, SEEDS
from toolkit.scoring.seed_pairs import SeedPairs, paired, sign_test

LADDER_PATH = Path(__file__).resolve().parents[2] / "assets" / "ladder.json"
CHART_PATH = LADDER_PATH.with_suffix(".png")
README_PATH = LADDER_PATH.parents[1] / "README.md"
# The README's results table sits between these lines; `make ladder` rewrites it.
TABLE_START = "<!-- ladder table: written by make ladder -->"
TABLE_END = "<!-- end of ladder table -->"


















def load_runs(path: Path = LADDER_PATH, key: str = "rungs") -> list[Rung]:
    """Every committed run, every seed; empty until `make ladder` has run."""
    if not path.exists():
        return []
    try:
        return [Rung(**_renamed(entry)) for entry in json.loads(path.read_text())[key]]
    except TypeError as error:
        raise ValueError(f"{path} has an older format ({error}): run `make ladder`") from error


def _renamed(entry: dict) -> dict:
    """A row as written before its stamp covered the whole import closure: the old stamp is
    kept under the new name, where it matches nothing, so the row reads as stale."""
    if "toolkit_sha256" in entry:
        entry = dict(entry)
        entry["code_sha256"] = "toolkit:" + entry.pop("toolkit_sha256")
    return entry


def save_runs(runs: list[Rung], path: Path = LADDER_PATH, key: str = "rungs") -> None:
    """Write runs as load_runs reads them: one entry a run, in the order given."""
    path.write_text(json.dumps({key: [asdict(run) for run in runs]}, indent=1,
                               ensure_ascii=False) + "\n")


def load_ladder(path: Path = LADDER_PATH, seed: int = RECIPES[1].seed) -> dict[int, Rung]:
    """The committed rungs of one seed (the recipes' own, which the notebooks use), by stage."""
    return {run.stage: run for run in load_runs(path) if run.seed == seed}










METRICS = {"exact match %": lambda r: r.exact_match, "BLEU": lambda r: r.bleu,
           "held-out exact match %": lambda r: r.per_phenomenon.get("held_out", float("nan"))}


def spread(runs: list[Rung]) -> pd.DataFrame:
    """Mean and standard deviation over seeds, one row per title (a stage or a variant)."""
    frame = pd.DataFrame([{"title": r.title, "seed": r.seed, "train loss": r.train_loss,
                           **{name: read(r) for name, read in METRICS.items()}} for r in runs])
    grouped = frame.groupby("title", sort=False)
    summary = grouped[[*METRICS, "train loss"]].agg(["mean", "std"])
    summary = summary.round({column: 4 if column[0] == "train loss" else 2
                             for column in summary.columns})
    summary[("seeds", "n")] = grouped["seed"].count()
    return summary


def mean_sd(summary: pd.DataFrame, title: str, metric: str, digits: int = 1) -> str:
    """One cell of a spread table as text, e.g. '75.9 ± 1.2'."""
    mean, sd = summary.loc[title, (metric, "mean")], summary.loc[title, (metric, "std")]
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def paired_runs(label: str, before: list[Rung], after: list[Rung], metric: str,
                digits: int = 1) -> SeedPairs:
    """`after` minus `before` on each seed for one of METRICS, the runs paired by `run.seed`:
    the course's one rule for two settings (`toolkit.scoring.seed_pairs`). Both lists must
    hold one run a seed, on the same seeds."""
    return paired(label, _by_seed(label, before, metric), _by_seed(label, after, metric),
                  digits)


def against_the_stage_before(runs: list[Rung], stage: int) -> str:
    """One stage against the one before it, seed by seed, in each of METRICS: the printed
    lines a stage notebook's sentences about its rung rest on."""
    before, after = ([r for r in runs if r.stage == number] for number in (stage - 1, stage))
    return "\n".join(str(paired_runs(f"stage {stage:02d} against {stage - 1:02d}, {metric}",
                                      before, after, metric)) for metric in METRICS)


def _by_seed(label: str, runs: list[Rung], metric: str) -> dict[int, float]:
    read, scores = METRICS[metric], {}
    for run in runs:
        if run.seed in scores:
            raise ValueError(f"{label}: two runs on seed {run.seed} ({run.title}): pair one "
                             "run a seed")
        scores[run.seed] = read(run)
    return scores


def per_seed(pairs: SeedPairs) -> str:
    """The per-seed differences as a table cell, in the order of the seeds: '-2.1, -12.3'."""
    return ", ".join(f"{d:+.{pairs.digits}f}" for d in pairs.differences)


def agreement(pairs: SeedPairs) -> str:
    """How many seeds share the commoner sign, as a table cell: '3 of 3'."""
    return f"{pairs.agreeing} of {len(pairs.differences)}"


def paired_footnote(differences: str, seeds: tuple[int, ...]) -> str:
    """What a table's two paired columns hold, and the one rule by which they are read."""
    named = (", ".join(map(str, seeds[:-1])) + f" and {seeds[-1]}" if len(seeds) > 1
             else str(seeds[0]))
    n = len(seeds)
    return (f"The last two columns are {differences}, seed by seed (seeds {named}, in that "
            "order), and how many of those differences share a sign. A difference is read as "
            f"real only where every seed agrees in sign, and even then, with {n} seeds, the "
            f"exact sign test's p is {sign_test(n, n):.3g} two-sided, the least {n} seeds can "
            "give.")


# What a run computed, as opposed to when, where and on which code.
NUMBERS = ("parameters", "steps", "batch_size", "train_loss", "validation_loss", "exact_match",
           "bleu", "bleu_signature", "per_phenomenon")


def on_platform(committed: Rung, platform: str) -> Rung | None:
    """The committed run as computed on `platform`, if it was computed or witnessed there."""
    if committed.platform == platform:
        return committed
    witnessed = committed.witnesses.get(platform)
    return replace(committed, platform=platform, **witnessed) if witnessed else None


def numbers(run: Rung) -> dict:
    """What a run computed, as a witness of it on its platform."""
    return {**{name: getattr(run, name) for name in NUMBERS}, "exact": run.exact}


def differences(live: Rung, committed: Rung) -> list[tuple[str, object, object]]:
    """(figure, committed value, live value) for every number the two runs do not share: the
    unrounded figures and the sha256s of the losses and weights where both runs have them,
    else the figures as rounded in the file."""
    both = sorted(set(live.exact) & set(committed.exact))
    rounded = [name for name in NUMBERS if not both or name not in committed.exact]
    return ([(name, getattr(committed, name), getattr(live, name)) for name in rounded
             if getattr(live, name) != getattr(committed, name)]
            + [(f"{name} (unrounded)", committed.exact[name], live.exact[name]) for name in both
               if live.exact[name] != committed.exact[name]])


WITNESS_ROW = "seed 0 as computed on this machine's platform"


def table(runs: list[Rung], live: Rung | None = None, up_to: int | None = None) -> pd.DataFrame:
    """The ladder as a table: each stage's first seed, its mean ± sd over every seed, and a
    notebook's own live run beside them."""
    runs = [r for r in runs if up_to is None or r.stage <= up_to]
    summary, rows = spread(runs), []

    def one_run(r: Rung) -> dict:
        return {"train loss": r.train_loss, **{name: read(r) for name, read in METRICS.items()}}

    for r in runs:
        if r.seed == SEEDS[0]:
            rows.append((r, f"committed, seed {r.seed}", one_run(r)))
            here = on_platform(r, live.platform) if live is not None else None
            if live is not None and live.stage == r.stage and here not in (None, r):
                rows.append((here, WITNESS_ROW, one_run(here)))
            seeds = int(summary.loc[r.title, ("seeds", "n")])
            rows.append((r, f"committed, mean ± sd of {seeds} seeds",
                         {"train loss": mean_sd(summary, r.title, "train loss", 4),
                          **{name: mean_sd(summary, r.title, name, 2) for name in METRICS}}))
    if live is not None:
        rows.append((live, "this run", one_run(live)))
    # No training time: `make ladder` runs two at a time beside other work, so its clock says
    # little; each notebook prints the time of its own run.
    frame = pd.DataFrame([{
        "stage": f"{r.stage:02d} {r.title}", "run": run, "parameters": r.parameters,
        "pairs seen": r.steps * r.batch_size, **scores,
    } for r, run, scores in rows])
    return frame.set_index(["stage", "run"]).sort_index(level=0, sort_remaining=False)


def markdown_table(runs: list[Rung]) -> str:
    """The README's results table, so its numbers come from ladder.json and nowhere else, with
    each stage paired seed by seed with the stage before it."""
    summary, first = spread(runs), {r.stage: r for r in runs if r.seed == SEEDS[0]}
    n = int(summary[("seeds", "n")].min())
    stages = sorted(first)
    steps = {number: paired_runs(f"stage {number:02d} vs stage {before:02d}",
                                 [r for r in runs if r.stage == before],
                                 [r for r in runs if r.stage == number], "exact match %")
             for before, number in pairwise(stages)}
    lines = ["| stage | parameters | exact match % | BLEU | held-out exact match % "
             "| exact match vs the stage before, per seed | seeds agreeing |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.stage:02d} {r.title} | {r.parameters:,} | "
              + " | ".join(mean_sd(summary, r.title, metric) for metric in METRICS) + " | "
              + (f"{per_seed(steps[r.stage])} | {agreement(steps[r.stage])} |"
                 if r.stage in steps else " |  |")
              for r in (first[number] for number in stages)]
    footnote = f"Mean ± standard deviation over {n} seeds."
    if steps:
        footnote += " " + paired_footnote("each stage's exact match minus the stage before's",
                                          next(iter(steps.values())).seeds)
    return "\n".join(lines) + "\n\n" + footnote


def write_readme_section(start_marker: str, end_marker: str, content: str,
                         readme: Path = README_PATH) -> None:
    """Replace what lies between two marker lines of the README: numbers with one source."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(start_marker) + len(start_marker), text.index(end_marker)
    readme.write_text(f"{text[:start]}\n{content}\n{text[end:]}", encoding="utf-8")


def readme_section(start_marker: str, end_marker: str, readme: Path = README_PATH) -> str:
    """What lies between two marker lines of the README, for the tests."""
    text = readme.read_text(encoding="utf-8")
    return text[text.index(start_marker) + len(start_marker): text.index(end_marker)].strip()


def chart(runs: list[Rung]) -> Figure:
    """Three bars per stage, with the spread across seeds: what each idea buys, at a glance."""
    titles = {r.stage: r.title for r in runs}
    numbers, summary = sorted(titles), spread(runs)
    figure = Figure(figsize=(9, 3.6))
    ax = figure.subplots()
    for offset, metric in zip((-0.27, 0.0, 0.27), METRICS, strict=True):
        rows = summary.loc[[titles[n] for n in numbers], metric]
        ax.bar([n + offset for n in numbers], rows["mean"], 0.27, yerr=rows["std"],
               capsize=2, label=metric)
    ax.set_xticks(numbers, [f"{n:02d}\n{textwrap.fill(titles[n], 14)}" for n in numbers],
                  fontsize=8)
    n = int(summary[("seeds", "n")].min())
    ax.set(ylim=(0, 100), title=f"What each idea buys, on one shared budget "
                                f"(mean ± sd over {n} seeds)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    return figure
