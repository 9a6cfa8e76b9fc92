"""Stage 07: multi-head attention. This is the Transformer of the paper.

Attention splits embed_dim into num_heads heads of head_dim = embed_dim / num_heads. Each
head attends on its own slice of Q, K and V, so different heads can follow different
relations; the heads are concatenated and mixed by the output projection. Scores are
divided by sqrt(head_dim) so that, at initialisation, the softmax does not saturate as
heads get wider.

Stage 07 is also the model the course trains on real text, so two things that cost nothing
to read make it fast to use: attention weights are kept only when the plots ask for them,
and decoding can pass a cache (toolkit.search.cached_decoding) so that each new token reuses the
keys and values of the tokens before it instead of recomputing them.
"""

import math

import torch
from torch import nn

from toolkit import objectives
from toolkit.stage_api import check_same_batch, check_token_ids, constructor_arguments
from toolkit.text.vocab import PAD_ID

# The causal mask hides each target's future, so every position may be scored at once.
objective = objectives.teacher_forcing


class MultiHeadAttention(nn.Module):
    """Several attentions side by side, each on its own slice of the queries, keys and values."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        if embed_dim % num_heads != 0:  # New:
            raise ValueError(
                f"embed_dim={embed_dim} must be divisible by num_heads={num_heads}: each head "
                f"gets embed_dim / num_heads dimensions"
            )
        self.num_heads = num_heads  # New:
        self.head_dim = embed_dim // num_heads  # New: d_k = d_v
        self.scale = math.sqrt(self.head_dim)  # New: keeps the scores' variance near 1
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.keep_attention = False  # New: stage_api.keeping_attention turns it on for plots
        self.attention: torch.Tensor | None = None  # last weights, when keep_attention is on

    def forward(
        self,
        query: torch.Tensor,
        key_value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,  # (batch, kv_len), True at <pad>
        attn_mask: torch.Tensor | None = None,  # (q_len, kv_len), True where hidden
        is_causal: bool = False,  # New: attn_mask is the causal mask (a hint, as in nn.*)
        cache=None,  # New: toolkit.search.cached_decoding's store of earlier keys and values
    ) -> torch.Tensor:
        # query: (batch, q_len, embed_dim), key_value: (batch, kv_len, embed_dim)
        q = self.split_heads(self.q_proj(query))  # (batch, heads, q_len, head_dim)  # New:
        if cache is None:
            k = self.split_heads(self.k_proj(key_value))  # (batch, heads, kv_len, head_dim)
            v = self.split_heads(self.v_proj(key_value))  # (batch, heads, kv_len, head_dim)
        else:  # New: decoding one token at a time, reusing what earlier steps projected
            k, v = cache.keys_values(self, key_value)  # (batch, heads, kv_len, head_dim) each
        # Combine the masks first, then fill once. They broadcast against the scores, so no
        # (batch, heads, q_len, kv_len) mask is ever built.
        hidden = attn_mask  # (q_len, kv_len) or None, the same for every sentence
        if key_padding_mask is not None:  # New: (batch, 1, 1, kv_len): hide keys, every head
            padding = key_padding_mask[:, None, None, :]
            hidden = padding if hidden is None else hidden | padding
        causal_only = is_causal and key_padding_mask is None  # then hidden is the causal mask
        out = self.attend(q, k, v, hidden, causal_only)  # (batch, heads, q_len, head_dim)
        return self.out_proj(self.merge_heads(out))  # (batch, q_len, embed_dim)

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hidden: torch.Tensor | None,
        is_causal: bool = False,  # unused here, where hidden says it all; variants.sdpa uses it
    ) -> torch.Tensor:
        """softmax(Q K^T / sqrt(d_k)) V on every head at once: the one place the maths lives."""
        scores = q @ k.transpose(-2, -1) / self.scale  # (batch, heads, q_len, kv_len)  # New:
        if hidden is not None:  # the most negative finite number: -inf would make NaN rows
            scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)  # (batch, heads, q_len, kv_len), rows sum to 1
        if self.keep_attention:
            self.attention = weights.detach()
        return self.dropout(weights) @ v  # (batch, heads, q_len, head_dim)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:  # New:
        """View the last dimension as (heads, head_dim), then move heads before positions."""
        batch, length, _ = x.shape  # x: (batch, len, embed_dim)
        x = x.view(batch, length, self.num_heads, self.head_dim)  # (batch, len, heads, head_dim)
        return x.transpose(1, 2)  # (batch, heads, len, head_dim)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:  # New:
        """Undo split_heads: concatenate the heads back into embed_dim."""
        batch, _, length, _ = x.shape  # x: (batch, heads, len, head_dim)
        return x.transpose(1, 2).reshape(batch, length, -1)  # (batch, len, embed_dim)


class PositionalEncoding(nn.Module):
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

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        # x: (batch, len, embed_dim) at positions start.. (New: start > 0 when decoding cached)
        length, limit = start + x.size(1), self.encoding.size(0)
        if length > limit:
            raise ValueError(
                f"a sequence of {length} tokens is longer than max_seq_len={limit}: shorten "
                f"it, or build the model with Transformer(..., max_seq_len={length}) or more"
            )
        return x + self.encoding[start:length]  # (batch, len, embed_dim)


class FeedForward(nn.Module):
    """The same two-layer ReLU network at every position: where each token is transformed."""

    def __init__(self, embed_dim: int, ff_dim: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(embed_dim, ff_dim)
        self.linear2 = nn.Linear(ff_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (batch, len, embed_dim); no position ever sees another here
        hidden = self.dropout(torch.relu(self.linear1(x)))  # (batch, len, ff_dim)
        return self.linear2(hidden)  # (batch, len, embed_dim)


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each wrapped in Add & Norm."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(embed_dim, num_heads, dropout)  # New: heads
        self.feed_forward = FeedForward(embed_dim, ff_dim, dropout)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
        # x: (batch, src_len, embed_dim); each line is LayerNorm(x + Dropout(sublayer(x)))
        x = self.norm1(x + self.dropout(self.self_attn(x, x, key_padding_mask=src_padding)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention, feed-forward, each wrapped in Add & Norm."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(embed_dim, num_heads, dropout)  # New: heads
        self.cross_attn = MultiHeadAttention(embed_dim, num_heads, dropout)  # New: heads
        self.feed_forward = FeedForward(embed_dim, ff_dim, dropout)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.norm3 = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, y: torch.Tensor, memory: torch.Tensor, src_padding: torch.Tensor,
        future: torch.Tensor | None, cache=None,  # New: cache, a (self, cross) pair
    ) -> torch.Tensor:
        # y: (batch, tgt_len, embed_dim), memory: (batch, src_len, embed_dim)
        self_cache, cross_cache = (None, None) if cache is None else cache
        y = self.norm1(y + self.dropout(self.self_attn(
            y, y, attn_mask=future, is_causal=future is not None, cache=self_cache)))
        y = self.norm2(y + self.dropout(
            self.cross_attn(y, memory, key_padding_mask=src_padding, cache=cross_cache)))
        return self.norm3(y + self.dropout(self.feed_forward(y)))


def causal_mask(length: int, device: torch.device) -> torch.Tensor:
    """True above the diagonal: position i may look at positions 0..i, never ahead."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(diagonal=1)


