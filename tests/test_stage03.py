"""Stage 03: padding is invisible, the future is hidden, and nothing turns into NaN."""

import pytest
import torch

from stages import stage03_masking as stage
from toolkit.batches import Batch
from toolkit.decoding import greedy_decode
from toolkit.objectives import teacher_forcing
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID

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


def test_more_source_padding_changes_no_real_output():
    """Covers encoder self-attention and cross-attention: both must hide <pad> keys."""
    model = make_model()
    assert torch.allclose(logits(model, pad_more(SRC, 4)), logits(model), atol=1e-6)


def test_the_pad_embedding_changes_no_real_output():
    model = make_model()
    before = logits(model)
    with torch.no_grad():
        model.src_embed.weight[PAD_ID] = 100.0
        model.tgt_embed.weight[PAD_ID] = -100.0
    after = logits(model)
    assert torch.allclose(after[REAL_TGT], before[REAL_TGT], atol=1e-5)


def test_the_pad_id_itself_does_not_matter(monkeypatch):
    model = make_model()
    before = logits(model)
    monkeypatch.setattr(stage, "PAD_ID", 13)
    src = SRC.masked_fill(SRC == PAD_ID, 13)
    assert torch.allclose(logits(model, src), before, atol=1e-6)


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


@pytest.mark.parametrize("t", range(1, TGT.size(1)))
def test_a_target_token_changes_its_own_position_and_later_ones_only(t):
    """Catches an inverted causal mask and one that also hides the diagonal."""
    model = make_model()
    changed = TGT.clone()
    changed[:, t] = 17
    before, after = logits(model), logits(model, tgt=changed)
    assert torch.allclose(after[:, :t], before[:, :t], atol=1e-6)
    assert not torch.allclose(after[:, t], before[:, t], atol=1e-4)


def test_padded_keys_get_exactly_zero_weight_from_every_query():
    """Mask keys (columns), not queries (rows): a query mask leaves pad columns visible."""
    model = make_model()
    logits(model)
    padded = SRC == PAD_ID  # (batch, src_len)
    for weights in (model.encoder_self_attn.attention, model.cross_attn.attention):
        assert torch.all(weights.masked_select(padded[:, None, :].expand_as(weights)) == 0)
        real_rows = weights[0]  # the unpadded sentence attends everywhere it may
        assert torch.allclose(real_rows.sum(-1), torch.ones(real_rows.size(0)))


def test_the_decoder_attends_only_to_the_past():
    model = make_model()
    logits(model)
    weights = model.decoder_self_attn.attention  # (batch, tgt_len, tgt_len)
    future = torch.ones(TGT.size(1), TGT.size(1), dtype=torch.bool).triu(1)
    assert torch.all(weights[:, future] == 0)
    assert torch.all(weights[:, ~future] > 0)


def test_masks_are_combined_first_and_filled_once(monkeypatch):
    attention = stage.Attention(embed_dim=8)
    fills = []
    original = torch.Tensor.masked_fill
    monkeypatch.setattr(torch.Tensor, "masked_fill",
                        lambda self, *args: fills.append(1) or original(self, *args))
    x = torch.randn(2, 4, 8)
    padding = torch.tensor([[False, False, False, True], [False, True, True, True]])
    future = torch.ones(4, 4, dtype=torch.bool).triu(1)
    attention(x, x, key_padding_mask=padding, attn_mask=future)
    assert len(fills) == 1
    hidden = padding[:, None, :] | future  # (batch, q_len, kv_len)
    assert torch.all(attention.attention[hidden] == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_an_all_padding_sentence_gives_no_nan_or_inf(dtype):
    """A fully hidden row averages the values; its loss is ignored. It must never be NaN."""
    model = make_model().to(dtype).train()
    src = torch.tensor([[PAD_ID] * 4, [4, 5, 6, EOS_ID]])
    tgt = torch.tensor([[BOS_ID, PAD_ID, PAD_ID], [BOS_ID, 8, EOS_ID]])
    out = model(src, tgt)
    assert torch.isfinite(out).all()
    out.float().sum().backward()
    for name, parameter in model.named_parameters():
        assert torch.isfinite(parameter.grad).all(), name


def test_teacher_forcing_scores_every_real_target_position():
    model = make_model().train()
    assert stage.objective is teacher_forcing
    captured = []
    model.out_proj.register_forward_hook(lambda module, args, out: captured.append(out))
    tgt = torch.cat([TGT, torch.tensor([[EOS_ID], [PAD_ID]])], dim=1)
    loss = stage.objective(model, Batch(SRC, tgt))
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


def test_translations_do_not_depend_on_the_batch():
    """Through the toolkit: padding neighbours change neither masks nor length limits."""
    from toolkit.decoding import translate
    from toolkit.vocab import Vocab

    src_vocab = Vocab(f"w{i}" for i in range(SRC_VOCAB - 4))
    tgt_vocab = Vocab(f"v{i}" for i in range(TGT_VOCAB - 4))
    sentences = ["w1 w2", "w3 w4 w5 w6 w7 w8 w9 w10", "w11", "w5 w5 w5"]
    model = make_model()
    together = translate(model, sentences, src_vocab, tgt_vocab, batch_size=4)
    alone = translate(model, sentences, src_vocab, tgt_vocab, batch_size=1)
    assert together == alone
