"""Checkers of attention itself: one sentence, a batch, the masks that hide keys, and the
heads with their scale."""

import re
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from stages import stage01_naive_attention as stage01
from stages import stage02_batching as stage02
from toolkit.checkers import properties
from toolkit.checkers.properties import CAUSAL, FILL, scores_problem
from toolkit.checkers.verdicts import (
    Cause,
    Hint,
    Mistake,
    exercise,
    fail_on,
    in_every_stage,
    name_of,
    passed,
    random_tensor,
)

# Attention as the stages write it, and as torch does: each is the answer to an exercise that
# asks to write attention.
ATTENTION = (*in_every_stage("Attention"), *in_every_stage("MultiHeadAttention"),
             F.scaled_dot_product_attention, F.multi_head_attention_forward,
             nn.MultiheadAttention)

UNSCALED = Cause("the scores were divided by √d, which stages 01 to 06 do not do yet",
                 "leave them unscaled: the scale arrives with multi-head attention in stage 07")


@exercise(*ATTENTION)
def attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: softmax(q k^T) v for one sentence, checked against stage 01's Attention."""
    answer = "weights = (query @ key.T).softmax(dim=-1); return weights @ value"
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
                Cause("the scores were used as weights: they are not yet a distribution over "
                      "the keys", f"turn each row into weights with softmax(dim=-1) first: "
                      f"{answer}"): scores @ v,
                Cause("each *column* of the weights sums to 1: the softmax ran over the queries",
                      f"take the softmax over the keys, the last dimension (dim=-1), so that "
                      f"each query's row sums to 1: {answer}"): scores.softmax(0) @ v,
                UNSCALED: (scores / embed_dim**0.5).softmax(-1) @ v,
            }, Cause("each query's output is not the average of the values weighted by the "
                     "softmax of its scores", answer)),
                f"{q_len} queries, {kv_len} keys, embed_dim {embed_dim}")
    passed(name_of(fn), f"{len(cases)} random sentences, with more keys than queries and fewer")


@exercise(*ATTENTION)
def batched_attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the same attention for a whole batch at once, against stage 02's Attention."""
    answer = "torch.bmm(torch.bmm(q, k.transpose(1, 2)).softmax(dim=-1), v)"
    cases = [(3, 5, 7, 8), (1, 4, 4, 6), (4, 6, 2, 16)]  # (batch, q_len, kv_len, embed_dim)
    for seed, (batch, q_len, kv_len, embed_dim) in enumerate(cases):
        torch.manual_seed(seed)
        reference = stage02.Attention(embed_dim)
        x = random_tensor(batch, q_len, embed_dim, seed=seed)
        memory = random_tensor(batch, kv_len, embed_dim, seed=seed + 10)
        case = f"batch {batch}, {q_len} queries, {kv_len} keys"
        with torch.no_grad():
            q, k, v = reference.q_proj(x), reference.k_proj(memory), reference.v_proj(memory)
            scores = q @ k.transpose(1, 2)  # (batch, q_len, kv_len)
            try:
                got = fn(q, k, v)
            except RuntimeError as error:
                fail_on(_product_problem(error, q, k), case)
                raise
            fail_on(properties.compare(got, reference(x, memory), "stage02.Attention", {
                Cause("the weights sum to 1 over the *queries* (dim=1)",
                      f"in a batch, the keys are the last dimension: softmax(dim=-1), {answer}"):
                    scores.softmax(1) @ v,
                Cause("the scores were used as weights: they are not yet a distribution over "
                      "the keys", f"apply softmax(dim=-1) first: {answer}"): scores @ v,
                UNSCALED: (scores / embed_dim**0.5).softmax(-1) @ v,
            }, Cause("a sentence's output is not the attention of that sentence alone",
                     answer)), case, stub=ZEROS if _all_zero(got) else None)
    fail_on(_once_per_sentence(fn, answer), "a batch of 1 against a batch of 4")
    passed(name_of(fn), f"{len(cases)} random batches, batch size 1 included")


