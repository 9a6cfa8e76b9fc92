"""The README's bench tables are written from the committed benchmarks/results.json by
`make bench`, never typed: each must be what its part's `markdown_table` writes from the file,
every figure read from it."""

import copy
import json

import pytest

from course_tools import ladder
from toolkit.paths import PROJECT_ROOT

RESULTS = json.loads((PROJECT_ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))


def test_the_committed_results_hold_every_part_the_readme_shows(bench):
    assert [start for start, _, _ in bench.readme_tables(RESULTS)] == [
        bench.real_text.TABLE_START, bench.beam.TABLE_START, bench.training.TABLE_START]


@pytest.mark.parametrize("part", ["real_text", "beam", "training"])
def test_the_readme_table_is_the_committed_result(bench, part):
    module = getattr(bench, part)
    written = ladder.readme_section(module.TABLE_START, module.TABLE_END)
    assert written == module.markdown_table(RESULTS[part]), "run make bench"


def test_writing_the_tables_replaces_only_what_lies_between_the_markers(bench, tmp_path):
    readme = tmp_path / "README.md"
    parts = [(m.TABLE_START, m.TABLE_END) for m in (bench.real_text, bench.beam, bench.training)]
    readme.write_text("before\n" + "".join(f"{start}\nstale | 1.0\n{end}\nbetween\n"
                                          for start, end in parts), encoding="utf-8")
    bench.write_readme_tables(RESULTS, readme)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("before\n") and text.count("between\n") == 3 and "stale" not in text
    for start, end, table in bench.readme_tables(RESULTS):
        assert ladder.readme_section(start, end, readme) == table


def test_a_changed_figure_changes_the_table(bench):
    """Nothing in a table is typed: move a figure in the file and the table follows."""
    changed = copy.deepcopy(RESULTS)
    changed["training"]["paths"]["fast path, bf16"]["target_tokens_per_s"] = 12345.6
    changed["training"]["met"] = False
    table = bench.training.markdown_table(changed["training"])
    assert "| 12,346 |" in table and "**not met**" in table
    changed["beam"]["timing"].update(time_ratio=1.234, meets=True)
    table = bench.beam.markdown_table(changed["beam"])
    assert "1.23× greedy's time" in table and "**not met**" not in table
    changed["real_text"]["figures"]["token_budget_padding"] = 0.123
    changed["real_text"]["meets"]["token_budget_padding"] = False
    assert "12.3 % (random batches" in bench.real_text.markdown_table(changed["real_text"])
    assert "**missed**" in bench.real_text.markdown_table(changed["real_text"])


def test_the_beam_table_pairs_each_decoder_with_greedy_seed_by_seed(bench):
    """The course's one rule: per-seed differences, and how many seeds agree in sign."""
    beam = RESULTS["beam"]
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")
            for line in bench.beam.markdown_table(beam).splitlines()[2:] if line.startswith("|")}
    for name in bench.beam.DECODERS:
        if name == "greedy":
            continue
        differences = [run["decoders"][name]["exact_match"]
                       - run["decoders"]["greedy"]["exact_match"] for run in beam["runs"]]
        assert rows[name][4] == ", ".join(f"{d:+.2f}" for d in differences)
        agreeing = max(sum(d > 0.005 for d in differences), sum(d < -0.005 for d in differences))
        assert rows[name][5].rstrip(" |") == f"{agreeing} of {len(differences)}"
