"""The paper recipe's run, trained once and kept: notebook 10's model, the ablation's full row;
and, the same way, the seed-0 runs of two more ablation rows: notebook 12's stage 07 on BPE
subwords and notebook 14's decoder-only model.

Stage 07 trained with `recipes.PAPER` on the built-in corpus is the ablation's full row
(`make ablation` trains it the same way) and notebook 10's model. Minutes of training are
worth doing once: the run is kept in `build/paper-run/` under a key made of what decides its
bits: the code that trains it (this module's import closure and the stage's, as the
ladder's rows are stamped: `course_tools.staleness`), the corpus, the recipe, the data
options, how many checkpoints it keeps, the device, the thread count, how the device rounds
(`numeric_platform`, which names the PyTorch build) and the versions of the libraries the
code imports. Change any of them and the next call trains afresh; so does `fresh=True`. The
file also holds the run's vocabularies: one read back against vocabularies built otherwise
(another `tokenizers` may merge differently at the same size) is trained afresh. A test
proves a kept run gives the same numbers as training afresh.

`make kept-runs` trains the three runs afresh and `--record` copies them into
`assets/kept-runs/`, committed, where a fresh clone finds them under the same key (one thread,
as `make notebooks` runs); where the key differs (other code, another CPU), they are trained
again into `build/paper-run/`.

Besides the final weights, the paper run keeps the weights after each of its last
`AVERAGED` multiples of `SAVE_EVERY` steps, the checkpoints the paper averages (its base
models average the last 5 checkpoints, written 10 minutes apart), for a decoder of the same
run to average (notebook 13). The file holds the last of them once, as the final weights.

`subword_run()` keeps stage 07 trained on the ladder's recipe with `ablation.SUBWORD_DATA`,
and `decoder_only_run()` stage 08 on `ablation.DECODER_ONLY_RECIPE`, the same way, without
checkpoints. Where none is found kept, `make test` trains the paper run on one thread and the
other two, one after the other, on another, beside the unit tests, so that no notebook spends
its time budget training them.
"""

import hashlib
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, asdict, dataclass, replace
from pathlib import Path

import torch
from filelock import FileLock
from torch import nn

from course_tools import ablation, jobs, staleness
from course_tools.fingerprints import code_fingerprint
from course_tools.import_closure import closure
from course_tools.numeric_platform import numeric_platform
from toolkit.batching.batches import Batch, endless, loader
from toolkit.batching.data import CourseData, load_data
from toolkit.learning.averaging import average_state_dicts
from toolkit.learning.checkpoints import vocab_entry
from toolkit.learning.recipes import PAPER, RECIPES, Recipe
from toolkit.learning.training import History, train
from toolkit.paths import PROJECT_ROOT, SRC

RUNS = PROJECT_ROOT / "build" / "paper-run"
RECORDED = PROJECT_ROOT / "assets" / "kept-runs"  # committed copies (make kept-runs)
SAVE_EVERY, AVERAGED = 50, 5
State = dict[str, torch.Tensor]


@dataclass
class PaperRun:
    """The trained model, its loss history, and its weights at the last checkpoints."""

    model: nn.Module
    history: History
    checkpoints: dict[int, State]  # step -> weights after that step
    recipe: Recipe
    data: CourseData
    _: KW_ONLY  # the rest by name: three of them say where the run is, and read alike
    loaded_from: Path | None = None  # where it was read from, if it was not trained now
    stage: int = 7
    file: Path | None = None  # where it is kept

    def averaged(self, last: int | None = None) -> nn.Module:
        """A copy of the model holding the mean of the `last` kept checkpoints' weights (all
        of them by default)."""
        last = len(self.checkpoints) if last is None else last
        if not 1 <= last <= len(self.checkpoints):
            raise ValueError(f"this run kept {len(self.checkpoints)} checkpoints "
                             f"(steps {sorted(self.checkpoints)}): average 1 to "
                             f"{len(self.checkpoints)} of them, not {last}")
        newest = sorted(self.checkpoints)[-last:]
        model = jobs.build(self.stage, self.data, self.recipe).to(
            next(self.model.parameters()).device)
        model.load_state_dict(average_state_dicts([self.checkpoints[s] for s in newest]))
        return model.eval()


