"""Stage 01: attention is a weighted average, blind to order, and the model reads its source."""

import pytest
import torch

from stages import stage01_naive_attention as stage
from toolkit import objectives
from toolkit.batching.batches import collate, encode_source, encode_target, endless, loader
from toolkit.learning.training import train
from toolkit.search.decoding import greedy_decode
from toolkit.stage_api import attention_maps
from toolkit.text.vocab import Vocab


def make_model(seed: int = 0) -> stage.Transformer:
    torch.manual_seed(seed)
    return stage.Transformer(src_vocab_size=20, tgt_vocab_size=30, embed_dim=16)


SRC = torch.tensor([4, 9, 7, 12, 5, 3])  # (src_len,), one sentence
TGT = torch.tensor([2, 8, 11, 6])  # (tgt_len,): a different length on purpose


def test_permuting_the_source_permutes_the_encoder_output():
    """Without positions, attention cannot tell word order apart."""
    model = make_model()
    permutation = torch.randperm(len(SRC), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(model.encode(SRC[permutation]), model.encode(SRC)[permutation],
                              atol=1e-6)


def test_without_positions_a_permuted_source_gets_the_same_logits():
    model = make_model()
    permutation = torch.tensor([5, 3, 1, 0, 2, 4])
    with torch.no_grad():
        assert torch.allclose(model(SRC[permutation], TGT), model(SRC, TGT), atol=1e-5)


def test_encoder_and_decoder_compute_the_formula_with_residuals():
    """x + softmax(Q K^T) V, from the modules' own weights: catches swapped or lost terms."""
    model = make_model()

    def attend(module, query, key_value):
        q, k, v = module.q_proj(query), module.k_proj(key_value), module.v_proj(key_value)
        return (q @ k.T).softmax(dim=-1) @ v

    with torch.no_grad():
        x = model.src_embed(SRC)
        memory = x + attend(model.encoder_self_attn, x, x)
        y = model.tgt_embed(TGT)
        y = y + attend(model.decoder_self_attn, y, y)
        y = y + attend(model.cross_attn, y, memory)
        assert torch.allclose(model.encode(SRC), memory, atol=1e-5)
        assert torch.allclose(model(SRC, TGT), model.out_proj(y), atol=1e-5)


def test_stage01_trains_on_the_last_position_only():
    """Its decoder has no mask, so teacher forcing would train on leaked answers."""
    assert stage.objective is objectives.last_position


def test_attention_weights_sum_to_one_over_keys():
    model = make_model()
    model(SRC, TGT)
    maps = attention_maps(model)
    assert maps["encoder_self_attn"].shape == (len(SRC), len(SRC))
    assert maps["decoder_self_attn"].shape == (len(TGT), len(TGT))
    assert maps["cross_attn"].shape == (len(TGT), len(SRC))  # decoder queries, encoder keys
    for weights in maps.values():
        assert torch.all(weights >= 0)
        assert torch.allclose(weights.sum(dim=-1), torch.ones(weights.size(0)))


def test_cross_attention_takes_queries_from_the_decoder_and_keys_from_the_encoder():
    """Changing the source must change the logits only through cross-attention."""
    model = make_model()
    other = torch.tensor([4, 9, 7, 13, 5, 3])
    with torch.no_grad():
        assert not torch.allclose(model(SRC, TGT), model(other, TGT))
        model.cross_attn.v_proj.weight.zero_()
        model.cross_attn.v_proj.bias.zero_()
        assert torch.allclose(model(SRC, TGT), model(other, TGT))


@pytest.mark.parametrize(("src", "tgt", "message"), [
    (torch.tensor([[4, 5]]), TGT, r"src must have shape \(len,\).*one sentence at a time"),
    (SRC, torch.tensor([2, 99]), r"tgt holds ids outside 0..29"),
    (torch.tensor([], dtype=torch.long), TGT, "src is empty"),
    (SRC.float(), TGT, "token ids"),
])
def test_bad_input_gets_a_message_that_says_what_to_fix(src, tgt, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make_model()(src, tgt)


# Eight sources that differ in one word each; their targets share the first three tokens,
# so only a model that reads its source through cross-attention can finish them right.
PAIRS = [
    ("the dog sees the cat", "der Hund sieht die Katze"),
    ("the dog sees the ball", "der Hund sieht den Ball"),
    ("the dog sees the child", "der Hund sieht das Kind"),
    ("the dog sees the woman", "der Hund sieht die Frau"),
    ("the dog sees the man", "der Hund sieht den Mann"),
    ("the dog sees the horse", "der Hund sieht das Pferd"),
    ("the dog sees the bird", "der Hund sieht den Vogel"),
    ("the dog sees the mouse", "der Hund sieht die Maus"),
]
SRC_VOCAB = Vocab.build(en.split() for en, _ in PAIRS)
TGT_VOCAB = Vocab.build(de.split() for _, de in PAIRS)


def train_on_pairs(model, steps: int):
    encoded = [(encode_source(en.split(), SRC_VOCAB), encode_target(de.split(), TGT_VOCAB))
               for en, de in PAIRS]
    train(model, stage.objective, endless(loader(encoded, batch_size=8)), steps=steps,
          lr=2e-3, warmup_steps=200)
    src = collate(encoded).src
    return [TGT_VOCAB.decode(ids) for ids in greedy_decode(model, src, max_len=10)]


def build_for_pairs(seed: int = 0) -> stage.Transformer:
    torch.manual_seed(seed)
    return stage.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), embed_dim=32)


def test_the_model_uses_its_source():
    """Stage 01 learns this slowly: its unscaled scores saturate the softmax (see stage 07)."""
    translations = train_on_pairs(build_for_pairs(), steps=1000)
    assert translations == [de.split() for _, de in PAIRS]


def test_a_model_without_cross_attention_cannot_pass_the_same_test():
    """The control: the test above fails when the source cannot reach the decoder."""
    model = build_for_pairs()
    model.cross_attn.forward = lambda query, key_value: torch.zeros_like(query)
    translations = train_on_pairs(model, steps=1000)
    assert sum(t == de.split() for t, (_, de) in zip(translations, PAIRS, strict=True)) <= 3
