"""Token-budget batches must use every pair once, keep to the budget and repeat by seed."""

import numpy as np
import pytest
import torch

from toolkit.batching.batches import Batch, loader, padding_fraction
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

FIRST_ID = 4  # pair i's tokens are all FIRST_ID + i, so a batch says which pairs it holds


def make_pairs(
    src_words: np.ndarray, tgt_words: np.ndarray, first: int = 0
) -> list[tuple[list[int], list[int]]]:
    """Framed as encode_pairs frames them; each token is its pair's number, counted from `first`."""
    return [([FIRST_ID + i] * s + [EOS_ID], [BOS_ID] + [FIRST_ID + i] * t + [EOS_ID])
            for i, (s, t) in enumerate(zip(src_words.tolist(), tgt_words.tolist(), strict=True),
                                       start=first)]


def realistic_pairs(count: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Caption-like lengths: about 12 words, a long tail, targets about 10% longer than sources."""
    rng = np.random.default_rng(seed)
    src_words = np.clip(np.rint(rng.lognormal(np.log(12), 0.45, count)), 1, None)
    tgt_words = np.clip(np.rint(src_words * 1.1 + rng.normal(0, 1.5, count)), 1, None)
    return make_pairs(src_words.astype(int), tgt_words.astype(int))


def pair_ids(batch: Batch) -> list[int]:
    return (batch.src[:, 0] - FIRST_ID).tolist()


def epoch(data) -> list[list[int]]:
    """One pass through a loader, as the pair indices of each batch."""
    return [pair_ids(batch) for batch in data]


PAIRS = realistic_pairs(600)
BUDGET = 400


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_pair_is_used_once_per_epoch(shuffle):
    data = loader(PAIRS, max_tokens=BUDGET, seed=3, shuffle=shuffle)
    for _ in range(3):
        used = sorted(index for batch in epoch(data) for index in batch)
        assert used == list(range(len(PAIRS)))


def test_every_batch_keeps_to_the_budget_unless_one_pair_alone_exceeds_it():
    """Padded source plus target tokens, <bos>, <eos> and padding included, are what costs."""
    too_long = make_pairs(np.array([300, 3, 450]), np.array([320, 500, 2]), first=len(PAIRS))
    pairs = PAIRS + too_long
    oversized = {len(PAIRS), len(PAIRS) + 1, len(PAIRS) + 2}
    for shuffle in (True, False):
        alone = set()
        for batch in loader(pairs, max_tokens=BUDGET, seed=1, shuffle=shuffle):
            cost = batch.src.size(0) * (batch.src.size(1) + batch.tgt.size(1))
            ids = pair_ids(batch)
            if cost > BUDGET:
                assert len(ids) == 1 and ids[0] in oversized, (ids, cost)
            if oversized.intersection(ids):
                assert len(ids) == 1, ids  # an oversized pair never drags others over too
                alone.update(ids)
        assert alone == oversized  # none dropped


def test_batches_are_filled_close_to_the_budget():
    """A batch of one pair each would keep to any budget and waste most of it."""
    data = loader(PAIRS, max_tokens=BUDGET, seed=0)
    costs = [batch.src.size(0) * (batch.src.size(1) + batch.tgt.size(1)) for batch in data]
    assert sum(costs) / (len(costs) * BUDGET) > 0.85


def test_the_same_seed_gives_the_same_batches_every_epoch():
    first, again = (loader(PAIRS, max_tokens=BUDGET, seed=7) for _ in range(2))
    epochs = [epoch(first) for _ in range(3)]
    assert [epoch(again) for _ in range(3)] == epochs
    assert epochs[0] != epochs[1] != epochs[2]  # a new order each epoch
    assert epoch(loader(PAIRS, max_tokens=BUDGET, seed=8)) != epochs[0]


def test_pairs_of_equal_length_meet_different_partners_each_epoch():
    """Ties are shuffled too, so a batch is not the same group of pairs every epoch."""
    data = loader(PAIRS, max_tokens=BUDGET, seed=7)
    groups = [{frozenset(batch) for batch in epoch(data)} for _ in range(2)]
    assert groups[0] != groups[1]


def test_set_epoch_reproduces_that_epoch_for_resuming():
    data = loader(PAIRS, max_tokens=BUDGET, seed=7)
    epochs = [epoch(data) for _ in range(4)]
    resumed = loader(PAIRS, max_tokens=BUDGET, seed=7)
    resumed.batch_sampler.set_epoch(2)
    assert [epoch(resumed), epoch(resumed)] == epochs[2:]
    resumed.batch_sampler.set_epoch(0)
    assert epoch(resumed) == epochs[0]


def test_without_shuffle_every_epoch_is_the_same_length_sorted_order():
    data = loader(PAIRS, max_tokens=BUDGET, seed=7, shuffle=False)
    first = epoch(data)
    assert epoch(data) == first
    lengths = [(len(PAIRS[i][0]), len(PAIRS[i][1])) for batch in first for i in batch]
    assert lengths == sorted(lengths)


@pytest.mark.parametrize("budget", [1, 60, BUDGET, 10**6])
@pytest.mark.parametrize("shuffle", [True, False])
def test_len_is_the_number_of_batches_yielded(budget, shuffle):
    data = loader(PAIRS[:200], max_tokens=budget, seed=2, shuffle=shuffle)
    for _ in range(2):
        assert len(data) == len(epoch(data))


def test_budget_batches_waste_far_less_on_padding_than_random_batches_of_the_same_size():
    pairs = realistic_pairs(2000, seed=1)
    budgeted = loader(pairs, max_tokens=1000, seed=0)
    rows_per_batch = round(len(pairs) / len(budgeted))
    random_padding = padding_fraction(loader(pairs, batch_size=rows_per_batch, seed=0))
    assert random_padding > 0.3  # the long tail makes random batches wasteful
    assert padding_fraction(budgeted) < random_padding / 4


def test_padding_fraction_counts_pad_positions_over_all_positions():
    a, b, c = FIRST_ID, FIRST_ID + 1, FIRST_ID + 2
    small = Batch(torch.tensor([[a, b, EOS_ID], [a, EOS_ID, PAD_ID]]),  # (2, 3): 1 pad
                  torch.tensor([[BOS_ID, a, EOS_ID, PAD_ID], [BOS_ID, b, c, EOS_ID]]))  # 1 pad
    full = Batch(torch.full((2, 10), a), torch.full((2, 11), b))  # 42 positions, no padding
    assert padding_fraction([small]) == pytest.approx(2 / 14)
    assert padding_fraction([small, full]) == pytest.approx(2 / 56)  # not the mean of shares
    with pytest.raises(ValueError, match="no batches"):
        padding_fraction([])


@pytest.mark.parametrize("options", [{"batch_size": 8, "max_tokens": 100}, {},
                                     {"max_tokens": 0}, {"max_tokens": -5}])
def test_loader_refuses_ambiguous_or_impossible_batch_sizes(options):
    with pytest.raises(ValueError):
        loader(PAIRS, **options)
