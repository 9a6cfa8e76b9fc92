"""What the executed notebooks print agrees with the committed results they stand beside.

These read `build/notebooks/`, the copies `make test` executes (one CPU thread per process).
Without them they skip, unless REQUIRE_SITE=1, which `make test` sets.
"""

import json
import os
import re
from pathlib import Path

import pytest
import torch

from course_tools import ablation, ladder
from course_tools.numeric_platform import numeric_platform

EXECUTED = Path(__file__).resolve().parents[2] / "build" / "notebooks"
STAGE_NOTEBOOKS = sorted(EXECUTED.glob("0[1-7]_*.ipynb"))
# Notebook 14 reads back stage 08's run; it is its ablation row's seed 0.
SEED_0_NOTEBOOKS = STAGE_NOTEBOOKS + sorted(EXECUTED.glob("14_*.ipynb"))

if not STAGE_NOTEBOOKS:
    if os.environ.get("REQUIRE_SITE") == "1":
        raise RuntimeError(f"no executed notebooks in {EXECUTED}: run `make notebooks` first")
    pytest.skip("no executed notebooks: run `make notebooks` (make test does)",
                allow_module_level=True)


def printed(path: Path) -> str:
    """Everything the notebook's code cells wrote to stdout."""
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(output.get("text", "")) for cell in cells
                   if cell["cell_type"] == "code" for output in cell["outputs"])


@pytest.mark.skipif(torch.cuda.is_available() or torch.backends.mps.is_available(),
                    reason="on a GPU the notebooks train on another device than `make ladder`")
@pytest.mark.parametrize("path", SEED_0_NOTEBOOKS, ids=lambda p: p.name)
def test_each_stage_notebook_reproduces_its_committed_seed_0_rung_exactly(path):
    """The notebook trains with the ladder's code and seed, so on one CPU thread nothing may
    differ: a difference means the notebook and `make ladder` no longer train alike."""
    verdict = re.search(r"Your run (gave|differs from) the (ladder|ablation)'s seed-0 .*",
                        printed(path))
    assert verdict, f"{path.name} prints no verdict on its committed rung"
    here = ladder.on_platform(seed_0_row(path), numeric_platform())
    if verdict.group(1) != "gave" and here is None:
        pytest.skip(f"{path.name}: bits repeat only on one numeric platform, and the committed "
                    f"row was computed on another, with no witness here: {verdict.group(0)}")
    assert verdict.group(1) == "gave", verdict.group(0)
    if here is not None and here.exact:  # this platform's figures unrounded, and the weights
        assert " exactly: " in verdict.group(0), verdict.group(0)


def seed_0_row(path: Path):
    """The committed row a notebook's seed-0 run is set beside: its rung, or 14's ablation row."""
    if path.name.startswith("14_"):
        return next(r for r in ablation.load_ablation()[ablation.DECODER_ONLY] if r.seed == 0)
    return ladder.load_ladder()[int(path.name[:2])]



@pytest.mark.parametrize("number", ["10", "12", "13", "14"])
def test_notebooks_10_12_13_and_14_read_back_the_kept_runs(number):
    """The runs these notebooks read are committed in assets/kept-runs/, or trained once by
    `make notebooks` before the notebooks where the code has changed; a notebook that trains
    one again spends its time budget on a model that already exists."""
    path = next(EXECUTED.glob(f"{number}_*.ipynb"))
    assert re.search(r"read back from (assets/kept-runs|build/paper-run)/", printed(path)), (
        f"{path.name} trained its run instead of reading back the one kept")


def test_notebook_13_decodes_the_beam_benchmarks_seed_0():
    """The seed table beside notebook 13's run is the benchmark's; its seed 0 must be this
    very run, or the notebook's numbers and the table's are two different models."""
    text = printed(next(EXECUTED.glob("13_*.ipynb")))
    if "the benchmark ran on another kind of machine" in text:
        pytest.skip("bits repeat only on one numeric platform, and the benchmark ran on another")
    verdict = re.search(r"this run is the benchmark's seed 0: (True|False)", text)
    assert verdict and verdict.group(1) == "True", "rerun `python benchmarks/bench.py --only beam`"
