"""Every exercise checker passes a right answer and names the mistake in a classic wrong one."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from toolkit.batching.batches import encode_target
from toolkit.checkers import check, verdicts
from toolkit.checkers.layer_properties import sinusoids
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID


@pytest.fixture(autouse=True)
def fresh_kernel():
    """Each test starts as a fresh kernel does: no mistake told yet."""
    verdicts.forget()


def passes(checker, *answers, capsys):
    checker(*answers)
    assert capsys.readouterr().out.startswith("\N{CHECK MARK}")


def fails(checker, *answers, hint):
    """The same mistake three times: symptom, then its cause, then the fix, each step adding
    to the one before; the whole hint (the third) says `hint`."""
    steps = []
    for _ in range(3):
        with pytest.raises(check.NotYet) as caught:
            checker(*answers)
        steps.append(str(caught.value))
    first, second, third = steps
    assert "Why:" not in first and "Fix:" not in first, first
    if second != first:  # the hint has more to tell, and said so
        assert first.endswith(verdicts.MORE[1]) and first.removesuffix(verdicts.MORE[1]) in second
        assert second.removesuffix(verdicts.MORE[2]) in third
    assert not third.endswith(tuple(verdicts.MORE.values())), third
    assert re.search(hint, third), (hint, third)
    return steps


# --- right answers: the few lines each exercise takes, written by hand ----------------------

def frame(words, vocab):
    return [BOS_ID] + [vocab.stoi.get(word, UNK_ID) for word in words] + [EOS_ID]


def pad_by_hand(sequences):
    longest = max(len(sequence) for sequence in sequences)
    padded = torch.full((len(sequences), longest), PAD_ID, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        padded[row, : len(sequence)] = torch.tensor(sequence)
    return padded


def run_stack(encoder_layers, decoder_layers, x, y, padding, future):
    for layer in encoder_layers:
        x = layer(x, padding)
    for layer in decoder_layers:
        y = layer(y, x, padding, future)
    return y


def hide(scores, key_padding_mask, attn_mask):
    hidden = key_padding_mask[:, None, :]
    if attn_mask is not None:
        hidden = hidden | attn_mask
    return scores.masked_fill(hidden, torch.finfo(scores.dtype).min)


def hide_twice_added(scores, key_padding_mask, attn_mask):
    """Each mask made additive (0 or finfo.min) and the two added: min + min is -inf."""
    low = torch.finfo(scores.dtype).min
    fill = torch.zeros_like(scores).masked_fill(key_padding_mask[:, None, :], low)
    if attn_mask is not None:
        fill = fill + torch.zeros_like(scores).masked_fill(attn_mask, low)
    return scores + fill


def hide_pad_then_future_minus_inf(scores, key_padding_mask, attn_mask):
    """Padding filled with finfo.min, then the future with -inf: a row the second mask
    hides entirely is all -inf."""
    hidden = scores.masked_fill(key_padding_mask[:, None, :], torch.finfo(scores.dtype).min)
    return hidden if attn_mask is None else hidden.masked_fill(attn_mask, float("-inf"))


def hide_queries(scores, key_padding_mask, attn_mask):
    """Bug 1: the padding mask hides query rows instead of key columns."""
    rows = key_padding_mask[:, : scores.size(1), None]  # (batch, q_len, 1)
    return scores.masked_fill(rows, torch.finfo(scores.dtype).min)


def run_stack_by_keyword(encoder_layers, decoder_layers, x, y, padding, future):
    """The same, calling the layers with keywords: the recording must not mind."""
    for layer in encoder_layers:
        x = layer(x, src_padding=padding)
    for layer in decoder_layers:
        y = layer(y, memory=x, src_padding=padding, future=future)
    return y


def stack_unchained(encoder_layers, decoder_layers, x, y, padding, future):
    """Every encoder layer reads the embeddings instead of the layer below."""
    memory = [layer(x, padding) for layer in encoder_layers][-1]
    for layer in decoder_layers:
        y = layer(y, memory, padding, future)
    return y


def stack_same_index(encoder_layers, decoder_layers, x, y, padding, future):
    """Decoder layer l reads encoder layer l, not the final encoder output."""
    memories = []
    for layer in encoder_layers:
        x = layer(x, padding)
        memories.append(x)
    for layer, memory in zip(decoder_layers, memories, strict=False):
        y = layer(y, memory, padding, future)
    return y


def encoding_by_hand(max_len, embed_dim):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    angle = position / 10000 ** (torch.arange(0, embed_dim, 2) / embed_dim)  # (max_len, d / 2)
    encoding = torch.zeros(max_len, embed_dim)
    encoding[:, 0::2], encoding[:, 1::2] = angle.sin(), angle.cos()
    return encoding


# The sizes check.encoding asks for: its wrong answers are computed before it runs, since an
# answer that calls `sinusoids`, the check's own formula, is refused.
ENCODING_SIZES = [(60, 32), (10, 4), (128, 64)]


def precomputed(**mistake):
    tables = {(n, d): sinusoids(n, d, **mistake) for n, d in ENCODING_SIZES}
    return lambda max_len, embed_dim: tables[max_len, embed_dim]


def rotation_by_hand(k, embed_dim):
    matrix = torch.zeros(embed_dim, embed_dim, dtype=torch.float64)
    for i in range(embed_dim // 2):
        angle = k / 10000 ** (2 * i / embed_dim)
        c, s = math.cos(angle), math.sin(angle)
        matrix[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    return matrix


def layer_norm(x, weight, bias, eps):
    mean, variance = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / (variance + eps).sqrt() * weight + bias


def split(x, num_heads):
    batch, length, embed_dim = x.shape
    return x.view(batch, length, num_heads, embed_dim // num_heads).transpose(1, 2)


def merge(x):
    return x.transpose(1, 2).flatten(2)


def padded_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD_ID)


def german_only(stream, src_len):
    targets = stream[:, 1:].clone()
    targets[:, :src_len] = PAD_ID
    return targets


def nucleus(probabilities, p, included=False):
    """Keep the likeliest tokens until their total reaches p (`included`: one too few)."""
    ordered, order = probabilities.sort(dim=-1, descending=True)
    total = ordered.cumsum(dim=-1)
    kept = total <= p if included else total - ordered < p
    return torch.zeros_like(kept).scatter(-1, order, kept)


RIGHT = {
    "frame_target": [frame],
    "pad_batch": [pad_by_hand],
    "attend": [lambda q, k, v: (q @ k.T).softmax(-1) @ v],
    "prefix_and_target": [lambda ids, n: (ids[:n], ids[n])],
    "batched_attend": [lambda q, k, v: torch.bmm(torch.bmm(q, k.transpose(1, 2)).softmax(-1), v)],
    "loss": [padded_loss],
    "causal_mask": [lambda length: torch.ones(length, length, dtype=torch.bool).triu(1)],
    "hide": [hide],
    "encoding": [encoding_by_hand],
    "rotation": [rotation_by_hand],
    "stack": [run_stack],
    "parameters_per_layer": [lambda d: 9 * (d * d + d)],
    "add_and_norm": [lambda x, sublayer_output, norm: norm(x + sublayer_output)],
    "layer_norm": [layer_norm],
    "split_heads": [split, merge],
    "scaled_scores": [lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))],
    "head_padding_mask": [lambda padding: padding[:, None, None, :]],
    "stream_positions": [lambda stream: ((stream != PAD_ID).cumsum(1) - 1).clamp(min=0)],
    "german_only_targets": [german_only],
    "nucleus": [nucleus],
}

# --- classic wrong answers, each with the words its whole hint must contain ----------------

WRONG = [
    ("frame_target", [lambda words, vocab: [vocab.stoi.get(w, UNK_ID) for w in words] + [3]],
     "do not start with <bos>"),
    ("frame_target", [lambda words, vocab: [2] + [vocab.stoi.get(w.lower(), 1) for w in words]
                      + [3]], "case-sensitive"),
    ("frame_target", [lambda words, vocab: [2] + [vocab.stoi.get(w, 0) for w in words] + [3]],
     "'zebra' is not in the vocabulary.*must become <unk>"),
    ("frame_target", [lambda words, vocab: [2] + [vocab.stoi[w] for w in words] + [3]],
     "KeyError: 'zebra'.*become <unk>.*stoi.get"),
    ("pad_batch", [lambda seqs: pad_by_hand([s[:max(len(t) for t in seqs) - 2] for s in seqs])],
     "lost its last 2 ids.*longest \\*word count\\*.*bug 3"),
    ("pad_batch", [lambda seqs: torch.nn.functional.pad(pad_by_hand(seqs), (0, 1))],
     "pad only as far"),
    ("attend", [lambda q, k, v: (q @ k.T) @ v], "scores were used as weights"),
    ("attend", [lambda q, k, v: (q @ k.T).softmax(0) @ v], r"each \*column\*"),
    ("prefix_and_target", [lambda ids, n: (ids[: n + 1], ids[n])], "the very token to predict"),
    ("prefix_and_target", [lambda ids, n: (ids[:n], ids[n - 1])], "last token of the prefix"),
    ("prefix_and_target", [lambda ids, n: None], "not a pair"),
    ("attend", [lambda q, k, v: (q @ k.T / q.size(-1) ** 0.5).softmax(-1) @ v],
     "do not do yet"),
    ("batched_attend", [lambda q, k, v: torch.bmm(torch.bmm(q, k.transpose(1, 2)).softmax(1), v)],
     r"over the \*queries\*"),
    ("loss", [lambda logits, t: F.cross_entropy(logits.flatten(0, 1), t.flatten())],
     "logits at <pad> targets change.*ignore_index=PAD_ID"),
    ("loss", [lambda logits, t: padded_loss(logits.softmax(-1), t)], "bug 9"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).triu(2)],
     "row 0 can see position 1. Why: the mask lets the future through"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).triu(0)],
     "row 0 cannot see its own position"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).tril(0)], "inverted"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)], "inverted"),
    ("causal_mask", [lambda n: torch.ones(n, n).triu(1)], "dtype.*bool mask"),
    ("hide", [hide_queries], "puts weight .* on the <pad> key.*hides query rows"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(pad_mask[:, None, :], 0.0)],
     "a hidden score of 0 is an ordinary score"),
    ("hide", [lambda s, pad_mask, future: hide(s, pad_mask, future) < -1], "that is a mask"),
    ("hide", [lambda s, pad_mask, future: hide(s, pad_mask, None if future is None else ~future)],
     "row 0 can see position 1.*not used as it is given"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(
        pad_mask[:, None, :] | (future if future is not None else False), float("-inf"))],
     "NaN in the weights of sentence 2.*-inf"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(pad_mask[:, None, :],
                                                        torch.finfo(s.dtype).min)],
     "row 0 can see position 1.*attn_mask, the causal mask, is not applied"),
    ("hide", [hide_twice_added], "gets weights \\[nan.*min \\+ min overflows to -inf"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(
        pad_mask[:, None, :] | (future if future is not None else False), -1e9)],
     "does not fit in float16"),
    ("hide", [hide_pad_then_future_minus_inf], "gets weights \\[nan.*hidden with -inf"),
    ("encoding", [precomputed(exponent=2.0)], "exponent is doubled"),
    ("encoding", [precomputed(swap=True)], "sin and cos are swapped"),
    ("encoding", [precomputed(cos_shift=0.5)], r"exponent of its own dimension"),
    ("encoding", [precomputed(interleave=False)], "first half"),
    ("encoding", [precomputed(multiply=True)], r"multiplied by 10000\^\(2i/d\) instead of divided"),
    ("rotation", [lambda k, d: rotation_by_hand(k, d).T], "rotates the wrong way"),
    ("rotation", [lambda k, d: torch.eye(d)], "nothing rotates"),
    ("stack", [stack_unchained], "encoder layer 1 did not receive the output of encoder layer 0"),
    ("stack", [stack_same_index], "decoder layer 0 reads the output of encoder layer 0"),
    ("stack", [lambda e, d, x, y, padding, future: run_stack(
        e, d, x, y, padding, torch.zeros_like(future))], "decoder layer 0 did not get the causal"),
    ("stack", [lambda e, d, x, y, padding, future: run_stack(
        e, d, x, y, torch.zeros_like(padding), future)], "encoder layer 0 did not get the source"),
    ("stack", [lambda e, d, x, y, padding, future: y], "encoder layer 0 ran 0 times"),
    ("parameters_per_layer", [lambda d: 9 * d * d], "biases are missing"),
    ("parameters_per_layer", [lambda d: 3 * (d * d + d)], "that is one attention"),
    ("parameters_per_layer", [lambda d: 12 * (d * d + d)], "no output projection yet"),
    ("parameters_per_layer", [lambda d: 0], "gives 0, fewer parameters"),
    ("add_and_norm", [lambda x, out, norm: x + norm(out)], "sublayer output was normalised"),
    ("add_and_norm", [lambda x, out, norm: F.layer_norm(x + out, x.shape[-1:])],
     "learned weight and bias"),
    ("layer_norm", [lambda x, w, b, eps: (x - x.mean(-1, keepdim=True))
                    / (x.var(-1, keepdim=True) + eps).sqrt() * w + b], "unbiased"),
    ("layer_norm", [lambda x, w, b, eps: (x - x.mean(-1, keepdim=True))
                    / (x.var(-1, keepdim=True, unbiased=False).sqrt() + eps) * w + b],
     "outside the square root"),
    ("split_heads", [lambda x, h: x.reshape(x.size(0), h, x.size(1), -1),
                     lambda x: x.reshape(x.size(0), x.size(2), -1)], "bug 6"),
    ("split_heads", [split, lambda x: x.reshape(x.size(0), x.size(2), -1)],
     "differs from the input before splitting.*does not undo split"),
    ("scaled_scores", [lambda q, k: q @ k.transpose(-2, -1)], "not scaled"),
    ("scaled_scores", [lambda q, k: (q @ k.transpose(-2, -1)) > 0], "that is a mask"),
    ("scaled_scores", [lambda q, k: q @ k.transpose(-2, -1) / q.size(-1)],
     "not by its square root"),
    ("scaled_scores", [lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(1) * q.size(-1))],
     "√embed_dim"),
    ("head_padding_mask", [lambda padding: padding[:, None, :, None]],
     "does not broadcast|on the <pad> key"),
    ("head_padding_mask", [lambda padding: padding[:, None, :]], "does not broadcast|grows"),
    ("head_padding_mask", [lambda padding: padding.float()], "not a bool tensor"),
    ("stream_positions", [lambda stream: torch.arange(stream.size(1)).expand_as(stream)],
     "counts the padding"),
    ("german_only_targets", [lambda stream, n: german_only(stream, n - 1)], "scores the <bos>"),
    ("german_only_targets", [lambda stream, n: stream[:, 1:]], "scores English words"),
    ("german_only_targets", [lambda stream, n: german_only(stream, n)[:, :-1].roll(1, 1)],
     "shape|next token"),
    ("nucleus", [lambda probabilities, p: nucleus(probabilities, p, included=True)],
     "keeps too few"),
    ("nucleus", [lambda probabilities, p: probabilities >= probabilities.max() * 0],
     "keeps too many"),
]


@pytest.mark.parametrize("name", RIGHT)
def test_the_right_answer_passes(name, capsys):
    passes(getattr(check, name), *RIGHT[name], capsys=capsys)


def test_a_right_answer_may_call_the_layers_with_keywords(capsys):
    passes(check.stack, run_stack_by_keyword, capsys=capsys)


def test_every_checker_has_a_right_answer_and_a_wrong_one():
    checkers = {checker.__name__ for checker in check.CHECKERS}
    assert checkers == set(RIGHT) == {name for name, _, _ in WRONG}


@pytest.mark.parametrize(("name", "answers", "hint"), WRONG,
                         ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(WRONG)])
def test_a_classic_mistake_gets_its_hint_in_steps(name, answers, hint):
    fails(getattr(check, name), *answers, hint=hint)


def test_a_hint_is_shown_without_a_traceback():
    error = check.NotYet("row 3 can see position 5")
    assert error._render_traceback_() == ["\N{BALLOT X} Not yet: row 3 can see position 5"]


def test_unknown_words_are_framed_as_unk_by_the_reference():
    """The data checker's vocabulary really lacks a word, or the <unk> hint could never fire."""
    assert encode_target(["the", "zebra"], check.VOCAB)[2] == UNK_ID
    assert PAD_ID not in encode_target(["the", "zebra"], check.VOCAB)
