"""A long run's log: one CSV row every few steps, and a chart of loss and BLEU beside it.

Written by one process only. A resumed run first cuts the rows its checkpoint had not yet
reached, so no step is logged twice (the first row after a resume averages the steps since
the resume only).
"""

import csv
import os
import sys
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

COLUMNS = ("step", "epoch", "loss", "lr", "target_tokens_per_s", "val_loss", "val_bleu")


class RunLog:
    """log.csv and chart.png in the run's folder; every write replaces the file whole."""

    def __init__(self, folder: Path, keep_through: int = 0):
        self.csv, self.chart = folder / "log.csv", folder / "chart.png"
        self.held = False  # log.csv is open in another program, which keeps it from us
        self.rows = [row for row in read_log(self.csv) if row["step"] <= keep_through] \
            if keep_through and self.csv.exists() else []
        self._write()

    def add(self, **row: float | int | None) -> None:
        self.rows.append({name: row.get(name) for name in COLUMNS})
        self._write()

    def _write(self) -> None:
        partial = self.csv.with_name(self.csv.name + ".partial")
        with partial.open("w", encoding="utf-8", newline="") as file:
            writer = csv.DictWriter(file, COLUMNS)
            writer.writeheader()
            writer.writerows({name: _cell(name, value) for name, value in row.items()}
                             for row in self.rows)
        self._replace(partial, self.csv)

    def _replace(self, partial: Path, path: Path) -> None:
        """Put the new file in place; where another program holds the old one open (Windows
        refuses then: a spreadsheet showing log.csv, say), say so once and train on. The
        rows are kept here, and the next write tries again."""
        try:
            os.replace(partial, path)
            self.held = False
        except PermissionError as error:
            partial.unlink(missing_ok=True)
            if not self.held:
                print(f"warning: {path} cannot be replaced ({error.strerror}): is it open in "
                      f"another program? Training goes on, and the log is written again at "
                      f"its next row", file=sys.stderr)
            self.held = True

    def draw(self) -> None:
        """Training and validation loss, and validation BLEU, against the step."""
        figure = Figure(figsize=(9, 3.5), layout="constrained")
        loss_axes, bleu_axes = figure.subplots(1, 2)
        trained = [row for row in self.rows if row["loss"] is not None]
        evaluated = [row for row in self.rows if row["val_bleu"] is not None]
        loss_axes.plot([r["step"] for r in trained], [r["loss"] for r in trained],
                       label="training (per token, since the last row)")
        loss_axes.plot([r["step"] for r in evaluated], [r["val_loss"] for r in evaluated], "o-",
                       label="validation (per token)")
        loss_axes.set(xlabel="step", ylabel="loss", title="Loss")
        loss_axes.legend(fontsize=8)
        bleu_axes.plot([r["step"] for r in evaluated], [r["val_bleu"] for r in evaluated], "o-",
                       color="tab:green")
        bleu_axes.set(xlabel="step", ylabel="BLEU", title="Validation BLEU (sample)")
        for axes in (loss_axes, bleu_axes):
            axes.grid(alpha=0.3)
        partial = self.chart.with_name("chart.partial.png")
        FigureCanvasAgg(figure).print_png(str(partial))
        self._replace(partial, self.chart)


def read_log(path: str | Path) -> list[dict]:
    """The rows of a run's log.csv, numbers as numbers and empty cells as None."""
    with Path(path).open(encoding="utf-8", newline="") as file:
        return [{name: _number(value) for name, value in row.items()}
                for row in csv.DictReader(file)]


FORMATS = {"loss": "{:.6g}", "val_loss": "{:.6g}", "lr": "{:.4e}",
           "target_tokens_per_s": "{:.0f}", "val_bleu": "{:.2f}"}


def _cell(name: str, value: float | int | None) -> str:
    """Enough digits to compare runs, not so many that the file is unreadable."""
    if value is None:
        return ""
    return FORMATS.get(name, "{}").format(value)


def _number(text: str) -> int | float | None:
    if text == "":
        return None
    return int(text) if text.lstrip("-").isdigit() else float(text)
