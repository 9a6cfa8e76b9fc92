"""Sampling from a decoder-only model: temperature, top-k and top-p, and the Gumbel-max draw."""

import math

import pytest
import torch

from stages import stage08_decoder_only as stage
from toolkit.search.sampling import gumbel_noise, sample, truncate
from toolkit.search.stream_decoding import stream_greedy_decode
from toolkit.text.vocab import EOS_ID

PROBABILITIES = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
LOGITS = PROBABILITIES.log()
DRAWS = 40_000


def drawn(logits: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """How often argmax(logits + Gumbel noise) picks each token, over DRAWS rows."""
    rows = logits.expand(DRAWS, -1)
    generator = torch.Generator().manual_seed(seed)
    picks = (rows + gumbel_noise(rows.shape, generator, rows.device)).argmax(dim=-1)
    return torch.bincount(picks, minlength=logits.size(-1)).double() / DRAWS


def assert_frequencies(frequencies: torch.Tensor, expected: torch.Tensor) -> None:
    """Within 5 standard errors of the expected probabilities, token by token."""
    error = (expected * (1 - expected) / DRAWS).sqrt()
    assert torch.all((frequencies - expected).abs() <= 5 * error + 1e-12), (frequencies, expected)


def test_gumbel_max_draws_each_token_with_its_softmax_probability():
    assert_frequencies(drawn(LOGITS), PROBABILITIES[0].double())


@pytest.mark.parametrize(("top_p", "kept"), [(0.5, 1), (0.7, 2), (0.8, 2), (0.81, 3), (1.0, 4)])
def test_top_p_keeps_the_fewest_likeliest_tokens_that_reach_p(top_p, kept):
    """0.5 + 0.3 reach 0.8 exactly: the third is needed only past it."""
    survivors = truncate(LOGITS, top_p=top_p) > -torch.inf
    assert survivors[0].tolist() == [True] * kept + [False] * (4 - kept)


def nucleus_size(logits: torch.Tensor, top_p: float) -> int:
    """The fewest likeliest tokens whose mass reaches p, summed exactly (math.fsum)."""
    ordered = sorted(logits.double().softmax(dim=-1).tolist(), reverse=True)
    low, high = 1, len(ordered)  # the mass grows with k: search for the first k that reaches p
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if math.fsum(ordered[:middle]) >= top_p else (middle + 1, high)
    return low


@pytest.mark.parametrize("vocab", [32_000, 50_000])
def test_top_p_keeps_exactly_the_nucleus_at_a_large_vocabulary(vocab):
    """p = 1 keeps every token; any p keeps the nucleus an exact sum gives, however long
    its tail (in float32 the running sum reached 1 early and dropped 2,508 of 32,000)."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(8, vocab, generator=generator) * 3  # (rows, vocab)
    assert bool((truncate(logits, top_p=1.0) > -torch.inf).all())
    for top_p in [0.5, 0.9, 0.99, 0.999, 0.99999]:
        kept = (truncate(logits, top_p=top_p) > -torch.inf).sum(dim=-1)  # (rows,)
        assert kept.tolist() == [nucleus_size(row, top_p) for row in logits], top_p


def test_truncated_draws_follow_the_renormalised_distribution():
    nucleus = drawn(truncate(LOGITS, top_p=0.7))
    assert_frequencies(nucleus, torch.tensor([0.5, 0.3, 0, 0], dtype=torch.float64) / 0.8)
    top3 = drawn(truncate(LOGITS, top_k=3))
    assert_frequencies(top3, torch.tensor([0.5, 0.3, 0.15, 0], dtype=torch.float64) / 0.95)


def test_temperature_sharpens_and_flattens():
    cold, hot = drawn(LOGITS / 0.5), drawn(LOGITS / 2.0)
    assert_frequencies(cold, (LOGITS[0] / 0.5).softmax(-1).double())
    assert cold[0] > PROBABILITIES[0, 0] > hot[0]
    assert hot[3] > PROBABILITIES[0, 3]


@pytest.mark.parametrize(("options", "message"), [
    ({"top_k": 0}, "top_k=0 must be 1 or more"),
    ({"top_p": 0.0}, r"top_p=0.0 must be in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p=1.5 must be in \(0, 1\]"),
])
def test_settings_that_keep_nothing_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        truncate(LOGITS, **options)


def language_model() -> stage.Transformer:
    torch.manual_seed(0)
    model = stage.Transformer(12, 12, embed_dim=16, num_heads=2, num_layers=2, ff_dim=32)
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] -= 2.0  # sentences long enough to differ
    return model.eval()


def test_temperature_zero_and_top_k_one_are_greedy_decoding():
    model, prompts = language_model(), torch.tensor([[5, 6], [7, 0]])
    greedy = stream_greedy_decode(model, prompts, 8)
    assert sample(model, prompts, 8, temperature=0) == greedy
    assert sample(model, prompts, 8, temperature=1.5, top_k=1,
                  generator=torch.Generator().manual_seed(3)) == greedy


def test_a_seeded_draw_repeats_and_another_seed_differs():
    model, nothing = language_model(), torch.empty(6, 0, dtype=torch.long)  # no prompt at all
    draws = [sample(model, nothing, 8, generator=torch.Generator().manual_seed(seed))
             for seed in (1, 1, 2)]
    assert draws[0] == draws[1] != draws[2]
    assert len({tuple(ids) for ids in draws[0]}) > 1  # six rows, not one sentence six times


def test_a_negative_temperature_is_refused():
    with pytest.raises(ValueError, match="temperature=-1 must be 0"):
        sample(language_model(), torch.empty(1, 0, dtype=torch.long), 5, temperature=-1)
