"""A score counts every sentence of its split, scored as the field scores translations."""

import pytest
import sacrebleu
import torch

from stages import stage07_multi_head as stage07
from toolkit.batching.data import load_data
from toolkit.scoring.evaluation import evaluate
from toolkit.search.decoding import translate
from toolkit.text.tokens import detokenize, tokenize


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
    assert f"{len(long)} of {len(sources):,} validation sentences are longer" in (
        capsys.readouterr().out)
    alone = translate(model, [sources[i] for i in short], data.src_vocab, data.tgt_vocab,
                      max_len=positions)
    assert [hypotheses[i] for i in short] == alone
    assert all(len(words) <= positions for words in alone)


def test_bleu_and_chrf_compare_with_the_raw_references_of_the_whole_split(data):
    torch.manual_seed(1)
    model = stage07.Transformer(len(data.src_vocab), len(data.tgt_vocab), embed_dim=16,
                                num_heads=2, ff_dim=32).eval()
    report, hypotheses = evaluate(model, data, "validation")
    references = data.reference_texts("validation")
    texts = [detokenize(words) for words in hypotheses]
    assert report.bleu == pytest.approx(sacrebleu.corpus_bleu(texts, [references]).score)
    assert report.chrf == pytest.approx(sacrebleu.corpus_chrf(texts, [references]).score)
