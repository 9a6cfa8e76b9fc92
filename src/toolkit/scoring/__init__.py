"""How good a translation is: exact match, BLEU and chrF with their signatures, scores by
phenomenon, and the held-out numbers' errors sorted by kind."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.scoring import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "evaluation": ["evaluate"],
    "number_errors": ["KINDS", "NUMBERS_KIND", "RIGHT", "held_out_kinds",
        "number_translations"],
})
