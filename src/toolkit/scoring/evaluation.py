"""Translate a whole split and score it: the numbers each stage reports."""

import torch
from torch import nn

from toolkit.batching.batches import encode_source
from toolkit.batching.data import CourseData
from toolkit.scoring.metrics import Report, score
from toolkit.search.decoding import EXTRA_LEN, PAPER_LENGTH_PENALTY, room, translate
from toolkit.text.corpus import HELD_OUT_TAG


def evaluate(
    model: nn.Module, data: CourseData, split: str = "test", device: torch.device | str = "cpu",
    beam_size: int = 1, length_penalty: float = PAPER_LENGTH_PENALTY,
    extra_len: int = EXTRA_LEN,
) -> tuple[Report, list[list[str]]]:
    """Translate every sentence of a split (greedily unless a beam is asked for); return the
    scores and the translations.

    Every sentence counts. One that leaves no room in the model's positions for a translation
    (longer than them; in stage 08, whose stream holds the source too, as long) cannot be
    translated: it is scored as an empty translation, and said so, rather than left out.
    """
    sources = data.sources(split)
    takes = [i for i, sentence in enumerate(sources) if room(
        model, len(encode_source(data.src_vocab.split(sentence), data.src_vocab))) != 0]
    if len(takes) < len(sources):
        print(f"{len(sources) - len(takes):,} of {len(sources):,} {split} sentences leave no "
              f"room for a translation in the model's {model.config['max_seq_len']} positions: "
              f"each is scored as an empty translation")
    translated = translate(model, [sources[i] for i in takes], data.src_vocab, data.tgt_vocab,
                           device, extra_len=extra_len, beam_size=beam_size,
                           length_penalty=length_penalty)
    hypotheses: list[list[str]] = [[] for _ in sources]
    for index, words in zip(takes, translated, strict=True):
        hypotheses[index] = words
    texts = [data.tgt_vocab.join(words) for words in hypotheses]
    report = score(texts, data.reference_texts(split), data.phenomena(split),
                   apart=HELD_OUT_TAG, tgt_lang=data.tgt_lang)
    return report, hypotheses
