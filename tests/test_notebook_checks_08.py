"""Notebook 08's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel, no training: an untrained model and a fixed evaluation batch stand in
for ``run``; the checks compute their answer from the same names)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import induction
from tests.notebook_code import notebook_namespace

NOTEBOOK = "08_causal_attention_and_the_transformer_block.ipynb"


@pytest.fixture(scope="module")
def nb():
    task = induction.CopyTask()
    run = SimpleNamespace(model=induction.make_model(task), eval_batch=task.sample(128, torch.Generator().manual_seed(1)))
    return notebook_namespace(NOTEBOOK, {"device", "task", "shown", "without_attention", "evaluation", "_number",
                                         "check_1", "check_2", "check_3", "check_4"}, {"run": run})


def is_hint(verdict: object) -> bool:
    return isinstance(verdict, str) and verdict.startswith("not quite")


def test_check_1_wants_the_position_after_the_previous_occurrence(nb):
    target = int(induction.induction_targets(nb["shown"].tokens[2][None])[0, 12])
    for answer in (target, np.int64(target), torch.tensor(target)):
        assert nb["check_1"](answer) == "correct", answer
    assert "previous occurrence" in nb["check_1"](target - 1)
    for odd in (float(target), torch.tensor([target]), torch.tensor(target, device="meta"), np.True_):
        verdict = nb["check_1"](odd)  # the meta tensor crashed
        assert is_hint(verdict) and "expected" in verdict, (odd, verdict)


def test_check_2_wants_causal_and_valid(nb):
    mask = torch.ones(5, 5, dtype=torch.bool).tril() & (torch.arange(5) < 3)
    assert nb["check_2"](mask) == "correct" and nb["check_2"](mask.tolist()) == "correct"
    assert "True = ignore" in nb["check_2"](~mask)
    assert "padding" in nb["check_2"](torch.ones(5, 5, dtype=torch.bool).tril())
    assert is_hint(nb["check_2"](mask.T)) and "expected" in nb["check_2"](mask.long())


def honest_floor(evaluation, seen: int = 1) -> float:
    """The lowest loss without the future on the prefix, written out: at position t whose next
    token t + 1 comes before the copy, ln of the 16 − (t + seen) letters not seen yet, averaged."""
    logs = [math.log(16 - (t + seen)) for start in evaluation.copy_start.tolist() for t in range(start - 1)]
    return sum(logs) / len(logs)


def test_check_3_wants_the_loss_floor_computed(nb):
    floor = honest_floor(nb["evaluation"])
    assert 2.0 < floor < math.log(16)  # above 2 (the solution prints it), below guessing
    for answer in (floor, np.float32(floor), torch.tensor(floor), torch.tensor(floor, dtype=torch.float64)):
        assert nb["check_3"](answer).startswith("correct"), answer
    assert "t + 1 letters" in nb["check_3"](honest_floor(nb["evaluation"], seen=0))  # off by one
    assert "ln 16" in nb["check_3"](math.log(16))
    for wrong in (1, 0, -1, floor + 0.01, floor - 0.01):  # 1: the old guessable offset
        assert is_hint(nb["check_3"](wrong)), wrong


@pytest.mark.parametrize("answer", [torch.tensor(2.4, device="meta"), torch.tensor(2.4 + 0j), torch.tensor([2.4]),
                                    torch.tensor(True), np.True_, "2.4"])
def test_check_3_refuses_what_is_not_a_number(nb, answer):
    verdict = nb["check_3"](answer)
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_4_takes_a_real_number_only(nb):
    with torch.no_grad():
        model = nb["without_attention"](nb["run"].model, 2)
        acc = induction.copy_accuracy(model(nb["evaluation"].tokens), nb["evaluation"])
    for answer in (acc, np.float32(acc), torch.tensor(acc)):
        assert nb["check_4"](answer) == "correct", answer
    assert is_hint(nb["check_4"](acc + 0.05))
    for odd in (complex(acc), torch.tensor(complex(acc)), np.complex128(acc),  # the last two were accepted
                torch.tensor(acc, device="meta"), str(acc)):  # the meta tensor crashed
        verdict = nb["check_4"](odd)
        assert is_hint(verdict) and "expected" in verdict, (odd, verdict)
