"""Exercise checkers: run a learner's function on several cases and explain the first failure.

A notebook calls, for example, `check.causal_mask(my_causal_mask)`. It prints a pass, or
raises `NotYet` with a hint that says what is wrong ("row 3 can see position 5: the mask
lets the future through"). Where a test asserts the same property (the masks, padding,
positions, heads, scaling, the loss and the stack) the hint comes from
`toolkit.checkers.properties`, the function that test asserts, so the two cannot disagree.
The other checkers compare with the stage's own module or with torch and name the classic
mistakes they recognise.

An error raised *inside* the learner's function is not caught: its own traceback is the best
hint there is.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from stages import stage01_naive_attention as stage01
from stages import stage02_batching as stage02
from stages import stage04_positional_encoding as stage04
from stages import stage05_stacking as stage05
from stages import stage06_ffn_layernorm as stage06
from stages import stage08_decoder_only as stage08
from toolkit.batching.batches import Batch, encode_target
from toolkit.checkers import layer_properties, properties
from toolkit.objectives import token_loss
from toolkit.search.sampling import truncate
from toolkit.stage_api import count_parameters
from toolkit.text.vocab import PAD_ID, Vocab


class NotYet(Exception):
    """A wrong answer, shown as its hint alone: a traceback into the checker would only hide it."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"\N{BALLOT X} Not yet: {self}"]


def _fail_on(problem: str | None, case: str) -> None:
    if problem is not None:
        raise NotYet(f"{case}: {problem}")


def _passed(name: str, cases: str) -> None:
    print(f"\N{CHECK MARK} {name}: correct on {cases}.")


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", "your function")


def _scores_problem(scores: object, shape: torch.Size) -> str | None:
    """Scores are floats of the given shape: a bool mask returned instead is a common slip."""
    if problem := properties.tensor_problem(scores, shape):
        return problem
    if not scores.is_floating_point():
        return (f"got a {scores.dtype} tensor: return the scores themselves (floats), not a "
                f"mask")
    return None


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- 00: data and tokens -------------------------------------------------------------------

VOCAB = Vocab("the dog cat sees a house".split())
SENTENCES = [["the", "dog"], ["a", "cat", "sees", "the", "house"], ["the", "zebra", "sees"],
             ["dog"]]
CAPITALISED = ["The", "dog"]  # VOCAB holds "the": to it, "The" is an unknown word


def frame_target(fn: Callable[[list[str], Vocab], list[int]]) -> None:
    """Exercise: a target sentence as ids, framed by <bos> and <eos>, unknown words as <unk>."""
    for words in [*SENTENCES, CAPITALISED]:
        ids = fn(words, VOCAB)
        _fail_on(properties.framing_problem(ids, words, VOCAB), f"{_name(fn)}({words})")
    _passed(_name(fn), f"{len(SENTENCES) + 1} sentences, one with a word the vocabulary lacks "
                       f"and one with a word it holds only in another case")


def pad_batch(fn: Callable[[list[list[int]]], torch.Tensor]) -> None:
    """Exercise: right-pad encoded sentences into one (batch, longest) tensor, losing nothing."""
    batches = [[encode_target(words, VOCAB) for words in SENTENCES],
               [encode_target(["dog"], VOCAB)],
               [encode_target(words, VOCAB) for words in reversed(SENTENCES[:3])]]
    for sequences in batches:
        lengths = [len(sequence) for sequence in sequences]
        _fail_on(properties.padded_batch_problem(fn(sequences), sequences),
                 f"{_name(fn)} on sequences of lengths {lengths}")
    _passed(_name(fn), f"{len(batches)} batches: the longest sentence second of four, alone, "
                       "and in the middle of three")


# --- 01: naive attention ---------------------------------------------------------------------

UNSCALED = ("the scores were divided by √d: stages 01 to 06 do not scale them yet; the scale "
            "arrives with multi-head attention in stage 07")


def attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: softmax(q k^T) v for one sentence, checked against stage 01's Attention."""
    cases = [(5, 7, 8), (1, 3, 4), (6, 2, 16)]  # (q_len, kv_len, embed_dim)
    for seed, (q_len, kv_len, embed_dim) in enumerate(cases):
        torch.manual_seed(seed)
        reference = stage01.Attention(embed_dim)
        x, memory = _random(q_len, embed_dim, seed=seed), _random(kv_len, embed_dim, seed=seed + 10)
        with torch.no_grad():
            q, k, v = reference.q_proj(x), reference.k_proj(memory), reference.v_proj(memory)
            expected = reference(x, memory)  # (q_len, embed_dim)
            scores = q @ k.T  # (q_len, kv_len)
            _fail_on(properties.compare(fn(q, k, v), expected, "stage01.Attention", {
                "the scores were used as weights: turn each row into a distribution over the "
                "keys with softmax(dim=-1) first": scores @ v,
                "each *column* of the weights sums to 1: take the softmax over the keys, the "
                "last dimension (dim=-1), so that each query's row sums to 1":
                    scores.softmax(0) @ v,
                UNSCALED: (scores / embed_dim**0.5).softmax(-1) @ v,
            }), f"{q_len} queries, {kv_len} keys, embed_dim {embed_dim}")
    _passed(_name(fn), f"{len(cases)} random sentences, with more keys than queries and fewer")


def prefix_and_target(fn: Callable[[list[int], int], tuple[list[int], int]]) -> None:
    """Exercise: stage 01's honest objective, the prefix ids[:n] and the token after it."""
    ids = [2, 14, 9, 21, 7, 3]  # <bos> four words <eos>
    for n in range(1, len(ids)):
        answer = fn(list(ids), n)
        _fail_on(properties.next_token_problem(answer, ids, n), f"{_name(fn)}(ids, n={n})")
    _passed(_name(fn), f"every prefix length of a {len(ids)}-token target")


# --- 02: batching ----------------------------------------------------------------------------

def batched_attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the same attention for a whole batch at once, against stage 02's Attention."""
    cases = [(3, 5, 7, 8), (1, 4, 4, 6), (4, 6, 2, 16)]  # (batch, q_len, kv_len, embed_dim)
    for seed, (batch, q_len, kv_len, embed_dim) in enumerate(cases):
        torch.manual_seed(seed)
        reference = stage02.Attention(embed_dim)
        x = _random(batch, q_len, embed_dim, seed=seed)
        memory = _random(batch, kv_len, embed_dim, seed=seed + 10)
        with torch.no_grad():
            q, k, v = reference.q_proj(x), reference.k_proj(memory), reference.v_proj(memory)
            scores = q @ k.transpose(1, 2)  # (batch, q_len, kv_len)
            _fail_on(properties.compare(fn(q, k, v), reference(x, memory), "stage02.Attention", {
                "the weights sum to 1 over the *queries* (dim=1): in a batch, the keys are the "
                "last dimension, so take softmax(dim=-1)": scores.softmax(1) @ v,
                "the scores were used as weights: apply softmax(dim=-1) first": scores @ v,
                UNSCALED: (scores / embed_dim**0.5).softmax(-1) @ v,
            }), f"batch {batch}, {q_len} queries, {kv_len} keys")
    _passed(_name(fn), f"{len(cases)} random batches, batch size 1 included")


def loss(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the loss of a padded batch, where <pad> targets must count for nothing."""
    _fail_on(properties.loss_problem(fn), f"{_name(fn)} on 3 sentences with <pad> targets")
    _passed(_name(fn), "a padded batch, its <pad> logits changed at random")


# --- 03: masking -----------------------------------------------------------------------------

def causal_mask(fn: Callable[[int], torch.Tensor]) -> None:
    """Exercise: the (length, length) mask that hides each target position's future."""
    lengths = (5, 1, 2, 9)
    for length in lengths:
        mask = fn(length)
        case = f"{_name(fn)}({length})"
        _fail_on(properties.tensor_problem(mask, (length, length), torch.bool), case)
        _fail_on(properties.causal_problem(~mask), case)
    _passed(_name(fn), f"lengths {', '.join(map(str, lengths))}")


def hide(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]) -> None:
    """Exercise: fill hidden scores once, so <pad> keys and the future get zero weight."""
    # Sentence 2 is all <pad>: its weights must stay finite.
    padding = torch.tensor([[False] * 6, [False] * 3 + [True] * 3, [True] * 6])  # (batch, kv)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    for seed, (q_len, attn_mask) in enumerate([(4, None), (6, future)]):
        scores = _random(3, q_len, 6, seed=seed) * 4  # (batch, q_len, kv_len)
        hidden = fn(scores.clone(), padding, attn_mask)
        case = f"{_name(fn)} on scores {tuple(scores.shape)}"
        case += " with a causal mask" if attn_mask is not None else ""
        _fail_on(_scores_problem(hidden, scores.shape), case)
        everything_hidden = padding[:, None, :] | (False if attn_mask is None else attn_mask)
        if torch.equal(hidden, scores.masked_fill(everything_hidden, 0.0)):
            raise NotYet(f"{case}: a hidden score of 0 is an ordinary score, and softmax still "
                         f"gives it weight: fill with torch.finfo(scores.dtype).min")
        weights = hidden.softmax(dim=-1)  # (batch, q_len, kv_len)
        _fail_on(properties.finite_problem(weights), case)
        if attn_mask is not None:
            _fail_on(properties.causal_problem(weights[:1] > 0), case)  # the unpadded sentence
        _fail_on(properties.padding_problem(weights, padding, attn_mask), case)
    _hide_in_half_precision(fn, padding, future)
    _passed(_name(fn), "padded sentences, a sentence of only <pad>, a causal mask, and float16 "
                       "scores with a row hidden by both masks")


