"""The long-run path, tested on CPU where its faults would show on a GPU or across processes:
the logic, with stand-ins for the device and the process group, not a GPU's timing."""

import pytest
import torch

from toolkit.learning.checkpoints import CheckpointError
from toolkit.train import world
from toolkit.train.run_state import random_streams, restore_random_streams
from toolkit.train.world import World


def test_one_process_reads_its_own_flag_and_builds_no_flag_tensor(monkeypatch):
    built = []
    original = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, **k: built.append(a) or original(*a, **k))
    totals, asked = World().step_totals(torch.tensor(6.0), torch.tensor(3), True)
    assert asked is True and totals.tolist() == [6.0, 3.0]
    assert len(built) == 2  # the two made above; none by step_totals


def test_several_processes_stop_together_when_any_is_asked(monkeypatch):
    """A stand-in for a world of two: the other process adds the same loss and count, and
    was asked to stop."""
    def all_reduce(self, tensor):
        other = torch.tensor([6.0, 3.0, 1.0])
        return tensor + other

    monkeypatch.setattr(World, "all_reduce", all_reduce)
    totals, asked = World(size=2).step_totals(torch.tensor(6.0), torch.tensor(3), False)
    assert asked is True and totals.tolist() == [12.0, 6.0]


def test_a_resume_reads_the_random_state_of_its_own_device_only():
    """Older runs kept every visible GPU's state; a machine with fewer GPUs must get a clear
    message, not an IndexError (the logic, on CPU: no GPU state is set before the check)."""
    generator = torch.Generator().manual_seed(0)
    streams = random_streams(generator, torch.device("cpu"))
    assert set(streams) == {"torch", "objective"}  # no GPU stream from a CPU run
    older = {**streams, "cuda": [torch.zeros(8, dtype=torch.uint8)]}
    with pytest.raises(CheckpointError, match="kept the random state of 1 GPUs"):
        restore_random_streams(older, generator, torch.device("cuda", 1))


def test_the_leader_lets_the_others_through_even_when_it_fails(monkeypatch):
    """A corpus error on the first process must not leave the others waiting at the barrier
    (they meet the same error and say it themselves)."""
    from toolkit.text.corpus_errors import CorpusError

    passed = []
    monkeypatch.setattr(world.dist, "barrier", lambda: passed.append("barrier"))
    with pytest.raises(CorpusError), World(size=2).leader_first():
        raise CorpusError("a bad line")
    assert passed == ["barrier"]


def test_the_data_fingerprint_streams_its_pickle_and_keeps_its_value(monkeypatch):
    """The same hash as before (a resumed run still matches its checkpoint), computed without
    holding the whole pickle in memory."""
    import hashlib
    import json
    import pickle

    from toolkit.learning.checkpoints import vocab_entry
    from toolkit.text.vocab import Vocab
    from toolkit.train import run_state

    vocab = Vocab.build([["a", "b", "c"]])
    pairs = [([4, 5, 3], [2, 6, 3]), ([5, 3], [2, 4, 4, 3])] * 50
    expected = hashlib.sha256()
    for side in (vocab, vocab):
        expected.update(json.dumps(vocab_entry(side), sort_keys=True).encode())
    expected.update(pickle.dumps(list(pairs), protocol=5))
    monkeypatch.setattr(run_state.pickle, "dumps", lambda *a, **k: pytest.fail("whole pickle"))
    assert run_state.data_fingerprint(vocab, vocab, pairs) == expected.hexdigest()


@pytest.mark.slow
def test_the_translate_command_imports_no_training_machinery():
    """Translating a line should not wait for datasets, matplotlib and the training loop."""
    import subprocess
    import sys

    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, toolkit.translate; print(sorted(m for m in "
         "('datasets', 'matplotlib', 'toolkit.train.training_run') if m in sys.modules))"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_the_translate_command_names_unknown_characters_and_batches_by_length(
        tmp_path, monkeypatch, capsys):
    """With subwords, only a character no piece holds becomes <unk>: it is named. And the
    lines are decoded shortest first, so one long line pads only lines of its own length,
    yet printed in the order they came."""
    from stages import stage07_multi_head as stage07
    from toolkit import translate as command
    from toolkit.learning.checkpoints import save_checkpoint
    from toolkit.text.subwords import SubwordVocab

    vocab = SubwordVocab.train([["the", "dog", "sees", "a", "cat"]] * 20, max_size=40)
    torch.manual_seed(0)
    model = stage07.Transformer(len(vocab), len(vocab), embed_dim=16, num_heads=2, ff_dim=32)
    path = save_checkpoint(tmp_path / "bpe.pt", model, vocab, vocab)
    batches = []
    decode = command.translate
    monkeypatch.setattr(command, "translate", lambda m, sentences, *a, **k: batches.append(
        sentences) or decode(m, sentences, *a, **k))
    lines = ["the dog sees the cat a dog sees", "the zoo", "a cat"]
    assert command.main([str(path), *lines, "--batch-size", "2", "--beam-size", "1"]) == 0
    out, err = capsys.readouterr()
    assert "line 2: characters not in the vocabulary, read as <unk>: z\n" in err
    assert batches == [["a cat", "the zoo", "the dog sees the cat a dog sees"]]
    assert len(out.splitlines()) == 3
