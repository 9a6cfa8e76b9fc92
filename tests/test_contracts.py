"""The import contracts in pyproject.toml hold, and can fail: a planted cycle breaks the
check with a message naming the import that closes it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


def lint(project: Path) -> subprocess.CompletedProcess:
    """Check the contracts of `project` (its pyproject.toml and src/), nothing cached."""
    return subprocess.run([str(LINT), "--no-cache"], cwd=project, capture_output=True,
                          text=True, env={"PYTHONPATH": str(project / "src"), "PATH": ""},
                          timeout=120)


@pytest.mark.slow
def test_the_contracts_hold():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout
    assert "0 broken" in result.stdout


@pytest.mark.slow
def test_a_planted_cycle_fails_and_is_named(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    greedy = tmp_path / "src" / "toolkit" / "greedy.py"
    greedy.write_text(greedy.read_text() + "\nfrom toolkit import decoding  # planted\n")
    result = lint(tmp_path)
    assert result.returncode == 1
    assert "no import cycles between the toolkit's modules BROKEN" in result.stdout
    assert ".greedy -> .decoding" in result.stdout
