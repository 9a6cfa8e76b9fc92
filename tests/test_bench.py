"""benchmarks/bench.py times what its rows are named for, on the device it says; the synthetic
corpus of benchmarks/real_text.py is shaped like real text."""

import json
import os
import re
import sys
from collections import Counter

import numpy as np
import pytest
import torch

from toolkit.text.corpus import load_corpus

TINY = {"embed_dim": 16, "num_heads": 4, "layers": 2, "ff_dim": 40}


def training_models(bench) -> dict[str, torch.nn.Module]:
    return {**bench.build(TINY), bench.KEEPING: bench.build(TINY)["stage 07"]}


def test_every_training_row_takes_the_same_step_on_the_same_loss(bench):
    """A fair row: same weights, same loss (nn.Transformer's included), and a real update."""
    src, tgt = bench.batch(10)
    losses = {}
    for name, model in training_models(bench).items():
        before = model.out_proj.weight.detach().clone()
        losses[name] = bench.training_step(model, src, tgt, name == bench.KEEPING)().item()
        assert not torch.equal(model.out_proj.weight, before), f"{name} took no optimiser step"
    assert max(losses.values()) - min(losses.values()) <= 1e-5, losses


@pytest.mark.parametrize("keep", [True, False], ids=["keeping", "plain"])
def test_only_the_keep_attention_row_keeps_weights_in_every_attention(bench, keep):
    model = bench.build(TINY)["stage 07"]
    attentions = [m for m in model.modules() if hasattr(m, "keep_attention")]
    kept = []
    for module in attentions:
        module.register_forward_hook(lambda m, inputs, output: kept.append(m.attention is not None))
    bench.training_step(model, *bench.batch(10), keep_attention=keep)()
    assert len(kept) == len(attentions) == 6 and set(kept) == {keep}


@pytest.mark.parametrize("row", ["encode_once_greedy_decode", "cached_greedy_decode"])
def test_a_decoding_row_that_writes_other_tokens_is_refused_before_timing(bench, monkeypatch,
                                                                          row):
    src, _ = bench.batch(10)
    names = list(bench.decoding_tasks(bench.build(TINY), src))  # all agree: no error
    assert bench.ENCODE_ONCE in names and "stage 07 + KV cache" in names
    honest = getattr(bench, row)
    monkeypatch.setattr(bench, row, lambda *args: [t[::-1] for t in honest(*args)])
    with pytest.raises(RuntimeError, match="does not decode the same tokens"):
        bench.decoding_tasks(bench.build(TINY), src)


def test_the_clock_is_read_only_after_the_gpu_has_finished(bench, monkeypatch):
    """CUDA kernels run asynchronously: without a synchronise the time is the launch time."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 2**20)
    seconds, peak_mb = bench.timed(lambda: events.append("work"), torch.device("cuda"))
    assert events == ["sync", "work", "sync"] and seconds >= 0 and peak_mb == 1.0


REAL_TEXT = {"figures": {"pipeline_seconds": 1.0}}  # what a patched real_text.run returns
BEAM = {"time_ratio": 1.8}  # what a patched beam.run returns
TRAINING = {"paths": {}}  # what a patched training.run returns


@pytest.fixture
def patched_main(bench, monkeypatch, tmp_path):
    """bench.main with both parts replaced by stand-ins, writing to tmp_path."""
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(bench, "run", lambda rounds, warmup, device: [])
    monkeypatch.setattr(bench.real_text, "run", lambda **sizes: REAL_TEXT)
    monkeypatch.setattr(bench.real_text, "summary", lambda results: "")
    monkeypatch.setattr(bench.beam, "run", lambda **options: BEAM)
    monkeypatch.setattr(bench.beam, "summary", lambda results: "")
    monkeypatch.setattr(bench.training, "run", lambda write_corpus, **sizes: TRAINING)
    monkeypatch.setattr(bench.training, "summary", lambda results: "")
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # not this process's
    readme_tables = []  # what would have rewritten the README's tables: not the real README
    monkeypatch.setattr(bench, "write_readme_tables", readme_tables.append)

    def main(*options: str) -> None:
        monkeypatch.setattr(sys, "argv", ["bench.py", "--device", "cpu", *options])
        bench.main()
    main.readme_tables = readme_tables
    return main


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_only_a_full_run_writes_the_results(patched_main, tmp_path, quick):
    """A smoke test must not overwrite the committed results that notebook 08 shows."""
    patched_main(*["--quick"] * quick)
    written = tmp_path / "results.json"
    assert written.exists() != quick
    if not quick:
        results = json.loads(written.read_text())
        assert results["device"] == "cpu" and results["real_text"] == REAL_TEXT
        assert results["beam"] == BEAM and results["training"] == TRAINING
    # The README's bench tables follow the file written, and only the committed file.
    assert patched_main.readme_tables == ([] if quick else [results])


def test_a_run_written_elsewhere_leaves_the_readme_alone(patched_main, tmp_path):
    """The README's tables are the committed results.json's, not another file's."""
    patched_main("--output", str(tmp_path / "elsewhere.json"))
    assert (tmp_path / "elsewhere.json").exists() and patched_main.readme_tables == []


