"""Pick where tensors live. This lives in the toolkit so it never appears in a stage diff."""

import torch


def pick_device() -> torch.device:
    """Prefer a CUDA GPU, then Apple's MPS, then the CPU: the fastest thing that is there."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
