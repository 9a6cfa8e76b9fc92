"""Every exercise is a stub, one possible answer and a check; `make student` keeps the stubs."""

import ast
import json
import re
from pathlib import Path

import pytest

from course_tools.answer_leaks import (
    answer_fragments,
    as_run,
    exercises_start,
    leaks,
    shown_before_the_checks,
)
from course_tools.student import (
    CHECK,
    NOTE_ID,
    SHOW_ID,
    SOLUTION,
    SPOILER,
    STUB,
    TEACHER,
    ExerciseLayoutError,
    defined_names,
    source,
    student_version,
    tags,
    write_student_notebooks,
)
from toolkit.checkers import check

ROOT = Path(__file__).resolve().parents[1]
# The data notebook, the stages and the appendix stage's notebook.
TAUGHT = sorted([*(ROOT / "notebooks").glob("0[0-7]_*.ipynb"),
                 *(ROOT / "notebooks").glob("14_*.ipynb")])
CHECKERS = {checker.__name__ for checker in check.CHECKERS}


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def checkers_called(cell: dict) -> set[str]:
    return set(re.findall(r"check\.(\w+)\(", "".join(cell["source"])))


@pytest.mark.parametrize("path", TAUGHT, ids=lambda path: path.name)
def test_each_notebook_has_two_checked_exercises_laid_out_stub_answer_check(path):
    notebook = cells(path)
    solutions = [i for i, cell in enumerate(notebook) if SOLUTION in tags(cell)]
    assert len(solutions) >= 2
    for i in solutions:
        stub, answer, checker = notebook[i - 1], notebook[i], notebook[i + 1]
        assert STUB in tags(stub) and CHECK in tags(checker), answer["id"]
        assert defined_names(stub) == defined_names(answer) != set(), answer["id"]
        assert checkers_called(checker) <= CHECKERS and checkers_called(checker), checker["id"]
        assert notebook[i - 2]["cell_type"] == "markdown", "each exercise states its goal first"


def test_every_checker_is_used_by_a_notebook():
    used = set().union(*(checkers_called(cell) for path in TAUGHT for cell in cells(path)))
    assert used == CHECKERS


def test_the_student_version_keeps_stubs_and_checks_and_drops_answers_and_outputs():
    notebook = json.loads(TAUGHT[3].read_text())
    first_code = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    first_code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    first_code["execution_count"] = 1
    student = student_version(notebook, TAUGHT[3].name)
    kept = [cell["id"] for cell in student["cells"]]
    shown = [cell for cell in notebook["cells"]
             if SOLUTION not in tags(cell) and TEACHER not in tags(cell)]
    assert kept == [cell["id"] for cell in shown if SPOILER not in tags(cell)] + [
        NOTE_ID, SHOW_ID, *(cell["id"] for cell in shown if SPOILER in tags(cell))]
    assert all(cell.get("outputs", []) == [] and cell.get("execution_count") is None
               for cell in student["cells"])
    assert sum(STUB in tags(cell) for cell in student["cells"]) >= 2


# What only the teacher's edition may say: that answers exist, and where.
TEACHER_WORDS = ("solution", "one possible answer", "make student", "teaching.md")


def test_no_student_notebook_speaks_of_the_answers(tmp_path):
    """Every student notebook introduces its exercises without pointing to answers."""
    write_student_notebooks(ROOT / "notebooks", tmp_path)
    for path in sorted(tmp_path.glob("*.ipynb")):
        for cell in cells(path):
            text = "".join(cell["source"]).lower()
            if cell["cell_type"] == "markdown":
                assert not [word for word in TEACHER_WORDS if word in text], (path.name, text)
    exercises = [cell for path in TAUGHT for cell in cells(path) if TEACHER in tags(cell)]
    assert len(exercises) == len(TAUGHT), "each taught notebook has its teacher's note"


