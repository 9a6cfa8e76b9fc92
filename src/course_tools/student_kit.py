"""Write the student kit: one zip with what a student needs to run the course on their own
machine (Linux, macOS or Windows), and none of the answers.

A student unzips it and runs `python3 course.py lab`. It holds the repository's tracked files
but the teacher's: the notebooks are the student versions, the README is the students' guide
(docs/students.md; the course's own README, which the notebooks cite, is COURSE_README.md),
and the tests, the teacher's guide, the CI scripts and the maintainer's pages stay out. The
stage modules stay in, since the notebooks import them: they are the course's code, and
some exercises ask for what they hold, to be written without looking. `make student-kit`
(what runs this) writes build/student-kit/transformer-course.zip, from a git clone.
"""

import argparse
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from course_tools.student import ExerciseLayoutError, student_version
from toolkit.paths import PROJECT_ROOT

KIT = "transformer-course"  # the folder the zip unpacks to
TARGET = PROJECT_ROOT / "build" / "student-kit" / f"{KIT}.zip"
GUIDE = "docs/students.md"
COURSE_README = "COURSE_README.md"  # the repository's README, which the notebooks cite
# The teacher's: the answers (notebooks, replaced; tests), the guides, CI and maintenance.
LEFT_OUT = ("notebooks/", "tests/", "docs/", ".ci/", "Makefile", "README.md", ".gitignore")


def tracked_files(root: Path = PROJECT_ROOT) -> list[str]:
    """The repository's files as git tracks them: nothing built, cached or installed."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True,
                                capture_output=True, text=True, encoding="utf-8").stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"make student-kit needs a git clone of the course ({error})") from None
    return sorted(name for name in listed.split("\0") if name)


def kit_files(root: Path = PROJECT_ROOT) -> dict[str, bytes]:
    """Each file of the kit by its path in the zip."""
    files = {name: (root / name).read_bytes() for name in tracked_files(root)
             if not name.startswith(LEFT_OUT)}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        notebook = student_version(json.loads(path.read_text(encoding="utf-8")), path.name)
        text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        files[f"notebooks/{path.name}"] = text.encode()
    files["README.md"] = (root / GUIDE).read_bytes()
    files[COURSE_README] = (root / "README.md").read_bytes()
    return {f"{KIT}/{name}": content for name, content in files.items()}


def write_kit(target: Path = TARGET, root: Path = PROJECT_ROOT) -> int:
    """Write the zip; return how many files it holds."""
    files = kit_files(root)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # the same kit, byte
            # for byte, from the same course
            executable = name.endswith("course.py")
            entry.external_attr = (0o755 if executable else 0o644) << 16  # readable by all
            archive.writestr(entry, content, zipfile.ZIP_DEFLATED)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(buffer.getvalue())
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.student_kit",
                                     description=__doc__)
    parser.add_argument("--to", type=Path, default=TARGET, help="the zip to write")
    args = parser.parse_args(argv)
    try:
        count = write_kit(args.to)
    except ExerciseLayoutError as error:
        print(f"make student-kit: {error}", file=sys.stderr)
        return 1
    size = args.to.stat().st_size / 2**20
    print(f"{args.to}: {count} files, {size:.1f} MB. Give it to the class: each student "
          f"unzips it and runs `python3 course.py lab` in {KIT}/ (README.md there says more)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
