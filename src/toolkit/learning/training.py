"""The training loop shared by every stage: same optimiser, schedule and bookkeeping."""

import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

import torch
from torch import nn
from tqdm import tqdm  # plain text, never the ipywidget: it must render offline (design §4)

from toolkit.batching.batches import Batch
from toolkit.objectives import TokenLoss
from toolkit.stage_api import restoring_mode

# objective(model, batch, generator, label_smoothing=...) -> TokenLoss; see toolkit.objectives
Objective = Callable[..., TokenLoss]
MAX_GRAD_NORM = 1.0  # gradients are clipped to this norm before every step
LOG_EVERY = 50  # read the loss off the device every this many steps, not every step


@dataclass
class History:
    """What a run leaves behind for loss curves and the ladder."""

    losses: list[float] = field(default_factory=list)
    learning_rates: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.losses)

    def final_loss(self, window: int = 50) -> float:
        """Average the last steps: one batch's loss is too noisy to compare runs."""
        tail = self.losses[-window:]
        return sum(tail) / len(tail) if tail else math.nan


SCHEDULES = ("warmup_then_decay", "decay_only", "constant")


def warmup_then_decay(step: int, warmup_steps: int, schedule: str = "warmup_then_decay") -> float:
    """The paper's schedule, as a factor of the peak rate: linear warm-up, then 1/sqrt(step).

    "decay_only" holds the peak until `warmup_steps`, then decays alike: it removes the
    warm-up alone. "constant" (or `warmup_steps=0`) removes both.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is not one of {', '.join(SCHEDULES)}")
    step = max(step, 1)
    if warmup_steps == 0 or schedule == "constant":
        return 1.0
    decay = math.sqrt(warmup_steps / step)
    return min(1.0 if schedule == "decay_only" else step / warmup_steps, decay)


class PaperOptimizer:
    """Adam, the paper's schedule, clipping and mixed precision: the one step every loop takes.

    `toolkit.learning.training.train` and `toolkit.train.ddp` both step through it, so the two loops
    cannot drift apart in what an optimiser step means.
    """

    def __init__(
        self, model: nn.Module, lr: float, warmup_steps: int,
        schedule: str = "warmup_then_decay", betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9, max_grad_norm: float = MAX_GRAD_NORM,
        autocast: torch.dtype | None = None,
    ):
        check_precision(model, autocast)
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        self.device_type = self.parameters[0].device.type
        self.autocast, self.max_grad_norm = autocast, max_grad_norm
        self.optimizer = torch.optim.Adam(self.parameters, lr=lr, betas=betas, eps=eps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: warmup_then_decay(step + 1, warmup_steps, schedule))
        # float16 gradients underflow to 0 unless the loss is scaled up first; bfloat16's do not.
        self.scaler = torch.amp.GradScaler(self.device_type, enabled=autocast == torch.float16)

    def forward_context(self) -> torch.autocast:
        """Where the forward pass and the loss run: in `autocast`'s precision, if one is set."""
        return torch.autocast(self.device_type, dtype=self.autocast,
                              enabled=self.autocast is not None)

    def step(self, loss: torch.Tensor) -> float:
        """Backpropagate, clip, update the weights and the rate; return the rate this step used."""
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(self.parameters, self.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        lr = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        return lr


def check_precision(model: nn.Module, autocast: torch.dtype | None) -> None:
    """Refuse half-precision weights: Adam's eps (1e-9) is 0 in float16, and steps turn to NaN."""
    halves = {p.dtype for p in model.parameters()} & {torch.float16, torch.bfloat16}
    if halves:
        raise TypeError(
            f"the model's parameters are {halves.pop()}: train float32 weights and compute in "
            f"half precision with train(..., autocast=torch.bfloat16) (or torch.float16), "
            f"which keeps a float32 copy for Adam; call model.float() first")
    if autocast not in (None, torch.float16, torch.bfloat16):
        raise ValueError(f"autocast={autocast} is not torch.float16, torch.bfloat16 or None")


def train(
    model: nn.Module,
    objective: Objective,
    batches: Iterator[Batch],
    steps: int,
    lr: float = 2e-3,
    warmup_steps: int = 100,
    device: torch.device | str = "cpu",
    seed: int = 0,
    max_grad_norm: float = MAX_GRAD_NORM,
    progress: TextIO | None = None,
    description: str = "training",
    label_smoothing: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
    schedule: str = "warmup_then_decay",
    autocast: torch.dtype | None = None,
) -> History:
    """Train for a budget in optimiser steps (not seconds), so runs compare across machines.

    The defaults are the paper's Adam (betas 0.9 and 0.98, eps 1e-9); `label_smoothing`
    (the paper uses 0.1) spreads that much of each target's probability over the vocabulary.
    `autocast` (torch.bfloat16 or torch.float16) runs the forward pass in half precision.
    """
    model.to(device).train()
    generator = torch.Generator().manual_seed(seed)
    optimizer = PaperOptimizer(model, lr, warmup_steps, schedule, betas, eps, max_grad_norm,
                               autocast)
    history = History()
    start = time.perf_counter()
    bar = tqdm(
        range(steps), desc=description, unit="step", file=progress or sys.stderr,
        mininterval=2.0, ascii=True, dynamic_ncols=False, ncols=90,
    )
    unread: list[torch.Tensor] = []  # losses still on the device: reading one waits for it
    for step in bar:
        batch = next(batches).to(device)
        with optimizer.forward_context():
            loss = objective(model, batch, generator, label_smoothing=label_smoothing).mean()
        history.learning_rates.append(optimizer.step(loss))
        unread.append(loss.detach())
        if len(unread) == LOG_EVERY or step == steps - 1:
            history.losses.extend(torch.stack(unread).float().tolist())
            unread.clear()
            bar.set_postfix(loss=f"{history.final_loss(20):.3f}", refresh=False)
    bar.close()
    history.seconds = time.perf_counter() - start
    return history


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, objective: Objective, batches: Iterable[Batch],
    device: torch.device | str = "cpu", seed: int = 0,
) -> float:
    """Loss per scored target on held-out batches, seeded so that runs compare."""
    generator = torch.Generator().manual_seed(seed)
    total, tokens = 0.0, 0
    with restoring_mode(model.to(device), training=False):
        for batch in batches:
            scored = objective(model, batch.to(device), generator)
            total, tokens = total + scored.total.item(), tokens + int(scored.tokens)
    if tokens == 0:
        raise ValueError("evaluate_loss got no batches (or no real targets): is the split empty?")
    return total / tokens
