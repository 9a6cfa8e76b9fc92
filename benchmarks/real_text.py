"""Real text at scale (issue 16): the data pipeline on a million pairs, and token-budget batches.

No real corpus of a million pairs can be committed or downloaded here, so this writes one:
a synthetic parallel corpus in the opus100 schema, shaped like real text where it matters
for speed and memory (`write_corpus`):
- word frequencies follow Zipf's law (rank r is seen about 1/r as often as rank 1), over
  150,000 pseudo-word types per language, frequent words short, rare ones long;
- sentence lengths are lognormal, about 12.5 words on average with a long tail, at most
  100 words; the German length follows the English one;
- a capitalised first word, an end mark (. ? !), a few commas; German capitalises its
  "nouns" and has umlauts and ß.
Each English type has its own German type, so the two sides are translations of a sort.

Goal A, the pipeline on `pairs` pairs (a million): `toolkit.text.corpus.load_corpus` on the file,
BPE training (`toolkit.batching.data.build_vocabularies`, shared, 8,000 tokens), and encoding
(`toolkit.batching.batches.encode_pairs`), in a fresh process whose peak resident memory is then the
pipeline's own; the `datasets` cache is fresh too, so the load is a first load. Goals: at
most 2 minutes and 4 GB.

Goal B, training throughput: stage 07 (d=128, 4 heads, 3+3 layers) on a subset of the
encoded pairs, in target tokens (scored, not <pad>) per second, with token-budget batches
against random batches of the same mean number of pairs, interleaved round by round as
bench.py does; the median of the paired ratios. Goals: at least 1.5 times, and at most
10 % padding in token-budget batches.

    python benchmarks/bench.py --only real-text     (updates the "real_text" key of results.json)
    python benchmarks/real_text.py                  (prints the figures, writes nothing)
    python benchmarks/real_text.py --quick          (20,000 pairs and a few steps)
"""

import argparse
import itertools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from stages import stage07_multi_head as stage
from toolkit.batching.batches import Batch, endless, loader, padding_fraction
from toolkit.learning.training import PaperOptimizer
from toolkit.paths import PROJECT_ROOT
from toolkit.text.subwords import SubwordVocab

WORKDIR = PROJECT_ROOT / "build" / "bench"  # git-ignored: the corpus is written, never committed
GOALS = {"pipeline_seconds": 120, "peak_memory_gb": 4.0, "throughput_ratio": 1.5,
         "token_budget_padding": 0.10}
FULL = {"pairs": 1_000_000, "subset": 20_000, "breakdown_pairs": 200_000, "rounds": 7,
        "steps": 8, "warmup": 2}
QUICK = {"pairs": 20_000, "subset": 2_000, "breakdown_pairs": 5_000, "rounds": 2, "steps": 2,
         "warmup": 1}
VOCAB_SIZE, MAX_TOKENS = 8_000, 2_048  # BPE size (shared); tokens per token-budget batch
MODEL = {"embed_dim": 128, "num_heads": 4, "num_encoder_layers": 3, "num_decoder_layers": 3,
         "ff_dim": 512}
LR, WARMUP_STEPS = 2e-3, 100  # as bench.py: the rate does not change the time
GB = 10**9

# --- The corpus ----------------------------------------------------------------------------

