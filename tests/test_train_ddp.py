"""Two DDP processes with batch B train like one process with batch 2B, without dropout;
with dropout, the replicas stay identical while each process draws its own masks; and a
two-process run killed at a random step resumes to the same bits.

Each run is a real `torchrun` (`toolkit.train.ddp.launch`) on gloo over loopback, stopped
with every worker if it overstays its time limit.
"""

import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from interruptions import TINY, ddp, differing_parameters, run, saved, stop_at

from toolkit.learning.checkpoints import load_checkpoint
from toolkit.train.ddp import data_parallel, exit_now, join_process_group, launch, parser
from toolkit.train.run_log import read_log
from toolkit.train.run_options import parse_options
from toolkit.train.training_run import build_model

# 37 pairs make 2 steps per epoch for 2 x 8 and for 1 x 16, so 5 steps cross two epoch
# ends, where the sampler reshuffles and drops the odd pair.
STEPS, BATCH, PAIRS = 5, 8, 37


def run_name(nproc: int, batch_size: int, dtype: str, dropout: float = 0.0) -> str:
    return f"{nproc}x{batch_size}-{dtype}-dropout{dropout}"


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    """Train with torchrun and return rank 0's parameters; each setup runs once per module."""
    folder, done = tmp_path_factory.mktemp("ddp"), {}

    def run(nproc: int, batch_size: int, dtype: str, dropout: float = 0.0) -> dict:
        key = (nproc, batch_size, dtype, dropout)
        if key not in done:
            done[key] = train(folder, *key)
        return done[key]

    run.folder = folder
    return run


def train(folder, nproc: int, batch_size: int, dtype: str,
          dropout: float) -> dict[str, torch.Tensor]:
    output_folder = folder / run_name(nproc, batch_size, dtype, dropout)
    output = launch(nproc, "--recipe", "stage07", "--steps", str(STEPS), "--batch-size",
                    str(batch_size), "--train-pairs", str(PAIRS), "--precision", dtype,
                    "--dropout", str(dropout), "--output", str(output_folder),
                    "--log-every", "1", "--eval-every", "1000", "--eval-sentences", "5",
                    timeout=240)
    assert f"{STEPS} steps on {nproc} process(es)" in output
    assert len(read_log(output_folder / "log.csv")) == STEPS  # one row per step
    if nproc > 1:  # DDP keeps the replicas equal, dropout or not: rank 1's parameters are rank 0's
        assert "largest parameter difference between replicas: 0.0e+00" in output
    # The raw state_dict: load_checkpoint would rebuild a float32 model from float64 weights.
    return torch.load(output_folder / "last.pt", weights_only=True)["state_dict"]


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


@pytest.mark.slow
def test_in_float64_two_processes_of_batch_b_equal_one_process_of_batch_2b(torchrun):
    """Without the per-process loss scaling of toolkit.train.ddp (a plain DDP average of each
    process's mean loss) the parameters differ by about 3e-4: this test fails."""
    two = torchrun(nproc=2, batch_size=BATCH, dtype="float64")
    one = torchrun(nproc=1, batch_size=2 * BATCH, dtype="float64")
    difference = largest_difference(two, one)
    print(f"float64: largest parameter difference after {STEPS} steps: {difference:.2e}")
    assert difference <= 1e-10
    # The comparison can fail: one process given half the pairs per step ends elsewhere.
    half_the_pairs = torchrun(nproc=1, batch_size=BATCH, dtype="float64")
    assert largest_difference(half_the_pairs, one) > 1e-6


@pytest.mark.slow
def test_in_float32_they_agree_to_float32_noise(torchrun):
    """Adam turns the rounding noise of gradients that are zero in exact maths (the key
    projection's bias: a softmax ignores a constant added to a row) into steps of up to the
    learning rate, so float32 runs agree less closely; float64 above is the sharp test."""
    two = torchrun(nproc=2, batch_size=BATCH, dtype="float32")
    one = torchrun(nproc=1, batch_size=2 * BATCH, dtype="float32")
    difference = largest_difference(two, one)
    print(f"float32: largest parameter difference after {STEPS} steps: {difference:.2e}")
    assert difference <= 1e-4
    # Rank 0's checkpoint is a course checkpoint: it loads back into a stage-07 translator.
    restored = load_checkpoint(torchrun.folder / run_name(2, BATCH, "float32") / "last.pt")
    assert type(restored.model).__module__ == "stages.stage07_multi_head"
    assert all(torch.equal(restored.model.state_dict()[name], two[name]) for name in two)


