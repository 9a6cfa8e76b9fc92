"""Properties of what stages 04 and 05 add: sinusoidal positions, and layers stacked.

Written like `toolkit.checkers.properties`: each function returns None when its property
holds, or a `Hint` (symptom, cause, fix), shown to the tests and the learner alike.
"""

import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import nn

from toolkit.checkers.properties import Problem, compare, tensor_problem
from toolkit.checkers.verdicts import Cause, Hint

# --- positions ------------------------------------------------------------------------

def angles(max_len: int, embed_dim: int, exponent: float = 1.0, shift: float = 0.0,
           multiply: bool = False) -> torch.Tensor:
    """pos / 10000^(2i/d) in float64, (max_len, embed_dim / 2); the keyword arguments build
    the classic mistakes: `exponent` times the exponent (2: a doubled one, 4i/d), the pair's
    index i moved by `shift` ((2i+1)/d with 0.5), `multiply` by 10000^(2i/d) instead."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    i = torch.arange(embed_dim // 2, dtype=torch.float64)  # (embed_dim / 2,)
    scale = 10000 ** (exponent * 2 * (i + shift) / embed_dim)  # (embed_dim / 2,)
    return position * scale if multiply else position / scale


def sinusoids(max_len: int, embed_dim: int, exponent: float = 1.0, swap: bool = False,
              cos_shift: float = 0.0, interleave: bool = True,
              multiply: bool = False) -> torch.Tensor:
    """The paper's closed form in float64; the keyword arguments build its classic mistakes,
    each as a learner would write it: a doubled exponent doubles both the sine's angle and the
    cosine's, since a learner computes the exponent once."""
    angle = angles(max_len, embed_dim, exponent, multiply=multiply)  # (max_len, embed_dim / 2)
    cos_angle = angles(max_len, embed_dim, exponent, cos_shift, multiply)
    sin, cos = angle.sin(), cos_angle.cos()
    if swap:
        sin, cos = cos_angle.cos(), angle.sin()
    if interleave:
        return torch.stack([sin, cos], dim=-1).flatten(1)  # sin on even, cos on odd dimensions
    return torch.cat([sin, cos], dim=-1)


