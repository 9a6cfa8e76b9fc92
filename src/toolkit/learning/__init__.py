"""Training a stage: the loop and its optimiser, each stage's recipe, checkpoints and
checkpoint averaging, and what a decoder-only model can be trained on."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.learning import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "checkpoints": ["load_checkpoint"],
    "recipes": ["PAPER", "RECIPES"],
    "stream_objectives": ["language_modelling", "whole_stream"],
    "training": ["History", "PaperOptimizer", "evaluate_loss", "train", "warmup_then_decay"],
})
