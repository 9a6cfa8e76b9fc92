"""Stage 05: N distinct layers, and every decoder layer reads the final encoder output."""

import pytest
import torch

from stages import stage05_stacking as stage
from toolkit.stage_api import count_parameters
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID

SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])


def make_model(encoder_layers: int = 3, decoder_layers: int = 2, seed: int = 0):
    torch.manual_seed(seed)
    return stage.Transformer(20, 30, embed_dim=16, num_encoder_layers=encoder_layers,
                             num_decoder_layers=decoder_layers).eval()


@pytest.mark.parametrize(("encoder_layers", "decoder_layers"), [(1, 1), (3, 2), (2, 4)])
def test_each_requested_layer_exists_with_its_own_parameters(encoder_layers, decoder_layers):
    model = make_model(encoder_layers, decoder_layers)
    assert len(model.encoder_layers) == encoder_layers
    assert len(model.decoder_layers) == decoder_layers
    weights = [layer.self_attn.q_proj.weight for layer in model.encoder_layers]
    assert len({id(w) for w in weights}) == encoder_layers  # distinct, not one reused
    assert all(not torch.equal(weights[0], w) for w in weights[1:])


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


def test_every_decoder_layer_receives_the_final_encoder_output():
    model = make_model()
    received = []
    for layer in model.decoder_layers:
        layer.register_forward_hook(lambda module, args, out: received.append(args[1]))
    with torch.no_grad():
        model(SRC, TGT)
        final = model.encode(SRC, SRC == PAD_ID)
    assert len(received) == len(model.decoder_layers)
    for memory in received:
        assert torch.equal(memory, final)
