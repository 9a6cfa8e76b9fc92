"""Properties that every stage keeps, checked on each stage module where they apply.

Each stage is a complete copy of the one before, so a classic bug (design §5) can be planted
in any of them; `make mutants` relies on these tests to catch it wherever it lands. The
sizes reveal the bugs: 4 heads, 2 layers, embed_dim != head_dim, unequal lengths, padding.
"""

import importlib
import inspect
import math

import pytest
import torch

from toolkit.batching.batches import Batch
from toolkit.checkers import layer_properties
from toolkit.outline import STAGES
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

MODULES = {stage.number: stage.module for stage in STAGES}
SIZES = {5: {"num_encoder_layers": 2, "num_decoder_layers": 2},
         6: {"num_encoder_layers": 2, "num_decoder_layers": 2, "ff_dim": 40},
         7: {"num_encoder_layers": 2, "num_decoder_layers": 2, "ff_dim": 40, "num_heads": 4}}
EMBED_DIM, SRC_VOCAB, TGT_VOCAB = 16, 20, 30
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7, EOS_ID], [BOS_ID, 9, 12, EOS_ID, PAD_ID, PAD_ID]])


def stage_module(number: int):
    return importlib.import_module(f"stages.{MODULES[number]}")


def build(number: int, seed: int = 0, **overrides) -> torch.nn.Module:
    torch.manual_seed(seed)
    kwargs = {**SIZES.get(number, {}), **overrides}
    return stage_module(number).Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=EMBED_DIM,
                                            **kwargs).eval()


def run(model: torch.nn.Module, tgt: torch.Tensor = TGT[:, :-1]) -> torch.Tensor:
    """Stage 01 takes one sentence at a time; give it the first (unpadded) one."""
    if model.accepts_batches:
        return model(SRC, tgt)
    return model(SRC[0], tgt[0])


@pytest.mark.parametrize("number", MODULES)
def test_the_same_input_gives_the_same_output_twice(number):
    """A Linear built inside forward would give fresh random weights on every call (bug 14)."""
    model = build(number)
    with torch.no_grad():
        assert torch.equal(run(model), run(model))


@pytest.mark.parametrize("number", MODULES)
def test_every_parameter_takes_part_in_the_loss(number):
    """A registered module that forward never uses is one rebuilt per call (bug 14)."""
    model = build(number).train()
    stage = stage_module(number)
    stage.objective(model, Batch(SRC, TGT), torch.Generator().manual_seed(0)).mean().backward()
    unused = [name for name, parameter in model.named_parameters() if parameter.grad is None]
    assert unused == [], f"parameters the loss never reaches: {unused}"


def _residual_sites(model: torch.nn.Module, number: int) -> list[tuple[str, str, str, bool]]:
    """(self-attention, cross-attention, next module, read its input?) for each decoder block."""
    if number < 5:
        return [("decoder_self_attn", "cross_attn", "out_proj", True)]
    return [(f"decoder_layers.{i}.self_attn", f"decoder_layers.{i}.cross_attn",
             f"decoder_layers.{i}", False) for i in range(len(model.decoder_layers))]


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_each_decoder_residual_adds_its_own_sublayers_input(number):
    """y = y + attention(y, ...): the residual adds what the sublayer read (bug 10)."""
    model = build(number)
    seen = {}

    def keep(name):
        return lambda module, args, output: seen.__setitem__(name, (args[0], output))

    sites = _residual_sites(model, number)
    for names in sites:
        for name in names[:3]:
            model.get_submodule(name).register_forward_hook(keep(name))
    with torch.no_grad():
        run(model)
    for self_name, cross_name, after, reads_input in sites:
        (self_input, self_output), (cross_input, cross_output) = seen[self_name], seen[cross_name]
        assert torch.allclose(cross_input, self_input + self_output, atol=1e-6), self_name
        result = seen[after][0] if reads_input else seen[after][1]
        assert torch.allclose(result, cross_input + cross_output, atol=1e-6), cross_name


@pytest.mark.parametrize("number", [4, 5, 6, 7])
def test_positional_encoding_matches_the_closed_form_of_the_paper(number):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (bug 8).

    Only the closed form catches wrong frequencies: the shift property holds for any.
    """
    encoding = stage_module(number).PositionalEncoding(embed_dim=EMBED_DIM, max_seq_len=50)
    problem = layer_properties.encoding_problem(encoding.encoding.double(), 50, EMBED_DIM)
    assert problem is None, problem
    assert math.isclose(encoding.encoding[1, 1].item(), math.cos(1.0), abs_tol=1e-6)


@pytest.mark.parametrize("number", [5, 6, 7])
@pytest.mark.parametrize(("encoder_layers", "decoder_layers"), [(1, 1), (3, 2), (2, 4)])
def test_each_requested_layer_exists_with_its_own_parameters(number, encoder_layers,
                                                             decoder_layers):
    """N layers means N distinct layers, each with its own weights (bug 11)."""
    model = build(number, num_encoder_layers=encoder_layers, num_decoder_layers=decoder_layers)
    assert len(model.encoder_layers) == encoder_layers
    assert len(model.decoder_layers) == decoder_layers
    for layers in (model.encoder_layers, model.decoder_layers):
        weights = [layer.self_attn.q_proj.weight for layer in layers]
        assert len({id(weight) for weight in weights}) == len(layers)  # distinct, not reused
        assert all(not torch.equal(weights[0], weight) for weight in weights[1:])


# A value for every constructor setting any stage has, none of them its default, so a config
# that recorded a default instead of the given value would rebuild a different model.
NOT_DEFAULT = {"num_heads": 4, "num_encoder_layers": 3, "num_decoder_layers": 1, "ff_dim": 40,
               "dropout": 0.1, "max_seq_len": 50, "scale_embeddings": True,
               "tie_embeddings": True}


@pytest.mark.parametrize("number", MODULES)
def test_the_recorded_config_rebuilds_the_same_model(number):
    """A checkpoint rebuilds the model from model.config alone (issue 15): it must hold every
    constructor argument as given, in plain values that torch.load(weights_only=True) reads."""
    cls = stage_module(number).Transformer
    signature = inspect.signature(cls)
    given = {name: value for name, value in NOT_DEFAULT.items() if name in signature.parameters}
    model = build(number, seed=3, **given)
    expected = signature.bind(SRC_VOCAB, TGT_VOCAB, embed_dim=EMBED_DIM, **given)
    expected.apply_defaults()
    assert model.config == expected.arguments  # every parameter, each as given
    assert all(type(value) in (int, float, bool, str) for value in model.config.values())
    torch.manual_seed(3)
    rebuilt = cls(**model.config).eval()
    state, rebuilt_state = model.state_dict(), rebuilt.state_dict()
    assert state.keys() == rebuilt_state.keys()
    for name, tensor in state.items():
        assert torch.equal(tensor, rebuilt_state[name]), name
    outputs = []
    for twin in (model.train(), rebuilt.train()):  # settings with no tensor, such as dropout
        torch.manual_seed(0)
        with torch.no_grad():
            outputs.append(run(twin))
    assert torch.equal(*outputs)
