"""Save a trained translator and load it back: weights, model settings and vocabularies together.

Weights alone are not enough to translate again: the ids mean nothing without the exact
vocabularies, and the weights fit only the model they came from. So a checkpoint holds the
stage module, the arguments the model recorded when it was built (`model.config`: a setting
that leaves every shape alone, such as `scale_embeddings`, would otherwise load silently
into the wrong model), both vocabularies (word lists, or a subword tokenizer as its JSON)
and the state_dict, in one file. It holds only tensors, strings and numbers, so it loads
with `torch.load(..., weights_only=True)`, which never runs code from the file.
"""

import importlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from toolkit.text.subwords import SubwordVocab
from toolkit.text.vocab import Vocab

FORMAT, VERSION = "transformer-stages checkpoint", 3
READABLE_VERSIONS = (2, 3)  # version 2 held word vocabularies only, as lists of tokens


class CheckpointError(ValueError):
    """The file is not a complete checkpoint of this course; the message says what to do."""


@dataclass
class Checkpoint:
    """A translator ready to use: the model (in eval mode) and the vocabularies it reads."""

    model: nn.Module
    src_vocab: Vocab | SubwordVocab
    tgt_vocab: Vocab | SubwordVocab
    config: dict  # the arguments the model was built with (model.config)


def weights_on_cpu(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights on the CPU, a tied matrix (one tensor under two or three names)
    copied once, so the file holds it once, as torch.save keeps shared tensors shared."""
    copies: dict[tuple, torch.Tensor] = {}
    state = {}
    for name, tensor in model.state_dict().items():
        same = (tensor.device, tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
                tuple(tensor.shape), tensor.stride(), tensor.dtype)
        state[name] = copies.setdefault(same, tensor.detach().cpu())
    return state


def save_checkpoint(
    path: str | Path, model: nn.Module, src_vocab: Vocab | SubwordVocab,
    tgt_vocab: Vocab | SubwordVocab, training: dict | None = None,
) -> Path:
    """Write everything a restart needs; write-then-rename, so a crash leaves no half file.

    `training` is the state a long run resumes from (toolkit.train.run_state); a translator
    ignores it.
    """
    stage = type(model).__module__
    if not stage.startswith("stages."):
        raise TypeError(f"save_checkpoint saves models from src/stages, not {stage}")
    config = dict(model.config)
    sizes = (config.get("src_vocab_size"), config.get("tgt_vocab_size"))
    if sizes != (len(src_vocab), len(tgt_vocab)):
        raise ValueError(
            f"the model was built for vocabularies of {sizes[0]} and {sizes[1]} tokens, but "
            f"these hold {len(src_vocab)} and {len(tgt_vocab)}: save it with the vocabularies "
            f"it was trained on")
    path = Path(path)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "stage": stage,
        "config": config,
        "src_vocab": vocab_entry(src_vocab),
        "tgt_vocab": vocab_entry(tgt_vocab),
        "state_dict": weights_on_cpu(model),
    }
    if training is not None:
        payload["training"] = training
    partial = path.with_name(path.name + ".partial")
    try:
        torch.save(payload, partial)
        partial.replace(path)
    except BaseException:  # an interrupted save (even Ctrl-C) leaves nothing behind
        partial.unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> Checkpoint:
    """Rebuild the saved model and vocabularies, or say plainly why this file cannot be one."""
    path = Path(path)
    try:
        # Read onto the CPU: a run's last.pt also holds Adam's moments and the random states,
        # which only resuming needs; the model alone goes to the device, at the end.
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # torch reports a damaged file in several ways; name them all
        raise CheckpointError(
            f"{path} is not a readable checkpoint ({type(err).__name__}: {err}). It may be "
            f"truncated by an interrupted copy, or not a file torch.save wrote: copy it again, "
            f"or save it again with save_checkpoint"
        ) from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not a checkpoint of this course (it has no format entry "
            f"{FORMAT!r}). A bare state_dict loads with "
            f"model.load_state_dict(torch.load(path, weights_only=True)) into a model you build"
        )
    if payload.get("version") not in READABLE_VERSIONS:
        raise CheckpointError(
            f"{path} has checkpoint version {payload.get('version')}; this code reads "
            f"versions {READABLE_VERSIONS}: load it with the version of the course that wrote it"
        )
    if not str(payload["stage"]).startswith("stages."):
        raise CheckpointError(f"{path} names {payload['stage']!r}, which is not a stage module")
    src_vocab, tgt_vocab = vocabularies_from(payload, path)
    stage = importlib.import_module(payload["stage"])
    config = payload["config"]
    if (config.get("src_vocab_size"), config.get("tgt_vocab_size")) != (
            len(src_vocab), len(tgt_vocab)):
        raise CheckpointError(f"{path} holds vocabularies of other sizes than its model's")
    model = stage.Transformer(**config)
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise CheckpointError(
            f"{path} holds weights that do not fit {payload['stage']} built with "
            f"{config}: {err}"
        ) from err
    return Checkpoint(model.to(device).eval(), src_vocab, tgt_vocab, config)


def vocabularies_from(payload: dict, path: Path) -> tuple[Vocab | SubwordVocab,
                                                          Vocab | SubwordVocab]:
    """The source and target vocabularies a checkpoint holds (one object when shared)."""
    src_vocab = _vocab_from(payload["src_vocab"], path)
    tgt_vocab = (src_vocab if payload["tgt_vocab"] == payload["src_vocab"]  # one shared vocabulary
                 else _vocab_from(payload["tgt_vocab"], path))
    return src_vocab, tgt_vocab


def vocab_entry(vocab: Vocab | SubwordVocab) -> dict:
    """A vocabulary as strings only, so the checkpoint still loads with weights_only."""
    if isinstance(vocab, SubwordVocab):
        return {"kind": "bpe", "tokenizer": vocab.to_json()}
    return {"kind": "word", "tokens": list(vocab.itos)}


def _vocab_from(entry: dict | list, path: Path) -> Vocab | SubwordVocab:
    """Rebuild a saved vocabulary, checking the special tokens kept their ids."""
    if isinstance(entry, list):  # version 2
        entry = {"kind": "word", "tokens": entry}
    try:
        if entry["kind"] == "bpe":
            return SubwordVocab.from_json(entry["tokenizer"])
        vocab = Vocab(entry["tokens"])
    except Exception as err:  # a missing key, or a tokenizer JSON `tokenizers` rejects
        raise CheckpointError(f"{path} holds a vocabulary that cannot be rebuilt: {err}") from err
    if vocab.itos != entry["tokens"]:
        raise CheckpointError(f"{path} holds a vocabulary whose special tokens are out of place")
    return vocab
