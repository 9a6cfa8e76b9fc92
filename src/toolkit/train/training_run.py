"""A long training run of stage 07: evaluation while it trains, checkpoints, and exact resume.

`python -m toolkit.train` runs it in one process and `toolkit.train.ddp` in each of
torchrun's; the loop below is the same code for both, and one process is simply a world of
size one (`toolkit.train.world`). Every `--eval-every` steps the main process measures the
validation loss and BLEU on a fixed sample of validation sentences, keeps the best model by
BLEU in best.pt, and redraws chart.png. Every `--save-every` steps (and at the end, and on
Ctrl-C or SIGTERM) last.pt takes everything the next step depends on (toolkit.train.run_state),
written whole or not at all; `--resume` goes on from it, and on CPU ends bit for bit where
an uninterrupted run ends (tests/test_train_command.py kills runs with SIGKILL to check).

The loop's parts live beside it, one job each: what is measured and when a run stops early
(`run_evaluation`), the output folder and the checkpoints kept for averaging
(`run_files`), speed (`throughput`), signals (`stop_requests`), the plan and the clock of
`--time-limit` (`time_budget`), the faster parts of the model (`fast_path`) and the closing
report (`run_report`), all in `toolkit.train`.
"""

import argparse
import contextlib
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm  # plain text: it must read the same in a terminal, a log and CI

from stages import stage07_multi_head as stage
from toolkit.batching.batches import Batch
from toolkit.batching.data import load_data
from toolkit.learning.checkpoints import CheckpointError, save_checkpoint, vocabularies_from
from toolkit.learning.training import PaperOptimizer
from toolkit.stage_api import count_parameters
from toolkit.train import time_budget
from toolkit.train.batch_plan import BatchPlan
from toolkit.train.fast_path import use_fast_path
from toolkit.train.run_evaluation import (
    evaluate_during_training,
    evaluation_sample,
    record_evaluation,
)
from toolkit.train.run_files import average_kept, check_output, keep_for_averaging
from toolkit.train.run_log import RunLog
from toolkit.train.run_options import (
    PRECISIONS,
    data_settings,
    model_settings,
    resolve_precision,
    run_settings,
)
from toolkit.train.run_recipes import RUN_RECIPES
from toolkit.train.run_report import RunResult
from toolkit.train.run_state import (
    Progress,
    check_same_run,
    data_fingerprint,
    load_run_state,
    optimizer_state,
    random_streams,
    restore_optimizer,
    restore_random_streams,
)
from toolkit.train.stop_requests import StopRequests
from toolkit.train.throughput import Window
from toolkit.train.time_budget import (
    Deadline,
    Measured,
    Plan,
    due,
    format_duration,
    plan_steps,
    probe_costs,
    revise,
    slowest,
    untouched,
)
from toolkit.train.world import World


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
    if args.fast_path:
        use_fast_path(model)
    model = model.to(world.device, PRECISIONS[args.precision][0])
    replica = wrap(model)
    torch.manual_seed(args.seed + 1 + world.rank)
    return model, replica


def take_step(
    replica: nn.Module, optimizer: PaperOptimizer, batch: Batch, generator: torch.Generator,
    label_smoothing: float, world: World, stop_asked: bool = False,
) -> tuple[torch.Tensor, bool, float]:
    """One optimiser step on this process's batch: the step's summed loss and targets over
    all processes, whether any process was asked to stop, and the learning rate it used."""
    if world.device.type == "cuda":  # from page-locked memory the host need not wait
        batch = batch.pin_memory()
    batch = batch.to(world.device, non_blocking=True)
    with optimizer.forward_context():
        scored = stage.objective(replica, batch, generator, label_smoothing=label_smoothing)
    totals, asked = world.step_totals(scored.total, scored.tokens, stop_asked)
    # DDP averages gradients over processes; multiplying by their number turns that average
    # into the gradient of the mean over *all* the step's targets.
    return totals, asked, optimizer.step(scored.total * world.size / totals[1])


def command_optimizer(replica: nn.Module, args: argparse.Namespace) -> PaperOptimizer:
    """Adam, the schedule and the precision the options ask for."""
    return PaperOptimizer(replica, args.lr, args.warmup_steps or 0, args.schedule, args.betas,
                          args.eps, autocast=PRECISIONS[args.precision][1])


