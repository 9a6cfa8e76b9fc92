"""What a decoder-only model (stage 08) can learn from besides the translation alone.

Stage 08's own objective is stage 07's: the German positions of the stream "English <eos>
<bos> German" predict the next German token, and the English is only read. Two others:

- `language_modelling` trains on German alone, with no source at all: GPT's objective;
- `whole_stream` scores every next token of the stream, the English ones too, as a language
  model of both languages would be trained (loss on the prompt as well as the answer).
"""

import torch

from toolkit.batching.batches import Batch
from toolkit.objectives import TokenLoss, token_loss
from toolkit.text.vocab import BOS_ID, PAD_ID


def language_modelling(
    model: torch.nn.Module, batch: Batch, generator: torch.Generator | None = None,
    label_smoothing: float = 0.0,
) -> TokenLoss:
    """Every position of the target sentences predicts the next; the sources are not read."""
    logits = model.language_model(batch.tgt[:, :-1])  # (batch, tgt_len - 1, vocab)
    return token_loss(logits, batch.tgt[:, 1:], label_smoothing)


def whole_stream(
    model: torch.nn.Module, batch: Batch, generator: torch.Generator | None = None,
    label_smoothing: float = 0.0,
) -> TokenLoss:
    """Every position of "English <eos> <bos> German <eos>" predicts the next, source included."""
    stream = model.join(batch.src, batch.tgt)  # (batch, src_len + tgt_len)
    logits = model.language_model(stream[:, :-1])  # (batch, len - 1, vocab)
    # Nothing predicts from a <pad>, and nothing predicts <bos>, which is given: so a short
    # source, whose <eos> is followed by padding, is scored like a long one, whose is not.
    unscored = (stream[:, :-1] == PAD_ID) | (stream[:, 1:] == BOS_ID)  # (batch, len - 1)
    return token_loss(logits, stream[:, 1:].masked_fill(unscored, PAD_ID), label_smoothing)
