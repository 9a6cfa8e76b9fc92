"""Swap the stage-07 attention core for PyTorch's fused `scaled_dot_product_attention`.

Only `MultiHeadAttention.attend`, softmax(Q K^T / sqrt(d_k)) V, changes: the projections,
the masks and the cache stay the stage's own, and the numbers agree up to float rounding.
Two details matter on a GPU. SDPA's boolean mask is True where attention is *allowed*, the
opposite of nn.MultiheadAttention's and ours. And a causal self-attention is passed as
`is_causal=True` with no mask at all: on a GPU, in float16 or bfloat16, a mask rules out
PyTorch's flash-attention kernel.
"""

import types

import torch
import torch.nn.functional as F
from torch import nn


def sdpa_attend(
    self: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    hidden: torch.Tensor | None, is_causal: bool = False,
) -> torch.Tensor:
    """MultiHeadAttention.attend done by F.scaled_dot_product_attention."""
    if self.keep_attention:  # the fused kernel returns no weights: compute them for the plots
        return type(self).attend(self, q, k, v, hidden, is_causal)
    # q: (batch, heads, q_len, head_dim); hidden broadcasts to (batch, heads, q_len, kv_len)
    dropout = self.dropout.p if self.training else 0.0
    if is_causal:  # the stage passes the causal mask and says so: the kernel builds its own
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True,
                                              scale=1 / self.scale)
    allowed = None if hidden is None else ~hidden
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout,
                                          scale=1 / self.scale)


def use_sdpa(model: nn.Module) -> nn.Module:
    """Give every multi-head attention of a stage-07 model the fused core, in place."""
    for module in model.modules():
        if hasattr(module, "attend"):
            module.attend = types.MethodType(sdpa_attend, module)
    return model
