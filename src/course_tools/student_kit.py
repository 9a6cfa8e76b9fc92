"""Write the student kit: one zip with what a student needs to run the course on their own
machine (Linux, macOS or Windows), and none of the answers.

A student unzips it and runs `python3 course.py lab`. It holds the repository's tracked files
but the teacher's: the notebooks are the student versions, the README is the students' guide
(docs/students.md; the course's own README, which the notebooks cite, is COURSE_README.md),
and the tests, the teacher's guide, the CI scripts and the maintainer's pages stay out. The
stage modules stay in, since the notebooks import them: they are the course's code, and
some exercises ask for what they hold, to be written without looking (the few other files
that hold answers on purpose: course_tools.answer_leaks.DECLARED). A relative link in a
notebook or a README that would lead nowhere in the kit (to docs/maintaining.md, say, or a
page of the course site) becomes its text, followed by where it is: "(in the course
repository)" or "(on the course site)". `make student-kit` (what runs this) writes
build/student-kit/transformer-course.zip, from a git clone.
"""

import argparse
import io
import json
import posixpath
import re
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
# A markdown link or picture: [text](target) or ![text](target).
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
IN_THE_REPOSITORY, ON_THE_SITE = "in the course repository", "on the course site"


def tracked_files(root: Path = PROJECT_ROOT) -> list[str]:
    """The repository's files as git tracks them: nothing built, cached or installed."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True,
                                capture_output=True, text=True, encoding="utf-8").stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"make student-kit needs a git clone of the course ({error})") from None
    return sorted(name for name in listed.split("\0") if name)


def in_the_kit(name: str) -> str:
    """Where a file of the repository is in the kit (its two READMEs trade places)."""
    return {GUIDE: "README.md", "README.md": COURSE_README}.get(name, name)


def kit_links(text: str, origin: str, held: set[str], root: Path = PROJECT_ROOT) -> str:
    """`text`, read from the repository's file `origin`, with each relative link made to lead
    where it leads in the kit, whose files are `held`: a link to a file the kit holds under
    another name (the students' guide is its README) follows it, and one to what the kit
    does not hold becomes its text and where it is."""
    folder = posixpath.dirname(origin)
    kit_folder = posixpath.dirname(in_the_kit(origin))

    def one(link: re.Match) -> str:
        picture, words, target = link.groups()
        path, hash_, anchor = target.partition("#")
        if not path or re.match(r"[a-z][a-z+.-]*:", path) or path.startswith("/"):
            return link.group(0)  # an anchor in the same page, an address, an absolute path
        linked = posixpath.normpath(posixpath.join(folder, path))
        name = in_the_kit(linked)
        if name in held or any(other.startswith(f"{name}/") for other in held):
            moved = posixpath.relpath(name, kit_folder or ".")
            return f"{picture}[{words}]({moved}{hash_}{anchor})"
        where = IN_THE_REPOSITORY if (root / linked).exists() else ON_THE_SITE
        if where.split()[-1] in link.string[max(0, link.start() - 60):link.start()]:
            return words  # the text says where already: "On the course site, the [Try it..."
        return f"*{words}* (a picture {where})" if picture else f"{words} ({where})"

    return LINK.sub(one, text)


def kit_files(root: Path = PROJECT_ROOT) -> dict[str, bytes]:
    """Each file of the kit by its path in the zip."""
    files = {name: (root / name).read_bytes() for name in tracked_files(root)
             if not name.startswith(LEFT_OUT)}
    notebooks = {f"notebooks/{path.name}": student_version(
        json.loads(path.read_text(encoding="utf-8")), path.name)
        for path in sorted((root / "notebooks").glob("*.ipynb"))}
    held = {*files, *notebooks, "README.md", COURSE_README}
    for name, notebook in notebooks.items():
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                cell["source"] = kit_links(text, name, held, root).splitlines(keepends=True)
        text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        files[name] = text.encode()
    for origin in (GUIDE, "README.md"):
        text = (root / origin).read_text(encoding="utf-8")
        files[in_the_kit(origin)] = kit_links(text, origin, held, root).encode()
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
