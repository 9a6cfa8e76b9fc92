"""Checkers of layers: the stack, its parameters per layer, Add & Norm and LayerNorm."""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from stages import stage05_stacking as stage05
from stages import stage06_ffn_layernorm as stage06
from toolkit.checkers import layer_properties, properties
from toolkit.checkers.verdicts import (
    Cause,
    Hint,
    exercise,
    fail_on,
    in_every_stage,
    name_of,
    passed,
    random_tensor,
)
from toolkit.stage_api import count_parameters
from toolkit.text.vocab import PAD_ID

NO_LAYER = Cause("no layer ran: y comes back as it came in, as the stub returns it",
                 f"run every layer, each on the output of the one below: "
                 f"{layer_properties.STACKED}")


@exercise(*in_every_stage("Transformer"))  # a stage's own encode and decode run its stacks
def stack(fn: Callable) -> None:
    """Exercise: run the encoder layers, then the decoder layers, each on the one below."""
    src = torch.tensor([[4, 9, 7, 12, 5, 3], [6, 8, 3, PAD_ID, PAD_ID, PAD_ID]])
    padding, future = src == PAD_ID, torch.ones(5, 5, dtype=torch.bool).triu(1)
    for encoder_layers, decoder_layers in [(3, 2), (2, 4)]:
        torch.manual_seed(encoder_layers)
        model = stage05.Transformer(20, 30, embed_dim=16, num_encoder_layers=encoder_layers,
                                    num_decoder_layers=decoder_layers).eval()
        x, y = random_tensor(2, 6, 16, seed=0), random_tensor(2, 5, 16, seed=1)
        case = f"{name_of(fn)} with {encoder_layers} encoder and {decoder_layers} decoder layers"
        with torch.no_grad(), layer_properties.recording(model.encoder_layers) as encoder_calls, \
                layer_properties.recording(model.decoder_layers) as decoder_calls:
            output = fn(model.encoder_layers, model.decoder_layers, x, y, padding, future)
        ran = any(calls for calls in [*encoder_calls, *decoder_calls])
        fail_on(layer_properties.stacking_problem(encoder_calls, decoder_calls), case,
                stub=None if ran else NO_LAYER)
        fail_on(layer_properties.stacking_masks_problem(encoder_calls, decoder_calls, padding,
                                                   future), case)
        # Each layer ran exactly once (checked above): [0] is its only call.
        first_encoder, first_decoder = encoder_calls[0][0], decoder_calls[0][0]
        if not torch.equal(first_encoder.args[0], x) or not torch.equal(first_decoder.args[0], y):
            fail_on(Hint("the first layers did not read x and y themselves",
                         "the embeddings go into the first layer of each stack unchanged",
                         layer_properties.STACKED), case)
        last_output = decoder_calls[-1][0].output
        fail_on(properties.compare(output, last_output, "the last decoder layer's output",
                                   otherwise=Cause("the stack's output is the last decoder "
                                                   "layer's, unchanged",
                                                   "return the y of the last decoder layer")),
                case)
    passed(name_of(fn), "two stacks of different depths")


# Building a stage's layers and counting them: the count the check makes itself.
@exercise(count_parameters, *in_every_stage("Transformer"), *in_every_stage("EncoderLayer"),
          *in_every_stage("DecoderLayer"), *in_every_stage("Attention"))
def parameters_per_layer(fn: Callable[[int], int]) -> None:
    """Exercise: the parameters one more encoder layer plus one more decoder layer add."""
    count = ("3 attentions (the encoder layer's one, the decoder layer's two) × 3 projections "
             "(q, k, v) × (d·d weights + d biases)")
    for embed_dim in (16, 64):
        sizes = [count_parameters(stage05.Transformer(10, 10, embed_dim=embed_dim,
                                                      num_encoder_layers=n, num_decoder_layers=n))
                 for n in (1, 2)]
        expected, answer = sizes[1] - sizes[0], fn(embed_dim)
        if answer == expected:
            continue
        linear = embed_dim * embed_dim + embed_dim  # one nn.Linear(d, d): weights and biases
        causes = {
            0: "0 is the stub's placeholder: nothing is counted yet",
            9 * embed_dim * embed_dim: "the biases are missing: each nn.Linear(d, d) has d·d "
                                       "weights and d biases",
            3 * linear: "that is one attention: a decoder layer has two more (self and cross)",
            6 * linear: "that is two attentions: the encoder layer has one and the decoder "
                        "layer two",
            12 * linear: "stage 05's attention has no output projection yet: only q, k and v",
        }
        generic = ("some projection is missing or counted twice: every attention of one "
                   "encoder layer and one decoder layer has q, k and v, weights and biases")
        case = f"{name_of(fn)}({embed_dim})"
        if not isinstance(answer, int):
            fail_on(Hint(f"got {answer!r}, not an int", "a count of parameters is a whole "
                         "number", f"return an int: {count}"), case)
        more = "fewer" if answer < expected else "more"
        fail_on(Hint(f"it gives {answer}, {more} parameters than one more encoder layer and one "
                     f"more decoder layer add", causes.get(answer, generic), count), case)
    passed(name_of(fn), "embed_dim 16 and 64")


