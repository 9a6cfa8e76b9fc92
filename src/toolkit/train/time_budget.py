"""Train for the time you have: `--time-limit` turned into a plan of steps, and a clock that
ends the run in time if the machine turns out slower than planned.

Before the first step, one evaluation and one save are timed, and the run's model trains a
few of the run's own batches with an optimiser of its own; then its weights and every
random stream are put back as they were (`untouched`), so probing changes nothing that
follows. The plan follows from those times: how many steps fit, the warm-up at the
recipe's share of them, the evaluations and the saves to average spread over them. It is
written into every checkpoint, so a resumed run keeps it, and a run of the same plan given
as options (`Plan.options`) takes bit for bit the same steps.

If the machine slows down (another program, a laptop on battery), the clock
(`Deadline`) ends the run at the last step after which the final evaluation, save and
average still fit: fewer steps than planned, every file written, and the log says so.
"""

import argparse
import copy
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
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
    """"12 min 05 s" for the log: a limit is read in minutes."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@dataclass(frozen=True)
class Costs:
    """What the probe measured, in seconds, each already stretched by SAFETY."""

    step: float
    evaluation: float
    save: float


@dataclass(frozen=True)
class Plan:
    """The steps a time limit buys, and the options that train exactly them."""

    steps: int
    warmup_steps: int
    eval_every: int
    save_every: int
    average_last: int
    costs: Costs

    def options(self) -> list[str]:
        """The same run without --time-limit: these options take the same steps, bit for bit."""
        return ["--steps", str(self.steps), "--warmup-steps", str(self.warmup_steps),
                "--eval-every", str(self.eval_every), "--save-every", str(self.save_every),
                "--average-last", str(self.average_last)]

    def saved(self) -> dict:
        """Plain values for last.pt, which loads with weights_only=True."""
        return asdict(self)

    @classmethod
    def from_saved(cls, saved: dict) -> "Plan":
        """The plan a checkpoint holds, for a resumed run to keep."""
        return cls(**{**saved, "costs": Costs(**saved["costs"])})


def final_seconds(costs: Costs, average_last: int) -> float:
    """What a run needs after its last step: one evaluation, last.pt, best.pt, the kept
    step-N.pt, and averaging (about one load per kept file, counted as a save)."""
    return costs.evaluation + (3 + 2 * average_last) * costs.save


def plan_steps(seconds_left: float, costs: Costs, args: argparse.Namespace,
               warmup_share: float) -> Plan:
    """The most steps whose training, evaluations and saves fit in `seconds_left`.

    The options the user gave (--warmup-steps, --eval-every, --save-every) are kept; the
    others are planned: EVALUATIONS evaluations, the warm-up at the recipe's `warmup_share`
    of the steps, and saves every `AVERAGED_SHARE / average_last` of them, so that the kept
    checkpoints cover the last tenth.
    """
    average_last = args.average_last
    available = seconds_left - final_seconds(costs, average_last)
    # Costs along the way: those the plan fixes in number, and those that come every so
    # many steps when the user gave --eval-every or --save-every.
    fixed, per_step = 0.0, costs.step
    evaluation = costs.evaluation + 2 * costs.save  # then last.pt, and best.pt if it is
    if args.eval_every is None:
        fixed += (EVALUATIONS - 1) * evaluation  # the last one is in final_seconds
    else:
        per_step += evaluation / args.eval_every
    saves = 2 if average_last else 1  # step-N.pt beside last.pt
    if average_last and args.save_every is None:
        fixed += average_last / AVERAGED_SHARE * saves * costs.save
    elif args.save_every is not None:
        per_step += saves * costs.save / args.save_every
    steps = math.floor((available - fixed) / per_step)
    if steps < 1:
        raise ValueError(
            f"--time-limit {format_duration(seconds_left)} left leaves no time to train: one "
            f"step takes about {costs.step:.2f} s, one evaluation {costs.evaluation:.1f} s, and "
            f"the end (a last evaluation, the saves and the average) "
            f"{final_seconds(costs, average_last):.1f} s: give more time, or fewer "
            f"--eval-sentences")
    # At least one warm-up step where the recipe warms up: 0 would mean no decay either.
    warmup = (args.warmup_steps if args.warmup_steps is not None
              else max(int(warmup_share > 0), round(warmup_share * steps)))
    eval_every = args.eval_every or max(1, math.ceil(steps / EVALUATIONS))
    if args.save_every is not None:
        save_every = args.save_every
    elif average_last:
        save_every = max(1, math.ceil(AVERAGED_SHARE * steps / average_last))
    else:
        save_every = eval_every
    return Plan(steps, warmup, eval_every, save_every, average_last, costs)


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
    start = time.perf_counter()
    draw_chart()
    evaluation = loss_seconds + translating + time.perf_counter() - start
    for step in range(1, PROBE_WARMUP + 1):
        train_step(step)
    start = clock(world)
    for step in range(PROBE_WARMUP + 1, PROBE_WARMUP + PROBE_STEPS + 1):
        train_step(step)
    step_seconds = (clock(world) - start) / PROBE_STEPS
    path = folder / f".probe-{world.rank}.pt"
    start = time.perf_counter()
    save_checkpoint(path, model, data.src_vocab, data.tgt_vocab,
                    {"optimizer": optimizer_state(optimizer)})
    save = time.perf_counter() - start
    path.unlink()
    slowest = np.max(np.array(world.gather([step_seconds, evaluation, save])), axis=0)
    return Costs(*(float(value) * SAFETY for value in slowest))


def clock(world: World) -> float:
    """The time once the device has finished what it was given."""
    if world.device.type == "cuda":
        torch.cuda.synchronize(world.device)
    return time.perf_counter()


class Deadline:
    """Ends a run at the last step after which its final evaluation and saves still fit."""

    def __init__(self, at: float, plan: Plan):
        self.at, self.plan = at, plan  # perf_counter() seconds
        self.final = final_seconds(plan.costs, plan.average_last)

    def no_room_after(self, step: int, step_seconds: float) -> bool:
        """True when, after what step `step` still has to do (its evaluation and saves), one
        more step as long as it and the end would not fit: then `step` is the last."""
        costs, plan = self.plan.costs, self.plan
        evaluated, scheduled = step % plan.eval_every == 0, step % plan.save_every == 0
        still = evaluated * (costs.evaluation + 2 * costs.save) + scheduled * costs.save * (
            2 if plan.average_last else 1)
        return time.perf_counter() + still + step_seconds + self.final > self.at
