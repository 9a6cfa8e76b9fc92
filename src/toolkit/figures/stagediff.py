"""Show what one stage changes in the next: the same diff in notebooks, on the site and in a
terminal, side by side where there is room and unified where there is not.

Trailing `# New: ...` markers say what a stage adds. They are stripped before diffing,
so a marker that is left behind in a later stage never shows up as a change. The HTML holds
both layouts and lets a CSS container query pick one by the width it is given (a notebook
cell or a page column, not the window); `make diff` picks by the terminal's width.
"""

import difflib
import html
import itertools
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from toolkit.outline import stage as stage_info
from toolkit.paths import SRC

STAGES_DIR = SRC / "stages"
_MARKER = re.compile(r"\s*# New:.*$")
CONTEXT = 3  # unchanged lines shown around each change
SPLIT_MIN_PX = 960  # narrower than this, the HTML shows the unified layout
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="sd-", style="default")

_STYLE = """
<style>
.stagediff { container-type: inline-size; margin: 0.4em 0 1em; }
.stagediff table.sd-table { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  monospace; font-size: 12px; line-height: 1.45; border-collapse: collapse; width: 100%;
  table-layout: fixed; margin: 0; }
.stagediff table.sd-table td, .stagediff table.sd-table th { padding: 0 6px; border: 0;
  text-align: left; vertical-align: top; white-space: pre-wrap; overflow-wrap: anywhere;
  max-width: none; }
.stagediff table.sd-table col.sd-number { width: 3.2em; }
.stagediff table.sd-table col.sd-sign { width: 1.4em; }
.stagediff table.sd-table td.sd-number { color: #888; text-align: right; user-select: none; }
.stagediff table.sd-table th { font-family: system-ui, sans-serif; font-weight: 600;
  background: #eef2f7; padding: 4px 6px; overflow-wrap: anywhere; }
.stagediff table.sd-table tr.sd-hunk td { background: #f3f5f8; color: #667;
  font-family: system-ui, sans-serif; padding: 3px 6px; }
.stagediff table.sd-table td.sd-removed { background: #ffe3e3; }
.stagediff table.sd-table td.sd-added { background: #dcf5dc; }
.stagediff table.sd-table td.sd-empty { background: #f6f6f6; }
.stagediff table.sd-table tbody tr:hover td { filter: brightness(0.97); }
.stagediff .sd-unified { display: none; }
@container (max-width: SPLIT_MAXpx) {
  .stagediff .sd-split { display: none; }
  .stagediff .sd-unified { display: table; }
}
.stagediff-summary { font-family: system-ui, sans-serif; margin: 0.3em 0 0.6em; }
PYGMENTS
</style>
""".replace("SPLIT_MAX", str(SPLIT_MIN_PX - 1)).replace("PYGMENTS", "\n".join(
    # Only the token colours: Pygments' other rules (pre, line numbers) would reach the page.
    rule for rule in _FORMATTER.get_style_defs(".stagediff").splitlines()
    if rule.startswith(".stagediff .sd-")))


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
class Row:
    """One line of a side-by-side hunk: an old line, a new line, or both (numbered from 1)."""

    old: int | None
    new: int | None
    changed: bool


def highlighted(lines: list[str]) -> list[str]:
    """Each line as HTML with Pygments' classes; the file is lexed whole, so a docstring that
    spans lines is coloured as one."""
    lexer = PythonLexer(stripnl=False, ensurenl=True)
    out = highlight("\n".join(lines) + "\n", lexer, _FORMATTER).split("\n")[: len(lines)]
    assert len(out) == len(lines), "Pygments changed the number of lines"
    return out


