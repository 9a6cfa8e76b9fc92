"""Train the stage-07 model on several processes with DistributedDataParallel, under torchrun.

    torchrun --standalone --nproc-per-node 2 -m toolkit.train_ddp --steps 300

Every process holds a whole replica of the model. A DistributedSampler gives each one its
own share of every step's sentence pairs; after `backward`, DDP all-reduces the gradients so
that every replica takes the same optimiser step and the replicas never drift apart. Rank 0
alone writes the loss log and the checkpoint.

Without dropout (the default, as in stage 07's recipe), two processes with `--batch-size B`
train like one process with `--batch-size 2B` (tests/test_train_ddp.py checks it). That needs
one correction: DDP *averages* gradients over processes, but the loss is a mean over real
target tokens, and two shards rarely hold the same number of them. So each process divides
its summed loss by the step's token count over all processes (one all-reduce), not its own.

With `--dropout`, each process seeds its random numbers apart (seed + rank) once DDP has
made the replicas equal, so the processes draw different dropout masks, as one process
would for different sentences. The replicas still take the same steps and stay identical,
but no run with another number of processes draws the same masks: the runs agree in
distribution, not bit for bit.

It steps like `toolkit.training.train` (the same `PaperOptimizer`: stage 07's recipe, the
paper's Adam and warm-up, gradients clipped at norm 1.0) with two differences: the pairs
come in DistributedSampler's order, not `toolkit.batches.loader`'s, so one process does not
repeat notebook 07's run step for step; and the default budget is 300 steps, a quick run
rather than the ladder's.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
from tqdm import tqdm

from stages import stage07_multi_head as stage
from toolkit.batches import Batch, collate
from toolkit.checkpoints import save_checkpoint
from toolkit.data import CourseData, load_data
from toolkit.paths import PROJECT_ROOT
from toolkit.recipes import RECIPES
from toolkit.training import PaperOptimizer

RECIPE = RECIPES[7]
OUTPUT = PROJECT_ROOT / "build" / "ddp"
LAUNCH = "torchrun --standalone --nproc-per-node 2 -m toolkit.train_ddp"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=LAUNCH, description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=RECIPE.batch_size,
                        help="sentence pairs per process per step")
    parser.add_argument("--corpus", default="builtin", choices=["builtin", "opus100"])
    parser.add_argument("--lr", type=float, default=RECIPE.lr, help="peak learning rate")
    parser.add_argument("--warmup-steps", type=int, default=RECIPE.warmup_steps)
    parser.add_argument("--seed", type=int, default=RECIPE.seed)
    parser.add_argument("--dropout", type=float, default=RECIPE.model["dropout"],
                        help="dropout rate (the paper's is 0.1); each process draws its own masks")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                        help="float64 makes the 1-process and N-process runs agree to 1e-12")
    parser.add_argument("--train-pairs", type=int, default=0,
                        help="train on the first N pairs only (0: all), to test epoch ends")
    parser.add_argument("--checkpoint", type=Path, default=OUTPUT / "stage07.pt")
    parser.add_argument("--loss-log", type=Path, default=OUTPUT / "loss.log",
                        help="one line per step, written by rank 0")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be at least 1")
    return args


def join_process_group() -> torch.device:
    """Join the group torchrun started: NCCL between GPUs, gloo between CPU processes."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise SystemExit(f"toolkit.train_ddp must be started by torchrun, for example:\n  {LAUNCH}")
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def epochs_forever(loader: DataLoader, sampler: DistributedSampler) -> Iterator[Batch]:
    """A new shuffle every epoch, the same on every process, so the shards never overlap."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def load_data_once(corpus: str) -> CourseData:
    """Rank 0 of each machine loads (and, for opus100, downloads) first; the rest read its cache."""
    first_on_machine = int(os.environ.get("LOCAL_RANK", 0)) == 0
    if not first_on_machine:
        dist.barrier()
    data = load_data(corpus)
    if first_on_machine:
        dist.barrier()
    return data


def model_config(args: argparse.Namespace) -> dict:
    """Stage 07's model settings with this run's dropout, as the checkpoint records them."""
    return {**RECIPE.model, "dropout": args.dropout}


def build_replica(src_vocab_size: int, tgt_vocab_size: int, config: dict,
                  args: argparse.Namespace, device: torch.device) -> DistributedDataParallel:
    """Equal replicas on every process, then a random stream of its own for each one's dropout."""
    torch.manual_seed(args.seed)  # the same initial weights everywhere; DDP also copies rank 0's
    model = stage.Transformer(src_vocab_size, tgt_vocab_size, **config)
    model = model.to(device, getattr(torch, args.dtype))
    replica = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    # The toolkit asks a model whether it takes batches; DDP hides the stage's attribute.
    replica.accepts_batches = model.accepts_batches
    # With one seed everywhere, every process would draw the same dropout masks for its own
    # shard. Rank 0 keeps the seed, so one process draws what it always drew.
    torch.manual_seed(args.seed + dist.get_rank())
    return replica


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


