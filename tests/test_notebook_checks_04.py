"""The exercise checks of notebook 04, called without a kernel: each must refuse wrong or
wrongly typed answers (saying what was expected, never raising) and accept right ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers as h
from helpers.widgets import scoring
from tests.notebook_code import (
    assert_check_accepts, assert_check_refuses, checked_exercises, notebook_functions,
)

NOTEBOOK = "04_scoring_functions.ipynb"


@pytest.fixture(scope="module")
def checks() -> dict:
    return notebook_functions(NOTEBOOK, {"h": h, "torch": torch, "math": math, "scoring": scoring, "device": "cpu"})


WRONG_ANSWERS = {
    "check_1": ["ten", [1, 2, 3], {"a": 1}, torch.zeros(2, 2), [10.0, 11.0, 12.0, 14.0], object(),
                torch.tensor([10, 11, 12, 13], dtype=torch.complex64),  # was cast to real: correct
                torch.empty(4, device="meta")],
    "check_2": ["48", [48], {}, -3, 0, 47, float("nan"), torch.zeros(3), torch.tensor(48 + 0j),
                np.complex128(48), torch.tensor(48.0, device="meta"), 10**400],  # correct; crashed
    "check_3": ["184", 184.0, 184.5, True, [184], 183, torch.tensor([1, 2]), torch.tensor([184]),
                torch.tensor(184, device="meta")],  # a one-element tensor was correct; crashed
    "check_4": [42, "f", lambda q, k, W: 1 / 0, lambda q, k, W: "scores",
                lambda q, k, W: torch.zeros(3, 4), lambda q, k, W: q @ W @ k.transpose(1, 2) + 1,
                lambda q, k: q, lambda q, k, W: torch.empty(3, 4, 5, device="meta")],  # crashed
}
RIGHT_ANSWERS = {
    "check_1": [torch.tensor([10.0, 11.0, 12.0, 13.0]), [10, 11, 12, 13]],
    "check_2": [48, 48.0, torch.tensor(48.0), np.float32(48), np.int64(48)],
    "check_3": [184, np.int64(184), torch.tensor(184)],
    "check_4": [lambda q, k, W: q @ W @ k.transpose(1, 2),
                lambda q, k, W: torch.einsum("bqi,ij,bkj->bqk", q, W, k)],
}


@pytest.mark.parametrize("name", sorted(WRONG_ANSWERS))
def test_notebook_checks_reject_wrong_answers_without_crashing(checks, name):
    assert_check_refuses(checks[name], WRONG_ANSWERS[name], wrong_type="text")


@pytest.mark.parametrize("name", sorted(RIGHT_ANSWERS))
def test_notebook_checks_accept_right_answers(checks, name):
    assert_check_accepts(checks[name], RIGHT_ANSWERS[name])


def test_every_checked_exercise_is_covered_here(checks):
    assert checked_exercises(checks) == set(WRONG_ANSWERS)