WORD_TYPES = 150_000  # per language; a million pairs show nearly all of them
MEAN_WORDS, LENGTH_SIGMA, MAX_WORDS = 12.5, 0.55, 100
CHUNK_PAIRS = 100_000  # pairs built and written at a time: memory stays flat
END_MARKS, END_WEIGHTS = [".", "?", "!"], [0.88, 0.08, 0.04]
COMMA_RATE = 0.05  # of the gaps between two words
PREFIX, MIDDLE, SUFFIX = '{"translation": {"en": "', '", "de": "', '"}}\n'
# Syllable parts and how often each is drawn: onset + nucleus + coda.
ENGLISH = {
    "onsets": ("", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t",
               "v", "w", "y", "th", "st", "br", "cl", "tr", "sh", "ch", "gr", "pl", "wh", "sp"),
    "nuclei": ("a", "e", "i", "o", "u", "ea", "ou", "ai", "ee", "oo", "y"),
    "codas": ("", "", "", "n", "r", "s", "t", "l", "nd", "st", "ck", "ng", "m", "rd", "x"),
}
GERMAN = {
    "onsets": ("", "b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "w", "z",
               "sch", "st", "sp", "kr", "gr", "pf", "br", "fl", "tr", "ch"),
    "nuclei": ("a", "e", "i", "o", "u", "ei", "au", "ie", "eu", "ä", "ö", "ü"),
    "codas": ("", "", "", "n", "r", "s", "t", "l", "ch", "ng", "st", "ß", "tz", "nd", "rn",
              "ck"),
}
UMLAUT_RATE = 0.04  # of German syllables: about one word in ten has ä, ö or ü
NOUN_RATE = 0.3  # of German types, written with a capital letter


def zipf_cdf(types: int) -> np.ndarray:
    """Cumulative Zipf probabilities: rank r (from 1) drawn in proportion to 1/r."""
    weights = 1.0 / np.arange(1, types + 1)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]  # (types,)


def draw_words(rng: np.random.Generator, cdf: np.ndarray, count: int) -> np.ndarray:
    """`count` word ranks (0 = the most frequent), by inverting the cumulative distribution."""
    return np.minimum(np.searchsorted(cdf, rng.random(count), side="right"), len(cdf) - 1)


def pseudo_words(rng: np.random.Generator, parts: dict, types: int,
                 umlaut_rate: float = 0.0) -> list[str]:
    """`types` distinct words ordered by rank: frequent ranks get fewer syllables, as in Zipf's
    law of abbreviation, so frequent words stay whole under BPE and rare ones split."""
    candidates = int(types * 1.4)  # some draws repeat a word already made; keep the first
    ranks = np.arange(candidates)
    syllables = np.clip(np.rint(0.5 * np.log10(ranks + 1) + rng.normal(0, 0.5, candidates)),
                        1, 4).astype(np.int64)  # (candidates,)
    words = np.full(candidates, "", dtype=object)
    nucleus_weights = np.array([0.0 if n in "äöü" else 1.0 for n in parts["nuclei"]])
    umlauts = nucleus_weights == 0
    nucleus_weights *= (1 - umlaut_rate) / nucleus_weights.sum()
    if umlauts.any():
        nucleus_weights[umlauts] = umlaut_rate / umlauts.sum()
    for slot in range(int(syllables.max())):
        used = syllables > slot  # (candidates,): words that have this syllable
        syllable = np.full(candidates, "", dtype=object)
        for part, weights in (("onsets", None), ("nuclei", nucleus_weights), ("codas", None)):
            choices = np.array(parts[part], dtype=object)
            syllable += choices[rng.choice(len(choices), candidates, p=weights)]
        words[used] += syllable[used]
    unique = list(dict.fromkeys(words.tolist()))  # the first of each word, in rank order
    if len(unique) < types:
        raise RuntimeError(f"only {len(unique):,} distinct words for {types:,} types")
    return unique[:types]


def vocabularies(seed: int, types: int = WORD_TYPES) -> dict[str, dict[str, np.ndarray]]:
    """Per language, each type as written inside a sentence and as a sentence's first word."""
    english = pseudo_words(np.random.default_rng([seed, 0]), ENGLISH, types)
    german = pseudo_words(np.random.default_rng([seed, 1]), GERMAN, types, UMLAUT_RATE)
    nouns = np.random.default_rng([seed, 2]).random(types) < NOUN_RATE
    german = [word.capitalize() if noun else word for word, noun in zip(german, nouns,
                                                                         strict=True)]
    return {lang: {"inside": np.array(words, dtype=object),
                   "first": np.array([w[0].upper() + w[1:] for w in words], dtype=object)}
            for lang, words in (("en", english), ("de", german))}


