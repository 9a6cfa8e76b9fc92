"""Where the toolkit's modules went when it grew packages (2026-11-26), so that an old import
fails with a message that names the new home instead of a bare "No module named".

Installed by `toolkit/__init__.py`: it answers only for the names below, and only to raise.
"""

import importlib.abc
import sys

MOVED = {
    "toolkit.ablation": "course_tools.ablation",
    "toolkit.averaging": "toolkit.learning.averaging",
    "toolkit.batch_plan": "toolkit.train.batch_plan",
    "toolkit.batches": "toolkit.batching.batches",
    "toolkit.beam_search": "toolkit.search.beam_search",
    "toolkit.buckets": "toolkit.batching.buckets",
    "toolkit.cached_decoding": "toolkit.search.cached_decoding",
    "toolkit.check": "toolkit.checkers.check",
    "toolkit.checkpoints": "toolkit.learning.checkpoints",
    "toolkit.corpus": "toolkit.text.corpus",
    "toolkit.corpus_errors": "toolkit.text.corpus_errors",
    "toolkit.corpus_files": "toolkit.text.corpus_files",
    "toolkit.data": "toolkit.batching.data",
    "toolkit.decoding": "toolkit.search.decoding",
    "toolkit.diagram": "toolkit.figures.diagram",
    "toolkit.evaluation": "toolkit.scoring.evaluation",
    "toolkit.fingerprints": "course_tools.fingerprints",
    "toolkit.from_torch_nn": "toolkit.checkers.from_torch_nn",
    "toolkit.grammar": "toolkit.text.grammar",
    "toolkit.greedy": "toolkit.search.greedy",
    "toolkit.hand_made": "toolkit.variants.hand_made",
    "toolkit.hub": "toolkit.text.hub",
    "toolkit.ladder": "course_tools.ladder",
    "toolkit.ladder_check": "course_tools.ladder_check",
    "toolkit.layer_norm_placement": "toolkit.variants.layer_norm_placement",
    "toolkit.metrics": "toolkit.scoring.metrics",
    "toolkit.mutant_guard": "course_tools.mutant_guard",
    "toolkit.mutants": "course_tools.mutants",
    "toolkit.mutations": "course_tools.mutations",
    "toolkit.number_errors": "toolkit.scoring.number_errors",
    "toolkit.paper_run": "course_tools.paper_run",
    "toolkit.plots": "toolkit.figures.plots",
    "toolkit.positions": "toolkit.variants.positions",
    "toolkit.properties": "toolkit.checkers.properties",
    "toolkit.recipes": "toolkit.learning.recipes",
    "toolkit.run_evaluation": "toolkit.train.run_evaluation",
    "toolkit.run_files": "toolkit.train.run_files",
    "toolkit.run_log": "toolkit.train.run_log",
    "toolkit.run_options": "toolkit.train.run_options",
    "toolkit.run_report": "toolkit.train.run_report",
    "toolkit.run_state": "toolkit.train.run_state",
    "toolkit.sdpa": "toolkit.variants.sdpa",
    "toolkit.sources": "toolkit.text.sources",
    "toolkit.splits": "toolkit.text.splits",
    "toolkit.stagediff": "toolkit.figures.stagediff",
    "toolkit.stop_requests": "toolkit.train.stop_requests",
    "toolkit.student": "course_tools.student",
    "toolkit.subwords": "toolkit.text.subwords",
    "toolkit.throughput": "toolkit.train.throughput",
    "toolkit.tokens": "toolkit.text.tokens",
    "toolkit.train_ddp": "toolkit.train.ddp",
    "toolkit.training": "toolkit.learning.training",
    "toolkit.training_run": "toolkit.train.training_run",
    "toolkit.vocab": "toolkit.text.vocab",
    "toolkit.world": "toolkit.train.world",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Turns an import of a moved module into an error that says where it lives now."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED:
            raise ModuleNotFoundError(
                f"{name} moved to {MOVED[name]} when the toolkit grew packages: import from "
                f"{MOVED[name]} instead")
            # No name=: `from toolkit import vocab` would then swallow it as "no such module".
        return None


def install() -> None:
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