def _once_per_sentence(fn: Callable, answer: str) -> Hint | None:
    """A loop over the sentences gives the right numbers; its calls grow with the batch."""
    q, k, v = (random_tensor(4, 5, 8, seed=seed) for seed in range(3))  # (batch, len, embed)
    calls = []
    for batch in (1, 4):
        fn(q[:batch], k[:batch], v[:batch])
        calls.append(getattr(fn, "calls", 0))
    if calls[1] <= calls[0]:
        return None
    return Hint(f"it makes {calls[0]} calls for a batch of 1 and {calls[1]} for a batch of 4: "
                "it runs once per sentence",
                "a Python loop over the sentences computes each one right, but one at a time; "
                "batching means one product for the whole batch",
                f"no loop: {answer}")


ZEROS = Cause("every output is 0, as the stub returns it: nothing is attended to yet",
              "score each query against every key of its own sentence, turn each row of "
              "scores into weights, and average the values with them")
TRANSPOSED = ("swap the last two dimensions only, the keys' positions and their features: "
              "k.transpose(1, 2) (or k.transpose(-2, -1)) is (batch, d, kv_len), and "
              "torch.bmm(q, k.transpose(1, 2)) is (batch, q_len, kv_len)")
# How k was turned before the product, when the product fails: the same error from q times
# each of these names the mistake.
WRONG_KEYS = {
    Cause("k.T reverses every dimension of k, (batch, kv_len, d), to (d, kv_len, batch): the "
          "batch dimension moves, so the product no longer pairs each sentence's queries with "
          "that sentence's keys", TRANSPOSED): lambda k: k.T,
    Cause("k.transpose(0, 1) moves the batch dimension: it swaps it with the keys' positions, "
          "(batch, kv_len, d) to (kv_len, batch, d), so the product no longer pairs each "
          "sentence's queries with that sentence's keys", TRANSPOSED): lambda k: k.transpose(0, 1),
    Cause("k is not transposed: q (batch, q_len, d) times k needs k as (batch, d, kv_len), "
          "its features before its positions", TRANSPOSED): lambda k: k,
}


def _product_problem(error: RuntimeError, q: torch.Tensor, k: torch.Tensor) -> Hint | None:
    """torch.bmm and @ name the sizes that clash: the very error q times a wrongly turned k
    raises names the turn (the learner's own k.T has warned already, if torch warns)."""
    for cause, turned in WRONG_KEYS.items():
        for product in (torch.bmm, torch.matmul):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    product(q, turned(k))
            except RuntimeError as wrong:
                if str(wrong) == str(error):
                    return Hint(f"the batched product fails: it raised RuntimeError: "
                                f"{error}").because(cause)
    return None


def _all_zero(output: object) -> bool:
    return isinstance(output, torch.Tensor) and output.numel() > 0 and not output.any()


BOOL_MASK = Cause("masked_fill takes a bool mask, True where a key is hidden; a float mask "
                  "would be added to the scores, not used to fill them",
                  f"dtype=torch.bool: {CAUSAL}")


# Every stage's causal mask, and torch's.
@exercise(*in_every_stage("causal_mask"), nn.Transformer.generate_square_subsequent_mask)
def causal_mask(fn: Callable[[int], torch.Tensor]) -> None:
    """Exercise: the (length, length) mask that hides each target position's future."""
    lengths = (5, 1, 2, 9)
    for length in lengths:
        mask = fn(length)
        case = f"{name_of(fn)}({length})"
        fail_on(properties.tensor_problem(mask, (length, length)), case)
        if mask.dtype != torch.bool:
            fail_on(Hint(f"the dtype is {mask.dtype}, expected torch.bool").because(BOOL_MASK),
                    case)
        fail_on(properties.causal_problem(~mask), case, stub=None if mask.any() else NOTHING)
    passed(name_of(fn), f"lengths {', '.join(map(str, lengths))}")


NOTHING = Cause("the mask is all False, as the stub returns it: it hides nothing yet",
                f"True where the key comes after the query: {CAUSAL}")


