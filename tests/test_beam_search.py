"""Beam search: on hand-set probabilities it returns the best length-penalised hypothesis,
worked out here by enumerating every sentence; with one beam it is greedy decoding; on the
KV cache it gives the tokens of rerunning the model; a sentence's result never depends on
its neighbours; n_best comes in score order with its scores."""

import itertools
import math

import pytest
import torch

from stages import stage06_ffn_layernorm as stage06
from stages import stage07_multi_head as stage
from toolkit.batching.batches import encode_source, pad
from toolkit.search import cached_decoding
from toolkit.search.beam_search import (
    Hypothesis,
    beam_decode,
    beam_search,
    length_penalty,
    sentence_log_probs,
)
from toolkit.search.decoding import greedy_decode, translate
from toolkit.text.vocab import BOS_ID, EOS_ID, Vocab

A, B, C = 4, 5, 6  # three words after the four special ids
VOCAB = 7


def scripted(table: dict[tuple[int, ...], dict[int, float]]):
    """Next-token log-probabilities set by hand for each prefix (a missing prefix: uniform)."""

    def next_log_probs(tokens: torch.Tensor) -> torch.Tensor:  # (rows, length) -> (rows, vocab)
        rows = []
        for row in tokens.tolist():
            probabilities = table.get(tuple(row[1:]), {A: 1 / 4, B: 1 / 4, C: 1 / 4, EOS_ID: 1 / 4})
            full = torch.full((VOCAB,), 1e-12, dtype=torch.float64)
            for token, p in probabilities.items():
                full[token] = p
            rows.append((full / full.sum()).log())
        return torch.stack(rows)

    return next_log_probs


def best_by_enumeration(table, limit: int, alpha: float) -> tuple[list[int], float]:
    """Every sentence up to `limit` tokens, scored as the paper scores them: the true best."""
    step = scripted(table)
    best = ([], -math.inf)
    for length in range(1, limit + 1):
        for words in itertools.product([A, B, C, EOS_ID], repeat=length):
            if EOS_ID in words[:-1] or (length < limit and words[-1] != EOS_ID):
                continue  # a sentence ends at its first <eos>, or at the limit
            prefix = torch.tensor([[BOS_ID, *words]])
            log_prob = sum(float(step(prefix[:, : i + 1])[0, w]) for i, w in enumerate(words))
            score = log_prob / length_penalty(length, alpha)
            if score > best[1]:
                best = ([w for w in words if w != EOS_ID], score)
    return best


def search(table, limit: int, beam_size: int, alpha: float = 0.6, n_best: int = 1):
    return beam_search(scripted(table), lambda *move: None, torch.tensor([limit]), beam_size,
                       alpha, n_best)[0]


# Greedy takes A (0.45 > 0.40), after which every word is unlikely; B then <eos> is better.
GREEDY_IS_WRONG = {(): {A: 0.45, B: 0.40, EOS_ID: 0.15},
                   (B,): {EOS_ID: 0.9, A: 0.1}}
# Ending at once (0.4) beats every longer sentence, though A (0.5) is the likelier first step
# and its continuations stay live until the limit.
SHORT_BEATS_LONG = {(): {EOS_ID: 0.4, A: 0.5, B: 0.1},
                    (A,): {A: 0.5, B: 0.5}, (A, A): {A: 0.5, B: 0.5},
                    (A, B): {A: 0.5, B: 0.5}}
# With α = 0 the short sentence wins; the length penalty lets the longer one win.
PENALTY_DECIDES = {(): {EOS_ID: 0.34, A: 0.66},
                   (A,): {EOS_ID: 0.2, B: 0.8}, (A, B): {EOS_ID: 0.6, C: 0.4}}

# <eos> is the likeliest first step, yet with α = 1 the live A B <eos> ends with a better score:
# a search that stopped when its best step ended would return the empty sentence.
LIVE_OVERTAKES = {(): {EOS_ID: 0.5, A: 0.45, B: 0.05},
                  (A,): {B: 0.99, EOS_ID: 0.01}, (A, B): {EOS_ID: 0.99, C: 0.01}}


