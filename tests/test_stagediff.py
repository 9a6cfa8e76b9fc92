"""The stage diff shows real changes only (`# New:` markers never count), every one of them
in each layout: side by side and unified in HTML, and in a terminal of any width."""

import html
import re
import subprocess
from pathlib import Path

import pytest

from toolkit.figures.stagediff import main as stagediff_main
from toolkit.figures.stagediff import stage_diff, strip_markers

ROOT = Path(__file__).resolve().parents[1]


def test_markers_are_stripped_and_marker_only_lines_dropped():
    source = "x = 1  # New: a marker\n# New: a whole line\n\ny = 2  # a normal comment\n"
    assert strip_markers(source) == ["x = 1", "", "y = 2  # a normal comment"]


def test_a_moved_marker_is_not_a_change(tmp_path, monkeypatch):
    import toolkit.figures.stagediff as stagediff

    (tmp_path / "stage01_naive_attention.py").write_text("a = 1  # New: first\nb = 2\n")
    (tmp_path / "stage02_batching.py").write_text("a = 1\nb = 2  # New: second\nc = 3\n")
    monkeypatch.setattr(stagediff, "STAGES_DIR", tmp_path)
    diff = stage_diff(1, 2)
    assert diff.changed_lines() == (0, 1)
    assert "+c = 3" in diff.unified() and "New:" not in diff.unified()


def test_the_batching_diff_shows_the_batched_transpose():
    diff = stage_diff(1, 2)
    assert "+        scores = q @ k.transpose(-2, -1)" in diff.unified()
    assert "-        scores = q @ k.T" in diff.unified()
    page = diff.html()
    assert "stage02_batching.py" in page and "New:" not in page
    assert diff.summary.startswith("Stage 02 adds")


def visible_text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def rows_of(table: str, css: str) -> list[str]:
    """The text of every code cell with the class `css` in one table of the page."""
    return [visible_text(cell) for cell in re.findall(rf'<td class="{css}">(.*?)</td>', table)]


@pytest.mark.parametrize(("old", "new"), [(1, 2), (2, 3), (6, 7), (1, 7)])
def test_both_html_layouts_show_every_changed_line_highlighted(old, new):
    diff = stage_diff(old, new)
    unified = diff.unified().splitlines()[2:]
    removed = [line[1:] for line in unified if line.startswith("-")]
    added = [line[1:] for line in unified if line.startswith("+")]
    page = diff.html()
    split, one_column = page.split('<table class="sd-table sd-unified">')
    for table in (split, one_column):
        assert rows_of(table, "sd-removed") == removed
        assert rows_of(table, "sd-added") == added
    assert '<span class="sd-k">def</span>' in page  # Pygments, with the diff's own prefix
    assert f"{len(removed)} lines removed, {len(added)} added" in page


def test_the_html_picks_its_layout_by_the_width_it_is_given():
    page = stage_diff(2, 3).html()
    assert "container-type: inline-size" in page
    assert re.search(r"@container \(max-width: \d+px\) \{\s*\.stagediff \.sd-split "
                     r"\{ display: none; \}", page)
    assert "table-layout: fixed" in page and "overflow-wrap: anywhere" in page
    style = page[page.index("<style>") : page.index("</style>")]
    rules = re.findall(r"^([^{}@\n][^{}\n]*)\{", style, re.M)  # each rule's selectors
    assert all(selector.strip().startswith(".stagediff") for rule in rules
               for selector in rule.split(",")), "a rule would style the rest of the page"


def test_a_docstring_over_several_lines_keeps_its_colour_on_each():
    from toolkit.figures.stagediff import highlighted

    lines = highlighted(['def f():', '    """One', '    two."""', '    return 1'])
    assert len(lines) == 4
    assert all("sd-s" in line for line in lines[1:3])  # a string token (sd-sd: docstring)
    assert "sd-s" not in lines[3]


@pytest.mark.parametrize("columns", [80, 160, 240])
def test_the_terminal_text_shows_every_changed_line_at_any_width(columns):
    """Side by side only where both files' longest lines fit; every change keeps its sign."""
    diff = stage_diff(2, 3)
    text = diff.text(columns)
    changes = [line for line in diff.unified().splitlines()[2:] if line[:1] in "+-"]
    side_by_side = " │ " in text
    assert side_by_side == (columns >= 240)
    if side_by_side:
        assert max(len(line) for line in text.splitlines()) <= columns
        bar = text.splitlines()[1].index(" │ ")  # where the old file's half ends
        halves = [half for line in text.splitlines()[2:] for half in (line[:bar], line[bar + 3:])]
        shown = [re.sub(r"^\s*\d+ ", "", half).rstrip() for half in halves
                 if re.match(r"^\s*\d+ [-+]( |$)", half)]
        assert sorted(shown) == sorted((line[0] + " " + line[1:]).rstrip() for line in changes)
    else:
        assert all(line in text for line in changes)
    assert "\033[" not in text and "\033[" in diff.text(columns, colour=True)


def test_unknown_or_reversed_stages_are_refused():
    with pytest.raises(ValueError, match="stages run from 1 to 7"):
        stage_diff(1, 9)
    with pytest.raises(ValueError, match="earlier stage with a later one"):
        stage_diff(2, 1)


def test_one_stage_is_compared_with_the_next_and_a_bad_pair_says_how(capsys):
    assert stagediff_main(["4"]) == 0
    assert "+++ stage05_stacking.py" in capsys.readouterr().out
    assert stagediff_main(["4", "2"]) == 2
    assert "not 4 with 2" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(("goals", "stages"), [
    (["diff", "03", "04"], "03 04"), (["diff", "A=04"], "04"), (["diff", "A=03", "B=05"], "03 05")])
def test_make_diff_passes_the_stages_it_was_given(goals, stages):
    """`make diff 03 04` once ran the 01→02 diff, then failed on "03" as a target."""
    dry = subprocess.run(["make", "-n", "--no-print-directory", *goals], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    runs = [line for line in dry.stdout.splitlines() if "toolkit.figures.stagediff" in line]
    assert len(runs) == 1 and runs[0].rstrip().endswith(f"-m toolkit.figures.stagediff {stages}")
