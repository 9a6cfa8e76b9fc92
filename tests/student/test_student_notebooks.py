"""Run the student notebooks' exercises: every check must fail with its hint, never crash.

`make student-tests` unzips the student kit (`make student-kit`) outside the repository,
writes the student copies from it as `course.py student` does, and runs this on them, with
the kit's own packages. Before any
exercise is solved, each check must raise `check.NotYet`, shown as one line of hint, and no
other cell may fail: a stub that crashes, or a check that passes on a stub, fails this test.

Only the set-up cell and the Exercises section run: the cells before the section are the
teacher's own, which `make test` already runs end to end, and training there would cost
minutes here. An exercise that leaned on anything else would fail with a NameError. Then
the cells moved after the exercises (tag `spoiler`) run as Run All runs them, and must show
nothing; then once more after `show_answers = True`, and must show what they hold. The
earlier cells whose names they read run just before them, after the exercises.
"""

import builtins
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from course_tools.student import (
    ASKED,
    CHECK,
    NOTE_ID,
    SOLUTION,
    SPOILER,
    STUB,
    assigned_names,
    read_names,
    tags,
)
from toolkit.paths import PROJECT_ROOT

FOLDER = Path(os.environ.get("STUDENT_NOTEBOOKS", PROJECT_ROOT / "build" / "student"))
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))
WITH_EXERCISES = [path for path in NOTEBOOKS
                  if any(CHECK in tags(cell) for cell in nbformat.read(path, as_version=4).cells)]
HEADING = "## Exercises"


# What a kernel holds before any cell runs.
PROVIDED = set(dir(builtins)) | {"display", "get_ipython"}


def needed_before(cells: list, chosen: list) -> list:
    """The cells among `cells` whose names the `chosen` cells read, and those whose names
    they read in turn, in the notebook's order."""
    needed = set().union(*(read_names(cell) for cell in chosen)) - PROVIDED - {ASKED}
    needed -= set().union(*(assigned_names(cell) for cell in chosen))
    taken = []
    for cell in reversed(cells):
        if cell.cell_type == "code" and assigned_names(cell) & needed:
            taken.insert(0, cell)
            needed = (needed - assigned_names(cell)) | (read_names(cell) - PROVIDED)
    return taken


def exercises_only(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The set-up cell and the Exercises section (the rest trains, and make test ran it);
    then the cells moved after the exercises, as they come, and again once asked."""
    cells = notebook.cells
    setup = next(cell for cell in cells if cell.cell_type == "code")
    start = [i for i, cell in enumerate(cells)
             if cell.cell_type == "markdown" and cell.source.lstrip().startswith(HEADING)]
    assert len(start) == 1, f"expected one {HEADING!r} heading, found {len(start)}"
    end = next((i for i, cell in enumerate(cells) if cell.get("id") == NOTE_ID), len(cells))
    section = cells[start[0]:end]
    first_stub = next((i for i, cell in enumerate(section) if STUB in tags(cell)), None)
    assert first_stub is not None, f"no cell tagged {STUB!r} under {HEADING!r}"
    untagged = [cell.id for cell in section[first_stub:] if cell.cell_type == "code"
                and not {STUB, CHECK} & set(tags(cell))]
    assert not untagged, f"only stubs and checks may follow the first stub: {untagged}"
    after = cells[end:]  # the note, the cell that sets show_answers, the moved cells
    assert all(SPOILER in tags(cell) for cell in after[2:]), "only moved cells come last"
    moved = [cell for cell in after[2:] if cell.cell_type == "code"]
    earlier = [cell for cell in cells[:start[0]] if cell is not setup]
    asked = nbformat.v4.new_code_cell(f"{ASKED} = True  # as the student sets it")
    again = [nbformat.from_dict({**cell, "id": f"{cell.id}-asked"}) for cell in moved]
    return nbformat.from_dict({**notebook, "cells": [
        setup, *section, *needed_before(earlier, moved), *after, asked, *again]})


def test_the_student_notebooks_exist():
    """The data notebook, the seven stages, notebook 08 (SDPA's masks) and notebook 14
    (stage 08) have exercises."""
    assert len(WITH_EXERCISES) == 10, f"{FOLDER}: run `make student-tests`, which writes them"


@pytest.mark.slow
@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda path: path.name)
def test_every_check_fails_with_its_hint_before_the_exercises_are_solved(path):
    notebook = nbformat.read(path, as_version=4)
    assert not any(SOLUTION in tags(cell) for cell in notebook.cells), "an answer was left in"
    every_check = sum(CHECK in tags(cell) for cell in notebook.cells)
    notebook = exercises_only(notebook)
    NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    checks = 0
    for cell in notebook.cells:
        errors = [output for output in cell.get("outputs", []) if output.output_type == "error"]
        if SPOILER in tags(cell) and cell.cell_type == "code":  # shown only once asked
            assert bool(cell.outputs) == cell.id.endswith("-asked"), cell.id
        if CHECK not in tags(cell):
            assert not errors, f"{cell.id} failed: {errors[0].ename}: {errors[0].evalue}"
            continue
        checks += 1
        assert [error.ename for error in errors] == ["NotYet"], f"{cell.id}: {errors}"
        hint = errors[0].evalue
        assert len(hint) > 20, f"{cell.id}: the hint says too little: {hint!r}"
        assert errors[0].traceback == [f"\N{BALLOT X} Not yet: {hint}"], cell.id
    assert checks == every_check >= 1, "a check outside the Exercises section would not run"
