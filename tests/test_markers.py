"""`make quick` leaves out the tests marked slow, so a test that starts processes must say so.

A test is slow when it starts another process (a Python subprocess, torchrun, a notebook
kernel, a mutant's test run, the ladder's workers), directly, through a fixture, or through
a helper of its own file or of a helper module such as `interruptions`. Each such test
carries `@pytest.mark.slow` beside it (or its file a `pytestmark`); this reads every test
file and names any that does not, so a new slow test can never land in the inner loop.
"""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# What starts a process: modules, classes and the course's own process-starting functions.
STARTS_A_PROCESS = {"subprocess", "Popen", "torchrun", "multiprocessing", "ProcessPoolExecutor",
                    "NotebookClient", "try_mutation", "run_tests", "unproven", "train_all"}


def names_in(node: ast.AST) -> set[str]:
    """Every name and attribute a piece of code mentions, its parameters too (fixtures)."""
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.Attribute):
            found.add(child.attr)
        elif isinstance(child, ast.arg):
            found.add(child.arg)
        elif isinstance(child, ast.alias):
            found.add(child.asname or child.name.split(".")[-1])
    return found


def process_starters(tree: ast.Module, known: set[str]) -> set[str]:
    """The file's own functions (fixtures included) that start a process, however indirectly."""
    functions = {node.name: names_in(node) for node in tree.body
                 if isinstance(node, ast.FunctionDef)}
    starters = set()
    while True:
        more = {name for name, mentioned in functions.items()
                if name not in starters and mentioned & (STARTS_A_PROCESS | known | starters)}
        if not more:
            return starters
        starters |= more


def helper_starters() -> set[str]:
    """What the helper modules beside the tests (not test files) export that starts one."""
    starters = set()
    for path in TESTS.glob("*.py"):
        if not path.name.startswith(("test_", "conftest")):
            starters |= process_starters(ast.parse(path.read_text()), set())
    return starters


def marked_slow(node: ast.AST) -> bool:
    return any("slow" in names_in(decorator) for decorator in getattr(node, "decorator_list", []))


def unmarked_slow_tests(path: Path, helpers: set[str]) -> list[str]:
    """The tests of one file that start a process but are not marked slow."""
    tree = ast.parse(path.read_text())
    whole_file = any(isinstance(node, ast.Assign) and "pytestmark" in names_in(node)
                     and "slow" in names_in(node.value) for node in tree.body)
    if whole_file:
        return []
    imported = {name for node in tree.body if isinstance(node, ast.ImportFrom)
                for name in names_in(node) if name in helpers}
    starters = process_starters(tree, imported)
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and node.name.startswith("test_") and node.name in starters
            and not marked_slow(node)]


@pytest.mark.parametrize("path", sorted(TESTS.rglob("test_*.py")),
                         ids=lambda path: str(path.relative_to(TESTS)))
def test_every_test_that_starts_a_process_is_marked_slow(path):
    unmarked = unmarked_slow_tests(path, helper_starters())
    assert unmarked == [], (f"{path.name}: {unmarked} start processes: mark them "
                            f"@pytest.mark.slow so that make quick leaves them out")


def test_the_check_finds_a_process_started_through_a_fixture_or_a_helper(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text('''
import subprocess
import pytest
from interruptions import run


@pytest.fixture
def trained():
    return subprocess.run(["true"])


def spawn_twice():
    return run(["true"]), run(["true"])


def test_through_a_fixture(trained):
    assert trained


def test_through_a_helper():
    assert spawn_twice()


@pytest.mark.slow
def test_marked():
    assert subprocess.run(["true"])


def test_quick():
    assert 1 + 1 == 2
''')
    assert unmarked_slow_tests(planted, helper_starters()) == ["test_through_a_fixture",
                                                               "test_through_a_helper"]
    assert "run" in helper_starters()  # interruptions.run starts the training command
