"""Beam search with the paper's length penalty, batched, on the stage-07 KV cache.

Greedy decoding commits to the most likely token at every step, and a likely first word can
lead into an unlikely sentence. Beam search keeps the `beam_size` most likely hypotheses
instead (Vaswani et al., 2017, §6.1: beam size 4, length penalty α = 0.6, at most the input
length + 50 tokens). Each step extends every live hypothesis by every token and ranks the
extensions by log-probability (they all have the same length, so the length penalty would
not change their order). Of the `2 * beam_size` best, the best `beam_size` that do not end
stay live, as in the paper's tensor2tensor search, so a hypothesis that ends never takes a
live one's place. One that ends (with <eos>, or at the sentence's limit) is finished if it
ranks among the `beam_size` best, as in fairseq: it leaves with its score, its
log-probability divided by the length penalty of Wu et al. (2016, eq. 14),
lp(Y) = ((5 + |Y|) / 6)^α, where |Y| counts its tokens with <eos>. Without the penalty,
every extra token can only lower a log-probability, so short translations would always win.
A sentence stops once `beam_size` hypotheses have finished, when none is left live, or when
no live one could still beat its `n_best` finished ones (the paper's "terminate early when
possible"); the answer is the finished hypothesis with the best score. With `beam_size=1`
this is exactly greedy decoding (tested).

The rows of the batch hold the live sentences' hypotheses, `width` per sentence: one at the
first step (<bos> alone), `beam_size` after it, so live sentence i has rows `i * width ...
i * width + width - 1`. When the kept extensions come from other rows than they were in,
the rows, and the cache's keys and values with them, are reordered, never mixed between
sentences; and a sentence that is done leaves the batch with its rows, so the model stops
computing them.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from toolkit.batching.batches import encode_source, pad
from toolkit.search.cached_decoding import CachedRun
from toolkit.search.stream_decoding import StreamRun, is_decoder_only
from toolkit.stage_api import forward_batch, restoring_mode
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

PAPER_BEAM_SIZE, PAPER_LENGTH_PENALTY = 4, 0.6  # Vaswani et al. (2017), §6.1


@dataclass(frozen=True)
class Hypothesis:
    """A finished translation, as ids without <bos> and <eos>, with what ranked it."""

    tokens: list[int]
    score: float  # log_prob / length_penalty(len(tokens) + 1 if it ended with <eos>)
    log_prob: float


def length_penalty(length: int | torch.Tensor, alpha: float) -> float | torch.Tensor:
    """Wu et al. (2016): ((5 + |Y|) / 6)^α; α = 0 ranks by log-probability alone."""
    return ((5 + length) / 6) ** alpha


@dataclass(frozen=True)
class SearchStep:
    """One step's extensions that the search kept, for every sentence, best first, to draw the
    search (`toolkit.figures.plots.beam_tree`); the next step's row k is the k-th that goes on."""

    parents: torch.Tensor  # (batch, candidates) the row each extension continues
    tokens: torch.Tensor  # (batch, candidates) the token it appends
    log_probs: torch.Tensor  # (batch, candidates) its log-probability so far
    scores: torch.Tensor  # (batch, candidates) log_probs / lp: what ranks it if it finished
    finished: torch.Tensor  # (batch, candidates) True where it ends here and is kept
    goes_on: torch.Tensor  # (batch, candidates) True where it stays live


# (tokens so far: (rows, length)) -> log-probabilities of the next token: (rows, vocab)
NextLogProbs = Callable[[torch.Tensor], torch.Tensor]
# (new rows,) the old row each new row continues, the rows of finished sentences left out;
# and whether the rows were regrouped: True when sentences left or each sentence's number of
# rows changed, False when every row stayed on its sentence (only its beams were reordered),
# so that what is the same for all of a sentence's rows need not move.
Select = Callable[[torch.Tensor, bool], None]
Watch = Callable[[SearchStep], None]