# Ending at once is the likeliest first step and A the next, but the best sentence starts with
# the third, B: a search where the ended hypothesis kept one of two places would drop B.
ENDED_TAKES_NO_PLACE = {(): {EOS_ID: 0.4, A: 0.35, B: 0.25},
                        **{(A, *rest): {A: 0.5, B: 0.5}
                           for n in range(5) for rest in itertools.product([A, B], repeat=n)},
                        (B,): {C: 1.0}, (B, C): {C: 1.0}, (B, C, C): {C: 1.0},
                        (B, C, C, C): {C: 1.0}, (B, C, C, C, C): {EOS_ID: 1.0}}


def test_a_finished_hypothesis_takes_no_live_ones_place():
    tokens, score = best_by_enumeration(ENDED_TAKES_NO_PLACE, limit=6, alpha=1.0)
    assert tokens == [B, C, C, C, C]
    found = search(ENDED_TAKES_NO_PLACE, limit=6, beam_size=2, alpha=1.0)[0]
    assert found.tokens == tokens
    assert found.score == pytest.approx(score, abs=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("table", [GREEDY_IS_WRONG, SHORT_BEATS_LONG, PENALTY_DECIDES,
                                   LIVE_OVERTAKES],
                         ids=["greedy-is-wrong", "short-beats-long", "penalty-decides",
                              "live-overtakes"])
def test_the_search_returns_the_best_penalised_sentence(table, alpha):
    tokens, score = best_by_enumeration(table, limit=4, alpha=alpha)
    found = search(table, limit=4, beam_size=3, alpha=alpha)[0]
    assert found.tokens == tokens
    assert found.score == pytest.approx(score, abs=1e-6)  # the search adds in float32


def test_the_cases_are_what_their_names_say():
    """Each case really tells the searches apart (else the test above proves less)."""
    assert search(GREEDY_IS_WRONG, 4, beam_size=1)[0].tokens[0] == A  # greedy
    assert best_by_enumeration(GREEDY_IS_WRONG, 4, 0.6)[0] == [B]
    assert best_by_enumeration(SHORT_BEATS_LONG, 4, 0.6)[0] == []
    assert search(SHORT_BEATS_LONG, 4, beam_size=1)[0].tokens != []  # greedy never ends early
    assert best_by_enumeration(PENALTY_DECIDES, 4, 0.0)[0] == []
    assert best_by_enumeration(PENALTY_DECIDES, 4, 1.0)[0] == [A, B]
    assert best_by_enumeration(LIVE_OVERTAKES, 4, 1.0)[0] == [A, B]


def test_a_finished_hypothesis_is_never_extended():
    """<eos> first is so likely that its continuations would fill the beam if it stayed live."""
    table = {(): {EOS_ID: 0.6, A: 0.2, B: 0.2}}
    hypotheses = search(table, limit=3, beam_size=3, n_best=3)
    assert all(EOS_ID not in h.tokens for h in hypotheses)
    assert len({tuple(h.tokens) for h in hypotheses}) == 3


def test_n_best_comes_in_score_order_with_the_scores_of_its_tokens():
    step = scripted(SHORT_BEATS_LONG)
    hypotheses = search(SHORT_BEATS_LONG, limit=3, beam_size=3, n_best=3)
    assert len(hypotheses) == 3
    assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)
    for h in hypotheses:
        words = h.tokens + ([EOS_ID] if len(h.tokens) < 3 else [])
        prefix = torch.tensor([[BOS_ID, *words]])
        log_prob = sum(float(step(prefix[:, : i + 1])[0, w]) for i, w in enumerate(words))
        assert h.log_prob == pytest.approx(log_prob, abs=1e-6)
        assert h.score == pytest.approx(log_prob / length_penalty(len(words), 0.6), abs=1e-6)
    with pytest.raises(ValueError, match="n_best=5 must be between 1 and beam_size=3"):
        search(SHORT_BEATS_LONG, 3, beam_size=3, n_best=5)


