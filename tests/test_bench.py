"""benchmarks/bench.py times what its rows are named for, on the device it says."""

import importlib.util
import json
import sys

import pytest
import torch

from toolkit.paths import PROJECT_ROOT

TINY = {"embed_dim": 16, "num_heads": 4, "layers": 2, "ff_dim": 40}


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench", PROJECT_ROOT / "benchmarks" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def training_models(bench) -> dict[str, torch.nn.Module]:
    return {**bench.build(TINY), bench.KEEPING: bench.build(TINY)["stage 07"]}


def test_every_training_row_takes_the_same_step_on_the_same_loss(bench):
    """A fair row: same weights, same loss (nn.Transformer's included), and a real update."""
    src, tgt = bench.batch(10)
    losses = {}
    for name, model in training_models(bench).items():
        before = model.out_proj.weight.detach().clone()
        losses[name] = bench.training_step(model, src, tgt, name == bench.KEEPING)().item()
        assert not torch.equal(model.out_proj.weight, before), f"{name} took no optimiser step"
    assert max(losses.values()) - min(losses.values()) <= 1e-5, losses


@pytest.mark.parametrize("keep", [True, False], ids=["keeping", "plain"])
def test_only_the_keep_attention_row_keeps_weights_in_every_attention(bench, keep):
    model = bench.build(TINY)["stage 07"]
    attentions = [m for m in model.modules() if hasattr(m, "keep_attention")]
    kept = []
    for module in attentions:
        module.register_forward_hook(lambda m, inputs, output: kept.append(m.attention is not None))
    bench.training_step(model, *bench.batch(10), keep_attention=keep)()
    assert len(kept) == len(attentions) == 6 and set(kept) == {keep}


@pytest.mark.parametrize("row", ["encode_once_greedy_decode", "cached_greedy_decode"])
def test_a_decoding_row_that_writes_other_tokens_is_refused_before_timing(bench, monkeypatch,
                                                                          row):
    src, _ = bench.batch(10)
    names = list(bench.decoding_tasks(bench.build(TINY), src))  # all agree: no error
    assert bench.ENCODE_ONCE in names and "stage 07 + KV cache" in names
    honest = getattr(bench, row)
    monkeypatch.setattr(bench, row, lambda *args: [t[::-1] for t in honest(*args)])
    with pytest.raises(RuntimeError, match="does not decode the same tokens"):
        bench.decoding_tasks(bench.build(TINY), src)


def test_the_clock_is_read_only_after_the_gpu_has_finished(bench, monkeypatch):
    """CUDA kernels run asynchronously: without a synchronise the time is the launch time."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 2**20)
    seconds, peak_mb = bench.timed(lambda: events.append("work"), torch.device("cuda"))
    assert events == ["sync", "work", "sync"] and seconds >= 0 and peak_mb == 1.0


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_only_a_full_run_writes_the_results(bench, monkeypatch, tmp_path, quick):
    """A smoke test must not overwrite the committed results that notebook 08 shows."""
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(bench, "run", lambda rounds, warmup, device: [])
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # not this process's
    monkeypatch.setattr(sys, "argv", ["bench.py", "--device", "cpu"] + ["--quick"] * quick)
    bench.main()
    written = tmp_path / "results.json"
    assert written.exists() != quick
    if not quick:
        assert json.loads(written.read_text())["device"] == "cpu"