def beam_search(
    next_log_probs: NextLogProbs, select: Select, limits: torch.Tensor, beam_size: int,
    alpha: float = PAPER_LENGTH_PENALTY, n_best: int = 1, watch: Watch | None = None,
) -> list[list[Hypothesis]]:
    """Search for every sentence at once; `limits` (batch,) caps each one's length. After
    each step, `select` says which rows go on (a finished sentence leaves the batch, so its
    rows cost nothing more), and `watch`, if given, sees what the step kept. A sentence gets
    at most `n_best` hypotheses, fewer if fewer finished (one empty if it was allowed none)."""
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    if alpha < 0:
        raise ValueError(f"the length penalty's alpha must be 0 or more, got {alpha}: a "
                         f"negative one would favour ever shorter sentences")
    batch, device = limits.size(0), limits.device
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    # One row per sentence at first (<bos> alone); after the first step, beam_size rows.
    tokens = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=device)  # (rows, 1)
    log_probs = torch.zeros(batch, 1, device=device)  # (live, rows per sentence)
    live = torch.arange(batch, device=device)  # (live,) the batch index of each live sentence
    if (limits <= 0).any():  # a sentence allowed no token is done before it starts
        keep = (limits > 0).nonzero().squeeze(1)
        tokens, log_probs, live = tokens[keep], log_probs[keep], live[keep]
        select(keep, True)
    n_finished = torch.zeros(live.numel(), dtype=torch.long, device=device)  # (live,)
    for step in range(int(limits.max()) if live.numel() else 0):
        step_log_probs = next_log_probs(tokens)  # (rows, vocab)
        width, vocab = log_probs.size(1), step_log_probs.size(-1)  # rows per live sentence
        candidates = (log_probs.reshape(-1, 1) + step_log_probs).view(live.numel(), -1)
        best, index = candidates.topk(min(2 * beam_size, width * vocab), dim=1)  # best first
        if best.size(1) < beam_size:  # fewer candidates than beams: empty slots fill the rest
            best = nn.functional.pad(best, (0, beam_size - best.size(1)), value=-torch.inf)
            index = nn.functional.pad(index, (0, beam_size - index.size(1)))
        beam, token = index // vocab, index % vocab  # (live, candidates): the row, the token
        length = step + 1
        real = best > -torch.inf  # (live, candidates) False: an empty slot, or impossible
        ends = real & ((token == EOS_ID) | (length >= limits[live])[:, None])
        # The beam_size best that do not end go on; of those that end, the ones among the
        # beam_size best are finished, and the rest are dropped.
        goes_on = real & ~ends
        goes_on &= goes_on.cumsum(dim=1) <= beam_size
        finishing = ends.clone()
        finishing[:, beam_size:] = False
        if watch is not None:
            scores = best / length_penalty(length, alpha)
            watch(_in_batch(live, batch, beam, token, best, scores, finishing, goes_on))
        _collect(finished, finishing, live, best, beam, token, tokens, width, length, alpha)
        n_finished += finishing.sum(dim=1)
        # Each sentence's going-on extensions, in rank order, become its beam_size rows.
        order = (~goes_on).to(torch.uint8).argsort(dim=1, stable=True)[:, :beam_size]
        log_probs = best.gather(1, order).masked_fill(~goes_on.gather(1, order), -torch.inf)
        beam, token = beam.gather(1, order), token.gather(1, order)  # (live, beam)
        done = ((n_finished >= beam_size) | ~(log_probs > -torch.inf).any(dim=1)
                | _cannot_improve([finished[b] for b in live.tolist()], log_probs,
                                  limits[live], alpha, n_best))
        keep = (~done).nonzero().squeeze(1)  # (still live,) the sentences that go on
        if keep.numel() == 0:
            break
        # Each kept extension continues the row it came from; done sentences' rows leave.
        rows = (keep[:, None] * width + beam[keep]).reshape(-1)  # (still live * beam,)
        tokens = torch.cat([tokens[rows], token[keep].reshape(-1, 1)], dim=1)
        regrouped = keep.numel() < live.numel() or width != beam_size
        log_probs, live, n_finished = log_probs[keep], live[keep], n_finished[keep]
        select(rows, regrouped)
    return [sorted(hypotheses, key=lambda h: -h.score)[:n_best] or [Hypothesis([], 0.0, 0.0)]
            for hypotheses in finished]


def _collect(
    finished: list[list[Hypothesis]], finishing: torch.Tensor, live: torch.Tensor,
    best: torch.Tensor, beam: torch.Tensor, token: torch.Tensor, tokens: torch.Tensor,
    width: int, length: int, alpha: float,
) -> None:
    """Add this step's finished extensions to their sentences' lists, read on the CPU once
    rather than element by element from the device."""
    newly = finishing.nonzero()  # (n, 2): (live sentence, candidate) pairs
    if newly.numel() == 0:
        return
    b, k = newly.unbind(dim=1)
    histories = tokens[b * width + beam[b, k], 1:].tolist()  # each one's tokens so far
    for ids, sentence, last, log_prob in zip(histories, live[b].tolist(), token[b, k].tolist(),
                                            best[b, k].tolist(), strict=True):
        if last != EOS_ID:  # cut by the limit: its last token is a word
            ids.append(last)
        finished[sentence].append(Hypothesis(ids, log_prob / length_penalty(length, alpha),
                                             log_prob))


