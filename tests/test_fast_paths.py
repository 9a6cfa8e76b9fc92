"""The fast paths (a KV-cached decoder, a fused SDPA core) change the speed, not the result."""

import pytest
import torch

from stages import stage07_multi_head as stage
from toolkit.search.cached_decoding import cached_greedy_decode
from toolkit.search.decoding import greedy_decode
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID
from toolkit.variants.sdpa import use_sdpa

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


@pytest.mark.parametrize(("mode", "dropout"), [("eval", 0.0), ("train", 0.0), ("eval", 0.1)])
def test_the_sdpa_core_gives_the_same_logits(mode, dropout):
    """Train mode compares only without dropout (two cores draw different masks)."""
    model = make_model(1, dropout=dropout)
    with torch.no_grad():
        expected = model.train(mode == "train")(SRC, TGT)
        fused = use_sdpa(make_model(1, dropout=dropout)).train(mode == "train")(SRC, TGT)
    real = TGT != PAD_ID
    assert (fused[real] - expected[real]).abs().max() <= 1e-5


@pytest.mark.parametrize("training", [True, False])
def test_the_sdpa_core_is_told_causal_self_attention_by_flag_and_the_rest_by_mask(
        training, monkeypatch):
    """A mask rules out the fused flash kernels on a GPU: causal attention needs none."""
    import torch.nn.functional as F

    model = use_sdpa(make_model(1, dropout=0.1)).train(training)
    calls, current = [], []
    for name, module in model.named_modules():
        if hasattr(module, "attend"):
            module.register_forward_pre_hook(lambda module, args, name=name: current.append(name))
    fused = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        calls.append((current[-1], q.size(2), attn_mask, is_causal, dropout_p))
        return fused(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                     **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        model(SRC, TGT)
    assert [name for name, *_ in calls] == current and len(calls) == 6
    for name, q_len, attn_mask, is_causal, dropout_p in calls:
        if name.startswith("decoder") and name.endswith("self_attn"):
            assert is_causal and attn_mask is None, name
        else:  # SDPA's mask is True where allowed: at every real key of SRC
            assert not is_causal and attn_mask is not None, name
            allowed = (SRC != PAD_ID)[:, None, None, :].expand(3, 4, q_len, SRC.size(1))
            assert torch.equal(attn_mask.expand_as(allowed), allowed), name
            assert attn_mask.numel() == SRC.numel(), name  # broadcast, never full size
        assert dropout_p == (0.1 if training else 0.0), name


def learned_positions_model(seed: int) -> stage.Transformer:
    from toolkit.variants.positions import LearnedPositions

    model = make_model(seed, vocab=8)
    model.positions = LearnedPositions(16, max_seq_len=16)  # notebook 04's aside
    return model


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("variant", ["learned-positions", "sdpa"])
def test_the_cached_decoder_decodes_any_stage07_model_as_the_uncached_one(variant, seed):
    if variant == "sdpa":
        model = use_sdpa(make_model(seed, vocab=8))
    else:  # the old cache read model.positions.encoding: AttributeError here
        model = learned_positions_model(seed)
    limits = torch.tensor([9, 4, 12])
    assert cached_greedy_decode(model, SRC, limits) == greedy_decode(model, SRC, limits)


def test_the_kv_cache_is_allocated_once_and_written_in_place():
    """Growing the cache with torch.cat copies every earlier step again: quadratic work."""
    from toolkit.search.cached_decoding import DecoderCache

    model, limit = make_model(2), 7
    src_padding = SRC == PAD_ID  # (batch, src_len)
    cache = DecoderCache(len(model.decoder_layers), limit)
    tokens = torch.full((3, 1), BOS_ID)  # (batch, 1)
    buffers = None
    with torch.no_grad():
        memory = model.encode(SRC, src_padding)  # (batch, src_len, embed_dim)
        for step in range(limit):
            cached = model.decode(tokens[:, -1:], memory, src_padding, cache)[:, -1]
            full = model.decode(tokens, memory, src_padding)[:, -1]  # (batch, vocab)
            assert torch.allclose(cached, full, atol=1e-5), step
            selfs = [self_cache for self_cache, _ in cache.layers]
            pointers = [(c.keys.data_ptr(), c.values.data_ptr()) for c in selfs]
            assert buffers is None or pointers == buffers, step  # the same storage every step
            buffers = pointers
            assert all(c.keys.shape == (3, 4, limit, 4) and c.length == step + 1 for c in selfs)
            tokens = torch.cat([tokens, cached.argmax(dim=-1, keepdim=True)], dim=1)


def test_cached_decoding_concatenates_nothing_but_the_tokens(monkeypatch):
    model, concatenations, steps = make_model(3), [], []
    cat, decode = torch.cat, model.decode
    monkeypatch.setattr(torch, "cat", lambda *a, **k: concatenations.append(1) or cat(*a, **k))
    monkeypatch.setattr(model, "decode", lambda *a, **k: steps.append(1) or decode(*a, **k))
    cached_greedy_decode(model, SRC, max_len=12)
    assert len(steps) > 1 and len(concatenations) == len(steps)  # greedy_loop's, one a step


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


def never_ending(model: torch.nn.Module) -> torch.nn.Module:
    """The same model, kept from saying <eos>, so decoding runs to its limit."""
    with torch.no_grad():
        model.out_proj.bias[EOS_ID] = -1e4
    return model


def test_the_cached_decoder_refuses_lengths_beyond_the_positional_encoding():
    """Checked as decoding reaches each position, as the uncached decoder does, so a
    translation that ends in time is never refused for a limit it did not reach."""
    model = never_ending(stage.Transformer(20, 30, embed_dim=16, num_heads=4, ff_dim=40,
                                           max_seq_len=8))
    with pytest.raises(ValueError, match="9 tokens is longer than max_seq_len=8"):
        cached_greedy_decode(model, SRC, max_len=9)
    cached_greedy_decode(model, SRC, max_len=8)  # the last position that exists is fine
    learned = never_ending(learned_positions_model(0))
    with pytest.raises(ValueError, match="17 tokens is longer than max_seq_len=16"):
        cached_greedy_decode(learned, SRC, max_len=17)


def test_the_id_check_leaves_one_graph_for_torch_compile_and_still_guards_eager_cpu():
    """Reading ids.min()/max() would break the graph (and wait for a GPU on every step)."""
    model = make_model(0)
    explained = torch._dynamo.explain(model)(SRC, TGT)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    with pytest.raises(ValueError, match="outside 0..19"):
        model(SRC + 20, TGT)  # eager, on the CPU: the clear message stays
