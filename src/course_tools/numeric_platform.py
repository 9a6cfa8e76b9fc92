"""How a machine rounds: the part of a committed number's provenance that is not code.

The same code and seed give the same bits only where the kernels round alike: they differ with
the CPU's vector instructions (AVX2, AVX-512), the BLAS, the PyTorch build and, on a GPU, the
card and its CUDA version, and every difference in the last bit grows over a training run.
"""

import hashlib

import torch
from torch import nn


def numeric_platform(device: torch.device | str = "cpu") -> str:
    """A fingerprint of how `device` rounds: a few of the operations training runs, on one CPU
    thread (or on the GPU), their bits hashed, with the PyTorch build and the hardware named."""
    device = torch.device(device)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(64, 96, generator=generator).to(device)  # (rows, features)
        weight = (torch.randn(128, 96, generator=generator) / 10).to(device)
        bias = torch.randn(128, generator=generator).to(device)
        y = nn.functional.linear(x, weight, bias)  # (rows, 128)
        heads = y.view(1, 4, 16, 128)  # (batch, heads, len, head_dim)
        results = [y, x @ x.T, y.softmax(-1), y.log_softmax(-1), y.exp().sum(-1),
                   nn.functional.layer_norm(y, (128,)), nn.functional.relu(y).sqrt(),
                   y.sum(0), nn.functional.scaled_dot_product_attention(heads, heads, heads)]
    finally:
        torch.set_num_threads(threads)
    digest = hashlib.sha256(b"".join(r.cpu().contiguous().numpy().tobytes() for r in results))
    return f"torch {torch.__version__}, {hardware(device)}, {digest.hexdigest()[:12]}"


def hardware(device: torch.device) -> str:
    """What computes on `device`: the CPU's vector unit, or the GPU and its toolkit."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}"
    if device.type == "cpu":
        return torch.backends.cpu.get_cpu_capability()
    return device.type  # mps: Apple's GPU, one kind per machine
