"""Train stage 07 from the command line, for as long as real text needs, and resume at will.

    python -m toolkit.train                         # the built-in corpus, a few minutes on CPU
    python -m toolkit.train --corpus opus100 --tokenizer bpe --vocab-size 16000 \\
        --shared-vocab --tie-embeddings all --max-tokens 8000 --max-len 128 --precision bf16
    python -m toolkit.train --resume ...            # the same options: goes on where it stopped

Ctrl-C saves a checkpoint and exits; `--resume` with the same options goes on from it. The
run's folder (`--output`) holds last.pt (resumable, and a translator), best.pt (the best
validation BLEU so far), log.csv and chart.png. `make train ARGS="..."` runs the same.
"""

import sys
import time

from toolkit.device import pick_device
from toolkit.paths import PROJECT_ROOT
from toolkit.text.corpus_errors import CorpusUnavailable
from toolkit.train.run_options import build_parser, parse_options
from toolkit.train.run_report import exit_code, report
from toolkit.train.training_run import run_training
from toolkit.train.world import World


def main(argv: list[str] | None = None, started: float | None = None) -> int:
    """`started`: the perf_counter() time the command began, from which --time-limit counts."""
    started = time.perf_counter() if started is None else started
    parser = build_parser("python -m toolkit.train", __doc__.split("\n")[0],
                          PROJECT_ROOT / "build" / "train")
    args = parse_options(parser, argv)
    try:
        world = World(device=pick_device(args.device))
        result = run_training(args, world, started=started)
    # A corpus, checkpoint or option that does not fit says so (CheckpointError and
    # CorpusError are ValueErrors), without a stack trace from deep inside.
    except (ValueError, CorpusUnavailable, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C, before the step ended
        print(f"\nstopped at once: {args.output / 'last.pt'} holds the last saved step; "
              f"resume with --resume", file=sys.stderr)
        return 130
    print("\n".join(report(result, args, world)))
    return exit_code(result)

