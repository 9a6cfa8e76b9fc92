"""Stage 04: the sinusoidal encoding has the paper's closed form, and order now matters."""

import pytest
import torch

from stages import stage03_masking as stage03
from stages import stage04_positional_encoding as stage
from toolkit.checkers import layer_properties
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

SRC_VOCAB, TGT_VOCAB, EMBED_DIM = 20, 30, 16
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])


def make_model(module=stage, seed: int = 0):
    torch.manual_seed(seed)
    return module.Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=EMBED_DIM).eval()


@pytest.mark.parametrize("k", range(1, 64))
def test_a_shift_by_k_is_one_rotation_for_every_position(k):
    """PE[pos + k] = M_k @ PE[pos], with M_k built from the closed form, not fitted."""
    encoding = stage.PositionalEncoding(embed_dim=EMBED_DIM, max_seq_len=64).encoding.double()
    rotation = layer_properties.rotation_matrix(k, EMBED_DIM)
    problem = layer_properties.shift_problem(rotation, encoding, k, atol=1e-5)
    assert problem is None, problem


def test_the_encoding_is_a_buffer_saved_moved_and_never_trained():
    model = make_model()
    assert not any("positions" in name for name, _ in model.named_parameters())
    assert model.positions.encoding.requires_grad is False
    assert "positions.encoding" in model.state_dict()
    model.to(torch.float64)
    assert model.positions.encoding.dtype == torch.float64


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_encoding_moves_to_the_gpu_with_the_model():
    assert make_model().to("cuda").positions.encoding.device.type == "cuda"


def test_before_positions_a_permuted_source_gave_the_same_translation():
    model = make_model(stage03)
    src = SRC[:1]
    permuted = src[:, [2, 0, 3, 1, 4, 5]]  # same words, different order
    with torch.no_grad():
        assert torch.allclose(model(permuted, TGT[:1]), model(src, TGT[:1]), atol=1e-5)


def test_with_positions_word_order_changes_the_encoding_and_the_translation():
    model = make_model()
    src = SRC[:1]
    order = [2, 0, 3, 1, 4, 5]
    permuted = src[:, order]
    with torch.no_grad():
        encoded = model.encode(src, src == PAD_ID)
        encoded_permuted = model.encode(permuted, permuted == PAD_ID)
        assert not torch.allclose(encoded_permuted, encoded[:, order], atol=1e-3)
        assert not torch.allclose(model(permuted, TGT[:1]), model(src, TGT[:1]), atol=1e-3)


def test_padding_stays_invisible_with_positions_added():
    model = make_model()
    more = torch.cat([SRC, torch.full((2, 3), PAD_ID)], dim=1)
    with torch.no_grad():
        assert torch.allclose(model(more, TGT), model(SRC, TGT), atol=1e-6)


def test_a_target_token_never_changes_earlier_positions():
    model = make_model()
    changed = TGT.clone()
    changed[:, 3] = 17
    with torch.no_grad():
        assert torch.allclose(model(SRC, changed)[:, :3], model(SRC, TGT)[:, :3], atol=1e-6)


def test_an_over_long_sequence_gets_a_clear_error():
    model = stage.Transformer(SRC_VOCAB, TGT_VOCAB, embed_dim=EMBED_DIM, max_seq_len=8)
    too_long = torch.full((1, 9), 4)
    with pytest.raises(ValueError, match=r"9 tokens is longer than max_seq_len=8.*max_seq_len=9"):
        model(too_long, TGT[:1])


def test_learned_positions_can_replace_the_encoding():
    from toolkit.variants.positions import LearnedPositions

    model = make_model()
    model.positions = LearnedPositions(EMBED_DIM, max_seq_len=8)
    assert "positions.embedding.weight" in dict(model.named_parameters())
    with torch.no_grad():
        assert torch.isfinite(model(SRC, TGT)).all()
    with pytest.raises(ValueError, match="max_seq_len=8"):
        model(torch.full((1, 9), 4), TGT[:1])


def test_the_decoder_gets_positions_too():
    """Swap two earlier target tokens: without positions, a later position cannot tell."""
    swapped = TGT.clone()
    swapped[:, [1, 2]] = TGT[:, [2, 1]]
    with torch.no_grad():
        before = make_model(stage03)
        assert torch.allclose(before(SRC, swapped)[0, 3], before(SRC, TGT)[0, 3], atol=1e-5)
        after = make_model()
        assert not torch.allclose(after(SRC, swapped)[0, 3], after(SRC, TGT)[0, 3], atol=1e-3)


def test_the_encoding_moves_with_the_model_to_any_device():
    assert make_model().to("meta").positions.encoding.device.type == "meta"


def test_an_odd_embed_dim_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="embed_dim=15 must be even"):
        stage.PositionalEncoding(embed_dim=15)
