"""Stage 06: each layer is torch.nn's post-LN layer (one head), and the FFN is per position."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stages import stage06_ffn_layernorm as stage
from toolkit.checkers.from_torch_nn import copy_decoder_layer, copy_encoder_layer
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

EMBED_DIM, FF_DIM = 16, 40
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}


def reference(layer_class, dtype, dropout=0.0):
    """Every parameter random, LayerNorm gains and biases included: default ones (1 and 0)
    would hide a swapped norm or bias."""
    torch.manual_seed(0)
    layer = layer_class(EMBED_DIM, nhead=1, dim_feedforward=FF_DIM, dropout=dropout,
                        activation="relu", batch_first=True, norm_first=False)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_(0.0, 0.3)
    return layer.to(dtype).eval()


def layer_pair(layer_class, ours_class, dtype, dropout, monkeypatch):
    """torch.nn's layer and ours with the same weights; with dropout, in train mode and
    dropping the same units (drop_alike), so the dropout sites are compared too."""
    if dropout:
        drop_alike(monkeypatch)
    theirs = reference(layer_class, dtype, dropout=dropout).train(dropout > 0)
    ours = ours_class(EMBED_DIM, FF_DIM, dropout=dropout).to(dtype).train(dropout > 0)
    return theirs, ours


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_encoder_layer_equals_nn_transformer_encoder_layer(dtype, dropout, monkeypatch):
    """nn.* divides scores by sqrt(head_dim) = sqrt(embed_dim) with one head; stage 06 does
    not scale yet. So we copy nn's W_q and b_q into ours divided by sqrt(embed_dim), which
    gives the same scores (the issue's wording: nn's W_q is ours times sqrt(embed_dim)).
    With dropout: on the attention weights, inside the FFN and on each sublayer's output
    before the residual add, as torch.nn's layer drops."""
    theirs, ours = layer_pair(nn.TransformerEncoderLayer, stage.EncoderLayer, dtype, dropout,
                              monkeypatch)
    copy_encoder_layer(ours, theirs, query_scale=1 / math.sqrt(EMBED_DIM))
    x = torch.randn(2, 6, EMBED_DIM, dtype=dtype)
    padding = SRC == PAD_ID
    with torch.no_grad():
        expected = theirs(x, src_key_padding_mask=padding)
        got = ours(x, padding)
        if dropout:
            assert not torch.allclose(got, ours.eval()(x, padding))  # dropout did act
    real = ~padding  # nn's fast path may zero the padded rows; compare real positions
    assert (got[real] - expected[real]).abs().max() <= TOLERANCE[dtype]


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decoder_layer_equals_nn_transformer_decoder_layer(dtype, dropout, monkeypatch):
    theirs, ours = layer_pair(nn.TransformerDecoderLayer, stage.DecoderLayer, dtype, dropout,
                              monkeypatch)
    copy_decoder_layer(ours, theirs, query_scale=1 / math.sqrt(EMBED_DIM))
    y, memory = torch.randn(2, 5, EMBED_DIM, dtype=dtype), torch.randn(2, 6, EMBED_DIM, dtype=dtype)
    padding = SRC == PAD_ID
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)
    with torch.no_grad():
        expected = theirs(y, memory, tgt_mask=future, memory_key_padding_mask=padding)
        got = ours(y, memory, padding, future)
        if dropout:
            assert not torch.allclose(got, ours.eval()(y, memory, padding, future))
    assert (got - expected).abs().max() <= TOLERANCE[dtype]


def test_the_feed_forward_network_acts_on_each_position_alone():
    torch.manual_seed(0)
    ffn = stage.FeedForward(EMBED_DIM, FF_DIM)
    x = torch.randn(2, 7, EMBED_DIM)
    changed = x.clone()
    changed[1, 4] += 1.0
    with torch.no_grad():
        difference = (ffn(changed) - ffn(x)).abs().sum(dim=-1)  # (batch, len)
    assert difference[1, 4] > 0
    difference[1, 4] = 0
    assert torch.all(difference == 0)


def make_model(dropout: float):
    torch.manual_seed(0)
    return stage.Transformer(20, 30, embed_dim=EMBED_DIM, ff_dim=FF_DIM, dropout=dropout)


def test_dropout_is_off_in_eval_and_on_in_train():
    model = make_model(dropout=0.3)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(SRC, TGT), model(SRC, TGT))
        model.train()
        assert not torch.allclose(model(SRC, TGT), model(SRC, TGT))


def test_without_dropout_train_and_eval_agree():
    model = make_model(dropout=0.0)
    with torch.no_grad():
        assert torch.equal(model.train()(SRC, TGT), model.eval()(SRC, TGT))


