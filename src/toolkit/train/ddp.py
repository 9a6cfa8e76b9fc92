"""Train the stage-07 model on several processes with DistributedDataParallel, under torchrun.

    torchrun --standalone --nproc-per-node 2 -m toolkit.train.ddp --steps 300

It takes every option of `python -m toolkit.train` (corpus, tokenizer, model, recipe,
token budgets, evaluation, checkpoints, `--resume`), and runs the same loop
(`toolkit.train.training_run`): one process is a world of size one, nothing more.

Every process holds a whole replica of the model. Each step's pairs are shared out between
the processes (`toolkit.train.batch_plan`: process r takes every N-th pair from the r-th on, the
order DistributedSampler gives); after `backward`, DDP all-reduces the gradients so that
every replica takes the same optimiser step and the replicas never drift apart. Rank 0
alone evaluates and writes the checkpoints and the log.

Without dropout, two processes with `--batch-size B` train like one process with
`--batch-size 2B` (tests/test_train_ddp.py checks it). That needs one correction: DDP
*averages* gradients over processes, but the loss is a mean over real target tokens, and two
shards rarely hold the same number of them. So each process divides its summed loss by the
step's token count over all processes (one all-reduce), not its own.

With dropout (the paper recipe's 0.1), each process seeds its random numbers apart
(seed + 1 + rank) once DDP has made the replicas equal, so the processes draw different dropout
masks, as one process would for different sentences. The replicas still take the same steps
and stay identical, but no run with another number of processes draws the same masks: the
runs agree in distribution, not bit for bit. A checkpoint holds every process's random
streams, so `--resume` needs the same number of processes. Ctrl-C or SIGTERM (which
torchrun passes on) stop every process after the same step, agreed in the step's loss
all-reduce, with a checkpoint; torchrun kills workers that take longer than its
`--shutdown-timeout` (30 s) to finish that step and save.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from toolkit.paths import PROJECT_ROOT
from toolkit.text.corpus_errors import CorpusUnavailable
from toolkit.train.run_options import build_parser, parse_options
from toolkit.train.run_report import exit_code, report
from toolkit.train.training_run import run_training
from toolkit.train.world import World

LAUNCH = "torchrun --standalone --nproc-per-node 2 -m toolkit.train.ddp"


def parser():
    return build_parser(LAUNCH, __doc__.split("\n")[0], PROJECT_ROOT / "build" / "ddp")


def join_process_group(device: str = "auto") -> World:
    """Join the group torchrun started: NCCL between GPUs, gloo between CPU processes."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise SystemExit(f"toolkit.train.ddp must be started by torchrun, for example:\n  {LAUNCH}")
    if device == "mps":
        raise SystemExit("--device mps: DistributedDataParallel has no MPS backend; use "
                         "python -m toolkit.train on one process")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available here; use --device cpu")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if device != "cpu" and torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return World(dist.get_rank(), dist.get_world_size(), device, local_rank)


def data_parallel(world: World):
    """What turns the model into this process's DDP replica."""

    def wrap(model: nn.Module) -> DistributedDataParallel:
        replica = DistributedDataParallel(
            model, device_ids=[world.device] if world.device.type == "cuda" else None)
        # The toolkit asks a model whether it takes batches; DDP hides the stage's attribute.
        replica.accepts_batches = model.accepts_batches
        return replica

    return wrap


def largest_replica_difference(model: torch.nn.Module) -> float:
    """How far any process's parameters are from rank 0's: DDP should keep this at exactly 0."""
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])  # (num_parameters,)
    rank0 = mine.clone()
    dist.broadcast(rank0, src=0)
    difference = (mine - rank0).abs().max()
    dist.all_reduce(difference, op=dist.ReduceOp.MAX)
    return difference.item()


def time_all_reduce(model: torch.nn.Module, device: torch.device, repeats: int = 20) -> float:
    """Seconds one all-reduce of as many numbers as the gradients takes: DDP's traffic per step."""
    gradients = torch.cat([p.detach().reshape(-1) for p in model.parameters()])  # (num_parameters,)
    dist.all_reduce(gradients)  # once untimed: the first call sets up the connection
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(gradients)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # NCCL returns before the GPU has finished
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()  # --time-limit counts from here
    args = parse_options(parser(), argv)
    world = join_process_group(args.device)
    try:
        try:
            result = run_training(args, world, data_parallel(world), started)
        except (ValueError, CorpusUnavailable, FileNotFoundError) as err:
            if world.main:  # every process meets the same error; one says it
                print(f"error: {err}", file=sys.stderr)
            return 2
        difference = largest_replica_difference(result.model)  # every process takes part
        all_reduce = time_all_reduce(result.model, world.device)
        if world.main:
            lines = report(result, args, world)
            if world.size > 1:
                count = sum(p.numel() for p in result.model.parameters())
                lines[1:1] = [f"largest parameter difference between replicas: {difference:.1e}",
                              f"one all-reduce of {count:,} gradient numbers: "
                              f"{1000 * all_reduce:.2f} ms (after training, alone)"]
            print("\n".join(lines), flush=True)
        dist.barrier()  # nobody leaves before rank 0 has written everything
        return exit_code(result)
    finally:  # also after an error, so the other processes are not left waiting
        dist.destroy_process_group()


def launch(nproc: int, *options: str, timeout: float = 300, script: Path | None = None) -> str:
    """Run this module (or `script`) under torchrun from Python (a notebook, a test).

    Returns the processes' output. A run that overstays `timeout`, or is interrupted, is
    stopped with every worker: torchrun passes SIGTERM on to its workers (which save a
    checkpoint and exit); any still running a minute later are killed.
    """
    program = [str(script)] if script else ["-m", "toolkit.train.ddp"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc}", *program, *options]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread per process: they share cores
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, encoding="utf-8",
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except BaseException as error:  # a timeout, Ctrl-C in a notebook, a test's own timeout
        process.terminate()
        try:
            process.communicate(timeout=60)  # longer than torchrun's own 30 s shutdown
        except subprocess.TimeoutExpired:
            for pid in [process.pid, *descendants(process.pid)]:  # workers have own sessions
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.communicate()
        if isinstance(error, subprocess.TimeoutExpired):
            raise RuntimeError(f"torchrun with {nproc} process(es) did not finish in {timeout} "
                               f"s; it was stopped with its workers") from None
        raise
    if process.returncode != 0:
        raise RuntimeError(f"torchrun with {nproc} process(es) failed:\n{output}")
    return output


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs (read from /proc, so Linux only)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def exit_now(code: int) -> None:
    """Leave without the interpreter's finalization: gloo's threads, torn down during it after
    the work is done, can abort a worker (SIGABRT; seen here, and pytorch/pytorch#179291)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
