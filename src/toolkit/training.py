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

from toolkit.batches import Batch

# objective(model, batch, generator, label_smoothing=...) -> loss; see toolkit.objectives
Objective = Callable[..., torch.Tensor]


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


def train(
    model: nn.Module,
    objective: Objective,
    batches: Iterator[Batch],
    steps: int,
    lr: float = 2e-3,
    warmup_steps: int = 100,
    device: torch.device | str = "cpu",
    seed: int = 0,
    max_grad_norm: float = 1.0,
    progress: TextIO | None = None,
    description: str = "training",
    label_smoothing: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
    schedule: str = "warmup_then_decay",
) -> History:
    """Train for a budget in optimiser steps (not seconds), so runs compare across machines.

    The defaults are the paper's Adam (betas 0.9 and 0.98, eps 1e-9); `label_smoothing`
    (the paper uses 0.1) spreads that much of each target's probability over the vocabulary.
    """
    model.to(device).train()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_then_decay(step + 1, warmup_steps, schedule)
    )
    history = History()
    start = time.perf_counter()
    bar = tqdm(
        range(steps), desc=description, unit="step", file=progress or sys.stderr,
        mininterval=2.0, ascii=True, dynamic_ncols=False, ncols=90,
    )
    for _ in bar:
        batch = next(batches).to(device)
        loss = objective(model, batch, generator, label_smoothing=label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        history.learning_rates.append(scheduler.get_last_lr()[0])
        scheduler.step()
        history.losses.append(loss.item())
        bar.set_postfix(loss=f"{history.final_loss(20):.3f}", refresh=False)
    bar.close()
    history.seconds = time.perf_counter() - start
    return history


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, objective: Objective, batches: Iterable[Batch],
    device: torch.device | str = "cpu", seed: int = 0,
) -> float:
    """Average loss on held-out batches, with a fixed seed so it is comparable between runs."""
    was_training = model.training
    model.to(device).eval()
    generator = torch.Generator().manual_seed(seed)
    losses = [objective(model, batch.to(device), generator).item() for batch in batches]
    model.train(was_training)
    return sum(losses) / len(losses)