def run_training(
    args: argparse.Namespace, world: World,
    wrap: Callable[[nn.Module], nn.Module] = lambda model: model,
    started: float | None = None,
) -> RunResult:
    """Train (or resume) the run `args` describes; `wrap` makes a DDP replica of the model.

    `started` is the time_budget.now() the command began, from which --time-limit counts.
    """
    started = time_budget.now() if started is None else started
    args.precision = resolve_precision(args.precision, world.device)
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
    batches = BatchPlan(pairs, args.batch_size, args.max_tokens, args.seed, world.size)
    time_plan = planned_by(saved, args, last)
    if time_plan is not None:  # a resumed run keeps its plan
        use_plan(args, time_plan)
    total_steps = args.steps  # None until planned, under a new --time-limit
    if args.epochs is not None:
        # Rounded first: 0.1 epoch of 30 steps is 3 steps, not ceil(3.0000000000000004) = 4.
        total_steps = math.ceil(round(args.epochs * batches.steps_per_epoch, 6))
    if total_steps is not None and total_steps < 1:
        raise ValueError(f"--epochs {args.epochs:g} is less than one of the "
                         f"{batches.steps_per_epoch:,} steps an epoch takes, so nothing would "
                         f"train: give --epochs {1 / batches.steps_per_epoch:.2g} or more, or "
                         f"--steps")
    fingerprint = data_fingerprint(data.src_vocab, data.tgt_vocab, pairs)
    if len(set(world.gather(fingerprint))) > 1:  # each machine reads and tokenizes on its own
        raise ValueError("the processes loaded different training pairs or vocabularies: "
                         "give every machine the same corpus files and options")

    model, replica = build_model(args, len(data.src_vocab), len(data.tgt_vocab), world, wrap)
    generator = torch.Generator().manual_seed(args.seed)
    sample = evaluation_sample(data, args.eval_sentences, args.seed)

    def train_step(optimizer: PaperOptimizer, step: int, stop_asked: bool = False
                   ) -> tuple[torch.Tensor, bool, float]:
        return take_step(replica, optimizer, batches.batch(step - 1, world.rank), generator,
                         args.label_smoothing, world, stop_asked)

    if args.time_limit is not None and time_plan is None:  # plan from the run's own steps
        chart = RunLog(args.output).draw if world.main else lambda: None
        with untouched(model, generator, world.device):
            probe = command_optimizer(replica, args)
            costs = probe_costs(lambda step: train_step(probe, step), model, probe, data,
                                sample, args.output, world, chart)
            del probe  # Adam's moments: twice the weights
        # The least time any process has left, so that all plan the same steps.
        seconds_left = min(world.gather(args.time_limit - (time_budget.now() - started)))
        recipe = RUN_RECIPES[args.recipe].recipe
        time_plan = plan_steps(seconds_left, costs, args, recipe.warmup_steps / recipe.steps)
        use_plan(args, time_plan)
        total_steps = args.steps
    settings = run_settings(args)
    optimizer = command_optimizer(replica, args)
    progress, measured = Progress(), Measured()
    if saved is not None:
        check_same_run(saved["training"], settings, fingerprint, world.size, last)
        model.load_state_dict(saved["state_dict"])
        restore_optimizer(optimizer, saved["training"]["optimizer"])
        restore_random_streams(saved["training"]["random"][world.rank], generator, world.device)
        progress = Progress(**saved["training"]["progress"])
        measured = Measured(**saved["training"].get("measured", {}))
        del saved  # a second copy of the weights
        if world.main and progress.best_step == progress.step:  # best.pt may not be written
            save_checkpoint(args.output / "best.pt", model, data.src_vocab, data.tgt_vocab)
        if progress.step >= total_steps:
            raise ValueError(f"{last} is at step {progress.step} already: give --steps (or "
                             f"--epochs) beyond it to train on")
    deadline = None
    if args.time_limit is not None:
        deadline = Deadline(started + args.time_limit, time_plan, measured)
        # A resumed run whose set-up took the time; every process decides alike.
        too_late = deadline.no_room_for_a_step(min(world.gather(deadline.seconds_left())))
        if too_late is not None:
            raise ValueError(too_late)
    log = RunLog(args.output, keep_through=progress.step) if world.main else None
    if world.main:
        print(f"stage 07, {count_parameters(model):,} parameters, on {world.device} x "
              f"{world.size} in {args.precision}; {len(pairs):,} training pairs, "
              f"{batches.steps_per_epoch:,} steps per epoch; "
              + (f"resuming at step {progress.step + 1} of {total_steps:,}"
                 if args.resume else f"{total_steps:,} steps"), flush=True)
        if time_plan is not None:
            print(describe_plan(time_plan, args.time_limit, args.resume), flush=True)
    # A time-limited run plans again at each evaluation, unless the user gave its steps.
    revising = deadline is not None and not args.steps_given

    def evaluates(step: int) -> bool:
        return time_plan.evaluates(step) if time_plan else due(step, args.eval_every)

    def saves(step: int) -> bool:
        return time_plan.saves(step) if time_plan else due(step, args.save_every)

    def save(scheduled: bool) -> None:
        nonlocal start
        began = time_budget.now()
        progress.seconds += began - start
        start = began
        streams = world.gather(random_streams(generator, world.device))  # every process
        if world.main and scheduled and args.average_last:
            keep_for_averaging(model, data, args.output, progress.step, args.average_last)
            measured.save = max(measured.save, time_budget.now() - began)  # before last.pt
        if world.main:
            training = {"settings": settings, "data": fingerprint, "world_size": world.size,
                        "optimizer": optimizer_state(optimizer), "random": streams,
                        "progress": vars(progress)}
            if time_plan is not None:
                training["plan"], training["measured"] = time_plan.saved(), asdict(measured)
            save_checkpoint(last, model, data.src_vocab, data.tgt_vocab, training)
        files = 2 if scheduled and args.average_last else 1
        measured.save = max(measured.save, (time_budget.now() - began) / files)

    start = time_budget.now()
    first_step, window = progress.step + 1, Window()
    stopped_by, early_stop, new_best, signature, out_of_time = None, False, False, "", False
    # Whether the last step evaluated or saved (the main process alone does that, the others
    # wait in the next step's all-reduce), or there was none in this invocation yet: the step
    # that follows is left out of the pace measured, in every process and on resume alike.
    paused = True
    bar = tqdm(total=total_steps, initial=progress.step, desc="training", unit="step",
               ascii=True, ncols=90, mininterval=2.0, file=sys.stderr, disable=not world.main)
    with StopRequests() as stop:
        while progress.step < total_steps:
            step = progress.step + 1
            step_start = time_budget.now()
            totals, asked, lr = train_step(optimizer, step, stop.signal is not None)
            progress.step = step
            step_seconds = time_budget.now() - step_start
            if paused:  # waited in the all-reduce while the main process evaluated or saved
                step_seconds = measured.costs(time_plan.costs).step if time_plan else 0.0
            else:
                measured.step_seconds += step_seconds
                measured.steps += 1
            paused = False
            window.add(totals, len(batches.indices(step - 1)))
            # All processes stop after the same step, even if only one was signalled.
            if asked:
                stopped_by = world.largest(stop.signal or 0)
                with window.excluding():
                    save(scheduled=False)
                break
            # The clock's verdict is every process's: they all end after the same step.
            if deadline is not None and step < total_steps:
                out_of_time = world.any(deadline.no_room_after(step, step_seconds))
            last_step = step == total_steps or out_of_time
            evaluate_now = evaluates(step) or last_step
            log_now = step % args.log_every == 0 or evaluate_now  # every evaluation gets a row
            row = window.read() if log_now else {}
            if evaluate_now:
                began = time_budget.now()
                progress.evaluations += 1
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
                log.add(step=step, epoch=batches.epoch_of(step - 1), lr=lr, **row)
                if "val_bleu" in row:
                    with window.excluding():
                        log.draw()
            scheduled = saves(step) or last_step
            if evaluate_now:
                measured.evaluation = max(measured.evaluation, time_budget.now() - began)
                if revising and not (last_step or early_stop):  # before the saves: last.pt
                    # keeps the new plan, and the time they take is not the plan's to spend
                    files = (int(scheduled or new_best) + int(scheduled and args.average_last > 0)
                             + int(new_best))
                    before, time_plan = time_plan, replan(time_plan, step, deadline, measured,
                                                          progress, world, files)
                    use_plan(args, time_plan)
                    total_steps = bar.total = args.steps
                    if world.main and time_plan != before:
                        bar.write(describe_revision(time_plan, step))
            paused = evaluate_now or scheduled or early_stop or new_best
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
            if early_stop or out_of_time:
                break
    bar.close()
    averaged = None
    if world.main and args.average_last and stopped_by is None:
        averaged = average_kept(args.output, progress.step, args.save_every, args.average_last)
    return RunResult(model, data, progress, progress.step - first_step + 1, window.pairs,
                     window.training_seconds(), stopped_by, early_stop, averaged, signature,
                     len(sample), time_plan, out_of_time, time_budget.now() - started)


