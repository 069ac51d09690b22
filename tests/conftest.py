"""Shared fixtures: a ``device`` fixture (CPU always, CUDA when present) and dtype tolerances."""

from __future__ import annotations

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]

# Tolerances per dtype, as PyTorch's own test suite scales them (torch.testing defaults).
TOL = {
    torch.float16: dict(rtol=1e-3, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5),
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
}


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
