"""Beam search against greedy decoding (issue 18): time and BLEU on the built-in test split.

Stage 07 is trained on the ladder's recipe and budget (`recipes.RECIPES[7]`, seed 0), then
the whole test split is decoded with the KV cache greedily and with beam size 4 and the
paper's length penalty (α = 0.6, at most the source length + 50 tokens), in batches of 100
sentences, the two decoders interleaved round by round. Goal: beam 4 takes at most 2.5
times greedy's time (the median of the paired ratios).

    python benchmarks/bench.py --only beam      (updates the "beam" key of results.json)
"""

import statistics
from collections.abc import Callable

import torch

from stages import stage07_multi_head as stage
from toolkit.batches import encode_source, endless, loader, pad
from toolkit.beam_search import PAPER_BEAM_SIZE, PAPER_EXTRA_LEN, PAPER_LENGTH_PENALTY, beam_decode
from toolkit.cached_decoding import cached_greedy_decode
from toolkit.corpus import HELD_OUT_TAG
from toolkit.data import CourseData, load_data
from toolkit.metrics import score
from toolkit.recipes import RECIPES
from toolkit.tokens import tokenize
from toolkit.training import train

GOAL_RATIO = 2.5
BATCH = 100  # sentences decoded at once, as toolkit.decoding.translate does
FULL = {"rounds": 5}
QUICK = {"rounds": 1, "steps": 200}


def test_batches(data: CourseData, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The test split as padded sources with each sentence's limit: its length + 50."""
    encoded = [encode_source(tokenize(text), data.src_vocab) for text in data.sources("test")]
    chunks = [encoded[i : i + BATCH] for i in range(0, len(encoded), BATCH)]
    return [(pad(chunk).to(device),
             torch.tensor([len(ids) + PAPER_EXTRA_LEN for ids in chunk], device=device))
            for chunk in chunks]


def run(rounds: int, timed: Callable, device: torch.device, steps: int | None = None) -> dict:
    recipe = RECIPES[7]
    data = load_data()
    torch.manual_seed(recipe.seed)
    model = stage.Transformer(len(data.src_vocab), len(data.tgt_vocab), **recipe.model)
    training = {**recipe.training(), **({"steps": steps} if steps else {})}
    train(model, stage.objective, endless(loader(data.train, recipe.batch_size,
                                                 seed=recipe.seed)), device=device, **training)
    model.eval()
    batches = test_batches(data, device)
    decoders = {
        "greedy": lambda: [ids for src, limits in batches
                           for ids in cached_greedy_decode(model, src, limits)],
        f"beam {PAPER_BEAM_SIZE}": lambda: [
            hypotheses[0].tokens for src, limits in batches
            for hypotheses in beam_decode(model, src, limits, PAPER_BEAM_SIZE,
                                          PAPER_LENGTH_PENALTY)],
    }
    times: dict[str, list[float]] = {name: [] for name in decoders}
    outputs = {}
    for _ in range(rounds):
        for name, decode in decoders.items():
            outputs[name] = None
            seconds, _ = timed(lambda decode=decode, name=name: outputs.update({name: decode()}),
                               device)
            times[name].append(seconds)
    references, phenomena = data.references("test"), data.phenomena("test")
    scores = {}
    for name, ids in outputs.items():
        report = score([data.tgt_vocab.decode(sentence) for sentence in ids], references,
                       phenomena, apart=HELD_OUT_TAG)
        scores[name] = {"seconds": statistics.median(times[name]), "bleu": report.bleu,
                        "exact_match": report.exact_match,
                        "held_out": report.per_phenomenon.get(HELD_OUT_TAG),
                        "bleu_signature": report.bleu_signature}
    beam = f"beam {PAPER_BEAM_SIZE}"
    ratio = statistics.median(b / g for b, g in zip(times[beam], times["greedy"], strict=True))
    return {"model": f"stage 07, {recipe.steps if not steps else steps} steps of "
                     f"{recipe.batch_size} pairs, seed {recipe.seed}",
            "sentences": len(references), "rounds": rounds, "decoders": scores,
            "time_ratio": ratio, "goal_ratio": GOAL_RATIO, "meets": ratio <= GOAL_RATIO}


def summary(result: dict) -> str:
    lines = [f"beam search on the built-in test split ({result['sentences']} sentences, "
             f"{result['model']}):"]
    for name, numbers in result["decoders"].items():
        lines.append(f"  {name:<8} {numbers['seconds']:6.2f} s   BLEU {numbers['bleu']:5.1f}   "
                     f"exact {numbers['exact_match']:5.1f} %   held-out "
                     f"{numbers['held_out']:5.1f} %")
    lines.append(f"  beam / greedy time: {result['time_ratio']:.2f}x (goal <= "
                 f"{result['goal_ratio']}x: {'met' if result['meets'] else 'NOT met'})")
    return "\n".join(lines)
