"""Stage 08 (appendix): decoder-only, equal to torch.nn.TransformerEncoder run causally.

A decoder-only layer is stage 07's encoder layer under the causal mask, which is why
`nn.TransformerEncoderLayer` with `mask=causal` is its reference, layer for layer.
"""

import pytest
import torch
import torch.nn.functional as F
from test_stage06 import drop_alike
from test_stage07 import randomise
from torch import nn

from stages import stage08_decoder_only as stage
from toolkit.checkers.from_torch_nn import copy_encoder_layer
from toolkit.search.beam_search import beam_decode
from toolkit.search.greedy import greedy_decode
from toolkit.search.stream_decoding import StreamCache, stream_greedy_decode
from toolkit.stage_api import attention_maps, keeping_attention
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

# embed_dim != head_dim, 2 heads, 3 layers, unequal lengths, real padding on both sides.
VOCAB, EMBED_DIM, NUM_HEADS, FF_DIM, LAYERS = 30, 16, 2, 40, 3
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, 17, PAD_ID]])
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}


def real(row: torch.Tensor) -> torch.Tensor:
    return row[row != PAD_ID]


def make_pair(dtype=torch.float32, dropout=0.0):
    """A stage-08 model and an nn.TransformerEncoder (no final norm) with the same layers."""
    torch.manual_seed(0)
    ours = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM, num_heads=NUM_HEADS,
                             num_layers=LAYERS, ff_dim=FF_DIM, dropout=dropout).to(dtype)
    layer = nn.TransformerEncoderLayer(EMBED_DIM, NUM_HEADS, FF_DIM, dropout, batch_first=True)
    theirs = randomise(nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)).to(dtype)
    for mine, reference in zip(ours.decoder_layers, theirs.layers, strict=True):
        copy_encoder_layer(mine, reference)
    return ours, theirs


def reference_logits(ours, theirs, stream, dropout=0.0):
    """Our embedding, positions and output layer around nn's layers, one unpadded stream."""
    causal = nn.Transformer.generate_square_subsequent_mask(stream.size(1), dtype=torch.bool)
    positions = torch.arange(stream.size(1))[None]  # (1, len): nothing pads it
    x = F.dropout(ours.positions(ours.embed(stream), positions), dropout, theirs.training)
    return ours.out_proj(theirs(x, mask=causal, is_causal=True))  # (1, len, vocab)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_each_translation_equals_nn_on_its_own_unpadded_stream(dtype, mode):
    """Source then target, each sentence alone through nn.TransformerEncoder with the causal
    mask: the batched, padded model gives the same logits at every real target position. A
    wrong join, a position counted from the padding or a leaking pad breaks it."""
    ours, theirs = make_pair(dtype)
    ours.train(mode == "train")
    theirs.train(mode == "train")
    with torch.no_grad():
        got = ours(SRC, TGT)  # (batch, tgt_len, vocab)
        for row, (src, tgt) in enumerate(zip(SRC, TGT, strict=True)):
            stream = torch.cat([real(src), real(tgt)])[None]  # (1, src + tgt)
            expected = reference_logits(ours, theirs, stream)[0, len(real(src)):]
            assert (got[row, : len(real(tgt))] - expected).abs().max() <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_train_mode_with_dropout_drops_where_nn_does(dtype, monkeypatch):
    """With the same units dropped (test_stage06.drop_alike), dropout 0.1 gives nn's logits:
    on embeddings + positions, attention weights, inside the FFN and on each sublayer."""
    drop_alike(monkeypatch)
    ours, theirs = make_pair(dtype, dropout=0.1)
    ours.train()
    theirs.train()
    stream = torch.cat([real(SRC[0]), real(TGT[0])])[None]  # (1, len)
    with torch.no_grad():
        got = ours.language_model(stream)
        assert not torch.allclose(got, ours.eval().language_model(stream))  # dropout did act
        ours.train()
        expected = reference_logits(ours, theirs, stream, dropout=0.1)
    assert (got - expected).abs().max() <= TOLERANCE[dtype]


def test_positions_count_each_sentences_own_tokens_and_skip_its_padding():
    """The second stream holds three pads between its source and its target: its <bos> is
    still at position 3, as it would be unpadded (bug: positions as column numbers)."""
    ours, _ = make_pair()
    ours.eval()
    seen = []
    ours.positions.register_forward_hook(lambda module, args, out: seen.append(args[1]))
    with torch.no_grad():
        ours(SRC, TGT)
    assert seen[0][1].tolist() == [0, 1, 2, 2, 2, 2, 3, 4, 5, 6, 6]


def test_more_padding_and_other_neighbours_change_no_real_output():
    ours, _ = make_pair()
    ours.eval()
    wider_src = torch.cat([SRC, torch.full((2, 4), PAD_ID)], dim=1)
    wider_tgt = torch.cat([TGT, torch.full((2, 2), PAD_ID)], dim=1)
    with torch.no_grad():
        base = ours(SRC, TGT)
        alone = ours(SRC[1:, :3], TGT[1:, :4])  # the second sentence without any padding
        assert torch.allclose(ours(wider_src, wider_tgt)[:, :5], base, atol=1e-5)
        assert torch.allclose(alone[0], base[1, :4], atol=1e-5)


