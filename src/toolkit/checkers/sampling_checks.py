"""Checkers of decoding: the nucleus that top-p sampling keeps."""

from collections.abc import Callable

import torch

from toolkit.checkers import properties
from toolkit.checkers.verdicts import Hint, exercise, fail_on, name_of, passed
from toolkit.search.sampling import sample, truncate

NUCLEUS = ("ordered, order = probabilities.sort(dim=-1, descending=True); keep a token while "
           "the mass before it, ordered.cumsum(dim=-1) - ordered, is below p; then scatter the "
           "kept flags back with order")


@exercise(truncate, sample)  # the toolkit's top-p sampling
def nucleus(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise: which tokens top-p sampling keeps, as a bool mask over the vocabulary."""
    # No ties (any of several equal tokens would do) and no sum landing on p (rounding would
    # decide), so that exactly one answer is right.
    rows = [[0.05, 0.5, 0.15, 0.3], [0.6, 0.05, 0.1, 0.25]]
    probabilities = torch.tensor(rows)  # (rows, vocab)
    for p in (0.45, 0.75, 0.9, 0.97):
        case = f"{name_of(fn)} with p = {p} on {rows}"
        kept = fn(probabilities, p)
        if not isinstance(kept, torch.Tensor) or kept.dtype != torch.bool:
            fail_on(Hint(f"got {getattr(kept, 'dtype', type(kept).__name__)}, not a bool tensor",
                         "the nucleus is a set of tokens: one yes or no per token",
                         "return a bool tensor, True for the tokens kept"), case)
        fail_on(properties.tensor_problem(kept, probabilities.shape), case)
        expected = truncate(probabilities.log(), top_p=p) > -torch.inf  # (rows, vocab)
        fail_on(_nucleus_problem(kept, expected), case)
    passed(name_of(fn), "p from 0.45 to 0.97, the probabilities out of order")


def _nucleus_problem(kept: torch.Tensor, expected: torch.Tensor) -> Hint | None:
    """How many tokens each row keeps, against the nucleus, and which way it errs."""
    if torch.equal(kept, expected):
        return None
    row = int((kept != expected).any(dim=-1).nonzero()[0])
    symptom = (f"row {row} keeps {int(kept[row].sum())} tokens, {kept[row].tolist()}, where the "
               f"nucleus holds {int(expected[row].sum())}")
    if not (kept & ~expected).any():
        why = ("it keeps too few: the token that takes the total to p (or past it) belongs to "
               "the nucleus too")
    elif not (expected & ~kept).any():
        why = "it keeps too many: it goes on past the first token that takes the total to p"
    else:
        why = "it keeps the wrong tokens: the nucleus takes them from the most likely down"
    return Hint(symptom, why, NUCLEUS)
