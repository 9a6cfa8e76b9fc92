"""Find an exercise's answer shown before the exercise: in a stage's diff, a demonstration,
the prose, wherever a student would read it first.

A leak is a run of `FRAGMENT` code tokens that an answer (a cell tagged `solution`) holds
and its exercise does not give away (its stub, its statement and its questions do): ten
tokens are about a line of code with what surrounds it, a fill value's whole expression say;
common idioms such as a softmax over the last dimension are shorter. Comments are left
out, and a string written on one line reads as one token. A quote that follows a letter (the
apostrophe of "stage's") starts no string, so prose is read word by word.

In a notebook, `as_run` adds what a `stage_diff(a, b)` call shows; other outputs (notebook
01 prints its whole stage module) are read on the executed site's pages (tests/site).

The student kit's other files (its library, assets, course.py, READMEs) are scanned too, for
every notebook's answers (`kit_leaks`), but for `DECLARED`: the few files that hold answers
on purpose, each with its reason, which the kit's README (docs/students.md) gives as well.
"""

import re
from collections.abc import Iterable

from course_tools.student import CHECK, SOLUTION, STUB, source, tags
from toolkit.figures.stagediff import stage_diff

FRAGMENT = 10
# A string first, so that a # inside one is not a comment; then a comment, a name, a number.
_TOKEN = re.compile(r"""(?<!\w)"[^"\n]*"|(?<!\w)'[^'\n]*'|#.*"""
                    r"|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:e-?\d+)?|\S")
EXERCISES = "## Exercises"
_STAGE_DIFF = re.compile(r"stage_diff\((\d+), (\d+)\)")
Fragment = tuple[str, ...]


def code_tokens(text: str) -> list[str]:
    """The tokens of code or of text that shows code, with comments left out."""
    return ["STRING" if token[0] in "\"'" else token
            for token in _TOKEN.findall(text) if token[0] != "#"]


def fragments(text: str) -> set[Fragment]:
    tokens = code_tokens(text)
    return {tuple(tokens[i:i + FRAGMENT]) for i in range(len(tokens) - FRAGMENT + 1)}


def as_run(cell: dict) -> str:
    """A notebook cell as a student sees it once it has run: a `stage_diff(a, b)` call shows
    stage b's code."""
    text = source(cell)
    return "\n".join([text, *(stage_diff(int(old), int(new)).unified()
                             for old, new in _STAGE_DIFF.findall(text))])


def exercises_start(cells: list[dict]) -> int:
    """Where the Exercises section begins (the end of the notebook if it has none)."""
    return next((i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
                 and source(cell).lstrip().startswith(EXERCISES)), len(cells))


def answer_fragments(cells: list[dict]) -> set[Fragment]:
    """What the answers hold that the Exercises section's stubs and words do not give."""
    answers = set().union(*(fragments(source(c)) for c in cells if SOLUTION in tags(c)))
    given = set().union(*(fragments(source(c)) for c in cells[exercises_start(cells):]
                          if SOLUTION not in tags(c) and (STUB in tags(c)
                                                          or c["cell_type"] == "markdown")))
    return answers - given


def shown_before_the_checks(cells: list[dict], shown) -> list[tuple[int, str]]:
    """The cells before the last check, each as `shown(cell)` renders it for a reader."""
    last_check = max((i for i, cell in enumerate(cells) if CHECK in tags(cell)), default=-1)
    return [(i, shown(cell)) for i, cell in enumerate(cells[:last_check])
            if SOLUTION not in tags(cell)]


def leaks(answers: set[Fragment], texts: list[tuple[int, str]]) -> dict[int, list[str]]:
    """Per cell, the answers' fragments its text shows, each written as one line."""
    found = {}
    for i, text in texts:
        if hits := answers & fragments(text):
            found[i] = sorted(" ".join(hit) for hit in hits)
    return found


# The kit's files that hold exercises' answers on purpose, by path (a folder ends with /),
# each with its reason; the kit's README says the same to the student. Short on purpose:
# anything else in the kit that holds an answer is a leak.
DECLARED = {
    "src/stages/": "the course's model, stage by stage: the notebooks import it, and some "
                   "exercises ask for a piece of it, to be written without looking",
    "src/toolkit/batching/batches.py": "notebook 00's pad_batch, as `pad`: every later "
                                       "notebook's batches are padded by it",
    "src/toolkit/checkers/": "each check compares an answer with a reference of its own, on "
                             "cases of its own (the masks, the rotation, the positions...)",
    "src/toolkit/objectives.py": "the losses notebooks 01 to 03 train with, which answer 01's "
                                 "exercise 2 and 02's exercise 2: the notebooks name them",
    "src/toolkit/search/sampling.py": "notebook 14's nucleus sampling: its German model and "
                                      "the Try-it page sample with it",
    "src/course_tools/mutations.py": "the bugs notebook 09 plants, each as the edit that plants "
                                     "it, as the notebook shows them",
    "assets/mutants.json": "the table notebook 09 prints: the first test that fails on each "
                           "bug, which its first exercise asks for",
}


def declared(name: str) -> bool:
    return any(name == path or path.endswith("/") and name.startswith(path)
               for path in DECLARED)


def kit_leaks(files: dict[str, bytes], answers: Iterable[set[Fragment]]) -> dict[str, list[str]]:
    """Per kit file (by its path in the kit) but the notebooks and the declared ones, the
    answers' fragments it holds, each written as one line. Binary files are left out."""
    every = set().union(*answers)
    found = {}
    for name, content in sorted(files.items()):
        if name.startswith("notebooks/") or declared(name):
            continue
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:  # a checkpoint, a picture
            continue
        if hits := every & fragments(text):
            found[name] = sorted(" ".join(hit) for hit in hits)
    return found
