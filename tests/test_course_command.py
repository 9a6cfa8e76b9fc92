"""course.py, a student's way in without make: set-up steps, student copies, JupyterLab."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ROOT / "course.py"
spec = importlib.util.spec_from_file_location("course", COMMAND)
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)


def test_another_python_is_refused_with_the_ones_to_use(monkeypatch):
    monkeypatch.setattr(course, "SUPPORTED", ((3, 8), (3, 9)))
    with pytest.raises(SystemExit, match=r"the course needs 3\.8 to 3\.9\. Run it with one"):
        course.set_up()


# Pythons a student may have first (macOS's own is 3.9), where they are installed here.
def installed_python(version: str) -> Path | str | None:
    """A real interpreter of that version (pyenv's own, or the system's), not a shim."""
    pyenv = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python"))
    return pyenv[0] if pyenv else shutil.which(f"python{version}", path="/usr/bin:/usr/local/bin")


OLDER = [python for version in ("3.8", "3.9", "3.10") if (python := installed_python(version))]


@pytest.mark.slow
@pytest.mark.skipif(not OLDER, reason="no Python older than 3.11 on this machine")
@pytest.mark.parametrize("python", OLDER)
def test_an_older_python_itself_says_which_ones_to_use(python, tmp_path):
    """course.py must get as far as its message on the Python it refuses, not crash first.
    (A copy with no virtualenv: where .venv is current for the pins, nothing needs a set-up,
    so whichever Python runs course.py is left to make the virtualenv's own.)"""
    for name in ("course.py", "requirements.txt", "pyproject.toml"):
        shutil.copy(COMMAND.parent / name, tmp_path)
    refused = subprocess.run([python, tmp_path / "course.py", "setup"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "the course needs 3.11 to 3.13" in refused.stderr


@pytest.mark.slow
def test_a_virtualenv_left_without_pip_is_made_again(monkeypatch, tmp_path):
    """A set-up stopped half way (or python3-venv missing) leaves .venv without pip."""
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    monkeypatch.setattr(course, "VENV", venv)
    monkeypatch.setattr(course, "VENV_PYTHON", python)
    assert subprocess.call([python, "-m", "pip", "--version"], stderr=subprocess.DEVNULL) != 0
    course.make_virtualenv()
    assert subprocess.call([python, "-m", "pip", "--version"], stdout=subprocess.DEVNULL) == 0


@pytest.mark.slow
def test_a_failing_step_stops_with_the_command_it_was():
    with pytest.raises(SystemExit, match="this step failed: .* -c raise SystemExit"):
        course.run(sys.executable, "-c", "raise SystemExit(3)")


def test_the_virtualenv_is_set_up_again_when_a_pin_changes(monkeypatch, tmp_path):
    stamp, pins = tmp_path / ".installed", tmp_path / "requirements.txt"
    pins.write_text("torch==2.13.0\n")
    monkeypatch.setattr(course, "INSTALLED", stamp)
    monkeypatch.setattr(course, "PINS", (pins,))
    assert not course.is_set_up()
    stamp.write_text(course.pinned())
    assert course.is_set_up()
    pins.write_text("torch==2.14.0\n")  # a pin edited after the set-up
    assert not course.is_set_up()


def test_the_set_up_is_for_the_virtualenvs_python_and_its_torch(monkeypatch, tmp_path):
    """Another Python running course.py leaves a current .venv be; a .venv made again with
    another Python is set up again; --cpu asks for torch's CPU build even over a current one."""
    venv, pins = tmp_path / ".venv", tmp_path / "requirements.txt"
    venv.mkdir()
    pins.write_text("torch==2.13.0\n")
    (venv / "pyvenv.cfg").write_text("version = 3.12.3\n")
    monkeypatch.setattr(course, "VENV", venv)
    monkeypatch.setattr(course, "INSTALLED", venv / ".installed")
    monkeypatch.setattr(course, "PINS", (pins,))
    course.INSTALLED.write_text(course.pinned())
    monkeypatch.setattr(course.sys, "version", "3.13.1 (another Python)")
    assert course.is_set_up() and not course.is_set_up(cpu_torch=True)
    course.INSTALLED.write_text(course.pinned(cpu_torch=True))
    assert course.is_set_up() and course.is_set_up(cpu_torch=True)
    (venv / "pyvenv.cfg").write_text("version = 3.13.1\n")
    assert not course.is_set_up()


def test_a_kit_unzipped_over_an_older_one_with_a_new_pin_is_set_up_again(tmp_path):
    """Every entry of a kit is dated 2026-01-01, so the new requirements.txt is older than
    the stamp the first set-up wrote: only its content can tell (fails with dates)."""
    from course_tools.student_kit import KIT, write_kit

    old_zip, new_zip = tmp_path / "old.zip", tmp_path / "new.zip"
    write_kit(old_zip)
    with zipfile.ZipFile(old_zip) as old, zipfile.ZipFile(new_zip, "w") as new:
        for entry in old.infolist():
            content = old.read(entry)
            if entry.filename == f"{KIT}/requirements.txt":
                content = re.sub(rb"torch==[\d.]+", b"torch==2.14.0", content)
            new.writestr(entry, content)
    folder = tmp_path / "laptop"

    def unzipped(kit: Path) -> bool:
        with zipfile.ZipFile(kit) as archive:
            archive.extractall(folder)
            for entry in archive.infolist():  # as unzip does: each file dated as in the zip
                stamp = time.mktime((*entry.date_time, 0, 0, -1))
                os.utime(folder / entry.filename, (stamp, stamp))
        spec = importlib.util.spec_from_file_location("kit_course", folder / KIT / "course.py")
        kit_course = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(kit_course)
        return kit_course

    first = unzipped(old_zip)
    first.INSTALLED.parent.mkdir()
    first.INSTALLED.write_text(first.pinned())  # what its set-up ends with
    assert first.is_set_up()
    second = unzipped(new_zip)
    assert second.INSTALLED.stat().st_mtime > (folder / KIT / "requirements.txt").stat().st_mtime
    assert not second.is_set_up()


def course_py(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMMAND, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_student_writes_the_copies_anywhere_and_keeps_a_students_work(tmp_path):
    folder = tmp_path / "my course"
    first = course_py("student", "--to", str(folder), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    written = sorted(path.name for path in folder.glob("*.ipynb"))
    assert written == sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
    assert "solution" not in (folder / "03_masking.ipynb").read_text()
    (folder / "03_masking.ipynb").write_text("a student's work")
    again = course_py("student", "--to", str(folder), cwd=tmp_path)
    assert "03_masking.ipynb: kept the copy already in" in again.stdout
    assert (folder / "03_masking.ipynb").read_text() == "a student's work"


@pytest.mark.slow
def test_lab_serves_the_student_notebooks_with_the_courses_python(tmp_path):
    """JupyterLab opens on the student folder; its python3 kernel is the virtualenv's."""
    folder = tmp_path / "student"
    # A `python3` kernel of the user's own, for another Python (an old Anaconda's, say): the
    # virtualenv's must still win (jupyter_core prefers a virtualenv's paths to the user's).
    user_kernel = tmp_path / "data" / "kernels" / "python3"
    user_kernel.mkdir(parents=True)
    (user_kernel / "kernel.json").write_text(json.dumps(
        {"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
         "display_name": "Python 3 (another)", "language": "python"}))
    environment = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
                   "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    lab = subprocess.Popen(
        [sys.executable, COMMAND, "lab", "--to", str(folder), "--no-browser",
         "--ServerApp.port=0"], cwd=tmp_path, env=environment, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        address = None
        for line in lab.stdout:
            if found := re.search(r"(http://127\.0\.0\.1:\d+)/lab\?token=(\w+)", line):
                address = found.groups()
                break
        assert address, "JupyterLab printed no address"
        base, token = address

        def api(path: str) -> dict:
            request = urllib.request.Request(f"{base}/api/{path}",
                                             headers={"Authorization": f"token {token}"})
            for _ in range(60):  # the address may be printed before the port takes calls
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        return json.load(response)
                except urllib.error.URLError:
                    time.sleep(0.5)
            raise AssertionError(f"JupyterLab never answered at {base}")

        listed = {item["name"] for item in api("contents")["content"]}
        assert "00_data_and_tokens.ipynb" in listed and "03_masking.ipynb" in listed
        kernels = api("kernelspecs")
        assert kernels["default"] == "python3"
        python3 = kernels["kernelspecs"]["python3"]
        # The spec that starts the server's own Python, the virtualenv's; one installed
        # elsewhere on the machine names another Python, without the course's packages.
        assert python3["spec"]["argv"][0] == "python", python3["spec"]
    finally:
        lab.terminate()
        lab.wait(timeout=30)