@pytest.mark.slow
def test_with_dropout_the_replicas_stay_identical(torchrun):
    """Each process draws its own masks, yet DDP's averaged gradient keeps every replica equal
    (`train` above asserts it from the run's own check across processes)."""
    two = torchrun(nproc=2, batch_size=BATCH, dtype="float64", dropout=0.1)
    restored = load_checkpoint(torchrun.folder / run_name(2, BATCH, "float64", 0.1) / "last.pt")
    assert restored.config["dropout"] == 0.1  # the flag reached the model
    # Dropout really acted: the same run without it ends elsewhere.
    assert largest_difference(two, torchrun(nproc=2, batch_size=BATCH, dtype="float64")) > 1e-6


def test_each_process_draws_its_own_dropout_masks():
    """Every process feeds the same sentences to its replica (run as torchrun workers below)."""
    output = launch(2, script=Path(__file__), timeout=120)
    spread = {name: float(value) for name, value in re.findall(r"(\w+) ([\d.e+-]+)", output)
              if name in ("own_seeds", "one_seed", "eval")}
    assert spread["eval"] == 0.0  # without dropout the replicas agree: the weights are equal
    assert spread["own_seeds"] > 0.1  # with it they disagree: the masks differ
    # The check can fail: seeded alike, as before DDP's replicas were seeded apart, the two
    # processes draw the same masks.
    assert spread["one_seed"] == 0.0


def spread_across_processes(replica, src: torch.Tensor, tgt: torch.Tensor) -> float:
    """Largest difference between any process's logits and rank 0's for the same batch."""
    with torch.no_grad():
        logits = replica(src, tgt)  # (batch, tgt_len, tgt_vocab)
    rank0 = logits.clone()
    dist.broadcast(rank0, src=0)
    spread = (logits - rank0).abs().max()
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    return spread.item()


def compare_dropout_masks_across_processes() -> None:
    """A torchrun worker: the same batch through every replica, with and without dropout."""
    world = join_process_group()
    try:
        args = parse_options(parser(), ["--dropout", "0.5"])
        _, replica = build_model(args, 30, 40, world, data_parallel(world))
        ids = torch.Generator().manual_seed(1)  # the same sentences on every process
        src = torch.randint(4, 30, (4, 7), generator=ids)  # (batch, src_len)
        tgt = torch.randint(4, 40, (4, 6), generator=ids)  # (batch, tgt_len)
        own_seeds = spread_across_processes(replica, src, tgt)
        torch.manual_seed(args.seed)  # what one seed on every process would do
        one_seed = spread_across_processes(replica, src, tgt)
        replica.eval()
        no_dropout = spread_across_processes(replica, src, tgt)
        if dist.get_rank() == 0:
            print(f"own_seeds {own_seeds:.3e} one_seed {one_seed:.3e} eval {no_dropout:.3e}")
    finally:
        dist.destroy_process_group()


def wait_to_be_stopped(folder: Path) -> None:
    """A torchrun worker that says it started, then would never end on its own."""
    (folder / f"started-{os.environ['RANK']}").touch()
    time.sleep(600)


@pytest.mark.slow
def test_a_run_that_overstays_its_time_is_stopped_with_every_worker(tmp_path):
    """Workers that sleep rather than train: the stopping is launch's, whatever they run (the
    training command's own answer to SIGTERM is tested with the resumed runs below). The
    workers must start before the time runs out: it is sized by how long two Pythons take
    to import torch here, now, side by side."""
    start = time.perf_counter()
    importing = [subprocess.Popen([sys.executable, "-c", "import torch.distributed"])
                 for _ in range(2)]
    assert [process.wait() for process in importing] == [0, 0]
    timeout = max(20, math.ceil(8 * (time.perf_counter() - start)))
    with pytest.raises(RuntimeError, match=f"did not finish in {timeout} s; it was stopped"):
        launch(2, "--sleep", str(tmp_path), script=Path(__file__), timeout=timeout)
    started = sorted(path.name for path in tmp_path.iterdir())
    assert started == ["started-0", "started-1"], "the workers never started: nothing to stop"
    leftover = running_with(str(tmp_path))
    assert leftover == [], f"workers still running: {leftover}"


