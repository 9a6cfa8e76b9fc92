"""Stage 07: multi-head attention, equal to torch.nn.MultiheadAttention and nn.Transformer."""

import math

import pytest
import torch
import torch.nn.functional as F
from test_stage06 import check_masks_follow_torch_seed, drop_alike
from torch import nn

from stages import stage07_multi_head as stage
from toolkit.checkers import properties
from toolkit.checkers.from_torch_nn import copy_attention, load_nn_transformer
from toolkit.stage_api import attention_maps, keeping_attention
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

# embed_dim != head_dim, at least 2 heads and 2 layers, unequal lengths, real padding.
EMBED_DIM, NUM_HEADS, FF_DIM, LAYERS = 16, 4, 40, 2
HEAD_DIM = EMBED_DIM // NUM_HEADS
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])
PADDING = SRC == PAD_ID  # (batch, src_len)
FUTURE = torch.ones(5, 5, dtype=torch.bool).triu(1)  # (tgt_len, tgt_len)
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}


def make_attention(dtype=torch.float32) -> stage.MultiHeadAttention:
    torch.manual_seed(0)
    return stage.MultiHeadAttention(EMBED_DIM, NUM_HEADS).to(dtype).eval()


def test_heads_equal_separate_attentions_on_slices_then_concatenated():
    """Catches a head split with view but no transpose, and Q/K/V shared across heads."""
    attention = make_attention()
    x, memory = torch.randn(2, 5, EMBED_DIM), torch.randn(2, 6, EMBED_DIM)
    with torch.no_grad():
        q, k, v = attention.q_proj(x), attention.k_proj(memory), attention.v_proj(memory)
        heads = []
        for h in range(NUM_HEADS):
            part = slice(h * HEAD_DIM, (h + 1) * HEAD_DIM)
            scores = q[..., part] @ k[..., part].transpose(-2, -1) / math.sqrt(HEAD_DIM)
            heads.append(scores.softmax(dim=-1) @ v[..., part])  # (batch, q_len, head_dim)
        expected = attention.out_proj(torch.cat(heads, dim=-1))
        assert torch.allclose(attention(x, memory), expected, atol=1e-6)
    assert attention.q_proj.weight.shape == (EMBED_DIM, EMBED_DIM)


def test_every_head_reads_the_whole_embedding():
    """Each head projects all embed_dim features, not only its own slice of them (bug 7)."""
    attention = make_attention()
    x = torch.randn(2, 5, EMBED_DIM)
    nudged = x.clone()
    nudged[..., :HEAD_DIM] += 1.0  # change only the features that head 0's slice would hold
    with torch.no_grad(), keeping_attention(attention):
        attention(x, x)
        before = attention.attention  # (batch, heads, q_len, kv_len)
        attention(nudged, nudged)
        after = attention.attention
    for head in range(NUM_HEADS):
        assert not torch.allclose(before[:, head], after[:, head], atol=1e-4), head


def test_scores_are_scaled_by_one_over_sqrt_head_dim():
    attention = make_attention()
    x = torch.randn(1, 3, EMBED_DIM)
    with torch.no_grad(), keeping_attention(attention):
        attention(x, x)
        weights = attention.attention  # (1, heads, 3, 3)
        q = attention.split_heads(attention.q_proj(x))  # (1, heads, 3, head_dim)
        k = attention.split_heads(attention.k_proj(x))
    problem = properties.scaling_problem(weights, q, k)
    assert problem is None, problem


def test_split_heads_gives_each_head_its_own_slice_of_features():
    """A view to (batch, heads, len, head_dim) without the transpose mixes positions (bug 6)."""
    attention = make_attention()
    x = torch.randn(2, 5, EMBED_DIM)
    problem = properties.split_problem(attention.split_heads(x), x, NUM_HEADS)
    assert problem is None, problem
    assert torch.equal(attention.merge_heads(attention.split_heads(x)), x)


def test_indivisible_embed_dim_is_refused_naming_both_numbers():
    with pytest.raises(ValueError, match=r"embed_dim=10.*num_heads=4"):
        stage.MultiHeadAttention(10, 4)


