"""A long training run of stage 07: evaluation while it trains, checkpoints, and exact resume.

`python -m toolkit.train` runs it in one process and `toolkit.train_ddp` in each of
torchrun's; the loop below is the same code for both, and one process is simply a world of
size one. Every `--eval-every` steps the main process measures the validation loss and BLEU
on a fixed sample of validation sentences, keeps the best model by BLEU in best.pt, and
redraws chart.png. Every `--save-every` steps (and at the end, and on Ctrl-C or SIGTERM)
last.pt takes everything the next step depends on (toolkit.run_state), written whole or not
at all; `--resume` goes on from it, and on CPU ends bit for bit where an uninterrupted run
ends (tests/test_train_command.py kills runs with SIGKILL to check).
"""

import argparse
import contextlib
import math
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm  # plain text: it must read the same in a terminal, a log and CI

from stages import stage07_multi_head as stage
from toolkit.averaging import average_checkpoints
from toolkit.batch_plan import BatchPlan
from toolkit.batches import loader
from toolkit.checkpoints import save_checkpoint, vocabularies_from
from toolkit.data import CourseData, load_data
from toolkit.decoding import translate
from toolkit.metrics import bleu
from toolkit.run_log import RunLog
from toolkit.run_options import PRECISIONS, data_settings, model_settings, run_settings
from toolkit.run_state import (
    check_same_run,
    data_fingerprint,
    load_run_state,
    optimizer_state,
    random_streams,
    restore_optimizer,
    restore_random_streams,
)
from toolkit.stage_api import count_parameters
from toolkit.training import PaperOptimizer, evaluate_loss