def sentence_lengths(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """English words per sentence (lognormal, mean ~12.5), and German lengths that follow them."""
    mu = np.log(MEAN_WORDS) - LENGTH_SIGMA**2 / 2  # so the lognormal's mean is MEAN_WORDS
    english = np.clip(np.rint(rng.lognormal(mu, LENGTH_SIGMA, count)), 1, MAX_WORDS)
    german = np.clip(np.rint(english * rng.lognormal(-0.03, 0.12, count)), 1, MAX_WORDS)
    return english.astype(np.int64), german.astype(np.int64)  # (count,) each


def chunk_text(rng: np.random.Generator, words: dict, cdf: np.ndarray, count: int,
               seen: dict[str, np.ndarray]) -> str:
    """`count` JSONL lines, built with array operations and joined once; `seen` counts types."""
    en_len, de_len = sentence_lengths(rng, count)
    en_start = np.cumsum(en_len) - en_len  # (count,) where each English sentence begins
    en_ids = draw_words(rng, cdf, int(en_len.sum()))  # (en_tokens,) ranks, sentence after sentence
    # German: the i-th word translates the i-th English word; a longer German sentence
    # draws its extra words afresh.
    de_line = np.repeat(np.arange(count), de_len)  # (de_tokens,) the sentence of each word
    de_pos = np.arange(len(de_line)) - np.repeat(np.cumsum(de_len) - de_len, de_len)
    translated = de_pos < en_len[de_line]
    de_ids = np.empty(len(de_line), dtype=np.int64)
    de_ids[translated] = en_ids[en_start[de_line[translated]] + de_pos[translated]]
    de_ids[~translated] = draw_words(rng, cdf, int((~translated).sum()))
    seen["en"] |= np.bincount(en_ids, minlength=len(cdf)) > 0
    seen["de"] |= np.bincount(de_ids, minlength=len(cdf)) > 0

    # One line is the English words then the German words; each word is followed by its
    # separator (a space, a comma, or at a sentence's end its mark and the JSON around it).
    line_len = en_len + de_len
    line_start = np.cumsum(line_len) - line_len  # (count,)
    total = int(line_len.sum())
    tokens = np.empty(total, dtype=object)
    separators = np.array([" ", ", "], dtype=object)[
        (rng.random(total) < COMMA_RATE).astype(np.int64)]  # (total,)
    marks = rng.choice(len(END_MARKS), count, p=END_WEIGHTS)  # (count,) the same on both sides
    for lang, ids, starts, lengths, after in (
            ("en", en_ids, line_start, en_len, MIDDLE),
            ("de", de_ids, line_start + en_len, de_len, SUFFIX + PREFIX)):
        position = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(
            len(ids))  # (tokens,) where each word sits in the chunk
        tokens[position] = words[lang]["inside"][ids]
        tokens[starts] = words[lang]["first"][ids[np.cumsum(lengths) - lengths]]
        separators[starts + lengths - 1] = np.array(
            [mark + after for mark in END_MARKS], dtype=object)[marks]
    pieces = np.empty(2 * total, dtype=object)
    pieces[0::2], pieces[1::2] = tokens, separators
    return PREFIX + "".join(pieces.tolist())[: -len(PREFIX)]


def write_corpus(path: Path, pairs: int, seed: int = 0) -> dict:
    """Write `pairs` synthetic lines in the opus100 schema; the same seed gives the same bytes."""
    start = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    words = vocabularies(seed)
    cdf = zipf_cdf(WORD_TYPES)
    rng = np.random.default_rng([seed, 3])
    seen = {lang: np.zeros(WORD_TYPES, dtype=bool) for lang in ("en", "de")}
    with path.open("w", encoding="utf-8", newline="\n") as file:
        for first in range(0, pairs, CHUNK_PAIRS):
            file.write(chunk_text(rng, words, cdf, min(CHUNK_PAIRS, pairs - first), seen))
    return {"pairs": pairs, "seed": seed, "file_mb": path.stat().st_size / 10**6,
            "word_types": {lang: int(found.sum()) for lang, found in seen.items()},
            "seconds": time.perf_counter() - start}


# --- Goal A: the pipeline, in a fresh process ----------------------------------------------


def memory_gb() -> dict[str, float | None]:
    """Resident memory now, and the most this process has ever held (its peak)."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is in bytes there, KiB here
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / GB
    try:
        with open("/proc/self/statm") as statm:
            now = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / GB
    except OSError:
        now = None
    return {"now": now, "peak": peak}


def cpu_time() -> float:
    """Seconds of CPU this process used, every thread counted: steadier than the clock on a
    busy machine, and above it when tokenizers works on several cores at once."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pipeline(corpus: Path, vocab_size: int, subset: int, output: Path) -> dict:
    """Load, train BPE, encode: the child's side of `in_fresh_process`, timed part by part
    (imports not counted: a notebook has them already)."""
    from toolkit.batching.batches import encode_pairs  # the child imports what the pipeline needs
    from toolkit.batching.data import build_vocabularies
    from toolkit.text.corpus import load_corpus

    seconds, cpu_seconds, memory = {}, {}, {"after imports": memory_gb()}
    start = lap = time.perf_counter()
    cpu_start = cpu_lap = cpu_time()

    def part(name: str) -> None:
        nonlocal lap, cpu_lap
        seconds[name], lap = time.perf_counter() - lap, time.perf_counter()
        cpu_seconds[name], cpu_lap = cpu_time() - cpu_lap, cpu_time()
        memory[f"after {name}"] = memory_gb()

    splits = load_corpus(str(corpus))
    part("load")
    vocab, _ = build_vocabularies(splits["train"], "en", "de", "bpe", vocab_size=vocab_size,
                                  shared=True)
    part("train BPE")
    pairs = encode_pairs(splits["train"], vocab, vocab)
    part("encode")
    seconds["total"] = time.perf_counter() - start
    cpu_seconds["total"] = cpu_time() - cpu_start
    peak = memory_gb()["peak"]
    output.mkdir(parents=True, exist_ok=True)
    (output / "vocab.json").write_text(vocab.to_json())
    (output / "subset.json").write_text(json.dumps(pairs[:subset]))
    return {
        "pid": os.getpid(), "pairs_read": sum(len(rows) for rows in splits.values()),
        "train_pairs": len(pairs), "vocab_size": len(vocab),
        "cache_files": [entry["filename"] for entry in splits["train"].cache_files],
        "mean_tokens": {"src": statistics.fmean(len(src) for src, _ in pairs),
                        "tgt": statistics.fmean(len(tgt) for _, tgt in pairs)},
        "seconds": seconds, "cpu_seconds": cpu_seconds, "peak_memory_gb": peak,
        "memory_gb": memory,
    }


def in_fresh_process(mode: str, corpus: Path, vocab_size: int, subset: int,
                     workdir: Path) -> dict:
    """Run `pipeline` or `breakdown` in a new process, with a `datasets` cache holding nothing:
    its peak memory is then the pipeline's own, and its load is a first load."""
    cache = workdir / "hf-datasets-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    report = workdir / f"{mode}.json"
    report.unlink(missing_ok=True)
    try:
        subprocess.run([sys.executable, __file__, f"--{mode}", str(corpus), "--output",
                        str(workdir), "--vocab-size", str(vocab_size), "--subset", str(subset)],
                       env=env, check=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {**json.loads(report.read_text()), "fresh_cache": str(cache)}


def breakdown(sample: Path, vocab_size: int) -> dict:
    """Where the pipeline's time and memory go, step by step, beside the slower routes it left.

    The steps redo what `load_corpus`, `build_vocabularies` and `encode_pairs` do, one at a
    time, each timed (clock and CPU) with the resident memory after it.
    """
    import datasets
    import pyarrow.compute as pc
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from toolkit.batching.batches import collector_paused
    from toolkit.text.splits import prepare_splits
    from toolkit.text.subwords import WORD_START
    from toolkit.text.tokens import tokenize
    from toolkit.text.vocab import BOS_ID, EOS_ID, SPECIALS, UNK

    datasets.disable_progress_bars()
    steps: dict[str, dict] = {}

    def step(name: str, work):
        wall, cpu = time.perf_counter(), cpu_time()
        result = work()
        steps[name] = {"seconds": time.perf_counter() - wall, "cpu_seconds": cpu_time() - cpu,
                       "memory_gb": memory_gb()["now"]}
        return result

    rows = step("datasets.load_dataset (JSON to Arrow, first load)", lambda: datasets.load_dataset(
        "json", data_files=str(sample), split="train"))
    splits = step("prepare_splits (carve validation and test)",
                  lambda: prepare_splits(datasets.DatasetDict({"train": rows})))
    arrow = splits["train"].with_format("arrow")["translation"]
    texts = step("sentences from Arrow, both sides (pyarrow struct_field, as the pipeline)",
                 lambda: [text for lang in ("en", "de")
                          for text in pc.struct_field(arrow, lang).to_pylist()])
    column = splits["train"]["translation"]
    step("alternative: a Python dict per row, once per language", lambda: [
        row[lang] for lang in ("en", "de") for row in column])
    sentences = step("tokenize (Python regex), both sides", lambda: [tokenize(t) for t in texts])
    vocab = step("SubwordVocab.train (Python preparation + BPE merges)",
                 lambda: SubwordVocab.train(iter(sentences), vocab_size))
    lines = [" ".join(words) for words in sentences]

    def merges_alone() -> None:
        tokenizer = Tokenizer(models.BPE(unk_token=UNK))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(WORD_START, prepend_scheme="always")
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS),
                                      show_progress=False)
        tokenizer.train_from_iterator(lines, trainer=trainer)

    step("of which BPE merges alone (Rust train_from_iterator)", merges_alone)
    half = len(sentences) // 2

    def encode_words() -> list:
        with collector_paused():
            ids = [vocab.encode_batch(sentences[start : start + 10_000])
                   for start in range(0, len(sentences), 10_000)]
        return [row for chunk in ids for row in chunk]

    before_lists = memory_gb()["now"]
    ids = step("SubwordVocab.encode_batch, each distinct word once (as the pipeline)",
               encode_words)
    pairs = step("ids framed as pairs", lambda: [
        (src + [EOS_ID], [BOS_ID] + tgt + [EOS_ID])
        for src, tgt in zip(ids[:half], ids[half:], strict=True)])
    ids.clear()
    lists_gb = memory_gb()["now"] - before_lists
    step("alternative: every sentence through Rust (encode_batch_fast, pretokenized)", lambda: [
        encoding.ids for start in range(0, len(sentences), 10_000)
        for encoding in vocab.tokenizer.encode_batch_fast(sentences[start : start + 10_000],
                                                          is_pretokenized=True)])
    flat = np.fromiter((i for src, tgt in pairs for i in src + tgt), dtype=np.int16)
    return {"pairs": len(pairs), "steps": steps,
            "encoded_pairs_gb": {"as Python lists (RSS growth)": lists_gb,
                                 "as one int16 array, ids alone": flat.nbytes / GB}}


