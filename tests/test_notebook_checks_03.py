"""The exercise checks of notebook 03, called without a kernel: each must refuse wrong or
wrongly typed answers (saying what was expected, never raising) and accept right ones."""

from __future__ import annotations

import math
import operator

import pytest
import torch

import helpers as h
from tests.notebook_code import (
    assert_check_accepts, assert_check_refuses, checked_exercises, notebook_functions,
)

NOTEBOOK = "03_masked_softmax.ipynb"


@pytest.fixture(scope="module")
def checks() -> dict:
    return notebook_functions(NOTEBOOK, {"h": h, "torch": torch, "math": math, "operator": operator, "device": "cpu"})


def mean_by_bmm(values, valid_lens):  # exercise 4, solved with the helper
    zeros = torch.zeros(values.shape[0], 1, values.shape[1])
    return torch.bmm(h.masked_softmax(zeros, valid_lens), values).squeeze(1)


WRONG_ANSWERS = {
    "check_1": [432, "432", (4, 3, 2.5), (4.0, 3.0, 2.0), (4, 2, 3), [4, 3], torch.tensor([4, 3, 5]),
                torch.zeros(3, dtype=torch.long, device="meta")],  # crashed
    "check_2": ["0.731", [0.73], {}, 0.5, float("nan"), torch.zeros(2), object(),
                torch.tensor(0.7311 + 0j), torch.tensor(0.7311, device="meta")],  # correct; crashed
    "check_3": ["1234", 7, [1, 2, 3, 4], torch.arange(1, 5).repeat(2, 1).float(),
                torch.arange(1, 5).repeat(2, 1) + 1, torch.arange(4).repeat(2, 1),
                torch.ones(2, 4, dtype=torch.bool), [[1, 2], [3, 4]], [["a"] * 4] * 2,
                torch.zeros(2, 4, dtype=torch.long, device="meta")],  # crashed
    "check_4": [3, "mean", lambda v, n: 1 / 0, lambda v, n: v.mean(1), lambda v, n: "x",
                lambda v, n: v.sum(1), lambda v: v, lambda v, n: torch.zeros(3, 2, dtype=torch.long),
                lambda v, n: torch.empty(3, 2, device="meta")],  # crashed
    "check_5": ["1 2 3 4", [1.0, 2.0, 3.0], [[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0, 3.0, 4.0],
                [-float("inf"), -float("inf"), 0.0, 0.0], [float("nan")] * 4, [-5e5, -5e5, 0.0, 0.0],
                [1e39, 0.0, 0.0, 0.0], {"a": 1},
                torch.tensor([-2e6, -2e6, 0, 0], dtype=torch.complex64),  # was cast to real: correct
                torch.empty(4, device="meta")],  # crashed
}
RIGHT_ANSWERS = {
    "check_1": [(4, 3, 2), [4, 3, 2], torch.Size([4, 3, 2])],
    "check_2": [math.exp(2) / (math.exp(1) + math.exp(2)), 0.7311, torch.tensor(0.7311)],
    "check_3": [torch.arange(1, 5).repeat(2, 1), [[1, 2, 3, 4], [1, 2, 3, 4]],
                torch.arange(1, 5).repeat(2, 1).to(torch.uint8)],
    "check_4": [mean_by_bmm],
    "check_5": [[-2e6, -2e6, 0.0, 0.0], [-2e6, -2e6, -3e6, -3e6], torch.tensor([-5e6, -3e6, 1.0, 2.0])],
}


@pytest.mark.parametrize("name", sorted(WRONG_ANSWERS))
def test_notebook_checks_reject_wrong_answers_without_crashing(checks, name):
    assert_check_refuses(checks[name], WRONG_ANSWERS[name], wrong_type=object())


@pytest.mark.parametrize("name", sorted(RIGHT_ANSWERS))
def test_notebook_checks_accept_right_answers(checks, name):
    assert_check_accepts(checks[name], RIGHT_ANSWERS[name])


def test_every_checked_exercise_is_covered_here(checks):
    assert checked_exercises(checks) == set(WRONG_ANSWERS)
