"""Proof that a model does what it should: the exercises' checkers, the properties the tests
assert, and torch.nn side by side."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.checkers import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "from_torch_nn": ["TorchNNTranslator", "WEIGHT_MAP", "copy_attention", "copy_encoder_layer",
        "load_nn_transformer"],
})