class Checkpointing(Iterator[Batch]):
    """Hands out the batches and keeps the model's weights after the chosen steps: `train`
    asks for step k + 1's batch after step k's update, and for none after the last."""

    def __init__(self, batches: Iterator[Batch], model: nn.Module, steps: set[int]):
        self.batches, self.model, self.steps = batches, model, steps
        self.done = 0  # steps whose update is finished when the next batch is asked for
        self.kept: dict[int, State] = {}

    def __next__(self) -> Batch:
        self.keep()
        self.done += 1
        return next(self.batches)

    def keep(self) -> None:
        if self.done in self.steps:
            self.kept[self.done] = {name: tensor.detach().clone()
                                    for name, tensor in self.model.state_dict().items()}


def checkpoint_steps(steps: int, count: int = AVERAGED) -> set[int]:
    """The last `count` multiples of SAVE_EVERY up to the end of the run."""
    return {steps - SAVE_EVERY * i for i in range(count) if steps - SAVE_EVERY * i > 0}


def key(recipe: Recipe, device: torch.device | str, stage: int = 7,
        data_options: dict | None = None, averaged: int = AVERAGED, src: Path = SRC) -> str:
    """What decides every bit of the run (with the code under `src`, on this checkout's
    corpus); a kept run is used only under the same key. That includes how the device rounds:
    a run committed from another CPU is trained again here."""
    code = closure(["course_tools.paper_run", staleness.stage_module(stage)], src,
                   ignore=staleness.GATE)
    parts = [code_fingerprint(code.files(src), src), staleness.corpus_hash(),
             repr(sorted(asdict(recipe).items())),
             repr(sorted((data_options or {}).items())), f"averaged {averaged}",
             str(torch.device(device)), str(torch.get_num_threads()),
             numeric_platform(device), repr(staleness.library_versions(code.libraries))]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def paper_run(seed: int = PAPER.seed, fresh: bool = False, device: torch.device | str = "cpu",
              recipe: Recipe = PAPER, runs: Path = RUNS, stage: int = 7,
              data_options: dict | None = None, variant: str = "", averaged: int = AVERAGED,
              recorded: Path = RECORDED) -> PaperRun:
    """The paper recipe's run on `seed` (or another stage's and recipe's): read back if it was
    kept under the same key (in `runs`, or committed in `recorded`), else trained (with a
    progress bar) and kept in `runs`. `fresh=True` trains it whatever is kept. While another
    process trains the same run (notebooks 10 and 13 side by side), this one waits for it
    rather than training it a second time. `variant` names another run's file and progress
    bar ("stage08-decoder-only"); `averaged` is how many checkpoints it keeps."""
    recipe = replace(recipe, seed=seed)
    data = load_data(**(data_options or {}))
    name = f"{variant}-seed{seed}" if variant else f"seed{seed}"
    path = runs / f"{name}-{key(recipe, device, stage, data_options, averaged)}.pt"
    runs.mkdir(parents=True, exist_ok=True)
    with one_at_a_time(path.with_suffix(".lock")):
        model = jobs.build(stage, data, recipe).to(device)
        vocabularies = {"src": vocab_entry(data.src_vocab), "tgt": vocab_entry(data.tgt_vocab)}
        for kept_path in [] if fresh else [path, recorded / path.name]:
            if kept_path.exists():  # read back
                kept = torch.load(kept_path, map_location=device, weights_only=True)
                if kept.get("vocabularies") != vocabularies:
                    print(f"{kept_path.name} was trained on other vocabularies than load_data "
                          f"builds here: training it again", file=sys.stderr)
                    continue
                model.load_state_dict(kept["model"])
                checkpoints = kept["checkpoints"]
                if recipe.steps in checkpoint_steps(recipe.steps, averaged):
                    checkpoints[recipe.steps] = kept["model"]  # kept once, as the model
                return PaperRun(model.eval(), History(**kept["history"]), checkpoints,
                                recipe, data, loaded_from=kept_path, stage=stage, file=kept_path)
        batches = Checkpointing(endless(loader(data.train, recipe.batch_size,
                                               seed=recipe.seed)),
                                model, checkpoint_steps(recipe.steps, averaged))
        history = train(model, sys.modules[type(model).__module__].objective, batches,
                        device=device, description=f"{variant or 'paper recipe'}, seed {seed}",
                        **recipe.training())
        batches.keep()  # the last step asks for no batch after it
        partial = path.with_suffix(".partial")
        earlier = {step: state for step, state in batches.kept.items() if step != recipe.steps}
        torch.save({"model": model.state_dict(), "history": asdict(history),
                    "checkpoints": earlier, "vocabularies": vocabularies}, partial)
        partial.replace(path)  # atomic: a reader never sees half a file
        return PaperRun(model.eval(), history, batches.kept, recipe, data, stage=stage,
                        file=path)


