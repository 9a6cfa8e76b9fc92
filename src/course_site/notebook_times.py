"""`make test` ends with how long each notebook took against its budget.

A report, not a test: two busy cores make any one time noisy, so a notebook over budget is
flagged for a person to look at and never fails `make test`. The times come from the JUnit
XML that the notebook run writes (pytest's --junitxml), one test case per notebook; a
notebook that failed is marked so, since its time is not a full run's.

    python -m course_site.notebook_times build/notebook-times.xml
"""

import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

STAGE_BUDGET_SECONDS = 120  # notebooks 00-07: the data, then one idea each
APPENDIX_BUDGET_SECONDS = 180  # 08 on: torch.nn, the bug zoo, the paper's recipe, real text
DEFAULT_REPORT = "build/notebook-times.xml"
NOTEBOOK_NAME = re.compile(r"\d\d_\w+\.ipynb")


def budget(name: str) -> int:
    """Two minutes for a stage notebook, in a lecture's stride; three for an appendix."""
    return STAGE_BUDGET_SECONDS if int(name[:2]) <= 7 else APPENDIX_BUDGET_SECONDS


def read_times(report: Path) -> tuple[dict[str, float], set[str]]:
    """Seconds per notebook in course order, and the notebooks that failed (cut short)."""
    times: dict[str, float] = {}
    failed: set[str] = set()
    for case in ElementTree.parse(report).iter("testcase"):
        where = f"{case.get('file', '')} {case.get('classname', '')} {case.get('name', '')}"
        if match := NOTEBOOK_NAME.search(where):
            times[match.group()] = times.get(match.group(), 0.0) + float(case.get("time", 0))
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(match.group())
    return dict(sorted(times.items())), failed


def wall_seconds(report: Path) -> float:
    """The run's own length: with two workers, about half the sum when they end together."""
    return sum(float(suite.get("time", 0)) for suite in ElementTree.parse(report).iter("testsuite"))


def table(times: dict[str, float], wall: float, failed: set[str] = frozenset()) -> str:
    """One row per notebook, flagged when over budget or failed, so the eye finds them."""
    width = max(map(len, times), default=8)
    rows = [f"{'notebook':{width}}  seconds  budget", f"{'-' * width}  -------  ------"]
    for name, seconds in times.items():
        flag = "  failed" if name in failed else "" if seconds <= budget(name) else \
            "  over budget"
        rows.append(f"{name:{width}}  {seconds:7.1f}  {budget(name):6d}{flag}")
    over = sum(seconds > budget(name) and name not in failed for name, seconds in times.items())
    rows.append(f"{len(times)} notebooks, {sum(times.values()):.0f} s of work in {wall:.0f} s, "
                f"{over} over budget (a report: a busy machine slows any of them)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the table; a missing report is said plainly (the notebooks did not run)."""
    args = sys.argv[1:] if argv is None else argv
    report = Path(args[0] if args else DEFAULT_REPORT)
    if not report.exists():
        print(f"{report}: no notebook times (run `make notebooks` first)", file=sys.stderr)
        return 1
    times, failed = read_times(report)
    print(table(times, wall_seconds(report), failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