def _random_layer_norm(embed_dim: int, seed: int) -> torch.nn.LayerNorm:
    """Random gain and bias: the defaults (1 and 0) would hide a norm used without them."""
    norm = torch.nn.LayerNorm(embed_dim)
    with torch.no_grad():
        norm.weight.copy_(1 + random_tensor(embed_dim, seed=seed) * 0.5)
        norm.bias.copy_(random_tensor(embed_dim, seed=seed + 1))
    return norm


# A stage's own layers add and normalise inside their forward.
@exercise(*in_every_stage("EncoderLayer"), *in_every_stage("DecoderLayer"))
def add_and_norm(fn: Callable) -> None:
    """Exercise: post-LN Add & Norm, checked against stage 06's encoder layer."""
    for seed, embed_dim in enumerate((16, 8)):
        torch.manual_seed(seed)
        layer = stage06.EncoderLayer(embed_dim, ff_dim=3 * embed_dim).eval()
        layer.norm1 = _random_layer_norm(embed_dim, seed)
        x = random_tensor(2, 5, embed_dim, seed=seed)
        padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
        with torch.no_grad():
            sublayer = layer.self_attn(x, x, key_padding_mask=padding)  # (batch, len, embed_dim)
            expected = layer.norm1(x + sublayer)  # the first line of EncoderLayer.forward
            norm = layer.norm1
            answer = "norm(x + sublayer_output)"
            mistakes = {
                Cause("x was normalised before adding: post-LN normalises the sum",
                      answer): norm(x) + sublayer,
                Cause("the sublayer output was normalised before adding: post-LN normalises the "
                      "sum", answer): x + norm(sublayer),
                Cause("the residual is missing", f"add x to the sublayer output, then "
                      f"normalise: {answer}"): norm(sublayer),
                Cause("the sum is not normalised", f"pass it through norm: {answer}"):
                    x + sublayer,
                Cause("the norm's learned weight and bias were skipped",
                      f"call the `norm` module you are given: {answer}"):
                    F.layer_norm(x + sublayer, (embed_dim,)),
            }
            fail_on(properties.compare(fn(x, sublayer, norm), expected,
                                       "norm(x + sublayer_output)", mistakes,
                                       Cause("post-LN adds the residual, then normalises the "
                                             "sum with the norm given", answer)),
                    f"{name_of(fn)} with embed_dim {embed_dim}")
    passed(name_of(fn), "two encoder layers with random LayerNorm weights")


# torch's LayerNorm, the very function the check compares with.
@exercise(F.layer_norm, torch.layer_norm, torch.native_layer_norm, torch.nn.LayerNorm)
def layer_norm(fn: Callable) -> None:
    """Exercise: LayerNorm by hand, checked against torch.nn.functional.layer_norm."""
    cases = [((2, 5, 6), 1e-5), ((3, 4, 8), 0.1), ((1, 1, 16), 1e-5)]  # (shape, eps)
    for seed, (shape, eps) in enumerate(cases):
        x = random_tensor(*shape, seed=seed) * 3 + 1
        weight = 1 + random_tensor(shape[-1], seed=seed + 1) * 0.5
        bias = random_tensor(shape[-1], seed=seed + 2)
        centred = x - x.mean(-1, keepdim=True)
        variance = centred.pow(2).mean(-1, keepdim=True)  # biased: divided by n
        across_batch = (x - x.mean(0, keepdim=True)) / (x.var(0, keepdim=True, unbiased=False)
                                                        + eps).sqrt()
        answer = ("(x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True, "
                  "unbiased=False) + eps) * weight + bias")
        mistakes = {
            Cause("x comes back as it came in, as the stub returns it: nothing is normalised "
                  "yet", answer): x,
            Cause("the variance is unbiased (divided by n - 1): LayerNorm divides by n",
                  f"x.var(dim=-1, unbiased=False): {answer}"):
                centred / (x.var(-1, keepdim=True) + eps).sqrt() * weight + bias,
            Cause("eps is added outside the square root", f"divide by sqrt(var + eps): {answer}"):
                centred / (variance.sqrt() + eps) * weight + bias,
            Cause("the result is not scaled by weight and shifted by bias",
                  f"end with * weight + bias: {answer}"): centred / (variance + eps).sqrt(),
            Cause("the statistics come from the wrong dimension: each position is normalised "
                  "over its own features", f"the last dimension, dim=-1: {answer}"):
                across_batch * weight + bias,
        }
        expected = F.layer_norm(x, shape[-1:], weight, bias, eps)
        fail_on(properties.compare(fn(x, weight, bias, eps), expected, "F.layer_norm", mistakes,
                                   Cause("each position is not normalised over its features, then "
                                         "scaled by weight and shifted by bias", answer),
                                   atol=1e-4),
                f"{name_of(fn)} on {shape} with eps={eps}")
    passed(name_of(fn), "three shapes, with a large eps to show where it goes")
