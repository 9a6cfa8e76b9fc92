"""The ladder: every stage trained on one shared budget, so each rung shows what an idea buys.

`python -m toolkit.ladder` (what `make ladder` runs) trains each stage with its recipe and
writes `assets/ladder.json`, the one source of the numbers in the README and notebooks.
Each rung records hashes of its stage module, of the corpus, and of the toolkit code that
trains and scores it (recipes included), so stale numbers show.
"""

import hashlib
import importlib
import json
import sys
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

import pandas as pd
import torch
from matplotlib.figure import Figure  # no pyplot: a script needs no GUI backend
from torch import nn

from toolkit.batches import endless, loader
from toolkit.corpus import DATA_DIR
from toolkit.data import CourseData, load_data
from toolkit.device import pick_device
from toolkit.evaluation import evaluate
from toolkit.metrics import Report
from toolkit.outline import STAGES
from toolkit.outline import stage as stage_info
from toolkit.recipes import RECIPES, Recipe
from toolkit.stage_api import count_parameters
from toolkit.training import History, evaluate_loss, train

LADDER_PATH = Path(__file__).resolve().parents[2] / "assets" / "ladder.json"
CHART_PATH = LADDER_PATH.with_suffix(".png")
README_PATH = LADDER_PATH.parents[1] / "README.md"
# The README's results table sits between these lines; `make ladder` rewrites it.
TABLE_START = "<!-- ladder table: written by make ladder -->"
TABLE_END = "<!-- end of ladder table -->"
# The toolkit modules whose code changes the numbers: data, training, decoding, scoring.
TRAINING_CODE = ("tokens", "vocab", "batches", "data", "stage_api", "objectives", "training",
                 "recipes", "decoding", "metrics", "evaluation")


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


def stage_module(number: int) -> ModuleType:
    return importlib.import_module(f"stages.{stage_info(number).module}")


def sha256_of(paths: list[Path]) -> str:
    """Hash file contents in a fixed order, so any edit shows up as a new hash."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def stage_hash(number: int) -> str:
    return sha256_of([Path(stage_module(number).__file__)])


def corpus_hash() -> str:
    return sha256_of(list(DATA_DIR.glob("*.jsonl")))


def toolkit_hash() -> str:
    folder = Path(__file__).resolve().parent
    return sha256_of([folder / f"{name}.py" for name in TRAINING_CODE])


def rung(
    number: int, model: nn.Module, history: History, validation_loss: float, report: Report,
    recipe: Recipe | None = None, title: str | None = None,
) -> Rung:
    """Gather a finished run into its rung of the ladder (or a row of another comparison)."""
    recipe = recipe or RECIPES[number]
    return Rung(
        stage=number, title=title or stage_info(number).title,
        parameters=count_parameters(model),
        steps=recipe.steps, batch_size=recipe.batch_size,
        training_seconds=round(history.seconds, 1), train_loss=round(history.final_loss(), 4),
        validation_loss=round(validation_loss, 4), exact_match=round(report.exact_match, 2),
        bleu=round(report.bleu, 2), bleu_signature=report.bleu_signature,
        per_phenomenon={k: round(v, 2) for k, v in report.per_phenomenon.items()},
        stage_sha256=stage_hash(number), corpus_sha256=corpus_hash(),
        toolkit_sha256=toolkit_hash(),
    )


def climb(number: int, data: CourseData, device: torch.device | str = "cpu",
          recipe: Recipe | None = None, title: str | None = None) -> Rung:
    """Train one stage with its recipe (or another) and score it on the test split."""
    stage, recipe = stage_module(number), recipe or RECIPES[number]
    torch.manual_seed(recipe.seed)
    model = stage.Transformer(len(data.src_vocab), len(data.tgt_vocab), **recipe.model)
    batches = endless(loader(data.train, recipe.batch_size, seed=recipe.seed))
    history = train(model, stage.objective, batches, device=device,
                    description=title or f"stage {number:02d}", **recipe.training())
    validation = loader(data.validation, batch_size=100, shuffle=False)
    validation_loss = evaluate_loss(model, stage.objective, validation, device)
    report, _ = evaluate(model, data, "test", device)
    return rung(number, model, history, validation_loss, report, recipe, title)


def load_ladder(path: Path = LADDER_PATH) -> dict[int, Rung]:
    """The committed rungs, by stage number; empty until `make ladder` has run."""
    if not path.exists():
        return {}
    try:
        return {entry["stage"]: Rung(**entry) for entry in json.loads(path.read_text())["rungs"]}
    except TypeError as error:
        raise ValueError(f"{path} has an older format ({error}): run `make ladder`") from error


def is_stale(entry: Rung) -> bool:
    """True if its stage module, the corpus or the training code changed since it was run."""
    return (entry.stage_sha256, entry.corpus_sha256, entry.toolkit_sha256) != (
        stage_hash(entry.stage), corpus_hash(), toolkit_hash())


def stale_stages(ladder: dict[int, Rung]) -> list[int]:
    """Stages whose module, corpus or training code changed since their rung was computed."""
    return [number for number, entry in ladder.items() if is_stale(entry)]


def table(ladder: dict[int, Rung], live: Rung | None = None) -> pd.DataFrame:
    """The ladder as a table; a notebook's own live run appears beside its committed rung."""
    rows = [(f"{r.stage:02d} {r.title}", "committed", r) for r in ladder.values()]
    if live is not None:
        rows.append((f"{live.stage:02d} {live.title}", "this run", live))
    frame = pd.DataFrame([{
        "stage": name, "run": run, "parameters": r.parameters,
        "pairs seen": r.steps * r.batch_size, "training s": r.training_seconds,
        "train loss": r.train_loss, "exact match %": r.exact_match, "BLEU": r.bleu,
        "held-out exact match %": r.per_phenomenon.get("held_out", float("nan")),
    } for name, run, r in sorted(rows, key=lambda row: (row[0], row[1]))])
    return frame.set_index(["stage", "run"])


