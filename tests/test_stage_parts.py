"""Two rungs taken apart (notebooks 03 and 06): a row built without one idea must lack exactly
that idea, keep every other weight the seed gave the whole stage, and pair seed by seed."""

import copy
from dataclasses import replace

import pytest
import torch

from course_tools import ablation, jobs, ladder
from toolkit import objectives
from toolkit.batching.data import load_data
from toolkit.learning import stream_objectives
from toolkit.learning.recipes import RECIPES, SEEDS


@pytest.fixture(scope="module")
def data():
    return load_data()


def sample(data) -> tuple[torch.Tensor, torch.Tensor]:
    src, tgt = (torch.tensor([ids]) for ids in data.train[0])
    return src, tgt  # (1, src_len), (1, tgt_len)


def test_without_the_feed_forward_equals_a_feed_forward_that_outputs_zero(data):
    whole = jobs.build(6, data, RECIPES[6])
    without = jobs.build(6, data, ablation.STAGE_PARTS[ablation.NO_FEED_FORWARD][1])
    silenced = copy.deepcopy(whole)
    for layer in [*silenced.encoder_layers, *silenced.decoder_layers]:
        torch.nn.init.zeros_(layer.feed_forward.linear2.weight)
        torch.nn.init.zeros_(layer.feed_forward.linear2.bias)
    with torch.no_grad():
        torch.testing.assert_close(without(*sample(data)), silenced(*sample(data)))
        assert not torch.allclose(without(*sample(data)), whole(*sample(data)))


def test_without_layer_norm_each_layer_adds_its_sublayers_to_the_stream(data):
    without = jobs.build(6, data, ablation.STAGE_PARTS[ablation.NO_LAYER_NORM][1])
    assert not [m for m in without.modules() if isinstance(m, torch.nn.LayerNorm)]
    layer, x = without.encoder_layers[0].eval(), torch.randn(2, 5, 64)  # (batch, len, embed)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    with torch.no_grad():
        h = x + layer.self_attn(x, x, key_padding_mask=padding)
        torch.testing.assert_close(layer(x, padding), h + layer.feed_forward(h))


def test_a_model_built_without_a_part_keeps_every_other_weight_of_its_seed(data):
    whole = jobs.build(6, data, RECIPES[6]).state_dict()
    for name in (ablation.NO_FEED_FORWARD, ablation.NO_LAYER_NORM):
        kept = jobs.build(6, data, ablation.STAGE_PARTS[name][1]).state_dict()
        assert set(kept) < set(whole), name
        for key, tensor in kept.items():
            assert torch.equal(tensor, whole[key]), (name, key)


def test_a_part_a_stage_lacks_or_a_part_nobody_knows_is_refused(data):
    with pytest.raises(ValueError, match="has no feed_forward"):
        jobs.build(5, data, replace(RECIPES[5], without=("feed_forward",)))
    with pytest.raises(ValueError, match="name feed_forward or layer_norm"):
        jobs.build(6, data, replace(RECIPES[6], without=("attention",)))


def test_an_objective_is_found_by_name_in_either_module():
    assert jobs.objective_named("last_position") is objectives.last_position
    assert jobs.objective_named("whole_stream") is stream_objectives.whole_stream
    with pytest.raises(ValueError, match="no objective is named 'every_position'"):
        jobs.objective_named("every_position")


def test_the_masks_alone_row_trains_stage_03_on_stage_02s_loss():
    jobs_run = ablation.jobs([ablation.LAST_POSITION])
    assert [job[1].seed for job in jobs_run] == list(SEEDS)
    assert {(job[0], job[4]) for job in jobs_run} == {(3, "last_position")}
    assert [job[1] for job in jobs_run] == [replace(RECIPES[3], seed=s) for s in SEEDS]


def fake_runs(stage: int, title: str, exact_matches: list[float]) -> list[jobs.Rung]:
    template = ladder.load_ladder()[stage]
    return [replace(template, title=title, seed=seed, exact_match=value)
            for seed, value in zip(SEEDS, exact_matches, strict=True)]


def test_the_parts_table_pairs_each_step_seed_by_seed_not_by_position():
    below = fake_runs(5, "stacking", [10.0, 20.0, 30.0])
    whole = fake_runs(6, "ffn + ln", [40.0, 70.0, 35.0])
    rows = {ablation.NO_FEED_FORWARD: fake_runs(6, ablation.NO_FEED_FORWARD, [11.0, 25.0, 30.0]),
            ablation.NO_LAYER_NORM: fake_runs(6, ablation.NO_LAYER_NORM, [30.0, 20.0, 31.0])}
    shuffled = {name: runs[::-1] for name, runs in rows.items()}
    frame = ablation.parts_of(6, shuffled, [*below[::-1], *whole])
    assert list(frame.index) == ["stage 05 (the ladder's)", ablation.NO_FEED_FORWARD,
                                 ablation.NO_LAYER_NORM, "stage 06 (the ladder's)"]
    up = frame["exact match vs stage 05 (the ladder's), per seed"]
    assert up[ablation.NO_FEED_FORWARD].startswith("+1.0, +5.0, +0.0")
    rest = frame["stage 06 (the ladder's) vs this, per seed"]
    assert rest[ablation.NO_LAYER_NORM].startswith("+10.0, +50.0, +4.0")
    steps = ablation.part_steps(6, shuffled, [*below, *whole])
    assert [pairs.differences for pairs in steps[:2]] == [(1.0, 5.0, 0.0), (29.0, 45.0, 5.0)]
    assert steps[-1].differences == (19.0, -5.0, 1.0)  # without LayerNorm minus without FFN
    assert steps[-1].label.endswith(f"{ablation.NO_LAYER_NORM} minus {ablation.NO_FEED_FORWARD}")
