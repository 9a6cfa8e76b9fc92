"""Notebooks are committed clean, run on the python3 kernel, and keep models in src/stages."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
STAGE_NOTEBOOK = re.compile(r"(0[1-7])_(\w+)\.ipynb")


def code_cells(path: Path) -> list[dict]:
    return [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]


def test_the_course_has_its_notebooks():
    names = [path.name for path in NOTEBOOKS]
    assert names == ["00_data_and_tokens.ipynb", "01_naive_attention.ipynb",
                          "02_batching.ipynb", "03_masking.ipynb",
                          "04_positional_encoding.ipynb", "05_stacking.ipynb",
                          "06_ffn_layernorm.ipynb", "07_multi_head.ipynb",
                          "08_from_scratch_to_torch_nn.ipynb", "09_bug_zoo.ipynb",
                          "10_training_like_the_paper.ipynb", "11_scaling_out.ipynb",
                          "12_real_text.ipynb", "13_decoding_like_the_paper.ipynb",
                          "14_decoder_only.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_committed_without_outputs(path):
    for cell in code_cells(path):
        assert cell["outputs"] == [] and cell["execution_count"] is None, (
            f"{path.name} has outputs: clear them before committing")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_kernel_is_python3(path):
    assert json.loads(path.read_text())["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_no_model_class_is_defined_in_a_notebook(path):
    for cell in code_cells(path):
        assert not re.search(r"^\s*class\s+\w+", "".join(cell["source"]), re.MULTILINE), (
            f"{path.name} defines a class: models live in src/stages")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_progress_bars_are_plain_text(path):
    """tqdm.auto and tqdm.notebook become widgets, which render empty offline."""
    source = "".join("".join(cell["source"]) for cell in code_cells(path))
    assert "tqdm.auto" not in source and "tqdm.notebook" not in source


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if STAGE_NOTEBOOK.fullmatch(p.name)],
                         ids=lambda path: path.name)
def test_each_stage_notebook_imports_its_own_stage_module(path):
    number, slug = STAGE_NOTEBOOK.fullmatch(path.name).groups()
    module = f"stage{number}_{slug}"
    assert (ROOT / "src" / "stages" / f"{module}.py").exists()
    source = "".join("".join(cell["source"]) for cell in code_cells(path))
    assert f"from stages import {module} as stage" in source
    assert "sys.path" not in source


def test_where_numbers_part_the_first_cell_says_so():
    """Notebook 08 is an appendix on stage 07; stage 08 is notebook 14's: both say which."""
    def first_cell(name: str) -> str:
        return " ".join("".join(json.loads((ROOT / "notebooks" / name).read_text())["cells"][0]
                                ["source"]).split())
    assert "stage 08, the decoder-only model, is notebook 14's" in first_cell(
        "08_from_scratch_to_torch_nn.ipynb")
    assert "builds that model as stage 08" in first_cell("14_decoder_only.ipynb")
