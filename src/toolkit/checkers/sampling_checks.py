"""Checkers of decoding: the nucleus that top-p sampling keeps."""

from collections.abc import Callable

import torch

from toolkit.checkers import properties
from toolkit.checkers.verdicts import NotYet, fail_on, name_of, passed
from toolkit.search.sampling import truncate


def nucleus(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise: which tokens top-p sampling keeps, as a bool mask over the vocabulary."""
    # No ties (any of several equal tokens would do) and no sum landing on p (rounding would
    # decide), so that exactly one answer is right.
    probabilities = torch.tensor([[0.05, 0.5, 0.15, 0.3], [0.6, 0.05, 0.1, 0.25]])
    for p in (0.45, 0.75, 0.9, 0.97):
        case = f"{name_of(fn)} with p = {p} on {probabilities.tolist()}"
        kept = fn(probabilities, p)
        if not isinstance(kept, torch.Tensor) or kept.dtype != torch.bool:
            raise NotYet(f"{case}: return a bool tensor, True for the tokens kept")
        fail_on(properties.tensor_problem(kept, probabilities.shape), case)
        expected = truncate(probabilities.log(), top_p=p) > -torch.inf  # (rows, vocab)
        if torch.equal(kept, expected):
            continue
        fewer, more = int(expected.sum() - kept.sum()), int(kept.sum() - expected.sum())
        hint = ("keeps too few: keep the token that takes the total to p (or past it) too"
                if fewer > 0 and not (kept & ~expected).any() else
                "keeps too many: stop at the first token that takes the total to p"
                if more > 0 and not (expected & ~kept).any() else
                "keeps the wrong tokens: take them from the most likely down")
        raise NotYet(f"{case}: expected {expected.tolist()}, got {kept.tolist()}; it {hint}")
    passed(name_of(fn), "p from 0.45 to 0.97, the probabilities out of order")
