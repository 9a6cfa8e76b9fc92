"""What a finished or stopped run tells its user, and the exit status it ends with."""

import argparse
import signal
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from toolkit.batching.data import CourseData
from toolkit.train.run_state import Progress
from toolkit.train.time_budget import Plan, format_duration
from toolkit.train.world import World


@dataclass
class RunResult:
    """What a finished or stopped run reports to its command."""

    model: nn.Module
    data: CourseData
    progress: Progress
    steps_now: int  # steps taken by this invocation (fewer after a resume)
    pairs_now: int
    seconds_now: float  # training alone: evaluation and checkpoints left out
    stopped_by: int | None = None  # the signal that stopped it, if one did
    early_stopped: bool = False
    averaged: list[Path] | None = None  # the checkpoints averaged.pt averages
    bleu_signature: str = ""  # sacreBLEU's, for the validation BLEU it reports
    bleu_sentences: int = 0  # validation sentences each BLEU was computed on
    plan: Plan | None = None  # what --time-limit planned
    out_of_time: bool = False  # the clock ended the run before the plan's last step
    wall_seconds: float = 0.0  # since the command began, loading and probing included


def report(result: RunResult, args: argparse.Namespace, world: World) -> list[str]:
    """The closing lines a run prints, with where its files are (those it wrote)."""
    progress = result.progress
    lines = [f"{result.steps_now} steps on {world.size} process(es) in "
             f"{result.seconds_now:.2f} s of training (evaluation and saving left out): "
             f"{result.steps_now / result.seconds_now:.2f} steps/s, "
             f"{result.pairs_now / result.seconds_now:.0f} pairs/s"]
    if progress.best_bleu is not None:
        lines.append(f"best validation BLEU {progress.best_bleu:.1f} at step "
                     f"{progress.best_step}: {args.output / 'best.pt'}")
        if result.bleu_signature:  # none when this invocation evaluated nothing (a resume)
            lines.append(f"  on {result.bleu_sentences:,} validation sentences; BLEU "
                         f"signature: {result.bleu_signature}")
    if result.averaged:
        steps = ", ".join(str(int(path.stem.split("-")[1])) for path in result.averaged)
        lines.append(f"averaged the checkpoints of steps {steps}: "
                     f"{args.output / 'averaged.pt'}")
    if result.plan is not None and args.time_limit is not None:
        done = ("all of them" if progress.step == result.plan.steps else
                f"out of time after step {progress.step:,}" if result.out_of_time else
                f"{progress.step:,}")
        lines.append(f"--time-limit {format_duration(args.time_limit)}: {result.plan.steps:,} "
                     f"steps planned, {done}; this invocation took "
                     f"{format_duration(result.wall_seconds)} in all")
    if result.early_stopped:
        lines.append(f"stopped early: {args.patience} evaluations without a better BLEU")
    if result.stopped_by is not None:
        name = signal.Signals(result.stopped_by).name
        lines.append(f"stopped by {name} after step {progress.step}; to go on, run the same "
                     f"command with --resume")
    if (args.output / "last.pt").exists():
        lines.append(f"checkpoint: {args.output / 'last.pt'} (step {progress.step})")
    written = [f"{name}: {args.output / file}" for name, file in (("log", "log.csv"),
               ("chart", "chart.png")) if (args.output / file).exists()]
    return lines + ([", ".join(written)] if written else [])


def exit_code(result: RunResult) -> int:
    """128 + the signal's number after a stop by signal, as a shell reports it."""
    return 0 if result.stopped_by is None else 128 + result.stopped_by
