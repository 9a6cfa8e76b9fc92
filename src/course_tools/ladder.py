"""The ladder: every stage trained on one shared budget, so each rung shows what an idea buys.

`python -m course_tools.ladder` (what `make ladder` runs) trains each stage with its recipe, once
per seed in `recipes.SEEDS`, and writes `assets/ladder.json`, the one source of the numbers
in the README and notebooks. One seed is one run; the spread across seeds says which
differences between stages are larger than chance. Each rung records fingerprints of its
stage module, of the corpus, and of the toolkit code that trains and scores it (recipes
included), so stale numbers show (`course_tools.staleness`): fingerprints of behaviour, which
a comment or a docstring never changes. When code changes and the numbers may not have,
`make ladder-check` (`course_tools.ladder_check`) proves it on one seed and re-stamps the rungs.
"""

import importlib
import json
import sys
import textwrap
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType

import pandas as pd
import torch
from matplotlib.figure import Figure  # no pyplot: a script needs no GUI backend
from torch import nn

from course_tools import staleness
from course_tools.fingerprints import numeric_platform
from toolkit.batching.batches import endless, loader
from toolkit.batching.data import CourseData, load_data
from toolkit.learning import stream_objectives
from toolkit.learning.recipes import RECIPES, SEEDS, Recipe
from toolkit.learning.training import History, evaluate_loss, train
from toolkit.outline import STAGES
from toolkit.outline import stage as stage_info
from toolkit.scoring.evaluation import evaluate
from toolkit.scoring.metrics import Report
from toolkit.stage_api import count_parameters

LADDER_PATH = Path(__file__).resolve().parents[2] / "assets" / "ladder.json"
CHART_PATH = LADDER_PATH.with_suffix(".png")
README_PATH = LADDER_PATH.parents[1] / "README.md"
# The README's results table sits between these lines; `make ladder` rewrites it.
TABLE_START = "<!-- ladder table: written by make ladder -->"
TABLE_END = "<!-- end of ladder table -->"


@dataclass(frozen=True)
class Rung:
    """One stage's numbers on the shared budget."""

    stage: int
    title: str
    parameters: int
    steps: int
    batch_size: int
    training_seconds: float
    train_loss: float
    validation_loss: float
    exact_match: float
    bleu: float
    bleu_signature: str
    per_phenomenon: dict[str, float]
    stage_sha256: str
    corpus_sha256: str
    toolkit_sha256: str
    seed: int = 0
    data: dict = field(default_factory=dict)  # load_data's options, when not its defaults
    platform: str = ""  # how the machine that ran it rounds (fingerprints.numeric_platform)
    # The same run's numbers as the same code computed them on other numeric platforms, by
    # platform, each proven by `make ladder-check` there: what a run there must reproduce.
    witnesses: dict = field(default_factory=dict)


def stage_module(number: int) -> ModuleType:
    return importlib.import_module(f"stages.{stage_info(number).module}")


def rung(
    number: int, model: nn.Module, history: History, validation_loss: float, report: Report,
    recipe: Recipe | None = None, title: str | None = None, data: dict | None = None,
) -> Rung:
    """Gather a finished run into its rung of the ladder (or a row of another comparison).

    `data` names the load_data options the run used, when they are not the defaults.
    """
    recipe = recipe or RECIPES[number]
    return Rung(
        stage=number, title=title or stage_info(number).title,
        parameters=count_parameters(model),
        steps=recipe.steps, batch_size=recipe.batch_size,
        training_seconds=round(history.seconds, 1), train_loss=round(history.final_loss(), 4),
        validation_loss=round(validation_loss, 4), exact_match=round(report.exact_match, 2),
        bleu=round(report.bleu, 2), bleu_signature=report.bleu_signature,
        per_phenomenon={k: round(v, 2) for k, v in report.per_phenomenon.items()},
        stage_sha256=staleness.stage_hash(number), corpus_sha256=staleness.corpus_hash(),
        toolkit_sha256=staleness.toolkit_hash(data, number), seed=recipe.seed,
        data=dict(data or {}),
        platform=numeric_platform() if str(device_of(model)) == "cpu" else str(device_of(model)),
    )


