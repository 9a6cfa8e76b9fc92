"""Time stage 07 against torch.nn.Transformer, side by side in one process, on CPU or GPU.

For each configuration it times, interleaved round by round after a warm-up:
- one training step, the toolkit's own (`toolkit.learning.training.PaperOptimizer`: forward under
  its autocast context, the stage's objective, backward, clipping, Adam, schedule), for
  stage 07, stage 07 with a fused SDPA core, stage 07 keeping every attention's weights as
  the code did before issue 15 (`stage_api.keeping_attention` around the step), and
  nn.Transformer with the same embeddings, output layer, objective and optimiser;
- greedy decoding of 20 tokens: stage 07 rerunning the whole model every step (with its
  own core, and with SDPA), stage 07 encoding once and rerunning its decoder on the whole
  prefix (no cache), stage 07 with a KV cache, and nn.Transformer encoding once and
  rerunning its decoder on the growing prefix. Decoding uses freshly built models with
  identical weights, checked to produce the same tokens before anything is timed.
It prints medians and the median of the paired ratios (each round's time divided by the
same round's nn.Transformer time; some rows also against the stage-07 row they differ from
by one change). On a GPU the clock is read only after the device has finished, and the
peak memory each task adds is recorded too.

    python benchmarks/bench.py                 (what `make bench` runs: writes results.json
                                                and the README's tables of it, or
                                                results-cuda.json on a GPU)
    python benchmarks/bench.py --device cpu    (default: cuda if available, else cpu)
    python benchmarks/bench.py --quick         (fewer rounds, a smoke test: writes nothing
                                                unless --output is given)
    python benchmarks/bench.py --only real-text  (only benchmarks/real_text.py, issue 16's
                                                goals; the file's other results are kept)
    python benchmarks/bench.py --only beam      (only benchmarks/beam.py: beam search against
                                                greedy decoding, issue 18's goal)
    python benchmarks/bench.py --only training  (only benchmarks/training.py: the training
                                                command's step against the CPU's matrix-
                                                multiply rate, issue 46's goal; CPU only)
    python benchmarks/bench.py --only page      (only benchmarks/page.py: the Try-it page's
                                                cache, worker and budgets, in Chromium)
"""

import argparse
import importlib.util
import json
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from course_tools.ladder import README_PATH, write_readme_section
from stages import stage07_multi_head as stage
from toolkit.batching.batches import Batch
from toolkit.checkers.from_torch_nn import TorchNNTranslator, load_nn_transformer
from toolkit.learning.training import PaperOptimizer
from toolkit.search.cached_decoding import cached_greedy_decode
from toolkit.search.greedy import greedy_decode, greedy_loop
from toolkit.stage_api import keeping_attention, restoring_mode
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID
from toolkit.variants.sdpa import use_sdpa


def beside(name: str):
    """A module from this folder: bench.py runs as a script, not from a package."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


real_text = beside("real_text")  # issue 16: a million pairs, and token-budget batches
beam = beside("beam")  # issue 18: beam search against greedy decoding
training = beside("training")  # issue 46: the training command against the CPU's own limit
page = beside("page")  # issue 53: the Try-it page's budgets, as rows rather than tests
PARTS = ("models", "real-text", "beam", "training", "page")
CONFIGS = [
    {"embed_dim": 64, "num_heads": 2, "layers": 2, "ff_dim": 256},
    {"embed_dim": 128, "num_heads": 4, "layers": 3, "ff_dim": 512},
]
LENGTHS, BATCH_SIZE, VOCAB_SIZE, DECODE_TOKENS = (20, 64), 32, 250, 20
# toolkit.learning.training.train's defaults; the rate does not change the time
LR, WARMUP_STEPS = 2e-3, 100
RESULTS = Path(__file__).with_name("results.json")  # the CPU run, which notebook 08 reads
GPU_RESULTS = Path(__file__).with_name("results-cuda.json")  # a GPU run leaves the CPU one be
KEEPING = "stage 07 + keep_attention"  # the old behaviour: every attention keeps its weights
ENCODE_ONCE = "stage 07, encode once, no cache"
COMPARED_WITH = {  # row -> the stage-07 row it differs from by one change
    KEEPING: "stage 07",
    ENCODE_ONCE: "stage 07",
    "stage 07 + KV cache": ENCODE_ONCE,
}


def readme_tables(results: dict) -> list[tuple[str, str, str]]:
    """(start marker, end marker, table) for each part of the README that results.json
    holds: the README's bench tables are written from the file, never typed."""
    parts = [(real_text, "real_text"), (beam, "beam"), (training, "training")]
    return [(part.TABLE_START, part.TABLE_END, part.markdown_table(results[key]))
            for part, key in parts if key in results]


