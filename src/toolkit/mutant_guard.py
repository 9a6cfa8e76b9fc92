"""A pytest plugin for `make mutants`: keeps the kill count honest.

Loaded with `-p toolkit.mutant_guard` inside a mutated copy of the source, it
- imports the mutated module first: if that fails, the mutation is broken, not killed;
- checks that every `stages` and `toolkit` module comes from the copy, never from the
  editable install, before the tests run and again after;
- records each test as passed, failed on an assertion (a kill) or crashed (not a kill),
  and stops the session at the first assertion failure, since one kill is enough.

The runner passes its settings in MUTANT_SRC, MUTANT_MODULE and MUTANT_REPORT.
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
        if name.split(".")[0] in ("stages", "toolkit") and getattr(module, "__file__", None)
        and not Path(module.__file__).resolve().is_relative_to(expected)
    )


def pytest_configure(config: pytest.Config) -> None:
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.passed:
        _results.append({"test": item.nodeid, "outcome": "passed"})
    elif report.failed:
        asserted = call.excinfo is not None and report.when == "call" and \
            call.excinfo.errisinstance((AssertionError, pytest.fail.Exception))
        detail = call.excinfo.exconly().splitlines()[0][:300] if call.excinfo else ""
        _results.append({"test": item.nodeid, "outcome": "assertion" if asserted else "error",
                         "detail": detail})
        if asserted:
            item.session.shouldstop = f"killed by {item.nodeid}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    foreign = foreign_modules(Path(os.environ["MUTANT_SRC"]).resolve())
    _report(broken=f"imported outside the copy: {foreign}" if foreign else None,
            results=_results)
