"""Start a training command as a real process, and stop it from outside at a chosen step."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from toolkit.train.ddp import descendants
from toolkit.train.run_log import read_log

# A model small enough that a run takes seconds, with dropout (the paper recipe's 0.1), so
# that a resume which lost a random stream would show.
TINY = ["--embed-dim", "16", "--num-heads", "2", "--ff-dim", "32", "--num-layers", "1",
        "--train-pairs", "300", "--batch-size", "8", "--eval-every", "10",
        "--eval-sentences", "10", "--log-every", "1", "--save-every", "7"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def single(*options: str) -> list[str]:
    return [sys.executable, "-m", "toolkit.train", *options]


def ddp(nproc: int, *options: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "toolkit.train.ddp", *options]


def run(command: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=ENV, capture_output=True, text=True, encoding="utf-8",
                          timeout=timeout)


def logged_steps(folder: Path) -> int:
    """The last step log.csv holds (0 before the first row)."""
    try:
        rows = read_log(folder / "log.csv")
    except (FileNotFoundError, ValueError):
        return 0
    return rows[-1]["step"] if rows else 0


def stop_at(command: list[str] | subprocess.Popen, folder: Path, step: int,
            how: signal.Signals, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `command` (or go on with a process already started) and send `how` to it and
    every process it started (torchrun starts its workers in sessions of their own) once it
    has logged `step`."""
    process = command if isinstance(command, subprocess.Popen) else subprocess.Popen(
        command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        encoding="utf-8", start_new_session=True)
    command = process.args
    deadline = time.monotonic() + timeout
    try:
        while logged_steps(folder) < step:
            if process.poll() is not None:
                raise AssertionError(f"the run ended before step {step}:\n"
                                     f"{process.stderr.read()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the run did not reach step {step} in {timeout} s")
            time.sleep(0.005)
        for pid in [process.pid, *descendants(process.pid)]:  # torchrun's workers too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, how)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def saved(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def differing_parameters(a: Path, b: Path) -> dict[str, float]:
    """Every parameter whose bits differ between two checkpoints, with the largest gap."""
    first, second = saved(a)["state_dict"], saved(b)["state_dict"]
    assert first.keys() == second.keys()
    return {name: (first[name] - second[name]).abs().max().item()
            for name in first if not torch.equal(first[name], second[name])}


def measured_here(command: list[str]) -> tuple[float, float]:
    """A short run of the training `command` timed on this machine as it is now: its wall
    time in all, and one step's time from its own report. A test sizes its time limit by
    these, never by a number of seconds that holds only on a fast machine."""
    start = time.perf_counter()
    result = run(command)
    wall = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    steps, seconds = re.search(r"(\d+) steps on \d+ process\(es\) in ([\d.]+) s of training",
                               result.stdout).groups()
    return wall, float(seconds) / int(steps)
