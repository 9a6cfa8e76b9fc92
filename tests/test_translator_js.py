"""The site's JavaScript Transformer computes what stage 07 computes: the same greedy and beam
tokens (its searches decode with a key/value cache) and the same attention weights, run in
Node on the model file the site ships. Bugs planted in the JavaScript (the 1/sqrt(head_dim)
scale left out, a cache that forgets a key or misplaces a position) must fail the comparison."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from multilingual import SAMPLE

from stages import stage07_multi_head as stage
from toolkit.batching.batches import encode_source
from toolkit.batching.data import load_data
from toolkit.search.beam_search import beam_decode
from toolkit.search.greedy import greedy_decode
from toolkit.stage_api import keeping_attention
from toolkit.text.tokens import detokenize, tokenize
from toolkit.web.model_script import model_script

TRANSLATOR = (Path(__file__).resolve().parents[1] / "src" / "toolkit" / "web"
              / "translator.js")
SENTENCES = 40
BEAMS = 4  # an untrained model never says <eos>: each beam runs to its limit
pytestmark = [pytest.mark.slow,  # starts Node
              pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")]

RUNNER = """
const fs = require('fs');
const BEAMS = %d;
const [modelFile, translatorFile, inputFile] = process.argv.slice(1);
require(modelFile);
const { Translator } = require(translatorFile);
const { sources, limits } = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
const t = new Translator(globalThis.TRANSFORMER_MODEL);
const tokens = sources.map((ids, i) => t.greedy(ids, limits[i]));
const beams = sources.slice(0, BEAMS).map((ids, i) => t.beam(ids, limits[i], 4, 0.6).tokens);
const { memory, attention } = t.encode(sources[0]);
const decoded = t.decode([2, ...tokens[0]], memory);
console.log(JSON.stringify({ tokens, beams, encoder: attention, self: decoded.selfAttention,
                             cross: decoded.crossAttention }));
