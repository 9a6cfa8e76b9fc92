"""Every number the prose states is bound to what the reader sees: in an executed notebook, a
number in a markdown cell must be printed, to the precision written, by an output of the same
notebook, appear in its code, or be declared a constant with its source in
assets/prose-constants.toml. In the README and docs the figures must come from the committed
results the check reads, or be declared the same way.

A figure copied by hand from one machine's run is what this catches: another machine prints
other digits, and the sentence goes on stating the first machine's.

    python -m course_tools.prose_numbers build/notebooks/*.ipynb README.md docs/*.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from html import unescape
from pathlib import Path

from toolkit.paths import PROJECT_ROOT

CONSTANTS_PATH = PROJECT_ROOT / "assets" / "prose-constants.toml"
# The committed results the README's and docs' figures are read against.
RESULTS = ("assets/ladder.json", "assets/ablation.json", "assets/mutants.json",
           "benchmarks/results.json")

# What a number in prose is: digits with optional thousands commas and decimals, signed.
# A sign counts only where it stands alone ("-1.3", not the dash of "150-250"); "1e-3" is code.
NUMBER = re.compile(r"(?:(?<![\w.])([+\-−]))?(?<![\w.])(?<![eE][\-+])"
                    r"(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(\.\d+)?")
# Loosely, in outputs and code: any run of digits counts, whatever is glued to it.
PRINTED = re.compile(r"[+\-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
# A number right after one of these words is a name, not a figure (stage 07, seeds 0 and 1).
NAMES = ("stage", "stages", "notebook", "notebooks", "section", "sections", "§", "table",
         "tables", "figure", "fig.", "equation", "eq.", "appendix", "chapter", "question",
         "questions", "exercise", "exercises", "part", "cell", "cells", "seed", "seeds", "issue",
         "python", "pytorch", "torch", "version", "rung", "rungs", "round", "layer", "layers",
         "head", "heads", "row", "rows", "column", "columns", "item", "items", "level",
         "checkpoint", "step-", "bug", "bugs", "mutation", "ubuntu", "debian", "macos", "rfc",
         "arxiv", "sacrebleu", "cuda", "node", "npm", "mathjax", "chromium")
NAME_BEFORE = re.compile(r"(?:^|[\s(\[*_])(" + "|".join(re.escape(n) for n in NAMES)
                         + r")\s*$", re.IGNORECASE)
# More numbers in the same list of names: "stages 03, 04 and 05", "seeds 0 to 2".
LIST_JOINT = re.compile(r"^(?:\s*(?:,|and|or|to|–|-|&)\s*)$")
UNITS = {"%", "x", "×", "s", "ms", "min", "h", "m", "k", "K", "M", "B", "G", "GB", "MB", "KB",
         "GiB", "MiB", "kB", "GFLOP", "TB"}
YEAR = re.compile(r"^(19[5-9]\d|20[0-4]\d)$")


@dataclass(frozen=True)
class Unbound:
    """A number the prose states that nothing the reader sees backs."""

    where: str
    number: str
    context: str

    def __str__(self) -> str:
        return f"{self.where}: {self.number!r} in \"…{self.context}…\""


def prose_text(markdown: str) -> str:
    """The words a reader reads as prose: code, mathematics, link targets and tags left out,
    each replaced by its line breaks alone, so that every line keeps its number."""
    def gone(pattern: str, text: str, flags: int = 0) -> str:
        return re.sub(pattern, lambda m: "\n" * m.group().count("\n") or " ", text, flags=flags)

    text = gone(r"```.*?```", markdown, re.DOTALL)
    text = gone(r"`[^`]*`", text)
    text = gone(r"\$\$.*?\$\$", text, re.DOTALL)
    text = gone(r"(?<!\\)\$[^$]*(?<!\\)\$", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = gone(r"<[^>]+>", text)
    text = re.sub(r"https?://\S+", " ", text)
    # A list's or heading's own numbering is not a figure.
    text = re.sub(r"(?m)^(\s*)\d+[.)]\s", r"\1 ", text)
    text = re.sub(r"(?m)^(#+\s*)\d+\b", r"\1", text)
    return unescape(text)


def normalised(sign: str, whole: str, decimals: str | None) -> str:
    return ("-" if sign in "-−" and sign else "") + whole.replace(",", "") + (decimals or "")


def stated(markdown: str, with_lines: bool = False) -> Iterator[tuple]:
    """(number as normalised, a few words around it) for every figure the prose states, and
    its line in the markdown if asked."""
    text = prose_text(markdown)
    last_name_end = -1
    for match in NUMBER.finditer(text):
        sign, whole, decimals = match.groups()
        sign = sign or ""
        before = text[:match.start()]
        after = text[match.end():match.end() + 8]
        glued = re.match(r"^([A-Za-z_%×]+|\.\d)", after)
        if glued and glued.group(1) not in UNITS:
            continue  # glued to a word or a version: 3rd, 2D, fp16, 1.8.3
        if NAME_BEFORE.search(before):
            last_name_end = match.end()
            continue
        if last_name_end >= 0 and LIST_JOINT.match(text[last_name_end:match.start()]):
            last_name_end = match.end()
            continue
        if not decimals and YEAR.match(whole):
            continue
        if before.endswith("#"):
            continue  # an issue's or pull request's number: pytorch/pytorch#103749
        if re.match(r"^\s*·", text[match.end():]):
            continue  # a notebook's title: "05 · Stacking"
        if (re.fullmatch(r"\d\d\.\d", whole + (decimals or ""))
                and re.search(r"xercises?\b", text[max(0, match.start() - 80):match.start()])):
            continue  # an exercise's name: "exercises 05.1 (run the stack) and 05.2"
        context = text[max(0, match.start() - 40):match.end() + 25].replace("\n", " ")
        number = normalised(sign, whole, decimals)
        yield ((number, context, text.count("\n", 0, match.start()) + 1) if with_lines
               else (number, context))


def printed(texts: Iterable[str]) -> set[str]:
    """Every number a reader can see in these texts, as normalised."""
    seen = set()
    for text in texts:
        for token in PRINTED.findall(text):
            sign = token[0] if token[0] in "+-−" else ""
            body = token[len(sign):]
            whole, _, decimals = body.partition(".")
            for signed in (sign, ""):
                seen.add(normalised(signed, whole, "." + decimals if decimals else None))
                if decimals and not decimals.strip("0"):
                    seen.add(normalised(signed, whole, None))  # 98.0 reads as 98 too
    return seen


def shown(number: str, seen: set[str]) -> bool:
    """Printed as written, or printed with more decimals that round to what is written."""
    if number in seen:
        return True
    if "." not in number:
        return False
    places = Decimal(1).scaleb(-len(number.partition(".")[2]))
    for candidate in seen:
        if "." in candidate and len(candidate.partition(".")[2]) > len(number.partition(".")[2]):
            value = Decimal(candidate)
            if any(value.quantize(places, rounding=mode) == Decimal(number)
                   for mode in (ROUND_HALF_EVEN, ROUND_HALF_UP)):
                return True
    return False


def output_texts(cell: dict) -> Iterator[str]:
    """What a code cell's outputs show: its streams, text and tables (their tags left out)."""
    for output in cell.get("outputs", []):
        if "text" in output:
            yield "".join(output["text"])
        data = output.get("data", {})
        for kind in ("text/plain", "text/markdown", "text/latex"):
            if kind in data:
                yield "".join(data[kind])
        if "text/html" in data:
            yield unescape(re.sub(r"<[^>]+>", " ", "".join(data["text/html"])))
        if output.get("output_type") == "error":
            yield "\n".join(output.get("traceback", []))


