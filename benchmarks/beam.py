"""Beam search and checkpoint averaging against greedy decoding (issue 18), built-in test split.

For each of seeds 0, 1 and 2, stage 07 is trained with the paper's recipe as notebooks 10 and
13 train it (`course_tools.paper_run`: the run is kept, in build/paper-run/ or committed in
assets/kept-runs/, so seed 0 is the very run the notebooks decode), keeping the weights after
the last five multiples of 50 steps to average. The test split is then decoded four ways, each
sentence allowed its length + 50 tokens: greedily and with the paper's beam (4, α = 0.6), on
the last checkpoint and on the average. Exact match, BLEU and held-out exact match are recorded
per seed, with the paired differences against greedy decoding, since one seed's gain can be
another's loss.

Seed 0's last checkpoint is also timed: `toolkit.search.decoding.translate` on the whole test split
in batches of 100, greedy and beam 4 interleaved round by round, both on the KV cache. Goal:
beam 4 takes at most 2.5 times greedy's time (the median of the paired ratios).

    python benchmarks/bench.py --only beam      (updates the "beam" key of results.json)
"""

import statistics
from collections.abc import Callable
from dataclasses import replace

import torch

from course_tools.ladder import agreement, paired_footnote, per_seed
from course_tools.numeric_platform import numeric_platform
from course_tools.paper_run import AVERAGED, SAVE_EVERY, PaperRun, paper_run
from toolkit.batching.data import load_data
from toolkit.learning.recipes import PAPER, SEEDS
from toolkit.scoring.evaluation import evaluate
from toolkit.scoring.number_errors import held_out_kinds
from toolkit.scoring.seed_pairs import SeedPairs, paired
from toolkit.search.decoding import (
    PAPER_BEAM_SIZE,
    PAPER_EXTRA_LEN,
    PAPER_LENGTH_PENALTY,
    translate,
)
from toolkit.text.corpus import HELD_OUT_TAG

GOAL_RATIO = 2.5
BATCH = 100  # sentences decoded at once, translate's default
BEAM = f"beam {PAPER_BEAM_SIZE}"
DECODERS = {  # name -> (checkpoint, beam size)
    "greedy": ("last", 1), BEAM: ("last", PAPER_BEAM_SIZE),
    "greedy, averaged": ("averaged", 1), f"{BEAM}, averaged": ("averaged", PAPER_BEAM_SIZE),
}
MEASURES = ("exact_match", "bleu", "held_out")
FULL = {"rounds": 5, "seeds": SEEDS}
QUICK = {"rounds": 1, "seeds": SEEDS[:1], "steps": 300}


def decode_every_way(run: PaperRun, device: torch.device) -> dict:
    """Score the test split with each decoder, the held-out numbers and pairs apart too."""
    models = {"last": run.model, "averaged": run.averaged()}
    references = run.data.references("test")
    kinds = held_out_kinds(run.data.sources("test"), run.data.phenomena("test"))
    scores = {}
    for name, (checkpoint, beam_size) in DECODERS.items():
        report, hypotheses = evaluate(models[checkpoint], run.data, "test", device, beam_size,
                                      PAPER_LENGTH_PENALTY, PAPER_EXTRA_LEN)
        scores[name] = {"exact_match": report.exact_match, "bleu": report.bleu,
                        "held_out": report.per_phenomenon.get(HELD_OUT_TAG),
                        "held_out_kinds": {kind: 100 * sum(
                            hypotheses[i] == references[i] for i in indices) / len(indices)
                            for kind, indices in kinds.items()},
                        "bleu_signature": report.bleu_signature}
    return scores


def time_decoders(model: torch.nn.Module, rounds: int, timed: Callable,
                  device: torch.device) -> dict:
    """Greedy and beam 4 through translate, interleaved round by round."""
    data = load_data()
    sources = data.sources("test")
    times: dict[str, list[float]] = {"greedy": [], BEAM: []}
    for _ in range(rounds):
        for name, beam_size in (("greedy", 1), (BEAM, PAPER_BEAM_SIZE)):
            seconds, _ = timed(lambda beam_size=beam_size: translate(
                model, sources, data.src_vocab, data.tgt_vocab, device, BATCH, PAPER_EXTRA_LEN,
                beam_size, PAPER_LENGTH_PENALTY), device)
            times[name].append(seconds)
    ratio = statistics.median(b / g for b, g in zip(times[BEAM], times["greedy"], strict=True))
    return {"sentences": len(sources), "rounds": rounds,
            "seconds": {name: statistics.median(values) for name, values in times.items()},
            "time_ratio": ratio, "goal_ratio": GOAL_RATIO, "meets": ratio <= GOAL_RATIO}


