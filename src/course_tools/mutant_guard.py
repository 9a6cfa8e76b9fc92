"""A pytest plugin for `make mutants`: keeps the kill count honest.

Loaded with `-p course_tools.mutant_guard` inside a mutated copy of the source, it
- imports the mutated module first: if that fails, the mutation is broken, not killed;
- checks that every `stages`, `toolkit` and `course_tools` module comes from the copy,
  never from the editable install, before the tests run and again after;
- records each test as passed, failed on an assertion that the test itself raised (a
  kill) or anything else: a crash, a timeout, an assert inside src/ (not a kill);
- stops the session at the first kill, since one is enough (unless MUTANT_RUN_ALL is set:
  the unmutated copy runs every test it is given).

The runner passes its settings in MUTANT_SRC, MUTANT_MODULE, MUTANT_REPORT and
MUTANT_RUN_ALL.
"""

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

_results: list[dict] = []


def _report(**fields) -> None:
    Path(os.environ["MUTANT_REPORT"]).write_text(json.dumps(fields, indent=1))


def foreign_modules(expected: Path) -> list[str]:
    """Our modules that were imported from anywhere but the copy under test."""
    return sorted(
        f"{name} from {module.__file__}"
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("stages", "toolkit", "course_tools")
        and getattr(module, "__file__", None)
        and not Path(module.__file__).resolve().is_relative_to(expected)
    )


def pytest_configure(config: pytest.Config) -> None:
    """Before any test: the mutant must import, and only from the copy."""
    expected = Path(os.environ["MUTANT_SRC"]).resolve()
    try:
        importlib.import_module(os.environ["MUTANT_MODULE"])
    except Exception as err:  # any failure to import means a broken mutation, not a kill
        _report(broken=f"{type(err).__name__}: {err}", results=[])
        pytest.exit(f"the mutated module does not import: {err}", returncode=4)
    importlib.import_module("stages")
    if foreign := foreign_modules(expected):
        _report(broken=f"imported outside the copy: {foreign}", results=[])
        pytest.exit(f"imported outside the copy {expected}: {foreign}", returncode=4)


def raised_by_a_test(excinfo: pytest.ExceptionInfo) -> bool:
    """An assertion counts only if the tests raised it, not the code under test or a timeout.

    pytest-timeout ends a hung test with pytest.fail, and code in src/ may assert on its own
    inputs; neither is a test noticing the bug. Library frames (pytest.raises, torch.testing)
    are skipped, so the test that called them is the one that counts.
    """
    if not excinfo.errisinstance((AssertionError, pytest.fail.Exception)):
        return False
    if excinfo.exconly().startswith("Failed: Timeout"):
        return False
    copy = Path(os.environ["MUTANT_SRC"]).resolve().parent
    ours = [Path(entry.path).resolve() for entry in excinfo.traceback
            if Path(entry.path).resolve().is_relative_to(copy)]
    return bool(ours) and ours[-1].is_relative_to(copy / "tests")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Record each test's outcome, and stop at the first kill: one is proof enough."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.passed:
        _results.append({"test": item.nodeid, "outcome": "passed"})
    elif report.failed:
        asserted = report.when == "call" and call.excinfo is not None and \
            raised_by_a_test(call.excinfo)
        detail = call.excinfo.exconly().splitlines()[0][:300] if call.excinfo else ""
        _results.append({"test": item.nodeid, "outcome": "assertion" if asserted else "error",
                         "detail": detail})
        if asserted and not os.environ.get("MUTANT_RUN_ALL"):
            item.session.shouldstop = f"killed by {item.nodeid}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the tests: check the imports again (a test may import lazily) and report."""
    foreign = foreign_modules(Path(os.environ["MUTANT_SRC"]).resolve())
    _report(broken=f"imported outside the copy: {foreign}" if foreign else None,
            results=_results)
