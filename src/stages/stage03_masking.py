"""Stage 03: masking.

Two boolean masks, True where a query may not look:
- a key-padding mask hides <pad> keys, in encoder self-attention and in cross-attention;
- a causal mask hides the future in decoder self-attention.
With the future hidden, every target position can be scored in one pass, not only the last.
"""

import torch
from torch import nn

from toolkit import objectives
from toolkit.stage_api import check_same_batch, check_token_ids, constructor_arguments
from toolkit.text.vocab import PAD_ID

# The causal mask hides each target's future, so every position may be scored at once.
objective = objectives.teacher_forcing  # New: teacher forcing on the whole shifted target


class Attention(nn.Module):
    """Each query takes an average of the values, weighted by how well its key matches."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.attention: torch.Tensor | None = None  # last weights, kept for the heatmaps

    def forward(
        self,
        query: torch.Tensor,
        key_value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,  # (batch, kv_len), True at <pad>  # New: keys
        attn_mask: torch.Tensor | None = None,  # (q_len, kv_len), True where hidden  # New: causal
    ) -> torch.Tensor:
        # query: (batch, q_len, embed_dim), key_value: (batch, kv_len, embed_dim)
        q = self.q_proj(query)  # (batch, q_len, embed_dim)
        k = self.k_proj(key_value)  # (batch, kv_len, embed_dim)
        v = self.v_proj(key_value)  # (batch, kv_len, embed_dim)
        scores = q @ k.transpose(-2, -1)  # (batch, q_len, kv_len)
        # Combine the masks first, then fill once with the most negative finite number:
        # -inf would turn a fully hidden row into NaN, as would two additive masks of it summed.
        hidden = torch.zeros_like(scores, dtype=torch.bool)  # (batch, q_len, kv_len)
        if key_padding_mask is not None:
            hidden = hidden | key_padding_mask[:, None, :]  # (batch, 1, kv_len): hide keys
        if attn_mask is not None:
            hidden = hidden | attn_mask  # (q_len, kv_len), the same for every sentence
        scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)  # New: one fill
        weights = scores.softmax(dim=-1)  # (batch, q_len, kv_len), each row sums to 1
        self.attention = weights.detach()
        return weights @ v  # (batch, q_len, embed_dim)


def causal_mask(length: int, device: torch.device) -> torch.Tensor:
    """True above the diagonal: position i may look at positions 0..i, never ahead."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(diagonal=1)


class Transformer(nn.Module):
    """The smallest encoder-decoder built on attention alone."""

    accepts_batches = True

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int = 64):
        super().__init__()
        self.config = constructor_arguments(locals())  # what a checkpoint rebuilds it from
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim)
        self.encoder_self_attn = Attention(embed_dim)
        self.decoder_self_attn = Attention(embed_dim)
        self.cross_attn = Attention(embed_dim)
        self.out_proj = nn.Linear(embed_dim, tgt_vocab_size)

    def encode(self, src: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
        x = self.src_embed(src)  # (batch, src_len, embed_dim)
        return x + self.encoder_self_attn(x, x, key_padding_mask=src_padding)

    def decode(
        self, tgt: torch.Tensor, memory: torch.Tensor, src_padding: torch.Tensor
    ) -> torch.Tensor:
        # tgt: (batch, tgt_len), memory: (batch, src_len, embed_dim), the encoder output
        y = self.tgt_embed(tgt)  # (batch, tgt_len, embed_dim)
        # No target padding mask is needed: padding sits on the right, after every real
        # token, so the causal mask already hides it from every real position.
        future = causal_mask(tgt.size(1), tgt.device)  # (tgt_len, tgt_len)  # New: causal
        y = y + self.decoder_self_attn(y, y, attn_mask=future)  # (batch, tgt_len, embed_dim)
        y = y + self.cross_attn(y, memory, key_padding_mask=src_padding)
        return self.out_proj(y)  # (batch, tgt_len, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (batch, src_len), tgt: (batch, tgt_len) token ids, right-padded with <pad>
        check_token_ids(src, "src", dims=2, vocab_size=self.src_embed.num_embeddings)
        check_token_ids(tgt, "tgt", dims=2, vocab_size=self.tgt_embed.num_embeddings)
        check_same_batch(src, tgt)
        src_padding = src == PAD_ID  # (batch, src_len), True at <pad>  # New: key padding
        memory = self.encode(src, src_padding)  # (batch, src_len, embed_dim)
        return self.decode(tgt, memory, src_padding)  # (batch, tgt_len, tgt_vocab_size) logits