ONE_FILL = ("combine the masks first, key_padding_mask[:, None, :] | attn_mask, then fill once "
            "with torch.finfo(scores.dtype).min")
ROWS = Cause("the padding mask hides query rows, not key columns: key_padding_mask[:, :, None] "
             "is (batch, kv_len, 1), which lines the keys up with the queries",
             "hide columns: key_padding_mask[:, None, :] is (batch, 1, kv_len) and broadcasts "
             "over every query row")
SHAPES = Cause("a mask does not line up with the scores (batch, q_len, kv_len): broadcasting "
               "matches the last dimensions first",
               "key_padding_mask[:, None, :] is (batch, 1, kv_len), and attn_mask "
               "(q_len, kv_len) broadcasts as it is")
ZERO = Cause("a hidden score of 0 is an ordinary score, and softmax still gives it weight", FILL)
NO_FUTURE = Cause("attn_mask, the causal mask, is not applied: only the padding is hidden",
                  ONE_FILL)
AS_GIVEN = Cause("attn_mask is not used as it is given: True in it means hidden, and so "
                 "does it in the combined mask", ONE_FILL)
NO_PADDING = Cause("key_padding_mask is not applied: only attn_mask hides keys", ONE_FILL)
UNCHANGED = Cause("the scores come back as they came in, as the stub returns them: nothing is "
                  "hidden yet", f"fill every position either mask hides: {ONE_FILL}")
INVERTED = Cause("the mask is inverted: it hides the real keys and leaves the <pad> keys "
                 "visible. In this course True means hidden: key_padding_mask is True at <pad>, "
                 "as nn.MultiheadAttention's is (F.scaled_dot_product_attention's boolean mask "
                 "is the opposite: True there means may attend)",
                 "fill where the masks are True, as they are given: key_padding_mask[:, None, :], "
                 "never ~key_padding_mask")
SUMMED = Cause("two additive masks of finfo.min were summed: where a key is hidden by both, "
               "min + min overflows to -inf, and a row of -inf is NaN after the softmax",
               f"{ONE_FILL} (a masked_fill per mask is right too: a fill replaces, it never adds)")
TOO_LARGE = Cause("a constant like -1e9 does not fit in float16, whose range ends near ±65,504",
                  FILL)
SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
BROADCAST = re.compile(r"must match the size of tensor|shape mismatch|not broadcastable|"
                       r"expanded size")


@exercise()  # no stage returns filled scores: they fill them inside their attention
def hide(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]) -> None:
    """Exercise: hide <pad> keys and the future, so they get zero weight and nothing is NaN."""
    # Sentence 2 is all <pad>: its weights must stay finite.
    padding = torch.tensor([[False] * 6, [False] * 3 + [True] * 3, [True] * 6])  # (batch, kv)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    for seed, (q_len, attn_mask) in enumerate([(4, None), (6, future)]):
        scores = random_tensor(3, q_len, 6, seed=seed) * 4  # (batch, q_len, kv_len)
        case = f"{name_of(fn)} on scores {tuple(scores.shape)}"
        case += " with a causal mask" if attn_mask is not None else ""
        hidden = _hidden(fn, scores, padding, attn_mask, case)
        fail_on(scores_problem(hidden, scores.shape), case)
        fail_on(_hiding_problem(hidden, scores, padding, attn_mask), case)
    _hide_in_half_precision(fn, padding, future)
    passed(name_of(fn), "padded sentences, a sentence of only <pad>, a causal mask, and float16 "
                       "scores with a row hidden by both masks")


def _hidden(fn: Callable, scores: torch.Tensor, padding: torch.Tensor,
            attn_mask: torch.Tensor | None, case: str) -> object:
    """The learner's hidden scores; a mask that does not broadcast is a hint, not a crash."""
    try:
        return fn(scores.clone(), padding, attn_mask)
    except RuntimeError as error:
        if not BROADCAST.search(str(error)):
            raise
        cause = ROWS if _keys_against_queries(error, scores) else SHAPES
        raise Mistake(case, Hint(f"it raised RuntimeError: {error}").because(cause)) from None


