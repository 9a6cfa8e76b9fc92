"""Training loss and speed as a run measures them, leaving out evaluation and saving."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch


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
