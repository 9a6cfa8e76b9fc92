"""Corpora from local files: the splits, the filters, what they print, and where a bad row is."""

import json
from collections import Counter
from pathlib import Path

import datasets
import pytest
from huggingface_hub import constants

from toolkit.batching.data import load_data
from toolkit.text.corpus import load_corpus
from toolkit.text.corpus_errors import CorpusError, CorpusUnavailable
from toolkit.text.hub import hub_offline
from toolkit.text.tokens import tokenize
from toolkit.text.vocab import BOS_ID, EOS_ID

Pair = tuple[str, str]
SPLITS = ("train", "validation", "test")
TRICKY = [  # what pandas, pyarrow or an ASCII-only writer could change on the way in
    ('"Hello!", she said.', "„Hallo!“, sagte sie."),
    ("It's 5 o'clock; isn't it?", "Es ist 5 Uhr – oder?"),
    ("Streets, greetings: naïve café …", "Straßen, Grüße: naives Café …"),
    ("NA", "null"),
    ("1", "2.0"),
    ("None", "# kein Kommentar"),
    ("«quoted»", "»zitiert« & ‚halb‘"),
]


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path_factory, monkeypatch):
    """Each tiny corpus is cached once by datasets; keep those caches out of the user's."""
    cache = tmp_path_factory.getbasetemp() / "datasets-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)


def pairs(count: int, start: int = 0) -> list[Pair]:
    """Distinct sentence pairs, so any pair found twice was copied by the code under test."""
    return [(f"the dog {i} runs .", f"der Hund {i} läuft .") for i in range(start, start + count)]


def jsonl_line(pair: Pair, src_lang: str = "en", tgt_lang: str = "de") -> str:
    return json.dumps({"translation": {src_lang: pair[0], tgt_lang: pair[1]}}, ensure_ascii=False)


def write_jsonl(path: Path, rows: list[Pair], src_lang: str = "en", tgt_lang: str = "de") -> Path:
    path.write_text("".join(jsonl_line(pair, src_lang, tgt_lang) + "\n" for pair in rows),
                    encoding="utf-8")
    return path


def write_tsv(path: Path, header: tuple[str, str], rows: list[tuple[str, str]]) -> Path:
    lines = ["\t".join(header)] + ["\t".join(row) for row in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_folder(folder: Path, train: list[Pair], validation: list[Pair], test: list[Pair]) -> Path:
    folder.mkdir()
    for split, rows in zip(SPLITS, (train, validation, test), strict=True):
        write_jsonl(folder / f"{split}.jsonl", rows)
    return folder


def split_pairs(rows: datasets.Dataset, src_lang: str = "en", tgt_lang: str = "de") -> list[Pair]:
    return [(row[src_lang], row[tgt_lang]) for row in rows["translation"]]


# --- Sources -------------------------------------------------------------------------------


def test_a_jsonl_file_becomes_three_splits_holding_exactly_its_pairs(tmp_path):
    written = pairs(60)
    corpus = load_corpus(str(write_jsonl(tmp_path / "corpus.jsonl", written)))
    assert list(corpus) == list(SPLITS)
    loaded = [pair for split in SPLITS for pair in split_pairs(corpus[split])]
    assert Counter(loaded) == Counter(written)  # nothing lost, nothing added, nothing altered
    assert set(corpus["train"][0]["translation"]) == {"en", "de"}


def test_a_tsv_file_is_read_by_its_header_not_by_column_order(tmp_path):
    """German first in the file: the header, not the position, says which side is English."""
    written = pairs(60)
    tsv = write_tsv(tmp_path / "corpus.tsv", ("de", "en"), [(de, en) for en, de in written])
    jsonl = write_jsonl(tmp_path / "corpus.jsonl", written)
    from_tsv, from_jsonl = load_corpus(str(tsv)), load_corpus(str(jsonl))
    for split in SPLITS:
        assert split_pairs(from_tsv[split]) == split_pairs(from_jsonl[split]), split


def test_a_folder_keeps_its_own_splits_row_for_row(tmp_path, capsys):
    """Given splits are neither carved nor filtered unless asked: duplicates stay too."""
    train = pairs(30) + pairs(2)  # two repeats, which only dedupe may remove
    validation, test = pairs(5, start=100), pairs(4, start=200)
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", train)
    write_tsv(folder / "validation.tsv", ("en", "de"), validation)
    write_jsonl(folder / "test.jsonl", test)
    corpus = load_corpus(str(folder))
    assert split_pairs(corpus["train"]) == train
    assert split_pairs(corpus["validation"]) == validation
    assert split_pairs(corpus["test"]) == test
    assert capsys.readouterr().out == ""


def test_other_language_pairs_load_by_src_lang_and_tgt_lang(tmp_path):
    french = [(f"le chien {i} court .", f"the dog {i} runs .") for i in range(40)]
    tsv = write_tsv(tmp_path / "fr-en.tsv", ("fr", "en"), french)
    data = load_data(str(tsv), src_lang="fr", tgt_lang="en")
    assert (data.src_lang, data.tgt_lang) == ("fr", "en")
    train_french = data.sources("train")
    assert train_french and set(train_french) <= {fr for fr, _ in french}
    assert "chien" in data.src_vocab.stoi and "chien" not in data.tgt_vocab.stoi
    assert data.references("train") == [tokenize(en) for en in
                                        (dict(french)[fr] for fr in train_french)]


def test_rows_may_carry_more_languages_than_the_pair_asked_for(tmp_path):
    """An OPUS-style file with a third language on some rows only still loads the pair."""
    rows = [{"translation": {"fr": f"le chien {i} court .", "en": f"the dog {i} runs .",
                             **({"de": f"der Hund {i} läuft ."} if i % 3 == 0 else {})}}
            for i in range(40)]
    file = tmp_path / "multi.jsonl"
    file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                    encoding="utf-8")
    corpus = load_corpus(str(file), src_lang="fr", tgt_lang="en")
    loaded = [pair for split in SPLITS for pair in split_pairs(corpus[split], "fr", "en")]
    assert sorted(loaded) == sorted((row["translation"]["fr"], row["translation"]["en"])
                                    for row in rows)


