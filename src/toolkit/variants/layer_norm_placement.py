"""Post-LN against pre-LN: where the LayerNorm sits decides how gradients reach each layer.

The course's stage 06 is the paper's post-LN block, LayerNorm(x + Sublayer(x)). Here is a
*variant* for measurement only, not a stage of the course: the pre-LN block
x + Sublayer(LayerNorm(x)) of Xiong et al. (2020), "On Layer Normalization in the
Transformer Architecture", built from a stage-06 model without editing it.
"""

import copy
import types

import torch
from torch import nn

from toolkit.batching.batches import Batch


def _pre_ln_encoder_forward(self, x: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
    """Pre-LN encoder layer: the skip path x + ... never passes through a LayerNorm."""
    # x: (batch, src_len, embed_dim)
    h = self.norm1(x)  # (batch, src_len, embed_dim)
    x = x + self.dropout(self.self_attn(h, h, key_padding_mask=src_padding))
    return x + self.dropout(self.feed_forward(self.norm2(x)))


def _pre_ln_decoder_forward(
    self, y: torch.Tensor, memory: torch.Tensor, src_padding: torch.Tensor,
    future: torch.Tensor,
) -> torch.Tensor:
    """Pre-LN decoder layer: normalise each sublayer's input, add its output to y unchanged."""
    # y: (batch, tgt_len, embed_dim), memory: (batch, src_len, embed_dim)
    h = self.norm1(y)  # (batch, tgt_len, embed_dim)
    y = y + self.dropout(self.self_attn(h, h, attn_mask=future))
    y = y + self.dropout(self.cross_attn(self.norm2(y), memory, key_padding_mask=src_padding))
    return y + self.dropout(self.feed_forward(self.norm3(y)))


def _encode_then_norm(self, src: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
    """The stage's own encode, then the final LayerNorm that a pre-LN stack needs."""
    return self.encoder_norm(type(self).encode(self, src, src_padding))  # (batch, src_len, d)


def pre_ln_variant(model: nn.Module) -> nn.Module:
    """A copy of a stage-06 model rewired to pre-LN; the original model is left untouched.

    Pre-LN leaves the residual stream unnormalised, so a final LayerNorm follows each stack
    (as in nn.Transformer with norm_first=True): on the memory, and before `out_proj`.
    """
    variant = copy.deepcopy(model)
    for layer in variant.encoder_layers:
        layer.forward = types.MethodType(_pre_ln_encoder_forward, layer)
    for layer in variant.decoder_layers:
        layer.forward = types.MethodType(_pre_ln_decoder_forward, layer)
    embed_dim = variant.out_proj.in_features
    variant.encoder_norm = nn.LayerNorm(embed_dim)
    variant.encode = types.MethodType(_encode_then_norm, variant)
    # decode() ends with self.out_proj(y): put the decoder's final LayerNorm in front of it.
    variant.out_proj = nn.Sequential(nn.LayerNorm(embed_dim), variant.out_proj)
    return variant.to(next(model.parameters()).device)


def layer_gradient_norms(model: nn.Module, objective, batch: Batch) -> dict[str, list[float]]:
    """One backward pass on one batch: the gradient norm of each layer's parameters.

    Each number is the 2-norm of all of one layer's parameter gradients taken together,
    for encoder layers 1..N and decoder layers 1..N, bottom to top.
    """
    device = next(model.parameters()).device
    model.zero_grad(set_to_none=True)
    objective(model, batch.to(device)).mean().backward()
    norms = {}
    for side in ("encoder", "decoder"):
        norms[side] = [
            torch.sqrt(sum(p.grad.pow(2).sum() for p in layer.parameters())).item()
            for layer in getattr(model, f"{side}_layers")
        ]
    model.zero_grad(set_to_none=True)
    return norms
