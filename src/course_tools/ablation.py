"""What each of the paper's training options buys: notebook 10's ablation, on one budget.

The ablation trains the stage-07 model with the paper's full recipe (`recipes.PAPER`), then
without each option in turn: the same budget for every row, and every row on each seed of
`recipes.SEEDS` (the seed sets the initial weights, the order of the pairs and the dropout
masks), so each variant is paired with the full recipe seed by seed (`ladder.paired_runs`,
the one rule of `toolkit.scoring.seed_pairs`). It also trains stage 07 on the ladder's recipe
with unscaled attention scores, for notebook 07, and on subwords instead of words for notebook
12; stage 08, the decoder-only appendix stage, on the ladder's budget, for notebook 14; and
stages 03 and 06 with one of their ideas left out, for notebooks 03 and 06.
`make ablation` (`course_tools.recompute`) runs them, two at a time, one thread each, and
writes `assets/ablation.json`, whose rows carry the same stamps as the ladder's rungs, so
numbers computed on other code show as stale.
"""

from dataclasses import replace
from itertools import combinations
from pathlib import Path

import pandas as pd

from course_tools import ladder
from course_tools.jobs import Job, Rung, with_seeds
from course_tools.ladder import METRICS, mean_sd, spread
from toolkit.learning.recipes import PAPER, RECIPES, Recipe
from toolkit.scoring.seed_pairs import SeedPairs

ABLATION_PATH = ladder.LADDER_PATH.with_name("ablation.json")
TABLE_START = "<!-- ablation table: written by make ablation -->"
TABLE_END = "<!-- end of ablation table -->"
FULL = "the paper's recipe"
# The two columns that pair each variant with the full recipe, seed by seed.
PER_SEED = "exact match vs full recipe, per seed"
AGREEING = "seeds agreeing"
SMALL_INIT = PAPER.model["embed_dim"] ** -0.5  # the std that scale_embeddings=True sets
NO_SCALE = {**PAPER.model, "scale_embeddings": False}
VARIANTS = {
    FULL: PAPER,
    "no warm-up (peak rate from step 1, the same decay after)": replace(
        PAPER, schedule="decay_only"),
    "no schedule (constant rate: no warm-up, no decay)": replace(PAPER, schedule="constant"),
    "without label smoothing": replace(PAPER, label_smoothing=0.0),
    "without dropout": replace(PAPER, model={**PAPER.model, "dropout": 0.0}),
    "Adam with PyTorch's defaults": replace(PAPER, betas=(0.9, 0.999), eps=1e-8),
    "without the sqrt(d) scale (init std d^-0.5 kept, tied)": replace(
        PAPER, model=NO_SCALE, embedding_std=SMALL_INIT),
    "without the sqrt(d) scale, init std 1 (tied: out_proj starts at std 1)": replace(
        PAPER, model=NO_SCALE),
    "without the sqrt(d) scale, init std 1, untied": replace(
        PAPER, model={**NO_SCALE, "tie_embeddings": False}),
    "sqrt(d) scale with init std 1 (tied)": replace(PAPER, embedding_std=1.0),
    "without tied embeddings (scale and init kept)": replace(
        PAPER, model={**PAPER.model, "tie_embeddings": False}),
    "none of them: plain Adam at a constant 1e-3": replace(
        PAPER, model=RECIPES[7].model, lr=1e-3, schedule="constant", label_smoothing=0.0,
        betas=(0.9, 0.999), eps=1e-8),
}
# Notebook 07: the 1/sqrt(head_dim) scale measured alone, on the ladder's recipe and budget.
UNSCALED = "stage 07, scores not divided by sqrt(head_dim)"
LADDER_VARIANTS = {UNSCALED: replace(RECIPES[7], attention_scale=1.0)}
# Notebook 12: stage 07 on the ladder's recipe and budget, reading subwords instead of words.
SUBWORDS = "stage 07, BPE subwords (300, shared)"
SUBWORD_DATA = {"tokenizer": "bpe", "vocab_size": 300, "shared_vocab": True}
DATA_VARIANTS = {SUBWORDS: (RECIPES[7], SUBWORD_DATA)}  # name -> (recipe, load_data options)
# Notebook 14: stage 08, decoder-only, on the ladder's budget (the same pairs in the same
# order) with as many parameters as the ladder's stage 07 (276,949 against 276,206): like it
# untied and unscaled, four layers as it has 2 + 2, and the cross-attention's parameters
# spent on a wider feed-forward layer (300 for 256). One vocabulary serves both languages.
# Stage 07's own row is the ladder's.
DECODER_ONLY_RECIPE = replace(RECIPES[7], model={
    "embed_dim": 64, "num_heads": 2, "num_layers": 4, "ff_dim": 300, "dropout": 0.0})
DECODER_ONLY_DATA = {"shared_vocab": True}
DECODER_ONLY = "stage 08, decoder-only, loss on the German"
DECODER_ONLY_WHOLE = "stage 08, decoder-only, loss on the whole stream"
# name -> (stage, recipe, load_data options, objective: None for the stage's own)
APPENDIX_VARIANTS = {
    DECODER_ONLY: (8, DECODER_ONLY_RECIPE, DECODER_ONLY_DATA, None),
    DECODER_ONLY_WHOLE: (8, DECODER_ONLY_RECIPE, DECODER_ONLY_DATA, "whole_stream"),
}

