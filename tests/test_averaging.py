"""Checkpoint averaging gives the element-wise mean of the parameters, and refuses to mix runs."""

import pytest
import torch
from interruptions import TINY, run, saved, single
from torch import nn

from stages import stage07_multi_head as stage
from toolkit.learning.averaging import average_checkpoints, average_state_dicts
from toolkit.learning.checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from toolkit.text.vocab import Vocab


def test_the_average_of_linear_layers_is_the_mean_of_their_weights():
    layers = [nn.Linear(3, 2) for _ in range(3)]
    for value, layer in zip([1.0, 2.0, 6.0], layers, strict=True):
        nn.init.constant_(layer.weight, value)
        nn.init.constant_(layer.bias, -value)
    averaged = average_state_dicts([layer.state_dict() for layer in layers])
    assert torch.equal(averaged["weight"], torch.full((2, 3), 3.0))
    assert torch.equal(averaged["bias"], torch.full((2,), -3.0))
    # A random case, against the mean worked out directly.
    states = [nn.Linear(4, 4).state_dict() for _ in range(5)]
    expected = torch.stack([s["weight"] for s in states]).mean(dim=0)
    assert torch.allclose(average_state_dicts(states)["weight"], expected, atol=1e-7)


def test_integer_buffers_must_agree_and_parameters_must_match():
    a, b = {"count": torch.tensor([1, 2])}, {"count": torch.tensor([1, 3])}
    with pytest.raises(ValueError, match="count is not a floating-point tensor and differs"):
        average_state_dicts([a, b])
    with pytest.raises(ValueError, match="different parameters"):
        average_state_dicts([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}])
    with pytest.raises(ValueError, match="no checkpoints"):
        average_state_dicts([])


def vocab(words: int) -> Vocab:
    return Vocab.build([[f"w{i}" for i in range(words)]])


def constant_checkpoint(path, value: float, **config) -> None:
    model = stage.Transformer(len(vocab(6)), len(vocab(8)), embed_dim=8, num_heads=2,
                              ff_dim=16, **config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(value)
    save_checkpoint(path, model, vocab(6), vocab(8))


def test_averaged_checkpoints_load_as_a_translator_with_the_mean_weights(tmp_path):
    paths = [tmp_path / f"{value}.pt" for value in (1, 2, 3, 6)]
    for value, path in zip((1, 2, 3, 6), paths, strict=True):
        constant_checkpoint(path, value, tie_embeddings=True)
    averaged = load_checkpoint(average_checkpoints(paths, tmp_path / "averaged.pt"))
    assert all(torch.equal(p, torch.full_like(p, 3.0)) for p in averaged.model.parameters())
    assert averaged.model.out_proj.weight is averaged.model.tgt_embed.weight  # still tied


def test_checkpoints_of_other_models_are_refused(tmp_path):
    constant_checkpoint(tmp_path / "a.pt", 1.0)
    constant_checkpoint(tmp_path / "b.pt", 2.0, dropout=0.1)
    with pytest.raises(CheckpointError, match="holds another model"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"], tmp_path / "out.pt")


@pytest.mark.slow
def test_the_training_command_averages_its_last_checkpoints(tmp_path):
    result = run(single("--output", str(tmp_path), "--steps", "30", *TINY, "--save-every", "5",
                        "--average-last", "3", "--log-every", "50"))
    assert result.returncode == 0, result.stderr
    assert "averaged the checkpoints of steps 20, 25, 30" in result.stdout
    kept = sorted(tmp_path.glob("step-*.pt"))[1:]  # one kept to spare, for an early stop
    assert [p.name for p in kept] == ["step-00000020.pt", "step-00000025.pt", "step-00000030.pt"]
    states = [saved(p)["state_dict"] for p in kept]
    averaged = saved(tmp_path / "averaged.pt")["state_dict"]
    for name, tensor in averaged.items():
        mean = torch.stack([s[name].double() for s in states]).mean(dim=0).float()
        assert torch.allclose(tensor, mean, atol=1e-7), name
    assert not torch.equal(averaged["out_proj.bias"], states[-1]["out_proj.bias"])
