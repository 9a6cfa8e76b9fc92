"""Pick where tensors live. This lives in the toolkit so it never appears in a stage diff."""

import torch


def pick_device(name: str = "auto") -> torch.device:
    """"auto" prefers a CUDA GPU, then Apple's MPS, then the CPU: the fastest thing that is
    there. A device named that is not there is an error, never a silent run on the CPU."""
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None)
    mps = mps is not None and mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if (name == "cuda" and not cuda) or (name == "mps" and not mps):
        raise ValueError(f"--device {name}: no {name.upper()} device is available here "
                         f"(torch {torch.__version__}); use --device cpu or auto")
    return torch.device(name)
