"""What a student tried that the checks once answered with a raw error or a bare number, and
the classic mistakes they already named: each planted, each told in steps, never a crash."""

import re

import pytest
import torch
import torch.nn.functional as F

from toolkit.checkers import check, verdicts
from toolkit.checkers.verdicts import MORE
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID


@pytest.fixture(autouse=True)
def fresh_kernel():
    verdicts.forget()


def steps(checker, answer, times=3) -> list[str]:
    """What the learner reads after running the same wrong answer's check `times` times."""
    told = []
    for _ in range(times):
        with pytest.raises(check.NotYet) as caught:
            checker(answer)
        told.append(str(caught.value))
    return told


def fill(scores, hidden):
    return scores.masked_fill(hidden, torch.finfo(scores.dtype).min)


# --- hiding rows instead of key columns ----------------------------------------------------

def hide_rows(scores, key_padding_mask, attn_mask=None):
    """The mistake notebook 03 warns of: (batch, kv_len, 1) hides query rows."""
    hidden = key_padding_mask[:, :, None]
    return fill(scores, hidden if attn_mask is None else hidden | attn_mask)


def hide_rows_when_square(scores, key_padding_mask, attn_mask=None):
    """Right on the first case (4 queries, 6 keys), rows on the square one: there the wrong
    mask broadcasts silently."""
    if scores.size(1) != scores.size(2):
        return fill(scores, key_padding_mask[:, None, :])
    return hide_rows(scores, key_padding_mask, attn_mask)


def test_hiding_rows_is_a_hint_not_a_broadcasting_error():
    first, second, third = steps(check.hide, hide_rows)
    assert first == ("hide_rows on scores (3, 4, 6): it raised RuntimeError: The size of tensor "
                     "a (6) must match the size of tensor b (4) at non-singleton dimension 1"
                     + MORE[1])
    assert "Why: the padding mask hides query rows, not key columns" in second
    assert "Fix: hide columns: key_padding_mask[:, None, :]" in third


def test_hiding_rows_where_the_shapes_let_it_broadcast_gets_the_same_cause():
    first, _, third = steps(check.hide, hide_rows_when_square)
    assert first.startswith("hide_rows_when_square on scores (3, 6, 6) with a causal mask: "
                            "sentence 1 (counting from 0), query 3 puts weight")
    assert "Why: the padding mask hides query rows, not key columns" in third


def test_another_error_inside_hide_is_the_learners_own_traceback():
    def broken(scores, key_padding_mask, attn_mask=None):
        raise RuntimeError("a bug of the learner's own")

    with pytest.raises(RuntimeError, match="of the learner's own"):
        check.hide(broken)


# --- fills in float16: they replace, and only additive masks add -----------------------------

def hide_with_two_fills(scores, key_padding_mask, attn_mask=None):
    hidden = fill(scores, key_padding_mask[:, None, :])
    return hidden if attn_mask is None else fill(hidden, attn_mask)


def hide_with_one_additive_mask(scores, key_padding_mask, attn_mask=None):
    hidden = key_padding_mask[:, None, :] | (False if attn_mask is None else attn_mask)
    return scores + hidden.to(scores.dtype) * torch.finfo(scores.dtype).min


def hide_with_two_additive_masks(scores, key_padding_mask, attn_mask=None):
    """scores + padding mask + causal mask, each 0 or finfo.min: min + min is -inf."""
    low = torch.finfo(scores.dtype).min
    summed = scores + key_padding_mask[:, None, :].to(scores.dtype) * low
    return summed if attn_mask is None else summed + attn_mask.to(scores.dtype) * low


@pytest.mark.parametrize("right", [hide_with_two_fills, hide_with_one_additive_mask])
def test_two_fills_in_a_row_or_one_additive_mask_are_right(right, capsys):
    check.hide(right)
    assert capsys.readouterr().out.startswith("\N{CHECK MARK}")


def test_two_additive_masks_overflow_to_nan_in_a_row_both_hide():
    first, _, third = steps(check.hide, hide_with_two_additive_masks)
    assert first.startswith("hide_with_two_additive_masks on float16 scores with a mask that "
                            "hides every key from query 0: sentence 2, query 0 gets weights "
                            "[nan, nan, nan, nan, nan, nan]")
    assert "Why: two additive masks of finfo.min were summed" in third
    assert "a fill replaces, it never adds" in third


def test_minus_1e9_does_not_fit_in_float16():
    first, _, third = steps(check.hide, lambda s, padding, future=None: s.masked_fill(
        padding[:, None, :] | (False if future is None else future), -1e9))
    assert "raised RuntimeError: value cannot be converted to type" in first
    assert "Why: a constant like -1e9 does not fit in float16" in third


# --- an unknown word -----------------------------------------------------------------------

def frame_by_indexing(words, vocab):
    return [BOS_ID] + [vocab.stoi[word] for word in words] + [EOS_ID]


