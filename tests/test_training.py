"""The training loop learns, reports in plain text, and returns its history."""

import io
import math

import pytest
import torch
import tqdm
from torch import nn

import toolkit.learning.training
from toolkit.batching.batches import Batch
from toolkit.learning.training import evaluate_loss, train, warmup_then_decay
from toolkit.objectives import teacher_forcing
from toolkit.text.vocab import BOS_ID, EOS_ID


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
    assert toolkit.learning.training.tqdm is tqdm.std.tqdm
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


SHORT = Batch(torch.tensor([[4, EOS_ID]]), torch.tensor([[BOS_ID, 8, EOS_ID]]))  # 2 targets


@pytest.mark.parametrize("training", [True, False])
def test_evaluate_loss_is_per_token_and_leaves_the_mode_as_it_was(training):
    """A mean of per-batch means would weigh SHORT's 2 targets like BATCH's 4."""
    torch.manual_seed(0)
    model = Bigram().train(training)
    with torch.no_grad():
        long, short = teacher_forcing(model, BATCH), teacher_forcing(model, SHORT)
    assert (int(long.tokens), int(short.tokens)) == (4, 2)
    per_token = float((long.total + short.total) / (long.tokens + short.tokens))
    per_batch = float(long.mean() + short.mean()) / 2
    assert abs(per_token - per_batch) > 0.05  # the two averages really differ here
    assert evaluate_loss(model, teacher_forcing, [BATCH, SHORT]) == pytest.approx(per_token)
    assert model.training is training


def test_evaluate_loss_restores_the_mode_even_when_the_objective_raises():
    def failing(model, batch, generator=None, label_smoothing=0.0):
        assert not model.training  # evaluation runs in eval mode
        raise RuntimeError("out of memory")

    model = Bigram().train()
    with pytest.raises(RuntimeError, match="out of memory"):
        evaluate_loss(model, failing, [BATCH])
    assert model.training


def test_evaluate_loss_on_no_batches_says_the_split_is_empty():
    with pytest.raises(ValueError, match="no batches.*empty"):
        evaluate_loss(Bigram(), teacher_forcing, [])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_weights_are_refused_with_a_pointer_to_autocast(dtype):
    """Adam's eps (1e-9) is 0 in float16: such a run turns to NaN from its second step."""
    with pytest.raises(TypeError, match=r"autocast=torch\.bfloat16"):
        train(Bigram().to(dtype), teacher_forcing, forever(BATCH), steps=3,
              progress=io.StringIO())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_trains_in_half_precision_and_keeps_float32_weights(dtype):
    from stages import stage07_multi_head as stage07

    torch.manual_seed(0)
    model = stage07.Transformer(10, 10, embed_dim=16, num_heads=2, ff_dim=32)
    seen = set()
    model.out_proj.register_forward_hook(lambda module, args, out: seen.add(out.dtype))
    history = train(model, teacher_forcing, forever(BATCH), steps=30, lr=1e-2,
                    warmup_steps=5, autocast=dtype, progress=io.StringIO())
    assert seen == {dtype}  # every step's forward really ran in half precision
    assert len(history.losses) == 30 and all(math.isfinite(x) for x in history.losses)
    assert sum(history.losses[-5:]) / 5 < history.losses[0] / 4
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_losses_read_in_blocks_are_the_losses_of_every_step(monkeypatch):
    """Reading the loss every LOG_EVERY steps must not lose the last, incomplete block."""
    assert 73 % toolkit.learning.training.LOG_EVERY != 0

    def run() -> list[float]:
        torch.manual_seed(0)
        return train(Bigram(), teacher_forcing, forever(BATCH), steps=73, lr=0.1,
                     warmup_steps=10, progress=io.StringIO()).losses

    blocks = run()
    monkeypatch.setattr(toolkit.learning.training, "LOG_EVERY", 1)
    every_step = run()
    assert len(blocks) == 73 and all(type(loss) is float for loss in blocks)
    assert blocks == every_step
    assert len(set(blocks)) == 73  # a real curve, not one value repeated
