"""Text goes in as a string and comes out as the same string, with either tokenizer: every
script, French elisions, contractions, decimals, URLs, quotes, and the special tokens' own
names written as text. A model that writes the references exactly scores BLEU 100."""

import json
import unicodedata

import pytest
from multilingual import SAMPLE
from torch import nn

import toolkit.scoring.evaluation as evaluation
from toolkit.batching.data import load_data
from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import SPECIALS, Vocab

TEXTS = list(SAMPLE.values())


def as_written(text: str) -> str:
    """The NFC text, each run of whitespace one space: what a round trip gives back."""
    return " ".join(unicodedata.normalize("NFC", text).split())


@pytest.fixture(scope="module", params=["word", "bpe"])
def vocab(request) -> Vocab | SubwordVocab:
    if request.param == "word":
        return Vocab.build([Vocab.split(text) for text in TEXTS])
    return SubwordVocab.train([SubwordVocab.split(text) for text in TEXTS], 400)


@pytest.mark.parametrize("name", SAMPLE)
def test_every_sample_comes_back_as_written(vocab, name):
    text = SAMPLE[name]
    assert vocab.join(vocab.decode(vocab.encode(vocab.split(text)))) == as_written(text)


@pytest.mark.parametrize("kind", [Vocab, SubwordVocab])
@pytest.mark.parametrize("special", [*SPECIALS, "▁", "\ue000", "\ue0001", "￭"])
def test_a_special_string_in_a_sentence_is_text(kind, special):
    """"<eos>" written in a sentence must not end it, nor "<pad>" be masked as padding."""
    text = f"the {special} and x{special}y tags"
    train = Vocab.build if kind is Vocab else SubwordVocab.train
    vocab = train([kind.split(text)] * 2)
    ids = vocab.encode(vocab.split(text))
    assert min(ids) >= len(SPECIALS), vocab.decode(ids)
    assert vocab.join(vocab.decode(ids)) == text


def test_unknown_names_a_written_word_start_as_itself():
    vocab = SubwordVocab.train([SubwordVocab.split("the cat sat on the mat")] * 3, 40)
    assert vocab.unknown(["a▁b"]) == ["b", "▁"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A folder corpus whose every split holds the samples on the German side, composed:
    sacreBLEU compares code points, and the course writes NFC (a decomposed reference would
    differ from any output of either tokenizer)."""
    folder = tmp_path_factory.mktemp("samples")
    rows = [json.dumps({"translation": {"en": f"sample {i}", "de": as_written(text)}},
                       ensure_ascii=False) for i, text in enumerate(TEXTS)]
    for split in ("train", "validation", "test"):
        (folder / f"{split}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("tokenizer", ["word", "bpe"])
def test_a_perfect_translation_scores_bleu_100_through_evaluate(corpus, tokenizer, monkeypatch):
    """A model that writes each reference's tokens exactly: whatever evaluate's join and
    sacreBLEU do with them must give the raw references back."""
    data = load_data(str(corpus), tokenizer=tokenizer, vocab_size=400 if tokenizer == "bpe"
                     else None)
    wanted = dict(zip(data.sources("test"), data.reference_texts("test"), strict=True))
    vocab = data.tgt_vocab

    def perfect(model, sentences, *args, **kwargs):
        return [vocab.decode(vocab.encode(vocab.split(wanted[s]))) for s in sentences]

    monkeypatch.setattr(evaluation, "translate", perfect)
    report, _ = evaluation.evaluate(nn.Module(), data)
    assert report.bleu == pytest.approx(100.0)
    assert report.exact_match == pytest.approx(100.0)
