"""Stage 08 (appendix): decoder-only. Stage 07 without its encoder: one stream, one stack.

A decoder-only Transformer keeps the decoder's causal self-attention and its feed-forward
sublayer, and drops the encoder and the cross-attention that read it. Liu et al. (2018) used
one to summarise Wikipedia sources, and GPT (Radford et al., 2018) made it the language
model that today's chat models grow from. It reads one stream of tokens, each position
seeing only those before it, and predicts the next. To translate, the stream is the English
and then the German, "English <eos> <bos> German": the source's <eos> and the target's <bos>
part the two, and the logits of the German positions are the translation's, so training,
decoding and scoring treat it like stage 07. What the encoder gave by construction the model
must now learn: the source is read left to right only, never both ways, and which tokens are
source and which translation it can tell from the tokens alone (stage 07's cross-attention
reads the source and nothing else).

Both languages go through one embedding, so the model needs one vocabulary for both
(`load_data(..., shared_vocab=True)`). The padding of a batch's shorter sources stays inside
the stream, hidden from every query, and positions count each sentence's own tokens only, so
a sentence's outputs never depend on its neighbours' lengths. With a cache
(toolkit.search.stream_decoding) each new token reuses the keys and values of every token
before it, the source's included.
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
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim={embed_dim} must be divisible by num_heads={num_heads}: each head "
                f"gets embed_dim / num_heads dimensions"
            )
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = math.sqrt(self.head_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.keep_attention = False
        self.attention: torch.Tensor | None = None  # last weights, when keep_attention is on

    def forward(
        self,
        query: torch.Tensor,
        key_value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,  # (batch, kv_len), True at <pad>
        attn_mask: torch.Tensor | None = None,  # (q_len, kv_len), True where hidden
        is_causal: bool = False,
        cache=None,
    ) -> torch.Tensor:
        # query: (batch, q_len, embed_dim), key_value: (batch, kv_len, embed_dim)
        q = self.split_heads(self.q_proj(query))  # (batch, heads, q_len, head_dim)
        if cache is None:
            k = self.split_heads(self.k_proj(key_value))  # (batch, heads, kv_len, head_dim)
            v = self.split_heads(self.v_proj(key_value))  # (batch, heads, kv_len, head_dim)
        else:
            k, v = cache.keys_values(self, key_value)  # (batch, heads, kv_len, head_dim) each
        # Combine the masks first, then fill once. They broadcast against the scores, so no
        # (batch, heads, q_len, kv_len) mask is ever built.
        hidden = attn_mask  # (q_len, kv_len) or None, the same for every sentence
        if key_padding_mask is not None:
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
        scores = q @ k.transpose(-2, -1) / self.scale  # (batch, heads, q_len, kv_len)
        if hidden is not None:  # the most negative finite number: -inf would make NaN rows
            scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)  # (batch, heads, q_len, kv_len), rows sum to 1
        if self.keep_attention:
            self.attention = weights.detach()
        return self.dropout(weights) @ v  # (batch, heads, q_len, head_dim)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """View the last dimension as (heads, head_dim), then move heads before positions."""
        batch, length, _ = x.shape  # x: (batch, len, embed_dim)
        x = x.view(batch, length, self.num_heads, self.head_dim)  # (batch, len, heads, head_dim)
        return x.transpose(1, 2)  # (batch, heads, len, head_dim)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
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

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # x: (batch, len, embed_dim); New: positions (batch, len), each token's own place in
        # its sentence, which padding before it does not move
        limit = self.encoding.size(0)
        if positions.numel() and int(positions.max()) >= limit:
            raise ValueError(
                f"a stream of {int(positions.max()) + 1} tokens is longer than "
                f"max_seq_len={limit}: shorten it, or build the model with "
                f"Transformer(..., max_seq_len={int(positions.max()) + 1}) or more"
            )
        return x + self.encoding[positions]  # (batch, len, embed_dim)


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


class DecoderLayer(nn.Module):
    """Causal self-attention, then feed-forward, each wrapped in Add & Norm."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(embed_dim, num_heads, dropout)
        self.feed_forward = FeedForward(embed_dim, ff_dim, dropout)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, y: torch.Tensor, padding: torch.Tensor, future: torch.Tensor, cache=None,
    ) -> torch.Tensor:
        # y: (batch, len, embed_dim); New: padding (batch, past + len), True at <pad>
        y = self.norm1(y + self.dropout(self.self_attn(
            y, y, key_padding_mask=padding, attn_mask=future, is_causal=True, cache=cache)))
        return self.norm2(y + self.dropout(self.feed_forward(y)))


