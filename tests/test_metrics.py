"""Scores must come from sacreBLEU with its signature, and exact match must be strict."""

import pytest
import sacrebleu

from toolkit.metrics import bleu, exact_match, score
from toolkit.tokens import tokenize

REFERENCES = [tokenize(s) for s in [
    "Der Hund sieht die Katze.", "Heute schläft das Kind nicht.",
    "Der Mann sagt, dass die Frau einen Ball findet.",
]]


def test_exact_match_counts_whole_sentences_only():
    hypotheses = [REFERENCES[0], REFERENCES[1][:-1], REFERENCES[2]]
    assert exact_match(hypotheses, REFERENCES) == pytest.approx(200 / 3)


def test_exact_match_refuses_mismatched_or_empty_inputs():
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        exact_match(REFERENCES[:2], REFERENCES)
    with pytest.raises(ValueError, match="empty"):
        exact_match([], [])


def test_bleu_is_sacrebleu_on_detokenised_text_with_its_signature():
    perfect = bleu(REFERENCES, REFERENCES)
    assert perfect.score == pytest.approx(100.0)
    assert "tok:13a" in perfect.signature and "nrefs:1" in perfect.signature
    worse = bleu([r[::-1] for r in REFERENCES], REFERENCES)
    assert worse.score < 50


def test_bleu_scores_the_natural_text_not_our_tokens():
    """Hyphenated numbers: our tokens split them, sacreBLEU's 13a tokeniser does not."""
    references = [tokenize("Twenty-one dogs sleep."), tokenize("Seventy-two cats play.")]
    hypotheses = [tokenize("Twenty-one dogs sleep."), tokenize("Seventy-two dogs play.")]
    expected = sacrebleu.corpus_bleu(["Twenty-one dogs sleep.", "Seventy-two dogs play."],
                                     [["Twenty-one dogs sleep.", "Seventy-two cats play."]])
    assert bleu(hypotheses, references).score == pytest.approx(expected.score)


def test_held_out_sentences_count_only_for_their_own_row():
    hypotheses = [REFERENCES[0], ["falsch"], REFERENCES[2]]
    report = score(hypotheses, REFERENCES, [["case"], ["case", "held_out"], ["case"]],
                   apart="held_out")
    assert report.per_phenomenon == {"case": 100.0, "held_out": 0.0}


def test_score_reports_each_phenomenon_separately():
    hypotheses = [REFERENCES[0], ["falsch"], REFERENCES[2]]
    report = score(hypotheses, REFERENCES, [["case"], ["negation", "inversion"], ["case"]])
    assert report.per_phenomenon == {"case": 100.0, "inversion": 0.0, "negation": 0.0}
    assert report.exact_match == pytest.approx(200 / 3) and report.sentences == 3
    assert "BLEU signature" in str(report)
