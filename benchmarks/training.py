"""The training command's step against the machine's own limit (issue 46).

The model and step are the command's own (`toolkit.train.training_run.build_model` and
`take_step`) under `--recipe real-text`: shared BPE of 8,000 tokens, token-budget batches
of 4,000 positions, d=128, 4 heads, 3+3 layers, dropout 0.1, label smoothing 0.1. The
batches come from benchmarks/real_text.py's synthetic corpus, shaped like real text.

- **The ceiling**: this machine's matrix-multiply rate, a 2048 x 2048 product timed in this
  process on the same threads, in float32 and in bfloat16.
- **Model FLOP**: counted once per batch by `torch.utils.flop_counter.FlopCounterMode` on
  the stage's float32 step (forward and backward: every matrix product, attention's
  included); every path computes the same maths, so the same count serves all of them.
- **The paths**, timed side by side, interleaved round by round on the same batches: the
  command before issue 46 (stage 07's code, float32), each change alone, and both together.
  For each: target tokens per second, the median of its paired ratios to the first, model
  FLOP per second, and the share of the ceiling of its precision that is.

    python benchmarks/bench.py --only training   (updates the "training" key of results.json)
"""

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from toolkit.batching.batches import Batch
from toolkit.batching.data import load_data
from toolkit.paths import PROJECT_ROOT
from toolkit.train.batch_plan import BatchPlan
from toolkit.train.run_options import build_parser, data_settings, parse_options, resolve_precision
from toolkit.train.training_run import build_model, command_optimizer, take_step
from toolkit.train.world import World

WORKDIR = PROJECT_ROOT / "build" / "bench" / "training"
GOAL = 1.3  # target tokens per second: what --recipe real-text runs, against the path before
PATHS = {  # name: (--fast-path, --precision)
    "before (stage code, float32)": (False, "float32"),
    "fast path, float32": (True, "float32"),
    "stage code, bf16": (False, "bf16"),
    "fast path, bf16": (True, "bf16"),
}
FULL = {"pairs": 20_000, "batches": 6, "rounds": 7, "warmup": 2}
QUICK = {"pairs": 3_000, "batches": 2, "rounds": 1, "warmup": 1}
SIZE = 2048  # the ceiling's square matrices


def matmul_rate(dtype: torch.dtype, repeats: int = 5) -> float:
    """FLOP per second of one large matrix product, the best of `repeats`."""
    a, b = torch.randn(SIZE, SIZE, dtype=dtype), torch.randn(SIZE, SIZE, dtype=dtype)
    a @ b  # untimed: the first call allocates
    best = min(timed(lambda: a @ b) for _ in range(repeats))
    return 2 * SIZE**3 / best


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def command_options(fast: bool, precision: str) -> list[str]:
    """The command's options for one path."""
    return ["--recipe", "real-text", "--precision", precision,
            "--fast-path" if fast else "--no-fast-path"]


def course_batches(write_corpus: Callable[[Path, int, int], dict], pairs: int, count: int,
                   ) -> tuple[list[Batch], int]:
    """The first `count` token-budget batches of the command's plan on a synthetic corpus,
    and the size of its shared vocabulary."""
    folder = WORKDIR / f"corpus-{pairs}"
    for split, size, seed in (("train", pairs, 0), ("validation", 100, 1), ("test", 100, 2)):
        if not (folder / f"{split}.jsonl").exists():
            write_corpus(folder / f"{split}.jsonl", size, seed)
    args = parse_options(build_parser("bench", "", WORKDIR), command_options(True, "float32"))
    data = load_data(str(folder), "en", "de", **data_settings(args))
    plan = BatchPlan(data.train, None, args.max_tokens, args.seed)
    return [plan.batch(step) for step in range(count)], len(data.src_vocab)


def trainer(fast: bool, precision: str, vocab_size: int) -> Callable[[Batch], None]:
    """The command's model and optimiser for one path, and its step on a batch."""
    args = parse_options(build_parser("bench", "", WORKDIR), command_options(fast, precision))
    world = World()
    model, replica = build_model(args, vocab_size, vocab_size, world)
    optimizer = command_optimizer(replica, args)
    generator = torch.Generator().manual_seed(0)
    return lambda batch: take_step(replica, optimizer, batch, generator, args.label_smoothing,
                                   world)


def model_flop(batch: Batch, vocab_size: int) -> int:
    """FLOP of one float32 step of the stage's own code on `batch`, forward and backward."""
    step = trainer(False, "float32", vocab_size)
    with FlopCounterMode(display=False) as counter:
        step(batch)
    return counter.get_total_flops()


def target_tokens(batch: Batch) -> int:
    """What the step is scored on: every target position but <pad>."""
    return int((batch.tgt[:, 1:] != 0).sum())


