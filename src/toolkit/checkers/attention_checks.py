"""Checkers of attention itself: one sentence, a batch, the masks that hide keys, and the
heads with their scale."""

from collections.abc import Callable

import torch

from stages import stage01_naive_attention as stage01
from stages import stage02_batching as stage02
from toolkit.checkers import properties
from toolkit.checkers.verdicts import (
    NotYet,
    fail_on,
    name_of,
    passed,
    random_tensor,
    scores_problem,
)

UNSCALED = ("the scores were divided by √d: stages 01 to 06 do not scale them yet; the scale "
            "arrives with multi-head attention in stage 07")


def attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: softmax(q k^T) v for one sentence, checked against stage 01's Attention."""
    cases = [(5, 7, 8), (1, 3, 4), (6, 2, 16)]  # (q_len, kv_len, embed_dim)
    for seed, (q_len, kv_len, embed_dim) in enumerate(cases):
        torch.manual_seed(seed)
        reference = stage01.Attention(embed_dim)
        x = random_tensor(q_len, embed_dim, seed=seed)  # (q_len, embed_dim)
        memory = random_tensor(kv_len, embed_dim, seed=seed + 10)  # (kv_len, embed_dim)
        with torch.no_grad():
            q, k, v = reference.q_proj(x), reference.k_proj(memory), reference.v_proj(memory)
            expected = reference(x, memory)  # (q_len, embed_dim)
            scores = q @ k.T  # (q_len, kv_len)
            fail_on(properties.compare(fn(q, k, v), expected, "stage01.Attention", {
                "the scores were used as weights: turn each row into a distribution over the "
                "keys with softmax(dim=-1) first": scores @ v,
                "each *column* of the weights sums to 1: take the softmax over the keys, the "
                "last dimension (dim=-1), so that each query's row sums to 1":
                    scores.softmax(0) @ v,
                UNSCALED: (scores / embed_dim**0.5).softmax(-1) @ v,
            }), f"{q_len} queries, {kv_len} keys, embed_dim {embed_dim}")
    passed(name_of(fn), f"{len(cases)} random sentences, with more keys than queries and fewer")


def batched_attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the same attention for a whole batch at once, against stage 02's Attention."""
    cases = [(3, 5, 7, 8), (1, 4, 4, 6), (4, 6, 2, 16)]  # (batch, q_len, kv_len, embed_dim)
    for seed, (batch, q_len, kv_len, embed_dim) in enumerate(cases):
        torch.manual_seed(seed)
        reference = stage02.Attention(embed_dim)
        x = random_tensor(batch, q_len, embed_dim, seed=seed)
        memory = random_tensor(batch, kv_len, embed_dim, seed=seed + 10)
        with torch.no_grad():
            q, k, v = reference.q_proj(x), reference.k_proj(memory), reference.v_proj(memory)
            scores = q @ k.transpose(1, 2)  # (batch, q_len, kv_len)
            fail_on(properties.compare(fn(q, k, v), reference(x, memory), "stage02.Attention", {
                "the weights sum to 1 over the *queries* (dim=1): in a batch, the keys are the "
                "last dimension, so take softmax(dim=-1)": scores.softmax(1) @ v,
                "the scores were used as weights: apply softmax(dim=-1) first": scores @ v,
                UNSCALED: (scores / embed_dim**0.5).softmax(-1) @ v,
            }), f"batch {batch}, {q_len} queries, {kv_len} keys")
    passed(name_of(fn), f"{len(cases)} random batches, batch size 1 included")


def causal_mask(fn: Callable[[int], torch.Tensor]) -> None:
    """Exercise: the (length, length) mask that hides each target position's future."""
    lengths = (5, 1, 2, 9)
    for length in lengths:
        mask = fn(length)
        case = f"{name_of(fn)}({length})"
        fail_on(properties.tensor_problem(mask, (length, length), torch.bool), case)
        fail_on(properties.causal_problem(~mask), case)
    passed(name_of(fn), f"lengths {', '.join(map(str, lengths))}")


def hide(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]) -> None:
    """Exercise: fill hidden scores once, so <pad> keys and the future get zero weight."""
    # Sentence 2 is all <pad>: its weights must stay finite.
    padding = torch.tensor([[False] * 6, [False] * 3 + [True] * 3, [True] * 6])  # (batch, kv)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    for seed, (q_len, attn_mask) in enumerate([(4, None), (6, future)]):
        scores = random_tensor(3, q_len, 6, seed=seed) * 4  # (batch, q_len, kv_len)
        hidden = fn(scores.clone(), padding, attn_mask)
        case = f"{name_of(fn)} on scores {tuple(scores.shape)}"
        case += " with a causal mask" if attn_mask is not None else ""
        fail_on(scores_problem(hidden, scores.shape), case)
        everything_hidden = padding[:, None, :] | (False if attn_mask is None else attn_mask)
        if torch.equal(hidden, scores.masked_fill(everything_hidden, 0.0)):
            raise NotYet(f"{case}: a hidden score of 0 is an ordinary score, and softmax still "
                         f"gives it weight: fill with torch.finfo(scores.dtype).min")
        weights = hidden.softmax(dim=-1)  # (batch, q_len, kv_len)
        fail_on(properties.finite_problem(weights), case)
        if attn_mask is not None:
            fail_on(properties.causal_problem(weights[:1] > 0), case)  # the unpadded sentence
        fail_on(properties.padding_problem(weights, padding, attn_mask), case)
    _hide_in_half_precision(fn, padding, future)
    passed(name_of(fn), "padded sentences, a sentence of only <pad>, a causal mask, and float16 "
                       "scores with a row hidden by both masks")


