"""What each of the paper's training options buys: notebook 10's ablation, on one budget.

`python -m toolkit.ablation` (what `make ablation` runs) trains the stage-07 model with the
paper's full recipe (`recipes.PAPER`), then without each option in turn: the same pairs in
the same order, the same seed and the same number of steps for every row. Two runs go at
a time, one thread each. It writes `assets/ablation.json`, whose rows carry the same
hashes as the ladder's rungs, so numbers computed on other code show as stale.
"""

import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import torch

from toolkit import ladder
from toolkit.data import load_data
from toolkit.ladder import Rung
from toolkit.recipes import PAPER, RECIPES

ABLATION_PATH = ladder.LADDER_PATH.with_name("ablation.json")
TABLE_START = "<!-- ablation table: written by make ablation -->"
TABLE_END = "<!-- end of ablation table -->"
FULL = "the paper's recipe"
VARIANTS = {
    FULL: PAPER,
    "without warm-up (constant rate)": replace(PAPER, warmup_steps=0),
    "without label smoothing": replace(PAPER, label_smoothing=0.0),
    "without dropout": replace(PAPER, model={**PAPER.model, "dropout": 0.0}),
    "Adam with PyTorch's defaults": replace(PAPER, betas=(0.9, 0.999), eps=1e-8),
    "without the sqrt(d) embedding scale": replace(
        PAPER, model={**PAPER.model, "scale_embeddings": False}),
    "without tied embeddings": replace(PAPER, model={**PAPER.model, "tie_embeddings": False}),
    "none of them: Adam 1e-3, as the tutorial": replace(
        PAPER, model=RECIPES[7].model, lr=1e-3, warmup_steps=0, label_smoothing=0.0,
        betas=(0.9, 0.999), eps=1e-8),
}


def run_variant(name: str) -> dict:
    """One row, in its own process: one thread, so two rows share the two cores fairly."""
    torch.set_num_threads(1)
    return asdict(ladder.climb(7, load_data(), "cpu", VARIANTS[name], title=name))


def load_ablation(path: Path = ABLATION_PATH) -> dict[str, Rung]:
    """The committed rows, by variant name; empty until `make ablation` has run."""
    if not path.exists():
        return {}
    return {row["title"]: Rung(**row) for row in json.loads(path.read_text())["rows"]}


def table(rows: dict[str, Rung]) -> pd.DataFrame:
    """Each variant's scores, and what removing its option cost against the full recipe."""
    full = rows[FULL]
    frame = pd.DataFrame([{
        "variant": name, "exact match %": r.exact_match, "BLEU": r.bleu,
        "held-out exact match %": r.per_phenomenon["held_out"], "train loss": r.train_loss,
        "validation loss": r.validation_loss, "training s": r.training_seconds,
        "exact match vs full recipe": round(r.exact_match - full.exact_match, 2),
    } for name, r in rows.items()])
    return frame.set_index("variant")


def markdown_table(rows: dict[str, Rung]) -> str:
    """The README's ablation table, read from ablation.json like the ladder's."""
    lines = ["| variant | exact match | BLEU | held-out exact match | training time |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {r.exact_match:.1f}% | {r.bleu:.1f} | "
              f"{r.per_phenomenon['held_out']:.1f}% | {r.training_seconds:.0f} s |"
              for name, r in rows.items()]
    return "\n".join(lines)


def main() -> None:
    """Run every variant (about 3 minutes each, two at a time) and write the table."""
    with ProcessPoolExecutor(2) as pool:
        rows = list(pool.map(run_variant, VARIANTS))
    for row in rows:
        print(f"{row['title']:<44} exact match {row['exact_match']:5.1f}%  BLEU {row['bleu']:5.1f}"
              f"  held-out {row['per_phenomenon']['held_out']:5.1f}%")
    ABLATION_PATH.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False) + "\n")
    ladder.write_readme_section(TABLE_START, TABLE_END, markdown_table(load_ablation()))
    print(f"wrote {ABLATION_PATH} and the README's ablation table")


if __name__ == "__main__":
    main()
