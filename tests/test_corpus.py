"""The committed corpus files: reproducible, disjoint splits, held-out test, and loading."""

import itertools
import json
from collections import Counter, defaultdict

import datasets
import pytest
from datasets import DatasetDict
from huggingface_hub import constants

from toolkit.text.corpus import (
    DATA_DIR,
    HELD_OUT_NUMBERS,
    HELD_OUT_PAIRS,
    HELD_OUT_TAG,
    HELD_OUT_TEST_SIZE,
    SPLITS,
    TEST_SIZE,
    TRAIN_SIZE,
    VALIDATION_SIZE,
    CorpusUnavailable,
    is_held_out,
    load_corpus,
    write_corpus,
)
from toolkit.text.grammar import PHENOMENA, clause, sentence
from toolkit.text.lexicon import NOUNS, english_number
from toolkit.text.tokens import tokenize


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict]]:
    """The committed files, read without `datasets`, exactly as they are on disk."""
    splits = {}
    for split in SPLITS:
        lines = (DATA_DIR / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        splits[split] = [json.loads(line) for line in lines]
    return splits


def _sides(rows: list[dict], side: str) -> list[str]:
    return [row["translation"][side] for row in rows]


def test_write_corpus_reproduces_the_committed_files(tmp_path):
    write_corpus(tmp_path)
    for split in SPLITS:
        committed = (DATA_DIR / f"{split}.jsonl").read_bytes()
        assert (tmp_path / f"{split}.jsonl").read_bytes() == committed, split


def test_split_sizes(rows):
    sizes = {split: len(rows[split]) for split in SPLITS}
    assert sizes == {"train": TRAIN_SIZE, "validation": VALIDATION_SIZE, "test": TEST_SIZE}


def test_each_sentence_has_exactly_one_translation(rows):
    german_for = defaultdict(set)
    english_for = defaultdict(set)
    for row in itertools.chain(*rows.values()):
        german_for[row["translation"]["en"]].add(row["translation"]["de"])
        english_for[row["translation"]["de"]].add(row["translation"]["en"])
    assert all(len(german) == 1 for german in german_for.values())
    assert all(len(english) == 1 for english in english_for.values())


def test_no_sentence_appears_twice_in_the_whole_corpus(rows):
    all_rows = list(itertools.chain(*rows.values()))
    for side in ("en", "de"):
        assert len(set(_sides(all_rows, side))) == len(all_rows), side


def test_no_sentence_is_shared_between_splits(rows):
    for first, second in itertools.combinations(SPLITS, 2):
        for side in ("en", "de"):
            shared = set(_sides(rows[first], side)) & set(_sides(rows[second], side))
            assert not shared, (first, second, side, sorted(shared)[:3])


def _held_out_phrases() -> list[str]:
    """Every held-out combination as English text: "red dog", "red dogs", "seventy-one"."""
    phrases = [english_number(number) for number in HELD_OUT_NUMBERS]
    for noun in NOUNS:
        for adjective, noun_word in HELD_OUT_PAIRS:
            if noun.english == noun_word:
                phrases += [f"{adjective} {noun.english}", f"{adjective} {noun.english_plural}"]
    return phrases


def _held_out_found(english: str) -> set[str]:
    """The held-out phrases in a sentence, read from its words alone, not its structure."""
    words = f" {' '.join(tokenize(english.lower()))} "
    return {phrase for phrase in _held_out_phrases() if f" {' '.join(tokenize(phrase))} " in words}


def test_train_and_validation_never_contain_a_held_out_combination(rows):
    for split in ("train", "validation"):
        for row in rows[split]:
            assert not _held_out_found(row["translation"]["en"]), row
            assert HELD_OUT_TAG not in row["phenomena"], row


def test_test_split_holds_every_held_out_combination_in_its_tagged_sentences(rows):
    tagged = [row for row in rows["test"] if HELD_OUT_TAG in row["phenomena"]]
    untagged = [row for row in rows["test"] if HELD_OUT_TAG not in row["phenomena"]]
    assert len(tagged) == HELD_OUT_TEST_SIZE
    assert all(_held_out_found(row["translation"]["en"]) for row in tagged)
    assert not any(_held_out_found(row["translation"]["en"]) for row in untagged)
    found = set().union(*(_held_out_found(row["translation"]["en"]) for row in tagged))
    for number in HELD_OUT_NUMBERS:
        assert english_number(number) in found
    for adjective, noun in HELD_OUT_PAIRS:
        assert any(phrase.startswith(f"{adjective} {noun}") for phrase in found), noun


def test_train_holds_the_parts_of_the_held_out_combinations(rows):
    train_words = {word for row in rows["train"] for word in tokenize(row["translation"]["en"])}
    assert {"seventy", "sixty", "two"} <= train_words
    for adjective, noun in HELD_OUT_PAIRS:
        assert {adjective, noun} <= train_words


def test_is_held_out():
    assert is_held_out(sentence(clause("the red dog", "sleeps")))
    assert is_held_out(sentence(clause("the cat", "sees", obj="the red dogs")))
    assert is_held_out(sentence(clause("71 cats", "sleep")))
    assert is_held_out(sentence(clause("the man", "gives", indirect="79 cats", obj="a ball")))
    assert not is_held_out(sentence(clause("the red cat", "sleeps")))
    assert not is_held_out(sentence(clause("70 dogs", "sleep")))
    assert not is_held_out(sentence(clause("80 dogs", "sleep")))


def test_every_phenomenon_appears_often_in_test(rows):
    counts = Counter(tag for row in rows["test"] for tag in row["phenomena"])
    for tag in (*PHENOMENA, HELD_OUT_TAG):
        assert counts[tag] >= 50, (tag, counts[tag])


def test_load_corpus_gives_the_builtin_splits():
    corpus = load_corpus()
    assert isinstance(corpus, DatasetDict)
    assert set(corpus) == set(SPLITS)
    assert corpus["test"].num_rows == TEST_SIZE
    assert "translation" in corpus["train"].column_names
    assert set(corpus["validation"][0]["translation"]) == {"en", "de"}


def test_opus100_fails_at_once_when_the_hub_is_offline(monkeypatch, connections):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CorpusUnavailable, match="built-in corpus") as caught:
        load_corpus("opus100")
    assert connections == []
    assert "HF_HUB_OFFLINE" in str(caught.value)
    assert 'load_corpus("builtin")' in str(caught.value)


def test_a_name_that_is_no_local_path_is_a_hub_id_and_fails_at_once_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CorpusUnavailable, match="so wmt14 cannot be loaded"):
        load_corpus("wmt14", config="de-en")


def test_a_first_load_shows_no_progress_bars_and_restores_them(tmp_path, capfd):
    """In a notebook those bars are widgets: empty offline, and gone on a rerun (cached)."""
    for split in SPLITS:  # a new folder, so datasets builds a new cache, as in a fresh clone
        (tmp_path / f"{split}.jsonl").write_text((DATA_DIR / f"{split}.jsonl").read_text())
    loaded = load_corpus(data_dir=tmp_path)
    assert len(loaded["test"]) == 1500
    assert "Generating" not in capfd.readouterr().err
    assert datasets.is_progress_bar_enabled()
