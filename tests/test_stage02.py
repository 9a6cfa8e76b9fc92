"""Stage 02: batching changes nothing for equal lengths, and padding leaks into attention."""

import pytest
import torch

from stages import stage01_naive_attention as stage01
from stages import stage02_batching as stage
from toolkit.batching.batches import Batch
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

SRC_VOCAB, TGT_VOCAB = 20, 30


def make_model(seed: int = 0) -> stage.Transformer:
    torch.manual_seed(seed)
    return stage.Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=16)


SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 6, 8, 10, 11, EOS_ID]])  # (batch, src_len)
TGT = torch.tensor([[BOS_ID, 8, 11, 6], [BOS_ID, 9, 9, 12]])  # (batch, tgt_len), tgt_len != src_len


def test_an_equal_length_batch_gives_each_sentence_its_stage01_output():
    """Batching must not change the maths: same weights, same numbers, row by row."""
    model = make_model()
    single = stage01.Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=16)
    single.load_state_dict(model.state_dict())
    with torch.no_grad():
        batched = model(SRC, TGT)  # (batch, tgt_len, vocab)
        for row in range(SRC.size(0)):
            assert torch.allclose(batched[row], single(SRC[row], TGT[row]), atol=1e-5)
            assert torch.allclose(batched[row], model(SRC[row:row + 1], TGT[row:row + 1])[0],
                                  atol=1e-5)


def test_padding_leaks_into_a_short_sentence():
    """The documented problem: add a longer sentence and the short one's encoding changes."""
    model = make_model()
    short = torch.tensor([[4, 9, EOS_ID]])
    longer = torch.tensor([[4, 9, EOS_ID, PAD_ID, PAD_ID, PAD_ID],
                           [5, 6, 7, 8, 10, EOS_ID]])
    with torch.no_grad():
        alone = model.encode(short)[0]  # (3, embed_dim)
        in_batch = model.encode(longer)[0, :3]  # the same three real tokens
    assert not torch.allclose(alone, in_batch, atol=1e-3)
    attention = model.encoder_self_attn.attention  # (batch, src_len, src_len)
    assert attention[0, :3, 3:].sum() > 0.01  # real tokens put weight on <pad> keys


def test_the_loss_never_scores_a_padded_position():
    model = make_model()
    logits = []
    model.out_proj.register_forward_hook(lambda module, args, out: logits.append(out))
    tgt = torch.tensor([[BOS_ID, 8, 11, 6, 7, EOS_ID], [BOS_ID, 9, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
    for seed in range(10):
        logits.clear()
        loss = stage.objective(model, Batch(SRC, tgt), torch.Generator().manual_seed(seed)).mean()
        logits[0].retain_grad()
        loss.backward()
        scored = logits[0].grad.abs().sum(dim=-1) > 0  # (batch, prefix_len)
        fed = model.decoder_self_attn.attention.shape[-1]
        assert scored.sum(dim=1).tolist() == [1, 1]  # one scored position per sentence
        assert not scored[1, 2:fed].any()  # never where sentence 2 is only padding


@pytest.mark.parametrize(("src", "message"), [
    (SRC[0], r"src must have shape \(batch, len\)"),
    (torch.tensor([[4, SRC_VOCAB]]), r"src holds ids outside 0..19"),
])
def test_bad_input_gets_a_message_that_says_what_to_fix(src, message):
    with pytest.raises(ValueError, match=message):
        make_model()(src, TGT[:1])