def test_a_real_text_only_run_keeps_the_model_results_already_written(patched_main, tmp_path):
    """Notebook 08 reads the model rows: rerunning issue 16's part alone must not drop them."""
    written = tmp_path / "results.json"
    written.write_text(json.dumps({"device": "cpu", "results": [{"model": "stage 07"}]}))
    patched_main("--only", "real-text")
    results = json.loads(written.read_text())
    assert results["results"] == [{"model": "stage 07"}] and results["real_text"] == REAL_TEXT
    assert "beam" not in results  # that part did not run
    patched_main("--only", "beam")
    results = json.loads(written.read_text())
    assert results["real_text"] == REAL_TEXT and results["beam"] == BEAM
    assert "training" not in results
    patched_main("--only", "training")
    assert json.loads(written.read_text())["training"] == TRAINING


# --- The synthetic corpus (benchmarks/real_text.py) ---------------------------------------

CORPUS_PAIRS = 20_000


@pytest.fixture(scope="module")
def real_text(bench):
    return bench.real_text


@pytest.fixture(scope="module")
def corpus(real_text, tmp_path_factory):
    path = tmp_path_factory.mktemp("real_text") / "corpus.jsonl"
    real_text.write_corpus(path, CORPUS_PAIRS, seed=0)
    return [json.loads(line)["translation"] for line in path.read_text("utf-8").splitlines()]


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@pytest.mark.parametrize("lang", ["en", "de"])
def test_word_frequencies_follow_zipf_rank_r_about_1_over_r(corpus, lang):
    counts = Counter(word for row in corpus for word in words(row[lang]))
    frequencies = np.array(sorted(counts.values(), reverse=True))  # (types,)
    ranks = np.arange(1, len(frequencies) + 1)
    slope = np.polyfit(np.log(ranks[9:1000]), np.log(frequencies[9:1000]), 1)[0]
    assert -1.1 < slope < -0.9, slope  # log f = -log r + c
    assert 7 < frequencies[0] / frequencies[9] < 14  # rank 10 ten times rarer than rank 1


