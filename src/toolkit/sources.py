"""Parallel corpora from anywhere, as the same splits: local files, opus100, any Hub dataset.

Every source ends as a `DatasetDict` with train, validation and test splits in the
opus100 row schema, `{"translation": {"en": ..., "de": ...}}`:

- a local JSONL file in that schema, or a TSV file whose header names the two languages
  (`en<TAB>de`); a file is the training split;
- a local folder holding `train`, and maybe `validation` and `test`, as `.jsonl` or `.tsv`;
- `"opus100"`, or any Hugging Face dataset id with a `translation` column and its
  configuration (often the language pair), downloaded by `datasets`.

A corpus with no validation or test split gets them carved from train, by seed. Nothing
is dropped silently: every filter prints what it removed, and a bad row stops the load
with the file and line to fix.
"""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import datasets
import numpy as np
import pyarrow.compute as pc
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import HTTPError

OPUS100 = "Helsinki-NLP/opus-100"
HUB_TIMEOUT_SECONDS = 5
SPLITS = ("train", "validation", "test")
FORMATS = {".jsonl": "json", ".json": "json", ".tsv": "csv"}  # file suffix -> datasets builder
CARVED_SIZE = 1_000  # pairs carved for validation and for test, at most a twentieth of train


class CorpusUnavailable(RuntimeError):
    """The requested corpus cannot be loaded here; the message says what to use instead."""


class CorpusError(ValueError):
    """A corpus file or row that cannot be read; the message names the file and the line."""


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


def read_source(
    source: str, src_lang: str = "en", tgt_lang: str = "de", config: str | None = None
) -> datasets.DatasetDict:
    """The splits a source has, checked row by row: a local path, opus100 or a Hub id."""
    path = Path(source).expanduser()
    if path.exists():
        return _read_local(path, src_lang, tgt_lang)
    if path.suffix in FORMATS or source.startswith((".", "/", "~")):
        raise FileNotFoundError(f"no corpus file or folder at {path}: check the path")
    if source == "opus100":
        source, config = OPUS100, config or "-".join(sorted((src_lang, tgt_lang)))
    splits = _load_hub(source, config)
    for split, rows in splits.items():
        _check_rows(rows, src_lang, tgt_lang, where=f"{source} ({config}), split {split}")
    return splits


# --- Local files ---------------------------------------------------------------------------


def _read_local(path: Path, src_lang: str, tgt_lang: str) -> datasets.DatasetDict:
    """A file is the training split; a folder names its splits by file name."""
    if path.is_file():
        files = {"train": path}
    else:
        files = {split: file for split in SPLITS for file in sorted(path.glob(f"{split}.*"))
                 if file.suffix in FORMATS}
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
    """Load one file with datasets; if it fails, find the line that made it fail."""
    tsv = file.suffix == ".tsv"
    options = {"sep": "\t", "quoting": 3} if tsv else {}  # 3 = QUOTE_NONE: quotes are text
    try:
        with no_progress_bars():
            rows = datasets.load_dataset(FORMATS[file.suffix], data_files=str(file),
                                         split="train", **options)
    except Exception as err:  # pyarrow and pandas word parse errors in many ways
        raise _first_bad_line(file, src_lang, tgt_lang) from err
    if tsv:
        rows = _tsv_as_translations(rows, file, src_lang, tgt_lang)
    _check_rows(rows, src_lang, tgt_lang, where=str(file), file=file)
    return rows


def _tsv_as_translations(
    rows: datasets.Dataset, file: Path, src_lang: str, tgt_lang: str
) -> datasets.Dataset:
    """Columns named by language become the opus100 schema."""
    missing = [lang for lang in (src_lang, tgt_lang) if lang not in rows.column_names]
    if missing:
        raise CorpusError(f"{file}, line 1: the header names {rows.column_names}, not "
                          f"{' and '.join(missing)}; write a header line such as "
                          f"{src_lang}<TAB>{tgt_lang}")

    def as_pairs(batch: dict) -> dict:
        return {"translation": [{src_lang: s, tgt_lang: t}
                                for s, t in zip(batch[src_lang], batch[tgt_lang], strict=True)]}

    with no_progress_bars():
        return rows.map(as_pairs, batched=True, remove_columns=rows.column_names)