def device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def build(number: int, data: CourseData, recipe: Recipe) -> nn.Module:
    """The stage's model as its recipe makes it, from the recipe's seed (ablation knobs too)."""
    stage = stage_module(number)
    torch.manual_seed(recipe.seed)
    model = stage.Transformer(len(data.src_vocab), len(data.tgt_vocab), **recipe.model)
    if recipe.embedding_std is not None:  # tied weights are the same tensor: set once
        for embedding in (model.src_embed, model.tgt_embed):
            nn.init.normal_(embedding.weight, std=recipe.embedding_std)
    if recipe.attention_scale is not None:
        attentions = [m for m in model.modules() if isinstance(m, stage.MultiHeadAttention)]
        if not attentions:
            raise ValueError(f"stage {number:02d} has no scaled multi-head attention to change")
        for attention in attentions:
            attention.scale = recipe.attention_scale
    return model


def climb(number: int, data: CourseData, device: torch.device | str = "cpu",
          recipe: Recipe | None = None, title: str | None = None,
          data_options: dict | None = None, objective: str | None = None) -> Rung:
    """Train one stage with its recipe (or another) and score it on the test split.

    `data_options` are the load_data options that made `data`, recorded in the rung;
    `objective` names one of `toolkit.learning.stream_objectives` to train stage 08 with
    instead of its own (the validation loss stays the stage's own, so rows compare).
    """
    stage, recipe = stage_module(number), recipe or RECIPES[number]
    model = build(number, data, recipe)
    batches = endless(loader(data.train, recipe.batch_size, seed=recipe.seed))
    trained_on = getattr(stream_objectives, objective) if objective else stage.objective
    history = train(model, trained_on, batches, device=device,
                    description=title or f"stage {number:02d}", **recipe.training())
    validation = loader(data.validation, batch_size=100, shuffle=False)
    validation_loss = evaluate_loss(model, stage.objective, validation, device)
    report, _ = evaluate(model, data, "test", device)
    return rung(number, model, history, validation_loss, report, recipe, title, data_options)


def load_runs(path: Path = LADDER_PATH, key: str = "rungs") -> list[Rung]:
    """Every committed run, every seed; empty until `make ladder` has run."""
    if not path.exists():
        return []
    try:
        return [Rung(**entry) for entry in json.loads(path.read_text())[key]]
    except TypeError as error:
        raise ValueError(f"{path} has an older format ({error}): run `make ladder`") from error


def save_runs(runs: list[Rung], path: Path = LADDER_PATH, key: str = "rungs") -> None:
    """Write runs as load_runs reads them: one entry a run, in the order given."""
    path.write_text(json.dumps({key: [asdict(run) for run in runs]}, indent=1,
                               ensure_ascii=False) + "\n")


def load_ladder(path: Path = LADDER_PATH, seed: int = RECIPES[1].seed) -> dict[int, Rung]:
    """The committed rungs of one seed (the recipes' own, which the notebooks use), by stage."""
    return {run.stage: run for run in load_runs(path) if run.seed == seed}


# (stage, recipe, title[, load_data options[, objective]]): see `climb`
Job = (tuple[int, Recipe, str | None] | tuple[int, Recipe, str | None, dict]
       | tuple[int, Recipe, str | None, dict, str])


def train_all(jobs: list[Job]) -> list[Rung]:
    """Run (stage, recipe, title[, load_data options[, objective]]) jobs two at a time, one
    thread each."""
    with ProcessPoolExecutor(2) as pool:
        return list(pool.map(_climb_on_one_thread, jobs))


def _climb_on_one_thread(job: Job) -> Rung:
    torch.set_num_threads(1)
    number, recipe, title, *rest = job
    options, objective = rest[0] if rest else {}, rest[1] if len(rest) > 1 else None
    return climb(number, load_data(**options), "cpu", recipe, title, options, objective)