# Notebooks 03 and 06: two rungs of the ladder taken apart, on its recipes and budget. Stage 03
# brings the masks and the loss at every position (which the causal mask makes honest); trained
# with stage 02's loss at the last position only, it keeps the masks alone. Stage 06 brings the
# feed-forward sublayer and LayerNorm; built without each in turn, it keeps the other. Each row
# pairs, seed by seed, with the rung below it and with its own stage's (`parts_of`).
LAST_POSITION = "stage 03, trained at the last position only (stage 02's loss)"
NO_FEED_FORWARD = "stage 06 without the feed-forward sublayer"
NO_LAYER_NORM = "stage 06 without LayerNorm"
STAGE_PARTS = {  # name -> (stage, recipe, load_data options, objective: None for the stage's own)
    LAST_POSITION: (3, RECIPES[3], {}, "last_position"),
    NO_FEED_FORWARD: (6, replace(RECIPES[6], without=("feed_forward",)), {}, None),
    NO_LAYER_NORM: (6, replace(RECIPES[6], without=("layer_norm",)), {}, None),
}


def load_ablation(path: Path = ABLATION_PATH) -> dict[str, list[Rung]]:
    """The committed runs, every seed, by variant name; empty until `make ablation` has run."""
    rows: dict[str, list[Rung]] = {}
    for run in ladder.load_runs(path, key="rows"):
        rows.setdefault(run.title, []).append(run)
    return rows


def table(rows: dict[str, list[Rung]]) -> pd.DataFrame:
    """Each variant's mean ± sd over seeds, and its exact match against the full recipe's
    seed by seed (`paired_runs`): the differences, and how many seeds agree in sign."""
    summary = spread([run for runs in rows.values() for run in runs])
    frame = pd.DataFrame([{
        "variant": name, **{metric: mean_sd(summary, name, metric) for metric in METRICS},
        **against_full(rows, name), "seeds": int(summary.loc[name, ("seeds", "n")]),
    } for name in rows])
    return frame.set_index("variant")


def against_full(rows: dict[str, list[Rung]], name: str) -> dict[str, str]:
    """One variant's paired columns. The full recipe's own row leaves them empty, and so does
    a row that is not a variant of it (another budget: nothing to pair it with)."""
    if name == FULL or name not in VARIANTS:
        return {PER_SEED: "", AGREEING: ""}
    pairs = versus_full(rows, name)
    return {PER_SEED: ladder.per_seed(pairs), AGREEING: ladder.agreement(pairs)}


def versus_full(rows: dict[str, list[Rung]], name: str,
                metric: str = "exact match %") -> SeedPairs:
    """A variant minus the full recipe, seed by seed: the line a sentence cites."""
    return ladder.paired_runs(f"{name} vs {FULL}", rows[FULL], rows[name], metric)


def markdown_table(rows: dict[str, list[Rung]]) -> str:
    """The results page's ablation table, read from ablation.json like the ladder's."""
    rows = {name: rows[name] for name in VARIANTS if name in rows}
    frame = table(rows)
    lines = ["| variant | exact match % | BLEU | held-out exact match % "
             f"| {PER_SEED} | {AGREEING} |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {name} | {row['exact match %']} | {row['BLEU']} | "
              f"{row['held-out exact match %']} | {row[PER_SEED]} | {row[AGREEING]} |"
              for name, row in frame.iterrows()]
    seeds = int(frame["seeds"].min())
    footnote = f"Mean ± standard deviation over {seeds} seeds."
    if variants := [name for name in rows if name != FULL]:
        footnote += " " + ladder.paired_footnote(
            "each variant's exact match minus the full recipe's",
            versus_full(rows, variants[0]).seeds)
    return "\n".join(lines) + "\n\n" + footnote


# The results page's stage-08 table: the ladder's stage 07 against both decoder-only rows, seed by
# seed. `make ablation` and `make ladder` rewrite it, since its rows come from both files.
DECODER_ONLY_START = "<!-- decoder-only table: written by make ablation and make ladder -->"
DECODER_ONLY_END = "<!-- end of decoder-only table -->"
DECODER_ONLY_ROWS = {  # the table's name for each row
    "stage 07, encoder-decoder (the ladder's)": None,
    "stage 08, loss on the German": DECODER_ONLY,
    "stage 08, loss on the whole stream": DECODER_ONLY_WHOLE,
}


