"""Stage 08 on the page: `python -m toolkit.web` takes a decoder-only checkpoint too, and in
Node its page continues each source as PyTorch does: the same ids greedy and with beam 4,
the same one-stream attention, and, drawing the same noise, the same samples as
`toolkit.search.sampling.sample` with temperature, top-k and top-p. Bugs planted in its
cache, its positions, its top-k and its noise each fail."""

import json
import shutil

import pytest
import torch
from multilingual import SAMPLE

from stages import stage08_decoder_only as stage
from toolkit.batching.batches import encode_source
from toolkit.batching.data import load_data
from toolkit.learning.checkpoints import save_checkpoint
from toolkit.search import sampling
from toolkit.search.decoding import EXTRA_LEN, decoder, room
from toolkit.stage_api import keeping_attention
from toolkit.web import node_runner
from toolkit.web.__main__ import main

pytestmark = [pytest.mark.slow,  # starts Node
              pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")]
MASK = 0xFFFFFFFF
SETTINGS = [  # temperature, top-k, top-p, seed: as the page's form sends them
    {"temperature": 1.0, "topK": None, "topP": None, "seed": 0},
    {"temperature": 0.7, "topK": 5, "topP": None, "seed": 1},
    {"temperature": 1.3, "topK": None, "topP": 0.9, "seed": 2},
    {"temperature": 1.0, "topK": 20, "topP": 0.8, "seed": 3},
    {"temperature": 0.0, "topK": None, "topP": None, "seed": 4},
]
PLANTED = {
    "a key not kept": ("        return { keys, values };\n      });",
                       "        return { keys: state.keys, values };\n      });"),
    "positions off by one": ('this.embed("embed.weight", [token], cache.length)',
                             'this.embed("embed.weight", [token], cache.length + 1)'),
    "top-k keeps one more": ("[Math.min(topK, kept.length) - 1]", "[Math.min(topK, kept.length)]"),
    "the seed left out": ("let state = seed >>> 0;", "let state = 0;"),
}


def mulberry32(seed: int):
    """The page's uniform draws (translator.js, `uniforms`), in Python."""
    state = seed & MASK
    while True:
        state = (state + 0x6D2B79F5) & MASK
        t = ((state ^ (state >> 15)) * (state | 1)) & MASK
        t ^= (t + ((t ^ (t >> 7)) * (t | 61))) & MASK
        yield (((t ^ (t >> 14)) & MASK) + 0.5) / 2**32


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """An untrained stage 08 on 300 shared BPE pieces, positions for 40 tokens so that some
    sources leave little room, <pad> never written (a trained model never writes it). Its
    small scaled embeddings, tied to the output, make a flat distribution to sample from."""
    torch.manual_seed(0)
    data = load_data(tokenizer="bpe", vocab_size=300, shared_vocab=True)
    model = stage.Transformer(300, 300, embed_dim=32, num_heads=2, num_layers=3, ff_dim=64,
                              max_seq_len=40, scale_embeddings=True,
                              tie_embeddings=True).eval()
    with torch.no_grad():
        model.out_proj.bias[0] = -1e4
    folder = tmp_path_factory.mktemp("stage08")
    save_checkpoint(folder / "best.pt", model, data.src_vocab, data.tgt_vocab)
    assert main([str(folder / "best.pt"), "--output", str(folder / "web"), "--dtype",
                 "float32"]) == 0
    sentences = [s for s in [*SAMPLE.values(), *data.sources("test")[:24]]
                 if prompt_and_limit(model, data.src_vocab, s)[1] > 0]  # the others: refused
    assert len(sentences) >= 24
    assert any(prompt_and_limit(model, data.src_vocab, s)[1] < 10 for s in sentences)
    return folder / "web", model, data.src_vocab, sentences


def prompt_and_limit(model, vocab, sentence: str) -> tuple[torch.Tensor, int]:
    src = torch.tensor([encode_source(vocab.split(sentence), vocab)])
    return src, min(src.size(1) + EXTRA_LEN, room(model, src.size(1)))


def in_node(web, sentences, beam=1, sampling_=None, translator: str | None = None):
    if translator is not None:
        planted = web / "_static" / "planted.js"
        planted.write_text(translator, encoding="utf-8")
        original, node_runner.TRANSLATOR = node_runner.TRANSLATOR, planted
    try:
        return node_runner.run_in_node(web / "_static" / "model.js", sentences, beam, sampling_)
    finally:
        if translator is not None:
            node_runner.TRANSLATOR = original


def pytorch_samples(model, vocab, sentences, setting, monkeypatch) -> list[list[int]]:
    """toolkit.search.sampling.sample on each sentence, its noise drawn as the page draws it."""
    out = []
    for sentence in sentences:
        draws = mulberry32(setting["seed"])

        def noise(shape, generator, device, draws=draws):
            count = shape[0] * shape[1]
            uniform = torch.tensor([next(draws) for _ in range(count)],
                                   dtype=torch.float32).reshape(shape)
            return -(-uniform.clamp(min=1e-20, max=1 - 1e-7).log()).log().to(device)

        monkeypatch.setattr(sampling, "gumbel_noise", noise)
        src, limit = prompt_and_limit(model, vocab, sentence)
        out.append(sampling.sample(model, src, limit, setting["temperature"],
                                   setting["topK"], setting["topP"])[0])
    return out


def test_the_page_continues_each_source_as_pytorch_does(page):
    web, model, vocab, sentences = page
    for beam in (1, 4):
        mine = in_node(web, sentences, beam)
        expected = []
        for sentence in sentences:
            src, limit = prompt_and_limit(model, vocab, sentence)
            with torch.no_grad():
                expected.append(decoder(model, beam, 0.6)(model, src, torch.tensor([limit]))[0])
        assert [m["ids"] for m in mine] == expected, beam
    largest = 0.0
    for sentence, result in zip(sentences[:8], mine, strict=False):
        src, _ = prompt_and_limit(model, vocab, sentence)
        read = result["ids"] if result["ended"] else result["ids"][:-1]
        with keeping_attention(model), torch.no_grad():
            model(src, torch.tensor([[2, *read]]))
            for layer, weights in enumerate(result["stream"]):
                ours = model.decoder_layers[layer].self_attn.attention[0]
                largest = max(largest, (torch.tensor(weights, dtype=torch.float64)
                                        - ours.double()).abs().max().item())
    assert largest < 1e-4


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: json.dumps(s))
def test_the_page_samples_what_toolkit_sampling_samples_on_the_same_noise(page, setting,
                                                                          monkeypatch):
    web, model, vocab, sentences = page
    mine = [m["ids"] for m in in_node(web, sentences, sampling_=setting)]
    assert mine == pytorch_samples(model, vocab, sentences, setting, monkeypatch)
    if setting["temperature"] > 0:  # noise at work: not the greedy tokens, nor one token
        assert mine != [m["ids"] for m in in_node(web, sentences)]
        assert len({token for ids in mine for token in ids}) > 10


@pytest.mark.parametrize("bug", PLANTED)
def test_a_bug_planted_in_the_stage_08_page_is_caught(page, bug, monkeypatch):
    web, model, vocab, sentences = page
    original, planted = PLANTED[bug]
    translator = node_runner.TRANSLATOR.read_text(encoding="utf-8")
    assert translator.count(original) == 1
    translator = translator.replace(original, planted)
    setting = SETTINGS[1]
    assert ([m["ids"] for m in in_node(web, sentences, 1, None, translator)]
            != [m["ids"] for m in in_node(web, sentences, 1)]
            or [m["ids"] for m in in_node(web, sentences, 1, setting, translator)]
            != pytorch_samples(model, vocab, sentences, setting, monkeypatch))


def test_a_source_that_leaves_no_room_is_refused_with_its_message(page):
    web, model, vocab, sentences = page
    [result] = in_node(web, ["the dog " * 30])
    assert "leave no room for a translation in the model's 40 positions" in result["error"]
