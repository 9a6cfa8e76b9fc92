"""The gate covers by construction what computes each committed number: each edit below,
planted in a copy of the code (or of a recipe), makes it fire; comments and docstrings never do.

Each edit is one a review planted in the gate it replaced, which let all of them through: an
ablation row's recipe, the decoder-only rows' recipe, the ladder's own model building and
validation, the data path behind every row and every kept run."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, replace

import pytest
import torch

from course_tools import ablation, jobs, ladder, paper_run, staleness
from course_tools.import_closure import closure
from toolkit.learning.recipes import RECIPES
from toolkit.paths import SRC

# (file under src/, text there, what it becomes): edits that change what a row computes.
CODE_EDITS = {
    "jobs.build's embedding init doubled": (
        "course_tools/jobs.py", "std=recipe.embedding_std)", "std=2 * recipe.embedding_std)"),
    "jobs.climb validating on 10 pairs": (
        "course_tools/jobs.py", "loader(data.validation,", "loader(data.validation[:10],"),
    "prepare_splits training on 1,000 pairs": (
        "toolkit/text/splits.py", "    splits = datasets.DatasetDict(splits)\n",
        "    splits = datasets.DatasetDict(splits)\n    max_train_pairs = 1_000\n"),
}
# Edits that change no behaviour: a comment, a docstring, a blank line.
HARMLESS_EDITS = {
    "a comment": ("toolkit/learning/training.py", "\nimport ", "\n# a new comment\nimport "),
    "a docstring": ("course_tools/jobs.py", '"""Train one stage', '"""Train and score a stage'),
    "a blank line": ("toolkit/text/splits.py", "\ndef prepare_splits", "\n\n\ndef prepare_splits"),
}


def planted(tmp_path, edit: tuple[str, str, str]):
    """A copy of src/ with one edit made, and the edit checked to apply."""
    copy = tmp_path / "src"
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path, old, new = edit
    text = (copy / path).read_text()
    assert text.count(old) >= 1, f"{old!r} is no longer in {path}: update the planted edit"
    (copy / path).write_text(text.replace(old, new, 1))
    return copy


@pytest.mark.parametrize("name", CODE_EDITS)
def test_an_edit_to_what_a_row_runs_makes_every_row_stale(tmp_path, name):
    copy = planted(tmp_path, CODE_EDITS[name])
    for number in (1, 7, 8):
        assert staleness.stamps(number, copy)["code_sha256"] != \
            staleness.stamps(number)["code_sha256"], f"stage {number:02d} misses {name}"


def test_an_edit_to_the_data_path_trains_the_kept_runs_again(tmp_path):
    copy = planted(tmp_path, CODE_EDITS["prepare_splits training on 1,000 pairs"])
    assert paper_run.key(paper_run.PAPER, "cpu", src=copy) != paper_run.key(paper_run.PAPER, "cpu")


@pytest.mark.parametrize("name", HARMLESS_EDITS)
def test_comments_docstrings_and_layout_make_nothing_stale(tmp_path, name):
    copy = planted(tmp_path, HARMLESS_EDITS[name])
    assert staleness.stamps(7, copy) == staleness.stamps(7)
    assert paper_run.key(paper_run.PAPER, "cpu", src=copy) == paper_run.key(paper_run.PAPER, "cpu")


def committed(title: str) -> jobs.Rung:
    """A committed row as the gate would stamp it now: current, whatever the file holds, so
    that only the planted edit can make it stale."""
    run = next(run for run in ablation.load_ablation()[title] if run.seed == 0)
    return fresh(run)


def fresh(run: jobs.Rung) -> jobs.Rung:
    here = f"torch {torch.__version__}, here"
    current = staleness.stamped(replace(run, job=staleness.current_job(run), platform=here))
    assert not staleness.is_stale(current)
    return current


def test_a_changed_ablation_recipe_makes_its_row_stale_and_no_other(monkeypatch):
    smoothing, other = "without label smoothing", "without dropout"
    rows = {title: committed(title) for title in (smoothing, other)}
    monkeypatch.setitem(ablation.VARIANTS, smoothing,
                        replace(ablation.VARIANTS[smoothing], label_smoothing=0.05))
    assert staleness.why_stale(rows[smoothing]) == [
        "its job (stage, recipe, data options or objective)"]
    assert staleness.why_stale(rows[other]) == []


def test_a_changed_decoder_only_recipe_makes_both_its_rows_stale(monkeypatch):
    rows = {title: committed(title) for title in ablation.APPENDIX_VARIANTS}
    smaller = replace(ablation.DECODER_ONLY_RECIPE, model={
        **ablation.DECODER_ONLY_RECIPE.model, "num_heads": 4, "num_layers": 2})
    for title, (stage, _, options, objective) in list(ablation.APPENDIX_VARIANTS.items()):
        monkeypatch.setitem(ablation.APPENDIX_VARIANTS, title, (stage, smaller, options, objective))
    for row in rows.values():
        assert staleness.why_stale(row) == ["its job (stage, recipe, data options or objective)"]


def test_a_new_library_version_makes_the_rows_stale(monkeypatch):
    run = fresh(ladder.load_ladder()[7])
    monkeypatch.setattr(staleness.metadata, "version",
                        lambda name: "99.0" if name == "tokenizers" else VERSIONS[name])
    reasons = staleness.why_stale(run)
    assert any(reason.startswith("libraries (") and "tokenizers 99.0" in reason
               for reason in reasons)


VERSIONS = {}  # filled below with the real versions, before any test patches them


def setup_module():
    VERSIONS.update(staleness.library_versions(staleness.job_closure(7).libraries))


def test_a_pytorch_release_nobody_proved_the_row_with_makes_it_stale(monkeypatch):
    """Not a stamp: the CPU and CUDA builds of one release are one release, and a row is
    current under any release it was computed or witnessed with."""
    run = replace(fresh(ladder.load_ladder()[7]), platform="torch 2.13.0+cpu, AVX2, 0ab")
    for version, stale in (("2.13.0+cpu", False), ("2.13.0", False), ("2.13.0+cu130", False),
                           ("2.14.0", True)):
        monkeypatch.setattr(staleness.torch, "__version__", version)
        assert staleness.is_stale(run) is stale, version
    witnessed = replace(run, witnesses={"torch 2.14.0+cpu, AVX512, 1cd": {}})
    assert not staleness.is_stale(witnessed)


def test_rows_are_refused_when_their_code_changed_while_they_trained(tmp_path, monkeypatch):
    """Stamped after training, a row would carry an edit made meanwhile that never ran."""
    def edit_while_training():
        monkeypatch.setattr(staleness, "corpus_hash", lambda: "edited")
        return []

    with pytest.raises(SystemExit, match=r"changed while their rows trained"):
        staleness.unchanged_while([7], edit_while_training)
    monkeypatch.undo()
    assert staleness.unchanged_while([7], lambda: ["runs"]) == ["runs"]


def test_a_row_whose_seed_is_no_longer_run_is_stale_not_a_crash():
    run = replace(committed(ablation.FULL), seed=99)
    assert staleness.current_job(run) == {} and staleness.is_stale(run)


def test_pytorch_is_the_numeric_platform_not_a_stamp():
    """A new PyTorch rounds otherwise, like another CPU: proven by a witness, not a recompute."""
    assert "torch" in staleness.job_closure(7).libraries
    assert "torch" not in staleness.stamps(7)["libraries"]
    assert {"tokenizers", "sacrebleu", "datasets"} <= set(staleness.stamps(7)["libraries"])


def test_the_job_closure_holds_the_data_path_and_leaves_the_gate_out():
    modules = staleness.job_closure(8).modules
    assert {"course_tools.jobs", "stages.stage08_decoder_only", "toolkit.batching.data",
            "toolkit.text.splits", "toolkit.text.subwords", "toolkit.text.vocab",
            "toolkit.learning.training", "toolkit.learning.stream_objectives",
            "toolkit.search.stream_decoding", "toolkit.scoring.metrics"} <= modules
    # the gate judges the numbers and the ladder shows them, but neither computes any of them:
    # editing either stales nothing
    assert not {"course_tools.staleness", "course_tools.fingerprints",
                "course_tools.import_closure", "course_tools.ablation",
                "course_tools.ladder"} & modules


@pytest.mark.slow
def test_every_course_module_a_job_loads_is_in_its_closure():
    """Run a short job of each kind (words, subwords, stage 08 on the whole stream) and see
    which of the course's modules Python really loaded: the closure must hold them all."""
    script = """
import json, sys
from course_tools import jobs
from toolkit.batching.data import load_data
from toolkit.learning.recipes import Recipe
for stage, recipe, options, objective in json.loads(sys.argv[1]):
    jobs.climb(stage, load_data(**options), recipe=Recipe(**recipe), data_options=options,
                 objective=objective)
print(" ".join(m for m in sys.modules if m.split(".")[0] in ("stages", "toolkit", "course_tools")))
"""
    short = {"steps": 2, "batch_size": 4}
    short_jobs = [(7, replace(RECIPES[7], **short), {}, None),
                  (7, replace(RECIPES[7], **short), ablation.SUBWORD_DATA, None),
                  (8, replace(ablation.DECODER_ONLY_RECIPE, **short), ablation.DECODER_ONLY_DATA,
                   "whole_stream")]
    as_json = json.dumps([(stage, asdict(recipe), options, objective)
                          for stage, recipe, options, objective in short_jobs])
    done = subprocess.run([sys.executable, "-c", script, as_json], capture_output=True, text=True,
                          check=True, env={**os.environ, "OMP_NUM_THREADS": "1",
                                           "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"})
    loaded = set(done.stdout.split())
    assert loaded - closure(["course_tools.jobs", "stages.stage07_multi_head",
                             "stages.stage08_decoder_only"], SRC).modules == set()


def test_the_kept_runs_key_follows_their_training_code_but_not_the_gate(tmp_path):
    """The key is computed beside the training, but an edit to the gate trains nothing again."""
    gate = planted(tmp_path / "gate", ("course_tools/staleness.py",
                                       "    return bool(why_stale(run))",
                                       "    return len(why_stale(run)) > 0"))
    assert paper_run.key(paper_run.PAPER, "cpu", src=gate) == paper_run.key(paper_run.PAPER, "cpu")
    training = planted(tmp_path / "training", ("course_tools/paper_run.py", "self.done += 1",
                                               "self.done += 2"))
    assert paper_run.key(paper_run.PAPER, "cpu", src=training) != \
        paper_run.key(paper_run.PAPER, "cpu")
