"""Beam search with the paper's length penalty, batched, on the stage-07 KV cache.

Greedy decoding commits to the most likely token at every step, and a likely first word can
lead into an unlikely sentence. Beam search keeps the `beam_size` most likely hypotheses
instead (Vaswani et al., 2017, §6.1: beam size 4, length penalty α = 0.6, at most the input
length + 50 tokens). Each step extends every live hypothesis by every token and keeps the
`beam_size` extensions with the highest log-probability (they all have the same length, so
the length penalty would not change their order). An extension that ends (with <eos>, or at
the sentence's limit) is finished: it leaves the beam with its score, its log-probability
divided by the length penalty of Wu et al. (2016, eq. 14), lp(Y) = ((5 + |Y|) / 6)^α, where
|Y| counts its tokens with <eos>. Without the penalty, every extra token can only lower a
log-probability, so short translations would always win. A sentence stops when no live
hypothesis is left, or when none could still beat its `n_best` finished ones (the paper's
"terminate early when possible"); the answer is the finished hypothesis with the best
score. With `beam_size=1` this is exactly greedy decoding (tested).

Each sentence's beams are rows `b * beam_size ... b * beam_size + beam_size - 1` of the
batch. When the surviving extensions come from other beams than their rows held, the rows,
and the cache's keys and values with them, are reordered, never mixed between sentences.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from toolkit.cached_decoding import DecoderCache, check_positions
from toolkit.stage_api import forward_batch, restoring_mode
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID

PAPER_BEAM_SIZE, PAPER_LENGTH_PENALTY, PAPER_EXTRA_LEN = 4, 0.6, 50


@dataclass(frozen=True)
class Hypothesis:
    """A finished translation, as ids without <bos> and <eos>, with what ranked it."""

    tokens: list[int]
    score: float  # log_prob / length_penalty(len(tokens) + 1 if it ended with <eos>)
    log_prob: float


def length_penalty(length: int, alpha: float) -> float:
    """Wu et al. (2016): ((5 + |Y|) / 6)^α; α = 0 ranks by log-probability alone."""
    return ((5 + length) / 6) ** alpha


@dataclass(frozen=True)
class SearchStep:
    """What one step kept for every sentence, to draw the search (`toolkit.plots.beam_tree`)."""

    parents: torch.Tensor  # (batch, beam) the beam each kept extension continues
    tokens: torch.Tensor  # (batch, beam) the token it appends
    log_probs: torch.Tensor  # (batch, beam) its log-probability so far; -inf: nothing kept
    finished: torch.Tensor  # (batch, beam) True where it ends here (<eos> or the limit)


# (tokens so far: (rows, length)) -> log-probabilities of the next token: (rows, vocab)
NextLogProbs = Callable[[torch.Tensor], torch.Tensor]
Reorder = Callable[[torch.Tensor], None]  # (rows,) which old row each new row continues
Watch = Callable[[SearchStep], None]


def beam_search(
    next_log_probs: NextLogProbs, reorder: Reorder, limits: torch.Tensor, beam_size: int,
    alpha: float = PAPER_LENGTH_PENALTY, n_best: int = 1, watch: Watch | None = None,
) -> list[list[Hypothesis]]:
    """Search for every sentence at once; `limits` (batch,) caps each one's length, and
    `watch`, if given, sees what each step keeps."""
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    if alpha < 0:
        raise ValueError(f"the length penalty's alpha must be 0 or more, got {alpha}: a "
                         f"negative one would favour ever shorter sentences")
    batch, device = limits.size(0), limits.device
    tokens = torch.full((batch * beam_size, 1), BOS_ID, dtype=torch.long, device=device)
    # One live hypothesis per sentence at first: its copies would only repeat it.
    log_probs = torch.full((batch, beam_size), -torch.inf, device=device)  # (batch, beam)
    log_probs[:, 0] = 0.0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    done = limits <= 0  # (batch,)
    rows = torch.arange(batch, device=device)[:, None] * beam_size  # (batch, 1)
    for step in range(int(limits.max()) if batch else 0):  # an empty batch has no steps
        step_log_probs = next_log_probs(tokens)  # (batch * beam, vocab)
        vocab = step_log_probs.size(-1)
        candidates = (log_probs.reshape(-1, 1) + step_log_probs).view(batch, -1)
        best, index = candidates.topk(beam_size, dim=1)  # (batch, beam), best first
        beam, token = index // vocab, index % vocab
        length = step + 1
        ends = (token == EOS_ID) | (length >= limits)[:, None]  # (batch, beam)
        if watch is not None:  # a sentence already done keeps nothing
            watch(SearchStep(beam, token, best.masked_fill(done[:, None], -torch.inf), ends))
        newly = (ends & (best > -torch.inf) & ~done[:, None]).nonzero().tolist()
        if newly:  # read them on the CPU once, not element by element from the device
            best_, beam_, token_ = best.tolist(), beam.tolist(), token.tolist()
            for b, k in newly:
                ids = tokens[b * beam_size + beam_[b][k], 1:].tolist()
                if token_[b][k] != EOS_ID:
                    ids.append(token_[b][k])
                finished[b].append(Hypothesis(
                    ids, best_[b][k] / length_penalty(length, alpha), best_[b][k]))
        log_probs = best.masked_fill(ends, -torch.inf)  # finished hypotheses leave the beam
        done |= ~(log_probs > -torch.inf).any(dim=1) | _cannot_improve(
            finished, log_probs, limits, alpha, n_best)
        if done.all():
            break
        order = (rows + beam).reshape(-1)  # (batch * beam,) the row each new row continues
        tokens = torch.cat([tokens[order], token.reshape(-1, 1)], dim=1)
        reorder(order)
    return [sorted(hypotheses, key=lambda h: -h.score)[:n_best] or [Hypothesis([], 0.0, 0.0)]
            for hypotheses in finished]


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
    penalties = ((5 + limits.float()) / 6) ** alpha  # (batch,) lp at each sentence's limit
    return worst_kept >= log_probs.max(dim=1).values / penalties


@torch.no_grad()
def beam_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor,
    beam_size: int = PAPER_BEAM_SIZE, alpha: float = PAPER_LENGTH_PENALTY,
    n_best: int = 1, cached: bool = True, watch: Watch | None = None,
) -> list[list[Hypothesis]]:
    """Beam-search a batch of sources; `cached=False` reruns the whole model at every step
    (any batched stage), `cached=True` uses the stage-07 KV cache."""
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    src_rows = src.repeat_interleave(beam_size, dim=0)  # (batch * beam, src_len)
    with restoring_mode(model, training=False):
        if not cached:
            def rerun(tokens: torch.Tensor) -> torch.Tensor:
                logits = forward_batch(model, src_rows, tokens)[:, -1]  # (rows, vocab)
                return logits.float().log_softmax(dim=-1)  # half precision would lose the tail

            return beam_search(rerun, lambda order: None, limits, beam_size, alpha, n_best,
                               watch)
        limit = max(int(limits.max()), 1)
        check_positions(model, limit, src.device)
        src_padding = src_rows == PAD_ID  # (batch * beam, src_len)
        memory = model.encode(src, src == PAD_ID).repeat_interleave(beam_size, dim=0)
        cache = DecoderCache(len(model.decoder_layers), limit)

        def step(tokens: torch.Tensor) -> torch.Tensor:
            logits = model.decode(tokens[:, -1:], memory, src_padding, cache)  # (rows, 1, vocab)
            return logits[:, -1].float().log_softmax(dim=-1)

        return beam_search(step, cache.reorder, limits, beam_size, alpha, n_best, watch)