def replan(plan: Plan, step: int, deadline: Deadline, measured: Measured, progress: Progress,
           world: World, files: int) -> Plan:
    """The plan revised after this step's evaluation from what every process measured, for
    the least time any has left once this step's `files` are saved; the step times measured
    start again from here."""
    costs = slowest(measured.costs(plan.costs), world)
    seconds_left = min(world.gather(deadline.seconds_left())) - files * costs.save
    measured.step_seconds, measured.steps = 0.0, 0
    deadline.plan = revise(plan, step, seconds_left, costs, progress.evaluations)
    return deadline.plan


def planned_by(saved: dict | None, args: argparse.Namespace, path: Path) -> Plan | None:
    """The plan a resumed run keeps, from its checkpoint: with --time-limit, all of it; with
    --steps (to go on beyond a finished plan), all but the steps."""
    plan = saved and saved["training"].get("plan")
    if plan is None:
        if saved is not None and args.time_limit is not None:
            raise CheckpointError(f"{path} was not trained under --time-limit: resume it "
                                  f"without one (its --steps decide how long)")
        return None
    plan = Plan.from_saved(plan)
    if args.time_limit is None and not args.steps_given:
        raise CheckpointError(f"{path} was planned by --time-limit for {plan.steps:,} steps: "
                              f"resume with --time-limit and the time this invocation may "
                              f"take (the plan is kept), or with --steps to train to that step "
                              f"with the plan's schedule")
    return plan