def write_readme_tables(results: dict, readme: Path = README_PATH) -> None:
    """Rewrite the README's bench tables from the CPU results (tests/test_bench_tables.py)."""
    for start, end, table in readme_tables(results):
        write_readme_section(start, end, table, readme)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def synchronize(device: torch.device) -> None:
    """Wait for the device: GPU kernels run asynchronously, so the clock alone reads too early."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def build(config: dict, device: torch.device | str = "cpu") -> dict[str, torch.nn.Module]:
    """Three models with the same weights: ours, ours with SDPA, and nn.Transformer."""
    torch.manual_seed(0)
    sizes = {"embed_dim": config["embed_dim"], "num_heads": config["num_heads"],
             "num_encoder_layers": config["layers"], "num_decoder_layers": config["layers"],
             "ff_dim": config["ff_dim"]}
    ours = stage.Transformer(VOCAB_SIZE, VOCAB_SIZE, **sizes)
    reference = TorchNNTranslator(ours, config["num_heads"], config["ff_dim"])
    load_nn_transformer(ours, reference.transformer)
    fused = use_sdpa(stage.Transformer(VOCAB_SIZE, VOCAB_SIZE, **sizes))
    fused.load_state_dict(ours.state_dict())
    models = {"stage 07": ours, "stage 07 + SDPA": fused, "nn.Transformer": reference}
    return {name: model.to(device) for name, model in models.items()}


def batch(length: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Random sentences with real padding: a quarter of each batch is half as long."""
    generator = torch.Generator().manual_seed(length)  # drawn on the CPU: same ids on any device
    src = torch.randint(4, VOCAB_SIZE, (BATCH_SIZE, length), generator=generator)
    tgt = torch.randint(4, VOCAB_SIZE, (BATCH_SIZE, length), generator=generator)
    src[: BATCH_SIZE // 4, length // 2:] = PAD_ID
    src[: BATCH_SIZE // 4, length // 2 - 1] = EOS_ID
    tgt[:, 0] = BOS_ID
    return src.to(device), tgt.to(device)  # (batch, length) each


def training_step(model: torch.nn.Module, src: torch.Tensor, tgt: torch.Tensor,
                  keep_attention: bool = False) -> Callable[[], torch.Tensor]:
    """One step of the toolkit's training loop (as in `train()`), returning the loss it took.

    Every model, nn.Transformer included, is scored by stage 07's objective (teacher forcing,
    cross-entropy per real target) and stepped by the same `PaperOptimizer`.
    """
    optimizer = PaperOptimizer(model, LR, WARMUP_STEPS)
    data = Batch(src, tgt)

    def step() -> torch.Tensor:
        model.train()
        with optimizer.forward_context():
            loss = stage.objective(model, data).mean()
        optimizer.step(loss)
        return loss.detach()

    if not keep_attention:
        return step

    def step_keeping_attention() -> torch.Tensor:
        with keeping_attention(model):  # what every stage-07 step did before issue 15
            return step()
    return step_keeping_attention


@torch.no_grad()
def nn_greedy_decode(model: TorchNNTranslator, src: torch.Tensor, steps: int) -> torch.Tensor:
    """The baseline: encode once, rerun nn's decoder on the growing prefix at every step."""
    model.eval()
    src_padding = src == PAD_ID
    memory = model.encode(src, src_padding)
    tokens = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long, device=src.device)
    for _ in range(steps):
        next_token = model.decode(tokens, memory, src_padding)[:, -1].argmax(dim=-1)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
    return tokens


@torch.no_grad()
def encode_once_greedy_decode(model: torch.nn.Module, src: torch.Tensor,
                              max_len: torch.Tensor) -> list[list[int]]:
    """Stage 07 doing the baseline's work: encode once, rerun `decode` on the whole prefix."""
    with restoring_mode(model, training=False):
        src_padding = src == PAD_ID  # (batch, src_len)
        memory = model.encode(src, src_padding)  # (batch, src_len, embed_dim), once

        def keep(rows: torch.Tensor) -> None:  # a finished sentence leaves, as in greedy_loop
            nonlocal memory, src_padding
            memory, src_padding = memory.index_select(0, rows), src_padding.index_select(0, rows)

        return greedy_loop(
            lambda tokens, step: model.decode(tokens, memory, src_padding)[:, -1], max_len, keep)


def decoding_tasks(models: dict, src: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The five decoders, after checking that they all write the same tokens."""
    limit = torch.full((src.size(0),), DECODE_TOKENS, device=src.device)
    ours, fused, reference = models["stage 07"], models["stage 07 + SDPA"], models[
        "nn.Transformer"]
    tasks = {
        "stage 07": lambda: greedy_decode(ours, src, limit),
        "stage 07 + SDPA": lambda: greedy_decode(fused, src, limit),
        ENCODE_ONCE: lambda: encode_once_greedy_decode(ours, src, limit),
        "stage 07 + KV cache": lambda: cached_greedy_decode(ours, src, limit),
        "nn.Transformer": lambda: nn_greedy_decode(reference, src, DECODE_TOKENS),
    }
    expected = nn_greedy_decode(reference, src, DECODE_TOKENS)[:, 1:].tolist()
    for name in [name for name in tasks if name != "nn.Transformer"]:
        for row, tokens in zip(expected, tasks[name](), strict=True):
            if row[: len(tokens)] != tokens or (len(tokens) < DECODE_TOKENS
                                                 and row[len(tokens)] != EOS_ID):
                raise RuntimeError(f"{name} does not decode the same tokens as nn.Transformer")
    return tasks


def timed(function: Callable[[], object], device: torch.device) -> tuple[float, float | None]:
    """Seconds from an idle device to an idle device, and on CUDA the peak MB the call added."""
    synchronize(device)  # work queued before must not be charged to this call
    if device.type == "cuda":
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    function()
    synchronize(device)  # the call returns once its kernels are queued, not done
    seconds = time.perf_counter() - start
    if device.type != "cuda":
        return seconds, None
    return seconds, (torch.cuda.max_memory_allocated(device) - before) / 2**20


def measure(tasks: dict[str, Callable[[], object]], rounds: int, warmup: int,
            device: torch.device) -> dict:
    """Interleave the tasks round by round, so drifts in machine speed hit all alike."""
    for _ in range(warmup):
        for task in tasks.values():
            task()
    synchronize(device)
    times: dict[str, list[float]] = {name: [] for name in tasks}
    peaks: dict[str, list[float]] = {name: [] for name in tasks}
    for _ in range(rounds):
        for name, task in tasks.items():
            seconds, peak_mb = timed(task, device)
            times[name].append(seconds)
            if peak_mb is not None:
                peaks[name].append(peak_mb)

    def paired(values: list[float], baseline: str) -> float:
        return statistics.median(t / b for t, b in zip(values, times[baseline], strict=True))

    numbers = {}
    for name, values in times.items():
        compared = COMPARED_WITH.get(name) if COMPARED_WITH.get(name) in times else None
        numbers[name] = {
            "median_ms": 1000 * statistics.median(values),
            "ratio_to_nn": paired(values, "nn.Transformer"),
            "compared_with": compared,
            "ratio_to_compared": None if compared is None else paired(values, compared),
            "peak_mb": max(peaks[name]) if peaks[name] else None,
        }
    return numbers


def run(rounds: int, warmup: int, device: torch.device) -> list[dict]:
    results = []
    for config in CONFIGS:
        for length in LENGTHS:
            src, tgt = batch(length, device)
            models = build(config, device)
            models = {"stage 07": models.pop("stage 07"),  # KEEPING: its own weights and Adam
                      KEEPING: build(config, device)["stage 07"], **models}
            train = {name: training_step(model, src, tgt, keep_attention=name == KEEPING)
                     for name, model in models.items()}
            decode = decoding_tasks(build(config, device), src)  # fresh: training moved weights
            for task, tasks in (("training step", train), ("greedy decode", decode)):
                for name, numbers in measure(tasks, rounds, warmup, device).items():
                    results.append({**config, "length": length, "task": task, "model": name,
                                    **numbers})
                    print(row_text(config, length, task, name, numbers), flush=True)
    return results


def row_text(config: dict, length: int, task: str, name: str, numbers: dict) -> str:
    text = (f"d={config['embed_dim']:<4} h={config['num_heads']} L={config['layers']} "
            f"len={length:<3} {task:<14} {name:<32} {numbers['median_ms']:8.2f} ms   "
            f"× {numbers['ratio_to_nn']:.2f}")
    if numbers["compared_with"] is not None:
        text += f"   (× {numbers['ratio_to_compared']:.2f} of {numbers['compared_with']})"
    if numbers["peak_mb"] is not None:
        text += f"   peak +{numbers['peak_mb']:.1f} MB"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="few rounds, a smoke test; writes no results unless --output")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (torch intra-op)")
    parser.add_argument("--device", type=torch.device, default=default_device(),
                        help="cpu, cuda, cuda:1, mps... (default: cuda if available, else cpu)")
    parser.add_argument("--only", choices=PARTS, default=None,
                        help="run one part: models (stage 07 against nn.Transformer), "
                             "real-text (benchmarks/real_text.py), beam (benchmarks/beam.py) "
                             "training (benchmarks/training.py) or page (benchmarks/page.py, "
                             "in headless Chromium); "
                             "the results of the other parts already in the file are kept")
    parser.add_argument("--output", type=Path, default=None,
                        help="where to write the results (default: benchmarks/results.json on "
                             "CPU, benchmarks/results-cuda.json otherwise; none with --quick)")
    args = parser.parse_args()
    device = args.device
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch.cuda.is_available() is False on this machine")
    output = args.output
    if output is None and not args.quick:
        output = RESULTS if device.type == "cpu" else GPU_RESULTS
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    rounds, warmup = (3, 1) if args.quick else (15, 3)
    results = None
    if args.only in (None, "models"):
        print(f"torch {torch.__version__}, device {device}" + (f" ({gpu})" if gpu else "")
              + f", {torch.get_num_threads()} CPU thread(s), batch {BATCH_SIZE}, {rounds} "
              f"rounds after {warmup} warm-up; × = time / nn.Transformer's time, paired by round")
        results = run(rounds, warmup, device)
    real = None
    if args.only in (None, "real-text"):
        real = real_text.run(**(real_text.QUICK if args.quick else real_text.FULL), device=device)
        print(real_text.summary(real), flush=True)
    searched = None
    if args.only in (None, "beam"):
        searched = beam.run(**(beam.QUICK if args.quick else beam.FULL), timed=timed,
                            device=device)
        print(beam.summary(searched), flush=True)
    trained = None
    if args.only in (None, "training") and device.type != "cpu":
        print("the training part (benchmarks/training.py) measures the CPU's limit: run it "
              "with --device cpu")
    elif args.only in (None, "training"):
        trained = training.run(real_text.write_corpus,
                               **(training.QUICK if args.quick else training.FULL))
        print(training.summary(trained), flush=True)
    browsed = None
    if args.only in (None, "page") and not page.has_chromium():
        print("the page part (benchmarks/page.py) needs Debian's chromium and chromium-driver: "
              "apt-get install -y chromium chromium-driver")
    elif args.only in (None, "page"):
        browsed = page.run(**(page.QUICK if args.quick else page.FULL))
        print(page.summary(browsed), flush=True)
    if output is None:
        print("--quick: no results written (pass --output PATH to keep them)")
        return
    written = json.loads(output.read_text()) if args.only and output.exists() else {}
    if results is not None:
        written.update({
            "torch": torch.__version__, "device": str(device), "gpu": gpu,
            "threads": torch.get_num_threads(), "machine": platform.machine(),
            "python": platform.python_version(), "batch_size": BATCH_SIZE, "rounds": rounds,
            "warmup": warmup, "results": results,
        })
    if real is not None:
        written["real_text"] = real
    if searched is not None:
        written["beam"] = searched
    if trained is not None:
        written["training"] = trained
    if browsed is not None:
        written["page"] = browsed
    output.write_text(json.dumps(written, indent=1) + "\n")
    print(f"wrote {output}")
    if output == RESULTS:  # the committed file: the README's tables follow it
        write_readme_tables(written)
        print(f"rewrote the README's bench tables from {output.name}")


if __name__ == "__main__":
    main()
