"""The training command's model: stage 07's code, with two of its parts done faster.

The stage modules stay as the notebooks teach them; speed is added here, on the built
model, and `--no-fast-path` trains the stage's code exactly as written.

- **Attention** by PyTorch's fused `scaled_dot_product_attention` (`toolkit.variants.sdpa`):
  the same maths, equal up to float rounding (tests/test_time_limit.py trains both without
  dropout). With dropout, SDPA drops attention weights with masks of its own drawing.
- **Every other dropout's mask** drawn as `uniform >= p` instead of with `bernoulli_`. Both
  keep each value with probability 1 - p and scale the kept ones by 1 / (1 - p), as
  `nn.Dropout` does; on a CPU, PyTorch's `bernoulli_` draws its numbers one at a time and
  took a fifth of a training step of the real-text recipe's model, where the uniform draw is
  vectorised. The masks differ from nn.Dropout's, so a run is reproducible with the same
  option, not across it.
"""

import torch
from torch import nn

from toolkit.variants.sdpa import use_sdpa


class UniformDropout(nn.Module):
    """nn.Dropout with its mask drawn from torch.rand: the same law, faster on a CPU."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.rand(x.shape, device=x.device) >= self.p  # (x.shape), True w.p. 1 - p
        return torch.where(keep, x * (1 / (1 - self.p)), 0)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def use_fast_path(model: nn.Module) -> nn.Module:
    """Fused attention and uniform dropout masks for a stage-07 model, in place."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, nn.Dropout):
                setattr(module, name, UniformDropout(child.p))
    return use_sdpa(model)
