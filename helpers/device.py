"""Pick a device and seed every random generator, so that reruns are identical."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from .checks import check_positive_int, check_seed

__all__ = ["get_device", "set_seed", "cpu_threads"]


def get_device() -> torch.device:
    """Return CUDA if available, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (CPU and every CUDA device).

    ``seed`` is a Python or NumPy int in PyTorch's range [-2**63, 2**64).
    """
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


@contextmanager
def cpu_threads(num_threads: int | None) -> Iterator[None]:
    """Run the block with PyTorch's CPU thread count set to ``num_threads`` (None: left as it
    is), and restore the previous count afterwards, even on an error. Tensors as small as the
    notebooks' train several times faster on one thread than on many."""
    if num_threads is not None:
        num_threads = check_positive_int("num_threads", num_threads)
    previous = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
