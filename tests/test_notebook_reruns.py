"""A notebook run twice, top to bottom, in the same kernel gives the same results.

Learners rerun notebooks all the time. Hidden state (an unseeded generator, a list that
grows on every run, a model trained further instead of afresh) shows up here as a second
run that differs from the first. Wall-clock times and progress-bar rates are masked; every
other printed number, table and figure must be identical.
"""

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# Timings vary between runs and are not results: "12.3 s", "0:00:05", tqdm's "[00:12<00:00,
# 160.25step/s]", the width tqdm gives its bar (what the timings leave of a fixed line), and
# the time columns of live results tables.
TIMINGS = [
    re.compile(r"\|[#\s]*\|"),
    re.compile(r"\[\d+:\d\d(:\d\d)?<[^\]]*\]"),
    re.compile(r"\d+(\.\d+)?\s?(s|ms|step/s|it/s|s/step|s/it)\b"),
    re.compile(r"\d+:\d\d(:\d\d)?"),
]
TIMED_COLUMN = re.compile(r"\btraining s\b|seconds|\btime\b", re.IGNORECASE)


def masked(text: str) -> str:
    for pattern in TIMINGS:
        text = pattern.sub("<time>", text)
    return text


class TableText(HTMLParser):
    """The cells of an HTML table as text: generated element ids and styles drop out."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.rows:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def table_text(html: str) -> str:
    """Rows of cells, with the time columns blanked (counted from the right, where the data
    cells of every row line up, whatever row labels pandas merged)."""
    parser = TableText()
    parser.feed(html)
    header = parser.rows[0]
    timed = {len(header) - 1 - j for j, name in enumerate(header) if TIMED_COLUMN.search(name)}
    rows = [[("<time>" if len(row) - 1 - j in timed else cell) for j, cell in enumerate(row)]
            for row in parser.rows]
    return masked("\n".join(" | ".join(row) for row in rows))


def results(cell: nbformat.NotebookNode) -> list[str]:
    """What a cell showed, as comparable strings: text with timings masked, figures hashed.

    Progress bars redraw at wall-clock intervals, so only the last state of stderr counts;
    the kernel cuts printed text into stream outputs at arbitrary points, so consecutive
    stdout pieces are joined before they are compared.
    """
    shown, stderr = [], ""
    for output in cell.get("outputs", []):
        if output.output_type == "stream" and output.name == "stderr":
            stderr += output.text
        elif output.output_type == "stream":
            if shown and shown[-1].startswith("stdout: "):
                shown[-1] = masked(shown[-1] + output.text)
            else:
                shown.append(masked("stdout: " + output.text))
        elif output.output_type in ("execute_result", "display_data"):
            data = output.data
            if "image/png" in data:
                shown.append("png " + hashlib.sha256(data["image/png"].encode()).hexdigest())
            elif "<table" in data.get("text/html", ""):
                shown.append(table_text(data["text/html"]))
            else:
                shown.append(masked(data.get("text/plain", "")))
        elif output.output_type == "error":
            shown.append(f"error {output.ename}: {output.evalue}")
    last_lines = re.split(r"[\r\n]+", stderr.strip())
    return shown + [masked(last_lines[-1])] if stderr.strip() else shown


def run_twice(path: Path) -> tuple[list[list[str]], list[list[str]]]:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(path.parent)}})
    runs = []
    with client.setup_kernel():
        for _ in range(2):
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type == "code":
                    cell.outputs = []
                    client.execute_cell(cell, index)
            runs.append([results(cell) for cell in notebook.cells if cell.cell_type == "code"])
    return runs[0], runs[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["00_data_and_tokens.ipynb", "02_batching.ipynb"])
def test_a_second_run_in_the_same_kernel_gives_the_same_results(name):
    first, second = run_twice(NOTEBOOKS / name)
    assert any(first), "the notebook showed nothing at all"
    for index, (one, two) in enumerate(zip(first, second, strict=True)):
        assert one == two, f"{name}: code cell {index} differs on the second run"
