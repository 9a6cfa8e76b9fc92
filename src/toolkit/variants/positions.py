"""Learned position embeddings: the paper's alternative to sinusoids, for the stage-04 aside.

It has the same interface as `PositionalEncoding` (with stage 07's `start`, for cached
decoding), so an experiment can swap it in with `model.positions = LearnedPositions(...)` and
change nothing else.
"""

import torch
from torch import nn


class LearnedPositions(nn.Module):
    """One trained vector per position: fits the data, but knows no position beyond its table."""

    def __init__(self, embed_dim: int, max_seq_len: int = 256):
        super().__init__()
        self.embedding = nn.Embedding(max_seq_len, embed_dim)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        # x: (batch, len, embed_dim) at positions start.. (start > 0 in cached decoding)
        length, limit = start + x.size(1), self.embedding.num_embeddings
        if length > limit:
            raise ValueError(
                f"a sequence of {length} tokens is longer than max_seq_len={limit}: shorten "
                f"it, or build LearnedPositions with max_seq_len={length} or more"
            )
        return x + self.embedding.weight[start:length]  # (batch, len, embed_dim)