def _hide_in_half_precision(fn: Callable, padding: torch.Tensor, future: torch.Tensor) -> None:
    """float16, and a mask that hides every key from query 0: in the sentence of only <pad>,
    that row is hidden by both masks, where two fills added reach -inf (and so NaN) and a
    constant like -1e9 does not fit. One fill of the combined mask gives it equal weights."""
    blind = future.clone()
    blind[0] = True  # (q_len, kv_len): query 0 may read nothing (any boolean mask is allowed)
    scores = (_random(3, 6, 6, seed=2) * 4).half()  # (batch, q_len, kv_len)
    case = f"{_name(fn)} on float16 scores with a mask that hides every key from query 0"
    try:
        hidden = fn(scores.clone(), padding, blind)
    except RuntimeError as error:
        if "overflow" not in str(error):
            raise
        raise NotYet(f"{case}: {error}. A constant like -1e9 does not fit in float16 (its range "
                     f"ends near ±65,504): fill with torch.finfo(scores.dtype).min") from None
    _fail_on(_scores_problem(hidden, scores.shape), case)
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


# --- 04: positional encoding -----------------------------------------------------------------

def encoding(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: the sinusoidal encoding, compared with the paper's closed form."""
    sizes = [(60, 32), (10, 4), (128, 64)]  # (max_len, embed_dim)
    for max_len, embed_dim in sizes:
        _fail_on(layer_properties.encoding_problem(fn(max_len, embed_dim), max_len, embed_dim),
                 f"{_name(fn)}({max_len}, {embed_dim})")
    _passed(_name(fn), f"{len(sizes)} sizes, up to 128 positions and 64 dimensions")


def rotation(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: the matrix M_k with PE[pos + k] = M_k @ PE[pos] for every position."""
    cases = [(1, 16), (5, 16), (20, 8)]  # (k, embed_dim)
    for k, embed_dim in cases:
        table = stage04.PositionalEncoding(embed_dim, max_seq_len=64).encoding.double()
        _fail_on(layer_properties.shift_problem(fn(k, embed_dim), table, k),
                 f"{_name(fn)}({k}, {embed_dim})")
    _passed(_name(fn), f"shifts {', '.join(str(k) for k, _ in cases)} over 64 positions")


# --- 05: stacking ----------------------------------------------------------------------------

def stack(fn: Callable) -> None:
    """Exercise: run the encoder layers, then the decoder layers, each on the one below."""
    src = torch.tensor([[4, 9, 7, 12, 5, 3], [6, 8, 3, PAD_ID, PAD_ID, PAD_ID]])
    padding, future = src == PAD_ID, torch.ones(5, 5, dtype=torch.bool).triu(1)
    for encoder_layers, decoder_layers in [(3, 2), (2, 4)]:
        torch.manual_seed(encoder_layers)
        model = stage05.Transformer(20, 30, embed_dim=16, num_encoder_layers=encoder_layers,
                                    num_decoder_layers=decoder_layers).eval()
        x, y = _random(2, 6, 16, seed=0), _random(2, 5, 16, seed=1)
        case = f"{_name(fn)} with {encoder_layers} encoder and {decoder_layers} decoder layers"
        with torch.no_grad(), layer_properties.recording(model.encoder_layers) as encoder_calls, \
                layer_properties.recording(model.decoder_layers) as decoder_calls:
            output = fn(model.encoder_layers, model.decoder_layers, x, y, padding, future)
        _fail_on(layer_properties.stacking_problem(encoder_calls, decoder_calls), case)
        _fail_on(layer_properties.stacking_masks_problem(encoder_calls, decoder_calls, padding,
                                                   future), case)
        # Each layer ran exactly once (checked above): [0] is its only call.
        first_encoder, first_decoder = encoder_calls[0][0], decoder_calls[0][0]
        if not torch.equal(first_encoder.args[0], x) or not torch.equal(first_decoder.args[0], y):
            raise NotYet(f"{case}: the first layers must read x and y themselves")
        last_output = decoder_calls[-1][0].output
        _fail_on(properties.mismatch(output, last_output, "the last decoder layer's output"), case)
    _passed(_name(fn), "two stacks of different depths")


def parameters_per_layer(fn: Callable[[int], int]) -> None:
    """Exercise: the parameters one more encoder layer plus one more decoder layer add."""
    for embed_dim in (16, 64):
        sizes = [count_parameters(stage05.Transformer(10, 10, embed_dim=embed_dim,
                                                      num_encoder_layers=n, num_decoder_layers=n))
                 for n in (1, 2)]
        expected, answer = sizes[1] - sizes[0], fn(embed_dim)
        if answer == expected:
            continue
        linear = embed_dim * embed_dim + embed_dim  # one nn.Linear(d, d): weights and biases
        hints = {
            9 * embed_dim * embed_dim: "the biases are missing: each nn.Linear(d, d) has d·d "
                                       "weights and d biases",
            3 * linear: "that is one attention: a decoder layer has two more (self and cross)",
            6 * linear: "that is two attentions: count the encoder layer's one and the decoder "
                        "layer's two",
            12 * linear: "stage 05's attention has no output projection yet: only q, k and v",
        }
        generic = ("count the q, k and v projections of every attention in one encoder layer "
                   "and one decoder layer, weights and biases")
        raise NotYet(f"{_name(fn)}({embed_dim}) = {answer}: {hints.get(answer, generic)}")
    _passed(_name(fn), "embed_dim 16 and 64")


# --- 06: feed-forward and LayerNorm ----------------------------------------------------------

def _random_layer_norm(embed_dim: int, seed: int) -> torch.nn.LayerNorm:
    """Random gain and bias: the defaults (1 and 0) would hide a norm used without them."""
    norm = torch.nn.LayerNorm(embed_dim)
    with torch.no_grad():
        norm.weight.copy_(1 + _random(embed_dim, seed=seed) * 0.5)
        norm.bias.copy_(_random(embed_dim, seed=seed + 1))
    return norm


def add_and_norm(fn: Callable) -> None:
    """Exercise: post-LN Add & Norm, checked against stage 06's encoder layer."""
    for seed, embed_dim in enumerate((16, 8)):
        torch.manual_seed(seed)
        layer = stage06.EncoderLayer(embed_dim, ff_dim=3 * embed_dim).eval()
        layer.norm1 = _random_layer_norm(embed_dim, seed)
        x = _random(2, 5, embed_dim, seed=seed)
        padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
        with torch.no_grad():
            sublayer = layer.self_attn(x, x, key_padding_mask=padding)  # (batch, len, embed_dim)
            expected = layer.norm1(x + sublayer)  # the first line of EncoderLayer.forward
            norm = layer.norm1
            mistakes = {
                "x was normalised before adding: post-LN normalises the sum, "
                "norm(x + sublayer_output)": norm(x) + sublayer,
                "the sublayer output was normalised before adding: post-LN normalises the sum":
                    x + norm(sublayer),
                "the residual is missing: add x to the sublayer output, then normalise":
                    norm(sublayer),
                "the sum is not normalised: pass it through norm": x + sublayer,
                "the norm's learned weight and bias were skipped: call the `norm` module you "
                "are given": F.layer_norm(x + sublayer, (embed_dim,)),
            }
            _fail_on(properties.compare(fn(x, sublayer, norm), expected,
                                        "norm(x + sublayer_output)", mistakes),
                     f"{_name(fn)} with embed_dim {embed_dim}")
    _passed(_name(fn), "two encoder layers with random LayerNorm weights")


def layer_norm(fn: Callable) -> None:
    """Exercise: LayerNorm by hand, checked against torch.nn.functional.layer_norm."""
    cases = [((2, 5, 6), 1e-5), ((3, 4, 8), 0.1), ((1, 1, 16), 1e-5)]  # (shape, eps)
    for seed, (shape, eps) in enumerate(cases):
        x = _random(*shape, seed=seed) * 3 + 1
        weight = 1 + _random(shape[-1], seed=seed + 1) * 0.5
        bias = _random(shape[-1], seed=seed + 2)
        centred = x - x.mean(-1, keepdim=True)
        variance = centred.pow(2).mean(-1, keepdim=True)  # biased: divided by n
        across_batch = (x - x.mean(0, keepdim=True)) / (x.var(0, keepdim=True, unbiased=False)
                                                        + eps).sqrt()
        mistakes = {
            "the variance is unbiased (divided by n - 1): LayerNorm divides by n, "
            "x.var(dim=-1, unbiased=False)":
                centred / (x.var(-1, keepdim=True) + eps).sqrt() * weight + bias,
            "eps is added outside the square root: divide by sqrt(var + eps)":
                centred / (variance.sqrt() + eps) * weight + bias,
            "the result is not scaled by weight and shifted by bias":
                centred / (variance + eps).sqrt(),
            "the statistics come from the wrong dimension: normalise each position over its "
            "features, the last dimension (dim=-1)": across_batch * weight + bias,
        }
        expected = F.layer_norm(x, shape[-1:], weight, bias, eps)
        _fail_on(properties.compare(fn(x, weight, bias, eps), expected, "F.layer_norm", mistakes,
                                    atol=1e-4),
                 f"{_name(fn)} on {shape} with eps={eps}")
    _passed(_name(fn), "three shapes, with a large eps to show where it goes")


# --- 07: multi-head attention ----------------------------------------------------------------

def split_heads(split: Callable[[torch.Tensor, int], torch.Tensor],
                merge: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: split embed_dim into heads and merge them back, as stage 07 does."""
    cases = [(2, 5, 12, 3), (3, 7, 16, 4), (1, 4, 8, 2)]  # (batch, len, embed_dim, heads)
    for seed, (batch, length, embed_dim, heads) in enumerate(cases):
        x = _random(batch, length, embed_dim, seed=seed)
        case = f"{batch} sentences of {length} positions, embed_dim {embed_dim}, {heads} heads"
        parts = split(x, heads)
        _fail_on(properties.split_problem(parts, x, heads), f"{_name(split)}: {case}")
        _fail_on(properties.mismatch(merge(parts), x, "the input before splitting", atol=0),
                 f"{_name(merge)}({_name(split)}(x)): {case}")
    _passed(f"{_name(split)} and {_name(merge)}", f"{len(cases)} shapes, 2 to 4 heads")


def scaled_scores(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise: the scores of every head, scaled so their spread does not grow with head_dim."""
    cases = [(2, 4, 5, 6, 8), (1, 2, 3, 3, 32)]  # (batch, heads, q_len, kv_len, head_dim)
    for seed, (batch, heads, q_len, kv_len, head_dim) in enumerate(cases):
        q = _random(batch, heads, q_len, head_dim, seed=seed)  # (batch, heads, q_len, head_dim)
        k = _random(batch, heads, kv_len, head_dim, seed=seed + 1)
        scores = fn(q, k)
        case = f"{_name(fn)} with {heads} heads of head_dim {head_dim}"
        _fail_on(_scores_problem(scores, (batch, heads, q_len, kv_len)), case)
        _fail_on(properties.scaling_problem(scores.softmax(-1), q, k), case)
    _passed(_name(fn), "2 and 4 heads, head_dim 8 and 32")


def head_padding_mask(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: shape the key-padding mask so it broadcasts over heads and query rows."""
    # (batch, kv_len), True at <pad>
    padding = torch.tensor([[False] * 6, [False] * 2 + [True] * 4, [False] * 5 + [True]])
    for seed, q_len in enumerate((6, 4)):  # self-attention, then cross-attention
        scores = _random(3, 4, q_len, 6, seed=seed)  # (batch, heads, q_len, kv_len)
        case = f"{_name(fn)} against scores (batch, heads, q_len, kv_len) = {tuple(scores.shape)}"
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
        _fail_on(properties.padding_problem(filled.softmax(-1), padding), case)
    _passed(_name(fn), "self-attention and cross-attention scores with 4 heads")


# Notebook 14: a decoder-only model's stream, its loss and its sampling.
STREAMS = torch.tensor([[4, 9, 7, 3, 2, 8, 11, 3], [6, 3, PAD_ID, PAD_ID, 2, 9, 3, PAD_ID]])


def stream_positions(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: each token's place in its own sentence, padding inside the stream skipped."""
    for stream in (STREAMS, STREAMS[:1], STREAMS[1:]):
        case = f"{_name(fn)} on the stream {stream.tolist()}"
        got = fn(stream)
        _fail_on(properties.tensor_problem(got, stream.shape), case)
        words = stream != PAD_ID  # a pad's own position is never used
        expected = (words.cumsum(dim=1) - 1).clamp(min=0)  # (batch, len)
        wrong = (got != expected) & words
        if wrong.any():
            row, column = (int(i) for i in wrong.nonzero()[0])
            counted = torch.arange(stream.size(1)).expand_as(stream)
            why = (": that counts the padding before it, so a sentence's positions would "
                   "depend on its neighbours'" if torch.equal(got[words], counted[words]) else "")
            raise NotYet(f"{case}: the token in row {row}, column {column} is word "
                         f"{int(expected[row, column])} of its sentence (counting from 0), got "
                         f"{int(got[row, column])}{why}")
    _passed(_name(fn), "streams with and without padding inside")


def nucleus(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise: which tokens top-p sampling keeps, as a bool mask over the vocabulary."""
    # No ties (any of several equal tokens would do) and no sum landing on p (rounding would
    # decide), so that exactly one answer is right.
    probabilities = torch.tensor([[0.05, 0.5, 0.15, 0.3], [0.6, 0.05, 0.1, 0.25]])
    for p in (0.45, 0.75, 0.9, 0.97):
        case = f"{_name(fn)} with p = {p} on {probabilities.tolist()}"
        kept = fn(probabilities, p)
        if not isinstance(kept, torch.Tensor) or kept.dtype != torch.bool:
            raise NotYet(f"{case}: return a bool tensor, True for the tokens kept")
        _fail_on(properties.tensor_problem(kept, probabilities.shape), case)
        expected = truncate(probabilities.log(), top_p=p) > -torch.inf  # (rows, vocab)
        if torch.equal(kept, expected):
            continue
        fewer, more = int(expected.sum() - kept.sum()), int(kept.sum() - expected.sum())
        hint = ("keeps too few: keep the token that takes the total to p (or past it) too"
                if fewer > 0 and not (kept & ~expected).any() else
                "keeps too many: stop at the first token that takes the total to p"
                if more > 0 and not (expected & ~kept).any() else
                "keeps the wrong tokens: take them from the most likely down")
        raise NotYet(f"{case}: expected {expected.tolist()}, got {kept.tolist()}; it {hint}")
    _passed(_name(fn), "p from 0.45 to 0.97, the probabilities out of order")


def german_only_targets(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise: targets for language_model(stream[:, :-1]) that score the German alone."""
    torch.manual_seed(0)
    model = stage08.Transformer(12, 12, embed_dim=16, num_heads=2, num_layers=2, ff_dim=32)
    src, tgt = STREAMS[:, :4], STREAMS[:, 4:]  # (2, 4) each: English, then <bos> German
    stream = model.join(src, tgt)  # (2, 8)
    case = f"{_name(fn)} on the stream {stream.tolist()}, the German from column 4"
    targets = fn(stream, src.size(1))
    _fail_on(properties.tensor_problem(targets, (2, 7)), case)
    expected = stream[:, 1:].clone()  # (batch, len - 1): each position's next token
    expected[:, : src.size(1)] = PAD_ID  # positions before <bos> predict English, or <bos>
    if not torch.equal(targets, expected):
        scored = (targets != PAD_ID) & (expected == PAD_ID)
        hint = ("the targets must be the next tokens, stream[:, 1:]"
                if not torch.equal(targets[expected != PAD_ID], expected[expected != PAD_ID])
                else "it scores the <bos> that the English's <eos> predicts: that token is "
                "given, not translated" if scored.nonzero()[:, 1].tolist() == [3] * 2
                else "it scores English words: only the German is translated")
        raise NotYet(f"{case}: expected {expected.tolist()}, got {targets.tolist()}; {hint}")
    with torch.no_grad():
        ours = token_loss(model.language_model(stream[:, :-1]), targets).mean()
        own = stage08.objective(model, Batch(src, tgt)).mean()
    _fail_on(None if torch.allclose(ours, own) else "the loss differs from stage 08's own",
             case)
    _passed(_name(fn), f"two streams, one of them padded: the loss equals stage 08's own "
                        f"({float(own):.4f})")


# Every exercise checker, in the order the notebooks use them.
CHECKERS = (frame_target, pad_batch, attend, prefix_and_target, batched_attend, loss, causal_mask,
            hide, encoding, rotation, stack, parameters_per_layer, add_and_norm, layer_norm,
            split_heads, scaled_scores, head_padding_mask, stream_positions, german_only_targets,
            nucleus)