def _keys_against_queries(error: RuntimeError, scores: torch.Tensor) -> bool:
    """torch names the two sizes that clash: kv_len against q_len is a mask of rows."""
    sizes = SIZES.search(str(error))
    q_len, kv_len = scores.shape[1:]
    return sizes is not None and q_len != kv_len and sorted(map(int, sizes.groups())) == sorted(
        (q_len, kv_len))


def _hiding_problem(hidden: torch.Tensor, scores: torch.Tensor, padding: torch.Tensor,
                    attn_mask: torch.Tensor | None) -> properties.Problem:
    """What the weights show, explained by the classic mistake the scores come from."""
    weights = hidden.softmax(dim=-1)  # (batch, q_len, kv_len)
    problem = properties.finite_problem(weights)
    if problem is None and attn_mask is not None:
        problem = properties.causal_problem(weights[:1] > 0)  # the unpadded sentence
        problem = problem and problem.because(AS_GIVEN)
    problem = problem or properties.padding_problem(weights, padding, attn_mask)
    if problem is None:
        return None
    if torch.equal(hidden, scores):
        return problem.because(UNCHANGED)
    future = torch.zeros(scores.shape[1:], dtype=torch.bool) if attn_mask is None else attn_mask
    keys = padding[:, None, :]  # (batch, 1, kv_len)
    if torch.equal(hidden, scores.masked_fill(keys | future, 0.0)):
        return problem.because(ZERO)
    low = torch.finfo(scores.dtype).min
    mistakes = [(ROWS, padding[:, : scores.size(1), None] | future),  # (batch, q_len, 1) rows
                (INVERTED, ~keys | future), (INVERTED, ~(keys | future))]
    if attn_mask is not None:
        mistakes += [(INVERTED, ~keys | ~future), (NO_FUTURE, keys), (NO_PADDING, future)]
    for cause, wrong in mistakes:
        if torch.allclose(weights, scores.masked_fill(wrong, low).softmax(-1), atol=1e-6):
            return problem.because(cause)
    return problem


def _hide_in_half_precision(fn: Callable, padding: torch.Tensor, future: torch.Tensor) -> None:
    """float16, and a mask that hides every key from query 0: in the sentence of only <pad>,
    that row is hidden by both masks. A fill replaces, it never adds, so one fill of the
    combined mask, or one per mask, gives that row equal weights. Two additive masks of
    finfo.min summed there overflow to -inf, whose row is NaN, and -1e9 does not fit."""
    blind = future.clone()
    blind[0] = True  # (q_len, kv_len): query 0 may read nothing (any boolean mask is allowed)
    scores = (random_tensor(3, 6, 6, seed=2) * 4).half()  # (batch, q_len, kv_len)
    case = f"{name_of(fn)} on float16 scores with a mask that hides every key from query 0"
    try:
        hidden = fn(scores.clone(), padding, blind)
    except RuntimeError as error:
        if "overflow" not in str(error):
            raise
        raise Mistake(case, Hint(f"it raised RuntimeError: {error}").because(TOO_LARGE)) from None
    fail_on(scores_problem(hidden, scores.shape), case)
    low = torch.finfo(scores.dtype).min
    expected = scores.masked_fill(padding[:, None, :] | blind, low).float().softmax(dim=-1)
    weights = hidden.float().softmax(dim=-1)  # (batch, q_len, kv_len)
    if torch.allclose(weights.nan_to_num(-1.0), expected, atol=1e-3):
        return
    wrong = (~torch.isclose(weights, expected, atol=1e-3)).any(dim=-1)  # (batch, q_len)
    nan = weights.isnan().any(dim=-1)  # (batch, q_len): NaN is never close, and worst
    sentence, query = (nan if nan.any() else wrong).nonzero()[0].tolist()
    symptom = Hint(f"sentence {sentence}, query {query} gets weights "
                   f"{[round(w, 3) for w in weights[sentence, query].tolist()]}, not "
                   f"{[round(w, 3) for w in expected[sentence, query].tolist()]}")
    zeros = torch.zeros_like(scores)
    summed = scores + zeros.masked_fill(padding[:, None, :], low) + zeros.masked_fill(blind, low)
    if torch.allclose(weights, summed.float().softmax(dim=-1), atol=1e-3, equal_nan=True):
        fail_on(symptom.because(SUMMED), case)
    finite = properties.finite_problem(weights)
    fail_on(symptom.because(Cause(finite.why, finite.fix) if finite else Cause(
        "where both masks hide a key, the scores are not filled as where one does", ONE_FILL)),
        case)


