"""Two DDP processes with batch B train exactly like one process with batch 2B.

Each run is a real `torchrun` (`toolkit.train_ddp.launch`) on gloo over loopback, killed with
its whole process group if it overstays its time limit.
"""

import os
import subprocess
import sys

import pytest
import torch

from toolkit.train_ddp import launch, read_loss_log

STEPS, BATCH = 4, 8


def torchrun(tmp_path, nproc: int, batch_size: int, dtype: str) -> dict[str, torch.Tensor]:
    name = f"{nproc}x{batch_size}-{dtype}"
    output = launch(nproc, "--steps", str(STEPS), "--batch-size", str(batch_size),
                    "--dtype", dtype, "--checkpoint", str(tmp_path / f"{name}.pt"),
                    "--loss-log", str(tmp_path / f"{name}.log"), timeout=240)
    assert f"{STEPS} steps on {nproc} process(es)" in output
    assert len(read_loss_log(tmp_path / f"{name}.log")) == STEPS  # one line per step
    # The raw state_dict: load_checkpoint would rebuild a float32 model from float64 weights.
    return torch.load(tmp_path / f"{name}.pt", weights_only=True)["state_dict"]


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


def test_in_float64_two_processes_of_batch_b_equal_one_process_of_batch_2b(tmp_path):
    """Without the per-process loss scaling of toolkit.train_ddp (a plain DDP average of each
    process's mean loss) the parameters differ by about 3e-4: this test fails."""
    two = torchrun(tmp_path, nproc=2, batch_size=BATCH, dtype="float64")
    one = torchrun(tmp_path, nproc=1, batch_size=2 * BATCH, dtype="float64")
    difference = largest_difference(two, one)
    print(f"float64: largest parameter difference after {STEPS} steps: {difference:.2e}")
    assert difference <= 1e-10
    # The comparison can fail: one process given half the pairs per step ends elsewhere.
    half_the_pairs = torchrun(tmp_path, nproc=1, batch_size=BATCH, dtype="float64")
    assert largest_difference(half_the_pairs, one) > 1e-6


def test_in_float32_they_agree_to_float32_noise(tmp_path):
    """Adam turns the rounding noise of gradients that are zero in exact maths (the key
    projection's bias: a softmax ignores a constant added to a row) into steps of up to the
    learning rate, so float32 runs agree less closely; float64 above is the sharp test."""
    two = torchrun(tmp_path, nproc=2, batch_size=BATCH, dtype="float32")
    one = torchrun(tmp_path, nproc=1, batch_size=2 * BATCH, dtype="float32")
    difference = largest_difference(two, one)
    print(f"float32: largest parameter difference after {STEPS} steps: {difference:.2e}")
    assert difference <= 1e-4


def test_a_run_that_overstays_its_time_is_stopped_with_every_process():
    with pytest.raises(RuntimeError, match="did not finish in 1 s; it was stopped"):
        launch(2, "--steps", "100000", timeout=1)
    leftover = subprocess.run(["pgrep", "-f", "toolkit.train_ddp --steps 100000"],
                              capture_output=True, text=True).stdout
    assert leftover == ""


def test_started_without_torchrun_it_says_how_to_start_it():
    result = subprocess.run([sys.executable, "-m", "toolkit.train_ddp", "--steps", "1"],
                            capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items()
                                 if k not in ("RANK", "WORLD_SIZE")})
    assert result.returncode != 0
    assert "must be started by torchrun" in result.stderr
    assert "torchrun --standalone --nproc-per-node 2 -m toolkit.train_ddp" in result.stderr