def randomise(module: nn.Module) -> nn.Module:
    """nn.* starts biases at 0 and LayerNorm at (1, 0), which would hide a swapped bias or
    norm; random values make every copied number count."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.3)
    return module


def nn_attention(dtype) -> nn.MultiheadAttention:
    torch.manual_seed(1)
    return randomise(nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)).to(
        dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_self_attention_equals_nn_multihead_attention(dtype):
    theirs, ours = nn_attention(dtype), make_attention(dtype)
    copy_attention(ours, theirs)
    x = torch.randn(2, 6, EMBED_DIM, dtype=dtype)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    with torch.no_grad():
        for kwargs in ({"key_padding_mask": PADDING}, {"attn_mask": future}):
            expected, _ = theirs(x, x, x, need_weights=False, **kwargs)
            assert (ours(x, x, **kwargs) - expected).abs().max() <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_attention_equals_nn_multihead_attention(dtype):
    theirs, ours = nn_attention(dtype), make_attention(dtype)
    copy_attention(ours, theirs)
    y, memory = torch.randn(2, 5, EMBED_DIM, dtype=dtype), torch.randn(2, 6, EMBED_DIM, dtype=dtype)
    with torch.no_grad():
        expected, _ = theirs(y, memory, memory, key_padding_mask=PADDING, need_weights=False)
        assert (ours(y, memory, key_padding_mask=PADDING) - expected).abs().max() <= TOLERANCE[
            dtype]


def make_pair(dtype, dropout=0.0):
    """A stage-07 model and an nn.Transformer with the same weights.

    nn.Transformer adds a LayerNorm after each whole stack, which the paper's post-LN model
    does not have: we replace those two norms with nn.Identity on the PyTorch side.
    """
    torch.manual_seed(0)
    ours = stage.Transformer(20, 30, embed_dim=EMBED_DIM, num_heads=NUM_HEADS,
                             num_encoder_layers=LAYERS, num_decoder_layers=LAYERS,
                             ff_dim=FF_DIM, dropout=dropout).to(dtype)
    theirs = nn.Transformer(EMBED_DIM, NUM_HEADS, LAYERS, LAYERS, FF_DIM, dropout=dropout,
                            batch_first=True).to(dtype)
    theirs.encoder.norm, theirs.decoder.norm = nn.Identity(), nn.Identity()
    load_nn_transformer(ours, randomise(theirs))
    return ours, theirs


def reference_logits(ours, theirs, src, tgt, dropout=0.0):
    """Our embeddings, positions and output layer around nn.Transformer's layers; the paper
    drops out the sum of embeddings and positions on both sides (train mode only)."""
    padding = src == PAD_ID
    future = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).triu(1)
    x = F.dropout(ours.positions(ours.src_embed(src)), dropout, theirs.training)
    y = F.dropout(ours.positions(ours.tgt_embed(tgt)), dropout, theirs.training)
    out = theirs(x, y, src_key_padding_mask=padding, tgt_mask=future,
                 memory_key_padding_mask=padding)
    return ours.out_proj(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_the_whole_model_equals_nn_transformer(dtype, mode):
    ours, theirs = make_pair(dtype)
    ours.train(mode == "train")
    theirs.train(mode == "train")
    with torch.no_grad():
        got, expected = ours(SRC, TGT), reference_logits(ours, theirs, SRC, TGT)
    real = TGT != PAD_ID  # compare the positions whose outputs are used
    assert (got[real] - expected[real]).abs().max() <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_train_mode_with_dropout_drops_where_nn_transformer_does(dtype, monkeypatch):
    """With the same units dropped (test_stage06.drop_alike), dropout 0.1 in train mode gives
    nn.Transformer's logits: on embeddings + positions, attention weights, inside the FFN and
    on every sublayer's output before its residual add. A missing or moved one changes them."""
    drop_alike(monkeypatch)
    ours, theirs = make_pair(dtype, dropout=0.1)
    ours.train()
    theirs.train()
    with torch.no_grad():
        got, expected = ours(SRC, TGT), reference_logits(ours, theirs, SRC, TGT, dropout=0.1)
        assert not torch.allclose(got, ours.eval()(SRC, TGT))  # dropout did act
    real = TGT != PAD_ID
    assert (got[real] - expected[real]).abs().max() <= TOLERANCE[dtype]


def test_in_eval_mode_dropout_changes_nothing():
    """Inverted dropout scales in train mode, so eval is the dropout-0 model, unscaled."""
    with_dropout, without = paper_model(dropout=0.3), paper_model(dropout=0.0)
    with torch.no_grad():
        assert torch.equal(with_dropout.eval()(SRC, TGT), without.eval()(SRC, TGT))