def decoder_only_table(rows: dict[str, list[Rung]], ladder_runs: list[Rung]) -> str:
    """Stage 08 against stage 07 on the same budget, pairs and seeds, read from
    ablation.json and ladder.json: each stage-08 row's exact match minus stage 07's, seed by
    seed, and the line that pairs the two objectives, which a sentence cites."""
    runs = {name: [r for r in ladder_runs if r.stage == 7] if key is None else rows[key]
            for name, key in DECODER_ONLY_ROWS.items()}
    summary = spread([replace(run, title=name) for name, group in runs.items() for run in group])
    encoder_decoder, *decoder_only = runs
    lines = ["| model | parameters | exact match % | BLEU | held-out exact match % "
             "| exact match vs stage 07, per seed | seeds agreeing |",
             "|---|---|---|---|---|---|---|"]
    for name, group in runs.items():
        counts = sorted({r.parameters for r in group})
        cells = [", ".join(f"{count:,}" for count in counts),
                 *(mean_sd(summary, name, metric) for metric in METRICS)]
        if name == encoder_decoder:
            cells += ["", ""]
        else:
            pairs = ladder.paired_runs(f"{name} vs stage 07", runs[encoder_decoder], group,
                                       "exact match %")
            cells += [ladder.per_seed(pairs), ladder.agreement(pairs)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    german, whole = decoder_only
    objectives = ladder.paired_runs("stage 08, exact match, the whole stream's loss minus the "
                                    "German's", runs[german], runs[whole], "exact match %")
    footnote = (f"Mean ± standard deviation over {int(summary[('seeds', 'n')].min())} seeds. "
                + ladder.paired_footnote("each stage-08 row's exact match minus stage 07's",
                                         objectives.seeds)
                + f" The two objectives against each other: {objectives.line()}.")
    return "\n".join(lines) + "\n\n" + footnote


def jobs(names: list[str]) -> list[Job]:
    """Every seed of the named rows, in the order the file keeps them."""
    recipes = {**VARIANTS, **LADDER_VARIANTS}
    return [job for name in names for job in _row_jobs(name, recipes)]


def _row_jobs(name: str, recipes: dict[str, Recipe]) -> list[Job]:
    if name in recipes:
        return [(7, recipe, name) for recipe in with_seeds(recipes[name])]
    if name in DATA_VARIANTS:
        recipe, options = DATA_VARIANTS[name]
        return [(7, seeded, name, options) for seeded in with_seeds(recipe)]
    stage, recipe, options, objective = {**APPENDIX_VARIANTS, **STAGE_PARTS}[name]
    return [(stage, seeded, name, options, objective) if objective else
            (stage, seeded, name, options) for seeded in with_seeds(recipe)]


def every_row() -> list[str]:
    """Every row's name, in the order the file keeps them."""
    return [*VARIANTS, *LADDER_VARIANTS, *DATA_VARIANTS, *APPENDIX_VARIANTS, *STAGE_PARTS]


def parts_of(stage: int, rows: dict[str, list[Rung]], ladder_runs: list[Rung]) -> pd.DataFrame:
    """One rung taken apart: the stage below, each of this stage's part-built rows and the
    stage itself, with every metric's mean ± sd, and what each step up buys, seed by seed: a
    part-built row against the stage below it, and the stage against the part-built row."""
    below, whole = (f"stage {number:02d} (the ladder's)" for number in (stage - 1, stage))
    runs = dict(zip([below, *_parts(stage), whole], _rung_apart(stage, rows, ladder_runs),
                    strict=True))
    summary = spread([replace(run, title=name) for name, group in runs.items() for run in group])
    frame = pd.DataFrame([{
        "model": name, **{metric: mean_sd(summary, name, metric) for metric in METRICS},
        f"exact match vs {below}, per seed": "" if name == below else ladder.per_seed(
            ladder.paired_runs(name, runs[below], group, "exact match %")),
        f"{whole} vs this, per seed": "" if name == whole else ladder.per_seed(
            ladder.paired_runs(name, group, runs[whole], "exact match %")),
    } for name, group in runs.items()])
    return frame.set_index("model")


def part_steps(stage: int, rows: dict[str, list[Rung]], ladder_runs: list[Rung],
               metric: str = "exact match %") -> list[SeedPairs]:
    """Every step of `parts_of` as paired seeds, each with the line a sentence cites: from
    the stage below to each part-built row, from each to the whole stage, and between two
    part-built rows of one stage (which piece buys more on its own)."""
    below, *parts, whole = _rung_apart(stage, rows, ladder_runs)
    names = _parts(stage)
    steps = []
    for name, part in zip(names, parts, strict=True):
        steps += [ladder.paired_runs(f"{metric}, {name} minus stage {stage - 1:02d}",
                                     below, part, metric),
                  ladder.paired_runs(f"{metric}, stage {stage:02d} minus {name}",
                                     part, whole, metric)]
    return steps + [ladder.paired_runs(f"{metric}, {second} minus {first}", rows[first],
                                       rows[second], metric)
                    for first, second in combinations(names, 2)]


def _parts(stage: int) -> list[str]:
    """The names of the rows that build `stage` with one of its ideas left out."""
    return [name for name, job in STAGE_PARTS.items() if job[0] == stage]


def _rung_apart(stage: int, rows: dict[str, list[Rung]],
                ladder_runs: list[Rung]) -> list[list[Rung]]:
    """The runs of the stage below, of each part-built row, and of the whole stage."""
    return [[r for r in ladder_runs if r.stage == stage - 1],
            *(rows[name] for name in _parts(stage)),
            [r for r in ladder_runs if r.stage == stage]]
