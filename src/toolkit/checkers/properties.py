"""Properties that the tests assert and the exercise checkers explain, written once.

Each function returns None when its property holds, or one sentence that says what is wrong
and what to do about it. A test asserts `problem is None, problem`; `toolkit.checkers.check`
shows the same sentence to a learner as the hint. So a hint is only as good as the test behind it.
The properties of positions and stacked layers are in `toolkit.checkers.layer_properties`.
"""

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab

Problem = str | None


def _first(hits: torch.Tensor) -> list[int] | None:
    """The index of the first True in a boolean tensor, or None if there is none."""
    found = hits.nonzero()
    return found[0].tolist() if len(found) else None


def _index(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    if not shape:
        return ()
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape)))


def tensor_problem(value: object, shape: Sequence[int],
                   dtype: torch.dtype | None = None) -> Problem:
    """Check type and shape first, so that later hints can index the tensor safely."""
    if not isinstance(value, torch.Tensor):
        return f"got {type(value).__name__}, not a tensor: end the function with `return <tensor>`"
    if tuple(value.shape) != tuple(shape):
        return f"the shape is {tuple(value.shape)}, expected {tuple(shape)}"
    if dtype is not None and value.dtype != dtype:
        return f"the dtype is {value.dtype}, expected {dtype}"
    return None


def mismatch(actual: object, expected: torch.Tensor, what: str, atol: float = 1e-5) -> Problem:
    """Point at the largest difference: 'not close' alone does not say where to look."""
    if problem := tensor_problem(actual, expected.shape):
        return problem
    actual = actual.to(expected.dtype)
    if not torch.isfinite(actual).all():
        where = _index(int((~torch.isfinite(actual)).flatten().nonzero()[0]), actual.shape)
        return f"NaN or inf at index {where}, where {what} is {expected[where].item():.4g}"
    gap = (actual - expected).abs()
    if gap.max() <= atol:
        return None
    where = _index(int(gap.argmax()), gap.shape)
    at = f" at index {where}" if where else ""
    return (f"differs from {what} by {gap.max().item():.2g}{at}: "
            f"expected {expected[where].item():.4g}, got {actual[where].item():.4g}")


def compare(actual: object, expected: torch.Tensor, what: str,
            mistakes: dict[str, torch.Tensor] | None = None, atol: float = 1e-5) -> Problem:
    """Like `mismatch`, but name a classic mistake when the result equals its known output."""
    problem = mismatch(actual, expected, what, atol)
    if problem is None or not isinstance(actual, torch.Tensor):
        return problem
    for hint, wrong in (mistakes or {}).items():
        if actual.shape == wrong.shape and torch.allclose(actual.to(wrong.dtype), wrong, atol=atol):
            return hint
    return problem


# --- data: framing and padding ---------------------------------------------------------

def framing_problem(ids: object, words: list[str], vocab: Vocab) -> Problem:
    """A target is <bos>, one id per word (<unk> for unknown words), then <eos>."""
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        return f"got {ids!r}: return a list of ints"
    if not ids or ids[0] != BOS_ID:
        return (f"the ids of {words} must start with <bos> (id {BOS_ID}), the decoder's "
                f"first input; got {ids}")
    if ids[-1] != EOS_ID:
        return f"the ids of {words} must end with <eos> (id {EOS_ID}), so the model learns to stop"
    if len(ids) != len(words) + 2:
        return f"{words} has {len(words)} words, so it needs {len(words) + 2} ids; got {len(ids)}"
    for word, index in zip(words, ids[1:-1], strict=True):
        if word not in vocab.stoi and index != UNK_ID:
            other_case = " (the vocabulary is case-sensitive: never change a word's case)" if (
                vocab.stoi.get(word.lower()) == index) else ""
            return (f"'{word}' is not in the vocabulary: it must become <unk> (id {UNK_ID}), "
                    f"got {index}{other_case}")
        if word in vocab.stoi and index != vocab.stoi[word]:
            return f"'{word}' has id {vocab.stoi[word]} in vocab.stoi, got {index}"
    return None


