"""Every exercise checker passes a right answer and names the mistake in a classic wrong one."""

import math

import pytest
import torch
import torch.nn.functional as F

from stages import stage03_masking as stage03
from stages import stage04_positional_encoding as stage04
from stages import stage07_multi_head as stage07
from toolkit.batching.batches import encode_target, pad
from toolkit.checkers import check, layer_properties
from toolkit.checkers.layer_properties import sinusoids
from toolkit.objectives import sequence_loss
from toolkit.text.vocab import PAD_ID, UNK_ID


def passes(checker, *answers, capsys):
    checker(*answers)
    assert capsys.readouterr().out.startswith("\N{CHECK MARK}")


def fails(checker, *answers, hint):
    with pytest.raises(check.NotYet, match=hint):
        checker(*answers)


# --- right answers: the stage's own code, or the few lines it takes ------------------------

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
    """Each mask filled on its own and the two added: a key hidden by both gets 2 x min."""
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


def layer_norm(x, weight, bias, eps):
    mean, variance = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / (variance + eps).sqrt() * weight + bias


def merge(x):
    return x.transpose(1, 2).flatten(2)


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
    "frame_target": [lambda words, vocab: encode_target(words, vocab)],
    "pad_batch": [pad],
    "attend": [lambda q, k, v: (q @ k.T).softmax(-1) @ v],
    "prefix_and_target": [lambda ids, n: (ids[:n], ids[n])],
    "batched_attend": [lambda q, k, v: torch.bmm(torch.bmm(q, k.transpose(1, 2)).softmax(-1), v)],
    "loss": [sequence_loss],
    "causal_mask": [lambda length: stage03.causal_mask(length, torch.device("cpu"))],
    "hide": [hide],
    "encoding": [lambda max_len, dim: stage04.PositionalEncoding(dim, max_len).encoding],
    "rotation": [layer_properties.rotation_matrix],
    "stack": [run_stack],
    "parameters_per_layer": [lambda d: 9 * (d * d + d)],
    "add_and_norm": [lambda x, sublayer_output, norm: norm(x + sublayer_output)],
    "layer_norm": [layer_norm],
    "split_heads": [lambda x, h: stage07.MultiHeadAttention(x.size(-1), h).split_heads(x), merge],
    "scaled_scores": [lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))],
    "head_padding_mask": [lambda padding: padding[:, None, None, :]],
    "stream_positions": [lambda stream: ((stream != PAD_ID).cumsum(1) - 1).clamp(min=0)],
    "german_only_targets": [german_only],
    "nucleus": [nucleus],
}

# --- classic wrong answers, each with the words its hint must contain -----------------------

