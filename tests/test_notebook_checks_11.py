"""Notebook 11's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel, no training). A check accepts the right answer in the types a reader
may give it, rejects the classic mistakes with the hint meant for each, and answers oddly typed
answers with a "not quite" that says what it expected (never a crash, never "correct")."""

from __future__ import annotations

import math

import nbformat
import numpy as np
import pytest
import torch

import helpers as h
from helpers import latent_attention as mla
from tests.notebook_code import ROOT, notebook_namespace

NOTEBOOK = "11_windows_sinks_and_latent_attention.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"_number", "check_1", "check_2", "check_3", "check_4"})


WRONGLY_TYPED = ["a lot", {"layers": 32}, object(), [None], 3.5j]
META = torch.empty((), device="meta")


def is_hint(verdict: str) -> bool:
    return verdict.startswith("not quite")


def test_none_is_not_answered_yet(nb):
    for n in range(1, 5):
        assert nb[f"check_{n}"](None) == "not answered yet"


def test_the_stored_solutions_print_correct():
    """Each solution cell's stored output ends with the check's verdict "correct"."""
    cells = nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4).cells
    verdicts = {}
    for cell in cells:
        if cell.cell_type == "code" and cell.source.startswith("#@title Solution to exercise"):
            n = int(cell.source.splitlines()[0].split()[-1])
            text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
            verdicts[n] = text.split()[-1] if text.split() else ""
    assert verdicts == {1: "correct", 2: "correct", 3: "correct", 4: "correct"}


# ------------------------------------------------------------------ exercise 1: a stack of windows' reach
RIGHT_1 = 32 * (4096 - 1)


def test_the_reach_is_32_times_4095():
    """Compose 32 causal windows of W = 4 (reach 3 each) on a short sequence: output m depends on
    input n exactly when 0 ≤ m − n ≤ 32 · 3."""
    L, W, layers = 200, 4, 32
    i = torch.arange(L)
    one = ((i[:, None] - i[None, :] >= 0) & (i[:, None] - i[None, :] < W)).double()  # (m, n)
    reach = torch.linalg.matrix_power(one, layers) > 0
    assert int((i[:, None] - i[None, :])[reach].max()) == layers * (W - 1)
    assert RIGHT_1 == 131040


def test_check_1_accepts_the_reach_as_an_integer(nb):
    for answer in (RIGHT_1, np.int64(RIGHT_1), np.int32(RIGHT_1), torch.tensor(RIGHT_1),
                   torch.tensor(RIGHT_1, dtype=torch.int32), np.array(RIGHT_1), 32 * 4095):
        assert nb["check_1"](answer) == "correct", answer


def test_check_1_takes_a_whole_float_as_the_integer(nb):
    """The check converts with ``got != int(got)``: a whole float is the integer (as in notebooks
    06 and 07); a fraction is refused."""
    for answer in (float(RIGHT_1), np.float64(RIGHT_1), np.float32(RIGHT_1), torch.tensor(float(RIGHT_1))):
        assert nb["check_1"](answer) == "correct", answer


@pytest.mark.parametrize("wrong, hint", [
    (32 * 4096, "W − 1"),  # the window's W positions counted as its reach
    (4095, "one layer"), (4096, "one layer"),
    (RIGHT_1 + 1, "m itself"),  # positions counted, m included
    (np.int64(32 * 4096), "W − 1"), (torch.tensor(4095), "one layer"),
    (0, "hint: one layer reaches W − 1 back"), (RIGHT_1 - 1, "hint: one layer reaches W − 1 back"),
    (31 * 4095, "hint: one layer reaches W − 1 back"), (-RIGHT_1, "hint: one layer reaches W − 1 back"),
    (4096 ** 2, "hint: one layer reaches W − 1 back"),
])
def test_check_1_rejects_wrong_reaches_with_their_hint(nb, wrong, hint):
    verdict = nb["check_1"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    RIGHT_1 + 0.5, np.float64(RIGHT_1 + 0.5), True, np.True_, torch.tensor(True), str(RIGHT_1), [RIGHT_1],
    (RIGHT_1,), torch.tensor([RIGHT_1]), np.array([RIGHT_1]), complex(RIGHT_1), torch.tensor(complex(RIGHT_1)),
    META, torch.tensor(RIGHT_1, device="meta"), 10**400, -(10**400), lambda: RIGHT_1,
    math.nan, math.inf, -math.inf, np.float64(math.nan), torch.tensor(math.inf),
])
def test_check_1_explains_wrong_types(nb, answer):
    verdict = nb["check_1"](answer)
    assert is_hint(verdict) and "expected an integer" in verdict, verdict


