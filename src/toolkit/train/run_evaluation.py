"""What a run measures every `--eval-every` steps, and when it stops for lack of progress."""

import numpy as np
import torch
from torch import nn

from stages import stage07_multi_head as stage
from toolkit.batching.batches import loader
from toolkit.batching.data import CourseData
from toolkit.learning.training import evaluate_loss
from toolkit.scoring.metrics import CorpusScore, bleu
from toolkit.search.decoding import translate
from toolkit.train.run_state import Progress


def evaluation_sample(data: CourseData, sentences: int, seed: int) -> np.ndarray:
    """A fixed, seeded sample of validation sentences, the same at every evaluation."""
    size = len(data.splits["validation"])
    if size == 0:
        raise SystemExit("the validation split is empty: nothing to evaluate on")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(size, size=min(sentences, size), replace=False))


# Validation batches of pairs of like length, at most this many tokens each: a third of the
# time of 100 pairs padded to the longest, and the same loss up to float rounding.
EVAL_TOKENS = 8000
TRANSLATE_BATCH = 100  # sentences translated at once


@torch.no_grad()
def evaluate_during_training(
    model: nn.Module, data: CourseData, sample: np.ndarray, device: torch.device,
) -> dict:
    """Validation loss and BLEU, drawing nothing from training's random streams."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        val_loss = validation_loss(model, data, device)
        scored = validation_bleu(model, data, sample, device)
    return {"val_loss": val_loss, "val_bleu": scored.score, "bleu_signature": scored.signature}


@torch.no_grad()
def validation_loss(model: nn.Module, data: CourseData, device: torch.device) -> float:
    """Loss per target token on the whole validation split."""
    return evaluate_loss(model, stage.objective,
                         loader(data.validation, max_tokens=EVAL_TOKENS, shuffle=False), device)


@torch.no_grad()
def validation_bleu(model: nn.Module, data: CourseData, sample: np.ndarray,
                    device: torch.device) -> CorpusScore:
    """BLEU of greedy translations of the sampled validation sentences."""
    sources, references = data.sources("validation"), data.reference_texts("validation")
    hypotheses = translate(model, [sources[i] for i in sample], data.src_vocab, data.tgt_vocab,
                           device, batch_size=TRANSLATE_BATCH)
    return bleu([data.tgt_vocab.join(words) for words in hypotheses],
                [references[i] for i in sample], data.tgt_lang)


def record_evaluation(progress: Progress, score: float, patience: int, step: int) -> bool:
    """Record an evaluation; True when `patience` evaluations in a row brought no better BLEU."""
    if progress.best_bleu is None or score > progress.best_bleu:
        progress.best_bleu, progress.best_step = score, step
        progress.evaluations_since_best = 0
    else:
        progress.evaluations_since_best += 1
    return patience > 0 and progress.evaluations_since_best >= patience
