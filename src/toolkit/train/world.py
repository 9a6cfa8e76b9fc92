"""The processes that train one model together, and the few messages they exchange.

One process alone is a world of size one, where every exchange returns its own value, so
the training loop (`toolkit.train.training_run`) is the same code with or without torchrun.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


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
