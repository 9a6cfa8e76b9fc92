"""What the notebooks draw: loss curves, attention maps, masks, the model diagram and the
diff between two stages."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.figures import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "diagram": ["model_diagram"],
    "plots": ["attention_heatmap", "beam_tree", "loss_curve", "mask_heatmap", "sentence_attention"],
    "stagediff": ["stage_diff"],
})
