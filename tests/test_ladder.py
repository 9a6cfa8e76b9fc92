"""The committed ladder must describe the code and corpus that are here now."""

import dataclasses

import toolkit.ladder as ladder
from toolkit import ablation
from toolkit.recipes import BATCH_SIZE, RECIPES, STEPS


def test_every_stage_with_a_recipe_has_a_committed_rung():
    assert sorted(ladder.load_ladder()) == sorted(RECIPES)


def test_the_committed_ladder_is_not_stale():
    """Edit a stage module or the corpus, and this fails until `make ladder` is rerun."""
    stale = ladder.stale_stages(ladder.load_ladder())
    assert stale == [], f"stages {stale} changed since the ladder was computed: run make ladder"


def test_every_rung_used_the_shared_budget():
    for rung in ladder.load_ladder().values():
        assert (rung.steps, rung.batch_size) == (STEPS, BATCH_SIZE)
        assert rung.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_a_changed_stage_module_is_reported_stale(monkeypatch):
    committed = ladder.load_ladder()
    monkeypatch.setattr(ladder, "stage_hash", lambda number: "edited" if number == 2 else
                        committed[number].stage_sha256)
    assert ladder.stale_stages(committed) == [2]


def test_the_table_puts_a_live_run_beside_its_committed_rung():
    committed = ladder.load_ladder()
    live = dataclasses.replace(committed[1], exact_match=99.0)
    frame = ladder.table(committed, live)
    assert frame.loc[("01 Naive attention", "this run"), "exact match %"] == 99.0
    assert ("01 Naive attention", "committed") in frame.index


def test_the_readme_table_is_the_committed_ladder():
    """The README's numbers come from ladder.json; `make ladder` rewrites both."""
    written = ladder.readme_section(ladder.TABLE_START, ladder.TABLE_END)
    assert written == ladder.markdown_table(ladder.load_ladder()), "run make ladder"


def test_the_chart_exists_for_the_readme_and_the_site():
    assert ladder.CHART_PATH.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readme_ablation_table_is_the_committed_ablation():
    written = ladder.readme_section(ablation.TABLE_START, ablation.TABLE_END)
    assert written == ablation.markdown_table(ablation.load_ablation()), "run make ablation"


def test_the_ablation_covers_every_variant_on_one_budget_and_is_not_stale():
    rows = ablation.load_ablation()
    assert list(rows) == list(ablation.VARIANTS)
    assert {(r.steps, r.batch_size) for r in rows.values()} == {
        (ablation.PAPER.steps, ablation.PAPER.batch_size)}
    assert [name for name, r in rows.items() if ladder.is_stale(r)] == [], "run make ablation"
