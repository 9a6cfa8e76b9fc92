"""Translate with a saved model from the command line, one sentence per line.

    python -m toolkit.translate build/train/best.pt "The dog sees the cat."
    python -m toolkit.translate build/train/best.pt < sentences.txt > translations.txt

Sentences come from the arguments, or else from standard input, and each gets exactly one
output line, in order: an empty line stays empty, and a sentence the model cannot take (longer
than its positions reach) gets an empty line and a note on standard error, so the output
still lines up with the input. Unknown words are noted there too, and so is a translation with
no word in it, which an undertrained model writes. It decodes with the paper's
beam search (beam 4, length penalty 0.6; `--beam-size 1` decodes greedily), each translation
allowed 10 tokens more than its source, where the paper allows 50, and never more than the
model's positions (`--max-seq-len` in training).
"""

import argparse
import sys
from pathlib import Path

import torch

from toolkit.batching.batches import encode_source
from toolkit.device import pick_device
from toolkit.learning.checkpoints import CheckpointError, load_checkpoint
from toolkit.search.decoding import (
    EXTRA_LEN,
    PAPER_BEAM_SIZE,
    PAPER_LENGTH_PENALTY,
    room,
    translate,
)
from toolkit.text.subwords import SubwordVocab


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m toolkit.translate",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint: a run's best.pt or last.pt, or any "
                                           "file save_checkpoint wrote")
    parser.add_argument("sentences", nargs="*", help="sentences to translate (default: one per "
                                                     "line from standard input)")
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda", "mps"])
    parser.add_argument("--batch-size", type=int, default=100, help="sentences decoded at once")
    parser.add_argument("--beam-size", type=int, default=PAPER_BEAM_SIZE,
                        help="hypotheses kept at each step: the paper's 4 by default, 1 decodes "
                             "greedily (faster)")
    parser.add_argument("--length-penalty", type=float, default=PAPER_LENGTH_PENALTY,
                        help="alpha in ((5 + length) / 6)^alpha: larger favours longer "
                             "translations, 0 ranks by probability alone (default: the paper's)")
    args = parser.parse_intermixed_args(argv)  # options before or after the sentences
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.beam_size < 1:
        parser.error(f"--beam-size must be at least 1, got {args.beam_size}")
    if args.length_penalty < 0:
        parser.error(f"--length-penalty must be 0 or more, got {args.length_penalty}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not Path(args.checkpoint).exists() and Path(args.checkpoint).suffix != ".pt":
        print(f"error: {args.checkpoint!r} is not a checkpoint file: the first argument is the "
              f"model, as in python -m toolkit.translate build/train/best.pt \"The dog sleeps."
              f"\" (python -m toolkit.train writes build/train/best.pt)", file=sys.stderr)
        return 2
    try:
        saved = load_checkpoint(args.checkpoint, pick_device(args.device))
    except (CheckpointError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    lines = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    if lines and lines[0].startswith("\ufeff"):  # a UTF-8 byte-order mark is not a word
        lines[0] = lines[0][1:]
    limit = saved.config.get("max_seq_len")
    translatable: dict[int, tuple[int, str]] = {}  # line number -> (source length, line)
    for number, line in enumerate(lines, start=1):
        words = saved.src_vocab.split(line)
        if not words:
            continue
        length = len(encode_source(words, saved.src_vocab))
        if room(saved.model, length) == 0:
            print(f"line {number}: {length} source tokens leave no room for a translation in "
                  f"the model's {limit} positions (max_seq_len): not translated (split it into "
                  f"shorter sentences)", file=sys.stderr)
            continue
        unknown = saved.src_vocab.unknown(words)  # words, or characters for subwords
        if unknown:
            kind = "characters" if isinstance(saved.src_vocab, SubwordVocab) else "words"
            print(f"line {number}: {kind} not in the vocabulary, read as <unk>: "
                  f"{' '.join(unknown)}", file=sys.stderr)
        translatable[number] = (length, line)
    # Decoded shortest first, so one long line pads only its neighbours in length; printed
    # in the input's order.
    order = sorted(translatable, key=lambda number: translatable[number][0])
    with torch.inference_mode():
        outputs = translate(saved.model, [translatable[number][1] for number in order],
                            saved.src_vocab, saved.tgt_vocab,
                            saved.model.out_proj.weight.device, args.batch_size, EXTRA_LEN,
                            args.beam_size, args.length_penalty)
    done = dict(zip(order, outputs, strict=True))
    for number in sorted(number for number, words in done.items() if not words):
        print(f"line {number}: the model wrote no word (it said <eos> first), as an "
              f"undertrained checkpoint does: train it longer, or use the run's best.pt",
              file=sys.stderr)
    for number in range(1, len(lines) + 1):
        print(saved.tgt_vocab.join(done[number]) if number in done else "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