def test_a_hub_id_fails_at_once_offline_and_says_what_to_use(monkeypatch, connections):
    """HF_HUB_OFFLINE set after huggingface_hub was imported (as a notebook does) still counts."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_offline()
    with pytest.raises(CorpusUnavailable) as caught:
        load_data("some-org/some-corpus", config="de-en")
    assert connections == []
    message = str(caught.value)
    assert "some-org/some-corpus" in message and "HF_HUB_OFFLINE" in message
    assert 'load_corpus("builtin")' in message and "corpus file" in message


def test_a_name_that_may_be_a_folder_says_which_folder_was_looked_for(monkeypatch):
    """"mydata/corpus" is a Hub id or a relative folder: a user who meant the folder must
    learn that it is not there, not only that the Hub is away."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CorpusUnavailable, match="meant as a folder on this machine, there is "
                                                "none at /.*mydata/corpus"):
        load_data("mydata/corpus")


class Answered:
    """A stand-in for the Hub answering about a dataset with an error of its own."""

    def __init__(self, error: Exception):
        self.error = error

    def dataset_info(self, *args, **kwargs):
        raise self.error


@pytest.mark.parametrize(("error", "said"), [
    ("RepositoryNotFoundError", "the Hub has no dataset some-org/typo"),
    ("GatedRepoError", "some-org/typo is gated on the Hub"),
])
def test_a_hub_that_answers_no_is_not_called_unreachable(monkeypatch, error, said):
    import httpx2
    from huggingface_hub import errors

    from toolkit.text import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    response = httpx2.Response(404, request=httpx2.Request("GET", "https://huggingface.co"))
    raised = getattr(errors, error)("no such dataset", response=response)
    monkeypatch.setattr(hub, "HfApi", lambda: Answered(raised))
    with pytest.raises(CorpusError, match=said):
        load_data("some-org/typo")


class Found:
    """A stand-in for the Hub that has the dataset."""

    def dataset_info(self, *args, **kwargs):
        return None


def test_a_hub_dataset_without_a_train_split_says_so(monkeypatch):
    from toolkit.text import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "HfApi", Found)
    only_test = datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {"translation": [{"en": "a", "de": "b"}]})})
    monkeypatch.setattr(hub.datasets, "load_dataset", lambda *a, **k: only_test)
    with pytest.raises(CorpusError, match="has no train split, only test"):
        load_data("some-org/test-only")


