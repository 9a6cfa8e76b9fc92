"""Parallel corpora from anywhere, as the same splits: local files, opus100, any Hub dataset.

Every source ends as a `DatasetDict` with train, validation and test splits in the
opus100 row schema, `{"translation": {"en": ..., "de": ...}}`:

- a local JSONL file in that schema, or a TSV file whose header names the two languages
  (`en<TAB>de`); a file is the training split;
- a local folder holding `train`, and maybe `validation` and `test`, as `.jsonl` or `.tsv`;
- `"opus100"`, or any Hugging Face dataset id with a `translation` column and its
  configuration (often the language pair), downloaded by `datasets`.

A corpus with no validation or test split gets them carved from train, by seed, with no
pair in two splits. Nothing is dropped silently: every filter prints what it removed, and
a bad row stops the load with the file and line to fix.
"""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import GatedRepoError, HTTPError, RepositoryNotFoundError

OPUS100 = "Helsinki-NLP/opus-100"
HUB_TIMEOUT_SECONDS = 5
SPLITS = ("train", "validation", "test")
FORMATS = {".jsonl": "json", ".json": "json", ".tsv": "csv"}  # file suffix -> datasets builder
JSON_WHITESPACE = " \t\r\n"  # what JSON skips between values; a no-break space is no blank
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
    if path.suffix in FORMATS or source.startswith((".", "/", "~")) or source.count("/") > 1:
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
        _check_rows(rows, src_lang, tgt_lang, where=str(file))
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


def _check_rows(rows: datasets.Dataset, src_lang: str, tgt_lang: str, where: str) -> None:
    """Every row must have both languages as non-empty text; name the first that does not."""
    if "translation" not in rows.column_names:
        raise CorpusError(f"{where}: no 'translation' column (found {rows.column_names}); "
                          f'rows must look like {{"translation": {{"{src_lang}": ..., '
                          f'"{tgt_lang}": ...}}}}')
    column = _translations(rows)
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
        f"or a corpus file on this machine.{_if_a_folder(name)}")


def _if_a_folder(name: str) -> str:
    """A Hub id and a relative folder look alike ("mydata/corpus"): name the folder looked for."""
    if "/" not in name:
        return ""
    return (f" If {name} is meant as a folder on this machine, there is none at "
            f"{Path(name).resolve()}.")


def _load_hub(name: str, config: str | None) -> datasets.DatasetDict:
    """Download a Hub dataset, failing at once (not after 20 s of retries) if the Hub is away."""
    if hub_offline():
        raise _unavailable(name, "HF_HUB_OFFLINE is set")
    try:
        HfApi().dataset_info(name, timeout=HUB_TIMEOUT_SECONDS)
    except GatedRepoError as err:  # reached, and it answered: not an unreachable Hub
        raise CorpusError(f"{name} is gated on the Hub: accept its terms on its page, then log "
                          f"in with `hf auth login`") from err
    except RepositoryNotFoundError as err:
        raise CorpusError(f"the Hub has no dataset {name} (or it is private): check the "
                          f"name.{_if_a_folder(name)}") from err
    except (OSError, HTTPError) as err:
        raise _unavailable(name, f"{type(err).__name__}: {err}") from err
    try:
        splits = datasets.load_dataset(name, config)
    except ConnectionError as err:
        raise _unavailable(name, str(err)) from err
    if "train" not in splits:
        raise CorpusError(f"{name} ({config}) has no train split, only {', '.join(splits)}: "
                          f"give a corpus with one, or a local folder with train.jsonl")
    return splits


# --- Filters and carved splits -------------------------------------------------------------


