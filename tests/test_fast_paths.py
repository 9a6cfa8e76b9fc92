"""The fast paths (a KV-cached decoder, a fused SDPA core) change the speed, not the result."""

import pytest
import torch

from stages import stage07_multi_head as stage
from toolkit.cached_decoding import cached_greedy_decode
from toolkit.decoding import greedy_decode
from toolkit.sdpa import use_sdpa
from toolkit.vocab import BOS_ID, EOS_ID, PAD_ID

SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID],
                    [10, 11, 13, 14, EOS_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID],
                    [BOS_ID, 5, 5, 9, PAD_ID]])


def make_model(seed: int, vocab: int = 30, **flags) -> stage.Transformer:
    torch.manual_seed(seed)
    return stage.Transformer(20, vocab, embed_dim=16, num_heads=4, ff_dim=40, **flags).eval()


@pytest.mark.parametrize("flags", [{}, {"scale_embeddings": True, "tie_embeddings": True}],
                         ids=["plain", "paper-options"])
@pytest.mark.parametrize("seed", range(6))
def test_the_cached_decoder_gives_exactly_the_uncached_tokens(seed, flags):
    # a small vocabulary, so <eos> comes early sometimes
    model = make_model(seed, vocab=8, **flags)
    limits = torch.tensor([9, 4, 12])
    assert cached_greedy_decode(model, SRC, limits) == greedy_decode(model, SRC, limits)


def test_the_cached_decoder_stops_rows_at_eos():
    """Over a few random models some rows end early: the <eos> path is really exercised."""
    lengths = [len(row) for seed in range(6)
               for row in cached_greedy_decode(make_model(seed, vocab=8), SRC, max_len=30)]
    assert min(lengths) < 30 and max(lengths) <= 30


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_the_sdpa_core_gives_the_same_logits(mode):
    model = make_model(1)
    with torch.no_grad():
        expected = model.train(mode == "train")(SRC, TGT)
        fused = use_sdpa(make_model(1)).train(mode == "train")(SRC, TGT)
    real = TGT != PAD_ID
    assert (fused[real] - expected[real]).abs().max() <= 1e-5


def test_the_benchmark_baseline_decodes_the_same_tokens():
    """The nn.Transformer baseline in benchmarks/bench.py must do the same work as ours."""
    import importlib.util

    from toolkit.paths import PROJECT_ROOT

    spec = importlib.util.spec_from_file_location("bench", PROJECT_ROOT / "benchmarks" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    models = bench.build({"embed_dim": 16, "num_heads": 4, "layers": 2, "ff_dim": 40})
    src, _ = bench.batch(10)
    ours = greedy_decode(models["stage 07"], src, max_len=6)
    baseline = bench.nn_greedy_decode(models["nn.Transformer"], src, steps=6)[:, 1:].tolist()
    assert [row[: len(mine)] for row, mine in zip(baseline, ours, strict=True)] == ours


def test_the_cached_decoder_refuses_lengths_beyond_the_positional_encoding():
    model = stage.Transformer(20, 30, embed_dim=16, num_heads=4, ff_dim=40, max_seq_len=8)
    with pytest.raises(ValueError, match="max_seq_len=8"):
        cached_greedy_decode(model, SRC, max_len=9)


def test_the_id_check_leaves_one_graph_for_torch_compile_and_still_guards_eager_cpu():
    """Reading ids.min()/max() would break the graph (and wait for a GPU on every step)."""
    model = make_model(0)
    explained = torch._dynamo.explain(model)(SRC, TGT)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    with pytest.raises(ValueError, match="outside 0..19"):
        model(SRC + 20, TGT)  # eager, on the CPU: the clear message stays
