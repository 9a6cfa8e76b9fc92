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

This module chooses where a corpus comes from; the rest is in one module each: local files
(`toolkit.text.corpus_files`), the Hub (`toolkit.text.hub`), the splits made from what was read
(`toolkit.text.splits`), and the errors (`toolkit.text.corpus_errors`).
"""

from pathlib import Path

import datasets

from toolkit.text.corpus_errors import CorpusError, CorpusUnavailable
from toolkit.text.corpus_files import FORMATS, check_rows, read_local
from toolkit.text.hub import OPUS100, load_hub

__all__ = ["CorpusError", "CorpusUnavailable", "read_source"]  # the errors, where they were


def read_source(
    source: str, src_lang: str = "en", tgt_lang: str = "de", config: str | None = None
) -> datasets.DatasetDict:
    """The splits a source has, checked row by row: a local path, opus100 or a Hub id."""
    path = Path(source).expanduser()
    if path.exists():
        return read_local(path, src_lang, tgt_lang)
    if path.suffix in FORMATS or source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise FileNotFoundError(f"no corpus file or folder at {path}: check the path")
    if source == "opus100":
        source, config = OPUS100, config or "-".join(sorted((src_lang, tgt_lang)))
    splits = load_hub(source, config)
    for split, rows in splits.items():
        check_rows(rows, src_lang, tgt_lang, where=f"{source} ({config}), split {split}")
    return splits
