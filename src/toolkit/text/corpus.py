"""The built-in English->German corpus: its splits, its files, and loading it with `datasets`.

The pairs come from `toolkit.text.random_sentences`, drawn from one stream seeded with `SEED`, so
`python -m toolkit.text.corpus` (what `make data` runs) writes byte-identical files every time.

Splits. The stream fills the test split first, then validation, then train. A pair whose
English or German side was already drawn is dropped, so no sentence appears in two splits
and each English sentence has exactly one German translation.

Held-out combinations measure generalisation rather than memorisation. A sentence holds
one if any of its noun phrases has

- one of the adjective+noun pairs in `HELD_OUT_PAIRS` ("red dog", "old car", ...), or
- a number from 71 to 79 as its determiner ("seventy-two dogs").

Each word of these combinations is common in train: "red", "dog", "seventy" itself and
"sixty-two" are all there, so a model can compose "seventy-two" from them. But such
sentences go ONLY to the test split (500 of its 1,500 sentences, tagged `held_out`);
train and validation never contain them.
"""

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import datasets

from toolkit.paths import PROJECT_ROOT
from toolkit.text.corpus_errors import (
    CorpusUnavailable as CorpusUnavailable,  # raised by load_corpus
)
from toolkit.text.corpus_files import no_progress_bars
from toolkit.text.grammar import phenomena, render
from toolkit.text.random_sentences import random_sentence
from toolkit.text.sentences import NounPhrase, Sentence, noun_phrases
from toolkit.text.sources import read_source
from toolkit.text.splits import SPLITS as SPLITS  # the corpus files' names, as loaders expect
from toolkit.text.splits import prepare_splits

SEED = 20170612  # the day "Attention Is All You Need" appeared on arXiv
TRAIN_SIZE = 50_000
VALIDATION_SIZE = 1_000
TEST_SIZE = 1_500
HELD_OUT_TEST_SIZE = 500  # of TEST_SIZE; the other 1,000 test sentences are regular ones
HELD_OUT_PAIRS = frozenset(
    {("red", "dog"), ("old", "car"), ("small", "horse"), ("white", "cat"), ("tired", "child")}
)
HELD_OUT_NUMBERS = range(71, 80)
HELD_OUT_TAG = "held_out"

DATA_DIR = PROJECT_ROOT / "assets" / "data"

# --- Generating the built-in corpus ------------------------------------------------------


def is_held_out(sentence: Sentence) -> bool:
    """True if the sentence holds a combination that only the test split may show."""
    return any(_held_out_phrase(phrase) for phrase in noun_phrases(sentence))


def _held_out_phrase(phrase: NounPhrase) -> bool:
    """A held-out number as determiner, or a held-out adjective+noun pair."""
    if isinstance(phrase.determiner, int) and phrase.determiner in HELD_OUT_NUMBERS:
        return True
    if phrase.adjective is None:
        return False
    return (phrase.adjective.english, phrase.noun.english) in HELD_OUT_PAIRS


# How many pairs each part of the corpus takes, in the order the stream fills them.
_QUOTAS = {
    "test": TEST_SIZE - HELD_OUT_TEST_SIZE,
    "validation": VALIDATION_SIZE,
    "train": TRAIN_SIZE,
    HELD_OUT_TAG: HELD_OUT_TEST_SIZE,
}


def _fresh_pairs(seed: int) -> Iterator[tuple[Sentence, str, str]]:
    """An endless seeded stream of sentences whose English and German are both new."""
    rng = random.Random(seed)
    seen_english: set[str] = set()
    seen_german: set[str] = set()
    while True:
        sentence = random_sentence(rng)
        english, german = render(sentence)
        if english not in seen_english and german not in seen_german:
            seen_english.add(english)
            seen_german.add(german)
            yield sentence, english, german


def _destination(held_out: bool, counts: dict[str, int]) -> str | None:
    """Where the next pair goes: test, then validation, then train; None once that is full."""
    if held_out:
        return HELD_OUT_TAG if counts[HELD_OUT_TAG] < _QUOTAS[HELD_OUT_TAG] else None
    for part in ("test", "validation", "train"):
        if counts[part] < _QUOTAS[part]:
            return part
    return None


def generate_corpus(seed: int = SEED) -> dict[str, list[dict]]:
    """Deal the stream into the splits, as rows in the opus100 schema plus phenomenon tags."""
    splits: dict[str, list[dict]] = {split: [] for split in SPLITS}
    counts = dict.fromkeys(_QUOTAS, 0)
    stream = _fresh_pairs(seed)
    while counts != _QUOTAS:
        sentence, english, german = next(stream)
        held_out = is_held_out(sentence)
        part = _destination(held_out, counts)
        if part is None:
            continue
        counts[part] += 1
        tags = phenomena(sentence) + ([HELD_OUT_TAG] if held_out else [])
        split = "test" if part == HELD_OUT_TAG else part
        splits[split].append({"translation": {"en": english, "de": german}, "phenomena": tags})
    return splits


def _jsonl(rows: list[dict]) -> str:
    """One JSON object per line; ensure_ascii=False keeps "Mädchen" readable in the file."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_corpus(directory: Path = DATA_DIR) -> dict[str, Path]:
    """Write train/validation/test JSONL files; the same seed gives the same bytes."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, rows in generate_corpus().items():
        paths[split] = directory / f"{split}.jsonl"
        paths[split].write_text(_jsonl(rows), encoding="utf-8", newline="\n")
    return paths


# --- Loading -----------------------------------------------------------------------------


def load_corpus(
    source: str = "builtin", data_dir: Path = DATA_DIR, *, src_lang: str = "en",
    tgt_lang: str = "de", config: str | None = None, max_train_pairs: int | None = None,
    dedupe: bool = False, seed: int = 0,
) -> datasets.DatasetDict:
    """The built-in corpus (the default, offline), or any source `toolkit.text.sources` reads.

    "opus100" loads opus100 from the Hub; a path loads a local JSONL or TSV file or folder;
    any other name is a Hugging Face dataset id, with its `config`. The filters are
    `toolkit.text.splits.prepare_splits`.
    """
    if source == "builtin":
        files = {split: str(Path(data_dir) / f"{split}.jsonl") for split in SPLITS}
        with no_progress_bars():
            splits = datasets.load_dataset("json", data_files=files)
    else:
        splits = read_source(source, src_lang, tgt_lang, config)
    return prepare_splits(splits, src_lang, tgt_lang, max_train_pairs=max_train_pairs,
                          dedupe=dedupe, seed=seed)


def main() -> None:
    """Regenerate the files (`make data`) and report what was written."""
    start = time.perf_counter()
    paths = write_corpus()
    seconds = time.perf_counter() - start
    for split, path in paths.items():
        lines = path.read_text(encoding="utf-8").count("\n")
        print(f"{split:>10}: {lines:6,} pairs  {path}")
    print(f"generated in {seconds:.1f} s")


if __name__ == "__main__":
    main()