def spread(values: list[float]) -> dict:
    return {"mean": statistics.mean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def run(rounds: int, seeds: tuple[int, ...], timed: Callable, device: torch.device,
        steps: int | None = None) -> dict:
    runs, timing = [], None
    recipe = replace(PAPER, steps=steps or PAPER.steps)
    for seed in seeds:
        trained = paper_run(seed, device=device, recipe=recipe)
        runs.append({"seed": seed, "decoders": decode_every_way(trained, device)})
        if timing is None:
            timing = time_decoders(trained.model, rounds, timed, device)
    summary = {name: {measure: spread([r["decoders"][name][measure] for r in runs])
                      for measure in MEASURES} for name in DECODERS}
    gains = {name: {measure: spread([r["decoders"][name][measure]
                                     - r["decoders"]["greedy"][measure] for r in runs])
                    for measure in MEASURES} for name in DECODERS if name != "greedy"}
    return {"model": f"stage 07, the paper recipe, {steps or PAPER.steps} steps of "
                     f"{PAPER.batch_size} pairs; last {AVERAGED} checkpoints {SAVE_EVERY} "
                     f"steps apart averaged",
            "seeds": list(seeds), "runs": runs, "summary": summary,
            "platform": numeric_platform(),  # bits repeat only here: notebook 13 checks it
            "gain_over_greedy": gains, "timing": timing}


def summary(result: dict) -> str:
    timing = result["timing"]
    lines = [f"beam search on the built-in test split ({timing['sentences']} sentences; "
             f"{result['model']}; seeds {result['seeds']}), mean ± sd over seeds:"]
    for name, numbers in result["summary"].items():
        gain = result["gain_over_greedy"].get(name)
        text = "   ".join(f"{measure} {numbers[measure]['mean']:5.1f} ± "
                           f"{numbers[measure]['sd']:.1f}" for measure in MEASURES)
        if gain:
            text += "   against greedy: " + ", ".join(
                f"{gain[m]['mean']:+.2f} ± {gain[m]['sd']:.2f}" for m in MEASURES)
        lines.append(f"  {name:<18} {text}")
    lines.append(f"  time, seed 0: greedy {timing['seconds']['greedy']:.2f} s, {BEAM} "
                 f"{timing['seconds'][BEAM]:.2f} s; beam / greedy {timing['time_ratio']:.2f}x "
                 f"(goal <= {timing['goal_ratio']}x: "
                 f"{'met' if timing['meets'] else 'NOT met'})")
    return "\n".join(lines)


# The README's table of this part: `make bench` rewrites it from results.json, and
# tests/test_bench_tables.py holds the README to what this writes from the committed file.
TABLE_START = "<!-- beam bench table: written by make bench -->"
TABLE_END = "<!-- end of beam bench table -->"
COLUMNS = {"exact_match": "exact match %", "bleu": "BLEU", "held_out": "held-out exact match %"}


def against_greedy(result: dict, name: str, measure: str = "exact_match") -> SeedPairs:
    """One decoder minus greedy decoding of the same run, seed by seed: the course's one rule
    (`toolkit.scoring.seed_pairs`); two decimals, since one sentence of 1,500 is 0.07 points."""
    scores = {decoder: {run["seed"]: run["decoders"][decoder][measure] for run in result["runs"]}
              for decoder in ("greedy", name)}
    return paired(f"{name} vs greedy", scores["greedy"], scores[name], digits=2)


def markdown_table(result: dict) -> str:
    """The committed run of this part as the README shows it, every figure read from it."""
    lines = ["| decoder | " + " | ".join(COLUMNS.values())
             + " | exact match vs greedy, per seed | seeds agreeing |",
             "|---|---|---|---|---|---|"]
    for name, numbers in result["summary"].items():
        cells = [f"{numbers[m]['mean']:.1f} ± {numbers[m]['sd']:.1f}" for m in COLUMNS]
        if name == "greedy":
            cells += ["", ""]
        else:
            pairs = against_greedy(result, name)
            cells += [per_seed(pairs), agreement(pairs)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    timing, seeds = result["timing"], tuple(result["seeds"])
    verdict = "met" if timing["meets"] else "**not met**"
    footnote = (
        f"From `benchmarks/results.json`: {result['model']}; mean ± standard deviation over "
        f"{len(seeds)} seeds, each decoding all {timing['sentences']:,} test sentences. "
        + paired_footnote("each decoder's exact match minus greedy decoding's on the same run",
                          seeds)
        + f" Time, seed {seeds[0]}: {BEAM} took {timing['time_ratio']:.2f}× greedy's time "
        f"through `translate`, both on the KV cache (the median of the paired ratios of "
        f"{timing['rounds']} interleaved rounds over the whole test split; median seconds: "
        f"greedy {timing['seconds']['greedy']:.2f} s, {BEAM} {timing['seconds'][BEAM]:.2f} s). "
        f"Goal: at most {timing['goal_ratio']:g}×: {verdict}.")
    return "\n".join(lines) + "\n\n" + footnote
