"""Stage 03: padding is invisible, the future is hidden, and nothing turns into NaN."""

import torch

from stages import stage03_masking as stage
from toolkit.batching.batches import Batch
from toolkit.checkers import properties
from toolkit.objectives import teacher_forcing
from toolkit.search.decoding import greedy_decode
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

SRC_VOCAB, TGT_VOCAB = 20, 30
# Two sentences of unequal length with real padding; src_len != tgt_len.
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])
REAL_TGT = TGT != PAD_ID  # (batch, tgt_len)


def make_model(seed: int = 0) -> stage.Transformer:
    torch.manual_seed(seed)
    return stage.Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=16).eval()


def logits(model, src=SRC, tgt=TGT):
    with torch.no_grad():
        return model(src, tgt)  # (batch, tgt_len, vocab)


def pad_more(src: torch.Tensor, extra: int, pad_id: int = PAD_ID) -> torch.Tensor:
    return torch.cat([src, torch.full((src.size(0), extra), pad_id)], dim=1)








def test_without_positions_the_encoder_is_permutation_equivariant():
    model = make_model()
    order = torch.tensor([3, 0, 4, 1, 2, 5])
    src = SRC[:1]
    with torch.no_grad():
        permuted = model.encode(src[:, order], src[:, order] == PAD_ID)
        assert torch.allclose(permuted, model.encode(src, src == PAD_ID)[:, order], atol=1e-6)


def test_without_positions_the_decoder_ignores_source_order():
    model = make_model()
    order = torch.tensor([3, 0, 4, 1, 2, 5])
    assert torch.allclose(logits(model, SRC[:1, order], TGT[:1]), logits(model, SRC[:1], TGT[:1]),
                          atol=1e-5)


def test_the_stage02_padding_leak_is_gone():
    model = make_model()
    short = SRC[1:, :3]  # the second sentence without its padding
    with torch.no_grad():
        alone = model.encode(short, short == PAD_ID)[0]
        in_batch = model.encode(SRC, SRC == PAD_ID)[1, :3]
    assert torch.allclose(alone, in_batch, atol=1e-6)






def test_the_decoder_attends_only_to_the_past():
    model = make_model()
    logits(model)
    weights = model.decoder_self_attn.attention  # (batch, tgt_len, tgt_len)
    problem = properties.causal_problem(weights > 0)
    assert problem is None, problem






def test_teacher_forcing_scores_every_real_target_position():
    model = make_model().train()
    assert stage.objective is teacher_forcing
    captured = []
    model.out_proj.register_forward_hook(lambda module, args, out: captured.append(out))
    tgt = torch.cat([TGT, torch.tensor([[EOS_ID], [PAD_ID]])], dim=1)
    loss = stage.objective(model, Batch(SRC, tgt)).mean()
    captured[0].retain_grad()
    loss.backward()
    scored = captured[0].grad.abs().sum(-1) > 0  # (batch, tgt_len - 1)
    assert torch.equal(scored, tgt[:, 1:] != PAD_ID)


def test_batched_greedy_decoding_equals_one_sentence_at_a_time():
    """With masks, a sentence's translation no longer depends on its batch neighbours."""
    model = make_model()
    batched = greedy_decode(model, SRC, max_len=7)
    alone = [greedy_decode(model, SRC[i:i + 1, : int((SRC[i] != PAD_ID).sum())], max_len=7)[0]
             for i in range(SRC.size(0))]
    assert batched == alone
