"""A committed number goes stale on a change of behaviour, never on a comment."""

import ast
import glob
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_tools import fingerprints
from course_tools.fingerprints import behaviour, code_fingerprint
from course_tools.numeric_platform import numeric_platform

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
    assert (code_fingerprint([tmp_path / "a.py"], tmp_path)
            == code_fingerprint([tmp_path / "b" / "a.py"], tmp_path / "b"))


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


IMPORTING = ("from toolkit.text.vocab import PAD_ID\n"
             "import toolkit.batching.batches as batches\n") + CODE


def test_imports_are_hashed_by_their_full_module_names():
    """A module of the same name in another package is another module."""
    elsewhere = IMPORTING.replace("toolkit.text.vocab", "elsewhere.vocab")
    assert behaviour(elsewhere, "toolkit.text.a") != behaviour(IMPORTING, "toolkit.text.a")


@pytest.mark.parametrize("written", [
    IMPORTING.replace("from toolkit.text.vocab", "from .vocab"),
    # a linter re-sorts the imports when their packages change
    "import toolkit.batching.batches as batches\nfrom toolkit.text.vocab import PAD_ID\n" + CODE,
])
def test_a_relative_import_reads_as_the_module_it_names(written):
    assert behaviour(written, "toolkit.text.a") == behaviour(IMPORTING, "toolkit.text.a")


def test_the_relative_level_is_kept():
    one_up = IMPORTING.replace("from toolkit.text.vocab", "from .vocab")
    two_up = IMPORTING.replace("from toolkit.text.vocab", "from ..vocab")
    assert behaviour(one_up, "toolkit.text.a") != behaviour(two_up, "toolkit.text.a")
    # in a package's own __init__, one dot is the package itself
    assert (behaviour(one_up, "toolkit.text.__init__")
            == behaviour(IMPORTING, "toolkit.text.__init__"))


def test_two_imports_that_bind_one_name_keep_their_order():
    """The last binding wins, so swapping them is a change of behaviour."""
    first = "from toolkit.text.vocab import PAD_ID\nfrom toolkit.text.subwords import PAD_ID\n"
    second = "from toolkit.text.subwords import PAD_ID\nfrom toolkit.text.vocab import PAD_ID\n"
    assert behaviour(first + CODE) != behaviour(second + CODE)
    aliased = first.replace("subwords import PAD_ID", "subwords import PAD_ID as OTHER")
    swapped = "".join(reversed(aliased.splitlines(keepends=True)))
    assert behaviour(aliased + CODE) == behaviour(swapped + CODE)  # two names: order is free


@pytest.mark.parametrize("edited", [
    IMPORTING.replace("import PAD_ID", "import UNK_ID as PAD_ID"),
    IMPORTING.replace("toolkit.text.vocab", "toolkit.text.subwords"),
    IMPORTING.replace("as batches", "as buckets"),
    IMPORTING + "import toolkit.text.vocab\n",  # an import after code is not in the same run
])
def test_importing_another_module_or_name_changes_the_fingerprint(edited):
    assert behaviour(edited) != behaviour(IMPORTING)