def markdown_table(ladder: dict[int, Rung]) -> str:
    """The README's results table, so its numbers come from ladder.json and nowhere else."""
    lines = ["| stage | parameters | training time | exact match | BLEU | held-out exact match |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r.stage:02d} {r.title} | {r.parameters:,} | {r.training_seconds:.0f} s | "
              f"{r.exact_match:.1f}% | {r.bleu:.1f} | {r.per_phenomenon['held_out']:.1f}% |"
              for r in (ladder[number] for number in sorted(ladder))]
    return "\n".join(lines)


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


def chart(ladder: dict[int, Rung]) -> Figure:
    """Three bars per stage: what each idea buys, readable at a glance."""
    numbers = sorted(ladder)
    figure = Figure(figsize=(9, 3.6))
    ax = figure.subplots()
    bars = {"exact match %": [ladder[n].exact_match for n in numbers],
            "held-out exact match %": [ladder[n].per_phenomenon["held_out"] for n in numbers],
            "BLEU": [ladder[n].bleu for n in numbers]}
    for offset, (label, values) in zip((-0.27, 0.0, 0.27), bars.items(), strict=True):
        ax.bar([n + offset for n in numbers], values, 0.27, label=label)
    ax.set_xticks(numbers, [f"{n:02d}\n{textwrap.fill(ladder[n].title, 14)}" for n in numbers],
                  fontsize=8)
    ax.set(ylim=(0, 100), title="What each idea buys, on one shared budget")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    return figure


def main(numbers: list[int]) -> None:
    """Recompute the given stages (all by default) and merge them into the committed file."""
    torch.set_num_threads(1)
    data, device = load_data(), pick_device()
    ladder = load_ladder() if numbers else {}  # recomputing everything needs no old file
    for number in numbers or [s.number for s in STAGES if s.number in RECIPES]:
        ladder[number] = climb(number, data, device)
        print(f"stage {number:02d}: exact match {ladder[number].exact_match:.1f}%, "
              f"BLEU {ladder[number].bleu:.1f}")
    rungs = [asdict(ladder[number]) for number in sorted(ladder)]
    LADDER_PATH.write_text(json.dumps({"rungs": rungs}, indent=1, ensure_ascii=False) + "\n")
    chart(ladder).savefig(CHART_PATH, dpi=110)
    write_readme_section(TABLE_START, TABLE_END, markdown_table(ladder))
    print(f"wrote {LADDER_PATH}, {CHART_PATH.name} and the README's results table")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]])
