"""Notebook 06's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel). One number is an int, a NumPy number or a 0-d tensor (not a
one-element tensor, a meta tensor or complex); a tensor answer holds real numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers as h
from tests.notebook_code import notebook_namespace

NOTEBOOK = "06_multihead_attention.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"device", "B", "Q", "K", "N", "H", "gen", "queries", "keys", "W_q",
                                         "W_k", "_number", "check_1", "check_2", "check_3"})


def is_hint(verdict: object) -> bool:
    return isinstance(verdict, str) and verdict.startswith("not quite")


PARAMS = 4 * 512 * 512  # four N × N projections, no biases


def test_check_1_counts_four_projections(nb):
    assert sum(p.numel() for p in h.MultiHeadAttention(512, 8).parameters()) == PARAMS
    for answer in (PARAMS, np.int64(PARAMS), torch.tensor(PARAMS), float(PARAMS)):
        assert nb["check_1"](answer) == "correct", answer
    for wrong in (4 * 512 * 513, 3 * 512 * 512, 4 * 512 * 64, PARAMS + 0.5):
        assert is_hint(nb["check_1"](wrong)), wrong


@pytest.mark.parametrize("answer", [torch.tensor(PARAMS, device="meta"), torch.tensor([PARAMS]),
                                    torch.tensor(complex(PARAMS)), np.True_, "1048576", 10**400])
def test_check_1_refuses_what_is_not_one_number(nb, answer):
    verdict = nb["check_1"](answer)
    assert is_hint(verdict) and "expected" in verdict, verdict


def head_scores(nb) -> torch.Tensor:
    B, Q, K, N, H = (nb[n] for n in "BQKNH")
    q = (nb["queries"] @ nb["W_q"].T).reshape(B, Q, H, N // H).transpose(1, 2)
    k = (nb["keys"] @ nb["W_k"].T).reshape(B, K, H, N // H).transpose(1, 2)
    return q @ k.transpose(-2, -1)  # (B, H, Q, K)


def test_check_2_wants_the_sum_over_the_heads_unscaled(nb):
    s = head_scores(nb)
    for answer in (s.sum(1), s.sum(1).tolist(), s.sum(1).cpu().numpy(), s.sum(1).double()):
        assert nb["check_2"](answer) == "correct"
    for wrong in (s.mean(1), s.sum(1) / math.sqrt(nb["N"] // nb["H"]), s[:, 0]):
        assert is_hint(nb["check_2"](wrong))


@pytest.mark.parametrize("make", [lambda s: torch.empty(s.shape, device="meta"),  # crashed
                                  lambda s: s.to(torch.complex64), lambda s: s.bool()])
def test_check_2_refuses_meta_complex_and_bool_tensors(nb, make):
    verdict = nb["check_2"](make(head_scores(nb).sum(1)))
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_3_wants_pytorchs_convention(nb):
    ignore = torch.arange(6) >= torch.tensor([2, 5])[:, None]  # True = ignore
    assert nb["check_3"](ignore) == "correct" and nb["check_3"](ignore.tolist()) == "correct"
    assert "convention" in nb["check_3"](~ignore)
    assert is_hint(nb["check_3"](torch.arange(6) > torch.tensor([2, 5])[:, None]))
    assert "expected" in nb["check_3"](ignore.long())
