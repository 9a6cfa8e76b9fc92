"""What a student tried that the checks once answered with a raw error or a bare number, and
the classic mistakes they already named: each planted, each told in steps, never a crash."""

import inspect
import math
import re
import traceback

import pytest
import torch
import torch.nn.functional as F
from test_check_steps import exercises, notebook_names

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


def test_another_error_inside_hide_is_the_learners_own():
    def broken(scores, key_padding_mask, attn_mask=None):
        raise RuntimeError("a bug of the learner's own")

    with pytest.raises(verdicts.Raised, match="broken raised RuntimeError: a bug of the "
                       "learner's own, at line") as caught:
        check.hide(broken)
    assert isinstance(caught.value.__cause__, RuntimeError)


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


def test_a_key_error_about_something_else_is_the_learners_own():
    with pytest.raises(verdicts.Raised, match="raised KeyError: \"the learner's\"") as caught:
        check.frame_target(lambda words, vocab: {}["the learner's"])
    assert isinstance(caught.value.__cause__, KeyError)


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


def test_another_torch_error_in_the_loss_is_the_learners_own():
    with pytest.raises(verdicts.Raised, match="raised RuntimeError: .*batch2 tensor") as caught:
        check.loss(lambda logits, targets: logits @ logits)
    assert isinstance(caught.value.__cause__, RuntimeError)


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


# --- the batch dimension moved by a transpose ---------------------------------------------

def attend_with_k_T(q, k, v):
    """k.T reverses all three dimensions: notebook 02 warns of it."""
    return torch.bmm(torch.bmm(q, k.T).softmax(dim=-1), v)


def attend_with_transpose_0_1(q, k, v):
    return torch.bmm(torch.bmm(q, k.transpose(0, 1)).softmax(dim=-1), v)


def attend_with_matmul_and_k_T(q, k, v):
    return (q @ k.T).softmax(dim=-1) @ v


def attend_without_transpose(q, k, v):
    return torch.bmm(torch.bmm(q, k).softmax(dim=-1), v)


TURNED = [
    (attend_with_k_T, "[3, 8] but got: [8, 7].", "k.T reverses every dimension of k"),
    (attend_with_transpose_0_1, "[3, 8] but got: [7, 3].",
     "k.transpose(0, 1) moves the batch dimension"),
    (attend_with_matmul_and_k_T, "The size of tensor a (3) must match the size of tensor b (8)",
     "k.T reverses every dimension of k"),
    (attend_without_transpose, "[3, 8] but got: [3, 7].", "k is not transposed"),
]


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize(("answer", "error", "cause"), TURNED,
                         ids=[answer.__name__ for answer, _, _ in TURNED])
def test_a_transpose_that_moves_the_batch_is_a_hint_not_a_bmm_error(answer, error, cause):
    first, second, third = steps(check.batched_attend, answer)
    assert first.startswith("batch 3, 5 queries, 7 keys: the batched product fails: it raised "
                            "RuntimeError: ") and first.endswith(MORE[1]), first
    assert error in first and "Why:" not in first and "transpose(1, 2)" not in first
    assert f"Why: {cause}" in second and "Fix:" not in second, second
    assert ".." not in second, "torch's full stop and the hint's are one"
    assert "Fix: swap the last two dimensions only" in third and "k.transpose(1, 2)" in third


def test_another_error_in_a_batched_product_is_the_learners_own():
    with pytest.raises(verdicts.Raised, match="raised RuntimeError"):
        check.batched_attend(lambda q, k, v: torch.bmm(q, v[:, :1].transpose(1, 2)) @ v)


# --- an error inside the learner's function reads as theirs ---------------------------------

def pad_with_torch_tensor(sequences):
    """torch.tensor on lists of different lengths: a ValueError, raised in torch's C code."""
    padded = torch.tensor(sequences)
    return padded