def train(args: argparse.Namespace) -> None:
    device = join_process_group()
    try:
        run(args, device)
    finally:  # also after an error, so the other processes are not left waiting
        dist.destroy_process_group()


def run(args: argparse.Namespace, device: torch.device) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    data = load_data_once(args.corpus)
    pairs = data.train[: args.train_pairs] if args.train_pairs else data.train
    config = model_config(args)
    replica = build_replica(len(data.src_vocab), len(data.tgt_vocab), config, args, device)
    model = replica.module

    # Every process shuffles with the same seed, then keeps every world_size-th pair from
    # its rank on: together the processes see each step's pairs exactly once.
    sampler = DistributedSampler(pairs, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    loader = DataLoader(pairs, batch_size=args.batch_size, sampler=sampler, collate_fn=collate,
                        drop_last=True)
    if len(loader) == 0:
        raise SystemExit(f"--batch-size {args.batch_size} is more than the {len(sampler)} pairs "
                         f"each of the {world_size} processes gets: use a smaller batch")
    batches = epochs_forever(loader, sampler)
    optimizer = PaperOptimizer(replica, args.lr, args.warmup_steps, betas=RECIPE.betas,
                               eps=RECIPE.eps)

    log = None
    if rank == 0:
        args.checkpoint.parent.mkdir(parents=True, exist_ok=True)  # fail now, not after training
        args.loss_log.parent.mkdir(parents=True, exist_ok=True)
        log = args.loss_log.open("w", encoding="utf-8")
        print(f"# {world_size} process(es) x {args.batch_size} pairs per step, backend "
              f"{dist.get_backend()}, device {device}", file=log)
    steps = tqdm(range(1, args.steps + 1), desc=f"DDP x{world_size}", unit="step", ascii=True,
                 ncols=90, mininterval=2.0, disable=rank != 0, file=sys.stderr)
    start = time.perf_counter()
    try:
        for step in steps:
            batch = next(batches).to(device)
            # This process's summed loss and target count.
            scored = stage.objective(replica, batch, label_smoothing=RECIPE.label_smoothing)
            # One all-reduce gives the step's token count and summed loss over all processes.
            totals = torch.stack([scored.total.detach(), scored.tokens.to(scored.total.dtype)])
            dist.all_reduce(totals)
            step_loss, step_tokens = totals[0] / totals[1], totals[1]
            # DDP averages gradients over processes; multiplying by world_size turns that
            # average into the gradient of the mean over *all* the step's targets, as one big
            # batch would give.
            lr = optimizer.step(scored.total * world_size / step_tokens)
            if log is not None:
                print(f"step {step} loss {step_loss.item():.4f} lr {lr:.3e}", file=log,
                      flush=True)
                steps.set_postfix(loss=f"{step_loss.item():.3f}", refresh=False)
        seconds = time.perf_counter() - start
        difference = largest_replica_difference(model)  # every process takes part
        all_reduce = time_all_reduce(model, device)
        if rank == 0:
            save_checkpoint(args.checkpoint, model, data.src_vocab, data.tgt_vocab)
            rate = args.steps / seconds
            summary = (f"{args.steps} steps on {world_size} process(es) in {seconds:.2f} s: "
                       f"{rate:.2f} steps/s, {rate * args.batch_size * world_size:.0f} pairs/s")
            details = []
            if world_size > 1:
                count = sum(p.numel() for p in model.parameters())
                details = [f"largest parameter difference between replicas: {difference:.1e}",
                           f"one all-reduce of {count:,} gradient numbers: "
                           f"{1000 * all_reduce:.2f} ms (after training, alone)"]
            print("\n".join(f"# {line}" for line in [summary, *details]), file=log)
            print("\n".join([summary, *details, f"checkpoint: {args.checkpoint}",
                             f"loss log: {args.loss_log}"]))
    finally:
        if log is not None:
            log.close()
    dist.barrier()  # nobody leaves before rank 0 has written the checkpoint


def launch(nproc: int, *options: str, timeout: float = 300, script: Path | None = None) -> str:
    """Run this module (or `script`) under torchrun from Python (a notebook, a test).

    Returns the processes' output. A run that overstays `timeout`, or is interrupted, is
    stopped with every worker: torchrun passes SIGTERM on to its workers (SIGKILL would only
    stop torchrun itself).
    """
    program = [str(script)] if script else ["-m", "toolkit.train_ddp"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc}", *program, *options]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread per process: they share cores
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except BaseException as error:  # a timeout, Ctrl-C in a notebook, a test's own timeout
        process.terminate()
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
        if isinstance(error, subprocess.TimeoutExpired):
            raise RuntimeError(f"torchrun with {nproc} process(es) did not finish in {timeout} "
                               f"s; it was stopped with its workers") from None
        raise
    if process.returncode != 0:
        raise RuntimeError(f"torchrun with {nproc} process(es) failed:\n{output}")
    return output


def read_loss_log(path: Path) -> list[float]:
    """The per-step losses rank 0 wrote, for a loss curve."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [float(line.split()[3]) for line in lines if line.startswith("step ")]


if __name__ == "__main__":
    train(parse_args())
