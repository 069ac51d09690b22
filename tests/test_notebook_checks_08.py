"""Notebook 08's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel, no training: an untrained model, its W_o scaled up, and a fixed
evaluation batch stand in for ``run``; the checks compute their answer from the same names)."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import induction
from tests.notebook_code import notebook_namespace

NOTEBOOK = "08_causal_attention_and_the_transformer_block.ipynb"


def stand_in_model(task: induction.CopyTask) -> torch.nn.Module:
    """The untrained model with every W_o ten times larger, so that switching off one head changes
    a few predictions (an untrained model's heads barely move its argmax)."""
    model = induction.make_model(task)
    with torch.no_grad():
        for block in model.blocks:
            block.attention.W_o.weight.mul_(10)
    return model


@pytest.fixture(scope="module")
def nb():
    task = induction.CopyTask()
    run = SimpleNamespace(model=stand_in_model(task), eval_batch=task.sample(128, torch.Generator().manual_seed(1)))
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


def accuracy_without(nb, layer: int, head: int | None = None, rows: bool = False) -> float:
    """The copy accuracy of run.model with head ``head`` of layer ``layer`` (from 1) switched off,
    written out: its 32 columns of W_o zeroed (``rows``: its 32 rows, the wrong axis); ``head``
    None: the whole layer, bias included (``without_attention``)."""
    model = copy.deepcopy(nb["run"].model)
    W_o = model.blocks[layer - 1].attention.W_o
    with torch.no_grad():
        if head is None:
            W_o.weight.zero_()
            W_o.bias.zero_()
        elif rows:
            W_o.weight[32 * (head - 1): 32 * head] = 0
        else:
            W_o.weight[:, 32 * (head - 1): 32 * head] = 0
        return induction.copy_accuracy(model(nb["evaluation"].tokens), nb["evaluation"])


def head_table(nb, rows: bool = False) -> torch.Tensor:
    return torch.tensor([[accuracy_without(nb, layer, head, rows) for head in (1, 2)] for layer in (1, 2)])


def test_check_4_wants_each_single_head_switched_off(nb):
    table = head_table(nb)
    for answer in (table, table.tolist(), table.numpy(), table.double(), table + 0.003,
                   table.clone().requires_grad_(True)):
        assert nb["check_4"](answer) == "correct", answer
    layers = torch.tensor([[accuracy_without(nb, layer)] * 2 for layer in (1, 2)])
    for wrong, hint in ((layers, "whole layer"), (table.T, "rows are layers"),
                        (head_table(nb, rows=True), "columns, not rows"), (100 * table, "percentage")):
        assert (wrong - table).abs().max() >= 0.004  # the stand-in tells them apart
        assert hint in nb["check_4"](wrong), (hint, nb["check_4"](wrong))
    for wrong in (table + 0.01, table.flip(1), torch.zeros(2, 2), torch.full((2, 2), math.nan)):
        verdict = nb["check_4"](wrong)
        assert is_hint(verdict) and "0.0" not in verdict and "1.0" not in verdict, verdict  # no number given away


@pytest.mark.parametrize("answer", ["0.5", 0.5, [0.5, 0.5], torch.zeros(2, 3), torch.zeros(2, 2, dtype=torch.bool),
                                    torch.zeros(2, 2, dtype=torch.complex64), torch.zeros(2, 2, device="meta"),
                                    [[1, 2], [3]], np.array([["a", "b"], ["c", "d"]]), lambda: 0])
def test_check_4_refuses_what_is_not_a_2_by_2_table(nb, answer):
    verdict = nb["check_4"](answer)  # a meta tensor, a ragged list or a string array must not crash it
    assert is_hint(verdict) and "expected a (2, 2) tensor" in verdict, verdict