@dataclass(frozen=True)
class StageDiff:
    """The change from stage `old` to stage `new`, as text (terminals) or HTML (notebooks)."""

    old: int
    new: int

    def _lines(self) -> tuple[list[str], list[str]]:
        return (strip_markers(module_path(self.old).read_text()),
                strip_markers(module_path(self.new).read_text()))

    def _names(self) -> tuple[str, str]:
        return module_path(self.old).name, module_path(self.new).name

    @property
    def summary(self) -> str:
        if self.new == self.old + 1:
            return f"Stage {self.new:02d} adds {stage_info(self.new).idea}."
        return f"Stages {self.old + 1:02d}–{self.new:02d}: everything since stage {self.old:02d}."

    def hunks(self) -> list[list[Row]]:
        """Each change with CONTEXT unchanged lines around it; a replaced block pairs its old
        and new lines side by side, the longer side alone at the end."""
        old, new = self._lines()
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        hunks = []
        for group in matcher.get_grouped_opcodes(CONTEXT):
            rows = []
            for tag, i1, i2, j1, j2 in group:
                pairs = itertools.zip_longest(range(i1, i2), range(j1, j2))
                rows += [Row(None if i is None else i + 1, None if j is None else j + 1,
                             tag != "equal") for i, j in pairs]
            hunks.append(rows)
        return hunks

    def unified(self) -> str:
        """A `diff -u` style text of the same hunks, for narrow terminals."""
        old, new = self._lines()
        lines = [f"--- {self._names()[0]}", f"+++ {self._names()[1]}"]
        for rows in self.hunks():
            olds, news = [r.old for r in rows if r.old], [r.new for r in rows if r.new]
            lines.append(f"@@ -{olds[0] if olds else 0},{len(olds)} "
                         f"+{news[0] if news else 0},{len(news)} @@")
            for row in _unified_order(rows):
                if not row.changed:
                    lines.append(f" {old[row.old - 1]}")
                else:
                    lines.append(f"-{old[row.old - 1]}" if row.new is None
                                 else f"+{new[row.new - 1]}")
        return "\n".join(lines)

    def changed_lines(self) -> tuple[int, int]:
        """How many lines were removed and added: a quick measure of how big an idea is."""
        lines = self.unified().splitlines()[2:]
        removed = sum(line.startswith("-") for line in lines)
        added = sum(line.startswith("+") for line in lines)
        return removed, added

    def html(self) -> str:
        """Both layouts, highlighted; the container's width shows one of them."""
        old, new = (highlighted(lines) for lines in self._lines())
        old_name, new_name = (html.escape(name) for name in self._names())
        removed, added = self.changed_lines()
        split = [f'<table class="sd-table sd-split"><colgroup><col class="sd-number"><col>'
                 f'<col class="sd-number"><col></colgroup><thead><tr><th colspan="2">'
                 f'{old_name}</th><th colspan="2">{new_name}</th></tr></thead>']
        unified = [f'<table class="sd-table sd-unified"><colgroup><col class="sd-number">'
                   f'<col class="sd-number"><col class="sd-sign"><col></colgroup><thead><tr>'
                   f'<th colspan="4">{old_name} → {new_name}</th></tr></thead>']
        for rows in self.hunks():
            header = _hunk_header(rows)
            split.append(f'<tbody><tr class="sd-hunk"><td colspan="4">{header}</td></tr>')
            unified.append(f'<tbody><tr class="sd-hunk"><td colspan="4">{header}</td></tr>')
            for row in rows:
                split.append("<tr>" + _cell(row.old, old, "sd-removed" if row.changed else "")
                             + _cell(row.new, new, "sd-added" if row.changed else "") + "</tr>")
            for row in _unified_order(rows):
                number, kind = (row.old, "-") if row.new is None else (row.new, "+")
                if not row.changed:
                    unified.append(f'<tr><td class="sd-number">{row.old}</td><td class='
                                   f'"sd-number">{row.new}</td><td></td><td>'
                                   f"{new[row.new - 1]}</td></tr>")
                else:
                    css, text = ("sd-removed", old) if kind == "-" else ("sd-added", new)
                    numbers = (f'<td class="sd-number">{number}</td><td class="sd-number">'
                               f"</td>" if kind == "-" else
                               f'<td class="sd-number"></td><td class="sd-number">{number}</td>')
                    unified.append(f'<tr>{numbers}<td class="{css} sd-sign">{kind}</td>'
                                   f'<td class="{css}">{text[number - 1]}</td></tr>')
            split.append("</tbody>")
            unified.append("</tbody>")
        summary = (f'<p class="stagediff-summary"><b>{html.escape(self.summary)}</b> '
                   f"{removed} lines removed, {added} added.</p>")
        # Spaces between cells and rows change nothing on screen, but keep a line's number
        # and its code apart for anything that reads the text (the site's search index).
        tables = f'{"".join(split)}</table>{"".join(unified)}</table>'
        tables = tables.replace("</td><td", "</td> <td").replace("</tr><tr", "</tr>\n<tr")
        return f'{_STYLE}<div class="stagediff">{summary}{tables}</div>'


    def text(self, columns: int = 80, colour: bool = False) -> str:
        """Side by side when `columns` hold both files' longest lines, else unified."""
        old, new = self._lines()
        width = max(map(len, old + new))  # each side's code column
        if columns < 2 * (width + 7) + 3:  # number, sign and spaces: 7; the bar: 3
            body = self.unified()
            if colour:
                body = "\n".join(_paint(line, {"-": "31", "+": "32", "@": "36"}.get(line[:1]))
                                 for line in body.splitlines())
            return f"{self.summary}\n{body}"
        names = self._names()
        lines = [self.summary, f"{'':7}{names[0]:<{width}} │ {'':7}{names[1]}"]
        for rows in self.hunks():
            lines.append(_paint(f"{'':7}{_hunk_header(rows)}", "36" if colour else None))
            for row in rows:
                left = _side(row.old, old, "-" if row.changed else " ", width, colour and "31")
                right = _side(row.new, new, "+" if row.changed else " ", width, colour and "32")
                lines.append(f"{left} │ {right}".rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return self.html()

    def __str__(self) -> str:
        return self.text()


def _hunk_header(rows: list[Row]) -> str:
    """'lines 12–20 → 12–24': where the hunk sits in each file."""
    def span(numbers: list[int]) -> str:
        return f"{min(numbers)}–{max(numbers)}" if numbers else "none"

    return (f"lines {span([r.old for r in rows if r.old])} → "
            f"{span([r.new for r in rows if r.new])}")


def _unified_order(rows: list[Row]) -> list[Row]:
    """A side-by-side hunk as `diff -u` reads: in each changed block, the old lines, then the
    new ones."""
    ordered = []
    for changed, block in itertools.groupby(rows, key=lambda row: row.changed):
        block = list(block)
        if changed:
            ordered += [Row(r.old, None, True) for r in block if r.old]
            ordered += [Row(None, r.new, True) for r in block if r.new]
        else:
            ordered += block
    return ordered


def _cell(number: int | None, lines: list[str], css: str) -> str:
    if number is None:
        return '<td class="sd-number"></td><td class="sd-empty"></td>'
    return f'<td class="sd-number">{number}</td><td class="{css}">{lines[number - 1]}</td>'


def _side(number: int | None, lines: list[str], sign: str, width: int,
          colour: str | bool) -> str:
    """One file's half of a side-by-side line: number, sign (on a change) and code."""
    if number is None:
        return " " * (width + 7)
    text = f"{number:>4} {sign} {lines[number - 1]:<{width}}"
    return _paint(text, colour if colour and sign != " " else None)


def _paint(text: str, code: str | None) -> str:
    return f"\033[{code}m{text}\033[0m" if code else text


def stage_diff(old: int, new: int) -> StageDiff:
    """The diff between two stages; errors name the stages that exist."""
    for number in (old, new):
        if not module_path(number).exists():
            raise ValueError(f"stage {number:02d} has no module yet ({module_path(number).name})")
    if old >= new:
        raise ValueError(f"compare an earlier stage with a later one, not {old} with {new}")
    return StageDiff(old, new)


def main(argv: list[str]) -> int:
    """`make diff A=03 B=04`, `make diff 03 04`, or one stage: what the next one changes."""
    try:
        if not 1 <= len(argv) <= 2:
            raise ValueError(f"give one or two stage numbers, got {len(argv)}")
        old = int(argv[0])
        diff = stage_diff(old, int(argv[1]) if len(argv) == 2 else old + 1)
    except ValueError as error:
        print(f"usage: make diff A=03 B=04, or make diff 03 04 ({error})", file=sys.stderr)
        return 2
    colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    print(diff.text(shutil.get_terminal_size().columns, colour))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
