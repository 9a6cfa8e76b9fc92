"""When a committed result goes stale: what a row is stamped with, and whether it still holds.

A run of the ladder or the ablation (a `jobs.Rung`) is current only while everything that
can change its numbers is as it was when it was computed. What it is stamped with covers that
by construction, not by a list kept by hand:

- the code: the import closure (`course_tools.import_closure`) of its job, the module that
  runs every row (`course_tools.jobs`) and the stage it trains, with every course module
  they import, the data path, decoding and scoring included (`code_sha256`); the stage's
  module alone too (`stage_sha256`), to say which changed;
- the job, as data in the row (`Rung.job`): the stage, the whole recipe, load_data's options and
  the objective, compared with the job `make ladder` or `make ablation` would run for it now;
- the corpus, byte for byte (`corpus_sha256`);
- the versions of the libraries that code imports (`libraries`): tokenizers decides the
  subword vocabulary, sacreBLEU the score, datasets the order of the rows, and any of them
  may change a number on every machine, so a new version makes a row stale. PyTorch is the
  exception: its release is part of the numeric platform (`Rung.platform`), since a new
  PyTorch, like another CPU, computes the same arithmetic with other roundings. A row is
  stale under a release of PyTorch it was neither computed nor witnessed with, and
  `make ladder-check` proves it there as on another CPU: the old code run here is the
  reference, and the row keeps this platform's numbers as a witness.

Fingerprints are of behaviour (`course_tools.fingerprints`): a comment, a docstring or a
recorded move leaves them as they are, on every supported Python. `make ladder-check`
(`course_tools.ladder_check`) reruns what is stale and re-stamps what computes the same.
"""

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import cache
from importlib import metadata
from pathlib import Path

import torch

from course_tools import ablation, jobs, ladder
from course_tools.fingerprints import code_fingerprint, file_fingerprint
from course_tools.import_closure import Closure, closure
from course_tools.jobs import Rung
from toolkit.learning.recipes import RECIPES
from toolkit.outline import stage as stage_info
from toolkit.paths import SRC
from toolkit.text.corpus import DATA_DIR

JOB_MODULE = "course_tools.jobs"  # jobs.train_all runs every committed row
PLATFORM_LIBRARIES = {"torch"}  # part of the numeric platform: a witness, not a recompute
# The gate's own modules fingerprint code and compute no number: a closure that reaches them
# (the kept runs' key is computed beside their training) does not follow them.
GATE = frozenset({"course_tools.staleness", "course_tools.fingerprints",
                  "course_tools.import_closure"})


def stage_module(number: int) -> str:
    return f"stages.{stage_info(number).module}"


def stage_file(number: int, src: Path = SRC) -> Path:
    """Stage `number`'s module under `src` (another checkout's, for a baseline)."""
    return src / "stages" / f"{stage_info(number).module}.py"


def job_closure(number: int, src: Path = SRC) -> Closure:
    """The course modules a row of stage `number` runs, and the libraries they import."""
    return closure([JOB_MODULE, stage_module(number)], src)


def stamps(number: int, src: Path = SRC) -> dict:
    """What a row of stage `number` is stamped with, for the code under `src`."""
    code = job_closure(number, src)
    return {"stage_sha256": code_fingerprint([stage_file(number, src)], src),
            "code_sha256": code_fingerprint(code.files(src), src),
            "corpus_sha256": corpus_hash(),
            "libraries": library_versions(code.libraries)}


def corpus_hash() -> str:
    return file_fingerprint(sorted(DATA_DIR.glob("*.jsonl")))


def library_versions(libraries: frozenset[str]) -> dict[str, str]:
    """The installed version of each library imported by these top-level names, by its
    distribution's name, PyTorch's left to the numeric platform."""
    return {distribution: metadata.version(distribution)
            for distribution in sorted({name for top in libraries - PLATFORM_LIBRARIES
                                        for name in _distributions().get(top, [top])})}


@cache
def _distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def stamped(run: Rung) -> Rung:
    """The run with the stamps of the code, corpus and libraries here now."""
    return replace(run, **stamps(run.stage))


def current_job(run: Rung) -> dict:
    """The job `make ladder` or `make ablation` would run now for this row and seed (none, for
    a row or seed they no longer run)."""
    if run.title in ablation.every_row():
        number, recipe, _, *rest = next((job for job in ablation.jobs([run.title])
                                         if job[1].seed == run.seed), (None, None, None))
        return jobs.job_record(number, recipe, *rest) if recipe else {}
    if run.stage not in RECIPES:
        return {}
    return jobs.job_record(run.stage, replace(RECIPES[run.stage], seed=run.seed))


