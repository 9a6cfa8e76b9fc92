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
from toolkit.search.stream_decoding import is_decoder_only, stream_greedy_decode
from toolkit.text.vocab import Vocab

# The beam's settings and greedy_decode stay importable from here, where they were.
__all__ = ["EXTRA_LEN", "PAPER_BEAM_SIZE", "PAPER_EXTRA_LEN", "PAPER_LENGTH_PENALTY", "decoder",
           "greedy_decode", "room", "translate"]

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
    """Translate raw sentences to target tokens, each allowed `extra_len` more than its source,
    never more than the model's positions leave (`room`) and, with `max_len`, than `max_len`.

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
        limits = []
        for ids in encoded:
            left = room(model, len(ids))
            if left == 0:
                raise ValueError(f"{len(ids)} source tokens leave no room for a translation in "
                                 f"the model's {model.config['max_seq_len']} positions "
                                 f"(max_seq_len): split the sentence into shorter ones")
            caps = [cap for cap in (left, max_len) if cap is not None]
            limits.append(min([len(ids) + extra_len, *caps]))
        src = pad(encoded).to(device)  # (batch, src_len)
        for ids in decode(model, src, torch.tensor(limits, device=device)):
            translations.append(tgt_vocab.decode(ids))
    return translations


def room(model: nn.Module, src_len: int) -> int | None:
    """How many tokens a translation of a `src_len`-token source may have: None where the model
    has no position limit, 0 where the source does not fit. Stage 07's target has positions
    of its own; stage 08's one stream shares them with the source."""
    positions = getattr(model, "config", {}).get("max_seq_len")
    if positions is None:
        return None
    if is_decoder_only(model):
        return max(positions - src_len, 0)
    return positions if src_len <= positions else 0


Decoder = Callable[[nn.Module, torch.Tensor, torch.Tensor], list[list[int]]]  # (model, src, limits)


def decoder(
    model: nn.Module, beam_size: int = 1, length_penalty: float = PAPER_LENGTH_PENALTY
) -> Decoder:
    """The fastest decoder that gives the asked-for tokens: the KV cache where a stage has one
    (stage 07's decoder, or stage 08's one stream)."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be 1 (greedy) or more, got {beam_size}")
    cached = supports_cache(model) or is_decoder_only(model)
    if beam_size == 1:
        if is_decoder_only(model):
            return stream_greedy_decode
        return cached_greedy_decode if cached else greedy_decode

    def search(model: nn.Module, src: torch.Tensor, limits: torch.Tensor) -> list[list[int]]:
        found = beam_decode(model, src, limits, beam_size, length_penalty, cached=cached)
        return [hypotheses[0].tokens for hypotheses in found]

    return search