# ------------------------------------------------------------------ exercise 2: six caches, five of them rolling
def right_2(t):
    return 5 * min(t, 1023) + t


def cached(t: int) -> int:
    """What 5 rolling caches of window 1024 and one global cache hold after t appends, one token
    at a time (as generation appends)."""
    caches = [h.KVCache(window=1024) for _ in range(5)] + [h.KVCache()]
    one = torch.zeros(1, 1, 1, 1)
    for _ in range(t):
        for cache in caches:
            cache.append(one, one)
    return sum(cache.length for cache in caches)


@pytest.mark.parametrize("t", [1, 2, 1023, 1024, 1025, 1300])
def test_the_caches_hold_what_the_check_wants(t):
    assert cached(t) == right_2(t)


RIGHT_2 = [right_2, lambda t: 5 * min(t, 1024 - 1) + t, lambda t: float(right_2(t)),
           lambda t: np.int64(right_2(t)), lambda t: np.float64(right_2(t)), lambda t: torch.tensor(right_2(t)),
           lambda t: torch.tensor(float(right_2(t)), dtype=torch.float64), lambda t: np.minimum(t, 1023) * 5 + t,
           lambda t: t + 5 * (t if t < 1024 else 1023), lambda t: int(torch.tensor(t).clamp(max=1023)) * 5 + t,
           lambda t: 6 * t - 5 * max(t - 1023, 0)]


def test_check_2_accepts_the_count_in_any_form(nb):
    for answer in RIGHT_2:
        assert nb["check_2"](answer) == "correct"


@pytest.mark.parametrize("wrong, hint", [
    (lambda t: 5 * min(t, 1024) + t, "1023 between steps"),
    (lambda t: 6 * min(t, 1023), "global layer"),
    (lambda t: 6 * min(t, 1024), "global layer"),
    (lambda t: 6 * t, "stop growing"),
    (lambda t: 5 * 1023 + t, "before the window fills"),
    (lambda t: 5 * 1024 + t, "before the window fills"),
    (lambda t: min(t, 1023) + t, "hint: add one cache per layer"),
    (lambda t: 5 * min(t, 1023), "hint: add one cache per layer"),
    (lambda t: 5 * min(t, 1023) + t + 1, "hint: add one cache per layer"),
    (lambda t: math.nan, "hint: add one cache per layer"),
    (lambda t: math.inf, "hint: add one cache per layer"),
    (lambda t: right_2(t) + 0.5, "hint: add one cache per layer"),
])
def test_check_2_rejects_wrong_counts_with_their_hint(nb, wrong, hint):
    verdict = nb["check_2"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


def test_check_2_names_the_error_a_function_raises(nb):
    def raising(t):
        raise KeyError("the reader's bug")

    verdict = nb["check_2"](raising)
    assert is_hint(verdict) and "raised KeyError" in verdict and "the reader's bug" in verdict, verdict
    verdict = nb["check_2"](lambda t: 1 / 0)
    assert is_hint(verdict) and "raised ZeroDivisionError" in verdict, verdict
    verdict = nb["check_2"](lambda: 0)  # takes no t
    assert is_hint(verdict) and "raised TypeError" in verdict, verdict


@pytest.mark.parametrize("answer", [
    lambda t: [right_2(t)], lambda t: (right_2(t),), lambda t: str(right_2(t)), lambda t: None,
    lambda t: torch.tensor(right_2(t), device="meta"), lambda t: META, lambda t: torch.tensor([right_2(t)]),
    lambda t: np.array([right_2(t)]), lambda t: complex(right_2(t)), lambda t: True, lambda t: 10**400,
    lambda t: torch.tensor(True), lambda t: {"t": right_2(t)},
])
def test_check_2_explains_results_that_are_not_one_number(nb, answer):
    verdict = nb["check_2"](answer)
    assert is_hint(verdict) and "expected answer_2(t) to return one number" in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [8115, 6 * 1024, right_2(3000.0), torch.tensor(8115)])
