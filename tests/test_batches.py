"""Padding must never cut a real token, and batches must come in the same order every run."""

import gc

import pytest
import torch

from toolkit.batching.batches import (
    collate,
    encode_pairs,
    encode_source,
    encode_target,
    endless,
    loader,
)
from toolkit.checkers import properties
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

VOCAB = Vocab("a b c d e f g".split())


def test_longest_target_keeps_every_word_bos_and_eos():
    """Pad length must be computed after <bos>/<eos> are added (classic bug 3)."""
    sentences = [["a"], ["a", "b", "c", "d", "e"], ["f", "g"]]
    pairs = [(encode_source(["a"], VOCAB), encode_target(s, VOCAB)) for s in sentences]
    targets = [target for _, target in pairs]
    for target, sentence in zip(targets, sentences, strict=True):
        problem = properties.framing_problem(target, sentence, VOCAB)
        assert problem is None, problem
    batch = collate(pairs).tgt  # (batch, longest): the path every training batch takes
    problem = properties.padded_batch_problem(batch, targets)
    assert problem is None, problem
    assert batch.shape == (3, 5 + 2)


def test_sources_end_with_eos_and_pad_on_the_right():
    batch = collate([
        (encode_source(["a", "b", "c"], VOCAB), encode_target(["d"], VOCAB)),
        (encode_source(["e"], VOCAB), encode_target(["f", "g", "a"], VOCAB)),
    ])
    assert batch.src.tolist() == [VOCAB.encode(["a", "b", "c"]) + [EOS_ID],
                                  VOCAB.encode(["e"]) + [EOS_ID, PAD_ID, PAD_ID]]
    assert batch.tgt[0].tolist() == [BOS_ID, *VOCAB.encode(["d"]), EOS_ID, PAD_ID, PAD_ID]
    assert batch.src.dtype == batch.tgt.dtype == torch.long


def test_empty_sentences_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="empty sentence"):
        encode_source([], VOCAB)
    with pytest.raises(ValueError, match="empty sentence"):
        encode_target([], VOCAB)


@pytest.mark.parametrize("collector_on", [True, False])
def test_encoding_leaves_the_garbage_collector_as_it_found_it(collector_on):
    """encode_pairs pauses the collector for speed; a session left without it would leak."""
    row = {"translation": {"en": "a b", "de": "c"}}
    empty = {"translation": {"en": "a", "de": " "}}
    was_enabled = gc.isenabled()
    (gc.enable if collector_on else gc.disable)()
    try:
        assert encode_pairs([row], VOCAB, VOCAB) == [(encode_source(["a", "b"], VOCAB),
                                                      encode_target(["c"], VOCAB))]
        assert gc.isenabled() == collector_on
        with pytest.raises(ValueError, match="empty sentence"):
            encode_pairs([row, empty], VOCAB, VOCAB)
        assert gc.isenabled() == collector_on
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_loader_order_is_seeded_and_covers_every_pair():
    pairs = [([i + 4, EOS_ID], [BOS_ID, i + 4, EOS_ID]) for i in range(7)]
    first = [b.src[:, 0].tolist() for b in loader(pairs, batch_size=3, seed=5)]
    again = [b.src[:, 0].tolist() for b in loader(pairs, batch_size=3, seed=5)]
    other = [b.src[:, 0].tolist() for b in loader(pairs, batch_size=3, seed=6)]
    assert first == again and first != other
    assert sorted(sum(first, [])) == [i + 4 for i in range(7)]


def test_endless_runs_past_one_epoch():
    pairs = [([4, EOS_ID], [BOS_ID, 4, EOS_ID])] * 3
    stream = endless(loader(pairs, batch_size=2))
    assert sum(next(stream).src.size(0) for _ in range(5)) == 2 + 1 + 2 + 1 + 2


@pytest.mark.timeout(10)  # the bug this guards against is a loop that never yields
@pytest.mark.parametrize("options", [{"batch_size": 2, "shuffle": False}, {"batch_size": 2},
                                     {"max_tokens": 100}])
def test_a_loader_over_no_pairs_says_the_split_is_empty(options):
    """Not torch's "num_samples should be a positive integer" from inside RandomSampler."""
    with pytest.raises(ValueError, match="no pairs to make batches of: the split is empty"):
        loader([], **options)


def test_endless_over_no_batches_says_so_instead_of_looping_forever():
    with pytest.raises(ValueError, match="no batches to train on"):
        next(endless([]))
