"""Stage 02: batching.

The same model, fed right-padded batches of shape (batch, len). Only the key transpose
changes: `k.T` would also swap the batch dimension, so we swap the last two. There is no
mask yet, so every query also attends to the padding: see `02_batching.ipynb`.
"""

import torch
from torch import nn

from toolkit import objectives
from toolkit.stage_api import check_same_batch, check_token_ids, constructor_arguments

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
        # query: (batch, q_len, embed_dim), key_value: (batch, kv_len, embed_dim)
        q = self.q_proj(query)  # (batch, q_len, embed_dim)
        k = self.k_proj(key_value)  # (batch, kv_len, embed_dim)
        v = self.v_proj(key_value)  # (batch, kv_len, embed_dim)
        scores = q @ k.transpose(-2, -1)  # (batch, q_len, kv_len)  # New: batched transpose
        weights = scores.softmax(dim=-1)  # (batch, q_len, kv_len), each row sums to 1
        self.attention = weights.detach()
        return weights @ v  # (batch, q_len, embed_dim)


class Transformer(nn.Module):
    """The smallest encoder-decoder built on attention alone."""

    accepts_batches = True  # New: (batch, len) tensors, right-padded with <pad>

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
        x = self.src_embed(src)  # (batch, src_len, embed_dim)
        return x + self.encoder_self_attn(x, x)  # (batch, src_len, embed_dim)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        # tgt: (batch, tgt_len), memory: (batch, src_len, embed_dim), the encoder output
        y = self.tgt_embed(tgt)  # (batch, tgt_len, embed_dim)
        y = y + self.decoder_self_attn(y, y)  # (batch, tgt_len, embed_dim)
        y = y + self.cross_attn(y, memory)  # (batch, tgt_len, embed_dim)
        return self.out_proj(y)  # (batch, tgt_len, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (batch, src_len), tgt: (batch, tgt_len) token ids, right-padded with <pad>
        check_token_ids(src, "src", dims=2, vocab_size=self.src_embed.num_embeddings)
        check_token_ids(tgt, "tgt", dims=2, vocab_size=self.tgt_embed.num_embeddings)
        check_same_batch(src, tgt)  # New: one target per source
        return self.decode(tgt, self.encode(src))  # (batch, tgt_len, tgt_vocab_size) logits