def run(write_corpus: Callable, pairs: int, batches: int, rounds: int, warmup: int) -> dict:
    batch_list, vocab_size = course_batches(write_corpus, pairs, batches)
    tokens = sum(target_tokens(batch) for batch in batch_list)
    flop = sum(model_flop(batch, vocab_size) for batch in batch_list)
    ceiling = {"float32": matmul_rate(torch.float32), "bf16": matmul_rate(torch.bfloat16)}
    steps = {name: trainer(*path, vocab_size) for name, path in PATHS.items()}
    names = list(PATHS)
    for _ in range(warmup):
        for step in steps.values():
            for batch in batch_list:
                step(batch)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):  # each round in another order: no path always goes first
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(timed(lambda name=name: [steps[name](b) for b in batch_list]))
    before = names[0]
    paths = {}
    for name, (fast, precision) in PATHS.items():
        median = statistics.median(seconds[name])
        paths[name] = {
            "fast_path": fast, "precision": precision,
            "target_tokens_per_s": tokens / median,
            "ratio_to_before": statistics.median(
                b / s for b, s in zip(seconds[before], seconds[name], strict=True)),
            "model_gflop_per_s": flop / median / 1e9,
            "share_of_ceiling": flop / median / ceiling[precision],
        }
    # The path --recipe real-text takes here: bf16 only where this CPU computes it natively.
    chosen = f"fast path, {resolve_precision('auto', torch.device('cpu'))}"
    best = paths[chosen]["ratio_to_before"]
    return {"chosen": chosen, "recipe": "real-text", "threads": torch.get_num_threads(),
            "batches": batches,
            "target_tokens": tokens, "model_gflop_per_batch_set": flop / 1e9,
            "ceiling_gflop_per_s": {k: v / 1e9 for k, v in ceiling.items()},
            "rounds": rounds, "warmup": warmup, "paths": paths, "goal": GOAL,
            "met": best >= GOAL}


def summary(result: dict) -> str:
    ceiling = result["ceiling_gflop_per_s"]
    lines = [f"training step, --recipe real-text, {result['threads']} thread(s), "
             f"{result['batches']} token-budget batches ({result['target_tokens']:,} target "
             f"tokens) x {result['rounds']} rounds; ceiling: a {SIZE}x{SIZE} matrix product, "
             f"{ceiling['float32']:.0f} GFLOP/s float32, {ceiling['bf16']:.0f} bf16"]
    for name, path in result["paths"].items():
        lines.append(f"  {name:<30} {path['target_tokens_per_s']:8,.0f} target tokens/s  "
                     f"x {path['ratio_to_before']:.2f}  {path['model_gflop_per_s']:6.1f} "
                     f"GFLOP/s = {100 * path['share_of_ceiling']:4.1f}% of the "
                     f"{path['precision']} ceiling")
    verdict = "met" if result["met"] else "NOT met"
    lines.append(f"  goal: what --recipe real-text runs on this CPU ({result['chosen']}) >= "
                 f"{result['goal']}x the tokens/s before: {verdict}")
    return "\n".join(lines)


# The README's table of this part: `make bench` rewrites it from results.json, and
# tests/test_bench_tables.py holds the README to what this writes from the committed file.
TABLE_START = "<!-- training bench table: written by make bench -->"
TABLE_END = "<!-- end of training bench table -->"
LABELS = {  # a path's name in results.json -> its row in the README
    "before (stage code, float32)": "before: stage 07's code, float32",
    "fast path, float32": "fast path, float32",
    "stage code, bf16": "stage 07's code, bf16",
    "fast path, bf16": "fast path, bf16",
}


def markdown_table(result: dict) -> str:
    """The committed run of this part as the README shows it, every figure read from it."""
    ceiling, threads = result["ceiling_gflop_per_s"], result["threads"]
    lines = [f"| path ({threads} thread{'s' * (threads != 1)}, `make bench`) | target tokens/s "
             "| × before | model GFLOP/s | share of the ceiling |",
             "|---|---|---|---|---|"]
    named = set()
    for name, path in result["paths"].items():
        label = LABELS.get(name, name)
        if name == result["chosen"]:
            label += f" (what `--recipe {result['recipe']}` runs here)"
        share = f"{100 * path['share_of_ceiling']:.1f} %"
        if path["precision"] not in named:  # the first row of a precision names its ceiling
            named.add(path["precision"])
            share += f" of {ceiling[path['precision']]:.0f} GFLOP/s ({path['precision']})"
        lines.append(f"| {label} | {path['target_tokens_per_s']:,.0f} | "
                     f"{path['ratio_to_before']:.2f} | {path['model_gflop_per_s']:.1f} | "
                     f"{share} |")
    verdict = "met" if result["met"] else "**not met**"
    footnote = (f"From `benchmarks/results.json`: {result['batches']} token-budget batches "
                f"({result['target_tokens']:,} target tokens), {result['rounds']} rounds after "
                f"{result['warmup']} of warm-up, the paths interleaved round by round; × before "
                "is the median of each round's ratio to the first row, and the ceiling a "
                f"{SIZE} × {SIZE} matrix product timed in the same process. Goal: the path "
                f"`--recipe {result['recipe']}` runs here at {result['goal']}× the first "
                f"row's tokens per second or more: {verdict}.")
    return "\n".join(lines) + "\n\n" + footnote
