"""The hand-made model of notebook 13: its rows are the table's probabilities, its sentence list
is complete, and a beam search watched through it can be traced back to what it returned."""

import math

import pytest
import torch

from toolkit.search.beam_search import beam_search
from toolkit.text.vocab import BOS_ID, EOS, Vocab
from toolkit.variants.hand_made import HandMadeModel

VOCAB = Vocab(["Der", "Ein", "Hund", "Katze", "schläft"])
TABLE = {(): {"Der": 0.5, "Ein": 0.4, EOS: 0.1},
         ("Der",): {"Hund": 0.35, "Katze": 0.55, EOS: 0.1},
         ("Ein",): {"Hund": 0.9, EOS: 0.1},
         ("Ein", "Hund"): {"schläft": 0.8, EOS: 0.2},
         ("Der", "Katze"): {"schläft": 0.3, "Hund": 0.6, EOS: 0.1}}


def test_each_row_holds_the_tables_probabilities_for_its_prefix():
    model = HandMadeModel(TABLE, VOCAB)
    tokens = torch.tensor([[BOS_ID, VOCAB.stoi["Der"]], [BOS_ID, VOCAB.stoi["Hund"]]])
    rows = model(tokens).exp()  # (2, vocab)
    assert rows.sum(dim=1).tolist() == pytest.approx([1.0, 1.0])
    assert rows[0, VOCAB.stoi["Katze"]] == pytest.approx(0.55)
    assert rows[1, VOCAB.stoi[EOS]] == 1.0  # a prefix the table lacks ends


def test_every_sentence_is_listed_once_with_its_probability():
    sentences = HandMadeModel(TABLE, VOCAB).sentences(limit=10)
    assert len(sentences) == len(set(s for s, _ in sentences))
    assert sum(math.exp(log_prob) for _, log_prob in sentences) == pytest.approx(1.0)
    best, log_prob = sentences[0]
    assert best == ("Ein", "Hund", "schläft", EOS) and log_prob == pytest.approx(
        math.log(0.4 * 0.9 * 0.8 * 1.0))
    assert [p for _, p in sentences] == sorted((p for _, p in sentences), reverse=True)
    cut = HandMadeModel(TABLE, VOCAB).sentences(limit=2)  # a sentence the limit cuts ends there
    assert ("Der", "Katze") in {s for s, _ in cut}
    assert sum(math.exp(log_prob) for _, log_prob in cut) == pytest.approx(1.0)


def test_a_table_with_unknown_words_or_probabilities_not_summing_to_one_is_refused():
    with pytest.raises(ValueError, match="words the vocabulary lacks: \\['Vogel'\\]"):
        HandMadeModel({(): {"Vogel": 1.0}}, VOCAB)
    with pytest.raises(ValueError, match="sum to 0.9, not 1"):
        HandMadeModel({(): {"Der": 0.9}}, VOCAB)


@pytest.mark.parametrize("beam_size", [1, 2, 3])
def test_the_watched_steps_trace_back_to_the_hypotheses_returned(beam_size):
    """Following each finished entry's parents back gives its tokens and log-probability:
    the record a drawing of the search reads is the search itself."""
    steps = []
    model = HandMadeModel(TABLE, VOCAB)
    found = beam_search(model, lambda *move: None, torch.tensor([5]), beam_size, alpha=0.6,
                        n_best=beam_size, watch=steps.append)[0]
    traced = {}
    for length, step in enumerate(steps, start=1):
        for column in step.finished[0].nonzero().squeeze(1).tolist():
            tokens, back = [], column
            for earlier in range(length - 1, -1, -1):
                tokens.append(int(steps[earlier].tokens[0, back]))
                row = int(steps[earlier].parents[0, back])  # the row it extends, which is
                if earlier:  # the row-th extension that went on a step before
                    back = steps[earlier - 1].goes_on[0].nonzero().squeeze(1)[row].item()
            words = [VOCAB.itos[t] for t in reversed(tokens) if VOCAB.itos[t] != EOS]
            traced[tuple(words)] = float(step.log_probs[0, column])
    for hypothesis in found:
        words = tuple(VOCAB.itos[t] for t in hypothesis.tokens)
        assert traced[words] == pytest.approx(hypothesis.log_prob)


def test_a_word_given_probability_zero_is_never_chosen():
    model = HandMadeModel({(): {"Der": 1.0, "Ein": 0.0}}, VOCAB)
    row = model(torch.tensor([[BOS_ID]]))[0]
    assert row[VOCAB.stoi["Ein"]] == -math.inf and row[VOCAB.stoi["Der"]] == 0.0
    assert [words for words, _ in model.sentences(limit=3)] == [("Der", EOS)]
