"""Notebook 01's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel): a check accepts its solution, rejects wrong answers — including
those that only look right on this data — and never crashes on a wrongly typed answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.notebook_code import notebook_namespace

NOTEBOOK = "01_queries_keys_values.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"scores", "values", "_number", "check_2", "check_3"})


WRONGLY_TYPED = ["two", {"key": 2}, object(), [None, None], [[0, 0, "1", 0]], print]


def test_the_notebook_data_is_what_the_checks_assume(nb):
    assert nb["values"].shape == (4, 2) and nb["scores"].shape == (3, 4)


@pytest.mark.parametrize("answer", [
    torch.tensor([[0.0, 0.0, 1.0, 0.0]]), [[0, 0, 1, 0]], [0.0, 0.0, 1.0, 0.0],
    np.array([[0.0, 0.0, 1.0, 0.0]]), torch.tensor([[0.0, 0.0, 1.0, 0.0]], dtype=torch.float64),
])
def test_check_2_accepts_the_one_hot_weights(nb, answer):
    assert nb["check_2"](answer) == "correct"


@pytest.mark.parametrize("answer", [
    [[0.0, 0.5, 0.0, 0.5]],  # the example: Σ w_i·i = 2, so w @ values == values[2] here
    [[0.25, 0.0, 0.25, 0.5]],  # the same trick, three keys
    [[0.0, 0.25, 0.5, 0.25]],
    [[0.5, -0.5, 0.5, 0.5]],  # sums to 1 and returns values[2], but a weight is negative
    [[0.0, 0.0, 2.0, -1.0]],
    [[0.25, 0.25, 0.25, 0.25]],  # average pooling
    [[0.0, 1.0, 0.0, 0.0]],  # the wrong key
    [[0.0, 0.0, 0.5, 0.0]],  # does not sum to 1
    [[0.0, 0.0, float("nan"), 0.0]],
])
def test_check_2_rejects_wrong_weights(nb, answer):
    answer = torch.tensor(answer)
    verdict = nb["check_2"](answer)
    assert verdict.startswith("not quite"), (answer, verdict)


def test_check_2_explains_the_answers_that_only_work_on_these_values(nb):
    answer = torch.tensor([[0.0, 0.5, 0.0, 0.5]])
    assert torch.equal(answer @ nb["values"], nb["values"][2:3])  # why the old check passed it
    assert "whatever the values are" in nb["check_2"](answer)
    assert "non-negative" in nb["check_2"](torch.tensor([[0.5, -0.5, 0.5, 0.5]]))


@pytest.mark.parametrize("answer", [torch.zeros(2, 4), torch.zeros(1, 3), torch.tensor(1.0), [1.0]])
def test_check_2_names_the_expected_shape(nb, answer):
    verdict = nb["check_2"](answer)
    assert verdict.startswith("not quite") and "(1, 4)" in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED)
def test_check_2_survives_wrongly_typed_answers(nb, answer):
    verdict = nb["check_2"](answer)
    assert verdict.startswith("not quite") and "expected" in verdict, verdict


def test_checks_say_not_answered_for_none(nb):
    assert nb["check_2"](None) == nb["check_3"](None) == "not answered yet"


def weight_on_key_0(scores, tau):
    """exp(s_0/τ) / Σ_j exp(s_j/τ) for the first query, in float64."""
    s = scores[0].double() / tau
    return (torch.exp(s[0]) / torch.exp(s).sum()).item()


def test_check_3_accepts_the_largest_temperature_rounded_down(nb):
    scores = nb["scores"]
    assert weight_on_key_0(scores, 0.52) >= 0.9 > weight_on_key_0(scores, 0.53)
    for answer in (0.52, "0.52", np.float64(0.52), torch.tensor(0.52), 0.525):
        assert nb["check_3"](answer) == "correct", answer


@pytest.mark.parametrize("answer", [0.53, 0.6, 1.0, 10.0])
def test_check_3_rejects_temperatures_that_give_key_0_less_than_0_9(nb, answer):
    assert weight_on_key_0(nb["scores"], answer) < 0.9
    verdict = nb["check_3"](answer)
    assert verdict.startswith("not quite") and "only" in verdict, verdict


@pytest.mark.parametrize("answer", [0.5, 0.3, 0.01])
def test_check_3_rejects_temperatures_that_are_not_the_largest(nb, answer):
    assert weight_on_key_0(nb["scores"], answer) >= 0.9
    verdict = nb["check_3"](answer)
    assert verdict.startswith("not quite") and "larger" in verdict, verdict


@pytest.mark.parametrize("answer", [0, -0.52, float("nan"), float("inf")])
def test_check_3_rejects_impossible_temperatures(nb, answer):
    verdict = nb["check_3"](answer)
    assert verdict.startswith("not quite") and "> 0" in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [[0.52], torch.tensor([0.5, 0.6])])
def test_check_3_survives_wrongly_typed_answers(nb, answer):
    verdict = nb["check_3"](answer)
    assert verdict.startswith("not quite") and "expected" in verdict, verdict


@pytest.mark.parametrize("answer", [
    torch.tensor([[0, 0, 1 + 0j, 0]]), np.array([[0, 0, 1, 0]], dtype=complex),  # were cast to real: correct
    torch.tensor([[False, False, True, False]]), [[False, False, True, False]],  # a mask, not weights
    torch.empty(1, 4, device="meta"),  # crashed
])
def test_check_2_refuses_complex_bool_and_meta_weights(nb, answer):
    verdict = nb["check_2"](answer)
    assert verdict.startswith("not quite") and "expected" in verdict, verdict


@pytest.mark.parametrize("answer", [torch.tensor(0.52 + 0j), np.complex128(0.52), torch.tensor(0.52, device="meta"),
                                    np.True_, torch.tensor(True), 10**400])
def test_check_3_refuses_complex_bool_and_meta_numbers(nb, answer):
    verdict = nb["check_3"](answer)  # the complex ones were correct, the meta tensor crashed
    assert verdict.startswith("not quite") and "expected" in verdict, verdict
