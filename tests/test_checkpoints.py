"""A checkpoint brings back the same translator after a restart, and bad files say why not."""

import pytest
import torch

from stages import stage04_positional_encoding as stage04
from stages import stage07_multi_head as stage07
from toolkit.learning.checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from toolkit.search.decoding import translate
from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import BOS_ID, EOS_ID, Vocab

SRC_VOCAB = Vocab.build([["the", "dog", "sees", "a", "cat"], ["the", "cat", "runs"]])
TGT_VOCAB = Vocab.build([["der", "Hund", "sieht", "eine", "Katze"], ["die", "Katze", "läuft"]])
CONFIG = {"embed_dim": 16, "num_heads": 4, "num_encoder_layers": 2, "num_decoder_layers": 2,
          "ff_dim": 40}
SENTENCES = ["the dog sees a cat", "the cat runs", "a dog", "cat cat cat the"]


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = stage07.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), **CONFIG)
    for parameter in model.parameters():  # not the initial values: something "learned"
        parameter.data.normal_(std=0.5)
    path = save_checkpoint(tmp_path / "model.pt", model, SRC_VOCAB, TGT_VOCAB)
    return model, path


def test_a_round_trip_gives_identical_weights_vocabularies_and_translations(saved):
    model, path = saved
    loaded = load_checkpoint(path)
    assert type(loaded.model) is stage07.Transformer and not loaded.model.training
    assert loaded.src_vocab.itos == SRC_VOCAB.itos and loaded.tgt_vocab.itos == TGT_VOCAB.itos
    assert loaded.config == model.config == {"src_vocab_size": len(SRC_VOCAB),
                                             "tgt_vocab_size": len(TGT_VOCAB), **CONFIG,
                                             "dropout": 0.0, "max_seq_len": 256,
                                             "scale_embeddings": False, "tie_embeddings": False}
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor), name
    assert translate(loaded.model, SENTENCES, loaded.src_vocab, loaded.tgt_vocab) == \
        translate(model, SENTENCES, SRC_VOCAB, TGT_VOCAB)


def test_loading_never_unpickles_code(saved, monkeypatch):
    calls = []
    original = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(k) or original(*a, **k))
    load_checkpoint(saved[1])
    assert calls and all(kwargs.get("weights_only") is True for kwargs in calls)


def test_loading_reads_the_file_onto_the_cpu_and_moves_only_the_model(saved, monkeypatch):
    """last.pt also holds Adam's moments (twice the weights): translating on a GPU must not
    carry them onto it. Read on the CPU, the model alone goes where it is asked."""
    calls = []
    original = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(k) or original(*a, **k))
    moved = []
    original_to = torch.nn.Module.to
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: moved.append(a) or
                        original_to(self, *a, **k))
    load_checkpoint(saved[1], device="meta")
    assert [kwargs.get("map_location") for kwargs in calls] == ["cpu"]
    assert ("meta",) in moved


def test_tied_weights_are_saved_once_even_from_another_device(tmp_path, monkeypatch):
    """From a GPU every .cpu() is a new copy: three names of one matrix would be written
    three times. Here .cpu() is made to copy, as a device would."""
    torch.manual_seed(0)
    model = stage07.Transformer(len(SRC_VOCAB), len(SRC_VOCAB), embed_dim=16, num_heads=2,
                                ff_dim=32, tie_embeddings="all")
    copying = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: copying(self).clone())
    path = save_checkpoint(tmp_path / "tied.pt", model, SRC_VOCAB, SRC_VOCAB)
    state = torch.load(path, weights_only=True)["state_dict"]
    tied = [name for name in ("src_embed.weight", "tgt_embed.weight", "out_proj.weight")
            if name in state]
    pointers = {state[name].untyped_storage().data_ptr() for name in tied}
    assert len(tied) >= 2 and len(pointers) == 1


def test_a_truncated_checkpoint_says_so(saved):
    path = saved[1]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="not a readable checkpoint .*truncated"):
        load_checkpoint(path)


def test_a_text_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("not weights")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)


def test_a_bare_state_dict_is_refused_with_how_to_load_it(saved, tmp_path):
    path = tmp_path / "state_dict.pt"
    torch.save(saved[0].state_dict(), path)
    with pytest.raises(CheckpointError, match=r"not a checkpoint of this course.*load_state_dict"):
        load_checkpoint(path)


def test_a_pickled_object_is_refused_without_running_it(tmp_path):
    path = tmp_path / "object.pt"
    torch.save({"format": "transformer-stages checkpoint", "payload": Vocab(["x"])}, path)
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)


def test_weights_that_do_not_fit_the_model_are_refused(saved, tmp_path):
    payload = torch.load(saved[1], weights_only=True)
    payload["config"] = {**payload["config"], "ff_dim": 48}
    path = tmp_path / "edited.pt"
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match="do not fit stages.stage07_multi_head"):
        load_checkpoint(path)


def test_any_stage_can_be_saved_and_a_failed_save_leaves_no_file(tmp_path, monkeypatch):
    model = stage04.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), embed_dim=16)
    path = save_checkpoint(tmp_path / "stage04.pt", model, SRC_VOCAB, TGT_VOCAB)
    loaded = load_checkpoint(path).model
    assert type(loaded) is stage04.Transformer and loaded.config == model.config

    def interrupted(payload, file):
        open(file, "wb").write(b"half")  # noqa: SIM115
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "other.pt", model, SRC_VOCAB, TGT_VOCAB)
    assert sorted(tmp_path.iterdir()) == [tmp_path / "stage04.pt"]