def test_umlauts_quotes_and_words_pandas_calls_missing_load_unchanged(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", TRICKY)
    write_tsv(folder / "validation.tsv", ("en", "de"), TRICKY)
    write_jsonl(folder / "test.jsonl", TRICKY)
    assert "Straßen, Grüße" in (folder / "train.jsonl").read_text(encoding="utf-8")
    corpus = load_corpus(str(folder))
    for split in SPLITS:
        assert split_pairs(corpus[split]) == TRICKY, split


# --- Filters, and what they print ----------------------------------------------------------


def test_max_train_pairs_draws_the_same_rows_for_a_seed_and_others_for_another(tmp_path, capsys):
    train = pairs(60)
    folder = write_folder(tmp_path / "corpus", train, pairs(5, start=100), pairs(5, start=200))
    drawn = {seed: split_pairs(load_corpus(str(folder), max_train_pairs=10, seed=seed)["train"])
             for seed in (0, 1)}
    again = split_pairs(load_corpus(str(folder), max_train_pairs=10, seed=0)["train"])
    assert "train: kept 10 of 60 pairs, drawn with seed 0" in capsys.readouterr().out
    assert again == drawn[0]
    assert set(drawn[0]) != set(drawn[1])
    for rows in drawn.values():
        assert len(set(rows)) == 10 and set(rows) <= set(train)
    assert len(load_corpus(str(folder), max_train_pairs=60)["train"]) == 60
    assert "kept" not in capsys.readouterr().out  # nothing to draw when all pairs fit


def test_dedupe_removes_exact_repeats_and_training_pairs_held_out_and_says_how_many(
    tmp_path, capsys
):
    p0, p1, p2, p3 = pairs(4)
    v0, v1 = pairs(2, start=100)
    t0, t1 = pairs(2, start=200)
    near_p0 = (p0[0], "der Hund 0 rennt .")  # same English, other German: not a duplicate pair
    train = [p0, p1, p0, p2, v0, p0, p3, t0, p1, near_p0]
    folder = write_folder(tmp_path / "corpus", train, [v0, v1, v0], [t0, t1])
    corpus = load_corpus(str(folder), dedupe=True)
    assert split_pairs(corpus["train"]) == [p0, p1, p2, p3, near_p0]
    assert split_pairs(corpus["validation"]) == [v0, v1]
    assert split_pairs(corpus["test"]) == [t0, t1]
    printed = capsys.readouterr().out
    assert "train: removed 3 duplicate pairs" in printed
    assert "validation: removed 1 duplicate pairs" in printed
    assert "train: removed 2 pairs that are also in validation or test" in printed
    assert "test: removed" not in printed


def test_overlap_with_the_given_splits_is_reported_without_dedupe_and_kept(tmp_path, capsys):
    """A training pair that is also a test pair makes the test score partly a memory test:
    a user must hear of it even when not asking for dedupe."""
    p0, p1, p2 = pairs(3)
    t0, t1 = pairs(2, start=200)
    folder = write_folder(tmp_path / "corpus", [p0, t0, p1, p2, t1], pairs(2, start=100), [t0, t1])
    corpus = load_corpus(str(folder))
    assert split_pairs(corpus["train"]) == [p0, t0, p1, p2, t1]
    printed = capsys.readouterr().out
    assert "train: kept 2 pairs that are also in validation or test: dedupe=True" in printed


def test_a_train_split_left_empty_is_a_corpus_error_that_says_so(tmp_path):
    test = pairs(3, start=200)
    folder = write_folder(tmp_path / "corpus", test[:2], pairs(2, start=100), test)
    with pytest.raises(CorpusError, match="no training pairs are left"):
        load_corpus(str(folder), dedupe=True)
    with pytest.raises(CorpusError, match="every training pair is longer than max_len=3"):
        load_data(str(write_folder(tmp_path / "other", pairs(30), pairs(2, start=100),
                                   pairs(2, start=200))), max_len=3)


@pytest.mark.parametrize("seed", range(4))
def test_carved_splits_share_no_pair_even_when_train_repeats_pairs(tmp_path, seed, capsys):
    """Without dedupe, copies of a pair must travel together, or test scores seen pairs."""
    distinct = pairs(40)
    rows = [distinct[(7 * i) % 40] for i in range(160)]  # each pair four times, scattered
    corpus = load_corpus(str(write_jsonl(tmp_path / "corpus.jsonl", rows)), seed=seed)
    contents = {split: set(split_pairs(corpus[split])) for split in SPLITS}
    assert contents["validation"] and contents["test"]
    assert not contents["train"] & contents["validation"]
    assert not contents["train"] & contents["test"]
    assert not contents["validation"] & contents["test"]
    loaded = [pair for split in SPLITS for pair in split_pairs(corpus[split])]
    assert Counter(loaded) == Counter(rows)  # carving moves pairs, it drops none
    assert "carved validation" in capsys.readouterr().out


def test_carving_depends_on_the_seed_only_not_on_max_train_pairs(tmp_path, capsys):
    corpus_file = str(write_jsonl(tmp_path / "corpus.jsonl", pairs(100)))

    def held_out(seed: int, max_train_pairs: int | None) -> dict[str, list[Pair]]:
        corpus = load_corpus(corpus_file, seed=seed, max_train_pairs=max_train_pairs)
        assert max_train_pairs is None or len(corpus["train"]) == max_train_pairs
        return {split: split_pairs(corpus[split]) for split in ("validation", "test")}

    reference = held_out(0, None)
    assert len(reference["validation"]) == len(reference["test"]) == 5  # a twentieth each
    assert "carved validation (5 pairs) and test (5 pairs)" in capsys.readouterr().out
    assert held_out(0, 10) == reference
    assert held_out(0, 50) == reference
    assert held_out(1, None) != reference


def test_max_len_drops_exactly_the_pairs_that_do_not_fit_with_bos_and_eos(tmp_path, capsys):
    """A source gets <eos>, a target <bos> and <eos>: both count against max_len. Training
    and validation lose the pairs that do not fit; the test split keeps every one."""
    def pair(i: int) -> Pair:  # sides of different lengths, so either side can be too long
        return (f"the dog {i} runs" + " far" * (i % 5) + " .",
                f"der Hund {i} läuft" + " weit" * (2 * i % 7) + " .")

    max_len = 9

    def fits(p: Pair) -> bool:
        return len(tokenize(p[0])) + 1 <= max_len and len(tokenize(p[1])) + 2 <= max_len

    splits = {"train": [pair(i) for i in range(70)],
              "validation": [pair(i) for i in range(100, 121)],
              "test": [pair(i) for i in range(200, 214)]}
    folder = write_folder(tmp_path / "corpus", *splits.values())
    data = load_data(str(folder), max_len=max_len)
    printed = capsys.readouterr().out
    for split, rows in splits.items():
        kept = [p for p in rows if fits(p)]
        assert 0 < len(kept) < len(rows)
        if split == "test":  # never filtered: a score must count every test sentence
            assert split_pairs(data.splits[split]) == rows
            assert f"test: kept all {len(rows)} pairs" in printed
            continue
        assert split_pairs(data.splits[split]) == kept, split
        assert (f"{split}: dropped {len(rows) - len(kept)} of {len(rows)} pairs longer than "
                f"max_len={max_len} tokens") in printed
    assert len(data.train) == len(data.splits["train"])
    assert len(data.validation) == len(data.splits["validation"])
    for src, tgt in data.train + data.validation:
        assert len(src) <= max_len and len(tgt) <= max_len
        assert src[-1] == EOS_ID and tgt[0] == BOS_ID and tgt[-1] == EOS_ID


# --- Bad input: the file and the line ------------------------------------------------------

GOOD = pairs(3)
BAD_JSONL = {  # each is the line after three good ones, or after them and two blank lines
    "a missing language key": (jsonl_line(("the cat .", "")).replace(', "de": ""', ""), "'de'"),
    "an empty field": (jsonl_line(("the cat .", "")), "'de' text is empty"),
    "a whitespace-only field": (jsonl_line((" \t ", "die Katze .")), "'en' text is empty"),
    "a number": ('{"translation": {"en": "the cat .", "de": 7}}', "'de' field is int"),
    "a list": ('{"translation": {"en": ["the cat ."], "de": "die Katze ."}}', "'en' field is list"),
    "a null": ('{"translation": {"en": "the cat .", "de": null}}', "'de' field is null"),
    "malformed JSON": ('{"translation": {"en": "the cat .", "de": "die Katze ."}', "not a JSON"),
    "no translation object": ('{"en": "the cat .", "de": "die Katze ."}', '"translation"'),
}
BAD_TSV = {  # each line replaces line 6 of a TSV with a header, a blank and a whitespace line
    "too few fields": ("the cat .", "1 tab-separated field, but the header has 2"),
    "too many fields": ("the cat .\tdie Katze .\tle chat .", "3 tab-separated fields"),
    "an empty field": ("the cat .\t", "'de' text is empty"),
    "only a tab": ("\t", "'en' text is empty"),
}


def assert_names_file_and_line(error: Exception, file: Path, line: int, problem: str) -> None:
    """The message a learner sees first: our words, the file, the line; no parser internals."""
    message = str(error)
    assert type(error) is CorpusError, f"{type(error).__name__}: {message}"
    assert message.startswith(f"{file}, line {line}: "), message
    assert problem in message, message
    for internal in ("Arrow", "pandas", "Error tokenizing", "Traceback", "JsonType"):
        assert internal not in message, message


@pytest.mark.parametrize("blank_lines", [False, True], ids=["no blank line", "blank lines"])
@pytest.mark.parametrize("bad", BAD_JSONL, ids=str)
def test_a_bad_jsonl_row_is_named_by_file_and_line(tmp_path, bad, blank_lines):
    """Blank lines count as lines; without them datasets takes another path through its parser."""
    line, problem = BAD_JSONL[bad]
    before = [jsonl_line(GOOD[0]), jsonl_line(GOOD[1])] + (["", "   "] if blank_lines else [])
    lines = before + [jsonl_line(GOOD[2]), line, jsonl_line(("the bird .", "der Vogel ."))]
    file = tmp_path / "corpus.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        load_corpus(str(file))
    assert_names_file_and_line(caught.value, file, len(before) + 2, problem)


@pytest.mark.parametrize("bad", BAD_TSV, ids=str)
def test_a_bad_tsv_row_is_named_by_file_and_line(tmp_path, bad):
    line, problem = BAD_TSV[bad]
    lines = ["en\tde", "\t".join(GOOD[0]), "", "\t".join(GOOD[1]), "   ", line,
             "\t".join(GOOD[2])]
    file = tmp_path / "corpus.tsv"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        load_data(str(file))
    assert_names_file_and_line(caught.value, file, 6, problem)


def test_a_tsv_header_without_the_language_names_the_header_line(tmp_path):
    file = write_tsv(tmp_path / "corpus.tsv", ("en", "fr"), [("the dog .", "le chien .")])
    with pytest.raises(CorpusError) as caught:
        load_corpus(str(file))
    assert_names_file_and_line(caught.value, file, 1, "the header names ['en', 'fr'], not de")
    assert "en<TAB>de" in str(caught.value)


def test_text_that_is_not_utf8_is_named_by_its_line(tmp_path):
    file = tmp_path / "corpus.jsonl"
    good = "".join(jsonl_line(pair) + "\n" for pair in GOOD).encode()
    file.write_bytes(good + b"\n" + jsonl_line(("the dog runs .", "der Hund läuft .")
                                                      ).encode("latin-1") + b"\n")
    with pytest.raises(CorpusError) as caught:
        load_corpus(str(file))
    assert_names_file_and_line(caught.value, file, 5, "not UTF-8")


def test_an_empty_file_says_it_holds_no_pairs(tmp_path):
    file = tmp_path / "corpus.jsonl"
    file.write_text("\n\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="holds no pairs"):
        load_corpus(str(file))


def test_a_missing_file_or_folder_is_file_not_found_not_a_hub_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = tmp_path / "corpus.jsonl"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_corpus(str(missing))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="data/wmt/corpus"):  # a path, not owner/name
        load_corpus("data/wmt/corpus")


def test_a_folder_needs_one_train_file(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "validation.jsonl", pairs(3))
    with pytest.raises(CorpusError, match=f"{folder} holds no train.jsonl or train.tsv"):
        load_corpus(str(folder))
    write_jsonl(folder / "train.jsonl", pairs(30))
    write_tsv(folder / "train.tsv", ("en", "de"), pairs(30, start=50))
    with pytest.raises(CorpusError, match="train.jsonl and train.tsv: keep one file per split"):
        load_corpus(str(folder))


def test_given_vocabularies_are_used_as_they_are_and_nothing_is_trained(monkeypatch):
    """A resumed run reads its vocabularies from last.pt: training BPE again would cost time
    on every process, and a newer `tokenizers` could learn other merges."""
    from toolkit.batching import data as data_module

    first = load_data(tokenizer="bpe", vocab_size=120, shared_vocab=True)
    monkeypatch.setattr(data_module, "build_vocabularies",
                        lambda *a, **k: pytest.fail("vocabularies were built again"))
    again = load_data(tokenizer="bpe", vocab_size=120, shared_vocab=True,
                      vocabularies=(first.src_vocab, first.tgt_vocab))
    assert again.src_vocab is first.src_vocab and again.train == first.train
