"""The options of a long training run, shared by `toolkit.train.command` and `toolkit.train.ddp`.

One parser for both commands, so one process and several processes take the same options
and cannot drift apart. Defaults come from a recipe (`toolkit.learning.recipes`); every option
overrides one setting.
"""

import argparse
from pathlib import Path

import torch

from toolkit.batching.data import TOKENIZERS
from toolkit.learning.recipes import Recipe
from toolkit.search.decoding import EXTRA_LEN
from toolkit.train.run_recipes import RUN_RECIPES
from toolkit.train.time_budget import parse_duration

PRECISIONS = {  # name: (parameter dtype, autocast dtype)
    "float32": (torch.float32, None),
    "bf16": (torch.float32, torch.bfloat16),
    "fp16": (torch.float32, torch.float16),
    "float64": (torch.float64, None),
}
TIES = {"none": False, "output": True, "all": "all"}
# Options a resumed run may change: they decide how long and how loudly it trains, or where
# it runs, never which step comes next. (A resumed --time-limit bounds that invocation; the
# run keeps the plan its checkpoint holds.)
RESUMABLE_CHANGES = ("steps", "epochs", "patience", "output", "resume", "device", "log_every",
                     "eval_every", "save_every", "average_last", "time_limit", "steps_given")
# Without a recipe that sets them, and without the option given: the command's defaults.
OPTION_DEFAULTS = {"tokenizer": "word", "average_last": 0, "precision": "float32",
                   "shared_vocab": False}


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Show a default where there is one; the recipe's options name theirs in their help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def recipe_default(field: str, model_key: str | None = None) -> str:
    """Help text naming what each recipe sets an option to."""
    values = {name: (run.recipe.model.get(model_key) if model_key
                     else getattr(run.recipe, field))
              for name, run in sorted(RUN_RECIPES.items())}
    return "default: the recipe's (" + ", ".join(f"{name} {value}"
                                                 for name, value in values.items()) + ")"