def _hide_in_half_precision(fn: Callable, padding: torch.Tensor, future: torch.Tensor) -> None:
    """float16, and a mask that hides every key from query 0: in the sentence of only <pad>,
    that row is hidden by both masks, where two fills added reach -inf (and so NaN) and a
    constant like -1e9 does not fit. One fill of the combined mask gives it equal weights."""
    blind = future.clone()
    blind[0] = True  # (q_len, kv_len): query 0 may read nothing (any boolean mask is allowed)
    scores = (random_tensor(3, 6, 6, seed=2) * 4).half()  # (batch, q_len, kv_len)
    case = f"{name_of(fn)} on float16 scores with a mask that hides every key from query 0"
    try:
        hidden = fn(scores.clone(), padding, blind)
    except RuntimeError as error:
        if "overflow" not in str(error):
            raise
        raise NotYet(f"{case}: {error}. A constant like -1e9 does not fit in float16 (its range "
                     f"ends near ±65,504): fill with torch.finfo(scores.dtype).min") from None
    fail_on(scores_problem(hidden, scores.shape), case)
    one_fill = scores.masked_fill(padding[:, None, :] | blind, torch.finfo(scores.dtype).min)
    expected = one_fill.float().softmax(dim=-1)  # (batch, q_len, kv_len)
    weights = hidden.float().softmax(dim=-1)
    if not torch.allclose(weights.nan_to_num(-1.0), expected, atol=1e-3):
        wrong = ~torch.isclose(weights, expected, atol=1e-3)  # NaN is never close
        sentence, query = wrong.any(dim=-1).nonzero()[0].tolist()
        raise NotYet(f"{case}: sentence {sentence}, query {query} gets weights "
                     f"{[round(w, 3) for w in weights[sentence, query].tolist()]}, not "
                     f"{[round(w, 3) for w in expected[sentence, query].tolist()]}. Where a key "
                     f"is hidden by both masks, two fills added overflow to -inf: combine the "
                     f"masks with | first, then fill once with torch.finfo(scores.dtype).min")


def split_heads(split: Callable[[torch.Tensor, int], torch.Tensor],
                merge: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: split embed_dim into heads and merge them back, as stage 07 does."""
    cases = [(2, 5, 12, 3), (3, 7, 16, 4), (1, 4, 8, 2)]  # (batch, len, embed_dim, heads)
    for seed, (batch, length, embed_dim, heads) in enumerate(cases):
        x = random_tensor(batch, length, embed_dim, seed=seed)
        case = f"{batch} sentences of {length} positions, embed_dim {embed_dim}, {heads} heads"
        parts = split(x, heads)
        fail_on(properties.split_problem(parts, x, heads), f"{name_of(split)}: {case}")
        fail_on(properties.mismatch(merge(parts), x, "the input before splitting", atol=0),
                 f"{name_of(merge)}({name_of(split)}(x)): {case}")
    passed(f"{name_of(split)} and {name_of(merge)}", f"{len(cases)} shapes, 2 to 4 heads")


def scaled_scores(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the scores of every head, scaled so their spread does not grow with head_dim."""
    cases = [(2, 4, 5, 6, 8), (1, 2, 3, 3, 32)]  # (batch, heads, q_len, kv_len, head_dim)
    for seed, (batch, heads, q_len, kv_len, head_dim) in enumerate(cases):
        q = random_tensor(batch, heads, q_len, head_dim, seed=seed)  # (b, heads, q_len, head_dim)
        k = random_tensor(batch, heads, kv_len, head_dim, seed=seed + 1)
        scores = fn(q, k)
        case = f"{name_of(fn)} with {heads} heads of head_dim {head_dim}"
        fail_on(scores_problem(scores, (batch, heads, q_len, kv_len)), case)
        fail_on(properties.scaling_problem(scores.softmax(-1), q, k), case)
    passed(name_of(fn), "2 and 4 heads, head_dim 8 and 32")


def head_padding_mask(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: shape the key-padding mask so it broadcasts over heads and query rows."""
    # (batch, kv_len), True at <pad>
    padding = torch.tensor([[False] * 6, [False] * 2 + [True] * 4, [False] * 5 + [True]])
    for seed, q_len in enumerate((6, 4)):  # self-attention, then cross-attention
        scores = random_tensor(3, 4, q_len, 6, seed=seed)  # (batch, heads, q_len, kv_len)
        case = f"{name_of(fn)} against scores (batch, heads, q_len, kv_len) = {tuple(scores.shape)}"
        mask = fn(padding)
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            kind = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise NotYet(f"{case}: got {kind}, expected a bool tensor, True at <pad> keys")
        try:
            filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        except RuntimeError:
            raise NotYet(f"{case}: a mask of shape {tuple(mask.shape)} does not broadcast; it "
                         f"needs a 1 for the heads and one for the query rows") from None
        if filled.shape != scores.shape:
            raise NotYet(f"{case}: the mask of shape {tuple(mask.shape)} grows the scores to "
                         f"{tuple(filled.shape)}: put the 1s where heads and query rows go")
        fail_on(properties.padding_problem(filled.softmax(-1), padding), case)
    passed(name_of(fn), "self-attention and cross-attention scores with 4 heads")
