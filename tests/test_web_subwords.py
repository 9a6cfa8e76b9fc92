"""The page's byte-pair encoding is Hugging Face `tokenizers` as the course sets it up (NFC,
Metaspace, punctuation set apart, merges in the order they were learnt, an unseen character
as <unk>), and its decoder gives back the text `SubwordVocab` gives: the same ids, the same
unknown characters and the same text, on every script of tests/multilingual.py and on 1,200
sentences of the built-in corpus, in Node."""

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from multilingual import SAMPLE

from toolkit.batching.data import load_data
from toolkit.text.subwords import SubwordVocab
from toolkit.text.tokens import split_words
from toolkit.web.model_script import itos, tokenizer_entry

TRANSLATOR = Path(__file__).resolve().parents[1] / "src" / "toolkit" / "web" / "translator.js"
pytestmark = [pytest.mark.slow,  # starts Node
              pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")]
# Text a tokenizer gets wrong first: escapes, a written "▁", specials as text, a mark alone,
# a word of punctuation only, spaces of every kind, and characters no vocabulary holds.
EDGES = ["▁", "a▁b ▁▁", "\ue000 \ue0001 x\ue0000", "<eos><pad>", "...!?", "'", "a.b,c",
         "  lots\t of\u3000 space ", "\u0301accent first", "emoji 🦒 and 𝔘", "x" * 40,
         "ÆØÅ æøå", "$5 + 3 = 8 ^ ~ | `code`", "«»„“”‘’‹›", "über-über—über"]

RUNNER = """
const fs = require('fs');
const { Translator } = require(process.argv[1]);
const { itos, merges, texts, outputs } = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const subwords = new Translator.Subwords(itos, merges, itos);
console.log(JSON.stringify({
  encoded: texts.map((text) => subwords.encode(text)),
  decoded: outputs.map((ids) => subwords.decode(ids).text),
}));
"""


def in_node(tmp_path: Path, vocab: SubwordVocab, texts: list[str],
            outputs: list[list[int]], translator: str | None = None) -> dict:
    script = tmp_path / "translator.js"
    script.write_text(translator or TRANSLATOR.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "input.json").write_text(json.dumps({
        "itos": itos(vocab), "merges": tokenizer_entry(vocab, vocab)["merges"], "texts": texts,
        "outputs": outputs}), encoding="utf-8")
    done = subprocess.run(["node", "-e", RUNNER, str(script), str(tmp_path / "input.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-800:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def corpus():
    data = load_data()
    return [*data.sources("train")[:300], *data.reference_texts("train")[:300],
            *data.sources("test")[:300], *data.reference_texts("test")[:300]]


def vocabularies(corpus: list[str]) -> dict[str, SubwordVocab]:
    """One that has seen every script (its merges are used everywhere), and one trained on
    the corpus alone, for which most of the sample's characters are unknown."""
    seen = [split_words(text) for text in [*corpus, *SAMPLE.values(), *EDGES] * 2]
    return {"every script": SubwordVocab.train(seen, 900),
            "the corpus alone": SubwordVocab.train(map(split_words, corpus), 300)}


def random_outputs(vocab: SubwordVocab, count: int) -> list[list[int]]:
    """Any ids a model might write: pieces, specials and escapes in any order."""
    generator = random.Random(0)
    return [[generator.randrange(len(vocab)) for _ in range(generator.randrange(1, 25))]
            for _ in range(count)]


def test_the_page_encodes_and_decodes_subwords_as_tokenizers_does(tmp_path, corpus):
    texts = [*SAMPLE.values(), *EDGES, *corpus]
    assert len(corpus) >= 1_000
    for name, vocab in vocabularies(corpus).items():
        outputs = [vocab.encode(vocab.split(text)) for text in texts] + random_outputs(vocab, 300)
        page = in_node(tmp_path, vocab, texts, outputs)
        for text, mine in zip(texts, page["encoded"], strict=True):
            words = vocab.split(text)
            assert mine["ids"] == vocab.encode(words), (name, text)
            assert mine["pieces"] == vocab.pieces(mine["ids"]), (name, text)
            assert mine["unknown"] == vocab.unknown(words), (name, text)
        for ids, text in zip(outputs, page["decoded"], strict=True):
            assert text == vocab.join(vocab.decode(ids)), (name, ids)
        if name == "every script":  # text as written comes back as written
            assert all(page["decoded"][i] == " ".join(split_words(text))
                       for i, text in enumerate(texts)), name


PLANTED = {
    "merges applied in the order found, not as learnt": (
        "if (rank !== undefined && rank < best) [at, best] = [i, rank];",
        "if (rank !== undefined && at < 0) [at, best] = [i, rank];"),
    "no word start": ("for (const c of WORD_START + escapeWord(word)",
                      "for (const c of escapeWord(word)"),
    "no escape for a written ▁": ('ESCAPE + "1"', "c"),
    "a word start not read as a space": ('i === 0 ? "" : " "', '""'),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_a_bug_planted_in_the_page_tokenizer_is_caught(tmp_path, corpus, bug):
    original, planted = PLANTED[bug]
    translator = TRANSLATOR.read_text(encoding="utf-8")
    assert translator.count(original) == 1
    vocab = vocabularies(corpus)["every script"]
    texts = [*SAMPLE.values(), *EDGES, *corpus]
    outputs = [vocab.encode(vocab.split(text)) for text in texts]
    page = in_node(tmp_path, vocab, texts, outputs, translator.replace(original, planted))
    assert ([mine["ids"] for mine in page["encoded"]] != outputs
            or page["decoded"] != [vocab.join(vocab.decode(ids)) for ids in outputs])
