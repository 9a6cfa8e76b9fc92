"""The training loop learns, reports in plain text, and returns its history."""

import io

import pytest
import torch
import tqdm
from torch import nn

import toolkit.training
from toolkit.batches import Batch
from toolkit.objectives import teacher_forcing
from toolkit.training import evaluate_loss, train, warmup_then_decay
from toolkit.vocab import BOS_ID, EOS_ID


class Bigram(nn.Module):
    """Predicts the next token from the current one: enough to memorise one sentence."""

    accepts_batches = True

    def __init__(self, vocab_size: int = 10):
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.table(tgt)  # (batch, tgt_len, vocab)


BATCH = Batch(torch.tensor([[4, EOS_ID]]), torch.tensor([[BOS_ID, 5, 6, 7, EOS_ID]]))


def forever(batch: Batch):
    while True:
        yield batch


def test_loss_falls_and_history_has_one_entry_per_step():
    model = Bigram()
    progress = io.StringIO()
    history = train(model, teacher_forcing, forever(BATCH), steps=150, lr=0.1,
                    warmup_steps=10, progress=progress)
    assert history.steps == len(history.learning_rates) == 150
    assert history.losses[-1] < 0.05 < history.losses[0]
    assert history.seconds > 0


def test_progress_is_a_plain_text_bar_not_a_widget():
    """A notebook widget bar renders empty offline (design §4), so it must be plain tqdm."""
    assert toolkit.training.tqdm is tqdm.std.tqdm
    progress = io.StringIO()
    train(Bigram(), teacher_forcing, forever(BATCH), steps=5, progress=progress,
          description="demo")
    text = progress.getvalue()
    assert "demo" in text and "5/5" in text and "loss=" in text


def test_schedule_warms_up_linearly_to_the_peak_then_decays():
    factors = [warmup_then_decay(step, warmup_steps=10) for step in range(1, 41)]
    assert factors[9] == pytest.approx(1.0)
    assert factors[:10] == sorted(factors[:10]) and factors[4] == pytest.approx(0.5)
    assert factors[9:] == sorted(factors[9:], reverse=True)
    assert factors[39] == pytest.approx(0.5)  # 1/sqrt(40/10)


def test_the_ablation_schedules_remove_the_warm_up_alone_or_everything():
    paper = [warmup_then_decay(step, 10) for step in range(1, 41)]
    decay_only = [warmup_then_decay(step, 10, "decay_only") for step in range(1, 41)]
    assert decay_only[:10] == [1.0] * 10  # the peak from the first step
    assert decay_only[10:] == paper[10:]  # then exactly the paper's decay
    assert {warmup_then_decay(step, 10, "constant") for step in range(1, 41)} == {1.0}
    with pytest.raises(ValueError, match="not one of"):
        warmup_then_decay(1, 10, "cosine")


@pytest.mark.parametrize("schedule", ["warmup_then_decay", "decay_only", "constant"])
def test_the_optimiser_follows_the_schedule_at_every_step(schedule):
    history = train(Bigram(), teacher_forcing, forever(BATCH), steps=30, lr=1e-2,
                    warmup_steps=10, schedule=schedule, progress=io.StringIO())
    expected = [1e-2 * warmup_then_decay(step, 10, schedule) for step in range(1, 31)]
    assert history.learning_rates == pytest.approx(expected)


@pytest.mark.parametrize("training", [True, False])
def test_evaluate_loss_averages_batches_and_leaves_the_mode_as_it_was(training):
    model = Bigram().train(training)
    other = Batch(torch.tensor([[4, EOS_ID]]), torch.tensor([[BOS_ID, 8, EOS_ID]]))
    expected = (teacher_forcing(model, BATCH).item() + teacher_forcing(model, other).item()) / 2
    assert evaluate_loss(model, teacher_forcing, [BATCH, other]) == pytest.approx(expected)
    assert model.training is training
