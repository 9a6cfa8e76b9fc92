"""Corpora in local files: JSONL in the opus100 schema or TSV with a header, one file per split.

The fast path is `datasets`' own parser and one vectorised check; only a file with a problem
is read again, line by line, to name the file and line to fix.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.text.corpus_errors import CorpusError
from toolkit.text.splits import SPLITS, translations

FORMATS = {".jsonl": "json", ".json": "json", ".tsv": "csv"}  # file suffix -> datasets builder
JSON_WHITESPACE = " \t\r\n"  # what JSON skips between values; a no-break space is no blank


@contextmanager
def no_progress_bars() -> Iterator[None]:
    """A first load builds a cache in a second, and datasets' bars would become ipywidgets
    in a notebook: empty offline, and output a rerun does not repeat."""
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def read_local(path: Path, src_lang: str, tgt_lang: str) -> datasets.DatasetDict:
    """A file is the training split; a folder names its splits by file name."""
    if path.is_file():
        files = {"train": path}
    else:
        files = {}
        for split in SPLITS:
            found = [path / f"{split}{suffix}" for suffix in FORMATS
                     if (path / f"{split}{suffix}").is_file()]
            if len(found) > 1:
                raise CorpusError(f"{path} holds {' and '.join(file.name for file in found)}: "
                                  f"keep one file per split")
            if found:
                files[split] = found[0]
        if "train" not in files:
            raise CorpusError(f"{path} holds no train.jsonl or train.tsv: a corpus folder "
                              f"needs a training split")
    splits = {}
    for split, file in files.items():
        if file.suffix not in FORMATS:
            raise CorpusError(f"{file}: cannot read a {file.suffix or 'suffix-less'} file; "
                              f"use .jsonl (the opus100 schema) or .tsv")
        splits[split] = _read_file(file, src_lang, tgt_lang)
    return datasets.DatasetDict(splits)


def _read_file(file: Path, src_lang: str, tgt_lang: str) -> datasets.Dataset:
    """Load one file with datasets; if it fails, or a row is bad, find the line to blame.

    The fast path is datasets' own parser and one vectorised check; only a file with a
    problem is read again, line by line, so good files load at the library's speed.
    """
    tsv = file.suffix == ".tsv"
    if tsv:
        header = _tsv_header(file, src_lang, tgt_lang)
        # Every column is text, even "1" or "NA" ("NA" would be a missing value to pandas),
        # and quotes are text too (3 = QUOTE_NONE).
        options = {"sep": "\t", "quoting": 3, "na_filter": False, "keep_default_na": False,
                   "features": datasets.Features({name: datasets.Value("string")
                                                  for name in header})}
    else:
        # Otherwise datasets stores as JSON, not as text columns, a field that is text in
        # one row and a number in another, or translations with a third language on some rows.
        options = {"on_mixed_types": None}
    try:
        with no_progress_bars(), _datasets_quiet():
            rows = datasets.load_dataset(FORMATS[file.suffix], data_files=str(file),
                                         split="train", **options)
    except Exception as err:  # pyarrow and pandas word parse errors in many ways
        raise _first_bad_line(file, src_lang, tgt_lang) or CorpusError(
            f"{file}: datasets could not read it ({_first_line_of(err)}), and no line stands "
            f"out; check that it is JSONL in the opus100 schema or a TSV with a header") from err
    if tsv:
        rows = _tsv_as_translations(rows, src_lang, tgt_lang)
    try:
        check_rows(rows, src_lang, tgt_lang, where=str(file))
    except CorpusError as err:
        raise _first_bad_line(file, src_lang, tgt_lang) or err from None
    if len(rows) == 0:
        raise CorpusError(f"{file} holds no pairs")
    return rows


@contextmanager
def _datasets_quiet() -> Iterator[None]:
    """datasets logs a parser's error before raising it; the CorpusError that follows says more."""
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(verbosity)