def padded_batch_problem(padded: object, sequences: Sequence[list[int]]) -> Problem:
    """Every id of every sequence survives, <pad> fills the rest, and nothing is wider."""
    if not isinstance(padded, torch.Tensor) or padded.dim() != 2:
        return f"got {type(padded).__name__}: return a (batch, longest) tensor"
    if padded.size(0) != len(sequences):
        return f"{padded.size(0)} rows for {len(sequences)} sequences: one row per sequence"
    longest = max(len(sequence) for sequence in sequences)
    for row, sequence in enumerate(sequences):
        if len(sequence) > padded.size(1):
            lost = sequence[padded.size(1):]
            advice = f"pad to the longest sequence, {longest} ids"
            if padded.size(1) == longest - 2:  # classic bug 3
                advice = (f"pad to the longest *encoded* sequence ({longest} ids, <bos> and "
                          f"<eos> included), not to the longest word count")
            return f"row {row} lost its last {len(lost)} ids {lost}: {advice}"
    if padded.dtype != torch.long:
        return f"the dtype is {padded.dtype}: ids must be torch.long, as nn.Embedding expects"
    if padded.size(1) > longest:
        return (f"{padded.size(1)} columns, but the longest sequence has {longest} ids: pad "
                f"only that far")
    for row, sequence in enumerate(sequences):
        if padded[row, : len(sequence)].tolist() != list(sequence):
            return f"row {row} should start with {list(sequence)}: copy each sequence to the left"
        tail = padded[row, len(sequence):]
        if (tail != PAD_ID).any():
            column = len(sequence) + int((tail != PAD_ID).nonzero()[0])
            return (f"row {row} holds {int(padded[row, column])} at column {column}, where "
                    f"<pad> (id {PAD_ID}) belongs")
    return None


def next_token_problem(answer: object, ids: list[int], n: int) -> Problem:
    """Without a causal mask, score one position: the prefix ids[:n] predicts ids[n].

    answer: the pair (prefix, target) given for the ids and prefix length n.
    """
    if not isinstance(answer, tuple) or len(answer) != 2:
        return f"got {answer!r}: return a pair, (a list of ids, one int)"
    prefix, target = answer
    if not isinstance(prefix, list) or not isinstance(target, int):
        return f"got ({prefix!r}, {target!r}): return a list of ids and one int"
    if prefix == ids[: n + 1]:
        return (f"the prefix includes ids[{n}] = {ids[n]}, the very token to predict: the "
                f"model would learn to copy it, not to translate")
    if prefix != ids[:n]:
        return f"the prefix should be the first n = {n} ids, {ids[:n]}; got {prefix}"
    if target == ids[n - 1] != ids[n]:
        return (f"the target {target} is the last token of the prefix, which the model "
                f"already sees: predict the one after it, ids[{n}]")
    if target != ids[n]:
        return (f"the target should be ids[{n}] = {ids[n]}, the token right after the "
                f"prefix; got {target}")
    return None


# --- attention: what each query may see --------------------------------------------------

def causal_problem(visible: torch.Tensor) -> Problem:
    """Only the future hides; visible: (..., q_len, k_len), True where a query reaches a key."""
    visible = visible.reshape(-1, *visible.shape[-2:])  # (cases, q_len, k_len)
    future = torch.ones(visible.shape[-2:], dtype=torch.bool, device=visible.device).triu(1)
    seen_by_all = visible.all(0)
    # Inverted: the past hidden and the future shown, with or without the diagonal.
    if future.any() and (torch.equal(seen_by_all, future) or torch.equal(seen_by_all, ~future.T)):
        return ("the mask is inverted: it hides the past and shows the future. In this course "
                "True means hidden, as in nn.MultiheadAttention's and nn.Transformer's masks "
                "(F.scaled_dot_product_attention's boolean mask is the opposite: True there "
                "means may attend)")
    if leak := _first(visible.any(0) & future):
        row, column = leak
        return f"row {row} can see position {column}: the mask lets the future through"
    if hidden := _first(~seen_by_all & ~future):
        row, column = hidden
        if row == column:
            return (f"row {row} cannot see its own position: hide only what comes after it "
                    f"(triu with diagonal=1), or row 0 has nothing left to attend to")
        return f"row {row} cannot see position {column}, which is in its past: hide only the future"
    return None


def finite_problem(weights: torch.Tensor) -> Problem:
    """A row with every key hidden must still give finite weights (bug 15)."""
    if bad := _first((~torch.isfinite(weights)).flatten(1).any(1)):
        return (f"NaN in the weights of sentence {bad[0]} (counting from 0): fill hidden scores "
                f"with torch.finfo(scores.dtype).min, never -inf, so a row with every key "
                f"hidden still has a finite softmax")
    return None


