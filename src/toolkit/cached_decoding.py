"""Greedy decoding for the stage-07 model that reuses its work between steps (a KV cache).

The plain `greedy_decode` reruns the whole model on the whole prefix at every step, so step
t costs O(t) positions. Here the source is encoded once, each decoder layer's cross-
attention keys and values are projected once, and self-attention keeps the keys and
values of earlier target positions: step t only computes the newest position. The tokens
are exactly those of `greedy_decode` (tested); only the work differs.
"""

import math

import torch
from torch import nn

from toolkit.decoding import greedy_loop
from toolkit.vocab import PAD_ID


def _attend(attention: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            hidden: torch.Tensor | None) -> torch.Tensor:
    """The stage-07 attention core for queries that are already split into heads."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(attention.head_dim)  # (batch, heads, 1, kv)
    if hidden is not None:
        scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
    return attention.out_proj(attention.merge_heads(scores.softmax(dim=-1) @ v))


@torch.no_grad()
def cached_greedy_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor
) -> list[list[int]]:
    """Same contract as `toolkit.decoding.greedy_decode`, for stage-07 models."""
    was_training = model.training
    model.eval()
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    if int(limits.max()) > model.positions.encoding.size(0):
        raise ValueError(
            f"cannot decode {int(limits.max())} tokens: the model's positional encoding "
            f"covers max_seq_len={model.positions.encoding.size(0)}")
    src_padding = src == PAD_ID  # (batch, src_len)
    memory = model.encode(src, src_padding)  # (batch, src_len, embed_dim), once
    hidden_keys = src_padding[:, None, None, :]  # (batch, 1, 1, src_len)
    cross = [(layer.cross_attn.split_heads(layer.cross_attn.k_proj(memory)),
              layer.cross_attn.split_heads(layer.cross_attn.v_proj(memory)))
             for layer in model.decoder_layers]  # per layer: (batch, heads, src_len, head_dim)
    cache: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(model.decoder_layers)

    def next_logits(tokens: torch.Tensor, step: int) -> torch.Tensor:
        """Run only the newest position through the decoder, reusing everything before it."""
        y = model.tgt_embed(tokens[:, -1:]) * model.embed_scale  # (batch, 1, embed_dim)
        y = y + model.positions.encoding[step]
        for index, layer in enumerate(model.decoder_layers):
            attn = layer.self_attn
            q = attn.split_heads(attn.q_proj(y))  # (batch, heads, 1, head_dim)
            k, v = attn.split_heads(attn.k_proj(y)), attn.split_heads(attn.v_proj(y))
            if cache[index] is not None:  # keys and values of every earlier position
                k, v = torch.cat([cache[index][0], k], dim=2), torch.cat([cache[index][1], v], 2)
            cache[index] = (k, v)
            y = layer.norm1(y + _attend(attn, q, k, v, hidden=None))  # the past only: causal
            q = layer.cross_attn.split_heads(layer.cross_attn.q_proj(y))
            y = layer.norm2(y + _attend(layer.cross_attn, q, *cross[index], hidden_keys))
            y = layer.norm3(y + layer.feed_forward(y))
        return model.out_proj(y[:, -1])  # (batch, tgt_vocab)

    decoded = greedy_loop(next_logits, limits)
    model.train(was_training)
    return decoded
