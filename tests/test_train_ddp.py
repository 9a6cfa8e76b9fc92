"""Two DDP processes with batch B train exactly like one process with batch 2B.

Each run is a real `torchrun` (`toolkit.train_ddp.launch`) on gloo over loopback, stopped
with every worker if it overstays its time limit.
"""

import os
import subprocess
import sys

import pytest
import torch

from toolkit.checkpoints import load_checkpoint
from toolkit.train_ddp import launch, read_loss_log

# 37 pairs make 2 steps per epoch for 2 x 8 and for 1 x 16, so 5 steps cross two epoch
# ends, where the sampler reshuffles and drops the odd pair.
STEPS, BATCH, PAIRS = 5, 8, 37


def torchrun(tmp_path, nproc: int, batch_size: int, dtype: str) -> dict[str, torch.Tensor]:
    name = f"{nproc}x{batch_size}-{dtype}"
    output = launch(nproc, "--steps", str(STEPS), "--batch-size", str(batch_size),
                    "--train-pairs", str(PAIRS), "--dtype", dtype,
                    "--checkpoint", str(tmp_path / f"{name}.pt"),
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
    # Rank 0's checkpoint is a course checkpoint: it loads back into a stage-07 translator.
    restored = load_checkpoint(tmp_path / f"2x{BATCH}-float32.pt")
    assert type(restored.model).__module__ == "stages.stage07_multi_head"
    assert all(torch.equal(restored.model.state_dict()[name], two[name]) for name in two)


def test_a_run_that_overstays_its_time_is_stopped_with_every_worker(tmp_path):
    log = tmp_path / "endless.log"
    with pytest.raises(RuntimeError, match="did not finish in 45 s; it was stopped"):
        launch(2, "--steps", "1000000", "--loss-log", str(log),
               "--checkpoint", str(tmp_path / "endless.pt"), timeout=45)
    assert read_loss_log(log), "the workers never started: nothing was there to stop"
    leftover = subprocess.run(["pgrep", "-f", str(log)], capture_output=True, text=True).stdout
    assert leftover == "", f"workers still running: {leftover}"


def test_a_batch_larger_than_a_shard_is_refused_with_the_reason():
    with pytest.raises(RuntimeError, match="is more than the 10 pairs each of the 2 processes"):
        launch(2, "--steps", "1", "--train-pairs", "20", "--batch-size", "11", timeout=120)


def test_started_without_torchrun_it_says_how_to_start_it():
    result = subprocess.run([sys.executable, "-m", "toolkit.train_ddp", "--steps", "1"],
                            capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items()
                                 if k not in ("RANK", "WORLD_SIZE")})
    assert result.returncode != 0
    assert "must be started by torchrun" in result.stderr
    assert "torchrun --standalone --nproc-per-node 2 -m toolkit.train_ddp" in result.stderr