@dataclass
class World:
    """The processes that train one model together: one alone, or torchrun's group."""

    rank: int = 0
    size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """The one process that evaluates and writes files."""
        return self.rank == 0

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.size > 1:
            dist.all_reduce(tensor)
        return tensor

    def step_totals(self, total: torch.Tensor, tokens: torch.Tensor, stop_asked: bool
                    ) -> tuple[torch.Tensor, bool]:
        """The step's summed loss and target count over every process, and whether any
        process was asked to stop, in one all-reduce. One process alone reads its own flag:
        it builds no flag tensor on the device, a host-to-device copy every step."""
        parts = [total.detach(), tokens.to(total.dtype)]
        if self.size == 1:
            return torch.stack(parts), stop_asked
        flag = torch.tensor(float(stop_asked), device=self.device)
        totals = self.all_reduce(torch.stack([*parts, flag]))
        return totals[:2], bool(totals[2] > 0)

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()

    def gather(self, value: object) -> list:
        """Every process's `value`, in rank order, on every process."""
        if self.size == 1:
            return [value]
        values = [None] * self.size
        dist.all_gather_object(values, value)
        return values

    def any(self, flag: bool) -> bool:
        """True on every process if it is True on any: all must stop at the same step."""
        return self.largest(int(flag)) > 0

    def largest(self, number: int) -> int:
        """The largest of every process's `number`, on every process."""
        if self.size == 1:
            return number
        value = torch.tensor([number], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return int(value.item())

    @contextmanager
    def leader_first(self) -> Iterator[None]:
        """The first process of each machine goes first (a download, a cache); then the rest.
        If the first one fails (a corpus error), the others are still let through, to meet
        the same error and say it themselves, rather than wait or die on a closed connection."""
        if self.size > 1 and self.local_rank != 0:
            dist.barrier()
        try:
            yield
        finally:
            if self.size > 1 and self.local_rank == 0:
                dist.barrier()


RUN_FILES = ("last.pt", "best.pt", "averaged.pt", "log.csv", "chart.png")  # and step-N.pt


class StopRequests:
    """Ctrl-C or SIGTERM (a pre-empted machine) ask the run to stop after this step with a
    checkpoint; a second Ctrl-C stops at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.signal: int | None = None

    def __enter__(self) -> "StopRequests":
        self.previous = {number: signal.signal(number, self._request) for number in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def _request(self, number: int, frame) -> None:
        if self.signal is not None and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = number


@dataclass
class Progress:
    """Where the run is: saved in every checkpoint, restored on resume."""

    step: int = 0
    best_bleu: float | None = None
    best_step: int | None = None
    evaluations_since_best: int = 0
    seconds: float = 0.0


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


def build_model(
    args: argparse.Namespace, src_vocab_size: int, tgt_vocab_size: int, world: World,
    wrap: Callable[[nn.Module], nn.Module] = lambda model: model,
) -> tuple[nn.Module, nn.Module]:
    """Equal replicas in every process, then a random stream of each one's own for dropout.

    Returns the model and what trains it (a DDP replica, or the model itself). With one seed
    everywhere, every process would draw the same dropout masks for its own sentences; so
    each seeds its stream with seed + 1 + rank, which also never replays the numbers that drew
    the initial weights.
    """
    torch.manual_seed(args.seed)  # the same initial weights everywhere; DDP also copies rank 0's
    model = stage.Transformer(src_vocab_size, tgt_vocab_size, **model_settings(args))
    model = model.to(world.device, PRECISIONS[args.precision][0])
    replica = wrap(model)
    torch.manual_seed(args.seed + 1 + world.rank)
    return model, replica


def run_training(
    args: argparse.Namespace, world: World,
    wrap: Callable[[nn.Module], nn.Module] = lambda model: model,
) -> RunResult:
    """Train (or resume) the run `args` describes; `wrap` makes a DDP replica of the model."""
    try:
        check_output(args, world.rank)
    except SystemExit as refusal:  # every process meets it; one says why
        raise SystemExit(refusal.code if world.main else 2) from None
    autocast = PRECISIONS[args.precision][1]
    if autocast == torch.float16 and world.device.type == "cpu":
        raise SystemExit("--precision fp16 needs a GPU; on CPU use --precision bf16")
    last = args.output / "last.pt"
    saved = load_run_state(last) if args.resume else None
    # Every process loads the corpus; one says what its filters removed. A resumed run reads
    # its vocabularies from last.pt rather than train them again.
    vocabularies = vocabularies_from(saved, last) if saved is not None else None
    with world.leader_first(), contextlib.redirect_stdout(sys.stdout if world.main else None):
        data = load_data(args.corpus, args.src_lang, args.tgt_lang, **data_settings(args),
                         vocabularies=vocabularies)
    pairs = data.train[: args.train_pairs] if args.train_pairs else data.train
    plan = BatchPlan(pairs, args.batch_size, args.max_tokens, args.seed, world.size)
    # Rounded first: 0.1 epoch of 30 steps is 3 steps, not ceil(3.0000000000000004) = 4.
    total_steps = args.steps or math.ceil(round(args.epochs * plan.steps_per_epoch, 6))
    settings = run_settings(args)
    fingerprint = data_fingerprint(data.src_vocab, data.tgt_vocab, pairs)
    if len(set(world.gather(fingerprint))) > 1:  # each machine reads and tokenizes on its own
        raise ValueError("the processes loaded different training pairs or vocabularies: "
                         "give every machine the same corpus files and options")

    model, replica = build_model(args, len(data.src_vocab), len(data.tgt_vocab), world, wrap)
    generator = torch.Generator().manual_seed(args.seed)
    optimizer = PaperOptimizer(replica, args.lr, args.warmup_steps, args.schedule, args.betas,
                               args.eps, autocast=autocast)
    progress = Progress()
    if saved is not None:
        check_same_run(saved["training"], settings, fingerprint, world.size, last)
        model.load_state_dict(saved["state_dict"])
        restore_optimizer(optimizer, saved["training"]["optimizer"])
        restore_random_streams(saved["training"]["random"][world.rank], generator, world.device)
        progress = Progress(**saved["training"]["progress"])
        del saved  # a second copy of the weights
        if world.main and progress.best_step == progress.step:  # best.pt may not be written
            save_checkpoint(args.output / "best.pt", model, data.src_vocab, data.tgt_vocab)
        if progress.step >= total_steps:
            raise ValueError(f"{last} is at step {progress.step} already: give --steps (or "
                             f"--epochs) beyond it to train on")
    log = RunLog(args.output, keep_through=progress.step) if world.main else None
    if world.main:
        print(f"stage 07, {count_parameters(model):,} parameters, on {world.device} x "
              f"{world.size}; {len(pairs):,} training pairs, {plan.steps_per_epoch:,} steps "
              f"per epoch; " + (f"resuming at step {progress.step + 1} of {total_steps:,}"
                                if args.resume else f"{total_steps:,} steps"), flush=True)

    def save(scheduled: bool) -> None:
        nonlocal start
        progress.seconds += time.perf_counter() - start
        start = time.perf_counter()
        streams = world.gather(random_streams(generator, world.device))  # every process
        if world.main and scheduled and args.average_last:
            keep_for_averaging(model, data, args.output, progress.step, args.average_last)
        if world.main:
            training = {"settings": settings, "data": fingerprint, "world_size": world.size,
                        "optimizer": optimizer_state(optimizer), "random": streams,
                        "progress": vars(progress)}
            save_checkpoint(last, model, data.src_vocab, data.tgt_vocab, training)

    sample = evaluation_sample(data, args.eval_sentences, args.seed)
    start = time.perf_counter()
    first_step, window = progress.step + 1, Window()
    stopped_by, early_stop, new_best, signature = None, False, False, ""
    bar = tqdm(total=total_steps, initial=progress.step, desc="training", unit="step",
               ascii=True, ncols=90, mininterval=2.0, file=sys.stderr, disable=not world.main)
    with StopRequests() as stop:
        for step in range(first_step, total_steps + 1):
            batch = plan.batch(step - 1, world.rank)
            if world.device.type == "cuda":  # from page-locked memory the host need not wait
                batch = batch.pin_memory()
            batch = batch.to(world.device, non_blocking=True)
            with optimizer.forward_context():
                scored = stage.objective(replica, batch, generator,
                                         label_smoothing=args.label_smoothing)
            totals, asked = world.step_totals(scored.total, scored.tokens,
                                              stop.signal is not None)
            # DDP averages gradients over processes; multiplying by their number turns that
            # average into the gradient of the mean over *all* the step's targets.
            lr = optimizer.step(scored.total * world.size / totals[1])
            progress.step = step
            window.add(totals, len(plan.indices(step - 1)))
            # All processes stop after the same step, even if only one was signalled.
            if asked:
                stopped_by = world.largest(stop.signal or 0)
                with window.excluding():
                    save(scheduled=False)
                break
            evaluate_now = step % args.eval_every == 0 or step == total_steps
            log_now = step % args.log_every == 0 or evaluate_now  # every evaluation gets a row
            row = window.read() if log_now else {}
            if evaluate_now:
                with window.excluding():
                    if world.main:
                        scores = evaluate_during_training(model, data, sample, world.device)
                        signature = scores.pop("bleu_signature")
                        row |= scores
                        early_stop = record_evaluation(progress, row["val_bleu"], args.patience,
                                                    step)
                    early_stop = world.any(early_stop)
                    new_best = world.any(world.main and progress.best_step == step)
            if row and world.main:
                log.add(step=step, epoch=plan.epoch_of(step - 1), lr=lr, **row)
                if "val_bleu" in row:
                    with window.excluding():
                        log.draw()
            scheduled = step % args.save_every == 0 or step == total_steps
            if scheduled or early_stop or new_best:
                with window.excluding():
                    save(scheduled)
                    # best.pt after last.pt: a run killed between the two resumes from a
                    # last.pt that names this step best, and writes best.pt from it again.
                    if new_best and world.main:
                        save_checkpoint(args.output / "best.pt", model, data.src_vocab,
                                        data.tgt_vocab)
            new_best = False
            bar.update()
            if "loss" in row:
                bar.set_postfix(loss=f"{row['loss']:.3f}", refresh=False)
            if early_stop:
                break
    bar.close()
    averaged = None
    if world.main and args.average_last and stopped_by is None:
        averaged = kept_steps(args.output, progress.step) or None
        if averaged:
            average_checkpoints(averaged, args.output / "averaged.pt")
        else:  # an early stop before the first --save-every step: the run itself is fine
            print(f"no step-N.pt was kept before the run ended at step {progress.step} (one "
                  f"is kept every --save-every {args.save_every} steps): averaged.pt not "
                  f"written", file=sys.stderr)
    return RunResult(model, data, progress, progress.step - first_step + 1, window.pairs,
                     window.training_seconds(), stopped_by, early_stop, averaged, signature,
                     len(sample))


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


class Window:
    """Loss and throughput since the last log row, and totals since this invocation started.

    Time spent evaluating and saving is left out, so tokens/s and steps/s measure training.
    """

    def __init__(self):
        self.start = self.first = time.perf_counter()
        self.excluded = self.excluded_total = 0.0
        self.sums: torch.Tensor | None = None  # (2,) summed loss and targets, on the device
        self.pairs = 0

    def add(self, totals: torch.Tensor, pairs: int) -> None:
        self.sums = totals if self.sums is None else self.sums + totals
        self.pairs += pairs

    @contextmanager
    def excluding(self) -> Iterator[None]:
        """Leave the time of this block out of every rate."""
        start = time.perf_counter()
        yield
        spent = time.perf_counter() - start
        self.excluded, self.excluded_total = self.excluded + spent, self.excluded_total + spent

    def read(self) -> dict:
        """Reading waits for the device, so it happens only once per log row."""
        loss, tokens = self.sums.tolist()
        now = time.perf_counter()
        row = {"loss": loss / tokens,
               "target_tokens_per_s": tokens / (now - self.start - self.excluded)}
        self.sums, self.start, self.excluded = None, now, 0.0
        return row

    def training_seconds(self) -> float:
        return time.perf_counter() - self.first - self.excluded_total


def evaluation_sample(data: CourseData, sentences: int, seed: int) -> np.ndarray:
    """A fixed, seeded sample of validation sentences, the same at every evaluation."""
    size = len(data.splits["validation"])
    if size == 0:
        raise SystemExit("the validation split is empty: nothing to evaluate on")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(size, size=min(sentences, size), replace=False))


@torch.no_grad()
def evaluate_during_training(
    model: nn.Module, data: CourseData, sample: np.ndarray, device: torch.device,
) -> dict:
    """Validation loss and BLEU, drawing nothing from training's random streams."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        val_loss = evaluate_loss(model, stage.objective,
                                 loader(data.validation, batch_size=100, shuffle=False), device)
        sources, references = data.sources("validation"), data.reference_texts("validation")
        hypotheses = translate(model, [sources[i] for i in sample], data.src_vocab,
                               data.tgt_vocab, device)
        scored = bleu([data.tgt_vocab.join(words) for words in hypotheses],
                      [references[i] for i in sample], data.tgt_lang)
    return {"val_loss": val_loss, "val_bleu": scored.score, "bleu_signature": scored.signature}


def record_evaluation(progress: Progress, score: float, patience: int, step: int) -> bool:
    """Record an evaluation; True when `patience` evaluations in a row brought no better BLEU."""
    if progress.best_bleu is None or score > progress.best_bleu:
        progress.best_bleu, progress.best_step = score, step
        progress.evaluations_since_best = 0
    else:
        progress.evaluations_since_best += 1
    return patience > 0 and progress.evaluations_since_best >= patience


def report(result: RunResult, args: argparse.Namespace, world: World) -> list[str]:
    """The closing lines a run prints, with where its files are."""
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
    if result.early_stopped:
        lines.append(f"stopped early: {args.patience} evaluations without a better BLEU")
    if result.stopped_by is not None:
        name = signal.Signals(result.stopped_by).name
        lines.append(f"stopped by {name} after step {progress.step}; to go on, run the same "
                     f"command with --resume")
    lines += [f"checkpoint: {args.output / 'last.pt'} (step {progress.step})",
              f"log: {args.output / 'log.csv'}, chart: {args.output / 'chart.png'}"]
    return lines


def exit_code(result: RunResult) -> int:
    """128 + the signal's number after a stop by signal, as a shell reports it."""
    return 0 if result.stopped_by is None else 128 + result.stopped_by