def running_with(text: str) -> list[str]:
    """The command lines of running processes that contain `text`, as `pgrep -f` finds them,
    read from /proc where there is one (a minimal Debian has no procps, so no pgrep)."""
    if not Path("/proc/self/cmdline").exists():
        found = subprocess.run(["pgrep", "-fl", text], capture_output=True, text=True).stdout
        return found.splitlines()
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        if cmdline.parent.name == str(os.getpid()):  # as pgrep leaves itself out
            continue
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # it ended while we looked
            continue
        if text in line:
            lines.append(line)
    return lines


def test_a_batch_larger_than_the_training_pairs_is_refused_with_the_reason(tmp_path):
    with pytest.raises(RuntimeError, match="20 training pairs do not fill one step of 11 pairs "
                                           "for each of 2 process"):
        launch(2, "--steps", "1", "--train-pairs", "20", "--batch-size", "11", "--output",
               str(tmp_path), timeout=120)


@pytest.mark.slow
def test_two_processes_killed_or_stopped_resume_to_the_same_bits(tmp_path):
    """Every process's dropout stream is saved and restored; with one lost, this fails."""
    steps = 40
    options = ["--steps", str(steps), *TINY, "--batch-size", "4"]
    whole, interrupted = tmp_path / "whole", tmp_path / "interrupted"
    assert run(ddp(2, "--output", str(whole), *options)).returncode == 0
    kill_at = random.SystemRandom().randint(8, steps - 10)  # after the first save, at step 7
    stop_at(ddp(2, "--output", str(interrupted), *options), interrupted, kill_at,
            signal.SIGKILL)
    reached = saved(interrupted / "last.pt")["training"]["progress"]["step"]
    assert reached < steps, f"killed at step {kill_at}, yet the run had finished"
    resumed = run(ddp(2, "--output", str(interrupted), *options, "--resume"))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert differing_parameters(whole / "last.pt", interrupted / "last.pt") == {}, \
        f"killed after step {kill_at}, resumed from step {reached}"
    # SIGTERM (a pre-empted machine; Ctrl-C alike) stops both processes at one step, saved.
    stopped = tmp_path / "stopped"
    result = stop_at(ddp(2, "--output", str(stopped), *options), stopped, 12, signal.SIGTERM)
    step = saved(stopped / "last.pt")["training"]["progress"]["step"]
    assert f"stopped by SIGTERM after step {step}" in result.stdout, result.stdout
    assert run(ddp(2, "--output", str(stopped), *options, "--resume")).returncode == 0
    assert differing_parameters(whole / "last.pt", stopped / "last.pt") == {}
    # One process cannot take the streams of two.
    alone = run(ddp(1, "--output", str(interrupted), *options, "--steps", "50", "--resume"))
    assert alone.returncode != 0
    assert "processes: the checkpoint was trained on 2, this run has 1" in alone.stderr


@pytest.mark.slow
def test_started_without_torchrun_it_says_how_to_start_it():
    result = subprocess.run([sys.executable, "-m", "toolkit.train.ddp", "--steps", "1"],
                            capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items()
                                 if k not in ("RANK", "WORLD_SIZE")})
    assert result.returncode != 0
    assert "must be started by torchrun" in result.stderr
    assert "torchrun --standalone --nproc-per-node 2 -m toolkit.train.ddp" in result.stderr


if __name__ == "__main__":  # started as torchrun workers by the tests above
    if sys.argv[1:2] == ["--sleep"]:
        wait_to_be_stopped(Path(sys.argv[2]))
    else:
        compare_dropout_masks_across_processes()
    exit_now(0)
