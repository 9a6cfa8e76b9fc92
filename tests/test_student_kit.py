"""The student kit holds what a student needs on their own laptop, and none of the answers."""

import json
import posixpath
import re
import zipfile

import pytest

from course_tools.answer_leaks import (
    DECLARED,
    answer_fragments,
    as_run,
    code_tokens,
    declared,
    kit_leaks,
    leaks,
    shown_before_the_checks,
)
from course_tools.student import SOLUTION, TEACHER, source, tags
from course_tools.student_kit import (
    COURSE_README,
    IN_THE_REPOSITORY,
    KIT,
    LINK,
    ON_THE_SITE,
    kit_files,
    kit_links,
    write_kit,
)
from toolkit.paths import PROJECT_ROOT

NOTEBOOKS = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def kit() -> dict[str, bytes]:
    files = kit_files()
    assert all(name.startswith(f"{KIT}/") for name in files)
    return {name.removeprefix(f"{KIT}/"): content for name, content in files.items()}


def test_the_kit_runs_the_course_without_make(kit):
    """course.py and what it installs; the course's code and data; every notebook."""
    for needed in ("course.py", "requirements.txt", "pyproject.toml", "environment.yml",
                   "LICENSE", "src/stages/stage03_masking.py", "src/toolkit/checkers/check.py",
                   "assets/data/train.jsonl", "assets/ladder.json"):
        assert needed in kit, needed
    notebooks = sorted(name for name in kit if name.startswith("notebooks/"))
    assert notebooks == sorted(f"notebooks/{path.name}"
                               for path in (PROJECT_ROOT / "notebooks").glob("*.ipynb"))
    assert kit["README.md"] == (PROJECT_ROOT / "docs" / "students.md").read_bytes()
    course_readme = (PROJECT_ROOT / "README.md").read_text()  # which the notebooks cite
    assert kit[COURSE_README].decode() == kit_links(course_readme, "README.md", set(kit))


def test_the_kit_holds_no_answer_and_no_teachers_note(kit):
    assert not [name for name in kit if name.startswith(("tests/", "docs/", ".ci/"))]
    for name in (name for name in kit if name.endswith(".ipynb")):
        cells = json.loads(kit[name])["cells"]
        assert not [cell for cell in cells if {SOLUTION, TEACHER} & set(tags(cell))], name
        teacher = json.loads((PROJECT_ROOT / name).read_text(encoding="utf-8"))["cells"]
        answers = answer_fragments(teacher)
        assert leaks(answers, shown_before_the_checks(cells, as_run)) == {}, name
        assert all(not cell.get("outputs") for cell in cells), name


def test_the_zip_unpacks_to_one_folder_readable_by_all_and_is_the_same_each_time(tmp_path):
    count = write_kit(tmp_path / "kit.zip")
    with zipfile.ZipFile(tmp_path / "kit.zip") as archive:
        names = archive.namelist()
        assert archive.testzip() is None
        modes = {entry.filename: entry.external_attr >> 16 for entry in archive.infolist()}
    assert len(names) == count and {name.split("/")[0] for name in names} == {KIT}
    assert modes[f"{KIT}/course.py"] == 0o755 and modes[f"{KIT}/README.md"] == 0o644
    write_kit(tmp_path / "again.zip")  # a teacher can tell two kits apart by their bytes
    assert (tmp_path / "again.zip").read_bytes() == (tmp_path / "kit.zip").read_bytes()


def answers() -> list[set]:
    return [answer_fragments(json.loads(path.read_text())["cells"]) for path in NOTEBOOKS]


def test_no_file_of_the_kit_holds_an_answer_but_the_few_its_readme_names(kit):
    """Its library, assets, course.py and READMEs, scanned for every notebook's answers
    (the notebooks are scanned above, each for its own). Planted: an answer's line added to
    a file of the kit is found."""
    assert kit_leaks(kit, answers()) == {}
    readme = kit["README.md"].decode()
    for path in DECLARED:
        assert path in kit or any(name.startswith(path) for name in kit), f"{path}: not in the kit"
        assert f"`{path}`" in readme, f"the kit's README does not say why {path} holds answers"
    assert len(DECLARED) <= 7, "a short list: move an answer out of the library instead"
    # 00's answer, added to a file the kit does not declare, and to one it does.
    line = max((line for cell in json.loads(NOTEBOOKS[0].read_text())["cells"]
                if SOLUTION in tags(cell) for line in source(cell).splitlines()),
               key=lambda line: len(code_tokens(line)))
    planted = {**kit, "src/toolkit/text/vocab.py": kit["src/toolkit/text/vocab.py"]
               + f"\n{line.strip()}\n".encode(), "COURSE_README.md": kit["COURSE_README.md"]
               + f"\n    {line.strip()}\n".encode()}
    found = kit_leaks(planted, answers())
    assert sorted(found) == ["COURSE_README.md", "src/toolkit/text/vocab.py"], found
    assert declared("src/stages/stage03_masking.py") and not declared("src/stagesX.py")


