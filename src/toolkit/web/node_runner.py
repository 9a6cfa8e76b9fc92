"""Run the page's JavaScript model in Node.js on sentences, as the Try-it page runs it in a
browser: for notebook 08, which shows the check that `make test` makes in Chromium."""

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from torch import nn

from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import Vocab
from toolkit.web.model_script import model_script

TRANSLATOR = Path(__file__).with_name("translator.js")
# What the page's worker answers for each sentence (Translator.answer): the output ids, its
# text, and every attention weight; or the error's message.
RUNNER = """
const fs = require('fs');
const [modelFile, translatorFile, inputFile] = process.argv.slice(1);
require(modelFile);
const { Translator } = require(translatorFile);
const { sentences, beamSize, sampling } = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
const t = Translator.load(globalThis.TRANSFORMER_MODEL);
console.log(JSON.stringify(sentences.map((text, id) => {
  const { result, attention, error } = t.answer({ id, text, beamSize, alpha: 0.6, sampling });
  return error !== undefined ? { error } : { ids: result.ids, ended: result.ended,
    text: result.text, words: result.words, output: result.output, ...attention };
})));
"""


def node_available() -> bool:
    return shutil.which("node") is not None


def run_in_node(model_file: Path, sentences: list[str], beam_size: int = 1,
                sampling: dict | None = None) -> list[dict]:
    """What the page computes for each sentence, on a model.js already written; `sampling`
    ({"temperature", "topK", "topP", "seed"}) samples instead of searching (stage 08)."""
    with tempfile.TemporaryDirectory(prefix="js-model-") as folder:
        inputs = Path(folder) / "input.json"
        inputs.write_text(json.dumps({"sentences": sentences, "beamSize": beam_size,
                                      "sampling": sampling}), encoding="utf-8")
        done = subprocess.run(["node", "-e", RUNNER, str(Path(model_file).resolve()),
                               str(TRANSLATOR), str(inputs)], capture_output=True, text=True,
                              encoding="utf-8", timeout=600)
    if done.returncode:
        raise RuntimeError(f"node failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def translate_in_node(model: nn.Module, src_vocab: Vocab | SubwordVocab,
                      tgt_vocab: Vocab | SubwordVocab, sentences: list[str],
                      beam_size: int = 1, dtype: str = "float32") -> list[dict]:
    """The JavaScript model's ids, text and attention weights for each sentence."""
    with tempfile.TemporaryDirectory(prefix="js-model-") as folder:
        model_file = Path(folder) / "model.js"
        model_file.write_text(model_script(model, src_vocab, tgt_vocab, dtype), encoding="utf-8")
        return run_in_node(model_file, sentences, beam_size)