def rotation_matrix(k: int, embed_dim: int) -> torch.Tensor:
    """M_k from the closed form, in float64: one 2x2 rotation by k·ω_i per (sin, cos) pair."""
    matrix = torch.zeros(embed_dim, embed_dim, dtype=torch.float64)
    for i in range(embed_dim // 2):
        angle = k / 10000 ** (2 * i / embed_dim)  # k * omega_i
        c, s = math.cos(angle), math.sin(angle)
        matrix[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    return matrix


FORMULA = ("PE[pos, 2i] = sin(pos / 10000^(2i/d)) and PE[pos, 2i+1] = cos of the same angle: "
           "encoding[:, 0::2] = torch.sin(angle), encoding[:, 1::2] = torch.cos(angle)")
NOT_SINUSOIDS = Cause("the values are not the paper's sinusoids", FORMULA)
MULTIPLIED = Cause("the position is multiplied by 10000^(2i/d) instead of divided by it: the "
                   "waves get faster along the dimensions, where the paper's get slower",
                   "divide: angle = pos / 10000 ** (torch.arange(0, embed_dim, 2) / embed_dim)")
ZEROS = Cause("every value is 0, as the stub returns it: no wave is written yet", FORMULA)


def encoding_problem(encoding: object, max_len: int, embed_dim: int) -> Problem:
    """Only the closed form catches wrong frequencies: the shift property holds for any (bug 8)."""
    problem = _formula_problem(encoding, max_len, embed_dim)
    if problem is None or problem.why != NOT_SINUSOIDS.why:
        return problem
    if not encoding.any():
        return problem.because(ZEROS)
    # Multiplied, the angles grow to nearly pos · 10000, where float32 keeps few digits of the
    # sine: the mistake is recognised where the angle is small enough to be computed alike.
    angle = angles(max_len, embed_dim, multiply=True).repeat_interleave(2, dim=1)
    small = angle < 100  # (max_len, embed_dim)
    multiplied = sinusoids(max_len, embed_dim, multiply=True)
    if torch.allclose(encoding.to(multiplied.dtype)[small], multiplied[small], atol=1e-3):
        return problem.because(MULTIPLIED)
    return problem


def _formula_problem(encoding: object, max_len: int, embed_dim: int) -> Problem:
    return compare(encoding, sinusoids(max_len, embed_dim), "the paper's sin/cos formula", {
        Cause("the exponent is doubled: torch.arange(0, embed_dim, 2) already gives 2i (bug 8)",
              "divide that by embed_dim, not twice it: "
              "10000 ** (torch.arange(0, embed_dim, 2) / embed_dim)"):
            sinusoids(max_len, embed_dim, exponent=2.0),
        Cause("sin and cos are swapped",
              "sin goes on the even dimensions 0, 2, 4, ..., cos on the odd ones"):
            sinusoids(max_len, embed_dim, swap=True),
        Cause("each cos uses the exponent of its own dimension, (2i+1)/d (bug 8)",
              "the dimensions 2i and 2i+1 share one angle, pos / 10000^(2i/d)"):
            sinusoids(max_len, embed_dim, cos_shift=0.5),
        Cause("the sines fill the first half and the cosines the second",
              "interleave them, sin on even dimensions and cos on odd ones: "
              "encoding[:, 0::2] = sin, encoding[:, 1::2] = cos"):
            sinusoids(max_len, embed_dim, interleave=False),
    }, NOT_SINUSOIDS)


def shift_problem(rotation: object, encoding: torch.Tensor, k: int, atol: float = 1e-4) -> Problem:
    """PE[pos + k] = M_k @ PE[pos] for every pos, with one matrix M_k."""
    embed_dim = encoding.size(1)
    if problem := tensor_problem(rotation, (embed_dim, embed_dim)):
        return problem
    rotation = rotation.to(encoding.dtype)
    shifted = encoding[:-k] @ rotation.T  # (positions, embed_dim): M_k @ PE[pos] for each pos
    block = ("one 2x2 block [[cos, sin], [-sin, cos]] of the angle k·ω_i per (sin, cos) pair, "
             "ω_i = 1 / 10000^(2i/d), on the diagonal")
    if torch.allclose(encoding[k:] @ rotation.T, encoding[:-k], atol=atol):
        return Hint(f"M_{k} takes PE[pos + {k}] back to PE[pos]", "it rotates the wrong way",
                    f"swap the signs of the sines in each 2x2 block: {block}")
    return compare(shifted, encoding[k:], f"PE[pos + {k}]", {
        Cause("M_k @ PE[pos] is PE[pos] itself: nothing rotates",
              f"each 2x2 block must rotate by the angle k·ω_i: {block}"): encoding[:-k],
    }, Cause("M_k is not the rotation that moves every position k places on", block), atol=atol)


# --- layers ------------------------------------------------------------------------------

class Call(NamedTuple):
    """One call of a layer: its arguments in their positional order, and what it returned."""

    args: tuple
    output: torch.Tensor


@contextmanager
def recording(layers: Sequence[nn.Module]) -> Iterator[list[list[Call]]]:
    """Record every call of each layer, in order: calls[i] lists the calls of layers[i].

    Keyword arguments are put in their positional place, so `layer(y, memory=x)` and
    `layer(y, x)` record the same thing.
    """
    calls: list[list[Call]] = [[] for _ in layers]

    def hook_for(layer: nn.Module, seen: list[Call]) -> Callable:
        signature = inspect.signature(layer.forward)

        def hook(module: nn.Module, args: tuple, kwargs: dict, output: torch.Tensor) -> None:
            seen.append(Call(tuple(signature.bind(*args, **kwargs).arguments.values()), output))
        return hook

    handles = [layer.register_forward_hook(hook_for(layer, seen), with_kwargs=True)
               for layer, seen in zip(layers, calls, strict=True)]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


STACKED = ("for layer in encoder_layers: x = layer(x, src_padding); then for layer in "
           "decoder_layers: y = layer(y, x, src_padding, future)")


def stacking_problem(encoder_calls: list[list[Call]], decoder_calls: list[list[Call]]) -> Problem:
    """Each layer runs once on the output of the one below; every decoder layer reads the
    *final* encoder output as its memory (the second argument of a decoder layer)."""
    for side, calls in (("encoder", encoder_calls), ("decoder", decoder_calls)):
        for index, seen in enumerate(calls):
            if len(seen) != 1:
                return Hint(f"{side} layer {index} ran {len(seen)} times",
                            "each layer of a stack runs exactly once, in order", STACKED)
        for index in range(1, len(calls)):
            (below,), (this,) = calls[index - 1], calls[index]
            if not torch.equal(this.args[0], below.output):
                return Hint(f"{side} layer {index} did not receive the output of {side} layer "
                            f"{index - 1}",
                            "each layer reads the output of the one below it, not the stack's "
                            "input", f"keep the output for the next layer: {STACKED}")
    outputs = [call.output for (call,) in encoder_calls]
    for index, (call,) in enumerate(decoder_calls):
        memory = call.args[1]
        if torch.equal(memory, outputs[-1]):
            continue
        same = [i for i, output in enumerate(outputs) if torch.equal(memory, output)]
        source = f"the output of encoder layer {same[0]}" if same else "something else"
        return Hint(f"decoder layer {index} reads {source} as its memory, not that of the "
                    f"last encoder layer, {len(outputs) - 1}",
                    "every decoder layer attends to the final encoder output, as in the paper",
                    f"run the whole encoder first, then give its last output to every decoder "
                    f"layer: {STACKED}")
    return None


def stacking_masks_problem(encoder_calls: list[list[Call]], decoder_calls: list[list[Call]],
                           padding: torch.Tensor, future: torch.Tensor) -> Problem:
    """Every layer gets the masks it was given: a layer handed no padding mask lets its queries
    read <pad> (bug 2), one handed no causal mask lets the decoder read the future (bug 4)."""
    why = {"source padding": "a layer without the padding mask lets its queries read <pad> "
                             "(bug 2)",
           "causal": "a decoder layer without the causal mask reads the future (bug 4)"}
    expected = (("encoder", encoder_calls, {1: ("source padding", padding)}),
                ("decoder", decoder_calls, {2: ("source padding", padding), 3: ("causal", future)}))
    for side, calls, masks in expected:
        for index, (call,) in enumerate(calls):
            for position, (name, mask) in masks.items():
                given = call.args[position] if len(call.args) > position else None
                if not (isinstance(given, torch.Tensor) and torch.equal(given, mask)):
                    return Hint(f"{side} layer {index} did not get the {name} mask the stack "
                                f"was given", why[name],
                                f"pass each mask on to every layer unchanged: {STACKED}")
    return None
