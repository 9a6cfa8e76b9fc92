"""What a run measures every `--eval-every` steps, and when it stops for lack of progress."""

import numpy as np
import torch
from torch import nn

from stages import stage07_multi_head as stage
from toolkit.batching.batches import loader
from toolkit.batching.data import CourseData
from toolkit.learning.training import evaluate_loss
from toolkit.scoring.metrics import bleu
from toolkit.search.decoding import translate
from toolkit.train.run_state import Progress


def evaluation_sample(data: CourseData, sentences: int, seed: int) -> np.ndarray:
    """A fixed, seeded sample of validation sentences, the same at every evaluation."""
    size = len(data.splits["validation"])
    if size == 0:
        raise SystemExit("the validation split is empty: nothing to evaluate on")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(size, size=min(sentences, size), replace=False))


@torch.no_grad()
def evaluate_during_training(
    model: nn.Module, data: CourseData, sample: np.ndarray, device: torch.device,
) -> dict:
    """Validation loss and BLEU, drawing nothing from training's random streams."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        val_loss = evaluate_loss(model, stage.objective,
                                 loader(data.validation, batch_size=100, shuffle=False), device)
        sources, references = data.sources("validation"), data.reference_texts("validation")
        hypotheses = translate(model, [sources[i] for i in sample], data.src_vocab,
                               data.tgt_vocab, device)
        scored = bleu([data.tgt_vocab.join(words) for words in hypotheses],
                      [references[i] for i in sample], data.tgt_lang)
    return {"val_loss": val_loss, "val_bleu": scored.score, "bleu_signature": scored.signature}


def record_evaluation(progress: Progress, score: float, patience: int, step: int) -> bool:
    """Record an evaluation; True when `patience` evaluations in a row brought no better BLEU."""
    if progress.best_bleu is None or score > progress.best_bleu:
        progress.best_bleu, progress.best_step = score, step
        progress.evaluations_since_best = 0
    else:
        progress.evaluations_since_best += 1
    return patience > 0 and progress.evaluations_since_best >= patience
