"""Training objectives: what each stage is allowed to learn from, given what it can see.

An objective returns a `TokenLoss`, the summed loss and how many targets it scored, rather
than their mean: a mean of per-batch means would overweight a short batch, so evaluation
and multi-process training add the sums and the counts first and divide once.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F

from toolkit.batching.batches import Batch
from toolkit.stage_api import forward_batch
from toolkit.text.vocab import PAD_ID


class TokenLoss(NamedTuple):
    """A loss summed over the scored targets, with their count; `mean()` is what to minimise."""

    total: torch.Tensor  # () the summed cross-entropy
    tokens: torch.Tensor  # () how many targets were scored (<pad> never is)

    def mean(self) -> torch.Tensor:
        """The loss per scored target: what `backward()` is called on."""
        return self.total / self.tokens


def sequence_loss(
    logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy on raw logits (it applies log-softmax itself) that skips <pad> targets."""
    # logits: (batch, len, vocab), targets: (batch, len)
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )


def token_loss(
    logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0
) -> TokenLoss:
    """The summed `sequence_loss` and the number of real targets it covers."""
    total = sequence_loss(logits, targets, label_smoothing, reduction="sum")
    return TokenLoss(total, (targets != PAD_ID).sum())


def last_position(
    model: torch.nn.Module, batch: Batch, generator: torch.Generator | None = None,
    label_smoothing: float = 0.0,
) -> TokenLoss:
    """Without a causal mask every position sees the whole prefix, so score only the last one.

    For each sentence pick a prefix length n, feed tgt[:n] and predict tgt[n]. Scoring
    earlier positions would let them read the very token they must predict.
    """
    tgt = batch.tgt  # (batch, tgt_len): <bos> words <eos> <pad>...
    lengths = (tgt != PAD_ID).sum(dim=1).cpu()  # (batch,)
    draws = torch.rand(lengths.shape, generator=generator)
    n = (1 + draws * (lengths - 1)).long().to(tgt.device)  # (batch,), uniform in 1..L-1
    positions = torch.arange(tgt.size(1), device=tgt.device)  # (tgt_len,)
    prefix = tgt.masked_fill(positions >= n[:, None], PAD_ID)[:, : int(n.max())]  # (batch, max_n)
    logits = forward_batch(model, batch.src, prefix)  # (batch, max_n, vocab)
    rows = torch.arange(tgt.size(0), device=tgt.device)
    targets = torch.full_like(prefix, PAD_ID)  # (batch, max_n): <pad> is not scored
    targets[rows, n - 1] = tgt[rows, n]
    return token_loss(logits, targets, label_smoothing)


def teacher_forcing(
    model: torch.nn.Module, batch: Batch, generator: torch.Generator | None = None,
    label_smoothing: float = 0.0,
) -> TokenLoss:
    """With a causal mask every position may be scored: feed tgt[:-1], predict tgt[1:]."""
    logits = forward_batch(model, batch.src, batch.tgt[:, :-1])  # (batch, tgt_len - 1, vocab)
    return token_loss(logits, batch.tgt[:, 1:], label_smoothing)
