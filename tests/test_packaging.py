"""The set-up files must agree, or a conda user and a pip user get different courses."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pins(text: str) -> set[str]:
    return set(re.findall(r"^\s*(?:- )?([A-Za-z0-9_.\-]+==[^\s#]+)", text, re.MULTILINE))


def test_every_requirement_is_pinned_exactly():
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text()
             .splitlines()]
    requirements = [line for line in lines if line]
    assert requirements and all("==" in line for line in requirements), requirements
    assert "torch==2.13.0" in requirements


def test_environment_yml_installs_the_same_pins():
    assert pins((ROOT / "environment.yml").read_text()) == pins(
        (ROOT / "requirements.txt").read_text())


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / "README.md").read_text()
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), re.MULTILINE)


@pytest.mark.slow
def test_packages_import_from_this_checkout():
    """The editable install must point at src/, so notebooks import the code you edit."""
    code = "import stages, toolkit; print(stages.__file__); print(toolkit.__file__)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd="/").stdout
    for line in output.splitlines():
        assert Path(line).resolve().is_relative_to(ROOT / "src"), line


@pytest.mark.slow  # runs git
def test_nothing_tracked_is_also_ignored():
    """A tracked path that .gitignore also matches (a committed .venv link, say) is one that
    git may overwrite or drop without asking on the next checkout."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked_and_ignored = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"], cwd=ROOT,
        capture_output=True, text=True, check=True).stdout.split()
    assert tracked_and_ignored == [], tracked_and_ignored
