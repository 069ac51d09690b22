"""Notebook 05's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel; an untrained model stands in for the trained one: the checks compute
their answer from the same ``model``). Complex numbers and meta tensors must not slip through a
cast, and no answer may crash a check."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import seq2seq as s2s
from tests.notebook_code import notebook_namespace

NOTEBOOK = "05_bahdanau_attention.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"device", "model", "_number", "check_1", "check_2", "check_3"})


def is_hint(verdict: object) -> bool:
    return isinstance(verdict, str) and verdict.startswith("not quite")


def position(nb) -> int:
    return int(s2s.predict(nb["model"], "07.11.1950")[1][5].argmax()) + 1


def context(nb) -> torch.Tensor:
    with torch.no_grad():
        src, lens = s2s.encode_sources(["3 May 1998"], nb["device"])
        enc, _ = nb["model"].encoder(src, lens)
    return s2s.predict(nb["model"], "3 May 1998")[1][0].to(nb["device"]) @ enc[0]


def accuracy(nb) -> float:
    future = s2s.make_dates(200, seed=7, years=(2100, 2199))
    return s2s.exact_match(nb["model"], future.texts, future.targets)


def test_check_1_takes_an_int_of_any_integer_type(nb):
    p = position(nb)
    for answer in (p, np.int64(p), torch.tensor(p)):
        assert nb["check_1"](answer) == "correct", answer
    assert is_hint(nb["check_1"](p - 1 if p > 1 else p + 1))


@pytest.mark.parametrize("make", [float, lambda p: torch.tensor([p]), lambda p: torch.tensor(p, device="meta"),
                                  lambda p: torch.tensor(complex(p)), lambda p: True])
def test_check_1_refuses_what_is_not_an_int(nb, make):
    verdict = nb["check_1"](make(position(nb)))
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_2_accepts_the_context_in_any_real_container(nb):
    c = context(nb)
    for answer in (c, c.tolist(), c.cpu().numpy(), c.double(), c.clone().requires_grad_(True)):
        assert nb["check_2"](answer) == "correct"
    assert is_hint(nb["check_2"](c + 1e-3))


@pytest.mark.parametrize("make", [lambda c: c.to(torch.complex64),  # was cast to real: accepted
                                  lambda c: c.cpu().numpy().astype(complex),
                                  lambda c: torch.empty(c.shape, device="meta"),  # crashed
                                  lambda c: c.bool()])
def test_check_2_refuses_complex_bool_and_meta_tensors(nb, make):
    verdict = nb["check_2"](make(context(nb)))
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_3_takes_a_real_number_only(nb):
    a = accuracy(nb)
    for answer in (a, np.float32(a), torch.tensor(a)):
        assert nb["check_3"](answer) == "correct", answer
    for answer in (complex(a), np.complex128(a), torch.tensor(complex(a)), torch.tensor(a, device="meta"),
                   str(a), [a]):
        verdict = nb["check_3"](answer)
        assert is_hint(verdict) and "expected" in verdict, (answer, verdict)
