"""When a committed result goes stale: the fingerprints a run is stamped with, and now.

A run of the ladder or the ablation records fingerprints of its stage module, of the
corpus files, and of the toolkit modules that train, decode and score it (`TRAINING_CODE`,
`REAL_TEXT_CODE` for runs on other data, `APPENDIX_CODE` for appendix stages). They are
fingerprints of behaviour
(`course_tools.fingerprints`): a comment, a docstring or a move to another package leaves
them as they are. `is_stale` compares a run's stamps with the code here; `make ladder-check`
(`course_tools.ladder_check`) reruns what is stale and re-stamps what computes the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from course_tools.fingerprints import code_fingerprint, file_fingerprint
from toolkit.outline import APPENDIX_STAGES
from toolkit.outline import stage as stage_info
from toolkit.paths import SRC
from toolkit.text.corpus import DATA_DIR

if TYPE_CHECKING:
    from course_tools.ladder import Rung

# The toolkit modules whose code changes the numbers: data, training, decoding, scoring.
TRAINING_CODE = ("tokens", "vocab", "batches", "data", "stage_api", "objectives", "training",
                 "recipes", "decoding", "greedy", "cached_decoding", "metrics", "evaluation")
# Runs on data other than load_data()'s default also depend on the code that reads it.
REAL_TEXT_CODE = ("corpus", "sources", "corpus_errors", "corpus_files", "hub", "splits",
                  "subwords", "buckets")
# Runs of an appendix stage also depend on the objectives and decoders made for it.
APPENDIX_CODE = ("stream_objectives", "stream_decoding")


def stage_file(number: int, src: Path = SRC) -> Path:
    """Stage `number`'s module under `src` (another checkout's, for a baseline)."""
    return src / "stages" / f"{stage_info(number).module}.py"


def stage_hash(number: int) -> str:
    return code_fingerprint([stage_file(number)])


def corpus_hash() -> str:
    return file_fingerprint(list(DATA_DIR.glob("*.jsonl")))


def toolkit_hash(data: dict | None = None, stage: int | None = None) -> str:
    return code_fingerprint(code_files(SRC, data, stage))


def code_files(src: Path, data: dict | None = None, stage: int | None = None) -> list[Path]:
    """The training code under `src`, found by file name in whichever package holds it."""
    appendix = stage is not None and stage_info(stage) in APPENDIX_STAGES
    names = TRAINING_CODE + (REAL_TEXT_CODE if data else ()) + (APPENDIX_CODE if appendix else ())
    found = {path.stem: path for path in (src / "toolkit").rglob("*.py") if path.stem in names}
    if missing := sorted(set(names) - set(found)):
        raise FileNotFoundError(f"no module named {', '.join(missing)} under {src / 'toolkit'}")
    return [found[name] for name in names]


def is_stale(entry: Rung) -> bool:
    """True if its stage module, the corpus or the training code changed since it was run."""
    return (entry.stage_sha256, entry.corpus_sha256, entry.toolkit_sha256) != (
        stage_hash(entry.stage), corpus_hash(), toolkit_hash(entry.data, entry.stage))


def stale_stages(runs: dict[int, Rung] | list[Rung]) -> list[int]:
    """Stages whose module, corpus or training code changed since their rung was computed."""
    runs = runs.values() if isinstance(runs, dict) else runs
    return sorted({entry.stage for entry in runs if is_stale(entry)})
