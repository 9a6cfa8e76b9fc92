"""Translate a whole split and score it: the numbers each stage reports."""

import torch
from torch import nn

from toolkit.corpus import HELD_OUT_TAG
from toolkit.data import CourseData
from toolkit.decoding import EXTRA_LEN, PAPER_LENGTH_PENALTY, translate
from toolkit.metrics import Report, score


def evaluate(
    model: nn.Module, data: CourseData, split: str = "test", device: torch.device | str = "cpu",
    beam_size: int = 1, length_penalty: float = PAPER_LENGTH_PENALTY,
    extra_len: int = EXTRA_LEN,
) -> tuple[Report, list[list[str]]]:
    """Translate every sentence of a split (greedily unless a beam is asked for); return the
    scores and the translations."""
    hypotheses = translate(model, data.sources(split), data.src_vocab, data.tgt_vocab, device,
                           extra_len=extra_len, beam_size=beam_size,
                           length_penalty=length_penalty)
    report = score(hypotheses, data.reference_texts(split), data.phenomena(split),
                   apart=HELD_OUT_TAG, tgt_lang=data.tgt_lang)
    return report, hypotheses
