"""Stage 05: N distinct layers, and every decoder layer reads the final encoder output."""

import importlib

import pytest
import torch

from stages import stage05_stacking as stage
from toolkit.checkers import layer_properties
from toolkit.stage_api import count_parameters
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])


def make_model(encoder_layers: int = 3, decoder_layers: int = 2, seed: int = 0):
    torch.manual_seed(seed)
    return stage.Transformer(20, 30, embed_dim=16, num_encoder_layers=encoder_layers,
                             num_decoder_layers=decoder_layers).eval()


def test_layers_compute_attention_plus_residual_from_their_own_input():
    """Each residual adds the layer's own input (bug 10 adds the encoder value instead)."""
    model = make_model()

    def attend(module, query, key_value, hidden):
        q, k, v = module.q_proj(query), module.k_proj(key_value), module.v_proj(key_value)
        scores = (q @ k.transpose(-2, -1)).masked_fill(hidden, torch.finfo(q.dtype).min)
        return scores.softmax(dim=-1) @ v

    y, memory = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    padding, future = SRC == PAD_ID, torch.ones(5, 5, dtype=torch.bool).triu(1)
    layer = model.decoder_layers[0]
    with torch.no_grad():
        expected = y + attend(layer.self_attn, y, y, future)
        expected = expected + attend(layer.cross_attn, expected, memory, padding[:, None, :])
        assert torch.allclose(layer(y, memory, padding, future), expected, atol=1e-5)
        x = torch.randn(2, 6, 16)
        encoder = model.encoder_layers[0]
        expected = x + attend(encoder.self_attn, x, x, padding[:, None, :])
        assert torch.allclose(encoder(x, padding), expected, atol=1e-5)


def test_parameter_count_grows_linearly_with_depth():
    counts = [count_parameters(make_model(n, n)) for n in (1, 2, 3, 4)]
    steps = {b - a for a, b in zip(counts, counts[1:], strict=False)}
    assert len(steps) == 1 and steps.pop() > 0


def test_every_layer_changes_the_output():
    """A loop that reuses one layer, or builds only one, fails this."""
    model = make_model()
    with torch.no_grad():
        before = model(SRC, TGT)
        for layers in (model.encoder_layers, model.decoder_layers):
            for layer in layers:
                saved = layer.self_attn.v_proj.weight.clone()
                layer.self_attn.v_proj.weight.mul_(2)
                assert not torch.allclose(model(SRC, TGT), before, atol=1e-4)
                layer.self_attn.v_proj.weight.copy_(saved)


STACKED = {"stage05_stacking": {}, "stage06_ffn_layernorm": {"ff_dim": 40},
           "stage07_multi_head": {"num_heads": 4, "ff_dim": 40}}


@pytest.mark.parametrize("module", STACKED)
def test_every_decoder_layer_receives_the_final_encoder_output(module):
    """In every stacked stage: not the output of the encoder layer with the same index."""
    stacked = importlib.import_module(f"stages.{module}")
    torch.manual_seed(0)
    model = stacked.Transformer(20, 30, embed_dim=16, num_encoder_layers=3,
                                num_decoder_layers=2, **STACKED[module]).eval()
    with torch.no_grad(), layer_properties.recording(model.encoder_layers) as encoder_calls, \
            layer_properties.recording(model.decoder_layers) as decoder_calls:
        model(SRC, TGT)
    problem = layer_properties.stacking_problem(encoder_calls, decoder_calls)
    assert problem is None, problem
