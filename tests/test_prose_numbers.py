"""The check that binds every number in a notebook's prose to what the reader sees."""

import json
from pathlib import Path

import pytest

from course_tools import prose_numbers
from course_tools.prose_numbers import check, stated


def executed(folder: Path, cells: list[tuple[str, str, str]], name: str = "13_demo") -> Path:
    """A notebook as `make notebooks` leaves it: (kind, source, printed output) per cell."""
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": kind, "metadata": {}, "source": source,
         **({"outputs": [{"output_type": "stream", "name": "stdout", "text": output}],
             "execution_count": 1} if kind == "code" else {})}
        for kind, source, output in cells]}
    path = folder / f"{name}.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


@pytest.fixture
def constants(tmp_path: Path) -> Path:
    path = tmp_path / "constants.toml"
    path.write_text('[everywhere]\n"0.1" = "the paper\'s dropout (Vaswani et al. 2017, §5.4)"\n'
                    '["13_demo"]\n"1,500" = "the test split\'s size (design §3)"\n',
                    encoding="utf-8")
    return path


def unbound(tmp_path: Path, constants: Path, prose: str, output: str, code: str = "") -> list:
    path = executed(tmp_path, [("code", code, output), ("markdown", prose, "")])
    return [item.number for item in check([path], constants)]


def test_a_figure_the_output_prints_is_bound(tmp_path, constants):
    assert unbound(tmp_path, constants, "Beam 4 changes 21 translations, 2 now right.",
                   "beam 4: 21 of 1500 differ; 2 of them are now right, 3 now wrong") == []


def test_a_figure_copied_from_another_machine_is_not(tmp_path, constants):
    # Notebook 13 as an expert found it: the prose states another platform's 26, this run
    # printed 21; and 97.02 appears nowhere.
    found = unbound(tmp_path, constants, "On seed 0 it changes 26 translations (BLEU 97.02).",
                    "beam 4: 21 of 1500 differ; BLEU 96.614")
    assert found == ["26", "97.02"]


def test_the_precision_written_must_be_printed(tmp_path, constants):
    assert unbound(tmp_path, constants, "BLEU 88.8 here", "BLEU 88.803") == []
    assert unbound(tmp_path, constants, "BLEU 88.80 here", "BLEU 88.8") == ["88.80"]
    assert unbound(tmp_path, constants, "about 89", "BLEU 88.803") == ["89"]
    assert unbound(tmp_path, constants, "a goal of 98", "goal 98.0") == []


def test_declared_constants_and_names_need_no_output(tmp_path, constants):
    prose = ("Stage 07 and stages 03, 04 and 05 on seeds 0, 1 and 2 (Vaswani et al., 2017, "
             "§5.4): dropout 0.1 over the 1,500 test sentences; `embed_dim = 48`; $d_k = 64$.")
    assert unbound(tmp_path, constants, prose, "") == []


def test_a_definition_in_code_is_bound_but_not_a_comment(tmp_path, constants):
    assert unbound(tmp_path, constants, "a beam of 4", "", code="beam_size = 4") == []
    assert unbound(tmp_path, constants, "it took 14.8 s", "",
                   code="x = 1  # took 14.8 s here") == ["14.8"]


def test_titles_and_exercises_are_names():
    prose = ("[05 · Stacking]: exercises 05.1 (run the stack) and 05.2 (count), a 05.3 split, "
             "fixed in [pytorch/pytorch#103749]")
    assert [n for n, _ in stated(prose)] == []
    assert [n for n, _ in stated("the ratio 05.3 here")] == ["05.3"]


def test_signs_ranges_and_glued_words():
    numbers = [n for n, _ in stated("gains +2.2, -1.1 and −3 at steps 150-250; bf16, 3rd, "
                                    "1e-3, v1.8.3 and 1.8x faster")]
    assert numbers == ["2.2", "-1.1", "-3", "150", "250", "1.8"]


def test_a_written_table_is_left_to_its_own_test(tmp_path, constants):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- ladder table: written by make ladder -->\n| 01 | 12.34 |\n"
                      "<!-- end of ladder table -->\nThe corpus has 7,777 words.\n",
                      encoding="utf-8")
    assert [u.number for u in check([readme], constants)] == ["7777"]


def test_the_command_fails_and_says_what_to_do(tmp_path, constants, capsys):
    path = executed(tmp_path, [("code", "", "21"), ("markdown", "it changes 26", "")])
    assert prose_numbers.main([str(path), "--constants", str(constants)]) == 1
    out, err = capsys.readouterr()
    assert "13_demo, cell 1: '26'" in out
    assert "print each where the sentence can point to it, or declare it" in err
    path = executed(tmp_path, [("code", "", "26"), ("markdown", "it changes 26", "")])
    assert prose_numbers.main([str(path), "--constants", str(constants)]) == 0


def test_a_results_file_binds_its_numbers_not_the_digits_of_its_strings(tmp_path):
    for name in prose_numbers.RESULTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(json.dumps({"rows": [{"bleu": 97.2, "steps": 2400,
                                                           "sha256": "94e1a84"}]}))
    held = prose_numbers.results_numbers(tmp_path)
    assert {"97.2", "2400"} <= held and "94" not in held and "84" not in held
