"""Greedy decoding must stop at <eos>, respect max_len, and treat every row alike."""

import pytest
import torch
from spies import Scripted

from toolkit.search.decoding import greedy_decode, translate
from toolkit.text.vocab import EOS_ID, Vocab

SCRIPTS = {4: [5, 6, EOS_ID, 7], 5: [8, EOS_ID], 6: [9, 9, 9, 9, 9, 9, 9, 9, 9, 9]}


def test_stops_at_eos_and_drops_it():
    src = torch.tensor([[4, EOS_ID]])
    assert greedy_decode(Scripted(SCRIPTS), src, max_len=10) == [[5, 6]]


def test_respects_max_len_when_eos_never_comes():
    src = torch.tensor([[6, EOS_ID]])
    assert greedy_decode(Scripted(SCRIPTS), src, max_len=4) == [[9, 9, 9, 9]]


def test_batch_rows_finish_independently_and_match_single_decoding():
    src = torch.tensor([[4, EOS_ID], [5, EOS_ID], [6, EOS_ID]])
    batched = greedy_decode(Scripted(SCRIPTS), src, max_len=5)
    singles = [greedy_decode(Scripted(SCRIPTS), row[None], max_len=5)[0] for row in src]
    assert batched == singles == [[5, 6], [8], [9, 9, 9, 9, 9]]


def test_stops_as_soon_as_every_row_is_finished():
    model = Scripted(SCRIPTS)
    greedy_decode(model, torch.tensor([[4, EOS_ID], [5, EOS_ID]]), max_len=50)
    assert model.prefix_lengths == [1, 2, 3]  # <bos>, then one more token per step


def test_the_whole_prefix_is_fed_at_every_step():
    """Masks are built inside forward, so feeding the full prefix rebuilds them each step."""
    model = Scripted(SCRIPTS)
    greedy_decode(model, torch.tensor([[6, EOS_ID]]), max_len=4)
    assert model.prefix_lengths == [1, 2, 3, 4]


def test_translate_maps_words_to_words_and_refuses_empty_sentences():
    src_vocab = Vocab(["alpha", "beta", "gamma"])
    tgt_vocab = Vocab(["x", "y", "z", "w", "v", "u"])
    model = Scripted({src_vocab.stoi["alpha"]: [tgt_vocab.stoi["y"], EOS_ID],
                      src_vocab.stoi["beta"]: [tgt_vocab.stoi["z"], tgt_vocab.stoi["x"], EOS_ID]})
    assert translate(model, ["alpha gamma", "beta"], src_vocab, tgt_vocab) == [["y"], ["z", "x"]]
    with pytest.raises(ValueError, match="empty sentence"):
        translate(model, ["alpha", "  "], src_vocab, tgt_vocab)


def test_each_sentence_can_have_its_own_length_limit():
    src = torch.tensor([[6, EOS_ID], [6, EOS_ID], [4, EOS_ID]])
    assert greedy_decode(Scripted(SCRIPTS), src, max_len=torch.tensor([2, 5, 1])) == [
        [9, 9], [9, 9, 9, 9, 9], [5]]


class Failing(Scripted):
    """Scripted, but records its mode at each step and raises at step `fail_at`."""

    def __init__(self, fail_at: int | None = None):
        super().__init__(SCRIPTS)
        self.fail_at, self.modes = fail_at, []

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        self.modes.append(self.training)
        if tgt.size(1) - 1 == self.fail_at:
            raise RuntimeError("out of memory")
        return super().forward(src, tgt)


@pytest.mark.parametrize("training", [True, False])
def test_greedy_decode_runs_in_eval_mode_and_restores_the_mode_when_it_returns(training):
    model = Failing().train(training)
    assert greedy_decode(model, torch.tensor([[4, EOS_ID]]), max_len=10) == [[5, 6]]
    assert model.modes == [False] * 3 and model.training is training


def test_greedy_decode_restores_the_mode_when_decoding_raises():
    model = Failing(fail_at=1).train()
    with pytest.raises(RuntimeError, match="out of memory"):
        greedy_decode(model, torch.tensor([[4, EOS_ID]]), max_len=10)
    assert model.modes == [False, False] and model.training


