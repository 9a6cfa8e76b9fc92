"""Which pairs each optimiser step trains on, worked out from the step number alone.

A long run must be able to stop anywhere and go on as if it never had. A DataLoader's
position lives inside its iterator, which no checkpoint can hold; here the pairs of step s
follow from the seed and s, so the step count *is* the data position.

Every process of a run computes the same plan, and each step's batch is shared out: process
r of N takes every N-th pair from the r-th on. With `batch_size` B per process, the batches
are those DistributedSampler and a DataLoader would give (one seeded permutation per epoch,
the incomplete last batch dropped), so N processes of B pairs see what one process of N x B
sees. With `max_tokens`, each step is one token-budget batch of N x max_tokens positions
(toolkit.batching.buckets), with at least one pair per process.
"""

from collections.abc import Sequence

import torch

from toolkit.batching.batches import Batch, EncodedPair, collate
from toolkit.batching.buckets import TokenBudgetSampler, pair_lengths


class BatchPlan:
    """The batches of every epoch, by seed: step s of a run always gets the same pairs."""

    def __init__(
        self, pairs: Sequence[EncodedPair], batch_size: int | None = None,
        max_tokens: int | None = None, seed: int = 0, world_size: int = 1,
    ):
        if (batch_size is None) == (max_tokens is None):
            raise ValueError("give either batch_size (pairs per process) or max_tokens "
                             "(tokens per process), not both and not neither")
        if len(pairs) < world_size:
            raise ValueError(f"{len(pairs)} training pairs cannot give each of {world_size} "
                             f"processes one: use fewer processes")
        self.pairs, self.batch_size, self.seed = pairs, batch_size, seed
        self.world_size = world_size
        self.budget = None
        if max_tokens is not None:
            self.budget = TokenBudgetSampler(pair_lengths(pairs), max_tokens * world_size, seed)
            self.budget.cuts = merge_small_batches(self.budget.cuts, len(pairs), world_size)
            self.steps_per_epoch = len(self.budget)
        else:
            self.steps_per_epoch = len(pairs) // (batch_size * world_size)
        if self.steps_per_epoch == 0:
            size = f"{batch_size} pairs" if batch_size else f"{max_tokens} tokens"
            raise ValueError(f"{len(pairs)} training pairs do not fill one step of {size} for "
                             f"each of {world_size} process(es): use a smaller batch")
        self._epoch, self._batches = -1, []

    def indices(self, step: int) -> list[int]:
        """The pairs of step `step` (counted from 0) for all processes together."""
        epoch, index = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, self._epoch_batches(epoch)
        return self._batches[index]

    def batch(self, step: int, rank: int = 0) -> Batch:
        """Process `rank`'s share of step `step`, padded."""
        return collate([self.pairs[i] for i in self.indices(step)[rank :: self.world_size]])

    def epoch_of(self, step: int) -> int:
        return step // self.steps_per_epoch

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        if self.budget is not None:
            return [batch.tolist() for batch in self.budget.batches(epoch)]
        # DistributedSampler's permutation: seeded by seed + epoch.
        order = torch.randperm(len(self.pairs),
                               generator=torch.Generator().manual_seed(self.seed + epoch))
        size = self.batch_size * self.world_size
        return [order[i * size : (i + 1) * size].tolist() for i in range(self.steps_per_epoch)]


def merge_small_batches(cuts: list[int], count: int, min_pairs: int) -> list[int]:
    """Drop the cuts that would leave a batch of fewer than `min_pairs` sorted pairs (one per
    process): such a batch joins the next one, or the one before it at the end."""
    kept, start = [], 0
    for cut in cuts:
        if cut - start >= min_pairs:
            kept.append(cut)
            start = cut
    if kept and count - kept[-1] < min_pairs:
        kept.pop()
    return kept
