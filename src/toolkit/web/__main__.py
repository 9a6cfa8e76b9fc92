"""`python -m toolkit.web CHECKPOINT --output DIR`: a Try-it page for your own model.

    python -m toolkit.web build/train/best.pt --output build/web
    # then open build/web/index.html in a browser: no server, no network

Any checkpoint of the course (`python -m toolkit.train` saves them, words or
`--tokenizer bpe`; stage 08's decoder-only model too) becomes a page that translates in the
browser. Its weights are stored as
float16 by default, half the bytes of float32; `--dtype float32` keeps every bit.
"""

import argparse
import sys
from pathlib import Path

from toolkit.learning.checkpoints import CheckpointError, load_checkpoint
from toolkit.web.model_script import DTYPES
from toolkit.web.page import EXAMPLE, write_page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.web",
                                     description=__doc__.split("\n")[0].strip("`: "))
    parser.add_argument("checkpoint", type=Path, help="a checkpoint: a run's best.pt or last.pt")
    parser.add_argument("--output", type=Path, default=Path("build/web"),
                        help="the folder to write index.html and _static/ into "
                             "(default: build/web)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float16",
                        help="how the weights are stored in the page (default: float16)")
    parser.add_argument("--example", default=EXAMPLE, help="the sentence the page starts with")
    args = parser.parse_args(argv)
    try:
        saved = load_checkpoint(args.checkpoint)
    except (CheckpointError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        page = write_page(args.output, saved.model, saved.src_vocab, saved.tgt_vocab,
                          f"{args.checkpoint.parent.name}/{args.checkpoint.name}".lstrip("/"),
                          args.dtype, args.example)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    size = sum(path.stat().st_size for path in page.parent.rglob("*") if path.is_file())
    print(f"wrote {page} ({size / 1e6:.1f} MB with its _static/): open it in a browser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
