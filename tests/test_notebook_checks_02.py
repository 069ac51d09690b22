"""Notebook 02's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel, no training: check 4's trained ``scalar`` model is replaced by one
with a fixed w). A check accepts the right answer, rejects wrong ones and says what it
expected when an answer has the wrong type."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers
from tests.notebook_code import notebook_namespace

NOTEBOOK = "02_attention_pooling.ipynb"
W = 6.92  # about what the notebook's scalar model learns


@pytest.fixture(scope="module")
def nb():
    scalar = helpers.NWKernelRegression(*_wide_pairs(), init=W)
    return notebook_namespace(
        NOTEBOOK,
        {"device", "data", "x_train", "y_train", "x_test", "y_truth", "wide", "test_mse", "_number",
         "check_1", "check_2", "check_3", "check_4"},
        {"scalar": scalar},
    )


def _wide_pairs():
    wide = helpers.make_regression_data(n_train=200, n_test=200, width=20.0)
    return wide.x_train, wide.y_train


def gaussian_nw_by_hand(x_train, y_train, x_query, bandwidth):
    """Σ_i exp(-((x - x_i)/σ)²/2) y_i / Σ_j exp(-((x - x_j)/σ)²/2), in float64."""
    d = (x_query.double()[:, None] - x_train.double()[None, :]) / bandwidth
    k = torch.exp(-(d**2) / 2 - (-(d**2) / 2).max(dim=1, keepdim=True).values)
    return (k / k.sum(1, keepdim=True)) @ y_train.double()


WRONGLY_TYPED = ["a lot", {"bandwidth": 0.1}, object(), [None], print]


def test_the_notebook_data_is_what_the_checks_assume(nb):
    assert nb["x_train"].shape == (50,) and nb["wide"].x_train.shape == (200,)
    assert torch.equal(nb["wide"].x_train.cpu(), _wide_pairs()[0])


# ------------------------------------------------------------------ exercise 1


def nearest_by_hand(x_train, y_train, x_query):
    return torch.stack([y_train[(x_train - q).abs().argmin()] for q in x_query])


def test_check_1_accepts_a_nearest_neighbour_function(nb):
    assert nb["check_1"](nearest_by_hand) == "correct"
    assert nb["check_1"](lambda xt, yt, xq: nearest_by_hand(xt, yt, xq).tolist()) == "correct"


@pytest.mark.parametrize("fn", [
    lambda xt, yt, xq: yt.mean().repeat(len(xq)),  # average pooling
    lambda xt, yt, xq: gaussian_nw_by_hand(xt, yt, xq, 0.25).float(),  # a wider kernel
    lambda xt, yt, xq: nearest_by_hand(xt, yt, xq) + 0.01,
])
def test_check_1_rejects_other_estimators(nb, fn):
    assert nb["check_1"](fn).startswith("not quite")


def test_check_1_says_what_went_wrong(nb):
    assert "expected one value per query" in nb["check_1"](lambda xt, yt, xq: yt)
    assert "raised ZeroDivisionError" in nb["check_1"](lambda xt, yt, xq: 1 / 0)
    assert nb["check_1"](lambda xt, yt, xq: "values").startswith("not quite")
    for answer in (3, "nearest", torch.zeros(3)):
        verdict = nb["check_1"](answer)
        assert verdict.startswith("not quite") and "expected a function" in verdict, verdict


# ------------------------------------------------------------------ exercise 2

GRID = [0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0]


def best_bandwidth(nb):
    errors = [torch.mean((gaussian_nw_by_hand(nb["x_train"], nb["y_train"], nb["x_test"], b)
                          - nb["y_truth"].double()) ** 2).item() for b in GRID]
    return GRID[errors.index(min(errors))]


def test_check_2_accepts_the_best_bandwidth_of_the_grid(nb):
    best = best_bandwidth(nb)
    assert nb["check_2"](best) == "correct"
    assert nb["check_2"](str(best)) == "correct" and nb["check_2"](torch.tensor(best)) == "correct"


def test_check_2_rejects_every_other_bandwidth(nb):
    best = best_bandwidth(nb)
    for b in GRID:
        if b != best:
            assert nb["check_2"](b).startswith("not quite"), b
    verdict = nb["check_2"](best + 0.01)  # not in the grid
    assert verdict.startswith("not quite") and "expected one of" in verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [[0.15]])
def test_check_2_survives_wrongly_typed_answers(nb, answer):
    verdict = nb["check_2"](answer)
    assert verdict.startswith("not quite") and "expected" in verdict, verdict


# ------------------------------------------------------------------ exercise 3


def boxcar_count(nb):
    return int(((nb["x_train"] - 2.5).abs() <= 0.5).sum())


def test_check_3_accepts_the_count(nb):
    n = boxcar_count(nb)
    assert nb["check_3"](n) == "correct" and nb["check_3"](float(n)) == "correct"


def test_check_3_rejects_wrong_counts(nb):
    n = boxcar_count(nb)
    for answer in (n - 1, n + 1, 0):
        assert nb["check_3"](answer).startswith("not quite"), answer
    verdict = nb["check_3"](n + 0.4)  # int() would have turned it into n
    assert verdict.startswith("not quite") and "whole number" in verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [[10]])
def test_check_3_survives_wrongly_typed_answers(nb, answer):
    verdict = nb["check_3"](answer)
    assert verdict.startswith("not quite") and "expected" in verdict, verdict


# ------------------------------------------------------------------ exercise 4


def test_check_4_accepts_one_over_w_to_three_figures(nb):
    assert nb["check_4"](float(f"{1 / W:.3g}")) == "correct"
    assert nb["check_4"](1 / W) == "correct"


@pytest.mark.parametrize("answer", [W, 0.1, 0.15, 1 / W * 1.05, 1 / W * 0.95, 1.0])
def test_check_4_rejects_other_bandwidths(nb, answer):
    assert nb["check_4"](answer).startswith("not quite"), answer


@pytest.mark.parametrize("answer", [0, -0.145, float("nan"), float("inf")])
def test_check_4_rejects_impossible_bandwidths(nb, answer):
    verdict = nb["check_4"](answer)
    assert verdict.startswith("not quite") and "> 0" in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [[0.145]])
def test_check_4_survives_wrongly_typed_answers(nb, answer):
    verdict = nb["check_4"](answer)
    assert verdict.startswith("not quite") and "expected" in verdict, verdict


def test_checks_say_not_answered_for_none(nb):
    assert {nb[f"check_{n}"](None) for n in (1, 2, 3, 4)} == {"not answered yet"}
    assert math.isclose(W, nb["scalar"].w.item(), rel_tol=1e-6)


def test_check_1_refuses_complex_and_meta_outputs(nb):
    # the complex output was cast to real (correct); the meta one crashed
    for fn in (lambda xt, yt, xq: nearest_by_hand(xt, yt, xq).to(torch.complex64),
               lambda xt, yt, xq: torch.empty(len(xq), device="meta")):
        verdict = nb["check_1"](fn)
        assert verdict.startswith("not quite") and "expected" in verdict, verdict


def test_number_checks_refuse_complex_and_meta_numbers(nb):
    # the right numbers as complex were cast to real (correct); the meta tensors crashed
    for name, right in (("check_2", best_bandwidth(nb)), ("check_3", boxcar_count(nb)), ("check_4", 1 / W)):
        assert nb[name](np.float32(right)) == "correct" and nb[name](torch.tensor(right)) == "correct"
        for answer in (torch.tensor(complex(right)), np.complex128(right), torch.tensor(right, device="meta"),
                       np.True_, [right]):
            verdict = nb[name](answer)
            assert verdict.startswith("not quite") and "expected" in verdict, (name, answer, verdict)
