"""`python -m toolkit.web` writes a Try-it page for a checkpoint the training command saved,
and the page's model is the checkpoint's: in Node, on subword text in many scripts, the same
ids and text as PyTorch, greedy and beam 4, with the weights as the page stores them
(float16 by default: PyTorch runs the same rounded weights), and the same attention. A
float16 reader that misreads a bit fails it."""

import copy
import json
import shutil

import pytest
import torch
from multilingual import SAMPLE

from stages import stage07_multi_head as stage
from toolkit.batching.batches import encode_source
from toolkit.batching.data import load_data
from toolkit.learning.checkpoints import save_checkpoint
from toolkit.search.decoding import EXTRA_LEN, decoder
from toolkit.stage_api import keeping_attention
from toolkit.web import node_runner
from toolkit.web.__main__ import main

pytestmark = [pytest.mark.slow,  # starts Node
              pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An untrained stage 07 on 300 shared BPE pieces: its tokens are arbitrary, which is
    what an equality test wants, and it never says <eos>, so each search runs to its limit."""
    torch.manual_seed(0)
    data = load_data(tokenizer="bpe", vocab_size=300, shared_vocab=True)
    model = stage.Transformer(300, 300, embed_dim=32, num_heads=2, num_encoder_layers=2,
                              num_decoder_layers=2, ff_dim=64, max_seq_len=96,
                              tie_embeddings="all").eval()
    path = tmp_path_factory.mktemp("run") / "best.pt"
    save_checkpoint(path, model, data.src_vocab, data.tgt_vocab)
    return path, model, data


def as_stored(model: torch.nn.Module, dtype: str) -> torch.nn.Module:
    """The model with its weights rounded as the page stores them (tied ones stay tied)."""
    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.to(getattr(torch, dtype)).float())
    return rounded


def pytorch_side(model, vocab, sentences: list[str], beam: int) -> list[dict]:
    """What PyTorch writes for each sentence, and its attention on what the search read."""
    out = []
    for sentence in sentences:
        src = torch.tensor([encode_source(vocab.split(sentence), vocab)])
        limit = min(src.size(1) + EXTRA_LEN, model.config["max_seq_len"])
        with torch.no_grad():
            ids = decoder(model, beam, 0.6)(model, src, torch.tensor([limit]))[0]
        with keeping_attention(model), torch.no_grad():
            model(src, torch.tensor([[2, *ids[:-1]]]))  # cut at its limit: no row after
            weights = {"encoder": [layer.self_attn.attention[0] for layer in model.encoder_layers],
                       "self": [layer.self_attn.attention[0] for layer in model.decoder_layers],
                       "cross": [layer.cross_attn.attention[0] for layer in model.decoder_layers]}
        out.append({"ids": ids, "text": vocab.join(vocab.decode(ids)), "weights": weights})
    return out


def largest_difference(page: dict, weights: dict) -> float:
    return max((torch.tensor(page[kind][layer], dtype=torch.float64) - weights[kind][layer]
                .double()).abs().max().item()
               for kind in weights for layer in range(len(weights[kind])))


def test_the_command_writes_a_page_with_its_code_and_model(checkpoint, tmp_path, capsys):
    path, model, data = checkpoint
    assert main([str(path), "--output", str(tmp_path / "web")]) == 0
    assert "web/index.html" in capsys.readouterr().out
    page = (tmp_path / "web" / "index.html").read_text(encoding="utf-8")
    for script in ("model.js", "translator.js", "try_it.js"):
        assert f'<script src="_static/{script}"></script>' in page
        assert (tmp_path / "web" / "_static" / script).exists()
    assert "BPE subword pieces" in page and "float16" in page
    stored = (tmp_path / "web" / "_static" / "model.js").read_text(encoding="utf-8")
    payload = json.loads(stored.removeprefix("globalThis.TRANSFORMER_MODEL = ").rstrip(";\n"))
    assert payload["dtype"] == "float16" and payload["tokenizer"]["kind"] == "bpe"
    assert payload["aliases"] == {"tgt_embed.weight": "src_embed.weight",
                                  "out_proj.weight": "src_embed.weight"}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_page_translates_subwords_as_pytorch_does(checkpoint, tmp_path, dtype):
    path, model, data = checkpoint
    assert main([str(path), "--output", str(tmp_path), "--dtype", dtype]) == 0
    sentences = [*SAMPLE.values(), *data.sources("test")[:30]]
    stored = as_stored(model, dtype)
    for beam in (1, 4):
        page = node_runner.run_in_node(tmp_path / "_static" / "model.js", sentences, beam)
        ours = pytorch_side(stored, data.src_vocab, sentences, beam)
        assert [p["ids"] for p in page] == [o["ids"] for o in ours], beam
        assert [p["text"] for p in page] == [o["text"] for o in ours], beam
        assert max(largest_difference(p, o["weights"])
                   for p, o in zip(page[:8], ours, strict=False)) < 1e-4


def test_pads_an_undertrained_model_writes_keep_their_place(checkpoint, tmp_path):
    """The page labels each output id with its piece, a <pad> too (the text leaves it out,
    as Vocab.decode does), so the attention map's rows line up with the ids."""
    path, model, data = checkpoint
    padding = copy.deepcopy(model)
    with torch.no_grad():
        padding.out_proj.bias[0] = 1e4  # <pad> wins every step
    (tmp_path / "model.js").write_text(node_runner.model_script(
        padding, data.src_vocab, data.tgt_vocab), encoding="utf-8")
    [page] = node_runner.run_in_node(tmp_path / "model.js", ["The dog sees the cat."])
    assert page["ids"] == [0] * len(page["ids"]) and len(page["ids"]) > 5
    assert page["output"] == ["<pad>"] * len(page["ids"])
    assert page["text"] == data.tgt_vocab.join(data.tgt_vocab.decode(page["ids"])) == ""
    assert len(page["self"][0][0]) == len(page["ids"])  # a row for each id the search read


def test_a_misread_float16_weight_is_caught(checkpoint, tmp_path, monkeypatch):
    path, model, data = checkpoint
    translator = node_runner.TRANSLATOR.read_text(encoding="utf-8")
    original = "return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);"
    assert translator.count(original) == 1
    planted = tmp_path / "translator.js"
    planted.write_text(translator.replace(original, original.replace("1024", "1000")))
    monkeypatch.setattr(node_runner, "TRANSLATOR", planted)
    assert main([str(path), "--output", str(tmp_path / "web")]) == 0
    sentences = data.sources("test")[:10]
    page = node_runner.run_in_node(tmp_path / "web" / "_static" / "model.js", sentences)
    ours = pytorch_side(as_stored(model, "float16"), data.src_vocab, sentences, 1)
    assert ([p["ids"] for p in page] != [o["ids"] for o in ours]
            or largest_difference(page[0], ours[0]["weights"]) > 1e-3)


def test_what_is_not_a_page_s_checkpoint_is_refused_with_a_message(tmp_path, capsys):
    not_one = tmp_path / "notes.pt"
    not_one.write_bytes(b"not a checkpoint")
    assert main([str(not_one), "--output", str(tmp_path / "web")]) == 2
    assert "is not a readable checkpoint" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.pt")]) == 2
    assert "missing.pt" in capsys.readouterr().err
    assert not (tmp_path / "web").exists()
