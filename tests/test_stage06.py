"""Stage 06: each layer is torch.nn's post-LN layer (one head), and the FFN is per position."""

import math

import pytest
import torch
from torch import nn

from stages import stage06_ffn_layernorm as stage
from toolkit.from_torch_nn import copy_decoder_layer, copy_encoder_layer
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID

EMBED_DIM, FF_DIM = 16, 40
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}


def reference(layer_class, dtype):
    """Every parameter random, LayerNorm gains and biases included: default ones (1 and 0)
    would hide a swapped norm or bias."""
    torch.manual_seed(0)
    layer = layer_class(EMBED_DIM, nhead=1, dim_feedforward=FF_DIM, dropout=0.0,
                        activation="relu", batch_first=True, norm_first=False)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_(0.0, 0.3)
    return layer.to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_encoder_layer_equals_nn_transformer_encoder_layer(dtype):
    """nn.* divides scores by sqrt(head_dim) = sqrt(embed_dim) with one head; stage 06 does
    not scale yet. So we copy nn's W_q and b_q into ours divided by sqrt(embed_dim), which
    gives the same scores (the issue's wording: nn's W_q is ours times sqrt(embed_dim))."""
    theirs = reference(nn.TransformerEncoderLayer, dtype)
    ours = stage.EncoderLayer(EMBED_DIM, FF_DIM).to(dtype).eval()
    copy_encoder_layer(ours, theirs, query_scale=1 / math.sqrt(EMBED_DIM))
    x = torch.randn(2, 6, EMBED_DIM, dtype=dtype)
    padding = SRC == PAD_ID
    with torch.no_grad():
        expected = theirs(x, src_key_padding_mask=padding)
        got = ours(x, padding)
    real = ~padding  # nn's fast path may zero the padded rows; compare real positions
    assert (got[real] - expected[real]).abs().max() <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decoder_layer_equals_nn_transformer_decoder_layer(dtype):
    theirs = reference(nn.TransformerDecoderLayer, dtype)
    ours = stage.DecoderLayer(EMBED_DIM, FF_DIM).to(dtype).eval()
    copy_decoder_layer(ours, theirs, query_scale=1 / math.sqrt(EMBED_DIM))
    y, memory = torch.randn(2, 5, EMBED_DIM, dtype=dtype), torch.randn(2, 6, EMBED_DIM, dtype=dtype)
    padding = SRC == PAD_ID
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)
    with torch.no_grad():
        expected = theirs(y, memory, tgt_mask=future, memory_key_padding_mask=padding)
        got = ours(y, memory, padding, future)
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
