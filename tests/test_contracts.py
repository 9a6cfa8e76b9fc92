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


def planted(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """The contracts checked on a copy of the code with one import added to `module`."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = (tmp_path / "src" / module.replace(".", "/")).with_suffix(".py")
    path.write_text(path.read_text() + f"\n{line}  # planted\n")
    return lint(tmp_path)


@pytest.mark.slow
def test_a_planted_cycle_fails_and_is_named(tmp_path):
    result = planted(tmp_path, "toolkit.search.greedy", "from toolkit.search import decoding")
    assert result.returncode == 1
    assert "no import cycles between the modules of a package BROKEN" in result.stdout
    assert ".greedy -> .decoding" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("module", "line", "named"), [
    # the library reaching up into the command and into the machinery
    ("toolkit.text.vocab", "from toolkit.train import world",
     "toolkit.text.vocab -> toolkit.train.world"),
    ("toolkit.learning.training", "from course_tools import ladder",
     "toolkit.learning.training -> course_tools.ladder"),
])
def test_a_planted_upward_import_fails_and_is_named(tmp_path, module, line, named):
    result = planted(tmp_path, module, line)
    assert result.returncode == 1
    assert "top to bottom: site, machinery, commands, library, stages BROKEN" in result.stdout
    assert named in result.stdout


@pytest.mark.slow
def test_a_stage_that_imports_more_than_the_stage_api_fails(tmp_path):
    result = planted(tmp_path, "stages.stage07_multi_head", "from toolkit.text import corpus")
    assert result.returncode == 1
    assert "a stage imports torch and the stage API only" in result.stdout
    assert "stages.stage07_multi_head -> toolkit.text.corpus" in result.stdout