"""


@pytest.fixture(scope="module")
def model_and_data():
    torch.manual_seed(0)
    data = load_data()
    model = stage.Transformer(len(data.src_vocab), len(data.tgt_vocab), embed_dim=64,
                              num_heads=4, ff_dim=128, scale_embeddings=True,
                              tie_embeddings=True).eval()
    return model, data


def run_js(tmp_path: Path, model, data, sources, limits, translator: str) -> dict:
    (tmp_path / "model.js").write_text(model_script(model, data.src_vocab, data.tgt_vocab))
    (tmp_path / "translator.js").write_text(translator)
    (tmp_path / "input.json").write_text(json.dumps({"sources": sources, "limits": limits}))
    done = subprocess.run(["node", "-e", RUNNER % BEAMS, str(tmp_path / "model.js"),
                           str(tmp_path / "translator.js"), str(tmp_path / "input.json")],
                          capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout)


def torch_side(model, data):
    sources = [encode_source(data.src_vocab.split(s), data.src_vocab)
               for s in data.sources("test")[:SENTENCES]]
    limits = [len(ids) + 10 for ids in sources]
    tokens = [greedy_decode(model, torch.tensor([ids]), limit)[0]
              for ids, limit in zip(sources, limits, strict=True)]
    beams = [beam_decode(model, torch.tensor([ids]), limit, beam_size=4, alpha=0.6)[0][0].tokens
             for ids, limit in zip(sources[:BEAMS], limits[:BEAMS], strict=True)]
    src = torch.tensor([sources[0]])
    tgt = torch.tensor([[2, *tokens[0]]])
    with keeping_attention(model), torch.no_grad():
        model(src, tgt)  # each (heads, q_len, kv_len) below: every layer, every head
        weights = {
            "encoder": [layer.self_attn.attention[0] for layer in model.encoder_layers],
            "self": [layer.self_attn.attention[0] for layer in model.decoder_layers],
            "cross": [layer.cross_attn.attention[0] for layer in model.decoder_layers],
        }
    return sources, limits, (tokens, beams), weights


def largest_difference(js: dict, weights: dict) -> float:
    return max((torch.tensor(js[kind][layer], dtype=torch.float64) - weights[kind][layer]
                .double()).abs().max().item()
               for kind in weights for layer in range(len(weights[kind])))


def test_the_javascript_model_gives_stage_07s_tokens_and_attention(tmp_path, model_and_data):
    model, data = model_and_data
    sources, limits, tokens, weights = torch_side(model, data)
    js = run_js(tmp_path, model, data, sources, limits, TRANSLATOR.read_text())
    greedy, beams = tokens
    assert js["tokens"] == greedy
    assert js["beams"] == beams
    assert largest_difference(js, weights) < 1e-4


def test_the_scale_left_out_of_the_javascript_is_caught(tmp_path, model_and_data):
    model, data = model_and_data
    sources, limits, tokens, weights = torch_side(model, data)
    planted = TRANSLATOR.read_text().replace("scores.push(dot / scale)", "scores.push(dot)")
    assert planted != TRANSLATOR.read_text()
    js = run_js(tmp_path, model, data, sources, limits, planted)
    assert js["tokens"] != tokens[0] or largest_difference(js, weights) > 1e-3


CUT = """
const [modelFile, translatorFile, text] = process.argv.slice(1);
require(modelFile);
const { Translator } = require(translatorFile);
const t = new Translator(globalThis.TRANSFORMER_MODEL);
console.log(JSON.stringify([1, 4].map((beamSize) => {
  const r = t.translate(text, { beamSize });
  return { ids: r.ids, ended: r.ended, ...t.attentionOf(r) };
})));
"""


def test_a_translation_cut_at_max_seq_len_shows_the_attention_its_search_read(tmp_path):
    """Where the limit is max_seq_len itself, the last token has no position after it: the
    page shows the rows the search computed (it used to ask for one more, and fail)."""
    torch.manual_seed(1)  # an untrained model that writes no <pad>, which PyTorch would drop
    data = load_data()
    model = stage.Transformer(len(data.src_vocab), len(data.tgt_vocab), embed_dim=32,
                              num_heads=2, ff_dim=64, max_seq_len=12).eval()
    sentence = "The dog sees the cat ."  # 7 source ids: its limit, 7 + 10, is cut to 12
    (tmp_path / "model.js").write_text(model_script(model, data.src_vocab, data.tgt_vocab))
    done = subprocess.run(["node", "-e", CUT, str(tmp_path / "model.js"), str(TRANSLATOR),
                           sentence], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    src = torch.tensor([encode_source(data.src_vocab.split(sentence), data.src_vocab)])
    expected = {1: greedy_decode(model, src, 12)[0],
                4: beam_decode(model, src, 12, beam_size=4, alpha=0.6)[0][0].tokens}
    for beam, page in zip((1, 4), json.loads(done.stdout), strict=True):
        assert not page["ended"] and len(page["ids"]) == 12, (beam, page["ids"])  # cut there
        assert page["ids"] == expected[beam]
        with keeping_attention(model), torch.no_grad():
            model(src, torch.tensor([[2, *page["ids"][:-1]]]))  # what the search read
            weights = {
                "encoder": [layer.self_attn.attention[0] for layer in model.encoder_layers],
                "self": [layer.self_attn.attention[0] for layer in model.decoder_layers],
                "cross": [layer.cross_attn.attention[0] for layer in model.decoder_layers],
            }
        assert largest_difference(page, weights) < 1e-4


CACHED = """
const fs = require('fs');
const [modelFile, translatorFile, inputFile] = process.argv.slice(1);
require(modelFile);
const { Translator } = require(translatorFile);
const pairs = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
const t = new Translator(globalThis.TRANSFORMER_MODEL);
let largest = 0;
for (const [src, tgt] of pairs) {
  const { memory } = t.encode(src);
  let cache = t.startCache(memory);
  const tokens = [2, ...tgt];
  tokens.forEach((token, i) => {
    const next = t.step(token, cache);
    cache = next.cache;
    const whole = t.decode(tokens.slice(0, i + 1), memory).logits;
    next.logits.forEach((v, j) => { largest = Math.max(largest, Math.abs(v - whole[j])); });
  });
}
console.log(JSON.stringify(largest));
"""
CACHE_BUGS = {  # planted in the cached decoder: each must be caught
    "none": None,
    "a key not kept": ("layers.push({ ...state, keys, values });",
                       "layers.push({ ...state, keys: state.keys, values });"),
    "positions off by one": ('this.embed("tgt_embed.weight", [token], cache.length)',
                             'this.embed("tgt_embed.weight", [token], cache.length + 1)'),
}


@pytest.mark.parametrize("bug", CACHE_BUGS)
def test_each_cached_step_gives_the_logits_of_decoding_the_whole_prefix(tmp_path,
                                                                        model_and_data, bug):
    """Bit for bit, on 20 test pairs fed their reference as the prefix; a planted bug differs."""
    model, data = model_and_data
    pairs = [(encode_source(data.src_vocab.split(source), data.src_vocab),
              data.tgt_vocab.encode(reference))
             for source, reference in zip(data.sources("test")[:20],
                                          data.references("test")[:20], strict=True)]
    translator = TRANSLATOR.read_text()
    if CACHE_BUGS[bug]:
        original, planted = CACHE_BUGS[bug]
        assert translator.count(original) == 1
        translator = translator.replace(original, planted)
    (tmp_path / "model.js").write_text(model_script(model, data.src_vocab, data.tgt_vocab))
    (tmp_path / "translator.js").write_text(translator)
    (tmp_path / "pairs.json").write_text(json.dumps(pairs))
    done = subprocess.run(["node", "-e", CACHED, str(tmp_path / "model.js"),
                           str(tmp_path / "translator.js"), str(tmp_path / "pairs.json")],
                          capture_output=True, text=True, check=True, timeout=300)
    largest = json.loads(done.stdout)
    assert largest == 0.0 if bug == "none" else largest > 1e-3, largest


TOKENIZE = """
const { Translator } = require(process.argv[1]);
const texts = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
console.log(JSON.stringify(texts.map((text) => {
  const tokens = Translator.tokenize(text);
  return [tokens, Translator.detokenize(tokens)];
})));
"""


def test_the_javascript_tokenizer_splits_and_joins_as_python_does(tmp_path):
    data = load_data()
    texts = [*SAMPLE.values(), *data.sources("test")[:200], *data.reference_texts("test")[:200]]
    (tmp_path / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
    done = subprocess.run(["node", "-e", TOKENIZE, str(TRANSLATOR), str(tmp_path / "texts.json")],
                          capture_output=True, text=True, check=True, timeout=120)
    for text, (tokens, joined) in zip(texts, json.loads(done.stdout), strict=True):
        assert tokens == tokenize(text), text
        assert joined == detokenize(tokenize(text)), text
