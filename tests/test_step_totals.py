"""One all-reduce per step carries the loss, the target count and the stop flag; one process
alone builds no flag on the device (tested on CPU: the logic, not a GPU's timing)."""

import torch

from toolkit import training_run
from toolkit.training_run import World


def test_one_process_reads_its_own_flag_and_builds_no_flag_tensor(monkeypatch):
    built = []
    original = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, **k: built.append(a) or original(*a, **k))
    totals, asked = World().step_totals(torch.tensor(6.0), torch.tensor(3), True)
    assert asked is True and totals.tolist() == [6.0, 3.0]
    assert len(built) == 2  # the two made above; none by step_totals


def test_several_processes_stop_together_when_any_is_asked(monkeypatch):
    """A stand-in for a world of two: the other process adds the same loss and count, and
    was asked to stop."""
    def all_reduce(self, tensor):
        other = torch.tensor([6.0, 3.0, 1.0])
        return tensor + other

    monkeypatch.setattr(training_run.World, "all_reduce", all_reduce)
    totals, asked = World(size=2).step_totals(torch.tensor(6.0), torch.tensor(3), False)
    assert asked is True and totals.tolist() == [12.0, 6.0]