# --- Goal B: training throughput -----------------------------------------------------------


def train_steps(model: torch.nn.Module, optimizer: PaperOptimizer, batches, steps: int,
                device: torch.device) -> tuple[int, float]:
    """`steps` steps of the toolkit's loop (as bench.training_step), fetching batches included:
    the scored target tokens and the seconds they took."""
    tokens = 0
    start = time.perf_counter()
    for _ in range(steps):
        batch: Batch = next(batches).to(device)
        model.train()
        with optimizer.forward_context():
            loss = stage.objective(model, batch)
        optimizer.step(loss.mean())
        tokens += int(loss.tokens)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the clock must wait for the kernels
    return tokens, time.perf_counter() - start


def throughput(pairs: list, vocab_size: int, rounds: int, steps: int, warmup: int,
               max_tokens: int = MAX_TOKENS, device: torch.device | str = "cpu") -> dict:
    """Token-budget batches against random batches holding as many pairs on average."""
    device = torch.device(device)
    budget_batches = len(loader(pairs, max_tokens=max_tokens))
    batch_size = max(1, round(len(pairs) / budget_batches))  # the mean pairs per budget batch

    def batches(arm: str):
        if arm == "token budget":
            return loader(pairs, max_tokens=max_tokens, seed=0)
        return loader(pairs, batch_size=batch_size, seed=0)

    arms = ("token budget", "random")
    longest = max(max(len(src), len(tgt)) for src, tgt in pairs)
    torch.manual_seed(0)
    models = {arm: stage.Transformer(vocab_size, vocab_size, **MODEL, max_seq_len=longest)
              for arm in arms}
    models["random"].load_state_dict(models["token budget"].state_dict())
    streams = {arm: endless(batches(arm)) for arm in arms}
    optimizers = {arm: PaperOptimizer(models[arm].to(device), LR, WARMUP_STEPS) for arm in arms}
    for arm in arms:
        train_steps(models[arm], optimizers[arm], streams[arm], warmup, device)
    rates: dict[str, list[float]] = {arm: [] for arm in arms}
    totals = {arm: [0, 0.0] for arm in arms}
    for number in range(rounds):  # interleaved, and each arm goes first every other round
        for arm in arms if number % 2 == 0 else arms[::-1]:
            tokens, seconds = train_steps(models[arm], optimizers[arm], streams[arm], steps,
                                          device)
            rates[arm].append(tokens / seconds)
            totals[arm][0] += tokens
            totals[arm][1] += seconds
    ratios = [b / r for b, r in zip(rates["token budget"], rates["random"], strict=True)]
    return {
        "pairs": len(pairs), "max_tokens": max_tokens, "batch_size": batch_size,
        "batches_per_epoch": {"token budget": budget_batches,
                              "random": len(batches("random"))},
        "padding": {arm: padding_fraction(batches(arm)) for arm in arms},  # fresh loaders
        "model": MODEL, "vocab_size": vocab_size, "device": str(device),
        "rounds": rounds, "steps_per_round": steps, "warmup_steps": warmup,
        "tokens_per_second": {arm: {"median": statistics.median(rates[arm]),
                                    "overall": totals[arm][0] / totals[arm][1]}
                              for arm in arms},
        "ratio": statistics.median(ratios), "ratios": ratios,
    }