def line_of(function, text: str) -> int:
    """The line number of `text` in a function's source."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_an_error_inside_the_learners_function_reads_as_theirs():
    with pytest.raises(check.NotYet) as caught:
        check.pad_batch(pad_with_torch_tensor)
    error, line = caught.value, line_of(pad_with_torch_tensor, "padded = torch.tensor")
    assert isinstance(error, verdicts.Raised)
    assert str(error) == (f"pad_with_torch_tensor raised ValueError: expected sequence of length "
                          f"4 at dim 1 (got 7), at line {line}: padded = torch.tensor(sequences)")
    assert error._render_traceback_() == [f"\N{BALLOT X} Not yet: {error}"], "one frame: one line"
    cause = error.__cause__
    assert isinstance(cause, ValueError) and error.__suppress_context__
    frames = traceback.extract_tb(cause.__traceback__)
    assert [frame.name for frame in frames] == ["pad_with_torch_tensor"], "no frame of the check"


def score_rows(scores, key_padding_mask):
    return scores.view(-1, 5)  # a helper of the learner's: 3 * 4 * 6 is not a multiple of 5


def hide_through_a_helper(scores, key_padding_mask, attn_mask=None):
    return score_rows(scores, key_padding_mask)


def loss_with_float_targets(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten().float())


def test_the_line_named_is_the_learners_own_and_the_frames_are_theirs():
    with pytest.raises(verdicts.Raised) as caught:
        check.hide(hide_through_a_helper)
    error, line = caught.value, line_of(score_rows, "scores.view(-1, 5)")
    assert str(error).startswith("hide_through_a_helper raised RuntimeError: shape '[-1, 5]'")
    assert str(error).endswith(f", at line {line} of score_rows: return scores.view(-1, 5)  # a "
                               f"helper of the learner's: 3 * 4 * 6 is not a multiple of 5")
    shown = error._render_traceback_()
    assert shown[0] == f"\N{BALLOT X} Not yet: {error}"
    assert [text.split(", in ")[-1] for text in shown if ", in " in text] == [
        "hide_through_a_helper", "score_rows"]
    assert shown[-1].startswith("RuntimeError: shape '[-1, 5]'")
    assert not [text for text in shown if "checkers" in text], shown


def test_an_error_raised_inside_torch_names_the_learners_line():
    """F.cross_entropy raises from torch's own Python: the line named is the learner's call,
    and torch's frame is shown below it, as Python would show it."""
    with pytest.raises(verdicts.Raised) as caught:
        check.loss(loss_with_float_targets)
    error, line = caught.value, line_of(loss_with_float_targets, "return F.cross_entropy")
    assert f", at line {line}: return F.cross_entropy(" in str(error), error
    shown = error._render_traceback_()
    assert shown[-2].strip().startswith("return torch._C._nn.cross_entropy_loss("), shown


# --- an inverted padding mask ----------------------------------------------------------------

def causal(attn_mask):
    return False if attn_mask is None else attn_mask


INVERTED = {
    "~key_padding_mask": lambda s, padding, attn_mask=None: fill(
        s, ~padding[:, None, :] | causal(attn_mask)),
    "the kept keys hidden": lambda s, padding, attn_mask=None: fill(
        s, ~(padding[:, None, :] | causal(attn_mask))),
}


@pytest.mark.parametrize("inverted", INVERTED.values(), ids=INVERTED.keys())
def test_an_inverted_padding_mask_is_named_as_inverted(inverted):
    first, second, third = steps(check.hide, inverted)
    assert re.search(r"query 0 puts weight \S+ on the <pad> key 3 \(run the check again", first)
    assert ("Why: the mask is inverted: it hides the real keys and leaves the <pad> keys "
            "visible. In this course True means hidden") in second, second
    assert "Fix: fill where the masks are True, as they are given" in third
    assert "not hidden" not in third and "hide columns" not in third, "it does hide columns"


# --- the sinusoids as a learner writes them ---------------------------------------------------

def table(max_len, embed_dim, angle, swap=False):
    encoding = torch.zeros(max_len, embed_dim)
    sin, cos = torch.sin(angle), torch.cos(angle)
    encoding[:, 0::2], encoding[:, 1::2] = (cos, sin) if swap else (sin, cos)
    return encoding


def doubled_exponent(max_len, embed_dim):
    """2 * (2i) / d: arange already steps by 2, and sin and cos share the doubled angle."""
    position = torch.arange(max_len).float()[:, None]  # (max_len, 1)
    return table(max_len, embed_dim,
                 position / 10000 ** (2 * torch.arange(0, embed_dim, 2) / embed_dim))


def multiplied(max_len, embed_dim):
    position = torch.arange(max_len).float()[:, None]
    return table(max_len, embed_dim,
                 position * 10000 ** (torch.arange(0, embed_dim, 2) / embed_dim))


def multiplied_through_exp(max_len, embed_dim):
    """The same mistake written as stage 04 writes its frequencies, exp of a log."""
    position = torch.arange(max_len)[:, None]
    return table(max_len, embed_dim,
                 position * torch.exp(torch.arange(0, embed_dim, 2) * math.log(10000) / embed_dim))


def swapped(max_len, embed_dim):
    position = torch.arange(max_len).float()[:, None]
    return table(max_len, embed_dim,
                 position / 10000 ** (torch.arange(0, embed_dim, 2) / embed_dim), swap=True)


ENCODINGS = [
    (doubled_exponent, "the exponent is doubled"),
    (multiplied, r"the position is multiplied by 10000\^\(2i/d\) instead of divided"),
    (multiplied_through_exp, "the position is multiplied"),
    (swapped, "sin and cos are swapped"),
]


@pytest.mark.parametrize(("answer", "cause"), ENCODINGS,
                         ids=[answer.__name__ for answer, _ in ENCODINGS])
