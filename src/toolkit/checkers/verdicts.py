"""How a checker speaks: a pass, or `NotYet` with its hint, and what every checker needs."""

from collections.abc import Callable

import torch

from toolkit.checkers import properties


class NotYet(Exception):
    """A wrong answer, shown as its hint alone: a traceback into the checker would only hide it."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"\N{BALLOT X} Not yet: {self}"]


def fail_on(problem: str | None, case: str) -> None:
    if problem is not None:
        raise NotYet(f"{case}: {problem}")


def passed(name: str, cases: str) -> None:
    print(f"\N{CHECK MARK} {name}: correct on {cases}.")


def name_of(fn: Callable) -> str:
    return getattr(fn, "__name__", "your function")


def scores_problem(scores: object, shape: torch.Size) -> str | None:
    """Scores are floats of the given shape: a bool mask returned instead is a common slip."""
    if problem := properties.tensor_problem(scores, shape):
        return problem
    if not scores.is_floating_point():
        return (f"got a {scores.dtype} tensor: return the scores themselves (floats), not a "
                f"mask")
    return None


def random_tensor(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
