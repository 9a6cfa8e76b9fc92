"""The bug catalogue still matches the code, and `make mutants` counts kills honestly."""

import re
from pathlib import Path

import pytest

from course_tools import mutants
from course_tools.mutants import TABLE_PATH, Outcome, load_table, try_mutation, unproven
from course_tools.mutations import BUGS, CATALOGUE, SRC, Mutation, MutationDoesNotApply, find
from stages import stage03_masking

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("mutation", CATALOGUE, ids=lambda mutation: mutation.name)
def test_each_mutation_applies_and_its_module_still_imports(mutation):
    """A fragment that no longer matches fails here, before `make mutants` runs."""
    original = (SRC / mutation.path).read_text(encoding="utf-8")
    assert mutation.apply(original) != original
    mutation.load()  # a silent bug imports; `make mutants` shows that it computes wrongly


def test_the_catalogue_covers_every_classic_bug_in_every_stage_where_it_can_occur():
    names = [mutation.name for mutation in CATALOGUE]
    assert len(set(names)) == len(names) >= 15
    assert {mutation.bug for mutation in CATALOGUE} == set(BUGS)
    masking_stages = {f"stage0{n}" for n in range(3, 8)}

    def stages_with(bug, variant):
        return {m.module.split(".")[-1][:7] for m in CATALOGUE
                if (m.bug, m.variant) == (bug, variant)}

    assert stages_with(4, "inverted-causal") == masking_stages
    assert stages_with(15, "minus-infinity-fill") == masking_stages
    assert stages_with(1, "query-mask") == stages_with(2, "no-cross-mask") == masking_stages
    assert stages_with(14, "linear-in-forward") == {f"stage0{n}" for n in range(1, 8)}
    assert stages_with(8, "doubled-exponent") == {f"stage0{n}" for n in range(4, 8)}
    assert stages_with(11, "one-decoder-layer") == {f"stage0{n}" for n in range(5, 8)}
    assert {m.module for m in CATALOGUE if m.bug in (3, 9, 12, 13)} == {
        "toolkit.batching.batches", "toolkit.objectives", "toolkit.search.greedy",
        "toolkit.search.cached_decoding", "toolkit.text.vocab"}


def test_a_fragment_that_does_not_match_is_an_error_not_a_skip():
    stale = Mutation(4, "stale", "stages.stage03_masking", (("triu(diagonal=7)", "x"),))
    with pytest.raises(MutationDoesNotApply, match="found it 0 times: update the catalogue"):
        stale.apply((SRC / stale.path).read_text())


def test_loading_a_mutant_leaves_the_real_module_alone():
    inverted = find("bug04-inverted-causal@stage03_masking").load()
    assert inverted.causal_mask(3, "cpu")[2, 0]  # the bug: the past is hidden
    assert not stage03_masking.causal_mask(3, "cpu")[2, 0]


def test_the_committed_table_lists_the_whole_catalogue_all_killed_by_real_tests():
    table = load_table()
    assert [outcome.name for outcome in table] == [mutation.name for mutation in CATALOGUE], (
        f"the catalogue changed since {TABLE_PATH.name} was written: run make mutants")
    for outcome in table:
        assert outcome.status == "killed", outcome
        path, test = re.fullmatch(r"tests/(\w+\.py)::(\w+).*", outcome.killed_by).groups()
        assert f"def {test}(" in (TESTS / path).read_text(), outcome.killed_by


def test_a_table_the_code_has_moved_under_is_flagged_stale():
    """Notebook 09 shows the recorded table: a row whose mutation now sits on another line,
    or a mutation the table lacks, must be named, as a stale rung is."""
    table = load_table()
    first = table[0]
    path, line = first.where.rsplit(":", 1)
    moved = [Outcome(**{**first.__dict__, "where": f"{path}:{int(line) + 3}"}), *table[1:-1]]
    found = mutants.stale(moved)
    assert found[0] == f"{table[-1].name}: not in the table"
    assert found[1].startswith(f"{first.name}: recorded at {path}:{int(line) + 3}, now {path}:")
    assert len(found) == 2 + len(mutants.stale(table))  # what was stale already stays so


# The runner itself, on mutations built to be broken, harmless or crashing. Each plants its
# edit in a copy and runs two quick tests of tests/test_stage01.py there, in a fresh
# interpreter (the whole file took 20.6 s for the harmless edit, these two under 3 s, and
# the runner's verdict does not depend on how many tests there are).
STAGE01 = "stages.stage01_naive_attention"
QUICK = ["test_stage01.py::test_attention_weights_sum_to_one_over_keys",
         "test_stage01.py::test_encoder_and_decoder_compute_the_formula_with_residuals"]


@pytest.mark.slow
def test_a_mutation_that_does_not_import_is_broken_not_killed(tmp_path):
    syntax = Mutation(0, "syntax-error", STAGE01, (("class Attention(nn.Module):",
                                                    "class Attention(nn.Module)"),))
    outcome = try_mutation(syntax, tmp_path, only=QUICK)
    assert outcome.status == "broken" and "SyntaxError" in outcome.detail


@pytest.mark.slow
def test_a_harmless_edit_survives(tmp_path):
    comment = Mutation(0, "comment", STAGE01, (("each row sums to 1", "rows add up to 1"),))
    outcome = try_mutation(comment, tmp_path, only=QUICK)
    assert (outcome.status, outcome.detail) == ("survived", "every test passed")


