"""`make mutants`: plant every bug of the catalogue and prove that a test catches it.

For each mutation in `course_tools.mutations.CATALOGUE` this copies `src/` and `tests/` to a
temporary folder (never touching the working tree), applies the mutation there, and runs
the tests that reach the mutated module through their imports, with the copy first on
PYTHONPATH. A mutation
counts as killed only when a test fails an *assertion* (`course_tools.mutant_guard` checks the
imports and tells assertions from crashes). Afterwards, on an unmutated copy, every test
that killed a mutation must pass (or the kill proves nothing) and every test that crashed
under one must not crash (or the copy cannot run it, and it can never kill): else the run
fails. Running every test on the unmutated copy first, as this once did, proved the same
and took longer than all the mutations.

    python -m course_tools.mutants            # every mutation; exit 1 unless all are killed
    python -m course_tools.mutants bug04 bug15    # only the names that contain these words
    python -m course_tools.mutants --record   # also write assets/mutants.json for notebook 09
    python -m course_tools.mutants --unless-recorded   # make test: rerun only if anything moved

A recorded run also writes `assets/mutants.code`, a fingerprint of everything a run reads:
the behaviour of every module and test (`course_tools.fingerprints`: comments, docstrings
and moves leave it as it is), the page's JavaScript model, the corpus, the example corpora,
the test settings and the pinned requirements. Where
the code here has that fingerprint, the same tests ran on the same code and killed every
mutation, and `--unless-recorded` says so instead of spending minutes to prove it again.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_tools.fingerprints import code_fingerprint, file_fingerprint
from course_tools.import_closure import closure_of_file
from course_tools.mutations import CATALOGUE, SRC, Mutation, MutationDoesNotApply

ROOT = SRC.parent
TABLE_PATH = ROOT / "assets" / "mutants.json"
CODE_PATH = TABLE_PATH.with_suffix(".code")  # what the recorded table was computed with
# Tests of source text, hashes and install paths rather than behaviour: a mutation would
# "fail" them without any test having caught the bug.
# The site builder's and the exercises' tests read the notebooks, which the mutants' copy
# leaves out.
NOT_BEHAVIOUR = {"test_ladder.py", "test_stagediff.py", "test_packaging.py",
                 "test_notebooks.py", "test_mutations.py", "test_notebook_reruns.py",
                 "test_course_site.py", "test_ladder_check.py", "test_exercises.py",
                 "test_staleness.py", "test_import_closure.py", "test_fingerprints.py"}
TEST_TIMEOUT_SECONDS = 300
TESTED = ("stages", "toolkit")  # the packages a mutation is planted in


@dataclass(frozen=True)
class Outcome:
    """What happened to one mutation: killed, survived, broken or not applicable."""

    name: str
    bug: int
    where: str  # path:line of the first edit
    status: str  # "killed", "survived", "broken" or "does not apply"
    killed_by: str = ""
    detail: str = ""
    tests: int = 0  # how many tests ran
    crashed: tuple[str, ...] = field(default=(), repr=False)  # checked unmutated, not recorded


def relevant_tests(mutation: Mutation, tests_dir: Path) -> list[Path]:
    """The behavioural test files that reach the mutated module through their imports, directly
    or through the modules they import (a bug in `run_state` is tested through the training
    command, which imports it)."""
    src = tests_dir.parent / "src"
    last = mutation.module.split(".")[-1]
    # A stage is also imported by name (importlib) or by a loop over the stages.
    by_name = re.compile(rf"\b{re.escape(last)}\b|from toolkit.outline import STAGES")
    files = [path for path in tests_dir.glob("test_*.py") if path.name not in NOT_BEHAVIOUR
             and (mutation.module in closure_of_file(path, src, within=TESTED).modules
                  or mutation.module.startswith("stages.")
                  and by_name.search(path.read_text()))]
    # The module's own tests first, then those that import it directly, then the
    # every-stage ones, so the first (and reported) kill is the most specific test.
    own = f"test_{last.split('_')[0]}.py"
    return sorted(files, key=lambda path: (path.name != own,
                                           not imports_directly(path, mutation.module, src),
                                           "every" not in path.name, path.name))


def imports_directly(path: Path, module: str, src: Path) -> bool:
    """True if the file itself imports the module, not only through another module."""
    return module in closure_of_file(path, src, follow=False, within=TESTED).modules


def copy_tree(destination: Path) -> Path:
    """A private copy of the code and tests; the corpus and the benchmark are only read."""
    destination.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", destination / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", destination / "tests", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", destination)
    for folder in ("assets", "benchmarks"):
        (destination / folder).symlink_to(ROOT / folder)
    return destination


def run_tests(copy: Path, module: str, tests: Iterable[Path | str],
              stop_at_kill: bool = True) -> dict:
    """Run pytest on the copy (files or node ids) in a fresh interpreter; return the report."""
    report = copy / "mutant-report.json"
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "MUTANT_SRC": str(copy / "src"), "MUTANT_MODULE": module,
           "MUTANT_REPORT": str(report), "MUTANT_RUN_ALL": "" if stop_at_kill else "1",
           # Only the plugins these tests use: nbmake's imports alone took half of each run.
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", *map(str, tests), "-p", "course_tools.mutant_guard",
               "-p", "pytest_timeout", "-p", "no:cacheprovider", "-q",
               f"--timeout={TEST_TIMEOUT_SECONDS}"]
    process = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True,
                             encoding="utf-8")
    if not report.exists():
        tail = (process.stdout + process.stderr).strip().splitlines()[-5:]
        return {"broken": "pytest ended without a report: " + " | ".join(tail), "results": []}
    return json.loads(report.read_text())


def try_mutation(mutation: Mutation, workspace: Path, only: list[str] | None = None) -> Outcome:
    """Plant one mutation in a fresh copy and run its tests (or only the named files or ids)."""
    copy = copy_tree(workspace / mutation.name)
    target = copy / "src" / mutation.path
    original = target.read_text(encoding="utf-8")
    where = f"src/{mutation.path}"
    try:
        target.write_text(mutation.apply(original), encoding="utf-8")
    except MutationDoesNotApply as err:
        return Outcome(mutation.name, mutation.bug, where, "does not apply", detail=str(err))
    where = f"{where}:{mutation.line(original)}"
    files = [copy / "tests" / name for name in only] if only else \
        relevant_tests(mutation, copy / "tests")
    if not files:
        return Outcome(mutation.name, mutation.bug, where, "survived", detail="no test imports it")
    report = run_tests(copy, mutation.module, files)
    if report["broken"]:
        return Outcome(mutation.name, mutation.bug, where, "broken", detail=report["broken"])
    results = report["results"]
    crashes = [r for r in results if r["outcome"] == "error"]
    crashed = tuple(r["test"] for r in crashes)
    kill = next((r for r in results if r["outcome"] == "assertion"), None)
    if kill:
        return Outcome(mutation.name, mutation.bug, where, "killed", kill["test"],
                       kill["detail"], len(results), crashed)
    detail = f"{len(crashes)} tests crashed, none failed an assertion: {crashes[0]['detail']}" \
        if crashes else "every test passed"
    return Outcome(mutation.name, mutation.bug, where, "survived", detail=detail,
                   tests=len(results), crashed=crashed)


def unproven(outcomes: list[Outcome], workspace: Path) -> str | None:
    """Rerun every killing or crashing test on an unmutated copy: a kill by a test that fails
    anyway proves nothing, and a test the copy cannot run would never kill. Say which."""
    tests = sorted({o.killed_by for o in outcomes if o.status == "killed"}
                   | {test for o in outcomes for test in o.crashed})
    if not tests:
        return None
    copy = copy_tree(workspace / "unmutated")
    report = run_tests(copy, "course_tools.mutations", tests, stop_at_kill=False)
    if report["broken"]:
        return report["broken"]
    passed = {r["test"] for r in report["results"] if r["outcome"] == "passed"}
    failing = [test for test in tests if test not in passed]
    return f"these tests fail (or never ran) without any mutation: {failing}" if failing else None


def line_for(outcome: Outcome) -> str:
    """One line per mutation: the verdict, where it was planted, and the test or the reason."""
    status = {"killed": "KILLED", "survived": "SURVIVED", "broken": "BROKEN"}.get(
        outcome.status, "NO MATCH")
    tail = outcome.killed_by if outcome.status == "killed" else outcome.detail
    return f"{status:8} {outcome.name:58} {outcome.where:46} {tail}"


def code_under_test(root: Path = ROOT) -> str:
    """A fingerprint of all a mutation run reads: code, tests, corpora and test settings."""
    # The tests a mutant may run and their helpers: tests/site and tests/student never run.
    code = (code_fingerprint(sorted((root / "src").rglob("*.py")), root / "src")
            + code_fingerprint(sorted((root / "tests").glob("*.py")), root))
    # The page's JavaScript model is under test too (tests/test_translator_js.py).
    data = sorted([*(root / "assets" / "data").glob("*.jsonl"),
                   *(root / "assets" / "examples").rglob("*.tsv"), *(root / "src").rglob("*.js"),
                   root / "pyproject.toml", root / "requirements.txt"])
    both = code + file_fingerprint(data)
    return hashlib.sha256(both.encode()).hexdigest()


def recorded_for_this_code() -> bool:
    """True if the committed table was computed by this very code, and all were killed."""
    if not CODE_PATH.exists() or CODE_PATH.read_text().strip() != code_under_test():
        return False
    table = load_table()
    return (len(table) == len(CATALOGUE) and not stale(table)
            and all(outcome.status == "killed" for outcome in table))


def main(argv: list[str] | None = None) -> int:
    """Exit 0 only if every chosen mutation was killed: a survivor is a missing test."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run only mutations whose name contains these")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--record", action="store_true", help=f"write {TABLE_PATH.name}")
    parser.add_argument("--unless-recorded", action="store_true",
                        help=f"run nothing if {TABLE_PATH.name} was recorded with this code")
    args = parser.parse_args(argv)
    if args.unless_recorded and not args.only and recorded_for_this_code():
        print(f"{TABLE_PATH.name} was recorded with this very code, tests and data "
              f"({CODE_PATH.name}: {code_under_test()[:12]}): all {len(CATALOGUE)} mutations "
              f"killed there; nothing to rerun (make mutants proves it again)")
        return 0
    mutations = [m for m in CATALOGUE if not args.only or any(w in m.name for w in args.only)]
    if not mutations:
        print(f"no mutation matches {args.only}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mutants-") as folder:
        workspace = Path(folder)
        print(f"trying {len(mutations)} mutations, {args.jobs} at a time", flush=True)
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = []
            for outcome in pool.map(lambda m: try_mutation(m, workspace), mutations):
                print(line_for(outcome), flush=True)
                outcomes.append(outcome)
        if problem := unproven(outcomes, workspace):
            print(f"every test must pass on the unmutated copy: {problem}", file=sys.stderr)
            return 2
    killed = sum(outcome.status == "killed" for outcome in outcomes)
    seconds = time.perf_counter() - start
    print(f"killed {killed}/{len(outcomes)} in {seconds:.0f} s; every killing or crashing test "
          "passes unmutated")
    if args.record and not args.only:
        rows = [{k: v for k, v in asdict(o).items() if k != "crashed"} for o in outcomes]
        TABLE_PATH.write_text(json.dumps(rows, indent=1) + "\n")
        if killed == len(outcomes):
            CODE_PATH.write_text(code_under_test() + "\n")
    elif not args.only and (changed := stale(load_table())):
        print(f"{TABLE_PATH.name}, the table notebook 09 shows, is stale ({len(changed)} rows; "
              f"`make mutants` re-records it): {'; '.join(changed[:3])}")
    return 0 if killed == len(outcomes) else 1


def load_table(path: Path = TABLE_PATH) -> list[Outcome]:
    """The committed result of `make mutants`, for notebook 09 and the site."""
    return [Outcome(**row) for row in json.loads(path.read_text())]


def stale(table: list[Outcome], src: Path = SRC) -> list[str]:
    """What the recorded table no longer says of today's code and catalogue: a mutation added
    or removed, or its first edit now on another line (the tests that kill it may differ too)."""
    current = {mutation.name: mutation for mutation in CATALOGUE}
    recorded = {outcome.name for outcome in table}
    found = [f"{name}: not in the table" for name in current if name not in recorded]
    for outcome in table:
        mutation = current.get(outcome.name)
        if mutation is None:
            found.append(f"{outcome.name}: no longer in the catalogue")
            continue
        try:
            now = f"src/{mutation.path}:{mutation.line((src / mutation.path).read_text())}"
        except ValueError:  # its first edit's text is gone from the file
            now = "nowhere: it no longer applies"
        if now != outcome.where:
            found.append(f"{outcome.name}: recorded at {outcome.where}, now {now}")
    return found


if __name__ == "__main__":
    sys.exit(main())
