"""A committed number goes stale on a change of behaviour, never on a comment."""

import pytest
import torch

from course_tools.fingerprints import behaviour, code_fingerprint, numeric_platform

CODE = '''"""A module."""

def warmup(step, peak=2e-3):
    """Ramp up."""
    return peak * min(1.0, step / 100)  # linear
'''


@pytest.mark.parametrize("edited", [
    CODE.replace("# linear", "# a linear ramp, then flat"),
    CODE.replace('"""Ramp up."""', '"""Ramp up linearly to the peak,\n    then stay."""'),
    CODE.replace('"""A module."""\n', ""),
    CODE.replace("min(1.0, step / 100)", "min(\n        1.0, step / 100\n    )"),
    CODE.replace('"""Ramp up."""\n', "# no docstring\n"),
])
def test_comments_docstrings_and_layout_keep_the_fingerprint(tmp_path, edited):
    (tmp_path / "a.py").write_text(CODE)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "a.py").write_text(edited)
    assert code_fingerprint([tmp_path / "a.py"]) == code_fingerprint([tmp_path / "b" / "a.py"])


@pytest.mark.parametrize("edited", [
    CODE.replace("100", "101"),
    CODE.replace("2e-3", "3e-3"),
    CODE.replace("min(", "max("),
    CODE.replace("step / 100", "100 / step"),
    CODE.replace("    return", "    step += 1\n    return"),
    CODE.replace("def warmup(step, peak=2e-3)", "def warmup(step, peak=2e-3, unused=0)"),
    CODE + "\nLIMIT = 10\n",
    CODE.replace('"""Ramp up."""', '"""Ramp up."""\n    "a string statement after it runs"'),
])
def test_any_change_to_what_runs_changes_the_fingerprint(edited):
    assert behaviour(edited) != behaviour(CODE)


IMPORTING = "from toolkit.vocab import PAD_ID\nimport toolkit.batches as batches\n" + CODE


@pytest.mark.parametrize("moved", [
    IMPORTING.replace("toolkit.vocab", "toolkit.text.vocab"),
    IMPORTING.replace("toolkit.vocab", ".vocab").replace("toolkit.batches", "toolkit.x.batches"),
    IMPORTING.replace("from toolkit.vocab", "from ..text.vocab"),
    # a linter re-sorts the imports when their packages change
    "import toolkit.batches as batches\nfrom toolkit.vocab import PAD_ID\n" + CODE,
])
def test_a_module_moved_to_another_package_keeps_the_fingerprint(tmp_path, moved):
    (tmp_path / "a.py").write_text(IMPORTING)
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.py").write_text(moved)
    assert code_fingerprint([tmp_path / "a.py"]) == code_fingerprint([tmp_path / "text" / "a.py"])


@pytest.mark.parametrize("edited", [
    IMPORTING.replace("import PAD_ID", "import UNK_ID as PAD_ID"),
    IMPORTING.replace("toolkit.vocab", "toolkit.subwords"),
    IMPORTING.replace("as batches", "as buckets"),
    IMPORTING + "import toolkit.vocab\n",  # an import after code is no longer in the same run
])
def test_importing_another_module_or_name_changes_the_fingerprint(edited):
    assert behaviour(edited) != behaviour(IMPORTING)


def test_files_are_hashed_in_the_order_of_their_names_wherever_they_sit(tmp_path):
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "a.py").write_text(CODE)
    (tmp_path / "b.py").write_text(CODE + "\nLIMIT = 10\n")
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.py").write_text(CODE)
    (flat / "b.py").write_text(CODE + "\nLIMIT = 10\n")
    assert (code_fingerprint([tmp_path / "b.py", tmp_path / "z" / "a.py"])
            == code_fingerprint([flat / "a.py", flat / "b.py"]))


def test_a_function_of_only_a_docstring_still_parses_as_one_that_does_nothing():
    assert behaviour('def f():\n    """Nothing."""\n') == behaviour("def f():\n    pass\n")


def test_the_numeric_platform_is_the_same_whatever_ran_before():
    """Neither the global random state nor the thread count may change it: only the machine."""
    first = numeric_platform()
    torch.manual_seed(123)
    torch.rand(5)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert numeric_platform() == first
    finally:
        torch.set_num_threads(threads)
    assert first.startswith(f"torch {torch.__version__}, ")


@pytest.mark.slow
def test_another_vector_unit_is_another_numeric_platform():
    """The same machine told to use other kernels rounds differently, and its fingerprint
    says so."""
    import os
    import subprocess
    import sys

    code = "from course_tools.fingerprints import numeric_platform; print(numeric_platform())"
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "ATEN_CPU_CAPABILITY": "default"}).stdout
    assert "DEFAULT" in plain and plain != here