CONFIGS = {
    "small": {"embed_dim": 32, "num_heads": 4, "ff_dim": 64},
    "deep": {"embed_dim": 24, "num_heads": 2, "num_encoder_layers": 3, "num_decoder_layers": 3},
    "tied-scaled": {"embed_dim": 32, "num_heads": 2, "scale_embeddings": True,
                    "tie_embeddings": True},
}


def random_model(config: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return stage.Transformer(30, 40, **CONFIGS[config]).eval()


def batch_of_unequal_lengths(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 30, (6, 9), generator=ids)  # (batch, src_len)
    for row, length in enumerate([9, 4, 7, 2, 9, 5]):
        src[row, length:] = 0
    return src, torch.tensor([12, 5, 12, 8, 3, 10])


@pytest.mark.parametrize("config", CONFIGS)
def test_one_beam_is_greedy_decoding(config):
    model = random_model(config)
    src, limits = batch_of_unequal_lengths()
    greedy = greedy_decode(model, src, limits)
    for cached in (True, False):
        beams = beam_decode(model, src, limits, beam_size=1, cached=cached)
        assert [h[0].tokens for h in beams] == greedy


@pytest.mark.parametrize("config", CONFIGS)
def test_the_cached_search_gives_the_tokens_of_rerunning_the_model(config):
    """Without reordering the cache with the beams, rows read another hypothesis's past."""
    model = random_model(config, seed=1)
    src, limits = batch_of_unequal_lengths(seed=1)
    cached = beam_decode(model, src, limits, beam_size=4, n_best=4)
    rerun = beam_decode(model, src, limits, beam_size=4, n_best=4, cached=False)
    assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in rerun]
    for mine, theirs in zip(cached, rerun, strict=True):
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-4)


def test_a_sentence_gets_the_same_translation_alone_as_in_any_batch():
    model = random_model("small", seed=2)
    src, limits = batch_of_unequal_lengths(seed=2)
    together = beam_decode(model, src, limits, beam_size=4)
    for row in range(src.size(0)):
        length = int((src[row] != 0).sum())
        alone = beam_decode(model, src[row : row + 1, :length], limits[row : row + 1],
                            beam_size=4)
        assert alone[0][0].tokens == together[row][0].tokens
    reversed_batch = beam_decode(model, src.flip(0), limits.flip(0), beam_size=4)
    assert [h[0].tokens for h in reversed_batch] == [h[0].tokens for h in together][::-1]



def sentences_and_vocabularies() -> tuple[list[str], Vocab, Vocab]:
    """Sentences of unequal lengths over the random models' 30 source and 40 target ids."""
    src_vocab = Vocab(f"s{i}" for i in range(26))  # 4 special ids + 26 words = 30
    tgt_vocab = Vocab(f"t{i}" for i in range(36))
    src, _ = batch_of_unequal_lengths(seed=3)
    sentences = [" ".join(src_vocab.itos[i] for i in row if i != 0) for row in src.tolist()]
    return sentences, src_vocab, tgt_vocab


def expected_words(model, sentences, src_vocab, tgt_vocab, beam_size, alpha=0.6):
    """What the uncached decoders write, each sentence allowed translate's 10 extra tokens."""
    encoded = [encode_source(sentence.split(), src_vocab) for sentence in sentences]
    src, limits = pad(encoded), torch.tensor([len(ids) + 10 for ids in encoded])
    if beam_size == 1:
        found = greedy_decode(model, src, limits)
    else:
        found = [h[0].tokens for h in beam_decode(model, src, limits, beam_size, alpha,
                                                  cached=False)]
    return [tgt_vocab.decode(ids) for ids in found]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("beam_size", [1, 4])
