"""Draw the model as it stands at a stage, with what that stage adds highlighted."""

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from toolkit.outline import STAGES
from toolkit.outline import stage as stage_info

NEW_COLOUR, OLD_COLOUR, FUTURE_LAYER_COLOUR = "#f6a04d", "#dce6f2", "#7f7f7f"


@dataclass(frozen=True)
class Part:
    """One box of the diagram: its label from each stage on, and when it is new or changed."""

    labels: dict[int, str]
    changed: tuple[int, ...] = ()
    in_layer: bool = False

    @property
    def introduced(self) -> int:
        return min(self.labels)

    def label(self, stage: int) -> str:
        return self.labels[max(s for s in self.labels if s <= stage)]

    def highlighted(self, stage: int) -> bool:
        return stage == self.introduced or stage in self.changed


def _attention(kind: str, mask: str) -> Part:
    return Part(
        {1: kind, 3: f"{kind}\n({mask} mask)", 6: f"{kind} + W_O\n({mask} mask)",
         7: f"multi-head {kind}\n+ W_O ({mask} mask)"},
        changed=(3, 6, 7), in_layer=True,
    )


def _residual() -> Part:
    return Part({1: "+ residual", 6: "Add & Norm"}, changed=(6,), in_layer=True)


def _inputs(side: str, length: str) -> Part:
    return Part({1: f"{side} tokens\n({length},)", 2: f"{side} batch\n(batch, {length})"},
                changed=(2,))


ENCODER = (
    _inputs("source", "src_len"),
    Part({1: "source embedding"}),
    Part({4: "+ positional encoding"}),
    _attention("self-attention", "padding"),
    _residual(),
    Part({6: "feed-forward"}, in_layer=True),
    Part({6: "Add & Norm"}, in_layer=True),
)
DECODER = (
    _inputs("target", "tgt_len"),
    Part({1: "target embedding"}),
    Part({4: "+ positional encoding"}),
    _attention("self-attention", "causal"),
    _residual(),
    _attention("cross-attention", "padding"),
    _residual(),
    Part({6: "feed-forward"}, in_layer=True),
    Part({6: "Add & Norm"}, in_layer=True),
    Part({1: "linear → target vocabulary"}),
)
BOX_WIDTH, BOX_HEIGHT, ROW_GAP, DECODER_X = 3.0, 0.62, 0.9, 4.4


def _draw_column(
    ax: Axes, parts: tuple[Part, ...], x: float, stage: int
) -> list[tuple[Part, float]]:
    """Draw the visible boxes bottom-up, joined by arrows; return each box with its height."""
    visible = [part for part in parts if part.introduced <= stage]
    placed = [(part, row * ROW_GAP) for row, part in enumerate(visible)]
    for part, y in placed:
        colour = NEW_COLOUR if part.highlighted(stage) else OLD_COLOUR
        ax.add_patch(FancyBboxPatch(
            (x - BOX_WIDTH / 2, y - BOX_HEIGHT / 2), BOX_WIDTH, BOX_HEIGHT,
            boxstyle="round,pad=0.02,rounding_size=0.12", facecolor=colour, edgecolor="#333333",
        ))
        ax.text(x, y, part.label(stage), ha="center", va="center", fontsize=8.5)
    for (_, low), (_, high) in zip(placed, placed[1:], strict=False):
        _arrow(ax, (x, low + BOX_HEIGHT / 2), (x, high - BOX_HEIGHT / 2))
    if stage >= 5:
        layer_heights = [y for part, y in placed if part.in_layer]
        _layer_bracket(ax, x, min(layer_heights), max(layer_heights), highlighted=stage == 5,
                       label_side=-1 if x < DECODER_X else 1)
    return placed


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], **style) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10,
                                 color="#333333", linewidth=1, **style))


def _layer_bracket(
    ax: Axes, x: float, low: float, high: float, highlighted: bool, label_side: int
) -> None:
    """Frame the repeated layer and mark it ×N, as the paper's figure does."""
    colour = NEW_COLOUR if highlighted else FUTURE_LAYER_COLOUR
    margin = BOX_HEIGHT / 2 + 0.12
    ax.add_patch(FancyBboxPatch(
        (x - BOX_WIDTH / 2 - 0.15, low - margin), BOX_WIDTH + 0.3, high - low + 2 * margin,
        boxstyle="round,pad=0.02,rounding_size=0.15", facecolor="none", edgecolor=colour,
        linewidth=2, linestyle="--",
    ))
    ax.text(x + label_side * (BOX_WIDTH / 2 + 0.3), (low + high) / 2, "× N",
            ha="right" if label_side < 0 else "left", va="center",
            fontsize=11, color=colour, fontweight="bold")


def model_diagram(stage: int, ax: Axes | None = None) -> Axes:
    """The encoder (left) feeds every cross-attention of the decoder (right)."""
    info = stage_info(stage)
    if info not in STAGES:
        raise ValueError(f"stage {stage:02d} has no encoder to draw: the diagram shows stages "
                         f"01 to {STAGES[-1].number:02d}, the encoder-decoder")
    ax = ax or plt.subplots(figsize=(7.5, 0.55 * len(DECODER) + 1.2))[1]
    encoder = _draw_column(ax, ENCODER, 0.0, stage)
    decoder = _draw_column(ax, DECODER, DECODER_X, stage)
    encoder_top = encoder[-1][1]
    for part, y in decoder:
        if part.label(stage).startswith(("cross-attention", "multi-head cross")):
            _arrow(ax, (BOX_WIDTH / 2, encoder_top), (DECODER_X - BOX_WIDTH / 2, y),
                   connectionstyle="arc3,rad=-0.2")
    ax.set(xlim=(-2.4, DECODER_X + 2.4), ylim=(-0.7, decoder[-1][1] + 0.7), aspect="equal")
    ax.axis("off")
    ax.set_title(f"Stage {info.number:02d}: {info.title}  (orange: new in this stage)",
                 fontsize=10)
    return ax
