"""The one interface every stage shares, so training, decoding and plots never ask which stage.

Every stage module defines `Transformer(src_vocab_size, tgt_vocab_size, ...)` whose
`forward(src, tgt)` returns next-token logits, an `objective` (how it is trained), and a
class attribute `accepts_batches`. Every model records the arguments it was built with in
`config`, so a checkpoint can build it again. Each attention module keeps its last weights
in an `attention` attribute for the plots (stage 07 only inside `keeping_attention`, since
it also trains on real text, where six kept weight tensors per step cost memory), and its
name says its role: names starting with "encoder" are encoder self-attention, names
containing "cross" are cross-attention, and the rest are decoder self-attention.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from toolkit.text.vocab import PAD_ID


def forward_batch(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Run any stage on a right-padded batch; stage 01 sees one unpadded sentence at a time."""
    # src: (batch, src_len), tgt: (batch, tgt_len)
    if model.accepts_batches:
        return model(src, tgt)  # (batch, tgt_len, tgt_vocab)
    logits = []
    for src_row, tgt_row in zip(src, tgt, strict=True):
        src_len = int((src_row != PAD_ID).sum())
        tgt_len = int((tgt_row != PAD_ID).sum())
        row = model(src_row[:src_len], tgt_row[:tgt_len])  # (tgt_len, tgt_vocab)
        logits.append(nn.functional.pad(row, (0, 0, 0, tgt.size(1) - tgt_len)))
    return torch.stack(logits)  # (batch, tgt_len, tgt_vocab)


@contextmanager
def restoring_mode(model: nn.Module, training: bool) -> Iterator[nn.Module]:
    """Switch train/eval mode for a block, and switch back even if the block raises."""
    was_training = model.training
    model.train(training)
    try:
        yield model
    finally:
        model.train(was_training)


def constructor_arguments(arguments: dict) -> dict:
    """A model's `locals()` at the top of `__init__`, less `self`: its settings, as given."""
    return {name: value for name, value in arguments.items()
            if name not in ("self", "__class__")}


@contextmanager
def keeping_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Let every attention module keep its weights for the plots, and drop them afterwards."""
    switchable = [module for module in model.modules() if hasattr(module, "keep_attention")]
    for module in switchable:
        module.keep_attention = True
    try:
        yield model
    finally:
        for module in switchable:
            module.keep_attention, module.attention = False, None


def attention_maps(model: nn.Module) -> dict[str, torch.Tensor]:
    """Collect the weights each attention module kept from the last forward pass."""
    return {
        name: module.attention
        for name, module in model.named_modules()
        if getattr(module, "attention", None) is not None
    }


def count_parameters(model: nn.Module) -> int:
    """Count trainable numbers, the usual measure of a model's size."""
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)


def check_token_ids(ids: torch.Tensor, name: str, dims: int, vocab_size: int) -> None:
    """Turn torch's deep 'index out of range' errors into messages that say what to fix."""
    shape = "(len,)" if dims == 1 else "(batch, len)"
    if ids.dim() != dims:
        raise ValueError(
            f"{name} must have shape {shape}, got {tuple(ids.shape)}"
            + (": this stage takes one sentence at a time" if dims == 1 else "")
        )
    if ids.dtype != torch.long:
        raise TypeError(f"{name} must hold token ids (torch.long), got {ids.dtype}")
    if ids.size(-1) == 0:
        raise ValueError(f"{name} is empty: give at least one token")
    # Reading min and max waits for the device and breaks a torch.compile graph, so the
    # range is checked on CPU tensors in eager mode only: where learners feed ids by hand.
    if ids.device.type != "cpu" or torch.compiler.is_compiling():
        return
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(
            f"{name} holds ids outside 0..{vocab_size - 1} (min {int(ids.min())}, "
            f"max {int(ids.max())}): encode text with the same vocabulary the model was built for"
        )


def check_same_batch(src: torch.Tensor, tgt: torch.Tensor) -> None:
    """Catch a source and target batch that do not pair up here, not deep inside attention."""
    if src.size(0) != tgt.size(0):
        raise ValueError(
            f"src holds {src.size(0)} sentences but tgt holds {tgt.size(0)}: give one "
            f"target row per source row, in the same order"
        )
