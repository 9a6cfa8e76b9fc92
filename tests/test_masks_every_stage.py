"""The masking properties, checked on every stage that masks (03 to 07).

Each stage module is a complete copy of the one before, so a mask bug can be introduced in
any of them; these tests run the same checks on all of them (design §5).
"""

import importlib

import pytest
import torch

from toolkit.checkers import properties
from toolkit.stage_api import attention_maps, keeping_attention
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

MODULES = ["stage03_masking", "stage04_positional_encoding", "stage05_stacking",
           "stage06_ffn_layernorm", "stage07_multi_head"]
SIZES = {"stage05_stacking": {"num_encoder_layers": 2, "num_decoder_layers": 2},
         "stage06_ffn_layernorm": {"ff_dim": 40},
         "stage07_multi_head": {"num_heads": 4, "ff_dim": 40}}
# Attention modules per model: one of each kind (03, 04), or 2 layers of each (05 to 07).
ATTENTIONS = {"stage03_masking": 3, "stage04_positional_encoding": 3}
SRC_VOCAB, TGT_VOCAB = 20, 30
# Two sentences of unequal length with real padding; src_len != tgt_len.
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])


@pytest.fixture(params=MODULES)
def stage(request):
    return importlib.import_module(f"stages.{request.param}")


def make_model(stage, dtype=torch.float32):
    torch.manual_seed(0)
    extra = SIZES.get(stage.__name__.split(".")[-1], {})
    return stage.Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=16, **extra).to(dtype).eval()


def logits(model, src=SRC, tgt=TGT):
    with torch.no_grad():
        return model(src, tgt)


def test_more_source_padding_changes_no_real_output(stage):
    """Encoder self-attention and cross-attention must both hide <pad> keys (bugs 1, 2)."""
    model = make_model(stage)
    more = torch.cat([SRC, torch.full((2, 4), PAD_ID)], dim=1)
    assert torch.allclose(logits(model, more), logits(model), atol=1e-5)


def test_the_pad_id_and_embedding_do_not_matter(stage, monkeypatch):
    model = make_model(stage)
    before = logits(model)
    with torch.no_grad():
        model.src_embed.weight[PAD_ID] = 50.0
    monkeypatch.setattr(stage, "PAD_ID", 13)
    src = SRC.masked_fill(SRC == PAD_ID, 13)
    assert torch.allclose(logits(model, src), before, atol=1e-5)


@pytest.mark.parametrize("t", range(1, TGT.size(1)))
def test_a_target_token_changes_its_own_position_and_later_ones_only(stage, t):
    """Catches an inverted causal mask and one that also hides the diagonal (bug 4)."""
    model = make_model(stage)
    changed = TGT.clone()
    changed[:, t] = 17
    before, after = logits(model), logits(model, tgt=changed)
    assert torch.allclose(after[:, :t], before[:, :t], atol=1e-6)
    assert not torch.allclose(after[:, t], before[:, t], atol=1e-4)


def test_padded_keys_get_exactly_zero_weight_in_every_attention(stage):
    model = make_model(stage)
    with keeping_attention(model):  # stage 07 keeps weights only when asked
        logits(model)  # sentence 2 is <pad> from key 3 on; sentence 1 is real there
        maps = attention_maps(model)
    assert len(maps) == ATTENTIONS.get(stage.__name__.split(".")[-1], 6)  # none unchecked
    for name, weights in maps.items():
        if name.startswith("encoder") or "cross" in name:
            problem = properties.padding_problem(weights, SRC == PAD_ID)
            assert problem is None, f"{name}: {problem}"
        else:  # decoder self-attention: only the future is hidden
            problem = properties.causal_problem(weights > 0)
            assert problem is None, f"{name}: {problem}"


@pytest.mark.parametrize("length", [1, 2, 7])
def test_the_causal_mask_hides_exactly_the_future(stage, length):
    mask = stage.causal_mask(length, torch.device("cpu"))  # (length, length), True = hidden
    problem = properties.tensor_problem(mask, (length, length), torch.bool)
    problem = problem or properties.causal_problem(~mask)
    assert problem is None, problem


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_key_hidden_by_both_masks_gets_zero_weight_and_nothing_overflows(stage, dtype):
    """A key hidden by the padding mask and by attn_mask is hidden once: two fills of the
    most negative number that add up overflow to -inf (float16 first), and a row hidden
    twice over then turns into NaN. How the masks are combined is the stage's choice."""
    model = make_model(stage, dtype)
    attention = next(m for m in model.modules() if hasattr(m, "attention"))  # the first one
    torch.manual_seed(1)
    query = torch.randn(2, 4, 16, dtype=dtype)  # (batch, q_len, embed_dim)
    key_value = torch.randn(2, 5, 16, dtype=dtype)  # (batch, kv_len, embed_dim)
    padding = torch.tensor([[False, False, False, True, True], [True] * 5])  # (batch, kv_len)
    attn_mask = torch.ones(4, 5, dtype=torch.bool).triu(1)  # (q_len, kv_len): keys after q
    attn_mask[3] = True  # the last query may see no key at all
    with torch.no_grad(), keeping_attention(attention):
        out = attention(query, key_value, key_padding_mask=padding, attn_mask=attn_mask)
        weights = attention.attention.reshape(2, -1, 4, 5)  # (batch, heads, q_len, kv_len)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    hidden = padding[:, None, :] | attn_mask  # (batch, q_len, kv_len)
    assert (padding[:, None, :] & attn_mask).any(-1).all()  # every query has a key hidden twice
    seeing = ~hidden.all(dim=-1)  # (batch, q_len): queries with a key left to attend to
    for sentence, query_index in seeing.nonzero().tolist():
        row = weights[sentence, :, query_index].float()  # (heads, kv_len)
        assert torch.all(row[:, hidden[sentence, query_index]] == 0), (sentence, query_index)
        assert torch.allclose(row.sum(dim=-1), torch.ones(()), atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_an_all_padding_sentence_gives_no_nan_or_inf(stage, dtype):
    """A fully hidden row averages the values; it must never be NaN (bug 15)."""
    model = make_model(stage, dtype).train()
    src = torch.tensor([[PAD_ID] * 4, [4, 5, 6, EOS_ID]])
    tgt = torch.tensor([[BOS_ID, PAD_ID, PAD_ID], [BOS_ID, 8, EOS_ID]])
    out = model(src, tgt)
    assert torch.isfinite(out).all()
    out.float().sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is None or torch.isfinite(parameter.grad).all(), name


def test_translations_do_not_depend_on_the_batch(stage):
    from toolkit.search.decoding import translate
    from toolkit.text.vocab import Vocab

    src_vocab = Vocab(f"w{i}" for i in range(SRC_VOCAB - 4))
    tgt_vocab = Vocab(f"v{i}" for i in range(TGT_VOCAB - 4))
    sentences = ["w1 w2", "w3 w4 w5 w6 w7 w8 w9 w10", "w11", "w5 w5 w5"]
    model = make_model(stage)
    together = translate(model, sentences, src_vocab, tgt_vocab, batch_size=4)
    assert together == translate(model, sentences, src_vocab, tgt_vocab, batch_size=1)
