"""What each objective lets a model learn from, and what it must never show it."""

import pytest
import torch
import torch.nn.functional as F
from spies import Spy

from toolkit.batching.batches import Batch
from toolkit.checkers import properties
from toolkit.objectives import last_position, sequence_loss, teacher_forcing
from toolkit.stage_api import forward_batch
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

TGT = torch.tensor([
    [BOS_ID, 5, 6, 7, 8, EOS_ID],
    [BOS_ID, 9, EOS_ID, PAD_ID, PAD_ID, PAD_ID],
    [BOS_ID, 10, 11, EOS_ID, PAD_ID, PAD_ID],
])
SRC = torch.tensor([[4, 5, EOS_ID], [6, EOS_ID, PAD_ID], [7, 8, EOS_ID]])
BATCH = Batch(SRC, TGT)


def test_sequence_loss_is_cross_entropy_of_raw_logits_over_real_tokens():
    """A softmax before cross_entropy (classic bug 9) changes this number."""
    torch.manual_seed(0)
    logits = torch.randn(3, 6, 12) * 3
    expected = -torch.stack([
        F.log_softmax(logits[b, t], dim=-1)[TGT[b, t]]
        for b in range(3) for t in range(6) if TGT[b, t] != PAD_ID
    ]).mean()
    assert torch.allclose(sequence_loss(logits, TGT), expected)


def test_sequence_loss_averages_raw_logits_over_real_targets_only():
    problem = properties.loss_problem(sequence_loss)
    assert problem is None, problem


def test_sequence_loss_ignores_pad_positions():
    torch.manual_seed(1)
    logits = torch.randn(3, 6, 12)
    changed = logits.clone()
    changed[TGT == PAD_ID] = torch.randn(int((TGT == PAD_ID).sum()), 12) * 50
    assert torch.equal(sequence_loss(logits, TGT), sequence_loss(changed, TGT))


@pytest.mark.parametrize("seed", range(5))
def test_last_position_never_shows_the_token_it_scores(seed):
    model = Spy()
    loss = last_position(model, BATCH, torch.Generator().manual_seed(seed)).mean()
    loss.backward()
    (_, prefix), = model.calls
    scored = model.logits.grad.abs().sum(-1) > 0  # (batch, max_n)
    for row in range(TGT.size(0)):
        n = int((prefix[row] != PAD_ID).sum())
        assert 1 <= n < int((TGT[row] != PAD_ID).sum())
        ids = [i for i in TGT[row].tolist() if i != PAD_ID]
        problem = properties.next_token_problem((prefix[row, :n].tolist(), ids[n]), ids, n)
        assert problem is None, problem  # the true prefix, nothing more
        assert scored[row].nonzero().flatten().tolist() == [n - 1]  # only its last position


def test_last_position_visits_every_prefix_length():
    seen = set()
    for seed in range(60):
        model = Spy()
        last_position(model, BATCH, torch.Generator().manual_seed(seed))
        seen.add(int((model.calls[0][1][0] != PAD_ID).sum()))
    assert seen == {1, 2, 3, 4, 5}  # row 0 has <bos> + 4 words + <eos>


def test_teacher_forcing_scores_every_real_next_token():
    model = Spy()
    teacher_forcing(model, BATCH).mean().backward()
    (_, fed), = model.calls
    assert torch.equal(fed, TGT[:, :-1])
    scored = model.logits.grad.abs().sum(-1) > 0
    assert torch.equal(scored, TGT[:, 1:] != PAD_ID)


def test_unbatched_stages_get_one_unpadded_sentence_at_a_time():
    model = Spy(accepts_batches=False)
    logits = forward_batch(model, SRC, TGT)
    assert logits.shape == (3, 6, 12)
    for (src, tgt), src_row, tgt_row in zip(model.calls, SRC, TGT, strict=True):
        assert src.dim() == tgt.dim() == 1
        assert torch.equal(src, src_row[src_row != PAD_ID])
        assert torch.equal(tgt, tgt_row[tgt_row != PAD_ID])
    assert torch.all(logits[1, 3:] == 0)  # padded positions carry no logits


@pytest.mark.parametrize("objective", [last_position, teacher_forcing])
def test_label_smoothing_reaches_the_loss(objective):
    """The paper's label smoothing: the same logits, a loss with smoothed targets."""
    model = Spy(vocab_size=12)
    losses = {}
    for smoothing in (0.0, 0.1):
        torch.manual_seed(0)  # the spy draws the same logits both times
        losses[smoothing] = objective(model, BATCH, torch.Generator().manual_seed(0),
                                      label_smoothing=smoothing).mean()
    assert not torch.allclose(losses[0.0], losses[0.1])
    if objective is teacher_forcing:
        expected = F.cross_entropy(model.logits.reshape(-1, 12), TGT[:, 1:].reshape(-1),
                                   ignore_index=PAD_ID, label_smoothing=0.1)
        assert torch.allclose(losses[0.1], expected)