def torch_release(platform: str) -> str:
    """The PyTorch release a numeric platform names ("torch 2.13.0+cpu, ..." -> "2.13.0"),
    the build's local label left out: the CPU and CUDA builds of one release are one release."""
    return platform.split(",")[0].removeprefix("torch ").split("+")[0]


def why_stale(run: Rung) -> list[str]:
    """What changed since the row was computed: nothing if it is current."""
    now = stamps(run.stage)
    reasons = [what for what, stamp in (("its stage module", "stage_sha256"),
                                        ("the code its job imports", "code_sha256"),
                                        ("the corpus", "corpus_sha256"))
               if getattr(run, stamp) != now[stamp]]
    if run.libraries != now["libraries"]:
        changed = sorted(set(run.libraries.items()) ^ set(now["libraries"].items()))
        reasons.append(f"libraries ({', '.join(f'{name} {v}' for name, v in changed)})")
    if run.job != current_job(run):
        reasons.append("its job (stage, recipe, data options or objective)")
    # Seeds that `make ladder-check` never reruns record no platform: their seed 0's says it.
    proven = {torch_release(platform) for platform in (run.platform, *run.witnesses) if platform}
    if proven and torch_release(f"torch {torch.__version__}") not in proven:
        reasons.append(f"PyTorch (now {torch.__version__}; the row was computed or witnessed "
                       f"with {', '.join(sorted(proven))} only)")
    return reasons


def unchanged_while(stages: Iterable[int], work: Callable[[], list[Rung]]) -> list[Rung]:
    """The runs `work` makes, refused if the stamps of these stages moved while they trained:
    a row stamped after its run would otherwise carry code that never ran."""
    before = {number: stamps(number) for number in set(stages)}
    runs = work()
    if moved := sorted(number for number, stamped in before.items() if stamps(number) != stamped):
        raise SystemExit(f"the code, corpus or libraries of stages {moved} changed while their "
                         f"rows trained: nothing was written; run it again on code left alone")
    return runs


def is_stale(run: Rung) -> bool:
    """True if anything that computes the row's numbers changed since it was computed."""
    return bool(why_stale(run))


def stale_stages(runs: dict[int, Rung] | list[Rung]) -> list[int]:
    """Stages whose rung is stale."""
    runs = runs.values() if isinstance(runs, dict) else runs
    return sorted({entry.stage for entry in runs if is_stale(entry)})


def reproduces(live: Rung, committed: Rung) -> str:
    """Say whether a notebook's run gave its committed rung, bit for bit where the rung keeps
    its unrounded figures (else every figure as rounded in the file), and if not, why it may
    not have."""
    here = ladder.on_platform(committed, live.platform)
    compared = here or committed  # this platform's numbers, where they were proven here
    differ = [name for name, _, _ in ladder.differences(live, compared)]
    if differ and here is None:
        return (f"this run differs from the committed seed-{committed.seed} rung in "
                f"{', '.join(differ)}, computed on another numeric platform (committed: "
                f"{committed.platform or 'not recorded'}; here: {live.platform}): there the same "
                f"code rounds differently, and the difference grows over training")
    if is_stale(committed):
        if differ:
            return (f"this run differs from the committed seed-{committed.seed} rung in "
                    f"{', '.join(differ)}, and {'; '.join(why_stale(committed))} changed since "
                    f"that rung was computed: run `make ladder-check` to see which numbers moved")
        return (f"this run reproduces the committed seed-{committed.seed} rung "
                f"{precision(compared)}, but the code changed since it was computed: "
                f"`make ladder-check` proves the other rungs and re-stamps them")
    if not differ and here is not committed:
        return (f"this run reproduces the seed-{committed.seed} rung as this machine's numeric "
                f"platform computes it ({live.platform}), {precision(compared)}: the "
                f"witness `make ladder-check` proved on this platform. "
                + (f"The committed rows were computed on another platform "
                   f"({committed.platform}), where the same code and seed give other digits"
                   if committed.platform else
                   "The committed rows did not record their platform: they hold the figures "
                   "rounded, from whichever platform computed them"))
    if not differ:
        return (f"this run reproduces the committed seed-{committed.seed} rung "
                f"{precision(compared)}")
    return (f"this run differs from the committed seed-{committed.seed} rung in "
            f"{', '.join(differ)}: expected on another device or thread count "
            f"(the committed runs used one CPU thread)")


def precision(compared: Rung) -> str:
    """How closely a reproduction is compared with a committed row (or its witness here)."""
    if compared.exact:
        return "bit for bit (every figure unrounded, the loss history and the trained weights)"
    return "to its committed precision (every figure, as rounded in the file)"
