"""Notebook 10's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel, no training). A check accepts the right answer, rejects wrong ones and
says what it expected when an answer has the wrong type or shape."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import helpers
from tests.notebook_code import notebook_namespace

NOTEBOOK = "10_rotary_position_embedding.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"D", "T", "_number", "check_1", "check_2", "check_3", "check_4"})


WRONGLY_TYPED = ["a lot", {"pairs": 46}, object(), [None], 3.5j]


def is_hint(verdict: str) -> bool:
    return verdict.startswith("not quite")


# ------------------------------------------------------------------ exercise 1: score from the offset
def score_by_rotating_both(q, k, offset):
    m = 17
    qm = helpers.apply_rotary(q[None], torch.tensor([m]))
    kn = helpers.apply_rotary(k[None], torch.tensor([m - offset]))
    return (qm @ kn.T).item()


def test_check_1_accepts_scores_from_the_offset(nb):
    assert nb["check_1"](score_by_rotating_both) == "correct"
    rotate_k = lambda q, k, offset: q @ helpers.apply_rotary(k[None], torch.tensor([-offset]))[0]
    assert nb["check_1"](rotate_k) == "correct"
    rotate_q = lambda q, k, offset: helpers.apply_rotary(q[None], torch.tensor([offset]))[0] @ k
    assert nb["check_1"](rotate_q) == "correct"


@pytest.mark.parametrize("wrong", [
    lambda q, k, offset: q @ helpers.apply_rotary(k[None], torch.tensor([offset]))[0],  # sign of the offset
    lambda q, k, offset: q @ k,  # no rotation
    lambda q, k, offset: q @ helpers.apply_rotary(k[None], torch.tensor([-offset]), interleaved=True)[0],
    lambda q, k, offset: (q @ helpers.apply_rotary(k[None], torch.tensor([-offset]))[0]) / math.sqrt(len(q)),
])
def test_check_1_rejects_wrong_scores(nb, wrong):
    assert is_hint(nb["check_1"](wrong))


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [lambda q, k: 0.0, lambda q, k, o: "x",
                                                    lambda q, k, o: q[:3] @ k])
def test_check_1_explains_wrong_types(nb, answer):
    verdict = nb["check_1"](answer)
    assert is_hint(verdict) and ("expected" in verdict or "raised" in verdict)


# ------------------------------------------------------------------ exercise 2: layout permutation
def test_check_2_accepts_the_inverse_permutation_in_any_container(nb):
    right = [0, 2, 4, 6, 1, 3, 5, 7]
    for answer in (right, tuple(right), torch.tensor(right), np.array(right)):
        assert nb["check_2"](answer) == "correct"


@pytest.mark.parametrize("wrong", [
    [0, 4, 1, 5, 2, 6, 3, 7],  # perm itself: the other direction
    list(range(8)),  # no reordering
    [1, 3, 5, 7, 0, 2, 4, 6],  # the pairs' features swapped: rotations turn the other way
    [2, 4, 6, 0, 3, 5, 7, 1],  # pairs shifted to other frequencies
])
def test_check_2_rejects_wrong_permutations(nb, wrong):
    assert is_hint(nb["check_2"](wrong))


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [[0, 1, 2], [0.0, 2, 4, 6, 1, 3, 5, 7],
                                                    [0, 0, 4, 6, 1, 3, 5, 7], [[0, 2, 4, 6, 1, 3, 5, 7]]])
def test_check_2_explains_wrong_types_and_shapes(nb, answer):
    verdict = nb["check_2"](answer)
    assert is_hint(verdict) and "expected" in verdict


# ------------------------------------------------------------------ exercise 3: LLaMA 2 pairs
def test_check_3_accepts_46_only(nb):
    # 2π · 10000^(2i/128) ≤ 4096  ⇔  i ≤ 64 · log(4096 / 2π) / log(10000) = 45.03
    assert 64 * math.log(4096 / (2 * math.pi)) / math.log(10000) == pytest.approx(45.03, abs=0.01)
    for answer in (46, np.int64(46), torch.tensor(46)):
        assert nb["check_3"](answer) == "correct"
    for wrong in (45, 47, 64, 0, -46):
        assert is_hint(nb["check_3"](wrong))


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [46.0, True, torch.tensor([46, 1])])
def test_check_3_explains_wrong_types(nb, answer):
    verdict = nb["check_3"](answer)
    assert is_hint(verdict) and "expected" in verdict


# ------------------------------------------------------------------ exercise 4: order-free guess
def order_free_by_enumeration(V: int) -> float:
    """Every triple of V tokens, equally likely: the most frequent one is right (its count)/3."""
    triples = [(x, y, z) for x in range(V) for y in range(V) for z in range(V)]
    return sum(max(t.count(v) for v in t) / 3 for t in triples) / V**3


def test_check_4_accepts_the_exact_probability_for_every_vocabulary(nb):
    assert order_free_by_enumeration(10) == pytest.approx(0.43)  # the value the notebook prints
    closed_form = lambda V: (V * V + 3 * V - 1) / (3 * V * V)
    for V in (1, 2, 3, 7, 10, 26):
        assert closed_form(V) == pytest.approx(order_free_by_enumeration(V), rel=1e-12)
    for answer in (closed_form, lambda V: np.float64(closed_form(V)), lambda V: torch.tensor(closed_form(V), dtype=torch.float64),
                   lambda V: (V - 1) * (V - 2) / (3 * V * V) + 2 * (V - 1) / V**2 + 1 / V**2):
        assert nb["check_4"](answer) == "correct"


@pytest.mark.parametrize("wrong", [
    lambda V: 0.43,  # read off the figure: right for V = 10 only
    lambda V: 1 / 3,  # ties forgotten
    lambda V: (V - 1) * (V - 2) / (3 * V * V) + (V - 1) / V**2 + 1 / V**2,  # a pair right 1/3 of the time
    lambda V: (V - 1) * (V - 2) / (3 * V * V) + 2 * (V - 1) / V**2,  # all three equal forgotten
    lambda V: 1 / V,  # chance
    lambda V: (V * V + 3 * V - 1) / (3 * V * V) + 1e-4,
])
def test_check_4_rejects_wrong_reasoning(nb, wrong):
    assert is_hint(nb["check_4"](wrong))


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [0.43, True, torch.tensor([0.43, 0.2]),
                                                    lambda: 0.43, lambda V: "0.43", lambda V: [0.43],
                                                    lambda V: 0.43j, lambda V: 1 / (V - 1)])
def test_check_4_explains_wrong_types(nb, answer):
    verdict = nb["check_4"](answer)
    assert is_hint(verdict) and ("expected" in verdict or "raised" in verdict), verdict


def test_the_notebook_constants_are_what_the_checks_assume(nb):
    assert (nb["D"], nb["T"]) == (8, 12)


@pytest.mark.parametrize("answer", [
    torch.tensor([0, 2, 4, 6, 1, 3, 5, 7], dtype=torch.bool),
    torch.tensor([0, 2, 4, 6, 1, 3, 5, 7], dtype=torch.complex64),
    np.array([0, 2, 4, 6, 1, 3, 5, 7], dtype=np.complex128),
    np.array([0.0, 2, 4, 6, 1, 3, 5, 7]), np.array(list("02461357")),
    torch.tensor([0, 2, 4, 6, 1, 3, 5, 7], device="meta"),
])
def test_check_2_refuses_non_integer_tensors_of_any_dtype(nb, answer):
    verdict = nb["check_2"](answer)
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_2_accepts_any_integer_dtype(nb):
    right = [0, 2, 4, 6, 1, 3, 5, 7]
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):  # uint8 would index as a mask
        assert nb["check_2"](torch.tensor(right, dtype=dtype)) == "correct", dtype
    for dtype in (np.int32, np.uint8):
        assert nb["check_2"](np.array(right, dtype=dtype)) == "correct", dtype
    assert nb["check_2"]([np.int64(i) for i in right]) == "correct"
