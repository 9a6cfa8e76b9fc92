"""The batch plan: each step's pairs follow from the step alone; processes share them out
without overlap; fixed-size batches are DistributedSampler's; budgets use every pair."""

import pytest
import torch
from torch.utils.data import DistributedSampler

from toolkit.text.vocab import PAD_ID
from toolkit.train.batch_plan import BatchPlan


def pairs_of_lengths(count: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    lengths = torch.Generator().manual_seed(seed)
    sizes = torch.randint(2, 30, (count, 2), generator=lengths).tolist()
    return [([7] * s, [8] * t) for s, t in sizes]


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_fixed_batches_are_what_distributed_sampler_gives_each_process(world_size):
    pairs, batch_size, seed = pairs_of_lengths(53), 4, 5
    plan = BatchPlan(pairs, batch_size=batch_size, seed=seed, world_size=world_size)
    for epoch in range(3):
        for rank in range(world_size):
            sampler = DistributedSampler(range(len(pairs)), num_replicas=world_size, rank=rank,
                                         shuffle=True, seed=seed, drop_last=True)
            sampler.set_epoch(epoch)
            shard = list(sampler)
            for index in range(plan.steps_per_epoch):
                step = epoch * plan.steps_per_epoch + index
                assert plan.indices(step)[rank::world_size] == \
                    shard[index * batch_size: (index + 1) * batch_size]


@pytest.mark.parametrize("world_size", [1, 2])
def test_token_budget_steps_use_every_pair_once_per_epoch_and_fit_the_budget(world_size):
    pairs, max_tokens = pairs_of_lengths(300), 200
    plan = BatchPlan(pairs, max_tokens=max_tokens, seed=3, world_size=world_size)
    for epoch in range(2):
        steps = range(epoch * plan.steps_per_epoch, (epoch + 1) * plan.steps_per_epoch)
        used = sorted(i for step in steps for i in plan.indices(step))
        assert used == list(range(len(pairs)))
        for step in steps:
            indices = plan.indices(step)
            # The step's pairs, padded together, fit the processes' budgets together; only a
            # batch held at its minimum of one pair per process (or a tail joined to it) may not.
            longest = [max(len(pairs[i][side]) for i in indices) for side in (0, 1)]
            assert len(indices) * sum(longest) <= world_size * max_tokens or \
                len(indices) < 2 * world_size
            shards = [plan.batch(step, rank) for rank in range(world_size)]
            assert all(batch.src.size(0) >= 1 for batch in shards)  # every process gets pairs
            real = sum(int((b.src != PAD_ID).sum() + (b.tgt != PAD_ID).sum()) for b in shards)
            assert real == sum(len(pairs[i][0]) + len(pairs[i][1])
                               for i in plan.indices(step))


def test_a_step_gets_the_same_pairs_whatever_came_before_it():
    """The data position is the step count: a fresh plan asked for step 57 agrees."""
    pairs = pairs_of_lengths(100)
    walked = BatchPlan(pairs, batch_size=8, seed=1)
    seen = [walked.indices(step) for step in range(60)]
    assert BatchPlan(pairs, batch_size=8, seed=1).indices(57) == seen[57]
    assert seen[0] != seen[walked.steps_per_epoch]  # a new epoch is a new shuffle


def test_a_plan_that_cannot_fill_one_step_says_so():
    with pytest.raises(ValueError, match="do not fill one step of 11 pairs for each of 2"):
        BatchPlan(pairs_of_lengths(20), batch_size=11, world_size=2)
    with pytest.raises(ValueError, match="either batch_size"):
        BatchPlan(pairs_of_lengths(20))


@pytest.mark.parametrize("count", [9, 10, 11])  # the sorted tail is 1, 2 or 3 pairs short
def test_every_process_gets_a_pair_even_from_a_pair_over_the_budget_or_a_short_tail(count):
    """A batch of one pair would leave a process with nothing to train on."""
    # Short pairs, three each over a process's budget alone, and one far over.
    pairs = [([7] * 3, [8] * 3)] * (count - 4) + [([7] * n, [8] * n) for n in (10, 11, 12, 90)]
    plan = BatchPlan(pairs, max_tokens=12, world_size=2)  # two short pairs per process
    sizes = [len(plan.indices(step)) for step in range(plan.steps_per_epoch)]
    assert min(sizes) >= 2 and sum(sizes) == count