def test_train_mode_draws_its_masks_from_torch_seed():
    check_masks_follow_torch_seed(paper_model(dropout=0.1).train())


def test_dropout_on_attention_weights_keeps_the_expected_output():
    """Dropout acts on the weights after the softmax and rescales by 1 / (1 - p), so the
    average over many masks is the eval output. Dropping scores before the softmax, or
    zeroing without rescaling, shifts the average."""
    torch.manual_seed(0)
    attention = stage.MultiHeadAttention(EMBED_DIM, NUM_HEADS, dropout=0.3)
    query, memory = torch.randn(1, 4, EMBED_DIM), torch.randn(1, 6, EMBED_DIM)
    copies = 20_000  # each row of the batch draws its own mask
    with torch.no_grad():
        expected = attention.eval()(query, memory)  # (1, 4, embed_dim)
        sampled = attention.train()(query.expand(copies, -1, -1), memory.expand(copies, -1, -1))
    spread = sampled.std(dim=0) / copies**0.5  # the standard error of the average
    error = (sampled.mean(dim=0) - expected[0]).abs()
    assert torch.all(error < 5 * spread + 1e-6), (error / spread).max()


def test_padding_and_the_future_stay_hidden_in_every_head():
    ours, _ = make_pair(torch.float32)
    ours.eval()
    more = torch.cat([SRC, torch.full((2, 3), PAD_ID)], dim=1)
    changed = TGT.clone()
    changed[:, 3] = 17
    with torch.no_grad():
        assert torch.allclose(ours(more, TGT), ours(SRC, TGT), atol=1e-5)
        assert torch.allclose(ours(SRC, changed)[:, :3], ours(SRC, TGT)[:, :3], atol=1e-6)
        with keeping_attention(ours):
            ours(SRC, TGT)
            weights = ours.encoder_layers[0].self_attn.attention  # (batch, heads, src, src)
    assert weights.shape == (2, NUM_HEADS, 6, 6)
    assert torch.all(weights[1, :, :, 3:] == 0)


ATTENTION_MODULES = 3 * LAYERS  # encoder self, decoder self and cross, per layer


def attention_modules(model: nn.Module) -> dict[str, stage.MultiHeadAttention]:
    return {name: module for name, module in model.named_modules()
            if isinstance(module, stage.MultiHeadAttention)}


def test_training_keeps_no_attention_weights():
    """The hot path: six (batch, heads, len, len) tensors per step are kept only when asked."""
    model, _ = make_pair(torch.float32)
    model.train()
    model(SRC, TGT).sum().backward()
    assert len(attention_modules(model)) == ATTENTION_MODULES
    for name, module in attention_modules(model).items():
        assert module.attention is None, name
    assert attention_maps(model) == {}


def test_keeping_attention_keeps_every_modules_weights_then_drops_them():
    """In train mode too, what is kept is the softmax itself, before dropout."""
    model, _ = make_pair(torch.float32, dropout=0.1)
    model.train()
    lengths = {"encoder": (6, 6), "self": (5, 5), "cross": (5, 6)}  # (q_len, kv_len)
    with keeping_attention(model):
        model(SRC, TGT)  # with autograd on: kept weights must not hold on to the graph
        maps = attention_maps(model)
        assert maps.keys() == attention_modules(model).keys()
        for name, weights in maps.items():
            role = "encoder" if name.startswith("encoder") else (
                "cross" if "cross" in name else "self")
            assert weights.shape == (2, NUM_HEADS, *lengths[role]), name
            assert not weights.requires_grad, name
            assert torch.allclose(weights.sum(dim=-1), torch.ones(()), atol=1e-6), name
    for name, module in attention_modules(model).items():
        assert module.attention is None and not module.keep_attention, name
    with torch.no_grad():
        model(SRC, TGT)
    assert attention_maps(model) == {}  # and a forward after the block keeps nothing again


def test_keeping_attention_switches_back_off_even_if_the_block_raises():
    model, _ = make_pair(torch.float32)
    with pytest.raises(RuntimeError, match="inside"), keeping_attention(model):
        with torch.no_grad():
            model.eval()(SRC, TGT)
        raise RuntimeError("inside")
    assert attention_maps(model) == {}
    assert not any(module.keep_attention for module in attention_modules(model).values())