def test_layer_norm_and_linear_layers_are_built_once_not_per_call():
    """Modules created inside forward would be fresh, untrained parameters on every call."""
    model = make_model(dropout=0.0)
    before = {name for name, _ in model.named_parameters()}
    with torch.no_grad():
        first = model(SRC, TGT)
        assert torch.equal(model(SRC, TGT), first)
    assert {name for name, _ in model.named_parameters()} == before
    assert sum(isinstance(m, nn.LayerNorm) for m in model.modules()) == 2 * 2 + 2 * 3


# --- dropout in train mode ---------------------------------------------------------------
# Random masks differ between two models, so "train mode equals torch.nn" needs the same
# units dropped on both sides. `drop_alike` makes every dropout keep a fixed pattern that
# depends only on the tensor's shape, and routes the attention weights of nn.* through it
# too (nn.MultiheadAttention drops them inside F.scaled_dot_product_attention, whose own
# mask we cannot see). Any dropout our layers miss, add, or move then changes the output.

def fixed_dropout(input, p=0.5, training=True, inplace=False):
    """F.dropout with a mask that depends only on the shape, so two models drop alike."""
    if not training or p == 0.0:
        return input
    index = torch.arange(input.numel(), device=input.device).reshape(input.shape)
    keep = (index * 7919 + 13) % 97 >= p * 97  # (same shape as input), about 1 - p kept
    return input * keep / (1 - p)  # inverted dropout: the expected value is unchanged


def reference_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                        scale=None, enable_gqa=False):
    """The reference implementation in F.scaled_dot_product_attention's documentation,
    dropping the weights through F.dropout (so through `fixed_dropout` under drop_alike)."""
    # query: (batch, heads, q_len, head_dim), key and value: (batch, heads, kv_len, head_dim)
    q_len, kv_len = query.size(-2), key.size(-2)
    bias = torch.zeros(q_len, kv_len, dtype=query.dtype)  # (q_len, kv_len)
    if is_causal:
        bias = bias.masked_fill(torch.ones(q_len, kv_len, dtype=torch.bool).triu(1),
                                float("-inf"))
    if attn_mask is not None:  # nn.MultiheadAttention passes a float mask: 0 or -inf
        bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else attn_mask + bias
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    weights = (query @ key.transpose(-2, -1) * scale + bias).softmax(dim=-1)
    return F.dropout(weights, dropout_p, training=True) @ value  # (batch, heads, q_len, head_dim)


def drop_alike(monkeypatch):
    """Make torch.nn's dropout sites and ours drop the same units (see fixed_dropout)."""
    monkeypatch.setattr(F, "dropout", fixed_dropout)
    monkeypatch.setattr(F, "scaled_dot_product_attention", reference_attention)


def test_the_fixed_dropout_drops_about_p_and_scales_the_rest_by_one_over_one_minus_p():
    """The helper below must really drop units, or the train-mode tests would compare nothing."""
    x = torch.ones(4, 50, 20)
    dropped = fixed_dropout(x, p=0.1)
    assert 0.08 < (dropped == 0).float().mean() < 0.12
    assert torch.allclose(dropped[dropped != 0], torch.tensor(1 / 0.9))
    assert torch.equal(fixed_dropout(x, p=0.1, training=False), x)


def test_the_model_drops_embeddings_plus_positions_on_both_sides_and_nothing_else(monkeypatch):
    """The paper's dropout on the input sums, with the layers' own dropout tested above."""
    drop_alike(monkeypatch)
    model = make_model(dropout=0.1).train()
    padding = SRC == PAD_ID  # (batch, src_len)
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)  # (tgt_len, tgt_len)
    with torch.no_grad():
        x = fixed_dropout(model.positions(model.src_embed(SRC)), 0.1)  # (batch, src_len, embed_dim)
        for layer in model.encoder_layers:
            x = layer(x, padding)
        y = fixed_dropout(model.positions(model.tgt_embed(TGT)), 0.1)  # (batch, tgt_len, embed_dim)
        for layer in model.decoder_layers:
            y = layer(y, x, padding, future)
        assert (model(SRC, TGT) - model.out_proj(y)).abs().max() <= TOLERANCE[torch.float32]


def test_in_eval_mode_a_dropout_model_computes_what_the_same_weights_without_dropout_do():
    """Inverted dropout: nothing to undo at test time, so eval needs no rescaling either."""
    with_dropout, without = make_model(dropout=0.3).eval(), make_model(dropout=0.0).eval()
    with torch.no_grad():
        assert torch.equal(with_dropout(SRC, TGT), without(SRC, TGT))


def test_train_mode_draws_its_masks_from_torch_seed():
    """The same seed drops the same units (runs can be repeated); another seed, others."""
    check_masks_follow_torch_seed(make_model(dropout=0.1).train())


def check_masks_follow_torch_seed(model: nn.Module) -> None:
    """Two train-mode forwards agree under one seed and differ under another."""
    outputs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs.append(model(SRC, TGT))
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.allclose(outputs[0], outputs[2])
