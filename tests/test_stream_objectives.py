"""What a decoder-only model trains on: German alone, or every next token of the stream."""

import torch

from stages import stage08_decoder_only as stage
from toolkit.batching.batches import Batch
from toolkit.learning.stream_objectives import language_modelling, whole_stream
from toolkit.objectives import token_loss
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

SRC = torch.tensor([[4, 9, 7, EOS_ID], [6, EOS_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, EOS_ID], [BOS_ID, 9, EOS_ID, PAD_ID]])


def model() -> stage.Transformer:
    torch.manual_seed(0)
    return stage.Transformer(14, 14, embed_dim=16, num_heads=2, num_layers=2, ff_dim=32).eval()


def test_the_whole_stream_scores_every_next_word_of_both_languages_and_no_bos():
    """Row 0: 3 English targets (9, 7, <eos>) and 3 German (8, 11, <eos>); row 1: 1 and 2."""
    with torch.no_grad():
        scored = whole_stream(model(), Batch(SRC, TGT))
    assert int(scored.tokens) == 3 + 3 + 1 + 2


def test_a_sentence_scores_the_same_alone_and_beside_a_longer_one():
    """Padding after a short source must not add the <eos> -> <bos> step a long one lacks."""
    ours = model()
    with torch.no_grad():
        together = whole_stream(ours, Batch(SRC, TGT))
        first = whole_stream(ours, Batch(SRC[:1], TGT[:1]))
        second = whole_stream(ours, Batch(SRC[1:, :2], TGT[1:, :3]))
    assert int(first.tokens) + int(second.tokens) == int(together.tokens)
    assert torch.allclose(first.total + second.total, together.total, atol=1e-4)


def test_the_whole_stream_is_the_translation_loss_plus_the_english_one():
    ours = model()
    with torch.no_grad():
        whole = whole_stream(ours, Batch(SRC, TGT))
        german = stage.objective(ours, Batch(SRC, TGT))
        stream = ours.join(SRC, TGT)
        logits = ours.language_model(stream[:, :-1])[:, : SRC.size(1) - 1]  # English positions
        english = token_loss(logits, SRC[:, 1:])  # each English word predicts the next
    assert torch.allclose(whole.total, german.total + english.total, atol=1e-4)


def test_a_language_model_reads_the_german_alone():
    ours = model()
    changed = SRC.clone()
    changed[0, 1] = 12
    with torch.no_grad():
        scored = language_modelling(ours, Batch(SRC, TGT))
        assert torch.equal(scored.total, language_modelling(ours, Batch(changed, TGT)).total)
    assert int(scored.tokens) == 3 + 2
