"""Translate sentences: text in, tokens out, with the fastest decoder that gives the tokens
asked for (greedy, `toolkit.search.greedy`; on the KV cache,
`toolkit.search.cached_decoding`; or the paper's beam search, `toolkit.search.beam_search`)."""

from collections.abc import Callable, Sequence

import torch
from torch import nn

from toolkit.batching.batches import encode_source, pad
from toolkit.search.beam_search import PAPER_BEAM_SIZE, PAPER_LENGTH_PENALTY, beam_decode
from toolkit.search.cached_decoding import cached_greedy_decode, supports_cache
from toolkit.search.greedy import greedy_decode
from toolkit.text.vocab import Vocab

__all__ = ["EXTRA_LEN", "PAPER_BEAM_SIZE", "PAPER_EXTRA_LEN", "PAPER_LENGTH_PENALTY", "decoder",
           "greedy_decode", "translate"]  # the beam's settings and greedy_decode, where they were

# The course decodes greedily, each translation at most EXTRA_LEN tokens longer than its
# source; the paper (Vaswani et al., 2017, §6.1) decodes with a beam of 4, the length
# penalty α = 0.6 and up to 50 extra tokens.
EXTRA_LEN = 10
PAPER_EXTRA_LEN = 50


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
    if beam_size < 1:
        raise ValueError(f"beam_size must be 1 (greedy) or more, got {beam_size}")
    cached = supports_cache(model)
    if beam_size == 1:
        return cached_greedy_decode if cached else greedy_decode

    def search(model: nn.Module, src: torch.Tensor, limits: torch.Tensor) -> list[list[int]]:
        found = beam_decode(model, src, limits, beam_size, length_penalty, cached=cached)
        return [hypotheses[0].tokens for hypotheses in found]

    return search