def test_check_2_wants_a_function(nb, answer):
    verdict = nb["check_2"](answer)
    assert is_hint(verdict) and "expected a function" in verdict, verdict


# ------------------------------------------------------------------ exercise 3: a sink's weights
E = [math.e ** 2, 1.0, 1.0]  # e^{a_j} for the scores (2, 0, 0)
RIGHT_3 = [x / (sum(E) + 4) for x in E]  # e^{ln 4} = 4 joins the denominator


def test_the_weights_are_sink_softmax():
    got = h.sink_softmax(torch.tensor([2.0, 0.0, 0.0], dtype=torch.float64),
                         torch.tensor([math.log(4)], dtype=torch.float64))
    assert got.tolist() == pytest.approx(RIGHT_3, abs=1e-12)
    assert sum(RIGHT_3) < 1  # the sink keeps the rest


def test_check_3_accepts_the_weights_in_any_container(nb):
    for answer in (RIGHT_3, tuple(RIGHT_3), torch.tensor(RIGHT_3), torch.tensor(RIGHT_3, dtype=torch.float64),
                   np.array(RIGHT_3), np.array(RIGHT_3, dtype=np.float32), [round(x, 4) for x in RIGHT_3],
                   [0.5519, 0.0747, 0.0747], [np.float64(x) for x in RIGHT_3], [torch.tensor(x) for x in RIGHT_3],
                   torch.tensor(RIGHT_3, requires_grad=True), torch.tensor(RIGHT_3, dtype=torch.float16),
                   torch.softmax(torch.tensor([2.0, 0.0, 0.0, math.log(4)]), 0)[:3]):
        assert nb["check_3"](answer) == "correct", answer


@pytest.mark.parametrize("wrong, hint", [
    ([x / sum(E) for x in E], "plain softmax"),  # no sink
    (torch.softmax(torch.tensor([2.0, 0.0, 0.0]), 0), "plain softmax"),
    (RIGHT_3 + [4 / (sum(E) + 4)], "no value"),  # the sink's own weight given as a fourth
    ([0.0, 0.0, 0.0, 0.0], "no value"),
    ([x / (sum(E) + math.log(4)) for x in E], "e^s, not s"),
    ([1 / 3, 1 / 3, 1 / 3], "hint: w_j = e^{a_j}"),
    ([0.5519, 0.0747, 0.0748 + 0.01], "hint: w_j = e^{a_j}"),
    ([0.0747, 0.5519, 0.0747], "hint: w_j = e^{a_j}"),
    ([2.0, 0.0, 0.0], "hint: w_j = e^{a_j}"),
    ([1, 0, 0], "hint: w_j = e^{a_j}"),
])
def test_check_3_rejects_wrong_weights_with_their_hint(nb, wrong, hint):
    verdict = nb["check_3"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    "0.55, 0.07, 0.07", 0.5519, [0.5519], RIGHT_3[:2], [RIGHT_3], [[0.5519], [0.0747, 0.0747]],
    [0.5519, 0.0747, math.nan], [0.5519, math.inf, 0.0747], [0.5519, "0.0747", 0.0747],
    torch.tensor(RIGHT_3, dtype=torch.complex64), np.array(RIGHT_3, dtype=np.complex128),
    torch.tensor([True, False, False]), np.array([True, True, True]), torch.empty(3, device="meta"),
    [10**400, 0, 0], np.array(["0.5519", "0.0747", "0.0747"]), {0.5519, 0.0747}, torch.zeros(0),
    torch.tensor(RIGHT_3)[None], [META, META, META], RIGHT_3 + [0.0, 0.0], torch.tensor(math.nan),
])
def test_check_3_explains_wrong_types_and_shapes(nb, answer):
    verdict = nb["check_3"](answer)
    assert is_hint(verdict) and "expected three" in verdict, verdict


