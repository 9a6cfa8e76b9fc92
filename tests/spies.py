"""Tiny stand-in models that record what the toolkit feeds them."""

import torch
from torch import nn


class Spy(nn.Module):
    """Returns learnable-looking logits and remembers every (src, tgt) it was called with."""

    def __init__(self, vocab_size: int = 12, accepts_batches: bool = True):
        super().__init__()
        self.accepts_batches = accepts_batches
        self.vocab_size = vocab_size
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.logits: torch.Tensor | None = None

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        self.calls.append((src.clone(), tgt.clone()))
        self.logits = torch.randn(*tgt.shape, self.vocab_size, requires_grad=True)
        return self.logits


class Scripted(nn.Module):
    """Emits a fixed token sequence per sentence, chosen by the sentence's first source id."""

    accepts_batches = True

    def __init__(self, scripts: dict[int, list[int]], vocab_size: int = 12):
        super().__init__()
        self.scripts = scripts
        self.vocab_size = vocab_size
        self.prefix_lengths: list[int] = []

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        # src: (batch, src_len), tgt: (batch, tgt_len)
        self.prefix_lengths.append(tgt.size(1))
        logits = torch.zeros(*tgt.shape, self.vocab_size)
        step = tgt.size(1) - 1
        for row, first in enumerate(src[:, 0].tolist()):
            script = self.scripts[first]
            logits[row, -1, script[min(step, len(script) - 1)]] = 1.0
        return logits
