"""Notebook 09's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel). Check 1 must try the rows the exercise warns about (a part, or both
parts, with no visible key) and take a merge in any floating dtype without crashing; checks 2
and 3 take an integer of any integer type (not a bool, not a float). Section 5's timing loop runs its
GPU branch's failure paths on the CPU: a path out of memory, a backend refused, a wrong path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import tiling
from tests.notebook_code import notebook_namespace

NOTEBOOK = "09_attention_at_scale.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"_online", "check_1", "check_2", "check_3"})


def is_hint(verdict: object) -> bool:
    return isinstance(verdict, str) and verdict.startswith("not quite")


# ------------------------------------------------------------------ exercise 1: merge two states
def guarded_merge(a, b):
    m = torch.maximum(a.max, b.max)
    shift = m.masked_fill(m == -math.inf, 0.0)  # a row that saw nothing in either part
    sa, sb = torch.exp(a.max - shift), torch.exp(b.max - shift)
    return tiling.OnlineSoftmax(m, sa * a.sum + sb * b.sum, sa * a.out + sb * b.out)


def unguarded_merge(a, b):  # the textbook formula: exp(−∞ − (−∞)) = NaN when both saw nothing
    m = torch.maximum(a.max, b.max)
    sa, sb = torch.exp(a.max - m), torch.exp(b.max - m)
    return tiling.OnlineSoftmax(m, sa * a.sum + sb * b.sum, sa * a.out + sb * b.out)


def wrong_sign_merge(a, b):  # rescales by exp(m − its max) instead of exp(its max − m)
    m = torch.maximum(a.max, b.max)
    shift = m.masked_fill(m == -math.inf, 0.0)
    sa = torch.exp(shift - a.max.masked_fill(a.max == -math.inf, 0.0))
    sb = torch.exp(shift - b.max.masked_fill(b.max == -math.inf, 0.0))
    return tiling.OnlineSoftmax(m, sa * a.sum + sb * b.sum, sa * a.out + sb * b.out)


def in_dtype(merge, dtype):
    def cast(state):
        return tiling.OnlineSoftmax(*(t.to(dtype) for t in state))
    return lambda a, b: merge(cast(a), cast(b))


def test_unguarded_merge_is_wrong_only_when_both_parts_saw_nothing():
    # why the check must try that row: elsewhere the unguarded formula is right
    x = torch.randn(3, 10, dtype=torch.float64)
    x[0, :4] = -math.inf  # one part empty: fine without the guard
    x[1] = -math.inf  # both parts empty: NaN without the guard
    vals = torch.randn(10, 2, dtype=torch.float64)

    def part(s, v):
        return tiling.online_softmax_update(tiling.online_softmax_start((3,), 2, dtype=s.dtype), s, v)

    a, b = part(x[:, :4], vals[:4]), part(x[:, 4:], vals[4:])
    bad = tiling.online_softmax_result(unguarded_merge(a, b))
    good = tiling.online_softmax_result(guarded_merge(a, b))
    assert torch.isnan(bad[1]).all() and torch.allclose(bad[[0, 2]], good[[0, 2]])
    assert torch.equal(good[1], torch.zeros(2))


def test_check_1_accepts_the_guarded_merge(nb):
    assert nb["check_1"](guarded_merge) == "correct"
    assert nb["check_1"](lambda a, b: tuple(guarded_merge(a, b))) == "correct"


def test_check_1_rejects_the_unguarded_merge(nb):
    verdict = nb["check_1"](unguarded_merge)
    assert is_hint(verdict) and "−∞" in verdict, verdict


@pytest.mark.parametrize("wrong", [
    lambda a, b: a,  # forgets b
    lambda a, b: tiling.OnlineSoftmax(torch.maximum(a.max, b.max), a.sum + b.sum, a.out + b.out),  # no rescaling
    wrong_sign_merge,
    lambda a, b: tiling.OnlineSoftmax(  # a guard that puts weight 1 on an empty row
        *unguarded_merge(a, b)[:1], *(t.nan_to_num(1.0) for t in unguarded_merge(a, b)[1:])),
])
def test_check_1_rejects_wrong_merges(nb, wrong):
    assert is_hint(nb["check_1"](wrong))


def test_check_1_accepts_a_right_merge_in_float32(nb):
    assert nb["check_1"](in_dtype(guarded_merge, torch.float32)) == "correct"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_check_1_does_not_crash_on_half_precision(nb, dtype):
    verdict = nb["check_1"](in_dtype(guarded_merge, dtype))
    assert is_hint(verdict), verdict


@pytest.mark.parametrize("answer", [
    in_dtype(unguarded_merge, torch.float32),
    lambda a, b: tiling.OnlineSoftmax(*(t.to(torch.complex128) for t in guarded_merge(a, b))),
    lambda a, b: tuple(t.to(torch.complex128) for t in guarded_merge(a, b)),
    lambda a, b: tuple(t.long() for t in guarded_merge(a, b)),
    lambda a, b: None, lambda a, b: "state", lambda a, b: 1 / 0, lambda a: a,
    lambda a, b: (a.max, a.sum), 3, "merge",
])
def test_check_1_explains_other_answers(nb, answer):
    assert is_hint(nb["check_1"](answer))


# ------------------------------------------------------------------ exercises 2 and 3: integers
TILES = 16 * 17 // 2  # ⌈1000/64⌉ = 16 blocks a side; the tiles on or below the diagonal
CACHE = 2 * 24 * 4 * 64 * 2 * 8 * 2048  # K and V · layers · K/V heads · head size · bytes · batch · tokens


def test_the_answers_are_what_the_checks_compute():
    assert int((tiling.tile_kinds(1000, 1000, 64, causal=True) != tiling.SKIPPED).sum()) == TILES


@pytest.mark.parametrize("name, right", [("check_2", TILES), ("check_3", CACHE)])
def test_checks_2_and_3_accept_any_integer_type(nb, name, right):
    for answer in (right, np.int64(right), np.int32(right) if right < 2**31 else np.uint64(right),
                   torch.tensor(right), torch.tensor(right, dtype=torch.int32 if right < 2**31 else torch.int64)):
        assert nb[name](answer) == "correct", (answer, nb[name](answer))


@pytest.mark.parametrize("name, right", [("check_2", TILES), ("check_3", CACHE)])
def test_checks_2_and_3_reject_other_numbers(nb, name, right):
    for answer in (right - 1, right + 1, np.int64(right + 1), torch.tensor(right - 1), right // 2):
        assert is_hint(nb[name](answer)), answer
    for answer in (float(right), right + 0.5, np.float64(right), torch.tensor(float(right)),
                   torch.tensor([right]), True, np.True_, torch.tensor(True), str(right),
                   complex(right), torch.tensor(right + 0j), math.nan, [right]):
        verdict = nb[name](answer)
        assert is_hint(verdict) and "int" in verdict, (answer, verdict)


def test_checks_say_not_answered_for_none(nb):
    assert {nb[f"check_{n}"](None) for n in (1, 2, 3)} == {"not answered yet"}


def test_the_notebooks_own_solution_is_still_correct():
    nb = notebook_namespace(NOTEBOOK, {"_online", "check_1", "solution_1"})
    assert nb["check_1"](nb["solution_1"]) == "correct"


# ------------------------------------------- section 5: the timing loop, its GPU branch on CPU
@pytest.fixture(scope="module")
def timing():
    return notebook_namespace(NOTEBOOK, {"time_paths", "median_seconds", "seconds", "naive_attention"},
                              {"device": torch.device("cpu")})


def out_of_memory_from(length):
    """A path that runs like SDPA until ``length``, then raises what CUDA raises when full."""
    def attend(q, k, v):
        if q.shape[-2] >= length:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        return F.scaled_dot_product_attention(q, k, v)
    return attend


def make_inputs(L):
    g = torch.Generator().manual_seed(L)
    return [torch.randn(1, 2, L, 8, generator=g) for _ in range(3)]


def test_timing_loop_leaves_a_path_that_runs_out_of_memory_blank_and_goes_on(timing):
    # what a T4 does at L = 8192 with the naive path: the figure gets NaN there, not a crash
    def refused(q, k, v):
        raise RuntimeError("No available kernel. Aborting execution.")  # a backend this GPU lacks

    timed = {"naive": out_of_memory_from(40), "SDPA": F.scaled_dot_product_attention,
             "refused": refused}
    times, agree = timing["time_paths"](timed, [16, 40, 64], make_inputs, atol=1e-5)
    assert agree  # at 40 and 64 the reference is SDPA, the first path that ran
    assert [math.isnan(t) for t in times["naive"]] == [False, True, True]
    assert all(t > 0 for t in times["SDPA"]) and all(math.isnan(t) for t in times["refused"])


def test_timing_loop_notices_a_path_that_disagrees(timing):
    timed = {"naive": timing["naive_attention"],
             "wrong": lambda q, k, v: timing["naive_attention"](q, k, v) + 1e-3}
    assert not timing["time_paths"](timed, [16], make_inputs, atol=1e-5)[1]
    timed = {"naive": timing["naive_attention"], "SDPA": F.scaled_dot_product_attention}
    assert timing["time_paths"](timed, [16, 33], make_inputs, atol=1e-5)[1]


def test_timing_loop_with_every_path_out_of_memory_reports_no_disagreement(timing):
    times, agree = timing["time_paths"]({"naive": out_of_memory_from(1)}, [8], make_inputs, atol=1e-5)
    assert agree and math.isnan(times["naive"][0])
