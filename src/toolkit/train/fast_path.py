"""The training command's model: stage 07's code, with two of its parts done faster.

The stage modules stay as the notebooks teach them; speed is added here, on the built
model, and `--no-fast-path` trains the stage's code exactly as written.

- **Attention** by PyTorch's fused `scaled_dot_product_attention` (`toolkit.variants.sdpa`):
  the same maths, equal up to float rounding (tests/test_time_limit.py trains both without
  dropout). With dropout, SDPA drops attention weights with masks of its own drawing.
- **Every other dropout's mask** drawn as `uniform >= p` instead of with `bernoulli_`. Both
  keep each value with probability 1 - p and scale the kept ones by 1 / (1 - p), as
  `nn.Dropout` does. In a profile of the real-text recipe's step on a CPU, `bernoulli_` took
  a fifth of the time, and a mask of 4,000 x 128 took 2.4 ms against 1.1 ms drawn uniform.
  The masks differ from nn.Dropout's, so a run is reproducible with the same option, not
  across it.

What it buys is measured, not assumed: `make bench` times the step with and without it, side
by side. On the course's 2-core CPU it changed the step by 0.98x on one thread and 1.03x on
two, with no consistent direction, so no gain was shown there; bf16 autocast is what made
that step faster. Any gain would be expected on GPUs, which the course could not measure.
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