def _first_line_of(err: Exception) -> str:
    """A parser's error in one line: its full text can run to a page of internals."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _tsv_header(file: Path, src_lang: str, tgt_lang: str) -> list[str]:
    """The column names, checked before parsing: they must name both languages, once each."""
    for number, line in _numbered_lines(file):
        if isinstance(line, CorpusError):
            raise line
        if line.strip():
            header = line.rstrip("\r\n").split("\t")
            missing = [lang for lang in (src_lang, tgt_lang) if lang not in header]
            if missing:
                raise CorpusError(f"{file}, line {number}: the header names {header}, not "
                                  f"{' and '.join(missing)}; write a header line such as "
                                  f"{src_lang}<TAB>{tgt_lang}")
            if len(set(header)) < len(header):
                raise CorpusError(f"{file}, line {number}: the header {header} names a column "
                                  f"twice")
            return header
    raise CorpusError(f"{file} holds no pairs, not even a header line such as "
                      f"{src_lang}<TAB>{tgt_lang}")


def _tsv_as_translations(
    rows: datasets.Dataset, src_lang: str, tgt_lang: str
) -> datasets.Dataset:
    """Columns named by language become the opus100 schema."""

    def as_pairs(batch: dict) -> dict:
        return {"translation": [{src_lang: s, tgt_lang: t}
                                for s, t in zip(batch[src_lang], batch[tgt_lang], strict=True)]}

    with no_progress_bars():
        return rows.map(as_pairs, batched=True, remove_columns=rows.column_names)


def check_rows(rows: datasets.Dataset, src_lang: str, tgt_lang: str, where: str) -> None:
    """Every row must have both languages as non-empty text; name the first that does not."""
    if "translation" not in rows.column_names:
        raise CorpusError(f"{where}: no 'translation' column (found {rows.column_names}); "
                          f'rows must look like {{"translation": {{"{src_lang}": ..., '
                          f'"{tgt_lang}": ...}}}}')
    column = translations(rows)
    if not pa.types.is_struct(column.type):
        raise CorpusError(f"{where}: 'translation' holds {column.type}, not an object with "
                          f"the texts {src_lang!r} and {tgt_lang!r}")
    for lang in (src_lang, tgt_lang):
        if lang not in {field.name for field in column.type}:
            raise CorpusError(f"{where}: no {lang!r} text in any row")
        values = pc.struct_field(column, lang)
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            raise CorpusError(f"{where}: the {lang!r} field holds {values.type}, not text")
        try:
            values.validate(full=True)  # pyarrow's JSON reader lets invalid UTF-8 through
        except pa.ArrowInvalid as err:
            raise CorpusError(f"{where}: {lang!r} text that is not UTF-8 ({err})") from None
        bad = pc.or_kleene(pc.is_null(values),
                           pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(values)), 0))
        bad = pc.fill_null(bad, True)
        if pc.any(bad).as_py():
            index = int(pc.index(bad, True).as_py())
            problem = (f"no {lang!r} text" if values[index].as_py() is None
                       else f"the {lang!r} text is empty")
            raise CorpusError(f"{where}, row {index + 1}: {problem}")


def _numbered_lines(file: Path) -> Iterator[tuple[int, str | CorpusError]]:
    """The file's lines, numbered as an editor numbers them (split at newlines only)."""
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield number, CorpusError(f"{file}, line {number}: not UTF-8 text (byte "
                                          f"{err.start + 1} of the line: {err.reason}); save "
                                          f"it as UTF-8")
                return
            yield number, line.removeprefix("\ufeff") if number == 1 else line


def _first_bad_line(file: Path, src_lang: str, tgt_lang: str) -> CorpusError | None:
    """Read the file line by line to say where a parser gave up or a row is bad, and why."""
    header, pairs = None, 0
    for number, line in _numbered_lines(file):
        if isinstance(line, CorpusError):
            return line
        if file.suffix == ".tsv":
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) == 1 and not line.strip():
                continue  # a blank line, which pandas skips too
            if header is None:
                header = fields
                continue
            if len(fields) != len(header):
                return CorpusError(f"{file}, line {number}: {len(fields)} tab-separated "
                                   f"field{'s' * (len(fields) != 1)}, but the header has "
                                   f"{len(header)}")
            texts = dict(zip(header, fields, strict=True))
        else:
            if not line.strip(JSON_WHITESPACE):
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                return CorpusError(f"{file}, line {number}: not a JSON object ({err.msg})")
            texts = row.get("translation") if isinstance(row, dict) else None
            if not isinstance(texts, dict):
                return CorpusError(f'{file}, line {number}: no "translation" object')
        for lang in (src_lang, tgt_lang):
            problem = _text_problem(texts, lang)
            if problem:
                return CorpusError(f"{file}, line {number}: {problem}")
        pairs += 1
    return None if pairs else CorpusError(f"{file} holds no pairs")


def _text_problem(texts: dict, lang: str) -> str | None:
    """What is wrong with one side of a pair, if anything."""
    if lang not in texts:
        return f"no {lang!r} key"
    text = texts[lang]
    if text is None:
        return f"the {lang!r} field is null, not text"
    if not isinstance(text, str):
        return f"the {lang!r} field is {type(text).__name__} ({text!r}), not text"
    if not text.strip():
        return f"the {lang!r} text is empty"
    return None
