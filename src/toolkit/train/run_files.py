"""What a run writes in its `--output` folder: never over another run, and the step-N.pt
files kept for `--average-last`."""

import argparse
import sys
from pathlib import Path

from torch import nn

from toolkit.batching.data import CourseData
from toolkit.learning.averaging import average_checkpoints
from toolkit.learning.checkpoints import save_checkpoint

RUN_FILES = ("last.pt", "best.pt", "averaged.pt", "log.csv", "chart.png")  # and step-N.pt


def check_output(args: argparse.Namespace, rank: int = 0) -> None:
    """Fail before any training if the folder cannot be written or would lose a run."""
    folder = args.output
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{rank}"
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as err:
        raise SystemExit(f"--output {folder} cannot be written ({err.strerror}): choose "
                         f"another folder") from None
    if args.resume and not (folder / "last.pt").exists():
        raise SystemExit(f"--resume: there is no checkpoint at {folder / 'last.pt'} to resume "
                         f"from: start without --resume, or give the run's --output folder")
    earlier = [path.name for path in sorted(folder.iterdir())
               if path.name in RUN_FILES or path.match("step-*.pt")]
    if not args.resume and earlier:
        raise SystemExit(f"{folder} holds another run's files ({', '.join(earlier)}): add "
                         f"--resume to go on with it, or give another --output (nothing was "
                         f"overwritten)")


def keep_for_averaging(
    model: nn.Module, data: CourseData, folder: Path, step: int, keep: int,
) -> None:
    """Save this step's weights as step-N.pt and delete all but the newest `keep` of them.

    Written before last.pt: a run killed between the two redoes this step on resume and
    writes the same file again.
    """
    save_checkpoint(folder / f"step-{step:08d}.pt", model, data.src_vocab, data.tgt_vocab)
    for old in kept_steps(folder, step)[:-keep]:
        old.unlink()


def kept_steps(folder: Path, until: int) -> list[Path]:
    """The step-N.pt files of this run up to step `until`, oldest first."""
    return [path for path in sorted(folder.glob("step-*.pt"))
            if int(path.stem.removeprefix("step-")) <= until]


def average_kept(folder: Path, step: int, save_every: int | None) -> list[Path] | None:
    """Average the kept step-N.pt files into averaged.pt; the files averaged, or None (and a
    note) when an early stop came before the first was kept: the run itself is fine."""
    kept = kept_steps(folder, step)
    if not kept:
        print(f"no step-N.pt was kept before the run ended at step {step} (one is kept every "
              f"--save-every {save_every} steps): averaged.pt not written", file=sys.stderr)
        return None
    average_checkpoints(kept, folder / "averaged.pt")
    return kept