def test_a_solution_without_its_stub_is_refused_by_name():
    notebook = json.loads(TAUGHT[3].read_text())
    stub = next(i for i, cell in enumerate(notebook["cells"]) if STUB in tags(cell))
    del notebook["cells"][stub]
    with pytest.raises(ExerciseLayoutError, match="my_causal_mask"):
        student_version(notebook, "03_masking.ipynb")


def test_make_student_keeps_a_copy_that_may_hold_work(tmp_path):
    (tmp_path / TAUGHT[3].name).write_text("a student's work")
    left_out = write_student_notebooks(ROOT / "notebooks", tmp_path)
    assert left_out[TAUGHT[3].name] is None
    assert (tmp_path / TAUGHT[3].name).read_text() == "a student's work"
    assert write_student_notebooks(ROOT / "notebooks", tmp_path, overwrite=True)[TAUGHT[3].name]


def test_make_student_writes_every_notebook_without_answers(tmp_path):
    left_out = write_student_notebooks(ROOT / "notebooks", tmp_path)
    assert sorted(left_out) == sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
    for path in TAUGHT:
        assert left_out[path.name] >= 2
        written = cells(tmp_path / path.name)
        assert not any(SOLUTION in tags(cell) for cell in written)
        for cell in written:  # what a student gets still parses
            if cell["cell_type"] == "code":
                ast.parse("".join(cell["source"]))


def test_no_answer_shows_before_its_exercise_in_the_student_notebooks():
    """The teacher's edition shows some answers early (a stage diff, a demonstration); the
    student edition moves those cells after the exercises. Planted: untagging one fails."""
    early = {}
    for path in TAUGHT:
        notebook = json.loads(path.read_text())
        answers = answer_fragments(notebook["cells"])
        assert len(answers) >= 20, f"{path.name}: the answers' fragments were not found"
        student = student_version(notebook, path.name)["cells"]
        assert leaks(answers, shown_before_the_checks(student, as_run)) == {}, path.name
        early[path.name] = {notebook["cells"][i]["id"]: tags(notebook["cells"][i]) for i in
                            leaks(answers, shown_before_the_checks(notebook["cells"], as_run))}
    # The scan finds what a student would: stage 03's diff holds the causal mask's answer.
    masking = json.loads(TAUGHT[3].read_text())["cells"]
    answers = answer_fragments(masking)
    assert "return torch . ones ( length , length , dtype" in leaks(
        answers, shown_before_the_checks(masking, as_run))[4]
    # Every cell that shows an answer early is one the student edition moves: tagged spoiler.
    assert sum(map(len, early.values())) >= 4, early
    assert all(SPOILER in tagged for cells in early.values() for tagged in cells.values()), early


STAGE_CODE = re.compile(r"stage_diff\(|Code\(filename=stage")


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")),
                         ids=lambda path: path.name)
def test_every_cell_that_shows_a_stages_code_before_the_exercises_is_a_spoiler(path):
    """A stage's code answers exercises, in other names than theirs (which the scan of ten
    tokens above can miss): its cells, with their introductions, come after the exercises."""
    notebook = json.loads(path.read_text())["cells"]
    start = exercises_start(notebook)
    shown = [cell["id"] for cell in notebook[:start] if cell["cell_type"] == "code"
             and STAGE_CODE.search("".join(cell["source"])) and SPOILER not in tags(cell)]
    if any(SOLUTION in tags(cell) for cell in notebook):
        assert shown == [], f"{path.name}: tag these cells {SPOILER!r}"


def spoiler_case(*sources: str) -> dict:
    """A notebook of code cells; the first is tagged spoiler."""
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {"tags": [SPOILER] * (i == 0)},
              "source": [text], "outputs": [], "execution_count": None}
             for i, text in enumerate(sources)]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_a_spoiler_that_later_cells_need_is_refused_by_name():
    """Moved to the end, it would leave a later cell's name undefined, or read a changed one."""
    with pytest.raises(ExerciseLayoutError, match="c1.*reads shift, which it defines"):
        student_version(spoiler_case("shift = 5", "print(shift)"), "x.ipynb")
    with pytest.raises(ExerciseLayoutError, match="c2.*changes stream, which it reads"):
        student_version(spoiler_case("print(stream)", "x = 1", "stream = 2"), "x.ipynb")
    moved = student_version(spoiler_case("shift = 5", "shift = 6\nprint(shift)"), "x.ipynb")
    assert [cell["id"] for cell in moved["cells"]] == ["c1", NOTE_ID, SHOW_ID, "c0"]


