"""Stage 04: positional encoding.

The encoder's attention sees a set, not a sequence: without positions, "the dog sees the cat"
and "the cat sees the dog" look the same to it, and so to the decoder. Adding a fixed
sinusoidal vector to each embedding gives every position its own signature, and makes a
shift by k positions one linear map, the same at every position: the paper hoped this would
let attention learn relative offsets (whether training does is another matter).
"""

import math

import torch
from torch import nn

from toolkit import objectives
from toolkit.stage_api import check_same_batch, check_token_ids, constructor_arguments
from toolkit.text.vocab import PAD_ID

# The causal mask hides each target's future, so every position may be scored at once.
objective = objectives.teacher_forcing


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
        key_padding_mask: torch.Tensor | None = None,  # (batch, kv_len), True at <pad>
        attn_mask: torch.Tensor | None = None,  # (q_len, kv_len), True where hidden
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
        scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)  # (batch, q_len, kv_len), each row sums to 1
        self.attention = weights.detach()
        return weights @ v  # (batch, q_len, embed_dim)


class PositionalEncoding(nn.Module):  # New: the whole class
    """Add sin/cos waves of geometrically spaced wavelengths, one pair per two dimensions."""

    def __init__(self, embed_dim: int, max_seq_len: int = 256):
        super().__init__()
        if embed_dim % 2:
            raise ValueError(f"embed_dim={embed_dim} must be even: sin and cos come in pairs")
        position = torch.arange(max_seq_len).unsqueeze(1)  # (max_seq_len, 1)
        # 1 / 10000^(2i / embed_dim) for i = 0, 1, ...: the exponent already steps by 2.
        frequency = torch.exp(torch.arange(0, embed_dim, 2) * (-math.log(10000.0) / embed_dim))
        encoding = torch.zeros(max_seq_len, embed_dim)  # (max_seq_len, embed_dim)
        encoding[:, 0::2] = torch.sin(position * frequency)  # even dimensions
        encoding[:, 1::2] = torch.cos(position * frequency)  # odd dimensions, same frequency
        self.register_buffer("encoding", encoding)  # moves with .to(), saved, never trained

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (batch, len, embed_dim)
        length, limit = x.size(1), self.encoding.size(0)
        if length > limit:
            raise ValueError(
                f"a sequence of {length} tokens is longer than max_seq_len={limit}: shorten "
                f"it, or build the model with Transformer(..., max_seq_len={length}) or more"
            )
        return x + self.encoding[:length]  # (batch, len, embed_dim)


def causal_mask(length: int, device: torch.device) -> torch.Tensor:
    """True above the diagonal: position i may look at positions 0..i, never ahead."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(diagonal=1)


class Transformer(nn.Module):
    """The smallest encoder-decoder built on attention alone."""

    accepts_batches = True

    def __init__(
        self, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int = 64,
        max_seq_len: int = 256,  # New: longest sequence the positional encoding covers
    ):
        super().__init__()
        self.config = constructor_arguments(locals())  # what a checkpoint rebuilds it from
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim)
        self.positions = PositionalEncoding(embed_dim, max_seq_len)  # New: shared by both sides
        self.encoder_self_attn = Attention(embed_dim)
        self.decoder_self_attn = Attention(embed_dim)
        self.cross_attn = Attention(embed_dim)
        self.out_proj = nn.Linear(embed_dim, tgt_vocab_size)

    def encode(self, src: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
        x = self.positions(self.src_embed(src))  # (batch, src_len, embed_dim)  # New: + PE
        return x + self.encoder_self_attn(x, x, key_padding_mask=src_padding)

    def decode(
        self, tgt: torch.Tensor, memory: torch.Tensor, src_padding: torch.Tensor
    ) -> torch.Tensor:
        # tgt: (batch, tgt_len), memory: (batch, src_len, embed_dim), the encoder output
        y = self.positions(self.tgt_embed(tgt))  # (batch, tgt_len, embed_dim)  # New: + PE
        # No target padding mask is needed: padding sits on the right, after every real
        # token, so the causal mask already hides it from every real position.
        future = causal_mask(tgt.size(1), tgt.device)  # (tgt_len, tgt_len)
        y = y + self.decoder_self_attn(y, y, attn_mask=future)  # (batch, tgt_len, embed_dim)
        y = y + self.cross_attn(y, memory, key_padding_mask=src_padding)
        return self.out_proj(y)  # (batch, tgt_len, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (batch, src_len), tgt: (batch, tgt_len) token ids, right-padded with <pad>
        check_token_ids(src, "src", dims=2, vocab_size=self.src_embed.num_embeddings)
        check_token_ids(tgt, "tgt", dims=2, vocab_size=self.tgt_embed.num_embeddings)
        check_same_batch(src, tgt)
        src_padding = src == PAD_ID  # (batch, src_len), True at <pad>
        memory = self.encode(src, src_padding)  # (batch, src_len, embed_dim)
        return self.decode(tgt, memory, src_padding)  # (batch, tgt_len, tgt_vocab_size) logits
