"""Set the course up and open it, on Linux, macOS or Windows, with nothing but Python.

    python3 course.py setup               the pinned virtualenv in .venv, unless it is current
                                          for today's pins (make does this first)
    python3 course.py student [--to DIR]  that, then the student notebooks in DIR (student/)
    python3 course.py lab [--to DIR]      all of that, then JupyterLab on DIR

On Windows type `py` for `python3`. Only the standard library runs here: the course's own
code runs in .venv, where the set-up installs it. A folder of student notebooks may lie
anywhere (outside this folder too); it works as long as this folder stays where it is.
"""

from __future__ import annotations  # so that an older Python gets to say it is too old

import argparse
import hashlib
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
VENV_PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
INSTALLED = VENV / ".installed"  # the stamp make reads too: what the set-up was done for
PINS = (ROOT / "requirements.txt", ROOT / "pyproject.toml", Path(__file__).resolve())
SUPPORTED = ((3, 11), (3, 13))  # as pyproject.toml's requires-python
CPU_TORCH = "https://download.pytorch.org/whl/cpu"  # PyTorch's own index of CPU-only builds


def run(*command: object) -> None:
    """Run a set-up step, stopping at the first that fails, with the command it was."""
    printable = " ".join(str(part) for part in command)
    if subprocess.call([str(part) for part in command]) != 0:
        sys.exit(f"course.py: this step failed: {printable}\n(its own message is above)")


def pinned(cpu_torch: bool = False) -> str:
    """A hash of what decides the virtualenv: the pins, the set-up itself, the Python .venv
    was made with (not the one running this), and whether torch came from the CPU index.

    By content, not by date: a kit unzipped over an older one dates every file alike, so a
    new pin may be older than the stamp of the set-up it should undo."""
    config = VENV / "pyvenv.cfg"
    digest = hashlib.sha256(config.read_bytes() if config.exists() else b"no virtualenv")
    digest.update(b"cpu" if cpu_torch else b"")
    for pin in PINS:
        digest.update(pin.read_bytes())
    return digest.hexdigest()


def is_set_up(cpu_torch: bool = False) -> bool:
    """The virtualenv is current if its stamp holds the hash of today's pins (a set-up with
    torch's CPU build serves a plain one too, not the other way round)."""
    try:
        stamp = INSTALLED.read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return stamp == pinned(True) or (not cpu_torch and stamp == pinned())


def make_virtualenv() -> None:
    """.venv with its own pip; one that a failed or stopped set-up left without is made again."""
    if VENV_PYTHON.exists() and subprocess.call(
            [str(VENV_PYTHON), "-m", "pip", "--version"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
        return
    if subprocess.call([sys.executable, "-m", "venv", "--clear", str(VENV)]) != 0:
        sys.exit("course.py: Python could not make the virtualenv .venv (its message is above). "
                 "On Debian or Ubuntu, install it first: sudo apt install python3-venv; "
                 "then run this command again.")


def set_up(cpu_torch: bool = False) -> None:
    """Create .venv and install the exact pins, then the course's packages (editable)."""
    if not SUPPORTED[0] <= sys.version_info[:2] <= SUPPORTED[1]:
        sys.exit(f"course.py: this is Python {platform.python_version()}; the course needs "
                 f"3.{SUPPORTED[0][1]} to 3.{SUPPORTED[1][1]}. Run it with one of those "
                 "(python3.12 course.py ..., or py -3.12 course.py ... on Windows).")
    make_virtualenv()
    # pip takes torch (and uv); uv then fetches the other pins side by side, in seconds.
    pins = re.findall(r"^((?:torch|uv)==[^\s#]+)", PINS[0].read_text(), flags=re.M)
    pip = (VENV_PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    if cpu_torch:  # on Linux, PyPI's torch is the CUDA build, several GB
        torch = [pin for pin in pins if pin.startswith("torch==")]
        run(*pip, "--index-url", CPU_TORCH, *torch)
    run(*pip, *pins)
    uv = (VENV_PYTHON, "-m", "uv", "pip", "install", "--quiet", "--python", VENV_PYTHON,
          "--link-mode", "copy")
    run(*uv, "-r", PINS[0])
    run(*uv, "--no-deps", "-e", ROOT)
    INSTALLED.write_text(pinned(cpu_torch) + "\n", encoding="utf-8")


def write_student(folder: Path, cpu_torch: bool) -> None:
    """The notebooks without their answers; copies already there (a student's work) are kept."""
    if not is_set_up(cpu_torch):
        set_up(cpu_torch)
    run(VENV_PYTHON, "-m", "course_tools.student", "--to", folder)


def open_lab(folder: Path, cpu_torch: bool, jupyter_options: list[str]) -> None:
    """JupyterLab on the student folder, with the course's Python as its kernel."""
    write_student(folder, cpu_torch)
    if os.name != "nt" and os.geteuid() == 0:
        jupyter_options = ["--allow-root", *jupyter_options]  # containers and cloud VMs
    print(f"Opening JupyterLab on {folder}: start with 00_data_and_tokens.ipynb. "
          "Ctrl-C here stops it.", flush=True)
    command = [str(VENV_PYTHON), "-m", "jupyter", "lab", *jupyter_options]
    os.chdir(folder)
    if os.name != "nt":  # JupyterLab takes this process's place: a signal to it reaches it
        os.execv(command[0], command)
    try:
        sys.exit(subprocess.call(command))
    except KeyboardInterrupt:
        sys.exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python3 course.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    setup = commands.add_parser("setup", help="the pinned virtualenv in .venv")
    student = commands.add_parser("student", help="the student notebooks in --to")
    lab = commands.add_parser(
        "lab", help="the student notebooks, opened in JupyterLab",
        description="Any other option goes to JupyterLab: --no-browser, --port 8890, ...")
    for command in (setup, student, lab):
        command.add_argument(
            "--cpu", action="store_true",
            help="Linux without an NVIDIA GPU: take torch's CPU build from PyTorch's index "
                 "(about 200 MB, where PyPI's Linux build with CUDA is several GB)")
    setup.add_argument("--force", action="store_true",
                       help="install the pins again although .venv was set up for them")
    setup.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)  # make's
    for command in (student, lab):
        command.add_argument("--to", type=Path, default=ROOT / "student",
                             help="the folder for the notebooks (default: student/ here)")
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "setup":
        if args.force or not is_set_up(args.cpu):
            set_up(args.cpu)
        elif not args.quiet:
            print(f"{VENV} is set up for these pins already (course.py setup --force installs "
                  f"them again)")
    elif args.command == "student":
        write_student(args.to.resolve(), args.cpu)
    else:  # the rest goes to JupyterLab: --no-browser, --port 8890, ...
        open_lab(args.to.resolve(), args.cpu, rest)


if __name__ == "__main__":
    main()
