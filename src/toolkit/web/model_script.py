"""A trained model as a classic script, so that a web page can run it, even from `file://`.

Browsers refuse `fetch()` and module scripts on pages opened from `file://`, but a
`<script src>` always loads (design §7). So the model travels as a `.js` file that sets one
global: the model's settings, both vocabularies (for subwords, the merges too), and each
weight in base64 under its `state_dict` name, as little-endian float32, or float16 at half
the size. A weight shared by two names (tied embeddings) is stored once; the other name
points at it.
"""

import base64
import json

import torch
from torch import nn

from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import Vocab

GLOBAL = "TRANSFORMER_MODEL"  # the name the page's script reads
DTYPES = {"float32": (torch.float32, "<f4"), "float16": (torch.float16, "<f2")}


def tokenizer_entry(src_vocab: Vocab | SubwordVocab, tgt_vocab: Vocab | SubwordVocab) -> dict:
    """How the page turns text into ids: by word, or by BPE with the source's merges in the
    order they were learnt (the target's pieces are only joined, never split)."""
    kinds = {isinstance(vocab, SubwordVocab) for vocab in (src_vocab, tgt_vocab)}
    if kinds == {False}:
        return {"kind": "word"}
    if kinds != {True}:
        raise ValueError("the page reads words on both sides or subwords on both sides, not a "
                         "mix: train with one --tokenizer for both languages")
    model = json.loads(src_vocab.to_json())["model"]
    return {"kind": "bpe", "merges": [merge.split(" ") if isinstance(merge, str) else merge
                                      for merge in model["merges"]]}


def itos(vocab: Vocab | SubwordVocab) -> list[str]:
    """Every token or piece, by id."""
    if isinstance(vocab, SubwordVocab):
        return vocab.pieces(range(len(vocab)))
    return list(vocab.itos)


def model_payload(model: nn.Module, src_vocab: Vocab | SubwordVocab,
                  tgt_vocab: Vocab | SubwordVocab, dtype: str = "float32") -> dict:
    """What the page needs to rebuild the model: settings, vocabularies, weights."""
    torch_dtype, wire = DTYPES[dtype]
    weights, aliases, seen = {}, {}, {}
    for name, tensor in model.state_dict().items():
        if name == "positions.encoding":  # a closed form: the page computes it
            continue
        if tensor.data_ptr() in seen:
            aliases[name] = seen[tensor.data_ptr()]
            continue
        seen[tensor.data_ptr()] = name
        data = tensor.detach().to("cpu", torch_dtype).contiguous().numpy().astype(wire)
        weights[name] = {"shape": list(tensor.shape),
                         "data": base64.b64encode(data.tobytes()).decode("ascii")}
    return {"stage": type(model).__module__, "config": dict(model.config), "dtype": dtype,
            "tokenizer": tokenizer_entry(src_vocab, tgt_vocab), "src_itos": itos(src_vocab),
            "tgt_itos": itos(tgt_vocab), "weights": weights, "aliases": aliases}


def model_script(model: nn.Module, src_vocab: Vocab | SubwordVocab,
                 tgt_vocab: Vocab | SubwordVocab, dtype: str = "float32") -> str:
    """The classic script that sets `globalThis.TRANSFORMER_MODEL` (window, or Node's global)."""
    payload = json.dumps(model_payload(model, src_vocab, tgt_vocab, dtype),
                         separators=(",", ":"))
    return f"globalThis.{GLOBAL} = {payload};\n"
