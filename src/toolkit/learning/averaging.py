"""Checkpoint averaging: one model whose parameters are the mean of a run's last checkpoints.

"For the base models, we used a single model obtained by averaging the last 5 checkpoints,
which were written at 10-minute intervals" (Vaswani et al., 2017, §6.1). Late in training
the weights wander around a minimum with the noise of each batch; their mean sits nearer
its centre than any one of them. `python -m toolkit.train --average-last 5` keeps the last
five checkpoints of a run and writes their average as `averaged.pt`.

    python -m toolkit.learning.averaging --output averaged.pt step-1.pt step-2.pt ...
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from toolkit.learning.checkpoints import CheckpointError, load_checkpoint, save_checkpoint


def average_state_dicts(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of every floating-point tensor; others must agree and are kept."""
    if not states:
        raise ValueError("there are no checkpoints to average")
    names = list(states[0])
    if any(list(state) != names for state in states):
        raise ValueError("the checkpoints hold different parameters: average checkpoints of "
                         "one run only")
    averaged = {}
    for name in names:
        tensors = [state[name] for state in states]
        if tensors[0].is_floating_point():
            # Summed in float64, so the mean of k float32 tensors is rounded once.
            total = sum(tensor.double() for tensor in tensors)
            averaged[name] = (total / len(tensors)).to(tensors[0].dtype)
        elif all(torch.equal(tensor, tensors[0]) for tensor in tensors):
            averaged[name] = tensors[0]
        else:
            raise ValueError(f"{name} is not a floating-point tensor and differs between "
                             f"checkpoints: it cannot be averaged")
    return averaged


def average_checkpoints(paths: Sequence[str | Path], output: str | Path) -> Path:
    """Average checkpoints of one model (same stage, settings and vocabularies) into `output`."""
    saved = [load_checkpoint(path) for path in paths]
    if not saved:
        raise ValueError("there are no checkpoints to average")
    first = saved[0]
    for path, other in zip(paths[1:], saved[1:], strict=True):
        if other.config != first.config or type(other.model) is not type(first.model):
            raise CheckpointError(f"{path} holds another model than {paths[0]}: average "
                                  f"checkpoints of one run only")
        if _vocabulary(other.src_vocab) != _vocabulary(first.src_vocab) or \
                _vocabulary(other.tgt_vocab) != _vocabulary(first.tgt_vocab):
            raise CheckpointError(f"{path} reads other vocabularies than {paths[0]}")
    first.model.load_state_dict(average_state_dicts([s.model.state_dict() for s in saved]))
    return save_checkpoint(output, first.model, first.src_vocab, first.tgt_vocab)


def _vocabulary(vocab) -> object:
    return vocab.to_json() if hasattr(vocab, "to_json") else vocab.itos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.learning.averaging",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path, help="checkpoints of one run")
    parser.add_argument("--output", "-o", type=Path, required=True,
                        help="where to write the averaged checkpoint")
    args = parser.parse_args(argv)
    if args.output.resolve() in {path.resolve() for path in args.checkpoints}:
        parser.error(f"--output {args.output} is one of the checkpoints to average: it would "
                     f"be overwritten")
    try:
        print(average_checkpoints(args.checkpoints, args.output))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
