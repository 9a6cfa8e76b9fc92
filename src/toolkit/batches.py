"""Turn sentence pairs into padded id tensors, the only input a model ever sees."""

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import torch
from torch.utils.data import DataLoader

from toolkit.tokens import tokenize
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

EncodedPair = tuple[list[int], list[int]]


class Batch(NamedTuple):
    """A padded batch; `tgt` starts with <bos> and ends with <eos>, as decoding will."""

    src: torch.Tensor  # (batch, src_len)
    tgt: torch.Tensor  # (batch, tgt_len)

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(self.src.to(device), self.tgt.to(device))


def encode_source(tokens: list[str], vocab: Vocab) -> list[int]:
    """End every source with <eos>, so even a one-word sentence has a fixed last key."""
    if not tokens:
        raise ValueError("cannot encode an empty sentence: give at least one word")
    return vocab.encode(tokens) + [EOS_ID]


def encode_target(tokens: list[str], vocab: Vocab) -> list[int]:
    """Frame the target with <bos> (the decoder's first input) and <eos> (its last output)."""
    if not tokens:
        raise ValueError("cannot encode an empty sentence: give at least one word")
    return [BOS_ID] + vocab.encode(tokens) + [EOS_ID]


def encode_pairs(
    rows: Sequence[dict], src_vocab: Vocab, tgt_vocab: Vocab, src_lang: str = "en",
    tgt_lang: str = "de",
) -> list[EncodedPair]:
    """Encode rows in the opus100 schema ({"translation": {"en": ..., "de": ...}})."""
    pairs = []
    for row in rows:
        translation = row["translation"]
        pairs.append((
            encode_source(tokenize(translation[src_lang]), src_vocab),
            encode_target(tokenize(translation[tgt_lang]), tgt_vocab),
        ))
    return pairs


def pad(sequences: Sequence[list[int]]) -> torch.Tensor:
    """Right-pad to the longest *encoded* sequence, so no real token, <bos> or <eos> is cut."""
    longest = max(len(sequence) for sequence in sequences)
    padded = torch.full((len(sequences), longest), PAD_ID, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        padded[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
    return padded  # (batch, longest)


def collate(pairs: Sequence[EncodedPair]) -> Batch:
    """DataLoader's collate_fn: a list of encoded pairs becomes one padded Batch."""
    return Batch(pad([src for src, _ in pairs]), pad([tgt for _, tgt in pairs]))


def loader(
    pairs: Sequence[EncodedPair], batch_size: int, seed: int = 0, shuffle: bool = True
) -> DataLoader:
    """Shuffle with our own seeded generator, so the data order is the same on every run."""
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        pairs, batch_size=batch_size, shuffle=shuffle, collate_fn=collate, generator=generator
    )


def endless(data: DataLoader) -> Iterator[Batch]:
    """Cycle through epochs, because training budgets are counted in steps, not epochs."""
    while True:
        empty = True
        for batch in data:
            empty = False
            yield batch
        if empty:  # cycling through nothing would wait forever without a word
            raise ValueError("there are no batches to train on: the training split is empty")