def test_indexing_stoi_on_an_unknown_word_is_a_hint_not_a_key_error():
    first, second, third = steps(check.frame_target, frame_by_indexing)
    assert first == ("frame_by_indexing(['the', 'zebra', 'sees']): it raised KeyError: 'zebra', "
                     "a word the vocabulary does not hold" + MORE[1])
    assert f"must become <unk> (id {UNK_ID})" not in first
    assert f"become <unk> (id {UNK_ID})" in second
    assert third.endswith("Fix: give a default instead of failing: vocab.stoi.get(word, UNK_ID)")


def test_a_key_error_about_something_else_is_the_learners_own_traceback():
    with pytest.raises(KeyError, match="the learner's"):
        check.frame_target(lambda words, vocab: {}["the learner's"])


# --- the loss --------------------------------------------------------------------------------

def mean_of_sentence_means(logits, targets):
    each = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (batch, len)
    real = targets != PAD_ID
    return ((each * real).sum(1) / real.sum(1)).mean()


def test_a_mean_of_sentence_means_is_told_why_it_differs():
    first, second, _ = steps(check.loss, mean_of_sentence_means)
    assert first.startswith("mean_of_sentence_means on 3 sentences with <pad> targets: differs "
                            "from the mean cross-entropy over real targets by")
    assert ("Why: it is a mean of per-sentence means: padded sentences of different lengths "
            "(6, 2, 4 real targets here) make it weight tokens unequally") in second


@pytest.mark.parametrize("unflattened", [
    lambda logits, targets: F.cross_entropy(logits, targets, ignore_index=PAD_ID),
    lambda logits, targets: F.cross_entropy(logits.flatten(0, 1), targets, ignore_index=PAD_ID),
    lambda logits, targets: F.nll_loss(logits.log_softmax(-1), targets, ignore_index=PAD_ID),
], ids=["both", "targets-only", "nll"])
def test_an_unflattened_cross_entropy_is_a_hint_not_a_torch_error(unflattened):
    first, _, third = steps(check.loss, unflattened)
    assert first.startswith("<lambda> on 3 sentences with <pad> targets: it raised ")
    assert "Expected" in first and "Why:" not in first
    assert "must be flattened to (batch * len, vocab), and the targets with them" in third


def test_another_torch_error_in_the_loss_is_the_learners_own_traceback():
    with pytest.raises(RuntimeError, match="batch2 tensor"):
        check.loss(lambda logits, targets: logits @ logits)


# --- the classic mistakes the checks already named ------------------------------------------

CLASSIC = {
    "an inverted mask": (check.causal_mask,
                         lambda n: torch.ones(n, n, dtype=torch.bool).tril(0),
                         "every row sees its future and not its past", "the mask is inverted"),
    "a hidden diagonal": (check.causal_mask,
                          lambda n: torch.ones(n, n, dtype=torch.bool).triu(0),
                          "row 0 cannot see its own position", "the diagonal is hidden too"),
    "-inf": (check.hide, lambda s, padding, future=None: s.masked_fill(
        padding[:, None, :] | (False if future is None else future), float("-inf")),
        "NaN in the weights of sentence 2", "hidden with -inf"),
    "-1e9 in float16": (check.hide, lambda s, padding, future=None: s.masked_fill(
        padding[:, None, :] | (False if future is None else future), -1e9),
        "without overflow", "does not fit in float16"),
    "padding to the word count": (check.pad_batch, lambda sequences: torch.tensor(
        [s[: max(map(len, sequences)) - 2] + [PAD_ID] * (max(map(len, sequences)) - 2 - len(s))
         for s in sequences]), "row 1 lost its last 2 ids", "longest \\*word count\\*"),
    "softmax over the queries": (check.attend, lambda q, k, v: (q @ k.T).softmax(0) @ v,
                                 "differs from stage01.Attention", "the softmax ran over the "
                                 "queries"),
    "softmax over the queries in a batch": (
        check.batched_attend, lambda q, k, v: (q @ k.transpose(1, 2)).softmax(1) @ v,
        "differs from stage02.Attention", "over the \\*queries\\* \\(dim=1\\)"),
    "scaling too early": (check.attend, lambda q, k, v: (q @ k.T / q.size(-1) ** 0.5)
                          .softmax(-1) @ v, "differs from stage01.Attention",
                          "stages 01 to 06 do not do yet"),
}


@pytest.mark.parametrize(("checker", "answer", "symptom", "cause"), CLASSIC.values(),
                         ids=CLASSIC.keys())
def test_a_classic_mistake_keeps_its_symptom_then_its_cause(checker, answer, symptom, cause):
    first, second, third = steps(checker, answer)
    assert re.search(symptom, first) and not re.search(cause, first), first
    assert re.search(f"Why: .*{cause}", second), second
    assert "Fix:" in third, third
