"""From the splits a source has to the three a course run needs: duplicates removed, overlap
with validation and test reported, missing splits carved by seed, train subsampled; each
step says what it did."""

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.text.corpus_errors import CorpusError

SPLITS = ("train", "validation", "test")
CARVED_SIZE = 1_000  # pairs carved for validation and for test, at most a twentieth of train


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


def translations(rows: datasets.Dataset) -> pa.ChunkedArray:
    """The translation column of the rows a Dataset shows: after `select`, `rows.data` is still
    the whole table it selected from, so it would bring back every row filtered out."""
    return rows.with_format("arrow")[:].column("translation")


def _pairs(rows: datasets.Dataset, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    column = translations(rows)
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
