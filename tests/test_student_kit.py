"""The student kit holds what a student needs on their own laptop, and none of the answers."""

import json
import zipfile

import pytest

from course_tools.answer_leaks import answer_fragments, as_run, leaks, shown_before_the_checks
from course_tools.student import SOLUTION, TEACHER, tags
from course_tools.student_kit import KIT, kit_files, write_kit
from toolkit.paths import PROJECT_ROOT


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
    assert kit["COURSE_README.md"] == (PROJECT_ROOT / "README.md").read_bytes()  # notebooks cite it


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
