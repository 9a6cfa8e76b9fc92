"""`make test` ends with how long each notebook took against its budget.

A report, not a test: two busy cores make any one time noisy, so a notebook over budget is
flagged for a person to look at, never failed. The times come from the JUnit XML that the
notebook run writes (pytest's --junitxml), one test case per notebook.

    python -m course_site.notebook_times build/notebook-times.xml
"""

import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

STAGE_BUDGET_SECONDS = 120  # notebooks 00-07: one idea each, in a lecture's stride
APPENDIX_BUDGET_SECONDS = 180  # 08 on: training like the paper, real text, decoding
DEFAULT_REPORT = "build/notebook-times.xml"
NOTEBOOK_NAME = re.compile(r"\d\d_\w+\.ipynb")


def budget(name: str) -> int:
    """Stage notebooks get two minutes, the appendices three."""
    return STAGE_BUDGET_SECONDS if int(name[:2]) <= 7 else APPENDIX_BUDGET_SECONDS


def read_times(report: Path) -> dict[str, float]:
    """Seconds per notebook, by file name, from a JUnit XML report."""
    times: dict[str, float] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        where = f"{case.get('file', '')} {case.get('classname', '')} {case.get('name', '')}"
        if match := NOTEBOOK_NAME.search(where):
            times[match.group()] = times.get(match.group(), 0.0) + float(case.get("time", 0))
    return dict(sorted(times.items()))


def wall_seconds(report: Path) -> float:
    """How long the whole run took, the notebooks two at a time."""
    return sum(float(suite.get("time", 0)) for suite in ElementTree.parse(report).iter("testsuite"))


def table(times: dict[str, float], wall: float) -> str:
    """One row per notebook: its time, its budget, and a flag when over."""
    width = max(map(len, times), default=8)
    rows = [f"{'notebook':{width}}  seconds  budget", f"{'-' * width}  -------  ------"]
    for name, seconds in times.items():
        flag = "" if seconds <= budget(name) else "  over budget"
        rows.append(f"{name:{width}}  {seconds:7.1f}  {budget(name):6d}{flag}")
    over = sum(seconds > budget(name) for name, seconds in times.items())
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
    print(table(read_times(report), wall_seconds(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
