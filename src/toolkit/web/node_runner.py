"""Run the page's JavaScript model in Node.js on sentences, as the Try-it page runs it in a
browser: for notebook 08, which shows the check that `make test` makes in Chromium."""

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from torch import nn

from toolkit.text.vocab import Vocab
from toolkit.web.model_script import model_script

TRANSLATOR = Path(__file__).with_name("translator.js")
# Each sentence's output ids and every attention weight, as the page computes them.
RUNNER = """
const fs = require('fs');
const [modelFile, translatorFile, inputFile] = process.argv.slice(1);
require(modelFile);
const { Translator } = require(translatorFile);
const { sentences, beamSize } = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
const t = new Translator(globalThis.TRANSFORMER_MODEL);
console.log(JSON.stringify(sentences.map((s) => {
  const r = t.translate(s, { beamSize });
  return { ids: r.ids, ended: r.ended, ...t.attentionOf(r) };
})));
"""


def node_available() -> bool:
    return shutil.which("node") is not None


def translate_in_node(model: nn.Module, src_vocab: Vocab, tgt_vocab: Vocab,
                      sentences: list[str], beam_size: int = 1) -> list[dict]:
    """The JavaScript model's ids and attention weights for each sentence."""
    with tempfile.TemporaryDirectory(prefix="js-model-") as folder:
        model_file, inputs = Path(folder) / "model.js", Path(folder) / "input.json"
        model_file.write_text(model_script(model, src_vocab, tgt_vocab), encoding="utf-8")
        inputs.write_text(json.dumps({"sentences": sentences, "beamSize": beam_size}),
                          encoding="utf-8")
        done = subprocess.run(["node", "-e", RUNNER, str(model_file), str(TRANSLATOR),
                               str(inputs)], capture_output=True, text=True, check=True,
                              timeout=600)
    return json.loads(done.stdout)
