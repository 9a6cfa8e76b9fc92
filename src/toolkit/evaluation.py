"""Translate a whole split and score it: the numbers each stage reports."""

import torch
from torch import nn

from toolkit.corpus import HELD_OUT_TAG
from toolkit.data import CourseData
from toolkit.decoding import translate
from toolkit.metrics import Report, score


def evaluate(
    model: nn.Module, data: CourseData, split: str = "test", device: torch.device | str = "cpu",
) -> tuple[Report, list[list[str]]]:
    """Greedy-translate every sentence of a split; return the scores and the translations."""
    hypotheses = translate(model, data.sources(split), data.src_vocab, data.tgt_vocab, device)
    report = score(hypotheses, data.references(split), data.phenomena(split), apart=HELD_OUT_TAG)
    return report, hypotheses
