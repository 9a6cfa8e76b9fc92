"""Figures for the notebooks: loss curves, attention heatmaps labelled with real tokens, and
the hypotheses a beam search keeps."""

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes

from toolkit.batching.batches import encode_source
from toolkit.learning.training import History
from toolkit.search.beam_search import SearchStep
from toolkit.stage_api import attention_maps, forward_batch, keeping_attention, restoring_mode
from toolkit.text.vocab import BOS, BOS_ID, EOS, Vocab


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
    return _token_grid(weights, query_tokens, key_tokens, ax, title, cmap="viridis",
                       cbar_kws={"shrink": 0.7})


def mask_heatmap(
    mask: torch.Tensor,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    ax: Axes | None = None,
    title: str = "",
) -> Axes:
    """Show a boolean attention mask: black cells are hidden from the query of their row."""
    ax = _token_grid(mask, query_tokens, key_tokens, ax, title, cmap="Greys", cbar=False,
                     linewidths=0.5, linecolor="#cccccc")
    ax.set_xlabel("key (black: hidden from this query)")
    return ax


def _token_grid(
    values: torch.Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str],
    ax: Axes | None, title: str, **style,
) -> Axes:
    """A (queries x keys) grid whose axes are labelled with the actual tokens."""
    values = values.detach().float().cpu()  # (query_len, key_len)
    if values.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"weights have shape {tuple(values.shape)} but there are {len(query_tokens)} "
            f"query and {len(key_tokens)} key tokens"
        )
    ax = ax or plt.subplots(figsize=(0.5 * len(key_tokens) + 2, 0.45 * len(query_tokens) + 1))[1]
    sns.heatmap(values.numpy(), ax=ax, vmin=0.0, vmax=1.0, square=True,
                xticklabels=list(key_tokens), yticklabels=list(query_tokens), **style)
    ax.set(xlabel="key (attended to)", ylabel="query (attending)", title=title)
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    return ax


def _title(name: str) -> str:
    """'decoder_layers.1.cross_attn' -> 'decoder layer 2: cross-attention'."""
    kind = "cross-attention" if "cross" in name else "self-attention"
    side = "encoder" if name.startswith("encoder") else "decoder"
    layer = next((part for part in name.split(".") if part.isdigit()), None)
    return f"{side} layer {int(layer) + 1}: {kind}" if layer else f"{side} {kind}"


def _roles(name: str) -> tuple[str, str]:
    """Which tokens a module's queries and keys belong to, read from its name (stage_api)."""
    if "cross" in name:
        return "target", "source"
    return ("source", "source") if name.startswith("encoder") else ("target", "target")


def sentence_attention(
    model: torch.nn.Module,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    device: torch.device | str = "cpu",
) -> plt.Figure:
    """Run one sentence pair through any stage and draw every attention module's weights."""
    src_ids = encode_source(list(source_tokens), src_vocab)
    tgt_ids = [BOS_ID] + tgt_vocab.encode(list(target_tokens))
    src = torch.tensor([src_ids], device=device)  # (1, src_len)
    tgt = torch.tensor([tgt_ids], device=device)  # (1, tgt_len)
    with torch.no_grad(), restoring_mode(model, training=False), keeping_attention(model):
        forward_batch(model, src, tgt)
        maps = attention_maps(model)
    if not maps:
        raise ValueError(f"{type(model).__name__} kept no attention weights to draw: is it a "
                         f"model from src/stages?")
    labels = {"source": [*source_tokens, EOS], "target": [BOS, *target_tokens]}
    columns = min(3, len(maps))
    rows = -(-len(maps) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6 * columns, 5 * rows), squeeze=False)
    for ax, (name, weights) in zip(axes.flat, maps.items(), strict=False):
        queries, keys = _roles(name)
        weights = weights.reshape(-1, *weights.shape[-2:])[0]  # (q_len, kv_len) of sentence 0
        attention_heatmap(weights, labels[queries], labels[keys], ax, title=_title(name))
    for ax in axes.flat[len(maps):]:
        ax.axis("off")
    figure.tight_layout()
    return figure


def beam_tree(
    steps: Sequence[SearchStep], vocab: Vocab, sentence: int = 0, ax: Axes | None = None,
) -> Axes:
    """Draw what a beam search kept at each step: a line joins each hypothesis to the one it
    extends, and a green box marks one that finished, with its length-penalised score."""
    kept = [(step.finished[sentence] | step.goes_on[sentence]).nonzero().squeeze(1).tolist()
            for step in steps]  # each step's kept extensions, best first
    rows = max(map(len, kept), default=1)
    ax = ax or plt.subplots(figsize=(1.7 * len(steps) + 1.5, 0.85 * rows + 0.8))[1]
    box = {"boxstyle": "round", "facecolor": "#dbe9f6", "edgecolor": "#4a7ab0"}
    ended = {**box, "facecolor": "#d8f0d2", "edgecolor": "#3c8c3c"}
    ax.text(0, 0, BOS, ha="center", va="center", bbox=box)
    heights = [0]  # where each live row of the previous step was drawn: <bos> at first
    for length, (step, indices) in enumerate(zip(steps, kept, strict=True), start=1):
        live_heights = []
        for height, c in enumerate(indices):
            parent = heights[int(step.parents[sentence, c])]
            ax.plot([length - 1, length], [-parent, -height], color="#999999", zorder=0)
            label = f"{vocab.itos[int(step.tokens[sentence, c])]}\n" \
                    f"{float(step.log_probs[sentence, c]):.2f}"
            finished = bool(step.finished[sentence, c])
            if finished:
                label += f"\nscore {float(step.scores[sentence, c]):.2f}"
            else:
                live_heights.append(height)  # the next step's rows, in this order
            ax.text(length, -height, label, ha="center", va="center", fontsize=9,
                    bbox=ended if finished else box)
        heights = live_heights
    ax.set(xlim=(-0.5, len(steps) + 0.5), ylim=(-rows + 0.4, 0.6), yticks=[],
           xticks=range(len(steps) + 1), xlabel="step (tokens so far)",
           title="log-probability so far under each kept token (green: finished, with its "
                 "score)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return ax
