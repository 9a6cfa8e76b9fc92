"""The time table that ends `make test`: each notebook against its budget, from JUnit XML."""

from pathlib import Path

from course_site.notebook_times import budget, main, read_times, table, wall_seconds

# The shape pytest --junitxml writes for nbmake's items (one per notebook).
REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="3" time="250.5">
<testcase classname="build.notebooks.07_multi_head.ipynb" name="07_multi_head.ipynb"
 time="121.0" />
<testcase classname="build.notebooks.08_from_scratch_to_torch_nn.ipynb"
 name="08_from_scratch_to_torch_nn.ipynb" time="179.9" />
<testcase classname="build.notebooks.00_data_and_tokens.ipynb" name="00_data_and_tokens.ipynb"
 time="12.25" />
<testcase classname="build.notebooks.03_masking.ipynb" name="03_masking.ipynb" time="4.5">
<failure message="cell 7 raised">...</failure></testcase>
</testsuite></testsuites>
"""


def written(tmp_path: Path) -> Path:
    """The report above, as the notebook step leaves it in build/."""
    path = tmp_path / "notebook-times.xml"
    path.write_text(REPORT)
    return path


def test_stage_notebooks_get_two_minutes_and_appendices_three():
    assert [budget(name) for name in ("00_a.ipynb", "07_b.ipynb", "08_c.ipynb", "13_d.ipynb")] \
        == [120, 120, 180, 180]


def test_each_notebook_gets_its_own_time_in_course_order(tmp_path):
    times, failed = read_times(written(tmp_path))
    assert list(times.items()) == [("00_data_and_tokens.ipynb", 12.25), ("03_masking.ipynb", 4.5),
                                   ("07_multi_head.ipynb", 121.0),
                                   ("08_from_scratch_to_torch_nn.ipynb", 179.9)]
    assert failed == {"03_masking.ipynb"}
    assert wall_seconds(written(tmp_path)) == 250.5


def test_only_a_notebook_over_its_own_budget_is_flagged_and_a_failed_one_says_so(tmp_path):
    times, failed = read_times(written(tmp_path))
    lines = table(times, 250.5, failed).splitlines()
    flagged = [line.split()[0] for line in lines if line.endswith("over budget")]
    assert flagged == ["07_multi_head.ipynb"]  # 121 s of 120; 08 has 179.9 s of 180
    assert [line.split()[0] for line in lines if line.endswith("failed")] == ["03_masking.ipynb"]
    assert lines[-1].startswith("4 notebooks, 318 s of work in 250 s, 1 over budget")


def test_a_missing_report_says_what_to_run(tmp_path, capsys):
    assert main([str(tmp_path / "absent.xml")]) == 1
    assert "run `make notebooks` first" in capsys.readouterr().err