def _in_batch(live: torch.Tensor, batch: int, *kept: torch.Tensor) -> SearchStep:
    """A step's record with a row for every sentence of the batch; one that left keeps
    nothing."""
    def whole(part: torch.Tensor) -> torch.Tensor:  # (live, candidates) -> (batch, candidates)
        fill = False if part.dtype == torch.bool else (-torch.inf if part.is_floating_point()
                                                       else PAD_ID)
        return part.new_full((batch, part.size(1)), fill).index_copy_(0, live, part)

    return SearchStep(*(whole(part) for part in kept))


def _cannot_improve(
    finished: list[list[Hypothesis]], log_probs: torch.Tensor, limits: torch.Tensor,
    alpha: float, n_best: int,
) -> torch.Tensor:
    """True for a sentence whose n_best-th finished score no live hypothesis can still beat.

    A live hypothesis's log-probability only falls as it grows, and its penalty grows at most
    to the penalty at the limit, so its score can never exceed log_prob / lp(limit).
    """
    kept = [sorted((h.score for h in hypotheses), reverse=True) for hypotheses in finished]
    worst_kept = torch.tensor([scores[n_best - 1] if len(scores) >= n_best else -torch.inf
                               for scores in kept], device=log_probs.device)  # (batch,)
    penalties = length_penalty(limits.float(), alpha)  # (batch,) lp at each sentence's limit
    return worst_kept >= log_probs.max(dim=1).values / penalties


@torch.no_grad()
def beam_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor,
    beam_size: int = PAPER_BEAM_SIZE, alpha: float = PAPER_LENGTH_PENALTY,
    n_best: int = 1, cached: bool = True, watch: Watch | None = None,
) -> list[list[Hypothesis]]:
    """Beam-search a batch of sources; `cached=False` reruns the whole model at every step
    (any batched stage), `cached=True` the KV cache of stage 07 (or of stage 08)."""
    if src.size(0) == 0:
        return []
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    src_rows = src  # (rows, src_len): one row per sentence, then one per hypothesis
    with restoring_mode(model, training=False):
        if not cached:
            def rerun(tokens: torch.Tensor) -> torch.Tensor:
                logits = forward_batch(model, src_rows, tokens)[:, -1]  # (rows, vocab)
                return logits.float().log_softmax(dim=-1)  # half precision would lose the tail

            def select_sources(rows: torch.Tensor, regrouped: bool) -> None:
                nonlocal src_rows
                src_rows = src_rows.index_select(0, rows)

            return beam_search(rerun, select_sources, limits, beam_size, alpha, n_best, watch)
        cached_run = StreamRun if is_decoder_only(model) else CachedRun
        run = cached_run(model, src, max(int(limits.max()), 1))

        def step(tokens: torch.Tensor) -> torch.Tensor:
            return run.next_logits(tokens).float().log_softmax(dim=-1)  # (rows, vocab)

        return beam_search(step, run.select, limits, beam_size, alpha, n_best, watch)


@torch.no_grad()
def sentence_log_probs(
    model: nn.Module, sources: Sequence[str], translations: Sequence[list[str]],
    src_vocab: Vocab, tgt_vocab: Vocab, batch_size: int = 100,
) -> list[float]:
    """log P(translation + <eos> | source) under the model: where a reference scores higher
    than what a search returned, the search missed it; where lower, the model prefers its own
    wrong sentence, and no search could have helped."""
    device = next(model.parameters()).device
    scores: list[float] = []
    with restoring_mode(model, training=False):
        for start in range(0, len(sources), batch_size):
            src = pad([encode_source(src_vocab.split(sentence), src_vocab)
                       for sentence in sources[start : start + batch_size]]).to(device)
            framed = pad([[BOS_ID, *tgt_vocab.encode(words), EOS_ID]
                          for words in translations[start : start + batch_size]]).to(device)
            logits = forward_batch(model, src, framed[:, :-1])  # (batch, tgt_len, vocab)
            wanted = framed[:, 1:]  # (batch, tgt_len): each position's next token
            log_probs = logits.float().log_softmax(dim=-1).gather(-1, wanted[..., None])[..., 0]
            scores += log_probs.masked_fill(wanted == PAD_ID, 0.0).sum(dim=1).tolist()
    return scores
