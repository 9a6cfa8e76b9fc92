"""Device choice prefers CUDA, then MPS, then the CPU."""

import pytest
import torch

from toolkit.device import pick_device


def test_prefers_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device().type == "cuda"


def test_then_mps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device().type == "mps"


def test_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device().type == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(pick_device().type == "cpu", reason="needs a CUDA or MPS device")
def test_the_chosen_accelerator_really_computes():
    device = pick_device()
    x = torch.arange(6.0, device=device).reshape(2, 3)
    assert torch.equal((x @ x.T).cpu(), torch.tensor([[5.0, 14.0], [14.0, 50.0]]))


def test_a_device_asked_for_by_name_must_be_there(monkeypatch):
    """One pick_device serves the notebooks ("auto") and the commands (--device): a named
    device that is missing is an error, never a silent run on the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device("cpu").type == "cpu" and pick_device("auto").type == "cpu"
    with pytest.raises(ValueError, match="--device cuda: no CUDA device is available here"):
        pick_device("cuda")
    with pytest.raises(ValueError, match="--device mps: no MPS device"):
        pick_device("mps")
