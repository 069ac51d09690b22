"""Specs for the oldest helpers: device, checks, masking, attention, positional,
kernel_regression, plotting (see ``tests/fuzz/__init__.py`` for the format)."""

from __future__ import annotations

import torch

from helpers import device
from tests.fuzz import Spec


def _enter(manager):
    """Enter and leave a context manager; return what it gave."""
    with manager as value:
        return value


SPECS: list[Spec] = [
    Spec("helpers.device.get_device", call=device.get_device, good=dict,
         check=lambda out, kw: isinstance(out, torch.device)),
    Spec("helpers.device.set_seed", call=device.set_seed, good=lambda: dict(seed=3),
         rules={"seed": "seed"}),
    Spec("helpers.device.cpu_threads", call=lambda **kw: _enter(device.cpu_threads(**kw)),
         good=lambda: dict(num_threads=1), rules={"num_threads": "size or None"},
         check=lambda out, kw: out is None),
]
