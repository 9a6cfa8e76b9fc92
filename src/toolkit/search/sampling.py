"""Sampling from a language model: temperature, top-k and top-p, on the stage-08 KV cache.

Greedy decoding always takes the most likely next token, so a language model says the same
sentence every time. Sampling draws the next token from the model's distribution instead,
reshaped in three common ways:

- temperature T divides the logits: T < 1 sharpens the distribution towards greedy, T > 1
  flattens it towards uniform;
- top-k keeps only the k most likely tokens (Fan et al., 2018);
- top-p, or nucleus sampling, keeps the fewest most likely tokens whose probabilities add up
  to at least p (Holtzman et al., 2020), so that the number kept follows the model's
  certainty.

The draw itself is the Gumbel-max trick: adding independent Gumbel noise to the logits and
taking the argmax picks token i with probability softmax(logits)_i, exactly. So sampling
runs the very loop greedy decoding runs (`toolkit.search.greedy.greedy_loop`), on logits
with noise added.
"""

import torch
from torch import nn

from toolkit.search.greedy import greedy_loop
from toolkit.search.stream_decoding import StreamRun
from toolkit.stage_api import restoring_mode


def truncate(logits: torch.Tensor, top_k: int | None = None,
             top_p: float | None = None) -> torch.Tensor:
    """Hide (as -inf) every token outside the top k and outside the nucleus of mass p."""
    # logits: (rows, vocab)
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k={top_k} must be 1 or more: it counts the tokens kept")
        kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (rows, 1)
        logits = logits.masked_fill(logits < kth, -torch.inf)
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p={top_p} must be in (0, 1]: it is a probability mass")
        if top_p == 1:  # the whole mass: every token, however far a float sum falls short
            return logits
        # In float64: summed in float32, the mass of 32,000 tokens reaches p before the tail
        # does, and tokens inside the nucleus would be dropped. (Apple's GPUs have no float64:
        # there the sum is done on the CPU.)
        wide = logits.to("cpu" if logits.device.type == "mps" else logits.device, torch.float64)
        ordered, order = wide.sort(dim=-1, descending=True)  # (rows, vocab)
        probabilities = ordered.softmax(dim=-1)
        before = probabilities.cumsum(dim=-1) - probabilities  # the mass of the likelier ones
        # A token is kept if the mass of those more likely than it is still below p: the
        # most likely always is, and the last one kept takes the total to p or past it.
        dropped = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before >= top_p)
        logits = logits.masked_fill(dropped.to(logits.device), -torch.inf)
    return logits


def gumbel_noise(shape: torch.Size, generator: torch.Generator | None,
                 device: torch.device) -> torch.Tensor:
    """-log(-log(U)) for U uniform in (0, 1): argmax(logits + this) samples softmax(logits)."""
    uniform = torch.rand(shape, generator=generator).clamp(min=1e-20, max=1 - 1e-7)
    return -(-uniform.log()).log().to(device)


@torch.no_grad()
def sample(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor,
    temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Continue each row of `src` (its prefix; width 0 for none) with tokens drawn from a
    decoder-only model, until <eos> or `max_len`. `temperature=0` is greedy decoding."""
    if temperature < 0:
        raise ValueError(f"temperature={temperature} must be 0 (greedy) or more")
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (rows,)
    if src.size(0) == 0:
        return []

    def next_logits(tokens: torch.Tensor, step: int) -> torch.Tensor:
        logits = run.next_logits(tokens).float()  # (rows, vocab)
        if temperature == 0:
            return logits
        logits = truncate(logits / temperature, top_k, top_p)
        return logits + gumbel_noise(logits.shape, generator, logits.device)

    with restoring_mode(model, training=False):
        run = StreamRun(model, src, max(int(limits.max()), 1))
        return greedy_loop(next_logits, limits, run.select)