# --- Both goals ----------------------------------------------------------------------------


def machine() -> dict:
    """What the times depend on, including how busy the machine was."""
    processor = platform.processor()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            processor = next(line.split(":", 1)[1].strip() for line in cpuinfo
                             if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import datasets
    import tokenizers
    return {"machine": platform.machine(), "processor": processor, "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM",
                                                     "default (every core)"),
            "python": platform.python_version(), "torch": torch.__version__,
            "tokenizers": tokenizers.__version__, "datasets": datasets.__version__,
            "numpy": np.__version__}


def run(pairs: int, subset: int, breakdown_pairs: int, rounds: int, steps: int, warmup: int,
        vocab_size: int = VOCAB_SIZE, max_tokens: int = MAX_TOKENS, workdir: Path = WORKDIR,
        seed: int = 0, device: torch.device | str = "cpu") -> dict:
    """Write the corpus, measure both goals, and say which are met."""
    workdir = Path(workdir)
    load_before = os.getloadavg()
    corpus_path = workdir / f"real_text_{pairs}_seed{seed}.jsonl"
    corpus = write_corpus(corpus_path, pairs, seed)
    print(f"corpus: {pairs:,} pairs, {corpus['file_mb']:.0f} MB, word types "
          f"{corpus['word_types']}, written in {corpus['seconds']:.1f} s", flush=True)
    sample_path = workdir / f"real_text_{breakdown_pairs}_seed{seed}.jsonl"
    try:
        pipeline_report = in_fresh_process("pipeline", corpus_path, vocab_size, subset, workdir)
        print(f"pipeline: {pipeline_report['seconds']}", flush=True)
        with corpus_path.open(encoding="utf-8") as lines:
            sample_path.write_text("".join(itertools.islice(lines, breakdown_pairs)),
                                   encoding="utf-8")
        breakdown_report = in_fresh_process("breakdown", sample_path, vocab_size, subset, workdir)
    finally:  # a quarter of a gigabyte, made again in seconds
        corpus_path.unlink(missing_ok=True)
        sample_path.unlink(missing_ok=True)
    vocab = SubwordVocab.from_json((workdir / "vocab.json").read_text())
    encoded = [(src, tgt) for src, tgt in json.loads((workdir / "subset.json").read_text())]
    throughput_report = throughput(encoded, len(vocab), rounds, steps, warmup, max_tokens, device)
    figures = {"pipeline_seconds": pipeline_report["seconds"]["total"],
               "peak_memory_gb": pipeline_report["peak_memory_gb"],
               "throughput_ratio": throughput_report["ratio"],
               "token_budget_padding": throughput_report["padding"]["token budget"]}
    meets = {goal: (figures[goal] >= GOALS[goal] if goal == "throughput_ratio"
                    else figures[goal] <= GOALS[goal]) for goal in GOALS}
    return {"goals": GOALS, "figures": figures, "meets": meets,
            "machine": {**machine(), "load_average": {"before": load_before,
                                                      "after": os.getloadavg()}},
            "corpus": corpus, "pipeline": pipeline_report, "breakdown": breakdown_report,
            "throughput": throughput_report}