def test_the_torch_nn_translator_computes_our_logits():
    from toolkit.checkers.from_torch_nn import TorchNNTranslator

    ours, _ = make_pair(torch.float64)
    translator = TorchNNTranslator(ours, NUM_HEADS, FF_DIM).to(torch.float64)
    load_nn_transformer(ours, translator.transformer)
    with torch.no_grad():
        got, expected = ours.eval()(SRC, TGT), translator.eval()(SRC, TGT)
    real = TGT != PAD_ID
    assert (got[real] - expected[real]).abs().max() <= TOLERANCE[torch.float64]


def paper_model(**flags) -> stage.Transformer:
    torch.manual_seed(0)
    return stage.Transformer(20, 30, embed_dim=EMBED_DIM, num_heads=NUM_HEADS, ff_dim=FF_DIM,
                             **flags).eval()


def test_scaled_embeddings_start_at_std_one_over_sqrt_d_and_are_multiplied_by_sqrt_d():
    """The paper's x sqrt(d_model), paired with small embeddings so PE is not drowned out."""
    model = paper_model(scale_embeddings=True)
    for embedding in (model.src_embed, model.tgt_embed):
        assert abs(embedding.weight.std().item() - EMBED_DIM**-0.5) < 0.05
    seen = []
    model.positions.register_forward_hook(lambda module, args, output: seen.append(args[0]))
    with torch.no_grad():
        model(SRC, TGT)
        assert torch.allclose(seen[0], model.src_embed(SRC) * math.sqrt(EMBED_DIM))
        assert torch.allclose(seen[1], model.tgt_embed(TGT) * math.sqrt(EMBED_DIM))


def test_tied_embeddings_are_one_matrix_that_trains_as_one():
    model = paper_model(tie_embeddings=True).train()
    assert model.out_proj.weight is model.tgt_embed.weight
    untied = sum(p.numel() for p in paper_model().parameters())
    assert sum(p.numel() for p in model.parameters()) == untied - 30 * EMBED_DIM
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(SRC, TGT).sum().backward()
    optimizer.step()
    assert model.out_proj.weight is model.tgt_embed.weight  # still shared after a step


def test_tying_all_shares_one_matrix_between_source_target_and_output():
    """The paper's shared vocabulary: one (vocab, embed_dim) matrix read and written three ways."""
    torch.manual_seed(0)
    model = stage.Transformer(30, 30, EMBED_DIM, NUM_HEADS, LAYERS, LAYERS, FF_DIM,
                              tie_embeddings="all").train()
    assert model.src_embed.weight is model.tgt_embed.weight is model.out_proj.weight
    torch.manual_seed(0)
    untied = stage.Transformer(30, 30, EMBED_DIM, NUM_HEADS, LAYERS, LAYERS, FF_DIM)
    assert sum(p.numel() for p in model.parameters()) == \
        sum(p.numel() for p in untied.parameters()) - 2 * 30 * EMBED_DIM
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.src_embed.weight.detach().clone()
    model(SRC, TGT).sum().backward()
    optimizer.step()
    assert model.src_embed.weight is model.out_proj.weight  # still shared after a step
    assert not torch.equal(model.src_embed.weight, before)  # and the step reached it


@pytest.mark.parametrize(("sizes", "tie", "message"), [
    ((30, 31), "all", "one vocabulary shared by source and target"),
    ((30, 30), "source", 'False, True or "all"'),
])
def test_tying_asks_for_what_it_needs(sizes, tie, message):
    with pytest.raises(ValueError, match=message):
        stage.Transformer(*sizes, EMBED_DIM, NUM_HEADS, tie_embeddings=tie)


def test_the_paper_options_still_compute_what_nn_transformer_computes():
    from toolkit.checkers.from_torch_nn import TorchNNTranslator

    ours = paper_model(scale_embeddings=True, tie_embeddings=True).double()
    translator = TorchNNTranslator(ours, NUM_HEADS, FF_DIM).double()
    load_nn_transformer(ours, randomise(translator.transformer))
    with torch.no_grad():
        got, expected = ours(SRC, TGT), translator.eval()(SRC, TGT)
    real = TGT != PAD_ID
    assert (got[real] - expected[real]).abs().max() <= TOLERANCE[torch.float64]
