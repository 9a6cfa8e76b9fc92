"""Stage 01: naive attention.

One sentence at a time, no positions, no masks. One `Attention` class, built three times
with weights of its own: encoder self-attention, decoder self-attention, and cross-attention
(decoder queries, encoder keys and values). Residual connections carry each input past its
attention.
"""

import torch
from torch import nn

from toolkit import objectives
from toolkit.stage_api import check_token_ids, constructor_arguments

# With no causal mask every target position sees the whole prefix, including the token it
# would have to predict, so only the last position of a prefix may be scored.
objective = objectives.last_position


class Attention(nn.Module):
    """Each query takes an average of the values, weighted by how well its key matches."""

    def __init__(self, embed_dim: int):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.attention: torch.Tensor | None = None  # last weights, kept for the heatmaps

    def forward(self, query: torch.Tensor, key_value: torch.Tensor) -> torch.Tensor:
        # query: (q_len, embed_dim), key_value: (kv_len, embed_dim)
        q = self.q_proj(query)  # (q_len, embed_dim)
        k = self.k_proj(key_value)  # (kv_len, embed_dim)
        v = self.v_proj(key_value)  # (kv_len, embed_dim)
        scores = q @ k.T  # (q_len, kv_len)
        weights = scores.softmax(dim=-1)  # (q_len, kv_len), each row sums to 1
        self.attention = weights.detach()
        return weights @ v  # (q_len, embed_dim)


class Transformer(nn.Module):
    """The smallest encoder-decoder built on attention alone."""

    accepts_batches = False  # the toolkit feeds one unpadded sentence at a time

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int = 64):
        super().__init__()
        self.config = constructor_arguments(locals())  # what a checkpoint rebuilds it from
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim)
        self.encoder_self_attn = Attention(embed_dim)
        self.decoder_self_attn = Attention(embed_dim)
        self.cross_attn = Attention(embed_dim)
        self.out_proj = nn.Linear(embed_dim, tgt_vocab_size)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        x = self.src_embed(src)  # (src_len, embed_dim)
        return x + self.encoder_self_attn(x, x)  # (src_len, embed_dim)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        # tgt: (tgt_len,), memory: (src_len, embed_dim), the encoder output
        y = self.tgt_embed(tgt)  # (tgt_len, embed_dim)
        y = y + self.decoder_self_attn(y, y)  # (tgt_len, embed_dim)
        y = y + self.cross_attn(y, memory)  # (tgt_len, embed_dim)
        return self.out_proj(y)  # (tgt_len, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (src_len,), tgt: (tgt_len,) token ids
        check_token_ids(src, "src", dims=1, vocab_size=self.src_embed.num_embeddings)
        check_token_ids(tgt, "tgt", dims=1, vocab_size=self.tgt_embed.num_embeddings)
        return self.decode(tgt, self.encode(src))  # (tgt_len, tgt_vocab_size) logits