def subword_run(seed: int = 0, fresh: bool = False) -> PaperRun:
    """Notebook 12's model: stage 07 on the ladder's recipe, reading and writing BPE pieces."""
    return paper_run(seed, fresh, recipe=RECIPES[7], data_options=ablation.SUBWORD_DATA,
                     variant="stage07-subwords", averaged=0)


def decoder_only_run(seed: int = 0, fresh: bool = False) -> PaperRun:
    """Notebook 14's model: stage 08 on its ablation row's recipe and data, on one seed."""
    return paper_run(seed, fresh, recipe=ablation.DECODER_ONLY_RECIPE, stage=8,
                     data_options=ablation.DECODER_ONLY_DATA, variant="stage08-decoder-only",
                     averaged=0)


@contextmanager
def one_at_a_time(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on a file while the block runs: on Linux, macOS and Windows
    alike, so two processes never train the same run and write the same file."""
    with FileLock(lock):
        yield


# The kept runs by name, as `make test` and `make notebooks` ask for them, and what they are.
KEPT = {"paper": (paper_run, "paper recipe"), "subwords": (subword_run, "stage 07, BPE subwords"),
        "decoder-only": (decoder_only_run, "stage 08, decoder-only")}


def record(runs: list[PaperRun], recorded: Path = RECORDED) -> list[Path]:
    """Copy the runs into `recorded` for committing, and delete what it held for other code."""
    recorded.mkdir(parents=True, exist_ok=True)
    copies = [recorded / run.file.name for run in runs]
    for run, copy in zip(runs, copies, strict=True):
        if run.file != copy:
            shutil.copyfile(run.file, copy)
    for old in set(recorded.glob("*.pt")) - set(copies):
        old.unlink()
    return copies


def main(args: list[str]) -> None:
    """Train (or find kept) the named runs one after the other (the paper run if none is
    named), as `make notebooks` does before executing them, so that no notebook spends its
    time budget training; with `--record`, every run, then copied into assets/kept-runs/."""
    recording = args == ["--record"]
    if unknown := [name for name in args if name not in KEPT and not recording]:
        raise SystemExit(f"no kept run named {', '.join(unknown)}: name any of "
                         f"{', '.join(KEPT)}, or give --record alone to record all of them")
    torch.set_num_threads(1)  # as the notebooks run, so that they find it under the same key
    runs = []
    for name in list(KEPT) if recording else args or ["paper"]:
        make, what = KEPT[name]
        runs.append(run := make())
        if run.loaded_from:
            how = f"found kept in {run.loaded_from.parent.relative_to(PROJECT_ROOT)}/"
        else:
            how = (f"trained in {run.history.seconds:.0f} s ({RECORDED.relative_to(PROJECT_ROOT)}"
                   f"/ holds none for this code: `make kept-runs` records it)")
        print(f"{what}, seed {run.recipe.seed}: {how}, final training loss "
              f"{run.history.final_loss():.3f}", flush=True)
    if recording:
        for copy in record(runs):
            print(f"recorded {copy.relative_to(PROJECT_ROOT)} "
                  f"({copy.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main(sys.argv[1:])