def summary(results: dict) -> str:
    """The figures against the goals, one line each."""
    a, b = results["pipeline"], results["throughput"]
    parts = ", ".join(f"{name} {value:.1f} s" for name, value in a["seconds"].items())
    lines = [
        f"pipeline on {results['corpus']['pairs']:,} pairs: {parts}; peak "
        f"{a['peak_memory_gb']:.2f} GB",
        f"throughput ({b['pairs']:,} pairs, max_tokens {b['max_tokens']}, batch_size "
        f"{b['batch_size']}): token budget / random = {b['ratio']:.2f} (median of "
        f"{len(b['ratios'])} rounds); padding {b['padding']['token budget']:.1%} (token "
        f"budget), {b['padding']['random']:.1%} (random)",
    ]
    where = results["breakdown"]
    lines.append(f"where the pipeline's time goes, measured on {where['pairs']:,} pairs:")
    for name, step in where["steps"].items():
        lines.append(f"  {step['seconds']:7.2f} s  ({step['cpu_seconds']:7.2f} s CPU)  "
                     f"{step['memory_gb']:.2f} GB  {name}")
    lines.append("  encoded pairs: " + ", ".join(
        f"{gb:.3f} GB {how}" for how, gb in where["encoded_pairs_gb"].items()))
    for goal, limit in results["goals"].items():
        sign = ">=" if goal == "throughput_ratio" else "<="
        verdict = "met" if results["meets"][goal] else "MISSED"
        lines.append(f"  {goal:<22} {results['figures'][goal]:10.3f}  goal {sign} {limit}: "
                     f"{verdict}")
    return "\n".join(lines)