def prepare_splits(
    splits: datasets.DatasetDict, src_lang: str = "en", tgt_lang: str = "de", *,
    max_train_pairs: int | None = None, dedupe: bool = False, seed: int = 0,
) -> datasets.DatasetDict:
    """Remove duplicates, carve missing splits, then subsample train: each step says what it did.

    Carving comes before subsampling, so validation and test stay the same whatever
    `max_train_pairs` is, and scores from runs of different sizes compare.
    """
    if max_train_pairs is not None and max_train_pairs < 1:
        raise ValueError(f"max_train_pairs={max_train_pairs} leaves nothing to train on")
    splits = datasets.DatasetDict(splits)
    if dedupe:
        for split in [split for split in splits if split != "test"]:  # test is scored whole
            splits[split] = _select(splits[split], _first_occurrences(
                _pairs(splits[split], src_lang, tgt_lang)), f"{split}: removed", "duplicate pairs")
    missing = [split for split in ("validation", "test") if split not in splits]
    given = [split for split in ("validation", "test") if split in splits]
    if given:  # before carving, so carved splits miss these pairs too
        held_out = {pair for split in given for pair in _pairs(splits[split], src_lang, tgt_lang)}
        train = _pairs(splits["train"], src_lang, tgt_lang)
        fresh = [i for i, p in enumerate(train) if p not in held_out]
        also = f"pairs that are also in {' or '.join(given)}"
        if dedupe or missing:
            splits["train"] = _select(splits["train"], fresh, "train: removed", also)
        elif len(fresh) < len(train):  # said, never silent: a score on them measures memory
            print(f"train: kept {len(train) - len(fresh):,} {also}: dedupe=True (--dedupe) "
                  f"removes them, so that no test sentence was seen in training")
    if len(splits["train"]) == 0:
        raise CorpusError("no training pairs are left (every one is also in validation or test, "
                          "or train was empty): give a train split of its own")
    if missing:
        splits = _carve(splits, missing, seed, src_lang, tgt_lang)
    if max_train_pairs is not None and len(splits["train"]) > max_train_pairs:
        keep = np.sort(np.random.default_rng(seed).permutation(len(splits["train"]))
                       [:max_train_pairs])
        print(f"train: kept {max_train_pairs:,} of {len(splits['train']):,} pairs, drawn with "
              f"seed {seed}")
        splits["train"] = splits["train"].select(keep)
    return datasets.DatasetDict({split: splits[split] for split in SPLITS})


def _translations(rows: datasets.Dataset) -> pa.ChunkedArray:
    """The translation column of the rows a Dataset shows: after `select`, `rows.data` is still
    the whole table it selected from, so it would bring back every row filtered out."""
    return rows.with_format("arrow")[:].column("translation")


def _pairs(rows: datasets.Dataset, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    column = _translations(rows)
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


def _carve(
    splits: datasets.DatasetDict, missing: list[str], seed: int, src_lang: str, tgt_lang: str
) -> datasets.DatasetDict:
    """Take validation and/or test from a seeded shuffle of train's distinct pairs.

    Every copy of a pair goes where the pair goes, so no pair lands in two splits even
    when train repeats it (dedupe=False).
    """
    train = splits["train"]
    distinct: dict[tuple[str, str], int] = {}
    pair_of_row = np.array([distinct.setdefault(pair, len(distinct))
                            for pair in _pairs(train, src_lang, tgt_lang)], dtype=np.int64)
    size = min(CARVED_SIZE, len(distinct) // 20)
    if size == 0:
        raise CorpusError(f"train holds {len(distinct)} distinct pairs, too few to carve "
                          f"{' and '.join(missing)} from (at least 20): give those splits "
                          f"as files")
    order = np.random.default_rng(seed).permutation(len(distinct))
    split_of_pair = np.full(len(distinct), len(missing))  # len(missing) stands for train
    for number in range(len(missing)):
        split_of_pair[order[number * size : (number + 1) * size]] = number
    split_of_row = split_of_pair[pair_of_row]
    for number, split in enumerate(missing):
        splits[split] = train.select(np.flatnonzero(split_of_row == number))
    splits["train"] = train.select(np.flatnonzero(split_of_row == len(missing)))
    carved = " and ".join(f"{split} ({len(splits[split]):,} pairs)" for split in missing)
    print(f"carved {carved} from train with seed {seed}, no pair in two splits; "
          f"{len(splits['train']):,} remain for training")
    return splits
