"""get_device and set_seed."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from helpers import get_device, set_seed


@pytest.mark.parametrize("cuda, mps, expected", [
    (True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu"),
])
def test_get_device_prefers_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    device = get_device()
    assert isinstance(device, torch.device) and device.type == expected



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
    with pytest.raises(ValueError, match=r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 1.5"):
        set_seed(1.5)


def test_set_seed_takes_numpy_ints():
    set_seed(np.int64(7))
    first = draw()
    set_seed(7)
    assert draw() == first
