"""Scores must come from sacreBLEU with its signature, and exact match must be strict."""

import importlib.util

import pytest
import sacrebleu

from toolkit.scoring.metrics import bleu, chrf, exact_match, score
from toolkit.text.subwords import SubwordVocab
from toolkit.text.tokens import detokenize, tokenize

TEXTS = ["Der Hund sieht die Katze.", "Heute schläft das Kind nicht.",
         "Der Mann sagt, dass die Frau einen Ball findet."]
REFERENCES = [tokenize(s) for s in TEXTS]


def test_exact_match_counts_whole_sentences_only():
    hypotheses = [REFERENCES[0], REFERENCES[1][:-1], REFERENCES[2]]
    assert exact_match(hypotheses, REFERENCES) == pytest.approx(200 / 3)


def test_exact_match_refuses_mismatched_or_empty_inputs():
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        exact_match(REFERENCES[:2], REFERENCES)
    with pytest.raises(ValueError, match="empty"):
        exact_match([], [])


def test_bleu_is_sacrebleu_on_text_with_its_signature():
    perfect = bleu(TEXTS, TEXTS)
    assert perfect.score == pytest.approx(100.0)
    assert "tok:13a" in perfect.signature and "nrefs:1" in perfect.signature
    worse = bleu([detokenize(r[::-1]) for r in REFERENCES], TEXTS)
    assert worse.score < 50


def test_bleu_scores_the_natural_text_not_our_tokens():
    """Hyphenated numbers: our tokens split them, sacreBLEU's 13a tokeniser does not."""
    references = ["Twenty-one dogs sleep.", "Seventy-two cats play."]
    hypotheses = [tokenize("Twenty-one dogs sleep."), tokenize("Seventy-two dogs play.")]
    texts = [detokenize(words) for words in hypotheses]
    assert texts == ["Twenty-one dogs sleep.", "Seventy-two dogs play."]
    expected = sacrebleu.corpus_bleu(texts, [references])
    assert score(texts, references).bleu == pytest.approx(expected.score)


def test_bleu_is_against_the_references_as_written_and_exact_match_forgives_spacing():
    """A translation spaced otherwise than its reference ("don ' t") loses BLEU against the
    raw text, which a comparison with references spaced like it would hide; exact match
    compares words and forgives it."""
    reference, spaced = "I don't know, he said.", "I don ' t know , he said ."
    assert bleu([spaced], [spaced]).score == pytest.approx(100.0)
    assert score([spaced], [reference]).bleu < 100.0
    assert score([spaced], [reference]).exact_match == 100.0  # the words agree
    assert score([reference], [reference]).bleu == pytest.approx(100.0)


def test_bleu_uses_the_tokeniser_the_target_language_needs():
    """Chinese has no spaces: 13a sees one word per sentence and scores a near miss 0."""
    references = ["我们今天去公园散步。", "他喜欢读书和写字。"]
    hypotheses = ["我们今天去公园跑步。", "他喜欢读书和写字。"]
    as_13a = sacrebleu.corpus_bleu(hypotheses, [references])
    as_zh = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh")
    assert as_zh.score > as_13a.score
    scored = bleu(hypotheses, references, tgt_lang="zh")
    assert scored.score == pytest.approx(as_zh.score) and "tok:zh" in scored.signature


def test_japanese_without_mecab_is_scored_by_characters_and_says_so(capsys):
    """sacreBLEU's ja and ko tokenisers need MeCab, an optional extra: without it a score
    must still come, by characters, with a signature that says so."""
    if importlib.util.find_spec("MeCab") is not None:
        pytest.skip("MeCab is installed: sacreBLEU's own ja tokeniser is used")
    scored = bleu(["テストです。"], ["テストです。"], tgt_lang="ja")
    assert scored.score == pytest.approx(100.0) and "tok:char" in scored.signature
    assert "scoring by characters instead" in capsys.readouterr().err


def test_chrf_is_reported_beside_bleu_with_its_signature():
    report = score(TEXTS[:2] + ["falsch"], TEXTS)
    expected = sacrebleu.corpus_chrf([TEXTS[0], TEXTS[1], "falsch"], [TEXTS])
    assert report.chrf == pytest.approx(expected.score)
    assert "nc:6" in report.chrf_signature and "chrF signature" in str(report)
    assert chrf(TEXTS, TEXTS).score == pytest.approx(100.0)


def test_scores_refuse_tokens_where_text_is_due():
    with pytest.raises(TypeError, match="as strings"):
        bleu(REFERENCES, TEXTS)
    with pytest.raises(TypeError, match="as strings"):
        score(REFERENCES, TEXTS)
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        chrf(TEXTS[:2], TEXTS)


def test_held_out_sentences_count_only_for_their_own_row():
    hypotheses = [TEXTS[0], "falsch", TEXTS[2]]
    report = score(hypotheses, TEXTS, [["case"], ["case", "held_out"], ["case"]],
                   apart="held_out")
    assert report.per_phenomenon == {"case": 100.0, "held_out": 0.0}


def test_score_reports_each_phenomenon_separately():
    hypotheses = [TEXTS[0], "falsch", TEXTS[2]]
    report = score(hypotheses, TEXTS, [["case"], ["negation", "inversion"], ["case"]])
    assert report.per_phenomenon == {"case": 100.0, "inversion": 0.0, "negation": 0.0}
    assert report.exact_match == pytest.approx(200 / 3) and report.sentences == 3
    assert "BLEU signature" in str(report)


PUNCTUATED = ["\"Yes,\" she said, \"I don't know.\"", "It costs 3.5% more, e.g. in the U.S.",
              "L'herbe est verte : c'est l'été !", "Twenty-one dogs (and 2.75 cats) sleep."]


def test_a_perfect_model_scores_100_on_quotes_apostrophes_and_decimals():
    """A model that writes each reference exactly, through the subword path from ids to text,
    must score 100: nothing between the model and sacreBLEU may damage the text."""
    vocab = SubwordVocab.train([SubwordVocab.split(text) for text in PUNCTUATED], 200)
    outputs = [vocab.decode(vocab.encode(vocab.split(text))) for text in PUNCTUATED]
    report = score([vocab.join(words) for words in outputs], PUNCTUATED, tgt_lang="fr")
    assert report.bleu == pytest.approx(100.0) and report.chrf == pytest.approx(100.0)
    assert report.exact_match == 100.0
