"""Hints come in steps: the symptom first, the same mistake again adds its cause, the third
time the fix; an untouched stub's first hint names a symptom, never the answer; and every
answer the notebooks give passes."""

import ast
import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_tools.student import CHECK, SOLUTION, STUB, tags
from toolkit.checkers import check, verdicts
from toolkit.checkers.verdicts import MORE, Hint
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

ROOT = Path(__file__).resolve().parents[1]
CAUSAL_FIX = "torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)"


@pytest.fixture(autouse=True)
def fresh_kernel():
    verdicts.forget()


def told(checker, *answers) -> str:
    with pytest.raises(check.NotYet) as caught:
        checker(*answers)
    return str(caught.value)


def sees_one_ahead(length):
    """Each row sees the next position too: the future leaks, by one."""
    return torch.ones(length, length, dtype=torch.bool).triu(2)


def hides_the_diagonal(length):
    return torch.ones(length, length, dtype=torch.bool).triu(0)


def leaks_at_row_2(length):
    mask = torch.ones(length, length, dtype=torch.bool).triu(1)
    mask[2:3, 3:] = False  # row 2 sees the whole future, when there is a row 2
    return mask


def test_a_mistake_is_told_symptom_then_cause_then_fix():
    steps = [told(check.causal_mask, sees_one_ahead) for _ in range(4)]
    symptom = "sees_one_ahead(5): row 0 can see position 1"
    assert steps[0] == symptom + MORE[1]
    assert steps[1] == (f"{symptom}. Why: the mask lets the future through: a position must see "
                        f"none of the positions after it{MORE[2]}")
    assert steps[2] == (f"{steps[1].removesuffix(MORE[2])}. Fix: True strictly above the "
                        f"diagonal: {CAUSAL_FIX}")
    assert steps[3] == steps[2], "the fix stays"


def test_a_different_mistake_starts_its_own_count():
    told(check.causal_mask, sees_one_ahead)
    assert "Why:" in told(check.causal_mask, sees_one_ahead)
    assert told(check.causal_mask, hides_the_diagonal).endswith(MORE[1])
    assert "Fix:" in told(check.causal_mask, sees_one_ahead)


def test_the_same_mistake_with_another_symptom_continues_its_count():
    """The cause names the mistake: row 2's leak and row 0's are the same one."""
    assert told(check.causal_mask, leaks_at_row_2).startswith("leaks_at_row_2(5): row 2 can see")
    second = told(check.causal_mask, sees_one_ahead)
    assert "row 0 can see position 1. Why:" in second


def test_the_same_mistake_counts_apart_in_another_checker():
    returns_nothing = "got NoneType, not a tensor"
    told(check.causal_mask, lambda length: None)
    assert "Why:" in told(check.causal_mask, lambda length: None)
    first = told(check.scaled_scores, lambda q, k: None)
    assert returns_nothing in first and "Why:" not in first


def test_forgetting_tells_every_mistake_from_its_symptom_again():
    told(check.causal_mask, sees_one_ahead)
    verdicts.forget()
    assert told(check.causal_mask, sees_one_ahead).endswith(MORE[1])


def test_a_hint_with_nothing_more_to_tell_does_not_ask_for_another_run():
    assert Hint("it calls x").told(1) == Hint("it calls x").told(3) == "it calls x"
    assert Hint("a", "b").told(2) == "a. Why: b"
    assert str(Hint("a", "b", "c")) == "a. Why: b. Fix: c", "a test sees the whole hint"


def test_every_step_shows_in_ipython_as_the_hint_alone():
    for _ in range(3):
        with pytest.raises(check.NotYet) as caught:
            check.causal_mask(sees_one_ahead)
        assert caught.value._render_traceback_() == [f"\N{BALLOT X} Not yet: {caught.value}"]


# --- the notebooks' untouched stubs ------------------------------------------------------

TAUGHT = sorted([*(ROOT / "notebooks").glob("0[0-7]_*.ipynb"),
                 *(ROOT / "notebooks").glob("14_*.ipynb")])
# An English word that is also an attribute of some answer ("the shape is ...").
PLAIN_WORDS = {"shape"}


def exercises():
    """(notebook, statement, stub, solution, check) for every exercise of the taught notebooks."""
    for path in TAUGHT:
        cells = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(cells):
            if SOLUTION in tags(cell):
                assert STUB in tags(cells[i - 1]) and CHECK in tags(cells[i + 1])
                statement, stub, solution, check_cell = ("".join(cells[j]["source"])
                                                         for j in (i - 2, i - 1, i, i + 1))
                yield pytest.param(statement, stub, solution, check_cell,
                                   id=f"{path.name[:2]}-{cell['id']}")


def notebook_names() -> dict:
    """What an exercise's cells may use: the names the notebooks import above them."""
    return {"torch": torch, "F": F, "nn": nn, "math": math, "check": check,
            "PAD_ID": PAD_ID, "UNK_ID": UNK_ID, "BOS_ID": BOS_ID, "EOS_ID": EOS_ID}


def api_words(source: str) -> set[str]:
    """The attributes, keywords and functions a piece of code uses: what an answer line names."""
    tree = ast.parse(source)
    words = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    words |= {keyword.arg for call in calls for keyword in call.keywords if keyword.arg}
    return words | {call.func.id for call in calls if isinstance(call.func, ast.Name)}


@pytest.mark.parametrize(("statement", "stub", "solution", "check_cell"), list(exercises()))
def test_an_untouched_stubs_first_hint_names_the_symptom_not_the_answer(statement, stub,
                                                                        solution, check_cell):
    """What the answer uses and neither the stub nor the exercise's statement shows (triu,
    softmax, ignore_index, finfo ...) must not be in the first hint."""
    namespace = notebook_names()
    exec(stub, namespace)
    with pytest.raises(check.NotYet) as caught:
        exec(check_cell, namespace)
    first = str(caught.value)
    assert first.endswith(MORE[1]) and "Why:" not in first and "Fix:" not in first, first
    given = api_words(stub) | set(re.findall(r"\w+", stub + statement)) | PLAIN_WORDS
    answer = api_words(solution) - given
    assert not [word for word in answer if re.search(rf"\b{word}\b", first)], (answer, first)


@pytest.mark.parametrize(("statement", "stub", "solution", "check_cell"), list(exercises()))
def test_every_notebooks_own_answer_passes_its_check(statement, stub, solution, check_cell,
                                                     capsys):
    """No answer the course gives is refused as calling the answer, nor told a hint."""
    namespace = notebook_names()
    exec(solution, namespace)
    exec(check_cell, namespace)
    assert capsys.readouterr().out.startswith("\N{CHECK MARK}")
