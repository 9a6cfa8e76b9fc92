"""Swap the stage-07 attention core for PyTorch's fused `scaled_dot_product_attention`.

Same projections, same masks, same numbers (up to float rounding): only the middle of
`MultiHeadAttention.forward`, softmax(Q K^T / sqrt(d_k)) V, is done by one fused kernel.
Note the mask convention: SDPA's boolean mask is True where attention is *allowed*, the
opposite of nn.MultiheadAttention's and ours.
"""

import types

import torch
import torch.nn.functional as F
from torch import nn


def sdpa_forward(
    self: nn.Module,
    query: torch.Tensor,
    key_value: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,  # (batch, kv_len), True at <pad>
    attn_mask: torch.Tensor | None = None,  # (q_len, kv_len), True where hidden
) -> torch.Tensor:
    """MultiHeadAttention.forward with the core done by F.scaled_dot_product_attention."""
    q = self.split_heads(self.q_proj(query))  # (batch, heads, q_len, head_dim)
    k = self.split_heads(self.k_proj(key_value))  # (batch, heads, kv_len, head_dim)
    v = self.split_heads(self.v_proj(key_value))  # (batch, heads, kv_len, head_dim)
    hidden = torch.zeros(q.size(0), 1, q.size(2), k.size(2), dtype=torch.bool, device=q.device)
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask[:, None, None, :]
    if attn_mask is not None:
        hidden = hidden | attn_mask
    dropout = self.dropout.p if self.training else 0.0
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=~hidden, dropout_p=dropout)
    self.attention = None  # the fused kernel does not return its weights
    return self.out_proj(self.merge_heads(out))  # (batch, q_len, embed_dim)


def use_sdpa(model: nn.Module) -> nn.Module:
    """Give every multi-head attention of a stage-07 model the fused core, in place."""
    for module in model.modules():
        if hasattr(module, "split_heads"):
            module.forward = types.MethodType(sdpa_forward, module)
    return model