def use_plan(args: argparse.Namespace, plan: Plan) -> None:
    """Train as planned; --steps, where the user gave them, still say how far."""
    if not args.steps_given:
        args.steps = plan.steps
    args.warmup_steps = plan.warmup_steps
    args.eval_every, args.save_every = plan.eval_every, plan.save_every
    args.average_last = plan.average_last


def describe_revision(plan: Plan, step: int) -> str:
    """What the plan became at an evaluation, for the log."""
    costs = plan.costs
    return (f"plan revised after step {step:,}: {plan.steps:,} steps fit, measured: a step "
            f"{costs.step:.3f} s, an evaluation {costs.evaluation:.1f} s, a save "
            f"{costs.save:.2f} s (each +5%); evaluations every {plan.eval_every:,} from here, "
            f"saves every {plan.save_every:,}")


def describe_plan(plan: Plan, limit: float | None, resumed: bool) -> str:
    """What the time limit bought, and how the steps were worked out: for the log."""
    costs = plan.costs
    if limit is None:
        return (f"the schedule of the plan for {plan.steps:,} steps is kept (warm-up "
                f"{plan.warmup_steps:,} steps)")
    if resumed:
        revised = (", revised at each evaluation for the time this invocation has"
                   if "steps" in plan.chosen else "")
        return (f"the plan of {plan.steps:,} steps is kept{revised}; this invocation may take "
                f"{format_duration(limit)} and ends earlier, saved, if the rest does not fit")
    return (f"--time-limit {format_duration(limit)}: {plan.steps:,} steps fit, measured: a "
            f"step {costs.step:.3f} s, an evaluation {costs.evaluation:.1f} s, a save "
            f"{costs.save:.2f} s (each +5%); warm-up {plan.warmup_steps:,} steps, evaluations "
            f"every {plan.eval_every:,}, saves every {plan.save_every:,}, averaging the last "
            f"{plan.average_last}; revised at each evaluation from what the run measures. The same "
            f"run without the limit, unless a revision moves it: {' '.join(plan.options())}")