@pytest.mark.slow
def test_a_crash_is_not_counted_as_a_kill(tmp_path):
    crash = Mutation(0, "crash", STAGE01, (("return weights @ v", "return weights @ v.T"),))
    outcome = try_mutation(crash, tmp_path, only=QUICK)
    assert outcome.status == "survived" and "none failed an assertion" in outcome.detail


@pytest.mark.slow
def test_a_real_bug_is_killed_by_an_assertion_and_named(tmp_path):
    outcome = try_mutation(find("bug14-linear-in-forward@stage01_naive_attention"), tmp_path,
                           only=["test_stage01.py"])
    assert outcome.status == "killed" and outcome.killed_by.startswith("tests/test_stage01.py::")


@pytest.mark.slow
def test_an_assert_inside_the_code_under_test_is_not_counted_as_a_kill(tmp_path):
    """Only an assertion raised by a test shows that the test noticed the bug."""
    inner = Mutation(0, "assert-in-src", STAGE01, (
        ("self.attention = weights.detach()", "assert weights.sum() < 0, 'raised in src'"),))
    outcome = try_mutation(inner, tmp_path, only=QUICK)
    assert outcome.status == "survived" and "raised in src" in outcome.detail


@pytest.mark.slow
def test_every_killing_or_crashing_test_must_pass_without_the_mutation(tmp_path, monkeypatch):
    """A test that fails on the unmutated copy would 'kill' every mutation it runs on; one
    that crashes there (it needs what the copy leaves out) would never kill anything."""
    def copy_with_a_failing_test(destination: Path) -> Path:
        copy = copy_tree(destination)
        (copy / "tests" / "test_always_fails.py").write_text(
            "def test_fails():\n    assert 0\n\n\ndef test_crashes():\n    open('/no/file')\n")
        return copy

    copy_tree = mutants.copy_tree
    monkeypatch.setattr(mutants, "copy_tree", copy_with_a_failing_test)
    real = Outcome("real", 1, "", "killed", "tests/test_stage01.py::"
                   "test_permuting_the_source_permutes_the_encoder_output")
    false = Outcome("false", 1, "", "killed", "tests/test_always_fails.py::test_fails")
    crash = Outcome("crash", 1, "", "survived", crashed=(
        "tests/test_always_fails.py::test_crashes", real.killed_by))
    problem = unproven([false, real, crash], tmp_path)  # all run, though the first fails
    assert problem.endswith("without any mutation: ['tests/test_always_fails.py::test_crashes', "
                            "'tests/test_always_fails.py::test_fails']")


def test_a_module_reached_through_another_is_tried_against_the_tests_that_reach_it():
    """No test imports run_state: the training command's modules do. And decoding reaches
    stage_api's restoring_mode through toolkit.search.decoding, not by naming it."""
    def tried(module: str) -> list[str]:
        return [path.name for path in mutants.relevant_tests(Mutation(0, "any", module, ()),
                                                             TESTS)]

    assert "test_train_command.py" in tried("toolkit.train.run_state")
    assert "test_decoding.py" in tried("toolkit.stage_api")
    assert tried("toolkit.text.vocab")[0] == "test_vocab.py"  # its own tests first
    assert "test_ladder.py" not in tried("toolkit.text.vocab")  # hashes, not behaviour


def test_a_recorded_table_spares_the_rerun_only_for_the_code_it_was_computed_with(
        monkeypatch, tmp_path):
    ran = []

    def pretend(mutation, workspace, only=None):
        ran.append(mutation.name)
        return Outcome(mutation.name, mutation.bug, "src/x.py:1", "killed", "tests/t.py::t")

    monkeypatch.setattr(mutants, "try_mutation", pretend)
    monkeypatch.setattr(mutants, "unproven", lambda outcomes, workspace: None)
    monkeypatch.setattr(mutants, "CODE_PATH", tmp_path / "mutants.code")
    (tmp_path / "mutants.code").write_text(mutants.code_under_test() + "\n")
    assert mutants.main(["--unless-recorded"]) == 0
    assert ran == []  # the committed table was computed by this code: nothing reran
    (tmp_path / "mutants.code").write_text("another code\n")
    assert mutants.main(["--unless-recorded"]) == 0
    assert len(ran) == len(CATALOGUE)  # any change, and every mutation runs again


def test_the_code_under_test_changes_with_a_test_not_with_a_comment(tmp_path):
    for folder in ("src/toolkit", "tests", "assets/data"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    (tmp_path / "src" / "toolkit" / "a.py").write_text("LIMIT = 3\n")
    test = tmp_path / "tests" / "test_a.py"
    test.write_text("def test_limit():\n    assert LIMIT == 3\n")
    before = mutants.code_under_test(tmp_path)
    test.write_text("def test_limit():\n    assert LIMIT == 3  # the limit\n")
    assert mutants.code_under_test(tmp_path) == before
    test.write_text("def test_limit():\n    assert LIMIT >= 0\n")  # a weaker test
    assert mutants.code_under_test(tmp_path) != before


def test_the_code_under_test_covers_the_javascript_model_and_the_pins(tmp_path):
    for folder in ("src/toolkit/web", "tests", "assets/data"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    pins, model = tmp_path / "requirements.txt", tmp_path / "src/toolkit/web/model.js"
    pins.write_text("torch==2.13.0\n")
    model.write_text("scores.push(dot / scale);\n")
    before = mutants.code_under_test(tmp_path)
    model.write_text("scores.push(dot);\n")  # the Node test would now catch other bugs
    assert mutants.code_under_test(tmp_path) != before
    model.write_text("scores.push(dot / scale);\n")
    pins.write_text("torch==2.14.0\n")
    assert mutants.code_under_test(tmp_path) != before
