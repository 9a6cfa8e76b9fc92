"""Greedy decoding: translate by repeatedly appending the most likely next token.

The loop here is shared: the plain decoder below reruns the model on the whole prefix, and
the KV-cached decoder (`toolkit.search.cached_decoding`) computes only the newest position.
"""

from collections.abc import Callable

import torch
from torch import nn

from toolkit.stage_api import forward_batch, restoring_mode
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID


@torch.no_grad()
def greedy_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor
) -> list[list[int]]:
    """Decode a whole batch at once; a sentence stops at <eos> or after its `max_len` tokens.

    `max_len` is one limit for all, or one per sentence, so that a sentence's translation
    never depends on the length of its neighbours. The model sees the full prefix at every
    step, so whatever masks a stage builds are rebuilt for the current length.
    """
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    if src.size(0) == 0:
        return []

    def keep(rows: torch.Tensor) -> None:
        nonlocal src
        src = src.index_select(0, rows)

    with restoring_mode(model, training=False):
        return greedy_loop(lambda tokens, step: forward_batch(model, src, tokens)[:, -1], limits,
                           keep)


NextLogits = Callable[[torch.Tensor, int], torch.Tensor]  # (live rows' tokens, step) -> logits
Keep = Callable[[torch.Tensor], None]  # (rows that go on,): the caller drops the others' state


def greedy_loop(next_logits: NextLogits, limits: torch.Tensor, keep: Keep) -> list[list[int]]:
    """The loop every greedy decoder shares; `next_logits` says how to score the next token.

    A sentence that ends (at <eos> or at its limit) leaves the batch, as in beam search:
    `keep(rows)` tells the caller which rows go on, so the model computes only live ones.
    """
    found: list[list[int]] = [[] for _ in range(limits.size(0))]
    live = (limits > 0).nonzero().squeeze(1)  # (live,) each row's sentence in the batch
    if live.numel() < limits.size(0):
        keep(live)
    tokens = torch.full((live.numel(), 1), BOS_ID, dtype=torch.long, device=limits.device)
    for step in range(int(limits.max()) if live.numel() else 0):
        next_token = next_logits(tokens, step).argmax(dim=-1)  # (live,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (live, step + 2)
        ends = (next_token == EOS_ID) | (limits[live] <= step + 1)  # (live,)
        if not ends.any():  # the step's one read from the device
            continue
        for row, sentence in zip(ends.nonzero().squeeze(1).tolist(), live[ends].tolist(),
                                 strict=True):
            found[sentence] = until_eos(tokens[row, 1:].tolist())
        going = (~ends).nonzero().squeeze(1)  # (still live,)
        if going.numel() == 0:
            break
        tokens, live = tokens[going], live[going]
        keep(going)
    return found


def until_eos(ids: list[int]) -> list[int]:
    """Keep the generated ids before <eos>; a sentence cut by its limit has no <eos> or pad."""
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else [i for i in ids if i != PAD_ID]
