"""A score counts every sentence of its split, scored as the field scores translations."""

from dataclasses import replace

import pytest
import sacrebleu
import torch
from datasets import DatasetDict

from stages import stage07_multi_head as stage07
from stages import stage08_decoder_only as stage08
from toolkit.batching.data import load_data
from toolkit.scoring.evaluation import evaluate
from toolkit.search.decoding import translate
from toolkit.text.tokens import detokenize, tokenize
from toolkit.text.vocab import EOS_ID


@pytest.fixture(scope="module")
def data():
    return load_data()


def test_a_sentence_longer_than_the_model_is_scored_as_an_empty_translation(data, capsys):
    """Leaving it out would score an easier subset; a crash would score nothing."""
    torch.manual_seed(0)
    positions = 12
    model = stage07.Transformer(len(data.src_vocab), len(data.tgt_vocab), embed_dim=16,
                                num_heads=2, ff_dim=32, max_seq_len=positions).eval()
    report, hypotheses = evaluate(model, data, "validation")
    sources = data.sources("validation")
    long = [i for i, s in enumerate(sources) if len(tokenize(s)) + 1 > positions]
    short = [i for i in range(len(sources)) if i not in long]
    assert long and short and report.sentences == len(sources) == len(hypotheses)
    assert all(hypotheses[i] == [] for i in long)
    assert f"{len(long)} of {len(sources):,} validation sentences leave no room" in (
        capsys.readouterr().out)
    alone = translate(model, [sources[i] for i in short], data.src_vocab, data.tgt_vocab,
                      max_len=positions)
    assert [hypotheses[i] for i in short] == alone
    assert all(len(words) <= positions for words in alone)


@pytest.fixture(scope="module")
def shared():
    return load_data(shared_vocab=True)


def never_ending_stream_model(data, positions: int) -> torch.nn.Module:
    """A stage-08 model that never writes <eos>, so every translation runs to its limit."""
    torch.manual_seed(0)
    size = len(data.tgt_vocab)
    model = stage08.Transformer(size, size, embed_dim=16, num_heads=2, num_layers=2, ff_dim=32,
                                max_seq_len=positions).eval()
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] = -1e9
    return model


@pytest.mark.parametrize("beam_size", [1, 4])
def test_stage08_decodes_within_the_positions_its_stream_shares(shared, capsys, beam_size):
    """Source and translation share one stream's positions: a source that fills them is
    scored as an empty translation, as stage 07 scores one longer than its positions, and
    every other translation stops where the stream is full."""
    positions = 14
    model = never_ending_stream_model(shared, positions)
    sentences = shared.sources("validation")[:150]
    view = replace(shared, splits=DatasetDict(
        validation=shared.splits["validation"].select(range(150))))
    report, hypotheses = evaluate(model, view, "validation", beam_size=beam_size)
    lengths = [len(tokenize(sentence)) + 1 for sentence in sentences]  # with <eos>
    full = [i for i, length in enumerate(lengths) if length >= positions]
    assert full and len(full) < len(sentences) and report.sentences == len(sentences)
    assert all(hypotheses[i] == [] for i in full)
    assert all(len(words) <= max(positions - length, 0) for words, length in zip(
        hypotheses, lengths, strict=True))
    assert any(len(words) == positions - length > 0 for words, length in zip(
        hypotheses, lengths, strict=True))
    assert f"{len(full)} of {len(sentences)} validation sentences leave no room" in (
        capsys.readouterr().out)


def test_stage08_greedy_feeds_one_token_a_step_on_its_cache(shared, monkeypatch):
    """After the source and <bos>, each step reads only the newest token, as stage 07's
    cached decoder does; rerunning the whole stream gives the same tokens, only slower."""
    model = never_ending_stream_model(shared, 64)
    widths = []
    language_model = model.language_model

    def spy(stream, cache=None):
        widths.append((stream.size(1), cache is not None))
        return language_model(stream, cache)

    sentences = shared.sources("validation")[:5]
    uncached = translate(model, sentences, shared.src_vocab, shared.tgt_vocab)
    monkeypatch.setattr(model, "language_model", spy)
    assert translate(model, sentences, shared.src_vocab, shared.tgt_vocab) == uncached
    assert widths[0][1] and all(width == (1, True) for width in widths[1:])


def test_bleu_and_chrf_compare_with_the_raw_references_of_the_whole_split(data):
    torch.manual_seed(1)
    model = stage07.Transformer(len(data.src_vocab), len(data.tgt_vocab), embed_dim=16,
                                num_heads=2, ff_dim=32).eval()
    report, hypotheses = evaluate(model, data, "validation")
    references = data.reference_texts("validation")
    texts = [detokenize(words) for words in hypotheses]
    assert report.bleu == pytest.approx(sacrebleu.corpus_bleu(texts, [references]).score)
    assert report.chrf == pytest.approx(sacrebleu.corpus_chrf(texts, [references]).score)


def test_translate_refuses_a_source_that_leaves_no_room_with_a_message(shared):
    model = never_ending_stream_model(shared, 8)
    sentence = next(s for s in shared.sources("validation") if len(tokenize(s)) + 1 == 8)
    with pytest.raises(ValueError, match="8 source tokens leave no room for a translation"):
        translate(model, [sentence], shared.src_vocab, shared.tgt_vocab)
