"""Pick a device and seed every random generator, so that reruns are identical."""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["get_device", "set_seed"]


def get_device() -> torch.device:
    """Return CUDA if available, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (CPU and every CUDA device)."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