def with_seeds(recipe: Recipe, seeds: Iterable[int] = SEEDS) -> list[Recipe]:
    return [replace(recipe, seed=seed) for seed in seeds]


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
    return {name: getattr(run, name) for name in NUMBERS}


def differences(live: Rung, committed: Rung) -> list[tuple[str, object, object]]:
    """(figure, committed value, live value) for every number the two runs do not share."""
    return [(name, getattr(committed, name), getattr(live, name)) for name in NUMBERS
            if getattr(live, name) != getattr(committed, name)]


def reproduces(live: Rung, committed: Rung) -> str:
    """Say whether a notebook's run gave its committed rung, every figure as rounded in the
    file, and if not, why it may not have."""
    here = on_platform(committed, live.platform)
    differ = [name for name, _, _ in differences(live, here or committed)]
    if differ and here is None:
        return (f"this run differs from the committed seed-{committed.seed} rung in "
                f"{', '.join(differ)}, computed on another numeric platform (committed: "
                f"{committed.platform or 'not recorded'}; here: {live.platform}): there the same "
                f"code rounds differently, and the difference grows over training")
    if staleness.is_stale(committed):
        if differ:
            return (f"this run differs from the committed seed-{committed.seed} rung in "
                    f"{', '.join(differ)}, and the code or corpus changed since that rung was "
                    f"computed: run `make ladder-check` to see which numbers moved")
        return (f"this run reproduces the committed seed-{committed.seed} rung to its committed "
                f"precision, but the code changed since it was computed: `make ladder-check` "
                f"proves the other rungs and re-stamps them")
    if not differ and here is not committed:
        return (f"this run reproduces the seed-{committed.seed} rung as this machine's numeric "
                f"platform computes it ({live.platform}), to its committed precision: the "
                f"witness `make ladder-check` proved on this platform. The committed rows "
                f"were computed on another platform "
                f"({committed.platform or 'not recorded'}), where the same code and seed give "
                f"other digits")
    if not differ:
        return (f"this run reproduces the committed seed-{committed.seed} rung to its committed "
                f"precision (every figure, as rounded in the file)")
    return (f"this run differs from the committed seed-{committed.seed} rung in "
            f"{', '.join(differ)}: expected on another device or thread count "
            f"(the committed runs used one CPU thread)")


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
    """The README's results table, so its numbers come from ladder.json and nowhere else."""
    summary, first = spread(runs), {r.stage: r for r in runs if r.seed == SEEDS[0]}
    n = int(summary[("seeds", "n")].min())
    lines = ["| stage | parameters | exact match % | BLEU | held-out exact match % |",
             "|---|---|---|---|---|"]
    lines += [f"| {r.stage:02d} {r.title} | {r.parameters:,} | "
              + " | ".join(mean_sd(summary, r.title, metric) for metric in METRICS) + " |"
              for r in (first[number] for number in sorted(first))]
    return "\n".join(lines) + f"\n\nMean ± standard deviation over {n} seeds."


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


def main(numbers: list[int]) -> None:
    """Recompute the given stages (all by default) on every seed, merged into the committed file."""
    numbers = numbers or [s.number for s in STAGES if s.number in RECIPES]
    jobs = [(number, recipe, None) for number in numbers
            for recipe in with_seeds(RECIPES[number])]
    fresh = train_all(jobs)
    for run in fresh:
        print(f"stage {run.stage:02d} seed {run.seed}: exact match {run.exact_match:.1f}%, "
              f"BLEU {run.bleu:.1f}")
    runs = sorted([r for r in load_runs() if r.stage not in numbers] + fresh,
                  key=lambda r: (r.stage, r.seed))
    save_runs(runs)
    chart(runs).savefig(CHART_PATH, dpi=110)
    write_readme_section(TABLE_START, TABLE_END, markdown_table(runs))
    print(f"wrote {LADDER_PATH}, {CHART_PATH.name} and the README's results table")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]])