def test_translate_on_the_cache_gives_the_words_of_rerunning_the_model(config, beam_size,
                                                                       monkeypatch):
    """translate decodes stage 07 on its KV cache (spied), with the words of the uncached
    decoders, in batches that cut the sentences unevenly."""
    model = random_model(config, seed=3)
    sentences, src_vocab, tgt_vocab = sentences_and_vocabularies()
    fed = []
    start = cached_decoding.DecoderCache.start
    monkeypatch.setattr(cached_decoding.DecoderCache, "start",
                        lambda self, tgt: fed.append(tgt.size(0)) or start(self, tgt))
    words = translate(model, sentences, src_vocab, tgt_vocab, batch_size=4, beam_size=beam_size)
    assert words == expected_words(model, sentences, src_vocab, tgt_vocab, beam_size)
    assert fed, "translate did not decode on the KV cache"


def test_earlier_stages_translate_with_a_beam_by_rerunning_the_model():
    torch.manual_seed(0)
    model = stage06.Transformer(30, 40, embed_dim=32).eval()
    sentences, src_vocab, tgt_vocab = sentences_and_vocabularies()
    for beam_size, alpha in [(1, 0.6), (3, 0.0), (3, 1.0)]:
        assert translate(model, sentences, src_vocab, tgt_vocab, beam_size=beam_size,
                         length_penalty=alpha) == \
            expected_words(model, sentences, src_vocab, tgt_vocab, beam_size, alpha)
    with pytest.raises(ValueError, match="beam_size must be 1 \\(greedy\\) or more, got 0"):
        translate(model, sentences, src_vocab, tgt_vocab, beam_size=0)


def test_translate_and_evaluate_hand_the_beam_and_alpha_to_the_search(monkeypatch):
    """On the models above alpha may change no translation; it must still reach the search."""
    import toolkit.scoring.evaluation as evaluation
    import toolkit.search.decoding as decoding_module
    from toolkit.batching.data import load_data

    asked = []

    def spy(model, src, limits, beam_size, alpha, cached):
        asked.append((beam_size, alpha, cached, limits.tolist()))
        return [[Hypothesis([], 0.0, 0.0)] for _ in range(src.size(0))]

    monkeypatch.setattr(decoding_module, "beam_decode", spy)
    sentences, src_vocab, tgt_vocab = sentences_and_vocabularies()
    lengths = [len(encode_source(sentence.split(), src_vocab)) for sentence in sentences]
    for model, cached in [(random_model("small"), True),
                          (stage06.Transformer(30, 40, embed_dim=32).eval(), False)]:
        asked.clear()
        translate(model, sentences, src_vocab, tgt_vocab, extra_len=7, beam_size=3,
                  length_penalty=1.25)
        assert asked == [(3, 1.25, cached, [n + 7 for n in lengths])]

    data = load_data()
    handed = []
    monkeypatch.setattr(evaluation, "translate",
                        lambda *args, **kwargs: handed.append(kwargs) or
                        [[] for _ in data.sources("test")])
    evaluation.evaluate(random_model("small"), data, "test", beam_size=5, length_penalty=2.0,
                        extra_len=50)
    assert {k: handed[0][k] for k in ("beam_size", "length_penalty", "extra_len")} == \
        {"beam_size": 5, "length_penalty": 2.0, "extra_len": 50}


def test_a_sentence_that_is_done_leaves_the_batch_with_its_rows():
    """Its rows would otherwise be computed until the longest sentence ends, for nothing; and
    the first step computes one row per sentence, not beam_size copies of it."""
    fed, selected = [], []
    never_ends = scripted({prefix: {A: 0.4, B: 0.3, C: 0.3 - 1e-9, EOS_ID: 1e-9}
                           for n in range(5) for prefix in itertools.product([A, B, C], repeat=n)})

    def next_log_probs(tokens):
        fed.append(tokens.size(0))
        return never_ends(tokens)

    limits = torch.tensor([0, 2, 5, 3])  # the first is done before it starts
    found = beam_search(next_log_probs,
                        lambda rows, regrouped: selected.append((rows.tolist(), regrouped)),
                        limits, beam_size=3, alpha=0.0)
    # One row per live sentence (<bos> alone), then three each; then two sentences; then one.
    assert fed == [3, 9, 6, 3, 3]
    assert selected[0] == ([1, 2, 3], True)  # sentence 0 leaves at once
    # Regrouped as the rows grow to three a sentence and as sentences leave; the last move
    # only reorders the beams of the one sentence left.
    assert [(len(rows), regrouped) for rows, regrouped in selected[1:]] == [
        (9, True), (6, True), (3, True), (3, False)]
    assert found[0] == [Hypothesis([], 0.0, 0.0)]
    assert [h[0].tokens for h in found[1:]] == [[A] * 2, [A] * 5, [A] * 3]


