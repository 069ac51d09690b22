"""Notebook 07's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel). A rotation matrix in float32 is right too; complex
or meta answers are refused without crashing."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.notebook_code import notebook_namespace

NOTEBOOK = "07_self_attention_and_positional_encoding.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"num_steps", "encoding_dim", "i", "omega", "P", "pairs", "_number",
                                         "check_1", "check_2", "check_3"})


def is_hint(verdict: object) -> bool:
    return isinstance(verdict, str) and verdict.startswith("not quite")


def pair_closest_to_100() -> int:
    return int(torch.argmin((2 * torch.pi * 10000 ** (torch.arange(32) * 2 / 64) - 100).abs()))


def test_check_1(nb):
    j = pair_closest_to_100()
    for answer in (j, np.int64(j), torch.tensor(j)):
        assert nb["check_1"](answer) == "correct", answer
    for wrong in (j - 1, j + 1, j + 0.5):
        assert is_hint(nb["check_1"](wrong)), wrong
    for odd in (torch.tensor(j, device="meta"), torch.tensor(complex(j)), torch.tensor([j]), str(j)):
        verdict = nb["check_1"](odd)
        assert is_hint(verdict) and "expected" in verdict, (odd, verdict)


def rotation(delta: float) -> torch.Tensor:
    theta = delta / 10000 ** (2 / 32)  # δ·ω_1
    c, s = math.cos(theta), math.sin(theta)
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)  # (sin, cos) → shifted by δ


def test_check_2_accepts_the_rotation_in_float64_and_float32(nb):
    m = rotation(3)
    for answer in (m, m.tolist(), m.numpy(), m.float(), m.float().numpy()):
        assert nb["check_2"](answer) == "correct"
    for wrong in (m.T, rotation(1), m[[1, 0]], m + 1e-4):
        assert is_hint(nb["check_2"](wrong))


@pytest.mark.parametrize("make", [lambda m: m.to(torch.complex128),  # was cast to real: accepted
                                  lambda m: m.numpy().astype(complex), lambda m: torch.empty(2, 2, device="meta")])
def test_check_2_refuses_complex_and_meta(nb, make):
    verdict = nb["check_2"](make(rotation(3)))
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_3(nb):
    dot = float(nb["P"][10] @ nb["P"][15])
    for answer in (dot, np.float64(dot), nb["P"][10] @ nb["P"][15], np.float32(dot)):
        assert nb["check_3"](answer).startswith("correct"), answer
    for wrong in (float(nb["P"][10] @ nb["P"][14]), float(nb["P"][10] @ nb["P"][10]), -dot):
        assert is_hint(nb["check_3"](wrong)), wrong
    for odd in (torch.tensor(dot, device="meta"), complex(dot), torch.tensor(complex(dot)), str(dot)):
        verdict = nb["check_3"](odd)  # the meta tensor crashed
        assert is_hint(verdict) and "expected" in verdict, (odd, verdict)