WRONG = [
    ("frame_target", [lambda words, vocab: vocab.encode(words) + [3]], "must start with <bos>"),
    ("frame_target", [lambda words, vocab: [2] + [vocab.stoi.get(w.lower(), 1) for w in words]
                      + [3]], "case-sensitive"),
    ("frame_target", [lambda words, vocab: [2] + [vocab.stoi.get(w, 0) for w in words] + [3]],
     "'zebra' is not in the vocabulary: it must become <unk>"),
    ("pad_batch", [lambda seqs: pad([s[:max(len(t) for t in seqs) - 2] for s in seqs])],
     "lost its last 2 ids"),
    ("pad_batch", [lambda seqs: torch.nn.functional.pad(pad(seqs), (0, 1))], "pad only that far"),
    ("attend", [lambda q, k, v: (q @ k.T) @ v], "scores were used as weights"),
    ("attend", [lambda q, k, v: (q @ k.T).softmax(0) @ v], r"each \*column\*"),
    ("prefix_and_target", [lambda ids, n: (ids[: n + 1], ids[n])], "the very token to predict"),
    ("prefix_and_target", [lambda ids, n: (ids[:n], ids[n - 1])], "last token of the prefix"),
    ("prefix_and_target", [lambda ids, n: None], "return a pair"),
    ("attend", [lambda q, k, v: (q @ k.T / q.size(-1) ** 0.5).softmax(-1) @ v],
     "do not scale them yet"),
    ("batched_attend", [lambda q, k, v: torch.bmm(torch.bmm(q, k.transpose(1, 2)).softmax(1), v)],
     r"over the \*queries\*"),
    ("loss", [lambda logits, t: F.cross_entropy(logits.flatten(0, 1), t.flatten())],
     "logits at <pad> targets change"),
    ("loss", [lambda logits, t: sequence_loss(logits.softmax(-1), t)], "bug 9"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).triu(2)],
     "row 0 can see position 1: the mask lets the future through"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).triu(0)],
     "row 0 cannot see its own position"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).tril(0)], "inverted"),
    ("causal_mask", [lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)], "inverted"),
    ("causal_mask", [lambda n: torch.ones(n, n).triu(1)], "dtype"),
    ("hide", [hide_queries], "puts weight .* on the <pad> key"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(pad_mask[:, None, :], 0.0)],
     "a hidden score of 0 is an ordinary score"),
    ("hide", [lambda s, pad_mask, future: hide(s, pad_mask, future) < -1], "not a mask"),
    ("hide", [lambda s, pad_mask, future: hide(s, pad_mask, None if future is None else ~future)],
     "row 0 can see position 1"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(
        pad_mask[:, None, :] | (future if future is not None else False), float("-inf"))],
     "NaN in the weights of sentence 2"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(pad_mask[:, None, :],
                                                        torch.finfo(s.dtype).min)],
     "row 0 can see position 1"),
    ("hide", [hide_twice_added], "two fills added overflow to -inf"),
    ("hide", [lambda s, pad_mask, future: s.masked_fill(
        pad_mask[:, None, :] | (future if future is not None else False), -1e9)],
     "does not fit in float16"),
    ("hide", [hide_pad_then_future_minus_inf], "two fills added overflow"),
    ("encoding", [lambda n, d: sinusoids(n, d, exponent=2.0)], "exponent is doubled"),
    ("encoding", [lambda n, d: sinusoids(n, d, swap=True)], "sin and cos are swapped"),
    ("encoding", [lambda n, d: sinusoids(n, d, cos_shift=0.5)], r"exponent of its own dimension"),
    ("rotation", [lambda k, d: layer_properties.rotation_matrix(k, d).T], "rotates the wrong way"),
    ("rotation", [lambda k, d: torch.eye(d)], "must rotate by the angle"),
    ("stack", [stack_unchained], "encoder layer 1 did not receive the output of encoder layer 0"),
    ("stack", [stack_same_index], "decoder layer 0 reads the output of encoder layer 0"),
    ("stack", [lambda e, d, x, y, padding, future: run_stack(
        e, d, x, y, padding, torch.zeros_like(future))], "decoder layer 0 did not get the causal"),
    ("stack", [lambda e, d, x, y, padding, future: run_stack(
        e, d, x, y, torch.zeros_like(padding), future)], "encoder layer 0 did not get the source"),
    ("parameters_per_layer", [lambda d: 9 * d * d], "biases are missing"),
    ("parameters_per_layer", [lambda d: 3 * (d * d + d)], "that is one attention"),
    ("parameters_per_layer", [lambda d: 12 * (d * d + d)], "no output projection yet"),
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
    ("split_heads", [RIGHT["split_heads"][0], lambda x: x.reshape(x.size(0), x.size(2), -1)],
     "differs from the input before splitting"),
    ("scaled_scores", [lambda q, k: q @ k.transpose(-2, -1)], "not scaled"),
    ("scaled_scores", [lambda q, k: (q @ k.transpose(-2, -1)) > 0], "not a mask"),
    ("scaled_scores", [lambda q, k: q @ k.transpose(-2, -1) / q.size(-1)],
     "not by its square root"),
    ("scaled_scores", [lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.size(1) * q.size(-1))],
     "√embed_dim"),
    ("head_padding_mask", [lambda padding: padding[:, None, :, None]],
     "does not broadcast|on the <pad> key"),
    ("head_padding_mask", [lambda padding: padding[:, None, :]], "does not broadcast|grows"),
    ("stream_positions", [lambda stream: torch.arange(stream.size(1)).expand_as(stream)],
     "counts the padding"),
    ("german_only_targets", [lambda stream, n: german_only(stream, n - 1)], "scores the <bos>"),
    ("german_only_targets", [lambda stream, n: stream[:, 1:]], "scores English words"),
    ("german_only_targets", [lambda stream, n: german_only(stream, n)[:, :-1].roll(1, 1)],
     "shape|next tokens"),
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
def test_a_classic_mistake_gets_its_hint(name, answers, hint):
    fails(getattr(check, name), *answers, hint=hint)


def test_a_hint_is_shown_without_a_traceback():
    error = check.NotYet("row 3 can see position 5")
    assert error._render_traceback_() == ["\N{BALLOT X} Not yet: row 3 can see position 5"]


def test_unknown_words_are_framed_as_unk_by_the_reference():
    """The data checker's vocabulary really lacks a word, or the <unk> hint could never fire."""
    assert encode_target(["the", "zebra"], check.VOCAB)[2] == UNK_ID
    assert PAD_ID not in encode_target(["the", "zebra"], check.VOCAB)
