"""Show what one stage changes in the next: the same rendering in notebooks and on the site.

Trailing `# New: ...` markers say what a stage adds. They are stripped before diffing,
so a marker that is left behind in a later stage never shows up as a change.
"""

import difflib
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from toolkit.outline import stage as stage_info

STAGES_DIR = Path(__file__).resolve().parents[1] / "stages"
_MARKER = re.compile(r"\s*# New:.*$")

_STYLE = """
<style>
.stagediff { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
             font-size: 12px; border-collapse: collapse; width: 100%; }
.stagediff td { padding: 0 6px; vertical-align: top; white-space: pre-wrap; }
.stagediff td.diff_header { color: #888; text-align: right; user-select: none; }
.stagediff .diff_next { display: none; }
.stagediff .diff_add { background: #d9f7d9; }
.stagediff .diff_chg { background: #fff2b3; }
.stagediff .diff_sub { background: #ffd6d6; }
.stagediff th { font-family: sans-serif; text-align: left; padding: 4px 6px;
                background: #eef2f7; }
.stagediff-summary { font-family: sans-serif; margin: 0.3em 0 0.6em; }
</style>
"""


def strip_markers(source: str) -> list[str]:
    """Drop `# New:` markers (and lines that hold nothing else) so only code is compared."""
    lines = []
    for line in source.splitlines():
        stripped = _MARKER.sub("", line)
        if stripped.strip() or not line.strip():
            lines.append(stripped)
    return lines


def module_path(number: int) -> Path:
    return STAGES_DIR / f"{stage_info(number).module}.py"


@dataclass(frozen=True)
class StageDiff:
    """The change from stage `old` to stage `new`, as text (terminals) or HTML (notebooks)."""

    old: int
    new: int

    def _lines(self) -> tuple[list[str], list[str]]:
        return (strip_markers(module_path(self.old).read_text()),
                strip_markers(module_path(self.new).read_text()))

    @property
    def summary(self) -> str:
        if self.new == self.old + 1:
            return f"Stage {self.new:02d} adds {stage_info(self.new).idea}."
        return f"Stages {self.old + 1:02d}–{self.new:02d}: everything since stage {self.old:02d}."

    def unified(self) -> str:
        """A `diff -u` style text, for terminals and `make diff`."""
        old, new = self._lines()
        return "\n".join(difflib.unified_diff(
            old, new, module_path(self.old).name, module_path(self.new).name, lineterm=""))

    def changed_lines(self) -> tuple[int, int]:
        """How many lines were removed and added: a quick measure of how big an idea is."""
        lines = self.unified().splitlines()[2:]
        removed = sum(line.startswith("-") for line in lines)
        added = sum(line.startswith("+") for line in lines)
        return removed, added

    def html(self, context: bool = True) -> str:
        """Side by side, line numbers, changed words highlighted; only changes plus context."""
        old, new = self._lines()
        table = difflib.HtmlDiff(tabsize=4, wrapcolumn=72).make_table(
            old, new, module_path(self.old).name, module_path(self.new).name,
            context=context, numlines=3)
        table = table.replace('class="diff"', 'class="diff stagediff"', 1)
        summary = f'<p class="stagediff-summary"><b>{html.escape(self.summary)}</b></p>'
        return _STYLE + summary + table

    def _repr_html_(self) -> str:
        return self.html()

    def __str__(self) -> str:
        return f"{self.summary}\n{self.unified()}"


def stage_diff(old: int, new: int) -> StageDiff:
    """The diff between two stages; errors name the stages that exist."""
    for number in (old, new):
        if not module_path(number).exists():
            raise ValueError(f"stage {number:02d} has no module yet ({module_path(number).name})")
    if old >= new:
        raise ValueError(f"compare an earlier stage with a later one, not {old} with {new}")
    return StageDiff(old, new)


if __name__ == "__main__":
    try:
        print(stage_diff(*(int(arg) for arg in sys.argv[1:3])))
    except (TypeError, ValueError) as error:
        sys.exit(f"usage: make diff A=03 B=04 ({error})")