SPLIT_MERGE = ("def merge(x): batch, heads, length, head_dim = x.shape; "
               "return x.transpose(1, 2).reshape(batch, length, heads * head_dim)")
ONE_HEAD = Cause("it returns one head holding every feature, x[:, None], as the stub does: "
                 "nothing is split yet", properties.SPLIT)
HEAD_ZERO = Cause("merge returns head 0 alone, x[:, 0], as the stub does: the other heads are "
                  "dropped", SPLIT_MERGE)


def _same(got: object, placeholder: torch.Tensor) -> bool:
    """Whether an output is the stub's placeholder, value for value."""
    return isinstance(got, torch.Tensor) and got.shape == placeholder.shape and torch.equal(
        got, placeholder)


@exercise(*in_every_stage("MultiHeadAttention"), nn.MultiheadAttention)
def split_heads(split: Callable[[torch.Tensor, int], torch.Tensor],
                merge: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: split embed_dim into heads and merge them back, as stage 07 does."""
    undone = Cause("merge does not undo split: the heads go back after the positions, and "
                   "then their features are joined", SPLIT_MERGE)
    cases = [(2, 5, 12, 3), (3, 7, 16, 4), (1, 4, 8, 2)]  # (batch, len, embed_dim, heads)
    for seed, (batch, length, embed_dim, heads) in enumerate(cases):
        x = random_tensor(batch, length, embed_dim, seed=seed)
        case = f"{batch} sentences of {length} positions, embed_dim {embed_dim}, {heads} heads"
        parts = split(x, heads)
        fail_on(properties.split_problem(parts, x, heads), f"{name_of(split)}: {case}",
                stub=ONE_HEAD if _same(parts, x[:, None]) else None)
        merged = merge(parts)
        fail_on(properties.compare(merged, x, "the input before splitting", otherwise=undone,
                                   atol=0), f"{name_of(merge)}({name_of(split)}(x)): {case}",
                stub=HEAD_ZERO if _same(merged, parts[:, 0]) else None)
    passed(f"{name_of(split)} and {name_of(merge)}", f"{len(cases)} shapes, 2 to 4 heads")


@exercise(*ATTENTION)
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


BROADCASTS = Cause("broadcasting lines up the last dimensions, so the mask needs a 1 where the "
                   "scores have heads and query rows",
                   "key_padding_mask[:, None, None, :], of shape (batch, 1, 1, kv_len)")


AS_GIVEN_PADDING = Cause("the mask comes back as it was given, (batch, kv_len), as the stub "
                         "returns it: it is not shaped for the scores yet", BROADCASTS.fix)


@exercise()  # stage 07 shapes its padding mask inline, in MultiHeadAttention.forward
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
            fail_on(Hint(f"got {kind}, not a bool tensor",
                         "a padding mask says yes or no per key, True at <pad>",
                         f"return a bool tensor shaped to broadcast: {BROADCASTS.fix}"), case)
        try:
            filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        except RuntimeError:
            fail_on(Hint(f"a mask of shape {tuple(mask.shape)} does not broadcast against the "
                         f"scores").because(BROADCASTS), case,
                    stub=AS_GIVEN_PADDING if torch.equal(mask, padding) else None)
        if filled.shape != scores.shape:
            fail_on(Hint(f"the mask of shape {tuple(mask.shape)} grows the scores to "
                         f"{tuple(filled.shape)}").because(BROADCASTS), case)
        fail_on(properties.padding_problem(filled.softmax(-1), padding), case)
    passed(name_of(fn), "self-attention and cross-attention scores with 4 heads")
