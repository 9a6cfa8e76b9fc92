"""Figures for the notebooks: loss curves and attention heatmaps labelled with real tokens."""

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes

from toolkit.training import History


def loss_curve(history: History, ax: Axes | None = None, label: str | None = None,
               smooth: int = 25) -> Axes:
    """Plot the raw loss faintly and its moving average boldly: the trend is what matters."""
    ax = ax or plt.subplots(figsize=(7, 3.5))[1]
    losses = np.asarray(history.losses)
    steps = np.arange(1, len(losses) + 1)
    (line,) = ax.plot(steps, losses, alpha=0.25, linewidth=0.8)
    if len(losses) >= smooth:
        average = np.convolve(losses, np.ones(smooth) / smooth, mode="valid")
        ax.plot(steps[smooth - 1 :], average, color=line.get_color(), label=label)
    ax.set(xlabel="optimiser step", ylabel="training loss (cross-entropy)", yscale="log")
    ax.grid(True, which="both", alpha=0.3)
    if label:
        ax.legend()
    return ax


def attention_heatmap(
    weights: torch.Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    ax: Axes | None = None,
    title: str = "",
) -> Axes:
    """Show who attends to whom: rows are queries, columns are keys, each row sums to 1."""
    weights = weights.detach().float().cpu()  # (query_len, key_len)
    if weights.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"weights have shape {tuple(weights.shape)} but there are {len(query_tokens)} "
            f"query and {len(key_tokens)} key tokens"
        )
    ax = ax or plt.subplots(figsize=(0.5 * len(key_tokens) + 2, 0.45 * len(query_tokens) + 1))[1]
    sns.heatmap(
        weights.numpy(), ax=ax, vmin=0.0, vmax=1.0, cmap="viridis", square=True,
        xticklabels=list(key_tokens), yticklabels=list(query_tokens),
        cbar_kws={"shrink": 0.7},
    )
    ax.set(xlabel="key (attended to)", ylabel="query (attending)", title=title)
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    return ax
