"""The Try-it page's parts, and a page of its own around them for any checkpoint.

The course site puts the same form (`try_it.html`), scripts and styles inside its own theme;
`write_page` wraps them in a plain HTML page, so a learner's model needs no Sphinx.
"""

import html
import shutil
from pathlib import Path
from string import Template

from torch import nn

from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import Vocab
from toolkit.web.model_script import model_script

HERE = Path(__file__).parent
STATIC = "_static"  # the folder beside the page that holds its scripts, as on the site
FILES = ("translator.js", "try_it.js", "try_it.css")  # the page's code, model.js aside
EXAMPLE = "The dog sees the cat."

PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Try it: $title</title>
<link rel="stylesheet" href="_static/try_it.css">
<style>
body { font-family: system-ui, sans-serif; line-height: 1.5; margin: 0 auto; padding: 1rem;
  max-width: 72rem; }
</style>
</head>
<body>
<main>
<h1>Try it: $title</h1>
<p>$about</p>
$form
</main>
</body>
</html>
""")


def try_it_form(example: str = EXAMPLE) -> str:
    """The form, the places the page draws in, and the scripts it loads from _static/."""
    return Template((HERE / "try_it.html").read_text(encoding="utf-8")).substitute(
        example=html.escape(example, quote=True))


def copy_code(static: Path) -> None:
    """The page's own scripts and styles, beside its model.js."""
    static.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy2(HERE / name, static / name)


def describe(model: nn.Module, src_vocab: Vocab | SubwordVocab,
             tgt_vocab: Vocab | SubwordVocab, dtype: str) -> str:
    """One sentence on what the page runs: the stage, its size, its vocabulary, its weights."""
    config = model.config
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    kind = ("BPE subword pieces" if isinstance(src_vocab, SubwordVocab)
            else "word-level tokens")
    vocabularies = (f"{len(src_vocab):,} {kind} shared by both languages" if src_vocab is tgt_vocab
                    else f"{len(src_vocab):,} source and {len(tgt_vocab):,} target {kind}")
    layers = (f"{config['num_layers']} decoder layers, one stream" if "num_layers" in config
              else f"{config['num_encoder_layers']} + {config['num_decoder_layers']} layers")
    return (f"{type(model).__module__.removeprefix('stages.')}: {layers}, "
            f"embed_dim {config['embed_dim']}, {config['num_heads']} heads, "
            f"{parameters / 1e6:.2f}M parameters, {vocabularies}, weights as {dtype}")


def about(model: nn.Module, src_vocab: Vocab | SubwordVocab, tgt_vocab: Vocab | SubwordVocab,
          dtype: str) -> str:
    """What the page says it runs, and what a reader can do with it (plain text)."""
    searches = ("greedy decoding, the paper's beam search or sampling (temperature, top-k, "
                "top-p, seeded)" if hasattr(model, "language_model")
                else "greedy decoding or the paper's beam search")
    return (f"{describe(model, src_vocab, tgt_vocab, dtype)}. Everything runs in this browser, "
            f"from the files beside this page: type a sentence, choose {searches}, and look at "
            f"any layer's and head's attention.")


def write_page(output: Path, model: nn.Module, src_vocab: Vocab | SubwordVocab,
               tgt_vocab: Vocab | SubwordVocab, title: str, dtype: str = "float16",
               example: str = EXAMPLE) -> Path:
    """Write `output/index.html` and `output/_static/` for this model; return the page."""
    static = output / STATIC
    copy_code(static)
    (static / "model.js").write_text(model_script(model, src_vocab, tgt_vocab, dtype),
                                     encoding="utf-8")
    page = output / "index.html"
    page.write_text(PAGE.substitute(title=html.escape(title),
                                    about=html.escape(about(model, src_vocab, tgt_vocab, dtype)),
                                    form=try_it_form(example)), encoding="utf-8")
    return page
