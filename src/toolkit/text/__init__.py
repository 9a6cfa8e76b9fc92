"""Text in, text out: tokens, vocabularies (words and subwords), the built-in corpus and
its grammar, and real corpora read from files or the Hub."""

from toolkit.lazy_exports import lazy_exports

# What the notebooks import from here, by module; `from toolkit.text import X` loads
# only X's module.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "corpus": ["CorpusUnavailable", "HELD_OUT_NUMBERS", "HELD_OUT_PAIRS", "HELD_OUT_TAG",
        "load_corpus"],
    "tokens": ["detokenize", "tokenize"],
    "vocab": ["BOS", "BOS_ID", "EOS", "EOS_ID", "PAD", "PAD_ID", "SPECIALS", "UNK_ID", "Vocab"],
})