# The README's table of this part: `make bench` rewrites it from results.json, and
# tests/test_bench_tables.py holds the README to what this writes from the committed file.
TABLE_START = "<!-- real-text bench table: written by make bench -->"
TABLE_END = "<!-- end of real-text bench table -->"


def markdown_table(results: dict) -> str:
    """The committed run of this part as the README shows it, every figure read from it."""
    goals, figures, meets = results["goals"], results["figures"], results["meets"]
    a, b, where = results["pipeline"], results["throughput"], results["machine"]
    seconds = a["seconds"]

    def measured(goal: str, text: str) -> str:
        return text if meets[goal] else f"{text}: **missed**"

    lines = [
        "| goal | measured |", "|---|---|",
        f"| load, train a shared BPE of {a['vocab_size']:,} tokens and encode "
        f"{results['corpus']['pairs']:,} pairs in ≤ {goals['pipeline_seconds']:g} s | "
        + measured("pipeline_seconds", f"{figures['pipeline_seconds']:.1f} s (load "
                   f"{seconds['load']:.1f}, BPE {seconds['train BPE']:.1f}, encode "
                   f"{seconds['encode']:.1f})") + " |",
        f"| ... in ≤ {goals['peak_memory_gb']:g} GB of peak memory | "
        + measured("peak_memory_gb", f"{figures['peak_memory_gb']:.2f} GB") + " |",
        f"| token-budget batches ≥ {goals['throughput_ratio']:g}× the target tokens per second "
        "of random batches of the same size | "
        + measured("throughput_ratio", f"{figures['throughput_ratio']:.2f}× (median of "
                   f"{len(b['ratios'])} interleaved rounds)") + " |",
        f"| padding of token-budget batches ≤ {100 * goals['token_budget_padding']:g} % | "
        + measured("token_budget_padding", f"{100 * figures['token_budget_padding']:.1f} % "
                   f"(random batches: {100 * b['padding']['random']:.1f} %)") + " |",
    ]
    model = b["model"]
    load = where["load_average"]
    footnote = (
        f"From `benchmarks/results.json`, measured on one {where['processor']} machine with "
        f"{where['cpus']} cores, the model on {where['torch_threads']} thread"
        f"{'s' * (where['torch_threads'] != 1)} (load average {load['before'][0]:.2f} before "
        f"the run, {load['after'][0]:.2f} after). The first two rows are the whole "
        f"{results['corpus']['pairs']:,} pairs. The last two are measured on a "
        f"{b['pairs']:,}-pair sample of that corpus (batches of at most {b['max_tokens']:,} "
        f"positions, against random batches of {b['batch_size']} pairs, about as many per "
        f"epoch), training a model of `embed_dim` {model['embed_dim']}, {model['num_heads']} "
        f"heads, {model['num_encoder_layers']} + {model['num_decoder_layers']} layers and "
        f"`ff_dim` {model['ff_dim']} for {b['steps_per_round']} steps a round.")
    return "\n".join(lines) + "\n\n" + footnote


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 pairs, a few steps")
    parser.add_argument("--pipeline", type=Path, help=argparse.SUPPRESS)  # the children's side
    parser.add_argument("--breakdown", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=WORKDIR, help=argparse.SUPPRESS)
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE, help=argparse.SUPPRESS)
    parser.add_argument("--subset", type=int, default=FULL["subset"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pipeline is not None:
        report = pipeline(args.pipeline, args.vocab_size, args.subset, args.output)
        (args.output / "pipeline.json").write_text(json.dumps(report, indent=1))
        return
    if args.breakdown is not None:
        report = breakdown(args.breakdown, args.vocab_size)
        (args.output / "breakdown.json").write_text(json.dumps(report, indent=1))
        return
    torch.set_num_threads(1)  # as bench.py's default --threads
    print(summary(run(**(QUICK if args.quick else FULL))))


if __name__ == "__main__":
    main()
