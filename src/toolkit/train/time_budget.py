"""Train for the time you have: `--time-limit` turned into a plan of steps, and a clock that
learns how fast the run really goes and plans again.

Before the first step, one evaluation and one save are timed, and the run's model trains a
few of the run's own batches with an optimiser of its own; then its weights and every
random stream are put back as they were (`untouched`), so probing changes nothing that
follows. The first plan follows from those times: how many steps fit, the warm-up at the
recipe's share of them, five evaluations and the saves to average spread over them.

A few probe steps say little of a half-hour run: another program may start, a laptop may
turn to battery. So at every evaluation the run plans again (`revise`) from what it has
measured of itself (its recent steps, its slowest evaluation and save), for the time its
plan has left: how many steps still fit, and where the evaluations left and the saves to
average go, so that they still fall where the plan put them (the last save at the end, the
averaged ones over the last tenth). The warm-up is kept: by the first evaluation it is done.
Between evaluations the clock (`Deadline`) ends the run at the last step after which that
step's own evaluation and saves, one more step and the end still fit.

The plan is written into every checkpoint, with what has been measured, so a resumed run
keeps both; under a fake clock (the tests') a run killed and resumed takes bit for bit the
steps of the run never stopped. Every time the plan reads goes through `now`.
"""

import argparse
import copy
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, astuple, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from toolkit.batching.data import CourseData
from toolkit.learning.checkpoints import save_checkpoint
from toolkit.learning.training import PaperOptimizer
from toolkit.train.run_evaluation import TRANSLATE_BATCH, validation_bleu, validation_loss
from toolkit.train.run_state import optimizer_state, random_streams, restore_random_streams
from toolkit.train.world import World