def build_parser(prog: str, description: str, default_output: Path) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=description,
        formatter_class=DefaultsHelp)
    data = parser.add_argument_group("corpus and tokens")
    data.add_argument("--corpus", default="builtin", help='"builtin", "opus100", a JSONL or '
                      "TSV file or folder in the opus100 schema, or a Hugging Face dataset id")
    data.add_argument("--config", default=None,
                      help="the Hugging Face dataset's configuration, e.g. a language pair")
    data.add_argument("--src-lang", default="en", help="source language key")
    data.add_argument("--tgt-lang", default="de", help="target language key")
    data.add_argument("--tokenizer", choices=TOKENIZERS,
                      help="word-level vocabularies or byte-pair-encoded subwords (default: "
                           "word; real-text: bpe)")
    data.add_argument("--vocab-size", type=int, default=None,
                      help="tokens per vocabulary, special tokens included (BPE: 8000)")
    data.add_argument("--shared-vocab", action=argparse.BooleanOptionalAction,
                      help="one vocabulary for both languages, as the paper's BPE (default: "
                           "separate; real-text: shared)")
    data.add_argument("--max-len", type=int, default=128,
                      help="drop pairs with a side longer than this many tokens")
    data.add_argument("--max-train-pairs", type=int, default=None,
                      help="a seeded subsample of the training split")
    data.add_argument("--dedupe", action="store_true", help="drop exact duplicate pairs")
    data.add_argument("--train-pairs", type=int, default=0,
                      help="after loading, train on the first N pairs only (0: all): for "
                           "quick tests; --max-train-pairs subsamples while loading")

    model = parser.add_argument_group("model (defaults: the recipe's)")
    model.add_argument("--recipe", default="paper", choices=sorted(RUN_RECIPES),
                       help="paper: notebook 10's recipe (dropout 0.1, label smoothing, tied "
                            "embeddings); stage07: the ladder's; real-text: for a corpus of "
                            "10,000s to 1,000,000 pairs (shared BPE 8000, 4,000-token "
                            "batches, averaging, bf16 where native), best with --time-limit")
    model.add_argument("--embed-dim", type=int,
                       help="d_model; " + recipe_default("", "embed_dim"))
    model.add_argument("--num-heads", type=int, help="h; " + recipe_default("", "num_heads"))
    model.add_argument("--num-layers", type=int, help="N, for the encoder and the decoder; "
                       + recipe_default("", "num_encoder_layers"))
    model.add_argument("--ff-dim", type=int, help="d_ff; " + recipe_default("", "ff_dim"))
    model.add_argument("--dropout", type=float,
                       help="P_drop; " + recipe_default("", "dropout"))
    model.add_argument("--max-seq-len", type=int, default=256,
                       help="the longest sequence the positional encoding covers")
    model.add_argument("--tie-embeddings", choices=sorted(TIES),
                       help='share the target embedding with the output layer ("output"), '
                            'and the source embedding too ("all", needs --shared-vocab); '
                            'default: the recipe\'s (paper output, real-text all, stage07 '
                            'none)')
    model.add_argument("--fast-path", action=argparse.BooleanOptionalAction, default=True,
                       help="fused attention and vectorised dropout masks "
                            "(toolkit.train.fast_path); --no-fast-path trains stage 07's code "
                            "exactly as written")

    schedule = parser.add_argument_group("optimisation (defaults: the recipe's)")
    length = schedule.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int,
                        help="optimiser steps; " + recipe_default("steps"))
    length.add_argument("--epochs", type=float, help="passes over the training pairs")
    length.add_argument("--time-limit", type=parse_duration, metavar="DURATION",
                        help="train for as many steps as fit in this time, evaluation and "
                             "saves included: minutes (30) or 1h30m, 45m, 90s; the warm-up, "
                             "evaluations and averaged saves are planned for those steps "
                             "(toolkit.train.time_budget)")
    batch = schedule.add_mutually_exclusive_group()
    batch.add_argument("--batch-size", type=int, help="sentence pairs per process per step; "
                       + recipe_default("batch_size"))
    batch.add_argument("--max-tokens", type=int,
                       help="token-budget batches: source plus target positions per process "
                            "(real-text: 4000)")
    schedule.add_argument("--lr", type=float,
                          help="peak learning rate; " + recipe_default("lr"))
    schedule.add_argument("--warmup-steps", type=int, help="linear warm-up to the peak, then "
                          "1/sqrt(step) decay; " + recipe_default("warmup_steps"))
    schedule.add_argument("--label-smoothing", type=float, help="share of each target's "
                          "probability spread over the vocabulary; "
                          + recipe_default("label_smoothing"))
    schedule.add_argument("--seed", type=int, default=0,
                          help="initial weights, data order, dropout and subsampling")

    machine = parser.add_argument_group("machine")
    machine.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"],
                         help="auto: cuda, then mps, then cpu")
    machine.add_argument("--precision", choices=sorted([*PRECISIONS, "auto"]),
                         help="bf16/fp16: autocast with float32 weights (bf16 also on CPU); "
                              "float64: exact comparisons in tests; auto: bf16 where the "
                              "processor computes it natively, else float32 (default: "
                              "float32; real-text: auto)")

    run = parser.add_argument_group("evaluation, checkpoints and logs")
    run.add_argument("--output", type=Path, default=default_output,
                     help="folder for last.pt, best.pt, log.csv and chart.png")
    run.add_argument("--resume", action="store_true",
                     help="continue from OUTPUT/last.pt, exactly where it stopped")
    run.add_argument("--eval-every", type=int,
                     help="steps between evaluations (validation loss and BLEU); default: "
                          "200, or 5 evaluations in a --time-limit")
    run.add_argument("--eval-sentences", type=int, default=500,
                     help="validation sentences translated for BLEU (a fixed seeded sample)")
    run.add_argument("--save-every", type=int, default=None,
                     help="steps between checkpoints (default: --eval-every, or with "
                          "--average-last in a --time-limit: the kept saves span its last "
                          "tenth)")
    run.add_argument("--patience", type=int, default=0,
                     help="stop after this many evaluations without a better BLEU (0: never)")
    run.add_argument("--log-every", type=int, default=50, help="steps between log.csv rows")
    run.add_argument("--average-last", type=int,
                     help="keep the last K scheduled checkpoints (step-N.pt) and write their "
                          "average as averaged.pt at the end (the paper: 5; default: 0, off; "
                          "real-text: 5)")
    return parser