def padding_problem(weights: torch.Tensor, key_padding: torch.Tensor,
                    attn_mask: torch.Tensor | None = None) -> Problem:
    """<pad> keys get exactly zero weight from every query; real keys keep some.

    weights: (batch, ..., q_len, kv_len); key_padding: (batch, kv_len), True at <pad>;
    attn_mask: (q_len, kv_len), True where a real key may be hidden too (the future).
    A sentence made only of <pad> is skipped: any weights are harmless there, if finite.
    """
    if problem := finite_problem(weights):
        return problem
    batch, q_len, kv_len = weights.size(0), weights.size(-2), weights.size(-1)
    heads = weights.reshape(batch, -1, q_len, kv_len)  # (batch, heads, q_len, kv_len)
    for sentence in range(batch):
        padding = key_padding[sentence]  # (kv_len,)
        if padding.all():
            continue
        where = f"sentence {sentence} (counting from 0)"
        if leak := _first((heads[sentence] != 0) & padding):
            head, query, key = leak
            head_text = f", head {head}" if heads.size(1) > 1 else ""
            return (f"{where}{head_text}, query {query} puts weight "
                    f"{heads[sentence, head, query, key]:.2g} on the <pad> key {key}: hide "
                    f"<pad> keys (the columns of the scores) for every query")
        allowed = ~padding if attn_mask is None else ~padding & ~attn_mask  # (q_len, kv_len)
        if starved := _first((heads[sentence] <= 0) & allowed):
            _, query, key = starved
            return (f"{where}, query {query} puts no weight on key {key}, a real token: hide "
                    f"only the <pad> keys")
    return None


def scaling_problem(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> Problem:
    """weights = softmax(q k^T / sqrt(head_dim)); q, k: (batch, heads, len, head_dim)."""
    raw = q @ k.transpose(-2, -1)  # (batch, heads, q_len, kv_len)
    head_dim, embed_dim = q.size(-1), q.size(1) * q.size(-1)
    expected = (raw / math.sqrt(head_dim)).softmax(-1)
    return compare(weights, expected, "softmax(q k^T / √head_dim)", {
        "the scores are not scaled: divide by √head_dim, or the softmax saturates as "
        "head_dim grows": raw.softmax(-1),
        "the scores are divided by head_dim, not by its square root (bug 5)":
            (raw / head_dim).softmax(-1),
        f"the scores are divided by √embed_dim = √{embed_dim}: each head's dot product has "
        f"only head_dim = {head_dim} terms, so divide by √head_dim (bug 5)":
            (raw / math.sqrt(embed_dim)).softmax(-1),
    }, atol=1e-6)


def split_problem(split: object, x: torch.Tensor, num_heads: int) -> Problem:
    """Head h holds features h*head_dim .. (h+1)*head_dim - 1 of every position, in order."""
    batch, length, embed_dim = x.shape
    head_dim = embed_dim // num_heads
    expected = torch.stack(x.split(head_dim, dim=-1), dim=1)  # (batch, heads, len, head_dim)
    if problem := tensor_problem(split, expected.shape):
        return problem + (" = (batch, heads, len, head_dim)" if isinstance(split, torch.Tensor)
                          else "")
    if torch.equal(split, x.reshape(batch, num_heads, length, head_dim)):
        return ("positions and features are mixed: view as (batch, len, heads, head_dim) "
                "first, then transpose(1, 2). A reshape straight to (batch, heads, len, "
                "head_dim) cuts across positions (bug 6)")
    for head in range(num_heads):
        if not torch.equal(split[:, head], expected[:, head]):
            first, last = head * head_dim, (head + 1) * head_dim - 1
            return (f"head {head} should hold features {first}..{last} of every position, in "
                    f"their original order")
    return None


# --- the loss ----------------------------------------------------------------------------

def loss_problem(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Problem:
    """Cross-entropy of raw logits, averaged over real targets; <pad> targets count for nothing."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=generator) * 3  # (batch, len, vocab)
    targets = torch.randint(4, 11, (3, 6), generator=generator)  # (batch, len)
    targets[1, 2:], targets[2, 4:] = PAD_ID, PAD_ID
    loss = loss_fn(logits, targets)
    if tensor_problem(loss, ()):
        return (f"got {type(loss).__name__} {tuple(getattr(loss, 'shape', ()))}; return one "
                f"number, a 0-dim tensor: the mean loss over the real targets")
    changed = logits.clone()
    padded = targets == PAD_ID  # (batch, len)
    changed[padded] = torch.randn(int(padded.sum()), 11, generator=generator) * 50
    if not torch.allclose(loss_fn(changed, targets), loss):
        return ("the loss changes when only the logits at <pad> targets change: leave <pad> "
                "out (cross_entropy's ignore_index=PAD_ID)")
    flat_logits, flat_targets = logits.reshape(-1, 11), targets.reshape(-1)
    real = flat_targets != PAD_ID
    each = F.cross_entropy(flat_logits, flat_targets, reduction="none")  # (batch * len,)
    return compare(loss, each[real].mean(), "the mean cross-entropy over real targets", {
        "softmax was applied before cross_entropy, which applies log-softmax itself: pass "
        "the raw logits (bug 9)": F.cross_entropy(flat_logits.softmax(-1), flat_targets,
                                                   ignore_index=PAD_ID),
        "the loss is a sum: average it over the real targets": each[real].sum(),
        "the loss is divided by every position, <pad> included: average over real targets only":
            each[real].sum() / len(flat_targets),
    })
