"""Greedy decoding for the stage-07 model that reuses its work between steps (a KV cache).

The plain `greedy_decode` reruns the whole model on the whole prefix at every step, so step
t costs O(t) positions. Here the source is encoded once, each decoder layer's cross-
attention keys and values are projected once, and self-attention keeps the keys and values
of earlier target positions in buffers allocated once, at the decoding limit: step t only
computes the newest position. The model's own modules do all the maths (stage 07's
`decode` takes the cache), so the tokens are exactly those of `greedy_decode` (tested).
"""

import inspect

import torch
from torch import nn

from toolkit.search.greedy import greedy_loop
from toolkit.stage_api import restoring_mode
from toolkit.text.vocab import PAD_ID


class GrowingKeysValues:
    """Self-attention's keys and values so far, written in place into preallocated buffers."""

    def __init__(self, limit: int):
        self.limit, self.length = limit, 0
        self.keys: torch.Tensor | None = None  # (batch, heads, limit, head_dim)
        self.values: torch.Tensor | None = None
        self.spare: tuple[torch.Tensor, torch.Tensor] | None = None  # for select (beam search)

    def keys_values(self, attention: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Project the new positions only, append them, and return every position so far."""
        k = attention.split_heads(attention.k_proj(x))  # (batch, heads, new, head_dim)
        v = attention.split_heads(attention.v_proj(x))
        if self.keys is None:  # the first step: now the batch, dtype and device are known
            batch, heads, _, head_dim = k.shape
            self.keys = k.new_empty(batch, heads, self.limit, head_dim)
            self.values = v.new_empty(batch, heads, self.limit, head_dim)
        end = self.length + k.size(2)
        self.keys[:, :, self.length : end] = k
        self.values[:, :, self.length : end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # (batch, heads, end, head_dim)

    def select(self, rows: torch.Tensor) -> None:
        """Row i now continues row rows[i]'s prefix, and rows left out are gone (beam search):
        copy each row's past into the spare buffers, which become the cache, and keep the old
        ones as the next spares (the rows only grow once, from one per sentence to one per
        beam, so spares are allocated at most twice)."""
        if self.keys is None:
            return
        count = rows.numel()
        if self.spare is None or self.spare[0].size(0) < count:
            self.spare = (self.keys.new_empty(count, *self.keys.shape[1:]),
                          self.values.new_empty(count, *self.values.shape[1:]))
        moved = (self.spare[0][:count], self.spare[1][:count])
        for old, new in zip((self.keys, self.values), moved, strict=True):
            new[:, :, : self.length].copy_(old[:, :, : self.length].index_select(0, rows))
        self.spare = (self.keys, self.values)
        self.keys, self.values = moved


class FixedKeysValues:
    """Cross-attention's keys and values: the encoder output is fixed, so project it once."""

    def __init__(self):
        self.projected: tuple[torch.Tensor, torch.Tensor] | None = None

    def keys_values(self, attention: nn.Module, memory: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.projected is None:  # (batch, heads, src_len, head_dim) each
            self.projected = (attention.split_heads(attention.k_proj(memory)),
                              attention.split_heads(attention.v_proj(memory)))
        return self.projected


class DecoderCache:
    """One (self-attention, cross-attention) pair per decoder layer, for one decoding run."""

    def __init__(self, num_layers: int, limit: int):
        self.layers = [(GrowingKeysValues(limit), FixedKeysValues()) for _ in range(num_layers)]

    def select(self, rows: torch.Tensor, regrouped: bool) -> None:
        """Beams moved between rows of one sentence, and done sentences left (beam search):
        the growing keys follow every move. The cross-attention keys are the same for every
        row of a sentence, so they only move when the rows were `regrouped`: after the first
        step, one row per sentence becomes one per beam; later, done sentences leave."""
        for growing, fixed in self.layers:
            growing.select(rows)
            if fixed.projected is not None and regrouped:
                fixed.projected = tuple(t.index_select(0, rows) for t in fixed.projected)

    def start(self, tgt: torch.Tensor) -> int:
        """The position of the token being fed: how many the cache already holds."""
        if tgt.size(1) != 1:
            raise ValueError(f"a cached decoder takes one new token per step, got {tgt.size(1)}")
        return self.layers[0][0].length


class CachedRun:
    """What one cached decoding run carries, rows moving together: the source, encoded once,
    its padding, and the decoder's cache."""

    def __init__(self, model: nn.Module, src: torch.Tensor, limit: int):
        self.model = model
        self.src_padding = src == PAD_ID  # (rows, src_len)
        self.memory = model.encode(src, self.src_padding)  # (rows, src_len, embed_dim), once
        self.cache = DecoderCache(len(model.decoder_layers), limit)

    def next_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed only the newest token; the cache supplies every earlier one."""
        logits = self.model.decode(tokens[:, -1:], self.memory, self.src_padding, self.cache)
        return logits[:, -1]  # (rows, tgt_vocab)

    def select(self, rows: torch.Tensor, regrouped: bool = True) -> None:
        """Row i goes on from row rows[i]; unless `regrouped`, every row kept its sentence,
        and so its source (beam search's Select)."""
        if regrouped:
            self.memory = self.memory.index_select(0, rows)
            self.src_padding = self.src_padding.index_select(0, rows)
        self.cache.select(rows, regrouped)


@torch.no_grad()
def cached_greedy_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor
) -> list[list[int]]:
    """Same contract as `toolkit.search.greedy.greedy_decode`, for stage-07 models."""
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    if src.size(0) == 0:
        return []
    with restoring_mode(model, training=False):
        run = CachedRun(model, src, max(int(limits.max()), 1))
        return greedy_loop(lambda tokens, step: run.next_logits(tokens), limits, run.select)


def supports_cache(model: nn.Module) -> bool:
    """Stage 07's decode takes a cache; earlier stages (and wrappers) rerun every step."""
    decode = getattr(model, "decode", None)
    return decode is not None and "cache" in inspect.signature(decode).parameters