def _check_rows(
    rows: datasets.Dataset, src_lang: str, tgt_lang: str, where: str, file: Path | None = None
) -> None:
    """Every row must have both languages as non-empty text; name the first that does not."""
    if "translation" not in rows.column_names:
        raise CorpusError(f"{where}: no 'translation' column (found {rows.column_names}); "
                          f'rows must look like {{"translation": {{"{src_lang}": ..., '
                          f'"{tgt_lang}": ...}}}}')
    column = rows.data.column("translation")
    for lang in (src_lang, tgt_lang):
        if lang not in {field.name for field in column.type}:
            _raise_at(0, f"no {lang!r} text in any row", where, file)
        values = pc.struct_field(column, lang)
        if not str(values.type).startswith(("string", "large_string")):
            _raise_at(0, f"the {lang!r} field holds {values.type}, not text", where, file)
        bad = pc.or_kleene(pc.is_null(values),
                           pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(values)), 0))
        bad = pc.fill_null(bad, True)
        if pc.any(bad).as_py():
            index = int(pc.index(bad, True).as_py())
            value = values[index].as_py()
            problem = f"no {lang!r} key" if value is None else f"the {lang!r} text is empty"
            _raise_at(index, problem, where, file)


def _raise_at(index: int, problem: str, where: str, file: Path | None) -> None:
    """Point at the line in the file, or at the row of a Hub split."""
    if file is None:
        raise CorpusError(f"{where}, row {index + 1}: {problem}")
    raise CorpusError(f"{file}, line {_line_number(file, index)}: {problem}")


def _line_number(file: Path, index: int) -> int:
    """The file line of data row `index`: blank lines and a TSV header are not rows."""
    rows_seen = -1 if file.suffix == ".tsv" else 0  # the header is line 1 of a TSV
    with file.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                if rows_seen == index:
                    return number
                rows_seen += 1
    return number