def test_a_token_changes_its_own_position_and_later_ones_only():
    """Causality over the whole stream: a later target token never reaches an earlier one,
    and, unlike stage 07's encoder, a later source word never reaches an earlier one."""
    ours, _ = make_pair()
    ours.eval()
    stream = ours.join(SRC, TGT)  # (2, 11)
    with torch.no_grad():
        base = ours.language_model(stream)
        for column in (1, 8):  # a source word of both rows, a target word of both
            changed = stream.clone()
            changed[:, column] = 21
            moved = (ours.language_model(changed) - base).abs().amax(dim=-1)  # (2, 11)
            words = stream[:, column:] != PAD_ID
            assert torch.all(moved[:, :column] == 0), column
            assert torch.all(moved[:, column:][words] > 0), column


def test_every_target_position_reads_the_whole_source():
    ours, _ = make_pair()
    ours.eval()
    changed = SRC.clone()
    changed[0, 4] = 21  # the last source word before <eos>
    with torch.no_grad():
        moved = (ours(changed, TGT) - ours(SRC, TGT)).abs().amax(dim=-1)  # (2, tgt_len)
    assert torch.all(moved[0] > 0) and torch.all(moved[1] == 0)


def test_padding_and_the_future_get_exactly_zero_weight_in_every_head():
    ours, _ = make_pair()
    ours.eval()
    stream = ours.join(SRC, TGT)
    with torch.no_grad(), keeping_attention(ours):
        ours.language_model(stream)
        maps = attention_maps(ours)
    assert sorted(maps) == [f"decoder_layers.{i}.self_attn" for i in range(LAYERS)]
    future = torch.ones(11, 11, dtype=torch.bool).triu(1)
    for weights in maps.values():  # (batch, heads, len, len)
        assert torch.all(weights[:, :, future] == 0)
        assert torch.all(weights[1, :, :, 3:6] == 0)  # the second row's three pads


def test_decoding_token_by_token_on_the_cache_gives_the_whole_streams_logits():
    ours, _ = make_pair()
    ours.eval()
    stream = ours.join(SRC, TGT)
    cache = StreamCache(LAYERS, limit=stream.size(1))
    with torch.no_grad():
        whole = ours.language_model(stream)
        first = ours.language_model(stream[:, :4], cache)  # part of the sources at once
        rest = [ours.language_model(stream[:, i:j], cache) for i, j in ((4, 7), (7, 8), (8, 11))]
    assert torch.allclose(torch.cat([first, *rest], dim=1), whole, atol=1e-5)


def trained_enough() -> stage.Transformer:
    """A model whose greedy and beam outputs differ from sentence to sentence."""
    ours, _ = make_pair()
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.mul_(3.0)
    return ours.eval()


def test_cached_greedy_and_beam_give_the_tokens_of_rerunning_the_model():
    ours = trained_enough()
    limits = torch.tensor([9, 6])
    rerun = greedy_decode(ours, SRC, limits)
    assert stream_greedy_decode(ours, SRC, limits) == rerun
    assert len({tuple(ids) for ids in rerun}) == 2
    cached = beam_decode(ours, SRC, limits, beam_size=3, cached=True)
    uncached = beam_decode(ours, SRC, limits, beam_size=3, cached=False)
    assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in uncached]


def test_two_vocabularies_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"shared_vocab=True"):
        stage.Transformer(20, 30)


def test_a_stream_past_max_seq_len_says_which_length_would_do():
    model = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM, max_seq_len=8)
    with pytest.raises(ValueError, match=r"a stream of 11 tokens .* max_seq_len=11"):
        model(SRC, TGT)


def test_tied_embeddings_are_one_matrix_for_reading_and_writing():
    model = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM, tie_embeddings=True)
    assert model.out_proj.weight is model.embed.weight
    untied = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM)
    count = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for p in untied.parameters()) - count == VOCAB * EMBED_DIM


def test_bfloat16_autocast_stays_close_to_float32():
    """Half precision, as `train(..., autocast=torch.bfloat16)` runs the forward pass."""
    ours = trained_enough()
    with torch.no_grad():
        full = ours(SRC, TGT)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = ours(SRC, TGT)
    assert half.dtype == torch.bfloat16 and torch.isfinite(half).all()
    assert (half.float() - full).abs().max() <= 0.05 * full.abs().max()


@pytest.mark.parametrize(("src", "tgt", "message"), [
    (SRC[0], TGT, r"src must have shape \(batch, len\)"),
    (SRC, TGT + 40, r"tgt holds ids outside 0\.\.29"),
    (SRC, TGT[:1], "src holds 2 sentences but tgt holds 1"),
])
def test_bad_input_says_what_to_fix(src, tgt, message):
    with pytest.raises(ValueError, match=message):
        stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM)(src, tgt)
