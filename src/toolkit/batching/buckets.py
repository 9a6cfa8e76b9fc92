"""Batches by token budget: pairs of similar length together, so little of a batch is padding.

The paper "batched together by approximate sequence length", about 25,000 source and
25,000 target tokens per batch. A batch of random pairs is as long as its longest pair, and
on real text with its long tail of lengths much of it is padding: compute spent on nothing.

`TokenBudgetSampler` sorts the pairs by length (ties in a seeded random order), cuts the
sorted list into batches whose padded source plus target tokens stay within `max_tokens`,
and shuffles the order of the batches, again by seed and epoch. Every pair is used exactly
once per epoch; a pair longer than the budget on its own gets a batch to itself, never
dropped.
"""

from collections.abc import Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler


def pair_lengths(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> np.ndarray:
    """The encoded source and target length of each pair."""
    return np.array([(len(src), len(tgt)) for src, tgt in pairs], dtype=np.int64)  # (pairs, 2)


class TokenBudgetSampler(Sampler[list[int]]):
    """Yield lists of pair indices, a batch each; the same seed and epoch give the same batches."""

    def __init__(
        self, lengths: np.ndarray, max_tokens: int, seed: int = 0, shuffle: bool = True
    ):
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens}")
        self.lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)  # (pairs, 2): src, tgt
        self.max_tokens, self.seed, self.shuffle = max_tokens, seed, shuffle
        self.epoch = 0
        # The sorted sequence of lengths is the same whatever order ties take, so the cuts
        # between batches are too: find them once.
        self.cuts = _cuts(self.lengths[_by_length(self.lengths)],
                          max_tokens)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch the next iteration draws, as DistributedSampler does (for resuming)."""
        self.epoch = epoch

    def batches(self, epoch: int) -> list[np.ndarray]:
        """The batches of one epoch, as arrays of pair indices."""
        if len(self.lengths) == 0:
            return []
        rng = np.random.default_rng([self.seed, epoch])  # one independent stream per epoch
        order = np.arange(len(self.lengths))
        if self.shuffle:
            order = rng.permutation(order)
        batches = np.split(order[_by_length(self.lengths[order])], self.cuts)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        self.epoch += 1  # the next pass through the data is the next epoch
        for batch in self.batches(epoch):
            yield batch.tolist()

    def __len__(self) -> int:
        return len(self.cuts) + 1 if len(self.lengths) else 0


def _by_length(lengths: np.ndarray) -> np.ndarray:
    """Positions that sort `lengths` by source, then target length, keeping ties in order."""
    return np.lexsort((np.arange(len(lengths)), lengths[:, 1], lengths[:, 0]))


def _cuts(sorted_lengths: np.ndarray, max_tokens: int) -> list[int]:
    """Where to cut the sorted pairs so each batch's padded tokens stay within the budget."""
    cuts, start, longest_src, longest_tgt = [], 0, 0, 0
    for position, (src_len, tgt_len) in enumerate(sorted_lengths.tolist()):
        longest_src, longest_tgt = max(longest_src, src_len), max(longest_tgt, tgt_len)
        if (position - start + 1) * (longest_src + longest_tgt) > max_tokens and position > start:
            cuts.append(position)  # this pair starts the next batch
            start, longest_src, longest_tgt = position, src_len, tgt_len
    return cuts