now = time.perf_counter  # the clock every time-limit decision reads; tests put a fake one here
PROBE_WARMUP, PROBE_STEPS = 2, 8  # untimed steps first: the first calls allocate and tune
EVALUATIONS = 5  # evaluations a planned run makes, the last one at its last step
AVERAGED_SHARE = 0.1  # the saves --average-last averages span the plan's last tenth
SAFETY = 1.05  # every estimate is stretched by 5%: a plan that runs over is worse than one short
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?:in)?)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str) -> float:
    """Seconds in "30" (minutes), "90s", "45m", "1h30m" or "1.5h": argparse's type for
    --time-limit."""
    text = text.strip().lower().replace(" ", "")
    try:
        seconds = float(text) * 60
    except ValueError:
        match = _DURATION.fullmatch(text)
        if not text or match is None:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration: give minutes (30), or hours, minutes and seconds "
                f"(1h30m, 45m, 90s)") from None
        hours, minutes, secs = (float(part or 0) for part in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"--time-limit must be positive and finite, got "
                                         f"{text!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """"12 min 05 s" for the log: a limit is read in minutes. Never less than 0 s."""
    minutes, secs = divmod(max(0, round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@dataclass(frozen=True)
class Costs:
    """What one step, one evaluation and one saved file take, in seconds, each stretched by
    SAFETY."""

    step: float
    evaluation: float
    save: float


@dataclass(frozen=True)
class Plan:
    """The steps a time limit buys, and where the evaluations and saves fall among them.

    A planned evaluation (or save) comes every `eval_every` steps counted from `eval_since`,
    the step of the revision that placed it (0 for the first plan), and at the last step.
    `chosen` names what the plan chose rather than the user, and may choose again.
    """

    steps: int
    warmup_steps: int
    eval_every: int
    save_every: int
    average_last: int
    costs: Costs
    eval_since: int = 0
    save_since: int = 0
    chosen: tuple[str, ...] = ()  # of "steps", "eval_every", "save_every"; () in older runs

    def evaluates(self, step: int) -> bool:
        return due(step, self.eval_every, self.eval_since) or step == self.steps

    def saves(self, step: int) -> bool:
        return due(step, self.save_every, self.save_since) or step == self.steps

    def options(self) -> list[str]:
        """The same run without --time-limit: these options take the same steps, bit for bit
        (the evaluations and saves too while no revision has moved them)."""
        return ["--steps", str(self.steps), "--warmup-steps", str(self.warmup_steps),
                "--eval-every", str(self.eval_every), "--save-every", str(self.save_every),
                "--average-last", str(self.average_last)]

    def saved(self) -> dict:
        """Plain values for last.pt, which loads with weights_only=True."""
        return {**asdict(self), "chosen": list(self.chosen)}

    @classmethod
    def from_saved(cls, saved: dict) -> "Plan":
        """The plan a checkpoint holds, for a resumed run to keep."""
        return cls(**{**saved, "costs": Costs(**saved["costs"]),
                      "chosen": tuple(saved.get("chosen", ()))})


def due(step: int, every: int, since: int = 0) -> bool:
    """Whether `step` is one of every `every` steps counted from step `since`."""
    return step > since and (step - since) % every == 0


@dataclass
class Measured:
    """What the run measured of itself: its steps since the plan was last revised, and its
    slowest evaluation and slowest saved file so far. Kept in every checkpoint."""

    step_seconds: float = 0.0
    steps: int = 0
    evaluation: float = 0.0
    save: float = 0.0

    def costs(self, planned: Costs) -> Costs:
        """What the rest of the run is planned with: the recent steps' pace (faster or slower
        than planned), and the larger of planned and measured for evaluations and saves."""
        step = self.step_seconds / self.steps * SAFETY if self.steps else planned.step
        return Costs(step, max(planned.evaluation, self.evaluation * SAFETY),
                     max(planned.save, self.save * SAFETY))


def final_seconds(costs: Costs, average_last: int) -> float:
    """What a run needs after its last step: one evaluation, last.pt, best.pt, the kept
    step-N.pt, and averaging (about one load per kept file, counted as a save)."""
    return costs.evaluation + (3 + 2 * average_last) * costs.save


def along_the_way(costs: Costs, evaluations: int, average_last: int) -> str:
    """The costs a plan counts besides its steps and its end, in words, for a message."""
    saves = f"{average_last / AVERAGED_SHARE:.0f} saves to average at {costs.save:.2f} s" \
        if average_last else f"saves at {costs.save:.2f} s"
    return f"{evaluations} evaluations along the way at {costs.evaluation:.1f} s, {saves}"


def plan_steps(seconds_left: float, costs: Costs, args: argparse.Namespace,
               warmup_share: float) -> Plan:
    """The most steps whose training, evaluations and saves fit in `seconds_left`.

    The options the user gave (--warmup-steps, --eval-every, --save-every) are kept; the
    others are planned: EVALUATIONS evaluations, the warm-up at the recipe's `warmup_share`
    of the steps, and saves every `AVERAGED_SHARE / average_last` of them, so that the kept
    checkpoints cover the last tenth.
    """
    chosen = tuple(name for name in ("steps", "eval_every", "save_every")
                   if name == "steps" or getattr(args, name) is None)
    average_last = args.average_last
    steps = steps_that_fit(seconds_left, costs, average_last, args.eval_every, args.save_every,
                           EVALUATIONS - 1 if "eval_every" in chosen else 0)
    if steps < 1:
        evaluations = EVALUATIONS - 1 if "eval_every" in chosen else 0
        raise ValueError(
            f"--time-limit {format_duration(args.time_limit)}: "
            + (f"the set-up used {format_duration(args.time_limit - seconds_left)} of it, "
               f"leaving {format_duration(seconds_left)}, "
               if seconds_left < args.time_limit else "")
            + f"which leaves no time to train: one step takes about {costs.step:.2f} s, one "
            f"evaluation {costs.evaluation:.1f} s; the plan counts "
            f"{along_the_way(costs, evaluations, average_last)}, and the end (a last "
            f"evaluation, the saves and the average) {final_seconds(costs, average_last):.1f} "
            f"s: give more time, or fewer --eval-sentences")
    # At least one warm-up step where the recipe warms up: 0 would mean no decay either.
    warmup = (args.warmup_steps if args.warmup_steps is not None
              else max(int(warmup_share > 0), round(warmup_share * steps)))
    plan = Plan(steps, warmup, args.eval_every or 1, args.save_every or 1, average_last, costs,
                chosen=chosen)
    return placed(plan, 0, EVALUATIONS)


def steps_that_fit(seconds: float, costs: Costs, average_last: int, eval_every: int | None,
                   save_every: int | None, evaluations: int, done: int = 0) -> int:
    """How many steps, all told, fit in `seconds` when `done` are done already.

    `evaluations` planned ones come along the way (the last, at the end, is in the end's
    costs); given --eval-every or --save-every, theirs come every so many steps. Planned
    saves to average come every AVERAGED_SHARE / average_last of all the steps, so n more
    steps after `done` bring n / (done + n) of the AVERAGED_SHARE's average_last / share saves:
    n * per_step + saves * n / (done + n) <= available, solved for n.
    """
    available = seconds - final_seconds(costs, average_last)
    available -= evaluations * (costs.evaluation + 2 * costs.save)  # then last.pt, best.pt
    per_step = costs.step
    if eval_every is not None:
        per_step += (costs.evaluation + 2 * costs.save) / eval_every
    files = 2 if average_last else 1  # step-N.pt beside last.pt
    saves = 0.0
    if save_every is not None:
        per_step += files * costs.save / save_every
    elif average_last:
        saves = average_last / AVERAGED_SHARE * files * costs.save
    if available <= 0:
        return done
    # per_step n^2 + (per_step done + saves - available) n - available done <= 0
    b = per_step * done + saves - available
    more = (-b + math.sqrt(b * b + 4 * per_step * available * done)) / (2 * per_step)
    return done + math.floor(more)


def placed(plan: Plan, step: int, evaluations_left: int) -> Plan:
    """`plan` with the evaluations and saves it chose spread over its steps after `step`:
    `evaluations_left` evaluations, the last at the last step; saves to average every
    AVERAGED_SHARE / average_last of all the steps, so the kept ones span the last tenth."""
    if "eval_every" in plan.chosen:
        eval_every = max(1, math.ceil((plan.steps - step) / max(1, evaluations_left)))
        plan = replace(plan, eval_every=eval_every, eval_since=step)
    if "save_every" in plan.chosen:
        save_every = (max(1, math.ceil(AVERAGED_SHARE * plan.steps / plan.average_last))
                      if plan.average_last else plan.eval_every)
        plan = replace(plan, save_every=save_every, save_since=step if plan.average_last
                       else plan.eval_since)
    return plan


def revise(plan: Plan, step: int, seconds_left: float, costs: Costs, evaluations: int) -> Plan:
    """The plan again after step `step`, its `evaluations`-th evaluation, from the `costs`
    the run measured and the `seconds_left` of this invocation's limit: the steps that still
    fit (at least one more: the clock ends the run if even that one does not), the
    evaluations left and the saves to average spread over them. A plan whose steps the user
    gave stays as it is."""
    if "steps" not in plan.chosen or step >= plan.steps:
        return plan
    left = EVALUATIONS - evaluations if "eval_every" in plan.chosen else 0
    steps = steps_that_fit(seconds_left, costs, plan.average_last,
                           None if "eval_every" in plan.chosen else plan.eval_every,
                           None if "save_every" in plan.chosen else plan.save_every,
                           max(0, left - 1), done=step)
    if left < 1 and "eval_every" in plan.chosen:  # all five made: the next is the end's
        left = 1
    return placed(replace(plan, steps=max(step + 1, steps), costs=costs), step, left)


@contextmanager
def untouched(model: nn.Module, generator: torch.Generator, device: torch.device
              ) -> Iterator[None]:
    """Whatever trains inside, the model's weights and every random stream training reads
    (those a checkpoint keeps) leave as they came in: the run starts as if nothing had
    happened."""
    weights = copy.deepcopy(model.state_dict())
    streams = random_streams(generator, device)
    yield
    model.load_state_dict(weights)
    restore_random_streams(streams, generator, device)


def probe_costs(
    train_step: Callable[[int], None], model: nn.Module, optimizer: PaperOptimizer,
    data: CourseData, sample: np.ndarray, folder: Path, world: World,
    draw_chart: Callable[[], None],
) -> Costs:
    """Time an evaluation, a save and training steps, each process its own, then take the
    slowest process's figures.

    Called inside `untouched`. The evaluation comes first, on the untrained model, which
    writes the longest translations: the validation loss, plus one batch of translations
    times the batches the sample makes, plus a chart. A save writes what last.pt holds (the
    weights and Adam's moments). `train_step(s)` trains the run's own step s (from 1) with
    `optimizer`, all-reduce included.
    """
    start = clock(world)
    validation_loss(model, data, world.device)
    loss_seconds = clock(world) - start
    start = clock(world)
    validation_bleu(model, data, sample[:TRANSLATE_BATCH], world.device)
    translating = (clock(world) - start) * math.ceil(len(sample) / TRANSLATE_BATCH)
    start = now()
    draw_chart()
    evaluation = loss_seconds + translating + now() - start
    for step in range(1, PROBE_WARMUP + 1):
        train_step(step)
    start = clock(world)
    for step in range(PROBE_WARMUP + 1, PROBE_WARMUP + PROBE_STEPS + 1):
        train_step(step)
    step_seconds = (clock(world) - start) / PROBE_STEPS
    path = folder / f".probe-{world.rank}.pt"
    start = now()
    save_checkpoint(path, model, data.src_vocab, data.tgt_vocab,
                    {"optimizer": optimizer_state(optimizer)})
    save = now() - start
    path.unlink()
    return slowest(Costs(step_seconds * SAFETY, evaluation * SAFETY, save * SAFETY), world)


def slowest(costs: Costs, world: World) -> Costs:
    """The slowest process's costs, the same in every process (so all plan alike)."""
    return Costs(*(float(value) for value in np.max(np.array(world.gather(astuple(costs))),
                                                    axis=0)))


def clock(world: World) -> float:
    """The time once the device has finished what it was given (a GPU's work is queued, and
    a clock read at once times the queueing)."""
    if world.device.type == "cuda":
        torch.cuda.synchronize(world.device)
    elif world.device.type == "mps":
        torch.mps.synchronize()
    return now()


class Deadline:
    """Ends a run at the last step after which its final evaluation and saves still fit,
    counted at the larger of planned and measured costs."""

    def __init__(self, at: float, plan: Plan, measured: Measured):
        self.at, self.plan, self.measured = at, plan, measured  # now() seconds

    def seconds_left(self) -> float:
        return self.at - now()

    def no_room_after(self, step: int, step_seconds: float) -> bool:
        """True when, after what step `step` still has to do (its evaluation and saves), one
        more step as long as it and the end would not fit: then `step` is the last."""
        plan, costs = self.plan, self.measured.costs(self.plan.costs)
        still = plan.evaluates(step) * (costs.evaluation + 2 * costs.save) + plan.saves(
            step) * costs.save * (2 if plan.average_last else 1)
        return still + step_seconds + final_seconds(costs, plan.average_last) > \
            self.seconds_left()

    def no_room_for_a_step(self, left: float) -> str | None:
        """Why not even one step fits in `left` seconds (a resumed run whose set-up took the
        time), or None."""
        costs = self.measured.costs(self.plan.costs)
        end = final_seconds(costs, self.plan.average_last)
        if costs.step + end <= left:
            return None
        return (f"only {format_duration(left)} of this invocation's --time-limit is left "
                f"after its set-up, and one step ({costs.step:.2f} s) and the end (a last "
                f"evaluation at {costs.evaluation:.1f} s, the saves and the average: "
                f"{end:.1f} s) need {format_duration(costs.step + end)}: nothing was trained, "
                f"and the checkpoint is as it was; resume with more time")
