"""Models beside the stages, for the comparisons the notebooks make: learned positions, a
pre-LN block, PyTorch's fused attention core, and a decoder whose probabilities are written
by hand."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.variants import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "hand_made": ["HandMadeModel"],
    "layer_norm_placement": ["layer_gradient_norms", "pre_ln_variant"],
    "positions": ["LearnedPositions"],
    "sdpa": ["use_sdpa"],
})