def parse_options(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, fill the recipe's defaults in, and refuse impossible values before any work."""
    args = parser.parse_args(argv)
    recipe: Recipe = RUN_RECIPES[args.recipe].recipe
    for name, value in (OPTION_DEFAULTS | RUN_RECIPES[args.recipe].options).items():
        if getattr(args, name) is not None or (name == "max_tokens" and args.batch_size):
            continue
        if name == "vocab_size" and args.tokenizer != "bpe":  # a BPE size caps no words
            continue
        setattr(args, name, value)
    args.steps_given = args.steps is not None or args.epochs is not None
    defaults = {"embed_dim": recipe.model.get("embed_dim", 64),
                "num_heads": recipe.model.get("num_heads", 2),
                "num_layers": recipe.model.get("num_encoder_layers", 2),
                "ff_dim": recipe.model.get("ff_dim", 256),
                "dropout": recipe.model.get("dropout", 0.0),
                "tie_embeddings": {v: k for k, v in TIES.items()}[
                    recipe.model.get("tie_embeddings", False)],
                "lr": recipe.lr, "label_smoothing": recipe.label_smoothing}
    if args.time_limit is None:  # otherwise planned for the steps that fit
        defaults["warmup_steps"] = recipe.warmup_steps
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.batch_size is None and args.max_tokens is None:
        args.batch_size = recipe.batch_size
    if args.time_limit is None:  # otherwise toolkit.train.time_budget plans all four
        if args.steps is None and args.epochs is None:
            args.steps = recipe.steps
        if args.eval_every is None:
            args.eval_every = 200
        if args.save_every is None:
            args.save_every = args.eval_every
    args.scale_embeddings = recipe.model.get("scale_embeddings", False)
    args.betas, args.eps, args.schedule = recipe.betas, recipe.eps, recipe.schedule

    positive = ["embed_dim", "num_heads", "num_layers", "ff_dim", "max_seq_len", "lr",
                "eval_every", "eval_sentences", "save_every", "log_every", "steps", "epochs",
                "batch_size", "max_tokens", "vocab_size", "max_len", "max_train_pairs"]
    for name in positive:
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {value}")
    for name in ("warmup_steps", "patience", "train_pairs", "average_last"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} cannot be negative")
    for name in ("dropout", "label_smoothing"):
        if not 0 <= getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be in [0, 1), got {getattr(args, name)}")
    if args.embed_dim % args.num_heads:
        parser.error(f"--embed-dim {args.embed_dim} is not divisible by --num-heads "
                     f"{args.num_heads}")
    if args.tie_embeddings == "all" and not args.shared_vocab:
        parser.error("--tie-embeddings all needs --shared-vocab (one vocabulary for both sides)")
    if args.max_len + EXTRA_LEN > args.max_seq_len:
        parser.error(f"--max-len {args.max_len} leaves no room in --max-seq-len "
                     f"{args.max_seq_len} for a translation {EXTRA_LEN} tokens longer than its "
                     f"source: lower --max-len or raise --max-seq-len")
    return args


def model_settings(args: argparse.Namespace) -> dict:
    """Keyword arguments for stage 07's Transformer, less the vocabulary sizes."""
    return {"embed_dim": args.embed_dim, "num_heads": args.num_heads,
            "num_encoder_layers": args.num_layers, "num_decoder_layers": args.num_layers,
            "ff_dim": args.ff_dim, "dropout": args.dropout, "max_seq_len": args.max_seq_len,
            "scale_embeddings": args.scale_embeddings,
            "tie_embeddings": TIES[args.tie_embeddings]}


def data_settings(args: argparse.Namespace) -> dict:
    """Keyword arguments for `toolkit.batching.data.load_data`, less the source."""
    return {"config": args.config, "tokenizer": args.tokenizer, "vocab_size": args.vocab_size,
            "shared_vocab": args.shared_vocab, "max_len": args.max_len,
            "max_train_pairs": args.max_train_pairs, "dedupe": args.dedupe, "seed": args.seed}


def run_settings(args: argparse.Namespace) -> dict:
    """Every option that decides the next step, as plain values: what a resume must match."""
    return {name: str(value) if isinstance(value, Path) else value
            for name, value in sorted(vars(args).items()) if name not in RESUMABLE_CHANGES}


def resolve_precision(precision: str, device: torch.device) -> str:
    """--precision auto: bf16 where the device computes it natively (a CUDA GPU that has it,
    a CPU with AVX-512 BF16 or AMX), float32 elsewhere, where emulated bf16 runs slower."""
    if precision != "auto":
        return precision
    if device.type == "cuda":  # Ampere (8.x) and later; is_bf16_supported() counts emulation
        native = torch.cuda.get_device_capability(device)[0] >= 8
    elif device.type == "cpu":
        native = any(getattr(torch.cpu, probe, lambda: False)()
                     for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    else:
        native = False
    return "bf16" if native else "float32"