def test_word_types_keep_appearing_as_the_corpus_grows(real_text, corpus):
    """A real vocabulary has no end in sight: types grow with size (Heaps), 100,000s of them."""
    for lang in ("en", "de"):
        types = {size: len({w for row in corpus[:size] for w in words(row[lang])})
                 for size in (CORPUS_PAIRS // 4, CORPUS_PAIRS)}
        assert types[CORPUS_PAIRS] > 2 * types[CORPUS_PAIRS // 4], types
    vocabularies = real_text.vocabularies(seed=0)
    for lang in ("en", "de"):
        assert len({word.lower() for word in vocabularies[lang]["inside"]}) >= 100_000


def test_sentences_average_12_to_13_words_with_a_long_tail(corpus):
    lengths = {lang: np.array([len(words(row[lang])) for row in corpus]) for lang in ("en", "de")}
    english = lengths["en"]
    assert 12 <= english.mean() <= 13 and english.min() >= 1 and english.max() <= 100
    assert np.percentile(english, 99) > 3 * np.median(english)  # a long tail, not a bell
    assert (english > 50).sum() > 0
    assert np.corrcoef(english, lengths["de"])[0, 1] > 0.9  # a translation follows its source
    assert abs(lengths["de"].mean() / english.mean() - 1) < 0.1


def test_the_same_seed_writes_the_same_bytes(real_text, tmp_path):
    files = {name: tmp_path / f"{name}.jsonl" for name in ("first", "again", "other")}
    for path, seed in zip(files.values(), (0, 0, 1), strict=True):
        real_text.write_corpus(path, 300, seed=seed)
    text = {name: path.read_bytes() for name, path in files.items()}
    assert text["first"] == text["again"] != text["other"]
    shapes = {name: [len(line.split()) for line in text[name].decode().splitlines()]
              for name in ("first", "other")}
    assert shapes["first"] != shapes["other"]  # new sentences, not just new spellings


def test_the_corpus_is_opus100_jsonl_that_load_corpus_reads(real_text, tmp_path):
    path = tmp_path / "corpus.jsonl"
    real_text.write_corpus(path, 2_000, seed=3)
    lines = path.read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 2_000 and all(list(row) == ["translation"] for row in rows)
    assert all(sorted(row["translation"]) == ["de", "en"] for row in rows)
    sentences = [text for row in rows for text in row["translation"].values()]
    assert all(text[0].isupper() and text[-1] in ".?!" and "  " not in text
               for text in sentences)
    assert 0.02 < np.mean([bool(re.search("[äöü]", row["translation"]["de"]))
                           for row in rows]) < 0.8  # some umlauts, on the German side only
    assert not any(re.search("[äöüß]", row["translation"]["en"]) for row in rows)
    splits = load_corpus(str(path))
    assert sum(len(split) for split in splits.values()) == 2_000


def test_a_tiny_real_text_run_measures_a_first_load_in_a_fresh_process(real_text, tmp_path):
    """The peak memory must be the pipeline's own, and the load not one from the cache."""
    results = real_text.run(pairs=600, subset=200, breakdown_pairs=300, rounds=2, steps=1,
                            warmup=0, vocab_size=200, max_tokens=256, workdir=tmp_path)
    assert set(results) >= {"goals", "figures", "meets", "machine", "corpus", "pipeline",
                            "breakdown", "throughput"}
    pipeline = results["pipeline"]
    assert pipeline["pid"] != os.getpid()
    cache = pipeline["fresh_cache"]
    assert pipeline["cache_files"] and all(f.startswith(cache) for f in pipeline["cache_files"])
    assert cache.startswith(str(tmp_path)) and not os.path.exists(cache)
    assert pipeline["train_pairs"] == 600 - 2 * 30  # a twentieth carved for each held-out split
    assert set(pipeline["seconds"]) == {"load", "train BPE", "encode", "total"}
    assert not list(tmp_path.glob("*.jsonl"))  # the corpus is made again, never kept
    assert results["figures"]["peak_memory_gb"] == pipeline["peak_memory_gb"] > 0
    for goal, limit in results["goals"].items():
        figure = results["figures"][goal]
        assert results["meets"][goal] == (figure >= limit if goal == "throughput_ratio"
                                          else figure <= limit)


def test_random_batches_hold_as_many_pairs_as_token_budget_batches_on_average(real_text):
    """The comparison is fair only if both arms take batches of the same mean size."""
    rng = np.random.default_rng(0)
    pairs = [([5] * int(n) + [3], [2] + [6] * int(n) + [3])
             for n in np.clip(rng.lognormal(2.3, 0.6, 400), 1, 60)]
    numbers = real_text.throughput(pairs, vocab_size=10, rounds=2, steps=1, warmup=0,
                                   max_tokens=300)
    budget = numbers["batches_per_epoch"]
    assert numbers["batch_size"] == round(len(pairs) / budget["token budget"])
    assert budget["random"] == -(-len(pairs) // numbers["batch_size"])
    assert numbers["padding"]["token budget"] < 0.1 < numbers["padding"]["random"]
    assert len(numbers["ratios"]) == 2 and numbers["ratio"] == np.median(numbers["ratios"])
