"""Greedy decoding: translate by repeatedly appending the most likely next token."""

from collections.abc import Callable, Sequence

import torch
from torch import nn

from toolkit.batches import encode_source, pad
from toolkit.stage_api import forward_batch, restoring_mode
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

# The course decodes greedily, each translation at most EXTRA_LEN tokens longer than its
# source; the paper (Vaswani et al., 2017, §6.1) decodes with a beam of 4, the length
# penalty α = 0.6 and up to 50 extra tokens.
EXTRA_LEN = 10
PAPER_BEAM_SIZE, PAPER_LENGTH_PENALTY, PAPER_EXTRA_LEN = 4, 0.6, 50


@torch.no_grad()
def greedy_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | torch.Tensor
) -> list[list[int]]:
    """Decode a whole batch at once; a sentence stops at <eos> or after its `max_len` tokens.

    `max_len` is one limit for all, or one per sentence, so that a sentence's translation
    never depends on the length of its neighbours. The model sees the full prefix at every
    step, so whatever masks a stage builds are rebuilt for the current length.
    """
    limits = torch.as_tensor(max_len, device=src.device).expand(src.size(0))  # (batch,)
    if src.size(0) == 0:
        return []

    def keep(rows: torch.Tensor) -> None:
        nonlocal src
        src = src.index_select(0, rows)

    with restoring_mode(model, training=False):
        return greedy_loop(lambda tokens, step: forward_batch(model, src, tokens)[:, -1], limits,
                           keep)


NextLogits = Callable[[torch.Tensor, int], torch.Tensor]  # (live rows' tokens, step) -> logits
Keep = Callable[[torch.Tensor], None]  # (rows that go on,): the caller drops the others' state


def greedy_loop(next_logits: NextLogits, limits: torch.Tensor, keep: Keep) -> list[list[int]]:
    """The loop every greedy decoder shares; `next_logits` says how to score the next token.

    A sentence that ends (at <eos> or at its limit) leaves the batch, as in beam search:
    `keep(rows)` tells the caller which rows go on, so the model computes only live ones.
    """
    found: list[list[int]] = [[] for _ in range(limits.size(0))]
    live = (limits > 0).nonzero().squeeze(1)  # (live,) each row's sentence in the batch
    if live.numel() < limits.size(0):
        keep(live)
    tokens = torch.full((live.numel(), 1), BOS_ID, dtype=torch.long, device=limits.device)
    for step in range(int(limits.max()) if live.numel() else 0):
        next_token = next_logits(tokens, step).argmax(dim=-1)  # (live,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (live, step + 2)
        ends = (next_token == EOS_ID) | (limits[live] <= step + 1)  # (live,)
        if not ends.any():  # the step's one read from the device
            continue
        for row, sentence in zip(ends.nonzero().squeeze(1).tolist(), live[ends].tolist(),
                                 strict=True):
            found[sentence] = until_eos(tokens[row, 1:].tolist())
        going = (~ends).nonzero().squeeze(1)  # (still live,)
        if going.numel() == 0:
            break
        tokens, live = tokens[going], live[going]
        keep(going)
    return found


def until_eos(ids: list[int]) -> list[int]:
    """Keep the generated ids before <eos>; a sentence cut by its limit has no <eos> or pad."""
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else [i for i in ids if i != PAD_ID]


def translate(
    model: nn.Module,
    sentences: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    device: torch.device | str = "cpu",
    batch_size: int = 100,
    extra_len: int = EXTRA_LEN,
    beam_size: int = 1,
    length_penalty: float = PAPER_LENGTH_PENALTY,
    max_len: int | None = None,
) -> list[list[str]]:
    """Translate raw sentences to target tokens, each allowed `extra_len` more than its source
    and, with `max_len`, never more than `max_len` (evaluate passes the model's positions).

    Greedy by default; `beam_size > 1` searches with the paper's length penalty α (the paper
    decodes with beam_size=4, length_penalty=0.6 and extra_len=50). A stage-07 model decodes
    on its KV cache, which gives exactly the tokens of rerunning it (tested), only faster.
    """
    if isinstance(sentences, str):
        raise TypeError(
            f"translate takes a list of sentences, got one string ({sentences[:40]!r}): "
            f"write translate(model, [sentence], ...)"
        )
    decode = decoder(model, beam_size, length_penalty)
    translations: list[list[str]] = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start : start + batch_size]
        encoded = []
        for sentence in chunk:
            if not isinstance(sentence, str):
                raise TypeError(
                    f"translate takes sentences as text (str), got {type(sentence).__name__} "
                    f"{sentence!r}: pass the sentence itself, not its ids or tokens"
                )
            tokens = src_vocab.split(sentence)
            if not tokens:
                raise ValueError(f"cannot translate an empty sentence (got {sentence!r})")
            encoded.append(encode_source(tokens, src_vocab))
        src = pad(encoded).to(device)  # (batch, src_len)
        limits = torch.tensor([len(ids) for ids in encoded], device=device) + extra_len
        if max_len is not None:
            limits = limits.clamp(max=max_len)  # (batch,)
        for ids in decode(model, src, limits):
            translations.append(tgt_vocab.decode(ids))
    return translations


Decoder = Callable[[nn.Module, torch.Tensor, torch.Tensor], list[list[int]]]  # (model, src, limits)


def decoder(
    model: nn.Module, beam_size: int = 1, length_penalty: float = PAPER_LENGTH_PENALTY
) -> Decoder:
    """The fastest decoder that gives the asked-for tokens: the KV cache where a stage has one."""
    # Imported here, not above: both modules build on greedy_loop.
    from toolkit.beam_search import beam_decode
    from toolkit.cached_decoding import cached_greedy_decode, supports_cache

    if beam_size < 1:
        raise ValueError(f"beam_size must be 1 (greedy) or more, got {beam_size}")
    cached = supports_cache(model)
    if beam_size == 1:
        return cached_greedy_decode if cached else greedy_decode

    def search(model: nn.Module, src: torch.Tensor, limits: torch.Tensor) -> list[list[int]]:
        found = beam_decode(model, src, limits, beam_size, length_penalty, cached=cached)
        return [hypotheses[0].tokens for hypotheses in found]

    return search
