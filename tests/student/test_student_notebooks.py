"""Run the student notebooks: every check must fail with its hint, never with a crash.

`make student-tests` writes fresh student copies to build/student and runs this. Before any
exercise is solved, each check must raise `check.NotYet`, shown as one line of hint, and no
other cell may fail: a stub that crashes, or a check that passes on a stub, fails this test.
"""

import nbformat
import pytest
from nbclient import NotebookClient

from toolkit.paths import PROJECT_ROOT
from toolkit.student import CHECK, SOLUTION, tags

FOLDER = PROJECT_ROOT / "build" / "student"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))
WITH_EXERCISES = [path for path in NOTEBOOKS
                  if any(CHECK in tags(cell) for cell in nbformat.read(path, as_version=4).cells)]


def test_the_student_notebooks_exist():
    assert len(WITH_EXERCISES) == 8, f"{FOLDER}: run `make student-tests`, which writes them"


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda path: path.name)
def test_every_check_fails_with_its_hint_before_the_exercises_are_solved(path):
    notebook = nbformat.read(path, as_version=4)
    assert not any(SOLUTION in tags(cell) for cell in notebook.cells), "an answer was left in"
    NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    checks = 0
    for cell in notebook.cells:
        errors = [output for output in cell.get("outputs", []) if output.output_type == "error"]
        if CHECK not in tags(cell):
            assert not errors, f"{cell.id} failed: {errors[0].ename}: {errors[0].evalue}"
            continue
        checks += 1
        assert [error.ename for error in errors] == ["NotYet"], f"{cell.id}: {errors}"
        hint = errors[0].evalue
        assert len(hint) > 20, f"{cell.id}: the hint says too little: {hint!r}"
        assert errors[0].traceback == [f"\N{BALLOT X} Not yet: {hint}"], cell.id
    assert checks >= 2
