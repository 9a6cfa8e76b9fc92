"""A trained stage-07 model as a classic script, so that a page of the site can run it.

Browsers refuse `fetch()` and module scripts on pages opened from `file://`, but a
`<script src>` always loads (design §7). So the model travels as a `.js` file that sets one
global: the model's settings, both vocabularies, and each weight as little-endian float32 in
base64, under its `state_dict` name. A weight shared by two names (tied embeddings) is
stored once; the other name points at it.
"""

import base64
import json

import torch
from torch import nn

from course_tools.paper_run import PAPER, RECORDED, RUNS, PaperRun, key, paper_run
from toolkit.text.vocab import Vocab

GLOBAL = "TRANSFORMER_MODEL"  # the name the page's script reads


def site_run() -> PaperRun:
    """Notebook 10's model, the paper recipe's run on seed 0, as the notebooks kept it: read
    back on one thread, the key they trained it under (make's NOTEBOOK_ENV), never trained
    here, so that the page shows the model the notebooks describe."""
    torch.set_num_threads(1)
    name = f"seed{PAPER.seed}-{key(PAPER, 'cpu')}.pt"
    if not (RUNS / name).exists() and not (RECORDED / name).exists():
        raise SystemExit(f"the site's model {name} is neither in {RECORDED} nor in {RUNS}: run "
                         f"the notebooks first (make site does), so that the page shows "
                         f"notebook 10's model")
    return paper_run()


def model_payload(model: nn.Module, src_vocab: Vocab, tgt_vocab: Vocab) -> dict:
    """What the page needs to rebuild the model: settings, vocabularies, weights."""
    weights, aliases, seen = {}, {}, {}
    for name, tensor in model.state_dict().items():
        if name == "positions.encoding":  # a closed form: the page computes it
            continue
        if tensor.data_ptr() in seen:
            aliases[name] = seen[tensor.data_ptr()]
            continue
        seen[tensor.data_ptr()] = name
        data = tensor.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4")
        weights[name] = {"shape": list(tensor.shape),
                         "data": base64.b64encode(data.tobytes()).decode("ascii")}
    return {"config": dict(model.config), "src_itos": list(src_vocab.itos),
            "tgt_itos": list(tgt_vocab.itos), "weights": weights, "aliases": aliases}


def model_script(model: nn.Module, src_vocab: Vocab, tgt_vocab: Vocab) -> str:
    """The classic script that sets `globalThis.TRANSFORMER_MODEL` (window, or Node's global)."""
    payload = json.dumps(model_payload(model, src_vocab, tgt_vocab), separators=(",", ":"))
    return f"globalThis.{GLOBAL} = {payload};\n"