def links(kit: dict[str, bytes]):
    """(file, link) for every relative link the kit's notebooks and READMEs hold."""
    for name, content in kit.items():
        if name.endswith(".ipynb"):
            texts = [source(cell) for cell in json.loads(content)["cells"]
                     if cell["cell_type"] == "markdown"]
        elif name in ("README.md", COURSE_README):
            texts = [content.decode()]
        else:
            continue
        for text in texts:
            for *_, target in LINK.findall(text):
                path = target.partition("#")[0]
                if path and ":" not in path:
                    yield name, path


def test_every_relative_link_in_the_kits_notebooks_and_readmes_resolves_inside_the_kit(kit):
    found = list(links(kit))
    assert len(found) >= 5, found  # the course README's pictures and notebooks at least
    broken = []
    for name, path in found:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), path))
        if target not in kit and not any(other.startswith(f"{target}/") for other in kit):
            broken.append((name, path))
    assert broken == []


def test_a_link_to_what_the_kit_lacks_says_where_it_is():
    held = {"notebooks/03_masking.ipynb", "README.md", COURSE_README, "assets/ladder.png"}
    text = ("The maintainer's side: [the gate](../docs/maintaining.md#the-gate). "
            "[Notebook 03](03_masking.ipynb), [the guide](../docs/students.md), "
            "[a page](try_it.md), ![the ladder](../assets/ladder.png), "
            "[the paper](https://arxiv.org/abs/1706.03762), [above](#above).")
    assert kit_links(text, "notebooks/04_positional_encoding.ipynb", held) == (
        f"The maintainer's side: the gate ({IN_THE_REPOSITORY}). "
        "[Notebook 03](03_masking.ipynb), [the guide](../README.md), "
        f"a page ({ON_THE_SITE}), ![the ladder](../assets/ladder.png), "
        "[the paper](https://arxiv.org/abs/1706.03762), [above](#above).")
    assert kit_links("On the course site, the [Try it page](try_it.md) runs it.",
                     "notebooks/07_multi_head.ipynb", held) == (
        "On the course site, the Try it page runs it.")  # where it is, said already
    assert kit_links("[Working on it](docs/maintaining.md); [its guide](docs/students.md)",
                     "README.md", held) == (
        f"Working on it ({IN_THE_REPOSITORY}); [its guide](README.md)")


CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
MAKE = re.compile(r"(?:^|[\s$])make ([a-z][\w-]*)")


def test_the_kits_notebooks_give_only_the_commands_and_files_its_readme_gives(kit):
    """A `make` command the README's table does not turn into one that runs in the kit, or
    the course's tests, which the kit lacks, only in a notebook that says at its top that it
    is for maintainers too (notebook 09)."""
    readme = kit["README.md"].decode()
    table = readme.split("## Commands the notebooks mention")[1].split("The others")[0]
    given = set(re.findall(r"`make ([\w-]+)", table))
    assert {"diff", "train", "train-ddp", "lab"} <= given
    foreign, for_maintainers = [], []
    for name in sorted(name for name in kit if name.endswith(".ipynb")):
        cells = json.loads(kit[name])["cells"]
        if "maintainers" in source(cells[0]).split("**Learning goal.**")[0]:
            for_maintainers.append(name)
            continue
        for cell in (cell for cell in cells if cell["cell_type"] == "markdown"):
            text = source(cell)
            foreign += [(name, cell["id"], f"make {command}") for span in CODE.findall(text)
                        for command in MAKE.findall(span) if command not in given]
            foreign += [(name, cell["id"], path) for path in re.findall(r"\btests/[\w/.]*", text)]
    assert foreign == []
    assert for_maintainers == ["notebooks/09_bug_zoo.ipynb"]
