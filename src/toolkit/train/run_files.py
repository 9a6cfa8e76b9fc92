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
# What a run writes before its first last.pt (step-N.pt is written just before it).
UNSAVED_RUN_FILES = ("log.csv", "chart.png")


def check_output(args: argparse.Namespace, rank: int = 0) -> None:
    """Fail before any training if the folder cannot be written or would lose a run; clear
    what a run left that stopped before its first checkpoint, which nothing can resume."""
    folder = args.output
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{rank}"
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as err:
        raise SystemExit(f"--output {folder} cannot be written ({err.strerror}): choose "
                         f"another folder") from None
    earlier = [path for path in sorted(folder.iterdir())
               if path.name in RUN_FILES or path.match("step-*.pt")]
    names = ", ".join(path.name for path in earlier)
    resumable = (folder / "last.pt").exists()
    # A run killed before its first last.pt can have written its log, its chart and the
    # step-N.pt of that first save (written just before last.pt), and nothing else.
    steps = [path for path in earlier if path.match("step-*.pt")]
    unfinished = not resumable and len(steps) <= 1 and all(
        path.name in UNSAVED_RUN_FILES for path in earlier if path not in steps)
    if args.resume and not resumable:
        if earlier and unfinished:
            raise SystemExit(f"--resume: {folder} holds {names} but no last.pt: its run stopped "
                             f"before its first checkpoint, so there is nothing to resume: run "
                             f"the same command without --resume to start over")
        advice = ("start without --resume, or give the run's --output folder" if not earlier
                  else "give the run's --output folder, or another")
        raise SystemExit(f"--resume: there is no checkpoint at {folder / 'last.pt'} to resume "
                         f"from: {advice}")
    if args.resume or not earlier:
        return
    if unfinished:
        if rank == 0:  # one process clears them, before any process writes
            print(f"{folder} holds {names} of a run that stopped before its first checkpoint "
                  f"(no last.pt): starting over, replacing them", file=sys.stderr)
            for path in earlier:
                path.unlink(missing_ok=True)
        return
    advice = "add --resume to go on with it, or give" if resumable else "give"
    raise SystemExit(f"{folder} holds another run's files ({names}): {advice} another "
                     f"--output (nothing was overwritten)")


def keep_for_averaging(
    model: nn.Module, data: CourseData, folder: Path, step: int, keep: int,
) -> None:
    """Save this step's weights as step-N.pt and delete all but the newest `keep` + 1 of them
    (one more than is averaged: a last save close after the one before takes its place).

    Written before last.pt: a run killed between the two redoes this step on resume and
    writes the same file again.
    """
    save_checkpoint(folder / f"step-{step:08d}.pt", model, data.src_vocab, data.tgt_vocab)
    for old in kept_steps(folder, step)[:-(keep + 1)]:
        old.unlink()


def kept_steps(folder: Path, until: int) -> list[Path]:
    """The step-N.pt files of this run up to step `until`, oldest first."""
    return [path for path in sorted(folder.glob("step-*.pt")) if step_of(path) <= until]


def average_kept(folder: Path, step: int, save_every: int | None, count: int
                 ) -> list[Path] | None:
    """Average the newest `count` kept step-N.pt files, no two closer than half of
    `save_every` steps, into averaged.pt; the files averaged, or None (and a note) when an
    early stop came before the first was kept: the run itself is fine."""
    kept = spaced(kept_steps(folder, step), (save_every or 1) / 2)[-count:]
    if not kept:
        print(f"no step-N.pt was kept before the run ended at step {step} (one is kept every "
              f"--save-every {save_every} steps): averaged.pt not written", file=sys.stderr)
        return None
    average_checkpoints(kept, folder / "averaged.pt")
    return kept


def spaced(paths: list[Path], gap: float) -> list[Path]:
    """The step-N.pt files, oldest first, less any that lies closer than `gap` steps before
    the next one kept: a run that stopped early saved its last step just after a scheduled
    save, and the two would count one moment twice."""
    chosen: list[Path] = []
    for path in reversed(paths):
        if not chosen or step_of(chosen[-1]) - step_of(path) >= gap:
            chosen.append(path)
    return chosen[::-1]


def step_of(path: Path) -> int:
    return int(path.stem.removeprefix("step-"))