class Transformer(nn.Module):
    """The smallest encoder-decoder built on attention alone."""

    accepts_batches = True

    def __init__(
        self, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int = 64,
        num_heads: int = 2,  # New: h
        num_encoder_layers: int = 2,
        num_decoder_layers: int = 2,
        ff_dim: int = 256,
        dropout: float = 0.0,
        max_seq_len: int = 256,
        scale_embeddings: bool = False,  # New: the paper's x sqrt(embed_dim), off by default
        tie_embeddings: bool | str = False,  # New: True: the paper's tgt_embed = out_proj;
        # "all": src_embed too, which needs one vocabulary shared by both languages
    ):
        super().__init__()
        self.config = constructor_arguments(locals())  # what a checkpoint rebuilds it from
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim)
        # sqrt(embed_dim) pairs with embeddings of std 1/sqrt(embed_dim), not nn.Embedding's 1:
        # otherwise the scaled embeddings drown the +-1 positional encoding.
        self.embed_scale = math.sqrt(embed_dim) if scale_embeddings else 1.0  # New:
        if scale_embeddings:  # New:
            for embedding in (self.src_embed, self.tgt_embed):
                nn.init.normal_(embedding.weight, std=embed_dim**-0.5)
        self.positions = PositionalEncoding(embed_dim, max_seq_len)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(embed_dim, num_heads, ff_dim, dropout) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(embed_dim, num_heads, ff_dim, dropout) for _ in range(num_decoder_layers))
        self.out_proj = nn.Linear(embed_dim, tgt_vocab_size)
        if tie_embeddings not in (False, True, "all"):  # New:
            raise ValueError(f'tie_embeddings is False, True or "all", not {tie_embeddings!r}')
        if tie_embeddings == "all" and src_vocab_size != tgt_vocab_size:  # New:
            raise ValueError('tie_embeddings="all" needs one vocabulary shared by source and '
                             'target (load_data(..., shared_vocab=True))')
        if tie_embeddings:  # New: one (tgt_vocab_size, embed_dim) matrix reads and writes words
            self.out_proj.weight = self.tgt_embed.weight
        if tie_embeddings == "all":  # New: and reads the source words as well
            self.src_embed.weight = self.tgt_embed.weight

    def encode(self, src: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
        x = self.src_embed(src) * self.embed_scale  # (batch, src_len, embed_dim)  # New: scale
        x = self.dropout(self.positions(x))
        for layer in self.encoder_layers:
            x = layer(x, src_padding)  # (batch, src_len, embed_dim)
        return x

    def decode(
        self, tgt: torch.Tensor, memory: torch.Tensor, src_padding: torch.Tensor, cache=None,
    ) -> torch.Tensor:
        # tgt: (batch, tgt_len), memory: (batch, src_len, embed_dim), the encoder output.
        # New: with a cache, tgt is the newest token alone, and the cache holds its past.
        start = 0 if cache is None else cache.start(tgt)
        y = self.tgt_embed(tgt) * self.embed_scale  # (batch, tgt_len, embed_dim)  # New: scale
        y = self.dropout(self.positions(y, start))
        # No target padding mask is needed: padding sits on the right, after every real
        # token, so the causal mask already hides it from every real position. A cached
        # token needs none: every key in the cache is its past.
        future = causal_mask(tgt.size(1), tgt.device) if cache is None else None
        for index, layer in enumerate(self.decoder_layers):
            layer_cache = None if cache is None else cache.layers[index]
            y = layer(y, memory, src_padding, future, layer_cache)  # (batch, tgt_len, embed_dim)
        return self.out_proj(y)  # (batch, tgt_len, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (batch, src_len), tgt: (batch, tgt_len) token ids, right-padded with <pad>
        check_token_ids(src, "src", dims=2, vocab_size=self.src_embed.num_embeddings)
        check_token_ids(tgt, "tgt", dims=2, vocab_size=self.tgt_embed.num_embeddings)
        check_same_batch(src, tgt)
        src_padding = src == PAD_ID  # (batch, src_len), True at <pad>
        memory = self.encode(src, src_padding)  # (batch, src_len, embed_dim)
        return self.decode(tgt, memory, src_padding)  # (batch, tgt_len, tgt_vocab_size) logits