def _first_bad_line(file: Path, src_lang: str, tgt_lang: str) -> CorpusError:
    """Read the file line by line to say where a parser gave up, and why."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        return CorpusError(f"{file}: not UTF-8 text ({err}); save it as UTF-8")
    columns = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if file.suffix == ".tsv":
            fields = line.split("\t")
            if columns is None:
                columns = len(fields)
            elif len(fields) != columns:
                return CorpusError(f"{file}, line {number}: {len(fields)} tab-separated fields, "
                                   f"but the header has {columns}")
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            return CorpusError(f"{file}, line {number}: not a JSON object ({err.msg})")
        translation = row.get("translation") if isinstance(row, dict) else None
        if not isinstance(translation, dict):
            return CorpusError(f'{file}, line {number}: no "translation" object')
        for lang in (src_lang, tgt_lang):
            if not isinstance(translation.get(lang), str):
                return CorpusError(f"{file}, line {number}: the {lang!r} field is "
                                   f"{type(translation.get(lang)).__name__}, not text")
    return CorpusError(f"{file}: datasets could not read it, and no line stands out; "
                       f"check that it is JSONL in the opus100 schema or a TSV with a header")


# --- The Hugging Face Hub ------------------------------------------------------------------


def hub_offline() -> bool:
    """HF_HUB_OFFLINE, read now: a notebook may set it after huggingface_hub was imported."""
    from_environment = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    return constants.HF_HUB_OFFLINE or from_environment


def _unavailable(name: str, reason: str) -> CorpusUnavailable:
    """The error for an unreachable Hub, saying how to carry on with the built-in corpus."""
    return CorpusUnavailable(
        f"The Hugging Face Hub is unreachable ({reason}), so {name} cannot be loaded. "
        'Use the built-in corpus instead: load_corpus() or load_corpus("builtin"), '
        "or a corpus file on this machine.")


def _load_hub(name: str, config: str | None) -> datasets.DatasetDict:
    """Download a Hub dataset, failing at once (not after 20 s of retries) if the Hub is away."""
    if hub_offline():
        raise _unavailable(name, "HF_HUB_OFFLINE is set")
    try:
        HfApi().dataset_info(name, timeout=HUB_TIMEOUT_SECONDS)
    except (OSError, HTTPError) as err:
        raise _unavailable(name, f"{type(err).__name__}: {err}") from err
    try:
        return datasets.load_dataset(name, config)
    except ConnectionError as err:
        raise _unavailable(name, str(err)) from err


# --- Filters and carved splits -------------------------------------------------------------


def prepare_splits(
    splits: datasets.DatasetDict, src_lang: str = "en", tgt_lang: str = "de", *,
    max_train_pairs: int | None = None, dedupe: bool = False, seed: int = 0,
) -> datasets.DatasetDict:
    """Remove duplicates, carve missing splits, then subsample train: each step says what it did.

    Carving comes before subsampling, so validation and test stay the same whatever
    `max_train_pairs` is, and scores from runs of different sizes compare.
    """
    splits = datasets.DatasetDict(splits)
    if dedupe:
        for split in list(splits):
            splits[split] = _select(splits[split], _first_occurrences(
                _pairs(splits[split], src_lang, tgt_lang)), f"{split}: removed", "duplicate pairs")
    missing = [split for split in ("validation", "test") if split not in splits]
    if missing:
        splits = _carve(splits, missing, seed)
    if dedupe or missing:
        held_out = {pair for split in ("validation", "test")
                    for pair in _pairs(splits[split], src_lang, tgt_lang)}
        train = _pairs(splits["train"], src_lang, tgt_lang)
        splits["train"] = _select(splits["train"], [i for i, p in enumerate(train)
                                                    if p not in held_out],
                                  "train: removed", "pairs that are also in validation or test")
    if max_train_pairs is not None and len(splits["train"]) > max_train_pairs:
        keep = np.sort(np.random.default_rng(seed).permutation(len(splits["train"]))
                       [:max_train_pairs])
        print(f"train: kept {max_train_pairs:,} of {len(splits['train']):,} pairs, drawn with "
              f"seed {seed}")
        splits["train"] = splits["train"].select(keep)
    return datasets.DatasetDict({split: splits[split] for split in SPLITS})


def _pairs(rows: datasets.Dataset, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    column = rows.data.column("translation")
    return list(zip(pc.struct_field(column, src_lang).to_pylist(),
                    pc.struct_field(column, tgt_lang).to_pylist(), strict=True))


def _first_occurrences(pairs: list[tuple[str, str]]) -> list[int]:
    seen: set[tuple[str, str]] = set()
    keep = []
    for index, pair in enumerate(pairs):
        if pair not in seen:
            seen.add(pair)
            keep.append(index)
    return keep


def _select(rows: datasets.Dataset, keep: list[int], doing: str, what: str) -> datasets.Dataset:
    """Keep the rows at `keep`, printing how many others went (when any did)."""
    removed = len(rows) - len(keep)
    if removed:
        print(f"{doing} {removed:,} {what}")
        return rows.select(keep)
    return rows


def _carve(splits: datasets.DatasetDict, missing: list[str], seed: int) -> datasets.DatasetDict:
    """Take validation and/or test from a seeded shuffle of train; the rest stays train."""
    train = splits["train"]
    size = min(CARVED_SIZE, len(train) // 20)
    if size == 0:
        raise CorpusError(f"train holds {len(train)} pairs, too few to carve "
                          f"{' and '.join(missing)} from (at least 20): give those splits "
                          f"as files")
    order = np.random.default_rng(seed).permutation(len(train))
    for number, split in enumerate(missing):
        splits[split] = train.select(np.sort(order[number * size : (number + 1) * size]))
    splits["train"] = train.select(np.sort(order[len(missing) * size :]))
    print(f"carved {size:,} pairs each for {' and '.join(missing)} from train (seed {seed}); "
          f"{len(splits['train']):,} remain for training")
    return splits