def package(root, files: dict[str, str]):
    """Write `files` (dotted module name -> source) as a package tree under `root`."""
    paths = []
    for module, source in files.items():
        path = root.joinpath(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        paths.append(path)
    return paths


def test_a_move_recorded_in_moved_keeps_the_fingerprint(tmp_path, monkeypatch):
    """A module moved to another package, with its importers changed to match, is hashed
    as before once the move is recorded, and not before."""
    before = package(tmp_path / "before", {"lib.old.vocab": CODE,
                                          "lib.train": "from lib.old.vocab import warmup\n"})
    after = package(tmp_path / "after", {"lib.text.vocab": CODE,
                                        "lib.train": "from lib.text.vocab import warmup\n"})
    stamped = code_fingerprint(before, tmp_path / "before")
    assert code_fingerprint(after, tmp_path / "after") != stamped
    monkeypatch.setattr(fingerprints, "MOVED", {"lib.text": "lib.old"})
    assert code_fingerprint(after, tmp_path / "after") == stamped


def test_a_move_onto_a_module_that_exists_again_is_refused(tmp_path, monkeypatch):
    """Else one of the two files would silently drop out of the fingerprint."""
    files = package(tmp_path, {"lib.old.vocab": CODE, "lib.text.vocab": CODE})
    monkeypatch.setattr(fingerprints, "MOVED", {"lib.text": "lib.old"})
    with pytest.raises(ValueError, match="drop that line of MOVED"):
        code_fingerprint(files, tmp_path)


def test_files_are_found_by_path_so_two_of_one_name_both_count(tmp_path):
    """Two `data.py` in two packages are two modules: an edit to either is seen."""
    files = package(tmp_path, {"lib.batching.data": CODE, "lib.text.data": CODE})
    both = code_fingerprint(files, tmp_path)
    assert code_fingerprint(files[:1], tmp_path) != both
    files[1].write_text(CODE.replace("100", "101"))
    assert code_fingerprint(files, tmp_path) != both


def test_every_python_writes_the_same_canonical_form(monkeypatch):
    """Newer interpreters add fields (3.12: every function's `type_params`) and `ast.dump`
    shows them, or leaves empty ones out (3.13): the canonical form never shows an empty
    field, so such a field cannot change a fingerprint."""
    tree = ast.parse(CODE)
    plain = fingerprints.canonical(tree)
    for node_type in (ast.FunctionDef, ast.arguments, ast.Call):
        monkeypatch.setattr(node_type, "_fields", (*node_type._fields, "added_by_a_new_python"))
    dumped = ast.dump(tree)
    for node in ast.walk(tree):
        node.added_by_a_new_python = []
    assert ast.dump(tree) != dumped  # what a dump would have hashed
    assert fingerprints.canonical(tree) == plain


# What interpreters have parsed differently: f-strings (3.12 rewrote their parser; 3.12.1 adds
# an empty text part to a nested format spec), `match`, the walrus, type annotations.
NEWER_SYNTAX = '''
def table(rows: list[dict], width: int = 8) -> str:
    if (n := len(rows)) == 0:
        return f"{'':{width}}|"
    match rows[0]:
        case {"name": str(name), **rest}:
            return f"{name!r:<{width}} {n:>{width}.{2}f} {rest}"
        case _:
            return f"{n=}"
'''


def test_the_fingerprint_of_known_code_is_the_same_on_every_python():
    """Computed on Pythons 3.11.7, 3.12.1 and 3.13.0 (every file of src/ and tests/ too);
    CI computes it again on Debian 13's 3.13 (.ci/python3.13). An interpreter whose canonical
    form differs fails here, before any committed row reads as stale."""
    source = IMPORTING + CODE + NEWER_SYNTAX
    digest = hashlib.sha256(behaviour(source, "toolkit.text.a").encode()).hexdigest()
    assert digest == KNOWN_DIGEST, f"the canonical form changed on Python {sys.version}"


KNOWN_DIGEST = "7ddcefd364082cb40e3ca1874003773afa66cef357e5bdca379b0884a7e48a75"


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

    code = "from course_tools.numeric_platform import numeric_platform; print(numeric_platform())"
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "ATEN_CPU_CAPABILITY": "default"}).stdout
    assert "DEFAULT" in plain and plain != here


# Other interpreters on this machine, if any (pyenv's on the course machines): the canonical
# form needs only the standard library, so each can write it for every file here.
OTHER_PYTHONS = sorted({path for pattern in ("/root/.pyenv/versions/3.1[123].*/bin/python",
                                             "/usr/bin/python3.1[123]")
                        for path in glob.glob(pattern)})


@pytest.mark.slow
@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other Python 3.11-3.13 on this machine")
def test_every_file_has_the_same_canonical_form_on_every_python_here():
    root = Path(__file__).resolve().parents[1]
    script = ("import json, sys; from pathlib import Path; "
              "from course_tools.fingerprints import behaviour, module_name; "
              "print(json.dumps({str(p): behaviour(p.read_text('utf-8'), "
              "module_name(p, Path('src'))) for p in sorted(Path('src').rglob('*.py'))}))")
    written = {python: json.loads(subprocess.run(
        [python, "-c", script], cwd=root, env={"PYTHONPATH": str(root / "src")},
        capture_output=True, text=True, check=True).stdout) for python in OTHER_PYTHONS}
    here = json.loads(subprocess.run([sys.executable, "-c", script], cwd=root,
                                     capture_output=True, text=True, check=True).stdout)
    for python, forms in written.items():
        assert [name for name in here if forms.get(name) != here[name]] == [], python