def run_cells(cells: list[dict], namespace: dict) -> list:
    """Run code cells as a kernel would, in one namespace; return what they displayed."""
    shown: list = []
    namespace["display"] = shown.append
    namespace["print"] = lambda *values: shown.append(" ".join(map(str, values)))
    for cell in cells:
        if cell["cell_type"] == "code":
            exec(compile(source(cell), cell["id"], "exec"), namespace)
    return shown


def test_a_moved_spoiler_runs_nothing_by_default_and_runs_when_asked():
    """Run All (or `jupyter nbconvert --execute`) shows no spoiler; the student sets
    show_answers = True, reruns, and sees each one as the teacher's edition shows it."""
    notebook = spoiler_case("answer = 6 * 7\nanswer", "x = 1", "print('after', x)")
    notebook["cells"].insert(1, {**notebook["cells"][0], "id": "c0b",
                                 "source": ["print(f'the answer is {answer}')"]})
    student = student_version(notebook, "x.ipynb")["cells"]
    assert [cell["id"] for cell in student] == ["c1", "c2", NOTE_ID, SHOW_ID, "c0", "c0b"]
    switch = source(student[3])
    assert switch.startswith("show_answers = False  #") and "set True" in switch
    assert source(student[4]) == "if show_answers:\n    answer = 6 * 7\n    display(answer)"
    namespace: dict = {}
    assert run_cells(student, namespace) == ["after 1"] and "answer" not in namespace
    namespace["show_answers"] = True  # as the student's edit of the switch does
    assert run_cells(student[4:], namespace) == [42, "the answer is 42"]
    with pytest.raises(ExerciseLayoutError, match="would change"):  # a string over lines
        student_version(spoiler_case('text = """a\nb"""', "x = 1"), "x.ipynb")
    assert student_version(student_version(notebook, "x.ipynb"), "x.ipynb")["cells"] == student


@pytest.mark.parametrize("path", [path for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
                                  if any(SPOILER in tags(cell) for cell in cells(path))],
                         ids=lambda path: path.name)
def test_every_moved_code_cell_waits_for_show_answers_and_runs_the_teachers_code(path):
    """In the notebooks the class gets; the site's student edition, which is read and never
    run, keeps them as they ran."""
    teacher = {cell["id"]: cell for cell in cells(path)}
    student = student_version(json.loads(path.read_text()), path.name)["cells"]
    start = [cell["id"] for cell in student].index(SHOW_ID)
    assert source(student[start]).startswith("show_answers = False")
    for cell in student[start + 1:]:
        assert SPOILER in tags(cell), cell["id"]
        if cell["cell_type"] != "code":
            continue
        gate = ast.parse(source(cell)).body
        assert len(gate) == 1 and ast.unparse(gate[0].test) == "show_answers", cell["id"]
        original = ast.parse(source(teacher[cell["id"]])).body
        if isinstance(original[-1], ast.Expr) and not ast.unparse(original[-1]).startswith(
                "print("):
            original[-1] = ast.parse(f"display({ast.unparse(original[-1])})").body[0]
        assert ast.dump(ast.Module(gate[0].body, [])) == ast.dump(ast.Module(original, []))
    site = student_version(json.loads(path.read_text()), path.name, keep_outputs=True)["cells"]
    assert SHOW_ID not in [cell["id"] for cell in site]
    assert all(source(cell) == source(teacher[cell["id"]]) for cell in site
               if cell["id"] in teacher)
