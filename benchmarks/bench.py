"""Time stage 07 against torch.nn.Transformer, side by side in one process.

For each configuration it times, interleaved round by round after a warm-up:
- one training step (forward, cross-entropy, backward, Adam) for stage 07, stage 07 with a
  fused SDPA core, and nn.Transformer with the same embeddings and output layer;
- greedy decoding of 20 tokens: stage 07 rerunning the whole model every step (with its
  own core, and with SDPA), stage 07 with a KV cache, and nn.Transformer encoding once and
  rerunning its decoder on the growing prefix. Decoding uses freshly built models with
  identical weights, checked to produce the same tokens before anything is timed.
It prints medians and the median of the paired ratios (each round's time divided by the
same round's nn.Transformer time), and writes benchmarks/results.json.

    python benchmarks/bench.py            (what `make bench` runs)
    python benchmarks/bench.py --quick    (fewer rounds, for a smoke test)
"""

import argparse
import json
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from stages import stage07_multi_head as stage
from toolkit.cached_decoding import cached_greedy_decode
from toolkit.decoding import greedy_decode
from toolkit.from_torch_nn import TorchNNTranslator, load_nn_transformer
from toolkit.sdpa import use_sdpa
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID

CONFIGS = [
    {"embed_dim": 64, "num_heads": 2, "layers": 2, "ff_dim": 256},
    {"embed_dim": 128, "num_heads": 4, "layers": 3, "ff_dim": 512},
]
LENGTHS, BATCH_SIZE, VOCAB_SIZE, DECODE_TOKENS = (20, 64), 32, 250, 20
RESULTS = Path(__file__).with_name("results.json")


def build(config: dict) -> dict[str, torch.nn.Module]:
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
    return {"stage 07": ours, "stage 07 + SDPA": fused, "nn.Transformer": reference}


def batch(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random sentences with real padding: a quarter of each batch is half as long."""
    generator = torch.Generator().manual_seed(length)
    src = torch.randint(4, VOCAB_SIZE, (BATCH_SIZE, length), generator=generator)
    tgt = torch.randint(4, VOCAB_SIZE, (BATCH_SIZE, length), generator=generator)
    src[: BATCH_SIZE // 4, length // 2:] = PAD_ID
    src[: BATCH_SIZE // 4, length // 2 - 1] = EOS_ID
    tgt[:, 0] = BOS_ID
    return src, tgt


def training_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  src: torch.Tensor, tgt: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        model.train()
        logits = model(src, tgt[:, :-1])  # (batch, tgt_len - 1, vocab)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1),
                               ignore_index=PAD_ID)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


@torch.no_grad()
def nn_greedy_decode(model: TorchNNTranslator, src: torch.Tensor, steps: int) -> torch.Tensor:
    """The baseline: encode once, rerun nn's decoder on the growing prefix at every step."""
    model.eval()
    src_padding = src == PAD_ID
    memory = model.encode(src, src_padding)
    tokens = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long)
    for _ in range(steps):
        next_token = model.decode(tokens, memory, src_padding)[:, -1].argmax(dim=-1)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
    return tokens


def decoding_tasks(models: dict, src: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The four decoders, after checking that they all write the same tokens."""
    limit = torch.full((src.size(0),), DECODE_TOKENS)
    ours, fused, reference = models["stage 07"], models["stage 07 + SDPA"], models[
        "nn.Transformer"]
    tasks = {
        "stage 07": lambda: greedy_decode(ours, src, limit),
        "stage 07 + SDPA": lambda: greedy_decode(fused, src, limit),
        "stage 07 + KV cache": lambda: cached_greedy_decode(ours, src, limit),
        "nn.Transformer": lambda: nn_greedy_decode(reference, src, DECODE_TOKENS),
    }
    expected = nn_greedy_decode(reference, src, DECODE_TOKENS)[:, 1:].tolist()
    for name in ("stage 07", "stage 07 + SDPA", "stage 07 + KV cache"):
        for row, tokens in zip(expected, tasks[name](), strict=True):
            if row[: len(tokens)] != tokens or (len(tokens) < DECODE_TOKENS
                                                 and row[len(tokens)] != EOS_ID):
                raise RuntimeError(f"{name} does not decode the same tokens as nn.Transformer")
    return tasks


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def measure(tasks: dict[str, Callable[[], object]], rounds: int, warmup: int) -> dict:
    """Interleave the tasks round by round, so drifts in machine speed hit all alike."""
    for _ in range(warmup):
        for task in tasks.values():
            task()
    times: dict[str, list[float]] = {name: [] for name in tasks}
    for _ in range(rounds):
        for name, task in tasks.items():
            times[name].append(timed(task))
    baseline = times["nn.Transformer"]
    return {name: {"median_ms": 1000 * statistics.median(values),
                   "ratio_to_nn": statistics.median(
                       [t / b for t, b in zip(values, baseline, strict=True)])}
            for name, values in times.items()}


def run(rounds: int, warmup: int) -> list[dict]:
    results = []
    for config in CONFIGS:
        for length in LENGTHS:
            src, tgt = batch(length)
            models = build(config)
            train = {name: training_step(model, torch.optim.Adam(model.parameters()), src, tgt)
                     for name, model in models.items()}
            decode = decoding_tasks(build(config), src)  # fresh: training moved the weights
            for task, tasks in (("training step", train), ("greedy decode", decode)):
                for name, numbers in measure(tasks, rounds, warmup).items():
                    results.append({**config, "length": length, "task": task, "model": name,
                                    **numbers})
                    print(f"d={config['embed_dim']:<4} h={config['num_heads']} "
                          f"L={config['layers']} len={length:<3} {task:<14} {name:<20} "
                          f"{numbers['median_ms']:8.2f} ms   × {numbers['ratio_to_nn']:.2f}",
                          flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke test")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
    rounds, warmup = (3, 1) if args.quick else (15, 3)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), batch {BATCH_SIZE}, "
          f"{rounds} rounds after {warmup} warm-up; ratio = time / nn.Transformer's time")
    results = run(rounds, warmup)
    RESULTS.write_text(json.dumps({
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "machine": platform.machine(), "python": platform.python_version(),
        "batch_size": BATCH_SIZE, "rounds": rounds, "warmup": warmup, "results": results,
    }, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