@pytest.mark.parametrize("config", CONFIGS)
def test_a_sentence_done_after_one_step_takes_nothing_from_its_neighbours(config):
    """When a sentence leaves as the rows per sentence grow, the row count can stay the same
    while the rows change sentence: the cached cross-attention must still follow them."""
    model = random_model(config, seed=4)
    src, _ = batch_of_unequal_lengths(seed=4)
    for limits, beam_size in [([1, 15], 2), ([1, 1, 1, 15], 4), ([1, 9, 1, 12, 1, 6], 3)]:
        rows = src[: len(limits)]
        together = beam_decode(model, rows, torch.tensor(limits), beam_size)
        rerun = beam_decode(model, rows, torch.tensor(limits), beam_size, cached=False)
        assert [h[0].tokens for h in together] == [h[0].tokens for h in rerun]
        for row, limit in enumerate(limits):
            length = int((rows[row] != 0).sum())
            alone = beam_decode(model, rows[row : row + 1, :length], torch.tensor([limit]),
                                beam_size)
            assert alone[0][0].tokens == together[row][0].tokens


def test_an_empty_batch_gives_no_hypotheses():
    model = random_model("small")
    for cached in (True, False):
        assert beam_decode(model, torch.zeros(0, 5, dtype=torch.long), 10, cached=cached) == []
    assert beam_search(scripted({}), lambda *move: None, torch.zeros(0, dtype=torch.long), 4) == []


def test_a_translation_scored_afresh_has_the_log_probability_the_search_gave_it():
    """sentence_log_probs tells search errors from model errors only if it scores sentences
    exactly as the search does."""
    model = random_model("small", seed=5)
    with torch.no_grad():  # sentences that end early, in words (else the search cuts them)
        model.out_proj.bias[:EOS_ID] -= 10.0
        model.out_proj.bias[EOS_ID] += 2.0
    sentences, src_vocab, tgt_vocab = sentences_and_vocabularies()
    encoded = [encode_source(sentence.split(), src_vocab) for sentence in sentences]
    limits = torch.tensor([len(ids) + 10 for ids in encoded])
    found = beam_decode(model, pad(encoded), limits, beam_size=4, n_best=4)
    checked = 0
    for sentence, hypotheses, limit in zip(sentences, found, limits.tolist(), strict=True):
        for h in hypotheses:  # those that ended with <eos>, and hold only words
            if len(h.tokens) < limit and all(t >= 4 for t in h.tokens):
                words = [tgt_vocab.itos[t] for t in h.tokens]
                score = sentence_log_probs(model, [sentence], [words], src_vocab, tgt_vocab)[0]
                assert score == pytest.approx(h.log_prob, abs=1e-4)
                checked += 1
    assert checked >= 5


def test_the_cache_moves_rows_with_the_documented_forms_only():
    """Writing an op's result through `out=` into a non-contiguous slice is a form some
    backends do not support; `copy_` into the slice is documented everywhere. Every op the
    search runs is recorded: no `out=` variant may appear."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(func._schema.overload_name)
            return func(*args, **(kwargs or {}))

    model = random_model("small")
    src, limits = batch_of_unequal_lengths()
    with Recorder() as recorder:
        found = beam_decode(model, src, limits, beam_size=3)
    assert "out" not in recorder.ops
    rerun = beam_decode(model, src, limits, beam_size=3, cached=False)
    assert [h[0].tokens for h in found] == [h[0].tokens for h in rerun]