def code_text(source: str) -> str:
    """A code cell as the reader sees its definitions: its comments left out, since a figure
    copied into a comment is no more bound than one copied into prose."""
    return "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in source.splitlines())


def load_constants(path: Path = CONSTANTS_PATH) -> dict[str, dict[str, str]]:
    """Declared constants, by notebook stem or file name, "everywhere" for all of them."""
    with path.open("rb") as file:
        return tomllib.load(file)


def declared(constants: dict[str, dict[str, str]], name: str) -> set[str]:
    numbers = {**constants.get("everywhere", {}), **constants.get(name, {})}
    return {normalised("", n.lstrip("+"), None) if "." not in n else n for n in numbers}


def check_notebook(path: Path, constants: dict[str, dict[str, str]]) -> list[Unbound]:
    """The numbers one executed notebook's prose states that it neither prints nor declares."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    seen = printed(text for cell in cells if cell["cell_type"] == "code"
                   for text in [*output_texts(cell), code_text("".join(cell["source"]))])
    allowed = declared(constants, path.stem)
    return [Unbound(f"{path.stem}, cell {index}", number, context)
            for index, cell in enumerate(cells) if cell["cell_type"] == "markdown"
            for number, context in stated("".join(cell["source"]))
            if number not in allowed and not shown(number, seen)]


def json_numbers(value: object) -> Iterator[str]:
    """The numbers a JSON document holds as numbers: never the digits of a hash or a name."""
    if isinstance(value, dict):
        for item in value.values():
            yield from json_numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from json_numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield repr(value)


def results_numbers(root: Path = PROJECT_ROOT) -> set[str]:
    """Every number the committed results files hold, exactly as stored."""
    return {number for name in RESULTS
            for number in json_numbers(json.loads((root / name).read_text(encoding="utf-8")))}


GENERATED = re.compile(r"^<!-- [^\n]*: written by make [^\n]*-->$.*?^<!-- end of [^\n]*-->$",
                       re.DOTALL | re.MULTILINE)


def check_document(path: Path, constants: dict[str, dict[str, str]],
                   results: set[str]) -> list[Unbound]:
    """The README's or a doc's figures that neither a committed result, as stored, nor a table
    the document's commands write from one, as printed there, holds, and none declares."""
    text = path.read_text(encoding="utf-8")
    tables = GENERATED.findall(text)  # written from a committed file: tests bind each one
    seen = results | printed([*tables, *re.findall(r"```.*?```|`[^`]*`", text, flags=re.DOTALL)])
    # The tables left out of the prose, lines kept, so that a line number stays right.
    prose = GENERATED.sub(lambda table: "\n" * table.group().count("\n"), text)
    allowed = declared(constants, path.name)
    return [Unbound(f"{path.name}, line {line}", number, context)
            for number, context, line in stated(prose, with_lines=True)
            if number not in allowed and number not in seen]


def check(paths: Iterable[Path], constants_path: Path | None = None) -> list[Unbound]:
    """Every number the given notebooks and documents state that nothing binds."""
    constants, results = load_constants(constants_path or CONSTANTS_PATH), None
    unbound: list[Unbound] = []
    for path in paths:
        if path.suffix == ".ipynb":
            unbound += check_notebook(path, constants)
        else:
            results = results_numbers() if results is None else results
            unbound += check_document(path, constants, results)
    return unbound


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path,
                        help="executed notebooks (build/notebooks/), the README, docs")
    parser.add_argument("--constants", type=Path, default=None,
                        help=f"declared constants (default {CONSTANTS_PATH.name} in assets/)")
    args = parser.parse_args(argv)
    constants = args.constants or CONSTANTS_PATH
    unbound = check(args.paths, constants)
    for item in unbound:
        print(item)
    if unbound:
        print(f"\n{len(unbound)} numbers in prose that no output prints and {constants} does "
              "not declare: print each where the sentence can point to it, or declare it there "
              "with its source", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