def test_the_sinusoids_classic_mistakes_written_by_hand_are_named(answer, cause):
    first, second, third = steps(check.encoding, answer)
    assert first.startswith(f"{answer.__name__}(60, 32): differs from the paper's sin/cos "
                            f"formula by") and "Why:" not in first
    assert re.search(f"Why: {cause}", second), second
    assert "Fix:" in third and "not the paper's sinusoids" not in third


# --- the untouched stub is a mistake of its own ----------------------------------------------

def narrower(sequences):
    """One column short: the longest sequence loses its <eos>."""
    longest = max(map(len, sequences)) - 1
    padded = torch.full((len(sequences), longest), PAD_ID)
    for row, sequence in enumerate(sequences):
        padded[row, : min(len(sequence), longest)] = torch.tensor(sequence[:longest])
    return padded


def batch_as_one_sentence(q, k, v):
    """Every query attends to the keys of every sentence."""
    weights = (q.flatten(0, 1) @ k.flatten(0, 1).T).softmax(-1)
    return (weights @ v.flatten(0, 1)).view_as(q)


def each_layer_twice(encoder_layers, decoder_layers, x, y, padding, future):
    for layer in [*encoder_layers, *encoder_layers]:
        x = layer(x, padding)
    for layer in decoder_layers:
        y = layer(y, x, padding, future)
    return y


# For each untouched stub whose output the check recognises, a real mistake that once shared
# its cause, or might have: after the stub three times, it starts from its symptom.
AFTER_THE_STUB = {
    "00-exercise-1-solution": [lambda words, vocab: [vocab.stoi.get(word, UNK_ID)
                                                     for word in words] + [EOS_ID]],
    "00-exercise-2-solution": [narrower],
    "01-exercise-2-solution": [lambda ids, n: (ids[1: n + 1], ids[n])],
    "02-exercise-1-solution": [batch_as_one_sentence],
    "03-exercise-1-solution": [lambda length: torch.ones(length, length, dtype=torch.bool)
                               .triu(2)],
    "03-exercise-2-solution": [INVERTED["~key_padding_mask"]],
    "04-exercise-1-solution": [doubled_exponent],
    "05-exercise-1-solution": [each_layer_twice],
    "05-exercise-2-solution": [lambda embed_dim: 5],
    "06-exercise-2-solution": [lambda x, weight, bias, eps: x * weight + bias],
    "07-exercise-1-solution": [lambda x, heads: x.reshape(x.size(0), heads, -1),
                               lambda x: x.flatten(1)],
    "07-exercise-3-solution": [lambda padding: padding[:, None, :]],
}
STUBS = [exercise for exercise in exercises() if exercise.id in AFTER_THE_STUB]


def test_every_recognised_stub_is_tried():
    assert {exercise.id for exercise in STUBS} == set(AFTER_THE_STUB)


@pytest.mark.parametrize(("statement", "stub", "solution", "check_cell"), STUBS)
def test_after_the_stub_a_different_mistake_starts_from_its_symptom(statement, stub, solution,
                                                                    check_cell, request):
    namespace = notebook_names()
    exec(stub, namespace)
    name, answers = re.fullmatch(r"check\.(\w+)\((.*)\)\s*", check_cell).groups()
    checker = getattr(check, name)
    stubs = [namespace[answer.strip()] for answer in answers.split(",")]
    told = []
    for _ in range(3):
        with pytest.raises(check.NotYet) as caught:
            checker(*stubs)
        told.append(str(caught.value))
    assert "Why:" in told[1] and "stub" in told[1].split("Why:")[1], told[1]
    assert "Fix:" in told[2], told[2]
    other = AFTER_THE_STUB[request.node.callspec.id]
    with pytest.raises(check.NotYet) as caught:
        checker(*other)
    assert "Why:" not in str(caught.value) and "Fix:" not in str(caught.value), caught.value
    assert str(caught.value).endswith(MORE[1]), caught.value


# --- a loop over the sentences instead of one batched product -------------------------------

def attend_one_sentence_at_a_time(q, k, v):
    return torch.stack([(q[i] @ k[i].transpose(0, 1)).softmax(dim=-1) @ v[i]
                        for i in range(q.size(0))])


def test_a_loop_over_the_sentences_is_told_to_batch():
    told = steps(check.batched_attend, attend_one_sentence_at_a_time)
    assert "it runs once per sentence" in told[0]
    assert "Why: a Python loop over the sentences" in told[1]
    assert "Fix: no loop: torch.bmm(" in told[2]


def test_one_batched_product_passes_on_any_batch(capsys):
    check.batched_attend(lambda q, k, v: torch.bmm(torch.bmm(q, k.transpose(1, 2))
                                                   .softmax(dim=-1), v))
    assert "\N{CHECK MARK}" in capsys.readouterr().out
