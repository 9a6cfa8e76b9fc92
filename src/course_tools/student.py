"""Write the student notebooks: every solution cell left out, its stub kept, outputs cleared.

The course notebooks are the teacher's version: each exercise has a stub cell (tag `stub`),
one possible answer (tag `solution`) and a check cell (tag `check`), and CI runs them end to
end, so every answer is known to pass its check. Text that speaks of those answers sits in
cells tagged `teacher`, which the student version leaves out too. A cell that shows an
answer before its exercise (a stage's diff, a demonstration; tag `spoiler`) moves to the end
of the student version, after the exercises, and runs only when the student asks: its code
sits under `if show_answers:`, which one cell there sets to False (Run All, or `jupyter
nbconvert --execute`, then shows nothing of it).

`python -m course_tools.student` (what `make student` runs) writes the copies a class gets
to student/; they are never committed. A copy that already exists is kept, since it may hold
a student's work: delete it to get a fresh one, or pass --overwrite.
"""

import argparse
import ast
import copy
import json
import sys
from pathlib import Path

from toolkit.paths import PROJECT_ROOT

NOTEBOOKS = PROJECT_ROOT / "notebooks"
STUDENT = PROJECT_ROOT / "student"
STUB, SOLUTION, CHECK, TEACHER, SPOILER = "stub", "solution", "check", "teacher", "spoiler"
NOTE_ID = "after-the-exercises"
AFTER_EXERCISES = """## After the exercises

The cells below show code that answers some of the exercises above (a stage's own code, or
a demonstration), so they come after them: run them once yours pass their checks.
"""
# In a notebook to work in, the moved cells run only when asked (`show_answers`).
ASKED = "show_answers"
SHOW_ID = "show-answers"
AFTER_EXERCISES_ASKED = f"""## After the exercises

The cells below show code that answers some of the exercises above (a stage's own code, or
a demonstration), so they come after them, and they run only when you ask: each one's code
sits under `if {ASKED}:`, and the next cell sets `{ASKED} = False`, so Run All shows
nothing of them. Once your checks pass, change it to `{ASKED} = True`, click that cell and
choose Run > Run Selected Cell and All Below.
"""
SHOW_ANSWERS = f"{ASKED} = False  # set True once your checks pass, then run the cells below\n"


class ExerciseLayoutError(ValueError):
    """A solution cell the generator cannot pair with its stub, so it refuses to guess."""


def source(cell: dict) -> str:
    """A cell's text, which nbformat may store as a list of lines."""
    return "".join(cell["source"])


def tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def defined_names(cell: dict) -> set[str]:
    """The functions a cell defines: a stub and its solution must define the same ones."""
    tree = ast.parse(source(cell))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def assigned_names(cell: dict) -> set[str]:
    """The names a code cell binds anywhere in it (assignments, loops, functions, imports),
    a function's locals too: counting too many only makes the spoiler check stricter."""
    if cell["cell_type"] != "code":
        return set()
    names: set[str] = set()
    for node in ast.walk(ast.parse(source(cell))):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def read_names(cell: dict) -> set[str]:
    """The names a code cell reads but does not bind itself (a loop's variable, say)."""
    if cell["cell_type"] != "code":
        return set()
    loaded = {node.id for node in ast.walk(ast.parse(source(cell)))
              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return loaded - assigned_names(cell)


def spoilers_last(cells: list[dict], name: str, asked: bool = False) -> list[dict]:
    """Move the cells tagged `spoiler` to the end, after a note, once sure that the cells
    they would then follow neither read a name they define nor change one they read: run
    top to bottom, the notebook still works, and the moved cells read the names they read
    before (what a cell changes in place, or the random state, is not checked).

    `asked`: each moved code cell runs only when the student asks (`when_asked`), and a cell
    after the note sets `show_answers = False`."""
    moved = [cell for cell in cells if SPOILER in tags(cell)]
    if not moved or any(cell.get("id") == NOTE_ID for cell in cells):  # none, or moved already
        return cells
    for i, cell in enumerate(cells):
        if SPOILER not in tags(cell):
            continue
        defined, read = assigned_names(cell), read_names(cell)
        for other in (other for other in cells[i + 1:] if SPOILER not in tags(other)):
            if needed := defined & read_names(other):
                problem = f"reads {', '.join(sorted(needed))}, which it defines"
            elif changed := read & assigned_names(other):
                problem = f"changes {', '.join(sorted(changed))}, which it reads"
            else:
                defined -= assigned_names(other)
                continue
            raise ExerciseLayoutError(
                f"{name}: cell {cell.get('id')!r} is tagged {SPOILER!r}, but cell "
                f"{other.get('id')!r} after it {problem}: the student edition moves it to "
                "the end, after the exercises, where that would break")
    note = {"cell_type": "markdown", "id": NOTE_ID, "metadata": {},
            "source": (AFTER_EXERCISES_ASKED if asked else AFTER_EXERCISES).splitlines(
                keepends=True)}
    kept = [cell for cell in cells if SPOILER not in tags(cell)]
    if not asked:
        return [*kept, note, *moved]
    switch = {"cell_type": "code", "id": SHOW_ID, "metadata": {}, "execution_count": None,
              "outputs": [], "source": [SHOW_ANSWERS]}
    return [*kept, note, switch, *(when_asked(cell, name) for cell in moved)]


def _shows_nothing(call: ast.expr) -> bool:
    """A last line such as `print(...)` or `plt.show()`, whose value (None) Jupyter would
    not show."""
    function = call.func if isinstance(call, ast.Call) else None
    return (isinstance(function, ast.Name) and function.id in ("print", "display")
            or isinstance(function, ast.Attribute) and function.attr == "show")


def when_asked(cell: dict, name: str) -> dict:
    """A code cell that runs only when `show_answers` is true: its code indented under
    `if show_answers:`, its last expression passed to `display`, as Jupyter shows a cell's
    last value. Refused if indenting would change what the code does (a string that spans
    lines)."""
    text = source(cell)
    tree = ast.parse(text) if cell["cell_type"] == "code" else None
    if tree is None or not tree.body:
        return cell
    lines = [line.encode() for line in text.splitlines()]  # ast's columns count bytes
    last = tree.body[-1]
    if isinstance(last, ast.Expr) and not _shows_nothing(last.value):
        first, end = last.lineno - 1, last.end_lineno - 1
        lines[end] = lines[end][:last.end_col_offset] + b")" + lines[end][last.end_col_offset:]
        lines[first] = lines[first][:last.col_offset] + b"display(" + lines[first][
            last.col_offset:]
        tree.body[-1] = ast.Expr(ast.Call(ast.Name("display", ast.Load()), [last.value], []))
    gated = f"if {ASKED}:\n" + "".join(f"    {line.decode()}\n" if line.strip() else "\n"
                                        for line in lines).rstrip("\n")
    same = ast.parse(gated).body[0]
    if ast.dump(ast.Module(same.body, [])) != ast.dump(ast.Module(tree.body, [])):
        raise ExerciseLayoutError(
            f"{name}: cell {cell.get('id')!r} is tagged {SPOILER!r}, but indented under "
            f"`if {ASKED}:` its code would change (a string that spans lines?)")
    return {**cell, "source": gated.splitlines(keepends=True), "outputs": [],
            "execution_count": None}


def student_version(notebook: dict, name: str, keep_outputs: bool = False) -> dict:
    """Leave out each solution cell, after checking that the stub just before it matches,
    and each cell that speaks of the answers (tag `teacher`); move those that show one
    (tag `spoiler`) after the exercises.

    A notebook to work in has every output cleared, and its moved cells run only when the
    student asks (`when_asked`); one to read (`keep_outputs`, the site's student edition)
    keeps them as they ran, and every output but the checks', which would show the answers
    passing.
    """
    cells: list[dict] = []
    for cell in notebook["cells"]:
        if SOLUTION in tags(cell):
            stub = cells[-1] if cells else {}
            if STUB not in tags(stub) or defined_names(stub) != defined_names(cell):
                raise ExerciseLayoutError(
                    f"{name}: solution cell {cell.get('id')!r} must come right after a cell "
                    f"tagged {STUB!r} that defines the same functions "
                    f"({', '.join(sorted(defined_names(cell))) or 'none'})"
                )
            continue
        if TEACHER in tags(cell):
            continue
        cell = copy.deepcopy(cell)
        if cell["cell_type"] == "code" and (not keep_outputs or CHECK in tags(cell)):
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    return {**notebook, "cells": spoilers_last(cells, name, asked=not keep_outputs)}


def write_student_notebooks(source: Path = NOTEBOOKS, target: Path = STUDENT,
                            overwrite: bool = False) -> dict[str, int | None]:
    """Write one student copy per notebook; return how many answers each one left out.

    A copy already in `target` is kept (its count is None) unless `overwrite` is set.
    """
    target.mkdir(parents=True, exist_ok=True)
    left_out: dict[str, int | None] = {}
    for path in sorted(source.glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        student = student_version(notebook, path.name)  # checks every layout, even if kept
        if (target / path.name).exists() and not overwrite:
            left_out[path.name] = None
            continue
        left_out[path.name] = sum(SOLUTION in tags(cell) for cell in notebook["cells"])
        text = json.dumps(student, indent=1, ensure_ascii=False) + "\n"
        (target / path.name).write_text(text, encoding="utf-8")
    return left_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.student", description=__doc__)
    parser.add_argument("--to", type=Path, default=STUDENT, help="the folder to write")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace copies that already exist (and any work in them)")
    args = parser.parse_args(argv)
    try:
        left_out = write_student_notebooks(target=args.to, overwrite=args.overwrite)
    except ExerciseLayoutError as error:
        print(f"course_tools.student: {error}", file=sys.stderr)
        return 1
    for name, count in left_out.items():
        if count is None:
            print(f"{name}: kept the copy already in {args.to} (delete it for a fresh one)")
        else:
            print(f"{name}: written{f', its {count} answers left out' if count else ''}")
    print(f"{len(left_out)} notebooks in {args.to}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
