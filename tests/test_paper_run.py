"""The paper recipe's run is trained once and kept; what is read back must be what training
afresh gives, and any change to what decides the run must train it again."""

import dataclasses
import io

import pytest
import torch

from course_tools import jobs, paper_run, staleness
from toolkit.learning.recipes import PAPER
from toolkit.search.decoding import translate

# The paper's recipe on a budget a test can afford: three checkpoints (20, 70 and 120).
SHORT = dataclasses.replace(PAPER, steps=120, batch_size=8)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    runs = tmp_path_factory.mktemp("paper-run")
    return runs, paper_run.paper_run(0, recipe=SHORT, runs=runs)


def same_weights(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(torch.equal(a[name], b[name]) for name in a)


def test_a_kept_run_is_bit_for_bit_a_fresh_run(kept):
    runs, first = kept
    again = paper_run.paper_run(0, recipe=SHORT, runs=runs)
    fresh = paper_run.paper_run(0, recipe=SHORT, runs=runs, fresh=True)
    assert first.loaded_from is None and again.loaded_from is not None
    assert fresh.loaded_from is None
    for run in (again, fresh):
        assert same_weights(run.model.state_dict(), first.model.state_dict())
        assert run.history.losses == first.history.losses
        assert sorted(run.checkpoints) == sorted(first.checkpoints) == [20, 70, 120]
        assert all(same_weights(run.checkpoints[s], first.checkpoints[s]) for s in (20, 70, 120))
    sentences = first.data.sources("test")[:20]
    translations = [translate(
        run.model, sentences, run.data.src_vocab, run.data.tgt_vocab) for run in (first, again)]
    assert translations[0] == translations[1]


def test_the_file_holds_the_last_checkpoint_once_as_the_final_weights(kept):
    _, run = kept
    assert sorted(torch.load(run.file, weights_only=True)["checkpoints"]) == [20, 70]


def test_a_recorded_run_is_read_back_and_other_codes_copies_go(kept, tmp_path):
    """What `make kept-runs` commits is read back on a fresh clone, where build/ is empty."""
    _, first = kept
    recorded = tmp_path / "kept-runs"
    recorded.mkdir()
    (recorded / "seed0-0123456789abcdef0123.pt").write_bytes(b"a run of code since changed")
    copies = paper_run.record([first], recorded)
    assert sorted(recorded.iterdir()) == copies == [recorded / first.file.name]
    again = paper_run.paper_run(0, recipe=SHORT, runs=tmp_path / "build", recorded=recorded)
    assert again.loaded_from == copies[0]
    assert same_weights(again.model.state_dict(), first.model.state_dict())
    assert again.history.losses == first.history.losses
    assert all(same_weights(again.checkpoints[s], first.checkpoints[s]) for s in (20, 70, 120))
    fresh = paper_run.paper_run(0, recipe=SHORT, runs=tmp_path / "build", recorded=recorded,
                                fresh=True)
    assert fresh.loaded_from is None and fresh.file.parent == tmp_path / "build"


def test_it_is_the_run_make_ablation_trains(kept):
    """The same model, batches and steps as jobs.climb, so notebook 10 reproduces the
    ablation's full row with it."""
    _, run = kept
    data = run.data
    model = jobs.build(7, data, SHORT)
    history = jobs.train(model, jobs.stage_module(7).objective,
                           jobs.endless(jobs.loader(data.train, SHORT.batch_size,
                                                        seed=SHORT.seed)),
                           progress=io.StringIO(), **SHORT.training())
    assert history.losses == run.history.losses
    assert same_weights(model.state_dict(), run.model.state_dict())


def test_the_checkpoints_are_the_weights_after_their_steps(kept):
    _, run = kept
    assert same_weights(run.checkpoints[120], run.model.state_dict())
    assert not same_weights(run.checkpoints[70], run.checkpoints[120])
    averaged = run.averaged().state_dict()
    name = "encoder_layers.0.self_attn.q_proj.weight"
    mean = sum(run.checkpoints[s][name].double() for s in (20, 70, 120)) / 3
    assert torch.equal(averaged[name], mean.float())
    newest_two = run.averaged(last=2).state_dict()[name]
    assert torch.equal(newest_two, ((run.checkpoints[70][name].double()
                                     + run.checkpoints[120][name].double()) / 2).float())
    with pytest.raises(ValueError, match="kept 3 checkpoints"):
        run.averaged(last=4)


def test_a_change_to_what_decides_the_run_trains_it_again(kept, monkeypatch):
    runs, _ = kept
    key = paper_run.key(SHORT, "cpu")
    assert paper_run.key(dataclasses.replace(SHORT, lr=1e-3), "cpu") != key
    assert paper_run.key(dataclasses.replace(SHORT, seed=1), "cpu") != key
    assert paper_run.key(SHORT, "cpu", averaged=0) != key  # checkpoints kept are in the file
    with monkeypatch.context() as other_cpu:  # a run committed from a CPU that rounds otherwise
        other_cpu.setattr(paper_run, "numeric_platform",
                          lambda device="cpu": "torch 2.13.0+cpu, AVX2, 0ab")
        assert paper_run.key(SHORT, "cpu") != key
    asked = []
    with monkeypatch.context() as gpu:  # a GPU's rounding is in the key too
        gpu.setattr(paper_run, "numeric_platform", lambda device: asked.append(device) or "")
        paper_run.key(SHORT, "cuda")
    assert [str(device) for device in asked] == ["cuda"]
    monkeypatch.setattr(staleness, "corpus_hash", lambda: "edited")
    assert paper_run.key(SHORT, "cpu") != key
    trained = []
    monkeypatch.setattr(paper_run, "train", lambda *a, **k: trained.append(1) or
                        jobs.train(*a, **k))
    paper_run.paper_run(0, recipe=SHORT, runs=runs)
    assert trained == [1]


def test_a_kept_run_on_other_vocabularies_is_trained_again(kept, monkeypatch):
    """Another `tokenizers` may build another vocabulary of the same size, into which the
    kept weights would load without a word: the file keeps its vocabularies and is checked."""
    runs, first = kept
    kept_file = torch.load(first.file, weights_only=True)
    tokens = kept_file["vocabularies"]["tgt"]["tokens"]
    kept_file["vocabularies"]["tgt"]["tokens"] = [*tokens[:4], tokens[5], tokens[4], *tokens[6:]]
    torch.save(kept_file, first.file)
    trained = []
    monkeypatch.setattr(paper_run, "train", lambda *a, **k: trained.append(1) or
                        jobs.train(*a, **k))
    again = paper_run.paper_run(0, recipe=SHORT, runs=runs)
    assert trained == [1] and again.loaded_from is None
    assert torch.load(again.file, weights_only=True)["vocabularies"]["tgt"]["tokens"] == tokens


def test_an_unknown_run_is_refused_with_the_names_of_those_kept():
    with pytest.raises(SystemExit, match="no kept run named seed1: name any of paper, "
                                         "subwords, decoder-only"):
        paper_run.main(["paper", "seed1"])  # before this command took names, it took seeds
    with pytest.raises(SystemExit, match="give --record alone to record all of them"):
        paper_run.main(["--record", "paper"])  # recording one would delete the others
