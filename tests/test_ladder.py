"""The committed ladder must describe the code and corpus that are here now."""

import dataclasses

import torch

import course_tools.ladder as ladder
from course_tools import ablation, jobs, staleness
from toolkit.learning.recipes import BATCH_SIZE, RECIPES, SEEDS, STEPS


def test_every_stage_with_a_recipe_has_a_committed_rung_on_every_seed():
    assert sorted(ladder.load_ladder()) == sorted(RECIPES)
    runs = ladder.load_runs()
    assert sorted((r.stage, r.seed) for r in runs) == sorted(
        (number, seed) for number in RECIPES for seed in SEEDS)


def test_seeds_give_different_runs_so_the_spread_measures_something():
    """A seed that changed nothing (say, ignored by the data order and the init) shows as 0."""
    for number in RECIPES:
        losses = {r.train_loss for r in ladder.load_runs() if r.stage == number}
        assert len(losses) == len(SEEDS), f"stage {number:02d}: seeds gave identical runs"


def test_the_committed_ladder_is_not_stale():
    """Change what the code a rung's job imports does, its recipe, the corpus or a library,
    and this fails until `make ladder-check` proves the numbers the same (or `make ladder`
    recomputes them)."""
    stale = {r.stage: staleness.why_stale(r) for r in ladder.load_runs() if staleness.is_stale(r)}
    assert stale == {}, f"changed since the ladder was computed: {stale}: run make ladder-check"


def test_every_rung_used_the_shared_budget():
    for rung in ladder.load_runs():
        assert (rung.steps, rung.batch_size) == (STEPS, BATCH_SIZE)
        assert rung.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_the_whole_stream_row_trains_on_its_own_objective(monkeypatch):
    """Each seed of each decoder-only row reaches `climb` with its data and its objective."""
    seen = []
    monkeypatch.setattr(jobs, "climb", lambda *args: seen.append(args))
    monkeypatch.setattr(jobs, "load_data", lambda **options: options)
    for job in ablation.jobs([ablation.DECODER_ONLY, ablation.DECODER_ONLY_WHOLE]):
        jobs._climb_on_one_thread(job)
    assert [(args[0], args[1], args[5], args[6], args[3].seed) for args in seen] == [
        (8, {"shared_vocab": True}, {"shared_vocab": True}, objective, seed)
        for objective in (None, "whole_stream") for seed in (0, 1, 2)]


def test_the_table_puts_a_live_run_beside_its_committed_rung_and_the_spread():
    runs = ladder.load_runs()
    live = dataclasses.replace(ladder.load_ladder()[1], exact_match=99.0)
    frame = ladder.table(runs, live, up_to=2)
    assert frame.loc[("01 Naive attention", "this run"), "exact match %"] == 99.0
    assert ("01 Naive attention", f"committed, seed {SEEDS[0]}") in frame.index
    assert {stage for stage, _ in frame.index} == {"01 Naive attention", "02 Batching"}
    scores = [r.exact_match for r in runs if r.stage == 1]
    mean = sum(scores) / len(scores)
    cell = frame.loc[("01 Naive attention", f"committed, mean ± sd of {len(SEEDS)} seeds"),
                     "exact match %"]
    assert cell.startswith(f"{mean:.2f} ± ")
    losses = [r.train_loss for r in runs if r.stage == 1]
    loss = frame.loc[("01 Naive attention", f"committed, mean ± sd of {len(SEEDS)} seeds"),
                     "train loss"]
    assert loss.startswith(f"{sum(losses) / len(losses):.4f} ± "), "not seed 0's loss"


def test_the_spread_is_the_sample_standard_deviation_over_seeds():
    runs = [dataclasses.replace(ladder.load_ladder()[1], exact_match=value, seed=seed)
            for seed, value in enumerate([1.0, 2.0, 6.0])]
    summary = ladder.spread(runs)
    title = runs[0].title
    assert summary.loc[title, ("exact match %", "mean")] == 3.0
    assert summary.loc[title, ("exact match %", "std")] == 2.65  # sqrt(7), n - 1 in the divisor
    assert ladder.mean_sd(summary, title, "exact match %") == "3.0 ± 2.6"


def test_a_run_on_another_numeric_platform_is_said_to_be_one():
    committed = dataclasses.replace(ladder.load_ladder()[3], platform="a CPU that rounds so")
    live = dataclasses.replace(committed, train_loss=committed.train_loss + 1e-4,
                               platform="a CPU that rounds otherwise")
    verdict = staleness.reproduces(live, committed)
    assert "differs" in verdict and "another numeric platform" in verdict
    assert "a CPU that rounds so" in verdict and "train_loss" in verdict
    same = dataclasses.replace(live, train_loss=committed.train_loss)
    assert "another numeric platform" not in staleness.reproduces(same, committed)


def test_a_notebook_run_is_said_to_reproduce_its_rung_only_when_every_score_is_equal():
    committed = ladder.load_ladder()[3]
    assert "reproduces" in staleness.reproduces(committed, committed)
    other = dataclasses.replace(committed, train_loss=committed.train_loss + 1e-4)
    assert "differs" in staleness.reproduces(other, committed)
    assert "train_loss" in staleness.reproduces(other, committed)


def test_the_readme_table_is_the_committed_ladder():
    """The README's numbers come from ladder.json; `make ladder` rewrites both."""
    written = ladder.readme_section(ladder.TABLE_START, ladder.TABLE_END)
    assert written == ladder.markdown_table(ladder.load_runs()), "run make ladder"


