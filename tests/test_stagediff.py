"""The stage diff shows real changes only: `# New:` markers never count as a change."""

import pytest

from toolkit.stagediff import stage_diff, strip_markers


def test_markers_are_stripped_and_marker_only_lines_dropped():
    source = "x = 1  # New: a marker\n# New: a whole line\n\ny = 2  # a normal comment\n"
    assert strip_markers(source) == ["x = 1", "", "y = 2  # a normal comment"]


def test_a_moved_marker_is_not_a_change(tmp_path, monkeypatch):
    import toolkit.stagediff as stagediff

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
    assert "<table" in page and "stage02_batching.py" in page and "New:" not in page
    assert diff.summary.startswith("Stage 02 adds")


def test_unknown_or_reversed_stages_are_refused():
    with pytest.raises(ValueError, match="stages run from 1 to 7"):
        stage_diff(1, 9)
    with pytest.raises(ValueError, match="earlier stage with a later one"):
        stage_diff(2, 1)
