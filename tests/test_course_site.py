"""What the site builder does to the notebooks and pages before Sphinx sees them: it refuses
notebooks that never ran, links each stage to its diff, and leaves the answers, the check
outputs and the teacher's guide out of the student edition (tests/site checks the result)."""

import json
from pathlib import Path

import pytest

from course_site import build, pages
from course_site.build import as_a_terminal_shows, for_the_site
from course_site.pages import DIFFS, diff_page, guide_page, index_page
from course_tools.student import CHECK, NOTE_ID, SOLUTION, SPOILER, TEACHER, tags
from toolkit.outline import STAGES

ROOT = Path(__file__).resolve().parents[1]
MASKING = ROOT / "notebooks" / "03_masking.ipynb"


def executed(path: Path) -> dict:
    """The committed notebook as if it had run: every code cell numbered, with an output."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for count, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = count + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"ran {count}"}]
    return notebook


def test_a_notebook_that_never_ran_is_refused_with_what_to_do():
    notebook = json.loads(MASKING.read_text(encoding="utf-8"))  # committed without outputs
    with pytest.raises(ValueError, match="code cells that never ran.*run `make notebooks`"):
        for_the_site(notebook, MASKING.name, student=False)


def test_the_student_edition_drops_answers_and_check_outputs_and_keeps_the_rest():
    """The rest in the same order, but the spoilers: those come last, after a note."""
    notebook = executed(MASKING)
    teacher = for_the_site(notebook, MASKING.name, student=False)
    student = for_the_site(notebook, MASKING.name, student=True)
    shown = [c for c in teacher["cells"] if SOLUTION not in tags(c) and TEACHER not in tags(c)
             and c["id"] != "site-diff-link"]  # the student site has no diff pages to link
    spoilers = [c["id"] for c in shown if SPOILER in tags(c)]
    assert spoilers, "notebook 03 shows its stage diff, tagged spoiler"
    assert [c["id"] for c in student["cells"]] == [
        *(c["id"] for c in shown if SPOILER not in tags(c)), NOTE_ID, *spoilers]
    assert any(SOLUTION in tags(c) for c in teacher["cells"])
    for cell in student["cells"]:
        if cell["cell_type"] == "code":
            assert (cell["outputs"] == []) == (CHECK in tags(cell)), cell["id"]


def test_each_stage_after_the_first_links_the_diff_that_made_it():
    for path, link in [(MASKING, "diff_02_03.md"),
                       (ROOT / "notebooks" / "01_naive_attention.ipynb", None),
                       (ROOT / "notebooks" / "10_training_like_the_paper.ipynb", None)]:
        page = for_the_site(executed(path), path.name, student=False)
        added = [c for c in page["cells"] if c.get("id") == "site-diff-link"]
        assert [link in c["source"] for c in added] == ([True] if link else [])
        student = for_the_site(executed(path), path.name, student=True)
        assert not [c for c in student["cells"] if c.get("id") == "site-diff-link"]


def test_every_stage_has_its_diff_and_the_whole_journey_one():
    assert DIFFS == ([(s.number - 1, s.number) for s in STAGES[1:]] + [(1, STAGES[-1].number)]
                     + [(7, 8)])


def test_the_guide_links_the_pages_beside_it_not_the_notebook_files():
    text = guide_page("See [masking](../notebooks/03_masking.ipynb) and [x](../README.md).")
    assert text == "See [masking](03_masking.ipynb) and [x](../README.md)."


def test_the_index_lists_every_notebook_in_order_and_only_the_teacher_gets_the_guide():
    notebooks = {path.name: executed(path)
                 for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
    teacher, student = index_page(notebooks, False), index_page(notebooks, True)
    positions = [teacher.index(f"]({name})") for name in notebooks]
    assert positions == sorted(positions)
    assert "teaching.md" in teacher and "teaching" not in student.split("## The course")[1]
    assert "every exercise's answer is left out" in student


def test_a_progress_bar_shows_its_last_state_as_in_a_terminal():
    written = "training:   0%|  | 0/10\rtraining:  50%|# | 5/10\rtraining: 100%|##| 10/10\ndone\n"
    assert as_a_terminal_shows(written) == "training: 100%|##| 10/10\ndone\n"
    # tqdm may end its bar with a carriage return: the line keeps what was written before it.
    assert as_a_terminal_shows("a\rtraining: 100%|##| 10/10\r\ndone") == (
        "training: 100%|##| 10/10\ndone")
    notebook = executed(MASKING)
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stderr", "text": [written]}]
    page = for_the_site(notebook, MASKING.name, student=False)
    shown = next(c for c in page["cells"] if c.get("id") == code["id"])
    assert shown["outputs"][0]["text"] == "training: 100%|##| 10/10\ndone\n"


def test_a_diff_page_links_the_notebooks_that_explain_its_stages():
    names = [p.name for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    assert "[03](03_masking.ipynb)" in diff_page(2, 3, names)
    journey = diff_page(1, 7, names)
    assert all(f"]({name})" in journey for name in names if name[:2] in
               {"02", "03", "04", "05", "06", "07"})
    assert "](01_naive_attention.ipynb)" not in journey


def test_make_site_model_puts_that_checkpoint_on_the_try_it_page(tmp_path):
    """`make site MODEL=...`: the page runs the checkpoint, says what it is, and a path that
    is no checkpoint stops the build with the reason."""
    import torch

    from stages import stage07_multi_head as stage
    from toolkit.learning.checkpoints import save_checkpoint
    from toolkit.text.vocab import Vocab

    vocab = Vocab.build([["the", "dog"]])
    torch.manual_seed(0)
    model = stage.Transformer(len(vocab), len(vocab), embed_dim=8, num_heads=2, ff_dim=16)
    path = save_checkpoint(tmp_path / "best.pt", model, vocab, vocab)
    script, described = build.trained_model_script(path)
    assert '"dtype":"float16"' in script and described.startswith(f"{path}: stage07_multi_head")
    page = pages.try_page(described)
    assert "# Try it: your model in your browser" in page and described in page
    assert "notebook 10" not in page.split("How it works")[0]
    assert "not on this checkpoint" in page.split("How it works")[1]
    assert 'id="try-source"' in page and 'src="_static/model.js"' in page
    with pytest.raises(SystemExit, match="missing.pt"):
        build.trained_model_script(tmp_path / "missing.pt")