def test_the_chart_exists_for_the_readme_and_the_site():
    assert ladder.CHART_PATH.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readme_ablation_table_is_the_committed_ablation():
    written = ladder.readme_section(ablation.TABLE_START, ablation.TABLE_END)
    assert written == ablation.markdown_table(ablation.load_ablation()), "run make ablation"


def test_the_readme_decoder_only_table_is_the_committed_runs():
    """Stage 07 from ladder.json, stage 08 from ablation.json: `make ablation` and `make
    ladder` rewrite it."""
    written = ladder.readme_section(ablation.DECODER_ONLY_START, ablation.DECODER_ONLY_END)
    assert written == ablation.decoder_only_table(ablation.load_ablation(),
                                                  ladder.load_runs()), "run make ablation"


def test_the_decoder_only_table_pairs_each_stage_08_row_with_stage_07_seed_by_seed():
    rows, runs = ablation.load_ablation(), ladder.load_runs()
    table = ablation.decoder_only_table(rows, runs).splitlines()
    for name in (ablation.DECODER_ONLY, ablation.DECODER_ONLY_WHOLE):
        pairs = ladder.paired_runs("test", [r for r in runs if r.stage == 7], rows[name],
                                   "exact match %")
        assert any(f"| {ladder.per_seed(pairs)} | {ladder.agreement(pairs)} |" in line
                   for line in table), name
    objectives = ladder.paired_runs("test", rows[ablation.DECODER_ONLY],
                                    rows[ablation.DECODER_ONLY_WHOLE], "exact match %")
    assert ladder.per_seed(objectives) in table[-1]  # the line the prose cites


def test_the_ablation_covers_every_variant_and_seed_on_one_budget_and_is_not_stale():
    rows = ablation.load_ablation()
    assert list(rows) == ablation.every_row()
    assert all(sorted(r.seed for r in runs) == list(SEEDS) for runs in rows.values())
    assert {(r.steps, r.batch_size) for name in ablation.VARIANTS for r in rows[name]} == {
        (ablation.PAPER.steps, ablation.PAPER.batch_size)}
    assert {(r.steps, r.batch_size) for name in [*ablation.LADDER_VARIANTS,
                                                 *ablation.DATA_VARIANTS,
                                                 *ablation.APPENDIX_VARIANTS]
            for r in rows[name]} == {(STEPS, BATCH_SIZE)}
    # Stage 08 at stage 07's size: within 1 % of the ladder's rung.
    ladder_size = ladder.load_ladder()[7].parameters
    assert all(abs(r.parameters / ladder_size - 1) < 0.01
               for name in ablation.APPENDIX_VARIANTS for r in rows[name])
    assert {r.data["tokenizer"] for r in rows[ablation.SUBWORDS]} == {"bpe"}
    stale = {name: staleness.why_stale(r) for name, runs in rows.items() for r in runs
             if staleness.is_stale(r)}
    assert stale == {}, f"changed since computed: {stale}: run make ladder-check"


def test_the_ablation_knobs_change_the_model_they_say():
    """The embedding std and the attention scale must reach the built model, or rows lie."""
    from toolkit.batching.data import load_data
    data = load_data()
    paper = jobs.build(7, data, ablation.PAPER)
    small = jobs.build(7, data, ablation.VARIANTS[
        "without the sqrt(d) scale (init std d^-0.5 kept, tied)"])
    wide = jobs.build(7, data, ablation.VARIANTS["sqrt(d) scale with init std 1 (tied)"])
    assert small.embed_scale == 1.0 and paper.embed_scale == 8.0
    assert 0.1 < small.src_embed.weight.std() < 0.15 and 0.9 < wide.tgt_embed.weight.std() < 1.1
    assert wide.out_proj.weight is wide.tgt_embed.weight  # still tied after the re-init
    unscaled = jobs.build(7, data, ablation.LADDER_VARIANTS[ablation.UNSCALED])
    assert {layer.self_attn.scale for layer in unscaled.encoder_layers} == {1.0}
    assert {layer.cross_attn.scale for layer in unscaled.decoder_layers} == {1.0}
    scaled = jobs.build(7, data, RECIPES[7])  # same seed, so the same weights
    src, tgt = (torch.tensor([ids]) for ids in data.train[0])
    with torch.no_grad():
        assert not torch.allclose(scaled(src, tgt), unscaled(src, tgt))


def test_a_run_is_compared_bit_for_bit_with_the_witness_of_its_platform():
    """The committed row keeps rounded figures from another machine; this machine's witness
    keeps them unrounded, with the sha256s of the losses and the weights: those decide."""
    exact = {"train_loss": 0.5, "weights_sha256": "a" * 64}
    HERE, ELSEWHERE = (f"torch {torch.__version__}, {cpu}" for cpu in ("AVX2, 0ab", "AVX512, 1cd"))
    committed = dataclasses.replace(ladder.load_ladder()[3], platform=ELSEWHERE, exact={},
                                    witnesses={HERE: {**ladder.numbers(ladder.load_ladder()[3]),
                                                        "exact": exact}})
    live = dataclasses.replace(committed, platform=HERE, exact=exact, witnesses={})
    assert "reproduces" in staleness.reproduces(live, committed)
    assert "bit for bit" in staleness.reproduces(live, committed)
    assert "changed" not in staleness.reproduces(live, committed)
    other = dataclasses.replace(live, exact={**exact, "weights_sha256": "b" * 64})
    assert "weights_sha256 (unrounded)" in staleness.reproduces(other, committed)
