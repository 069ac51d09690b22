"""get_device and set_seed."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from helpers import get_device, set_seed


def test_get_device_prefers_cuda_when_present():
    expected = "cuda" if torch.cuda.is_available() else None
    device = get_device()
    assert isinstance(device, torch.device)
    if expected:
        assert device.type == expected
    else:
        assert device.type in {"mps", "cpu"}


def draw():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_set_seed_makes_every_generator_repeat():
    set_seed(7)
    first = draw()
    set_seed(7)
    assert draw() == first
    set_seed(8)
    assert draw() != first


def test_set_seed_rejects_non_int():
    with pytest.raises(ValueError, match="seed must be an int, got float"):
        set_seed(1.5)