def test_a_setting_that_changes_no_shape_comes_back_with_the_weights(tmp_path):
    """4 heads and scaled embeddings fit the weights of 2 heads unscaled: only config tells."""
    torch.manual_seed(1)
    model = stage07.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), embed_dim=16, ff_dim=40,
                                num_heads=4, scale_embeddings=True).eval()
    for parameter in model.parameters():
        parameter.data.normal_(std=0.5)
    src = torch.tensor([SRC_VOCAB.encode("the dog sees a cat".split()) + [EOS_ID]])  # (1, src_len)
    tgt = torch.tensor([[BOS_ID, *TGT_VOCAB.encode("der Hund sieht".split())]])  # (1, tgt_len)
    path = save_checkpoint(tmp_path / "model.pt", model, SRC_VOCAB, TGT_VOCAB)
    assert torch.load(path, weights_only=True)["config"] == model.config  # plain data only
    loaded = load_checkpoint(path).model
    assert loaded.config == model.config
    with torch.no_grad():
        assert torch.equal(loaded(src, tgt), model(src, tgt))
        # The defaults (2 heads, unscaled) take the same weights without a complaint and
        # translate differently: only the saved config can tell the two models apart.
        default = stage07.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), embed_dim=16, ff_dim=40)
        default.load_state_dict(model.state_dict())
        assert not torch.allclose(default.eval()(src, tgt), model(src, tgt))


def test_vocabularies_the_model_was_not_built_for_are_refused_at_save(tmp_path):
    model = stage07.Transformer(len(SRC_VOCAB), len(TGT_VOCAB), **CONFIG)
    smaller = Vocab.build([["der", "Hund"]])
    with pytest.raises(ValueError, match="vocabularies it was trained on"):
        save_checkpoint(tmp_path / "model.pt", model, SRC_VOCAB, smaller)
    assert len(SRC_VOCAB) != len(TGT_VOCAB)  # so that swapping them is a real mismatch
    with pytest.raises(ValueError, match="vocabularies it was trained on"):
        save_checkpoint(tmp_path / "model.pt", model, TGT_VOCAB, SRC_VOCAB)
    assert list(tmp_path.iterdir()) == []


# --- Subword vocabularies ------------------------------------------------------------------

BPE_CORPUS = [["the", "dog", "sees", "a", "cat", "."], ["der", "Hund", "sieht", "eine", "Katze"],
              ["the", "cat", "runs", "."], ["die", "Katze", "läuft", "."]] * 5


def test_a_subword_checkpoint_loads_back_with_its_shared_tokenizer_and_translates_the_same(
        tmp_path):
    vocab = SubwordVocab.train(BPE_CORPUS, max_size=40)
    torch.manual_seed(0)
    model = stage07.Transformer(len(vocab), len(vocab), tie_embeddings="all", **CONFIG)
    for parameter in model.parameters():
        parameter.data.normal_(std=0.5)
    loaded = load_checkpoint(save_checkpoint(tmp_path / "bpe.pt", model, vocab, vocab))
    assert loaded.src_vocab is loaded.tgt_vocab and loaded.src_vocab.to_json() == vocab.to_json()
    embeddings = (loaded.model.src_embed.weight, loaded.model.tgt_embed.weight,
                  loaded.model.out_proj.weight)
    assert all(weight is embeddings[0] for weight in embeddings)  # still one tied matrix
    sentences = SENTENCES + ["the zebra sees a dog"]  # "zebra": pieces, not one <unk>
    assert translate(loaded.model, sentences, loaded.src_vocab, loaded.tgt_vocab) == \
        translate(model, sentences, vocab, vocab)


def test_separate_subword_vocabularies_come_back_separate(tmp_path):
    src_vocab = SubwordVocab.train(BPE_CORPUS[0::2], max_size=30)
    tgt_vocab = SubwordVocab.train(BPE_CORPUS[1::2], max_size=32)
    model = stage07.Transformer(len(src_vocab), len(tgt_vocab), **CONFIG)
    loaded = load_checkpoint(save_checkpoint(tmp_path / "two.pt", model, src_vocab, tgt_vocab))
    assert loaded.src_vocab.to_json() == src_vocab.to_json()
    assert loaded.tgt_vocab.to_json() == tgt_vocab.to_json()
    assert loaded.src_vocab.encode(["Katze"]) != loaded.tgt_vocab.encode(["Katze"])


def test_a_version_2_checkpoint_with_word_lists_still_loads(saved, tmp_path):
    model, path = saved
    payload = torch.load(path, weights_only=True)
    payload.update(version=2, src_vocab=list(SRC_VOCAB.itos), tgt_vocab=list(TGT_VOCAB.itos))
    torch.save(payload, tmp_path / "old.pt")
    loaded = load_checkpoint(tmp_path / "old.pt")
    assert loaded.src_vocab.itos == SRC_VOCAB.itos and loaded.tgt_vocab.itos == TGT_VOCAB.itos


def test_a_damaged_subword_tokenizer_is_named(saved, tmp_path):
    payload = torch.load(saved[1], weights_only=True)
    payload["src_vocab"] = {"kind": "bpe", "tokenizer": "{not json"}
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="vocabulary that cannot be rebuilt"):
        load_checkpoint(tmp_path / "bad.pt")