def causal_mask(length: int, device: torch.device, past: int = 0) -> torch.Tensor:
    """True above the diagonal: position i may look at positions 0..i, never ahead.
    New: `past` cached positions come first, and every new position may read them all."""
    return torch.ones(length, past + length, dtype=torch.bool, device=device).triu(past + 1)


class Transformer(nn.Module):
    """The Transformer's decoder alone: a language model over one stream of tokens."""

    accepts_batches = True

    def __init__(
        self, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int = 64,
        num_heads: int = 2,
        num_layers: int = 4,  # New: one stack, where stage 07 has an encoder's and a decoder's
        ff_dim: int = 256,
        dropout: float = 0.0,
        max_seq_len: int = 256,  # New: counts the source and the target, in one stream
        scale_embeddings: bool = False,
        tie_embeddings: bool = False,  # New: True ties out_proj to the one embedding
    ):
        super().__init__()
        self.config = constructor_arguments(locals())  # what a checkpoint rebuilds it from
        if src_vocab_size != tgt_vocab_size:  # New:
            raise ValueError(
                f"src_vocab_size={src_vocab_size} and tgt_vocab_size={tgt_vocab_size} differ, "
                f"but one stream reads both languages through one embedding: build the data "
                f"with load_data(..., shared_vocab=True)")
        self.embed = nn.Embedding(tgt_vocab_size, embed_dim)  # New: one, for both languages
        # sqrt(embed_dim) pairs with embeddings of std 1/sqrt(embed_dim), not nn.Embedding's 1:
        # otherwise the scaled embeddings drown the +-1 positional encoding.
        self.embed_scale = math.sqrt(embed_dim) if scale_embeddings else 1.0
        if scale_embeddings:
            nn.init.normal_(self.embed.weight, std=embed_dim**-0.5)
        self.positions = PositionalEncoding(embed_dim, max_seq_len)
        self.dropout = nn.Dropout(dropout)
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(embed_dim, num_heads, ff_dim, dropout) for _ in range(num_layers))
        self.out_proj = nn.Linear(embed_dim, tgt_vocab_size)
        if tie_embeddings:
            self.out_proj.weight = self.embed.weight

    def join(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:  # New:
        """One stream per sentence, its source then its target; the source's padding stays
        between the two, where the padding mask hides it and positions skip it."""
        # src: (batch, src_len) and tgt: (batch, tgt_len), both right-padded
        return torch.cat([src, tgt], dim=1)  # (batch, src_len + tgt_len)

    def language_model(self, stream: torch.Tensor, cache=None) -> torch.Tensor:  # New:
        """Next-token logits at every position of the stream, each reading only its past."""
        # stream: (batch, len). New: with a cache, only the newest tokens, and the cache
        # holds every token and every layer's keys and values before them.
        seen = stream if cache is None else cache.extend(stream)  # (batch, past + len)
        padding = seen == PAD_ID  # (batch, past + len), True at <pad>: never a key
        # Each token's place among its own sentence's tokens, padding not counted.
        positions = ((~padding).cumsum(dim=1) - 1).clamp(min=0)[:, -stream.size(1):]
        y = self.embed(stream) * self.embed_scale  # (batch, len, embed_dim)
        y = self.dropout(self.positions(y, positions))
        # Padding sits after the source and after the target: the padding mask hides both
        # (the causal mask alone would hide only the second from every real token).
        future = causal_mask(stream.size(1), stream.device, past=seen.size(1) - stream.size(1))
        for index, layer in enumerate(self.decoder_layers):
            layer_cache = None if cache is None else cache.layers[index]
            y = layer(y, padding, future, layer_cache)  # (batch, len, embed_dim)
        return self.out_proj(y)  # (batch, len, vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (batch, src_len), tgt: (batch, tgt_len) token ids, right-padded with <pad>
        check_token_ids(src, "src", dims=2, vocab_size=self.embed.num_embeddings)
        check_token_ids(tgt, "tgt", dims=2, vocab_size=self.embed.num_embeddings)
        check_same_batch(src, tgt)
        stream = self.join(src, tgt)  # (batch, src_len + tgt_len)  # New:
        # New: the logits of the target's positions, as stage 07's decoder gives them
        return self.language_model(stream)[:, src.size(1):]  # (batch, tgt_len, vocab_size)