def stage07_model(**settings) -> torch.nn.Module:
    from stages import stage07_multi_head as stage07

    torch.manual_seed(0)
    return stage07.Transformer(20, 12, embed_dim=16, num_heads=4, ff_dim=40, dropout=0.1,
                               **settings)


def test_greedy_decode_restores_the_mode_when_the_limit_outruns_the_positions():
    model = stage07_model(max_seq_len=4).train()
    with pytest.raises(ValueError, match="longer than max_seq_len=4"):
        greedy_decode(model, torch.tensor([[4, 5, EOS_ID]]), max_len=10)
    assert model.training


@pytest.mark.parametrize("training", [True, False])
def test_cached_greedy_decode_runs_in_eval_mode_and_restores_the_mode(training):
    from toolkit.search.cached_decoding import cached_greedy_decode

    model = stage07_model().train(training)
    modes = []
    model.decoder_layers[0].register_forward_pre_hook(
        lambda module, args: modes.append(module.training))
    cached_greedy_decode(model, torch.tensor([[4, 5, EOS_ID]]), max_len=5)
    assert modes and not any(modes) and model.training is training


def test_cached_greedy_decode_restores_the_mode_when_decoding_raises(monkeypatch):
    from toolkit.search.cached_decoding import cached_greedy_decode

    model = stage07_model().train()
    decode, steps = model.decode, []

    def failing_decode(*args, **kwargs):
        steps.append(model.training)
        if len(steps) == 2:
            raise RuntimeError("out of memory")
        return decode(*args, **kwargs)

    monkeypatch.setattr(model, "decode", failing_decode)
    with pytest.raises(RuntimeError, match="out of memory"):
        cached_greedy_decode(model, torch.tensor([[4, 5, EOS_ID]]), max_len=5)
    assert steps == [False, False] and model.training


def test_an_empty_batch_decodes_to_nothing_on_every_decoder():
    """translate([]) and a split filtered to nothing reach the decoders with no rows."""
    import importlib

    from toolkit.search.cached_decoding import cached_greedy_decode

    stage = importlib.import_module("stages.stage07_multi_head")
    model = stage.Transformer(10, 12, embed_dim=8, num_heads=2, ff_dim=16)
    empty = torch.zeros(0, 3, dtype=torch.long)
    assert greedy_decode(model, empty, max_len=5) == []
    assert cached_greedy_decode(model, empty, max_len=5) == []
    assert greedy_decode(model, empty, max_len=torch.zeros(0, dtype=torch.long)) == []
    assert translate(model, [], Vocab(["a"]), Vocab(["b"])) == []


def test_the_decoding_defaults_are_the_named_constants_not_copies_of_them():
    """A default written again as a literal drifts when the constant changes."""
    import inspect

    from toolkit import translate as command
    from toolkit.scoring import evaluation
    from toolkit.search import beam_search, decoding
    from toolkit.train import run_options

    for function in (decoding.translate, evaluation.evaluate):
        defaults = inspect.signature(function).parameters
        assert defaults["length_penalty"].default is decoding.PAPER_LENGTH_PENALTY
        assert defaults["extra_len"].default is decoding.EXTRA_LEN
    decoder = inspect.signature(decoding.decoder).parameters
    assert decoder["length_penalty"].default is decoding.PAPER_LENGTH_PENALTY
    assert inspect.signature(beam_search.beam_decode).parameters["alpha"].default is (
        decoding.PAPER_LENGTH_PENALTY)
    assert run_options.EXTRA_LEN is command.EXTRA_LEN is decoding.EXTRA_LEN


def test_a_finished_sentence_leaves_the_batch():
    """Its rows would otherwise be computed until the longest sentence ends, for nothing."""
    model, fed = Scripted(SCRIPTS), []
    forward = model.forward
    model.forward = lambda src, tgt: fed.append((src.size(0), tgt.size(0))) or forward(src, tgt)
    src = torch.tensor([[4, EOS_ID], [5, EOS_ID], [6, EOS_ID]])
    assert greedy_decode(model, src, max_len=5) == [[5, 6], [8], [9, 9, 9, 9, 9]]
    # [5, 6, <eos>] ends at the third step, [8, <eos>] at the second, [9 ...] at its limit.
    assert fed == [(3, 3), (3, 3), (2, 2), (1, 1), (1, 1)]
