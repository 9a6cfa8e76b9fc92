"""Decoding a decoder-only model (stage 08) on a KV cache: the stream goes in once, then one
token per step.

Stage 08 reads a source and its translation as one stream, so there is no encoder output to
keep: the cache holds every layer's keys and values for every token so far, the source's
included, and the tokens themselves, from which the model reads the padding and each
token's position. The first step feeds the whole source with <bos>; each later step feeds
only the newest token. The model's own modules do all the maths, so the tokens are exactly
those of rerunning the model on the whole stream at every step (tested).
"""

import torch
from torch import nn

from toolkit.search.cached_decoding import GrowingKeysValues
from toolkit.search.greedy import greedy_loop
from toolkit.stage_api import restoring_mode


class StreamCache:
    """Every layer's keys and values so far, and the tokens they were computed from."""

    def __init__(self, num_layers: int, limit: int):
        self.layers = [GrowingKeysValues(limit) for _ in range(num_layers)]
        self.tokens: torch.Tensor | None = None  # (rows, length so far)

    def extend(self, new: torch.Tensor) -> torch.Tensor:
        """Append the tokens being fed, (rows, new), and return every token so far."""
        self.tokens = new if self.tokens is None else torch.cat([self.tokens, new], dim=1)
        return self.tokens

    def select(self, rows: torch.Tensor) -> None:
        """Row i now continues row rows[i]'s stream (beam search), the others are gone."""
        for layer in self.layers:
            layer.select(rows)
        if self.tokens is not None:
            self.tokens = self.tokens.index_select(0, rows)


class StreamRun:
    """One cached decoding run of a decoder-only model, rows moving together; the same
    `next_logits` and `select` as `cached_decoding.CachedRun`, so every search can use it."""

    def __init__(self, model: nn.Module, src: torch.Tensor, limit: int):
        self.model = model
        # The source as the stream holds it: padding first. A language model's is empty.
        self.prefix = model.join(src, src[:, :0])  # (rows, src_len)
        self.cache = StreamCache(len(model.decoder_layers), src.size(1) + limit)

    def next_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """The first step feeds the source and <bos>; later ones only the newest token."""
        if self.cache.tokens is None:
            new = torch.cat([self.prefix, tokens], dim=1)  # (rows, src_len + 1)
        else:
            new = tokens[:, -1:]  # (rows, 1)
        return self.model.language_model(new, self.cache)[:, -1]  # (rows, vocab)

    def select(self, rows: torch.Tensor, regrouped: bool = True) -> None:
        """Row i goes on from row rows[i]: the source, the keys and the values follow it."""
        self.prefix = self.prefix.index_select(0, rows)
        self.cache.select(rows)


def is_decoder_only(model: nn.Module) -> bool:
    """Stage 08 reads one stream; the earlier stages encode a source apart from the target."""
    return hasattr(model, "language_model")


@torch.no_grad()
def stream_greedy_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor
) -> list[list[int]]:
    """Same contract as `toolkit.search.greedy.greedy_decode`, for decoder-only models."""
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    if src.size(0) == 0:
        return []
    with restoring_mode(model, training=False):
        run = StreamRun(model, src, max(int(limits.max()), 1))
        return greedy_loop(lambda tokens, step: run.next_logits(tokens), limits, run.select)