# ------------------------------------------------------------------ exercise 4: MLA's cache per token
RIGHT_4 = 61 * (512 + 64) * 2


def test_the_bytes_are_what_the_helper_computes():
    assert mla.kv_cache_bytes(**mla.MODEL_SHAPES["DeepSeek-V3"]["cache"]) == RIGHT_4 == 70272


def test_check_4_accepts_the_bytes_as_an_integer(nb):
    for answer in (RIGHT_4, np.int64(RIGHT_4), np.int32(RIGHT_4), torch.tensor(RIGHT_4),
                   torch.tensor(RIGHT_4, dtype=torch.int32), np.array(RIGHT_4),
                   mla.kv_cache_bytes(**mla.MODEL_SHAPES["DeepSeek-V3"]["cache"])):
        assert nb["check_4"](answer) == "correct", answer


def test_check_4_takes_a_whole_float_as_the_integer(nb):
    for answer in (float(RIGHT_4), np.float64(RIGHT_4), np.float32(RIGHT_4), torch.tensor(float(RIGHT_4))):
        assert nb["check_4"](answer) == "correct", answer


@pytest.mark.parametrize("wrong, hint", [
    (61 * 512 * 2, "RoPE key"),  # the latent only
    (576 * 2, "one layer"), (512 * 2, "one layer"),
    (2 * RIGHT_4, "not cached twice"),  # keys and values each from their own copy
    (61 * 576, "2 bytes"),  # numbers, not bytes
    (np.int64(61 * 512 * 2), "RoPE key"), (torch.tensor(61 * 576), "2 bytes"),
    (61 * 576 * 4, "not cached twice"),  # the same number as fp32: "twice" is its hint
    (61 * 64 * 2, "hint: (d_c + d_r) numbers"), (RIGHT_4 + 1, "hint: (d_c + d_r) numbers"),
    (0, "hint: (d_c + d_r) numbers"), (-RIGHT_4, "hint: (d_c + d_r) numbers"),
    (2 * 61 * 128 * 128 * 2, "plain MHA"),  # the table's MHA row at V3's shape
    (61 * 128 * (192 + 128) * 2, "plain MHA"),  # MHA with keys of 128 + 64, values of 128
])
def test_check_4_rejects_wrong_counts_with_their_hint(nb, wrong, hint):
    verdict = nb["check_4"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    RIGHT_4 + 0.5, np.float64(RIGHT_4 + 0.5), True, np.True_, torch.tensor(True), str(RIGHT_4), [RIGHT_4],
    (RIGHT_4,), torch.tensor([RIGHT_4]), np.array([RIGHT_4]), complex(RIGHT_4), torch.tensor(complex(RIGHT_4)),
    META, torch.tensor(RIGHT_4, device="meta"), 10**400, -(10**400), lambda: RIGHT_4,
    math.nan, math.inf, -math.inf, np.float64(math.nan), torch.tensor(math.inf),
])
def test_check_4_explains_wrong_types(nb, answer):
    verdict = nb["check_4"](answer)
    assert is_hint(verdict) and "expected an integer" in verdict, verdict
