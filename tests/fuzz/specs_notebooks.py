"""Specs for every notebook's exercise checks (see ``CheckSpec`` in ``tests/fuzz/__init__.py``):
the right answer in the types a reader may give it, the classic mistakes each exercise is about,
and oddly typed answers aimed at each check's conversion. Names a notebook computes by training
are replaced by cheap stand-ins (``namespace``): the checks compute their answer from the same
names, so an untrained model tests them as well as a trained one."""

from __future__ import annotations

import copy
import functools
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

import helpers as h
from helpers import induction
from helpers import seq2seq as s2s
from tests.fuzz import CheckSpec

# ------------------------------------------------------------------------------ answer types
META = torch.empty((), device="meta")


def as_ints(n: int) -> list[Any]:
    """An int as a reader may give it: int, NumPy integers, 0-d integer tensors."""
    return [n, np.int64(n), np.int32(n), torch.tensor(n), torch.tensor(n, dtype=torch.int32)]


def as_floats(x: float) -> list[Any]:
    """A real number: float, NumPy floats, 0-d float tensors (float32 and float64)."""
    return [float(x), np.float64(x), np.float32(x), torch.tensor(x), torch.tensor(x, dtype=torch.float64)]


def as_tensors(t: torch.Tensor) -> list[Any]:
    """A tensor's numbers as a nested list, a tuple, a NumPy array, float32 and float64 tensors,
    and a float32 tensor that requires grad (computed by a module)."""
    t = t.detach().cpu()
    return [t.clone(), t.tolist(), tuple(t.tolist()), t.numpy().copy(), t.double(), t.float(),
            t.float().clone().requires_grad_(True)]


def odd_numbers(x: float) -> list[Any]:
    """The right number in types that are not numbers: complex, bool-like, 0-d complex tensor,
    a one-element list, a NumPy complex scalar, a meta tensor."""
    return [complex(x), torch.tensor(complex(x)), np.complex128(x), [x], META, 10**400, -(10**400),
            torch.tensor(x, device="meta"), np.array([x, x]), torch.tensor(True), np.True_]


def odd_ints(n: int, whole_floats: bool = False) -> list[Any]:
    """The right int as a string, a one-element list, complex, a bool, a meta tensor, a float with a
    fraction and (unless the check takes a whole float as the int, ``whole_floats``) a float."""
    floats = [] if whole_floats else [float(n), np.float64(n), torch.tensor(float(n))]
    return [*floats, n + 0.5, np.float64(n + 0.5), str(n), [n], complex(n), torch.tensor(complex(n)),
            torch.tensor([n]), META, torch.tensor(n, device="meta"), torch.tensor(True), np.True_, 10**400,
            np.array([n]), np.array(str(n))]


def odd_tensors(t: torch.Tensor) -> list[Any]:
    """The right tensor as complex, on the meta device, with a dim too many, as strings."""
    t = t.detach().cpu()
    return [t.to(torch.complex64), t.numpy().astype(np.complex128), torch.empty(t.shape, device="meta"),
            t.unsqueeze(0), np.array(t.numpy(), dtype=str), [str(v) for v in t.flatten().tolist()]]


def raising(*args, **kwargs):
    raise RuntimeError("the reader's bug")


def odd_functions() -> list[Any]:
    return [raising, lambda *a: None, lambda *a: "x", lambda *a: 3.5j, lambda: 0, lambda *a: META,
            lambda *a: [None], abs, torch.Tensor]


# -------------------------------------------------------------------------------- 01 (QKV)
NB01 = "01_queries_keys_values.ipynb"


def _01_tau(ns: dict) -> float:
    """The largest temperature, rounded down to two decimals, at which key 0 keeps ≥ 0.9."""
    s = ns["scores"][0].double()
    tau = 0.01
    while torch.softmax(s / (tau + 0.01), -1)[0] >= 0.9:
        tau = round(tau + 0.01, 2)
    return tau


ONE_HOT = torch.tensor([[0.0, 0.0, 1.0, 0.0]])

SPECS_01 = [
    CheckSpec(NB01, "check_2", wanted=frozenset({"values"}),
              right=lambda ns: [*as_tensors(ONE_HOT), [0, 0, 1, 0], ONE_HOT[0], torch.tensor([[0, 0, 1, 0]])],
              wrong=lambda ns: [[[0.0, 0.5, 0.0, 0.5]],  # Σ w_i·i = 2: right only for these values
                                [[0.25, 0.25, 0.25, 0.25]],  # average pooling
                                [[0.0, 1.0, 0.0, 0.0]], [[0.0, 0.0, 0.0, 1.0]],  # off by one
                                [[0.5, -0.5, 0.5, 0.5]],  # sums to 1 but negative
                                [[0.0, 0.0, 0.5, 0.0]], [[1.0, 1.0, 1.0, 1.0]],
                                [[0.0, 0.0, math.nan, 0.0]], [[0.0, 0.0, math.inf, 0.0]]],
              odd=lambda ns: [*odd_tensors(ONE_HOT), ONE_HOT.bool(), [[False, False, True, False]],
                              torch.zeros(2, 4), ONE_HOT.T]),
    CheckSpec(NB01, "check_3", wanted=frozenset({"scores", "_number"}),
              right=lambda ns: [*as_floats(_01_tau(ns)), str(_01_tau(ns)), _01_tau(ns) + 0.005],
              wrong=lambda ns: [round(_01_tau(ns) + 0.01, 2),  # rounded up: key 0 gets < 0.9
                                round(_01_tau(ns) - 0.02, 2),  # not the largest
                                1.0, 0.1, 10.0, 0, -_01_tau(ns), math.nan, math.inf, -math.inf],
              odd=lambda ns: [*odd_numbers(_01_tau(ns)), [_01_tau(ns)], torch.tensor([0.5, 0.6])]),
]


# ------------------------------------------------------------------------ 02 (pooling)
NB02 = "02_attention_pooling.ipynb"
W02 = 6.92  # about the w the notebook's scalar model learns


def _02_namespace() -> dict:
    wide = h.make_regression_data(n_train=200, n_test=200, width=20.0)
    return {"scalar": h.NWKernelRegression(wide.x_train, wide.y_train, init=W02)}


NAMES_02 = frozenset({"device", "data", "x_train", "y_train", "x_test", "y_truth", "wide", "test_mse", "_number"})
GRID = [0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0]


def _nearest(xt, yt, xq):
    return yt[(xq[:, None] - xt[None, :]).abs().argmin(dim=1)]


def _second_nearest(xt, yt, xq):
    return yt[(xq[:, None] - xt[None, :]).abs().argsort(dim=1)[:, 1]]


def _02_errors(ns: dict) -> list[float]:
    return [float(ns["test_mse"](h.nadaraya_watson(ns["x_train"], ns["y_train"], ns["x_test"], bandwidth=b)[0]))
            for b in GRID]


def _02_best(ns: dict) -> float:
    errors = _02_errors(ns)
    return GRID[errors.index(min(errors))]


def _02_count(ns: dict, half_width: float = 0.5) -> int:
    return int(((ns["x_train"] - 2.5).abs() <= half_width).sum())


SPECS_02 = [
    CheckSpec(NB02, "check_1", wanted=NAMES_02, namespace=_02_namespace,
              right=lambda ns: [_nearest, lambda xt, yt, xq: _nearest(xt, yt, xq).tolist(),
                                lambda xt, yt, xq: _nearest(xt, yt, xq).double(),
                                lambda xt, yt, xq: _nearest(xt, yt, xq).numpy(),
                                lambda xt, yt, xq: h.nadaraya_watson(xt, yt, xq, bandwidth=1e-5)[0]],
              wrong=lambda ns: [_second_nearest,
                                lambda xt, yt, xq: yt.mean().repeat(len(xq)),  # average pooling
                                lambda xt, yt, xq: h.nadaraya_watson(xt, yt, xq, bandwidth=0.25)[0],
                                lambda xt, yt, xq: _nearest(xt, yt, xq) + 0.01,
                                lambda xt, yt, xq: xt[(xq[:, None] - xt[None, :]).abs().argmin(dim=1)],  # the key, not its value
                                lambda xt, yt, xq: _nearest(xt, yt, xq) * math.nan],
              odd=lambda ns: [*odd_functions(), lambda xt, yt, xq: yt,
                              lambda xt, yt, xq: _nearest(xt, yt, xq).to(torch.complex64),
                              lambda xt, yt, xq: torch.empty(len(xq), device="meta"),
                              lambda xt, yt, xq: [str(v) for v in _nearest(xt, yt, xq).tolist()]]),
    CheckSpec(NB02, "check_2", wanted=NAMES_02,
              right=lambda ns: [*as_floats(_02_best(ns)), str(_02_best(ns))],
              wrong=lambda ns: [b for b in GRID if b != _02_best(ns)],
              odd=lambda ns: [*odd_numbers(_02_best(ns)), _02_best(ns) + 0.01, -_02_best(ns), 0.0]),
    CheckSpec(NB02, "check_3", wanted=NAMES_02,
              right=lambda ns: [*as_ints(_02_count(ns)), float(_02_count(ns))],
              wrong=lambda ns: [_02_count(ns) - 1, _02_count(ns) + 1, _02_count(ns, 1.0),  # σ as the full width
                                _02_count(ns, 0.25), 0, len(ns["x_train"])],
              odd=lambda ns: [_02_count(ns) + 0.4, *odd_numbers(_02_count(ns))]),
    CheckSpec(NB02, "check_4", wanted=NAMES_02, namespace=_02_namespace,
              right=lambda ns: [*as_floats(1 / float(ns["scalar"].w)), float(f"{1 / float(ns['scalar'].w):.3g}")],
              wrong=lambda ns: [float(ns["scalar"].w), 1 / float(ns["scalar"].w) ** 2,  # σ = w, σ = 1/w²
                                1 / (2 * float(ns["scalar"].w)), math.sqrt(2) / float(ns["scalar"].w),
                                1.05 / float(ns["scalar"].w), 0.1, 1.0, 0, -1 / float(ns["scalar"].w)],
              odd=lambda ns: odd_numbers(1 / float(ns["scalar"].w))),
]


# ------------------------------------------------------------------ 03 (masked softmax)
NB03 = "03_masked_softmax.ipynb"
E03 = math.exp(2) / (math.exp(1) + math.exp(2))
CAUSAL_LENS = torch.arange(1, 5).repeat(2, 1)  # (2, 4): query i sees keys 0..i


def _mean_by_bmm(values, valid_lens):
    zeros = torch.zeros(values.shape[0], 1, values.shape[1], dtype=values.dtype)
    return torch.bmm(h.masked_softmax(zeros, valid_lens), values).squeeze(1)


def _mean_by_loop(values, valid_lens):
    return torch.stack([values[b, :n].mean(0) for b, n in enumerate(valid_lens.tolist())])


SPECS_03 = [
    CheckSpec(NB03, "check_1",
              right=lambda ns: [(4, 3, 2), [4, 3, 2], torch.Size([4, 3, 2]), np.array([4, 3, 2]),
                                torch.tensor([4, 3, 2]), (np.int64(4), np.int64(3), np.int64(2))],
              wrong=lambda ns: [(4, 2, 3), (4, 3, 5), (4, 5, 2), (3, 2), (4, 3), (4, 3, 2, 1), (2, 3, 4), ()],
              odd=lambda ns: ["432", (4, 3, 2.5), (4.0, 3.0, 2.0), (True, 3, 2), torch.tensor([4.0, 3.0, 2.0]),
                              torch.empty(3, device="meta"), torch.zeros(3, dtype=torch.long, device="meta"), [4, 3, "2"],
                              (4, 3, 2j), (4, 3, None)]),
    CheckSpec(NB03, "check_2", wanted=frozenset({"_number"}),
              right=lambda ns: [*as_floats(E03), 0.7311, round(E03, 4)],
              wrong=lambda ns: [1 - E03,  # key 0's weight
                                math.exp(2) / sum(math.exp(s) for s in (1, 2, 3, 4)),  # no mask
                                0.5, 0.0, 1.0, E03 + 0.01, E03 - 0.002],
              odd=lambda ns: [*odd_numbers(E03), "0.7311", str(E03)]),
    CheckSpec(NB03, "check_3",
              right=lambda ns: [CAUSAL_LENS, CAUSAL_LENS.tolist(), CAUSAL_LENS.numpy(), CAUSAL_LENS.int(),
                                CAUSAL_LENS.to(torch.uint8), tuple(map(tuple, CAUSAL_LENS.tolist()))],
              wrong=lambda ns: [CAUSAL_LENS - 1,  # off by one: query i sees i keys
                                torch.full((2, 4), 4), CAUSAL_LENS.flip(1), CAUSAL_LENS + 1 - (CAUSAL_LENS == 4).long(),
                                torch.tensor([[1, 2, 3, 4], [4, 4, 4, 4]])],
              odd=lambda ns: [*odd_tensors(CAUSAL_LENS), CAUSAL_LENS.float(), CAUSAL_LENS.bool(),
                              CAUSAL_LENS + 1, -CAUSAL_LENS, CAUSAL_LENS[0], CAUSAL_LENS.T]),
    CheckSpec(NB03, "check_4",
              right=lambda ns: [_mean_by_bmm, _mean_by_loop,
                                lambda v, n: _mean_by_bmm(v.double(), n),
                                lambda v, n: _mean_by_bmm(v, n).detach().clone().requires_grad_(True)],
              wrong=lambda ns: [lambda v, n: v.mean(1),  # no mask
                                lambda v, n: v.sum(1) / v.shape[1],
                                lambda v, n: v.sum(1) / n[:, None],  # sums padding too
                                lambda v, n: _mean_by_loop(v, (n - 1).clamp(min=1)),  # off by one
                                lambda v, n: _mean_by_loop(v, (n + 1).clamp(max=v.shape[1])),
                                lambda v, n: _mean_by_bmm(v, n) * math.nan],
              odd=lambda ns: [*odd_functions(), lambda v, n: _mean_by_bmm(v, n).long(),
                              lambda v, n: _mean_by_bmm(v, n).to(torch.complex64),
                              lambda v, n: _mean_by_bmm(v, n).tolist(),
                              lambda v, n: torch.empty(3, 2, device="meta"), lambda v: v]),
    CheckSpec(NB03, "check_5", wanted=frozenset({"textbook_masked_softmax", "textbook_sequence_mask"}),
              right=lambda ns: [[-2e6, -2e6, 0.0, 0.0], [-2e6, -2e6, -3e6, -3e6],
                                torch.tensor([-5e6, -3e6, 1.0, 2.0]), np.array([-2e6, -2e6, 0.0, 0.0]),
                                (-2e6, -2e6, 0, 0), torch.tensor([-2e6, -2e6, 0.0, 0.0], dtype=torch.float64)],
              wrong=lambda ns: [[-5e5, -5e5, 0.0, 0.0],  # not below −10⁶
                                [-1e6, -1e6, 0.0, 0.0],  # exactly −10⁶: half, not more than half
                                [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0], [-2e6, 0.0, 0.0, 0.0],
                                [-math.inf, -math.inf, 0.0, 0.0], [math.nan] * 4, [1e39, 0.0, 0.0, 0.0]],
              odd=lambda ns: [*odd_tensors(torch.tensor([-2e6, -2e6, 0.0, 0.0])), [-2e6, -2e6, 0.0],
                              [[-2e6, -2e6, 0.0, 0.0]], "1 2 3 4"]),
]


# ------------------------------------------------------------------ 04 (scoring functions)
NB04 = "04_scoring_functions.ipynb"
MEAN_OF_6 = torch.tensor([10.0, 11.0, 12.0, 13.0])  # values rows 0..5 of 0..39 as (10, 4): mean
ADDITIVE_PARAMS = 8 * 20 + 8 * 2 + 8


def _bilinear(q, k, W):
    return q @ W @ k.transpose(1, 2)


SPECS_04 = [
    CheckSpec(NB04, "check_1",
              right=lambda ns: [*as_tensors(MEAN_OF_6), [10, 11, 12, 13], MEAN_OF_6.int(), MEAN_OF_6[None][0]],
              wrong=lambda ns: [torch.tensor([2.0, 3.0, 4.0, 5.0]),  # batch row 0 (valid length 2)
                                torch.tensor([18.0, 19.0, 20.0, 21.0]),  # every value: no mask
                                torch.tensor([20.0, 21.0, 22.0, 23.0]),  # the last valid row only
                                torch.tensor([12.0, 13.0, 14.0, 15.0]), MEAN_OF_6 + 1,
                                torch.full((4,), math.nan), [10.0, 11.0, 12.0, 14.0]],
              odd=lambda ns: [*odd_tensors(MEAN_OF_6), MEAN_OF_6.bool(), MEAN_OF_6[:3], MEAN_OF_6.repeat(2, 1)]),
    CheckSpec(NB04, "check_2", wanted=frozenset({"_number"}),
              right=lambda ns: [*as_floats(48.0), *as_ints(48)],
              wrong=lambda ns: [8, 8.0,  # √d: unit-variance entries
                                2304,  # the variance, not the standard deviation
                                math.sqrt(13 * 64), 6, 36 * 8, 47, 49, 1 / 48, -48, 0, math.nan, math.inf],
              odd=lambda ns: [*odd_numbers(48.0), "48"]),
    CheckSpec(NB04, "check_3", wanted=frozenset({"_number"}),
              right=lambda ns: as_ints(ADDITIVE_PARAMS),
              wrong=lambda ns: [ADDITIVE_PARAMS - 8,  # forgot w_v
                                ADDITIVE_PARAMS + 8 + 8 + 1,  # biases
                                ADDITIVE_PARAMS + 8, 8 * 22, 20 * 2, 183, 185, 0, -ADDITIVE_PARAMS],
              odd=lambda ns: odd_ints(ADDITIVE_PARAMS)),
    CheckSpec(NB04, "check_4",
              right=lambda ns: [_bilinear, lambda q, k, W: torch.einsum("bqi,ij,bkj->bqk", q, W, k),
                                lambda q, k, W: torch.bmm(q @ W, k.transpose(1, 2)),
                                lambda q, k, W: _bilinear(q.double(), k.double(), W.double())],
              wrong=lambda ns: [lambda q, k, W: _bilinear(q, k, W) / math.sqrt(20),  # scaled
                                lambda q, k, W: _bilinear(q, k, W) + 1,
                                lambda q, k, W: (k @ W.T @ q.transpose(1, 2)).transpose(1, 2) * 0.5,
                                lambda q, k, W: torch.zeros(3, 4, 5),
                                lambda q, k, W: q[..., :2] @ k.transpose(1, 2)],  # ignores W
              odd=lambda ns: [*odd_functions(), lambda q, k, W: _bilinear(q, k, W).to(torch.complex64),
                              lambda q, k, W: _bilinear(q, k, W).tolist(), lambda q, k: q,
                              lambda q, k, W: k @ W.T @ q.transpose(1, 2),  # (B, K, Q)
                              lambda q, k, W: torch.empty(3, 4, 5, device="meta")]),
]


# ------------------------------------------------------------------ 05 (Bahdanau)
NB05 = "05_bahdanau_attention.ipynb"
NAMES_05 = frozenset({"device", "model", "_number"})


@functools.lru_cache(maxsize=1)
def _05_model() -> s2s.Seq2Seq:
    """The notebook's model after its 100 training steps (about 10 s, once): exercise 3 needs an
    accuracy that is neither 0 nor 1 (an untrained model gets 0, which the odd answer 0 would hit)."""
    h.set_seed(0)
    model = s2s.Seq2Seq(embed_size=16, num_hiddens=32)
    s2s.train_seq2seq(model, s2s.make_dates(4000, seed=1), steps=100, batch_size=128, lr=0.02,
                      print_every=None, num_threads=1)
    return model.eval()


def _05_position(ns: dict) -> int:
    return int(s2s.predict(ns["model"], "07.11.1950")[1][5].argmax()) + 1


def _05_context(ns: dict, step: int = 0) -> torch.Tensor:
    model, device = ns["model"], ns["device"]
    with torch.no_grad():
        src, lens = s2s.encode_sources(["3 May 1998"], device)
        enc, _ = model.encoder(src, lens)  # (1, T, 2N)
    return s2s.predict(model, "3 May 1998")[1][step].to(device) @ enc[0]  # (2N,)


def _05_encoded(ns: dict) -> torch.Tensor:
    with torch.no_grad():
        src, lens = s2s.encode_sources(["3 May 1998"], ns["device"])
        return ns["model"].encoder(src, lens)[0][0]  # (T, 2N)


def _05_accuracy(ns: dict) -> float:
    future = s2s.make_dates(200, seed=7, years=(2100, 2199))
    return float(s2s.exact_match(ns["model"], future.texts, future.targets))


SPECS_05 = [
    CheckSpec(NB05, "check_1", wanted=NAMES_05,
              right=lambda ns: as_ints(_05_position(ns)),
              wrong=lambda ns: [p for p in (_05_position(ns) - 1, _05_position(ns) + 1, 4, 5, 7, 1, 10)
                                if p != _05_position(ns)],
              odd=lambda ns: [*odd_ints(_05_position(ns)), 0, 11, -1]),
    CheckSpec(NB05, "check_2", wanted=NAMES_05,
              right=lambda ns: as_tensors(_05_context(ns)),
              wrong=lambda ns: [_05_context(ns, 1),  # step 2's weights
                                _05_encoded(ns).mean(0),  # uniform weights
                                _05_encoded(ns)[0], _05_encoded(ns)[-1], _05_context(ns) + 1e-3,
                                _05_context(ns) * 2, _05_context(ns) * math.nan],
              odd=lambda ns: [*odd_tensors(_05_context(ns)), _05_encoded(ns), _05_context(ns).bool()]),
    CheckSpec(NB05, "check_3", wanted=NAMES_05 - {"model"}, namespace=lambda: {"model": _05_model()},
              right=lambda ns: as_floats(_05_accuracy(ns)),
              wrong=lambda ns: [w for w in (_05_accuracy(ns) + 0.05, 1 - _05_accuracy(ns), 1.0, 0.0, 0.5)
                                if abs(w - _05_accuracy(ns)) > 0.01],
              odd=lambda ns: [*odd_numbers(_05_accuracy(ns)), 100 * _05_accuracy(ns) + 2, -0.5, str(_05_accuracy(ns))]),
]


# ------------------------------------------------------------------ 06 (multi-head)
NB06 = "06_multihead_attention.ipynb"
NAMES_06 = frozenset({"device", "B", "Q", "K", "N", "H", "gen", "queries", "keys", "W_q", "W_k"})


def _06_params() -> int:
    return sum(p.numel() for p in h.MultiHeadAttention(512, 8).parameters())


def _06_heads(ns: dict) -> torch.Tensor:
    """(B, H, Q, K): the per-head unscaled scores."""
    B, Q, K, N, H = (ns[n] for n in "BQKNH")
    q = (ns["queries"] @ ns["W_q"].T).reshape(B, Q, H, N // H).transpose(1, 2)
    k = (ns["keys"] @ ns["W_k"].T).reshape(B, K, H, N // H).transpose(1, 2)
    return q @ k.transpose(-2, -1)


PADDING = torch.arange(6) >= torch.tensor([2, 5])[:, None]  # (2, 6): True = ignore

SPECS_06 = [
    CheckSpec(NB06, "check_1", wanted=frozenset({"_number"}),
              right=lambda ns: [*as_ints(_06_params()), float(_06_params())],
              wrong=lambda ns: [4 * 512 * 513,  # with biases
                                3 * 512 * 512,  # forgot W_o
                                4 * 512 * 64, 8 * 4 * 512 * 512, 4 * 512 * 512 // 8, _06_params() + 1],
              odd=lambda ns: odd_ints(_06_params(), whole_floats=True)),
    CheckSpec(NB06, "check_2", wanted=NAMES_06,
              right=lambda ns: as_tensors(_06_heads(ns).sum(1)),
              wrong=lambda ns: [_06_heads(ns).sum(1) / math.sqrt(ns["N"] // ns["H"]),  # scaled
                                _06_heads(ns).mean(1),  # averaged over the heads
                                _06_heads(ns)[:, 0],  # one head
                                _06_heads(ns).sum(1) / math.sqrt(ns["N"]),
                                _06_heads(ns).sum(1) + 1e-2, _06_heads(ns).sum(1) * math.nan],
              odd=lambda ns: [*odd_tensors(_06_heads(ns).sum(1)), _06_heads(ns).sum(0), _06_heads(ns),
                              _06_heads(ns).sum(1).transpose(1, 2), _06_heads(ns).sum(1).bool()]),
    CheckSpec(NB06, "check_3",
              right=lambda ns: [PADDING, PADDING.tolist(), PADDING.numpy(), tuple(map(tuple, PADDING.tolist()))],
              wrong=lambda ns: [~PADDING,  # the helper's convention: True = takes part
                                torch.arange(6) > torch.tensor([2, 5])[:, None],  # off by one
                                torch.arange(6) >= torch.tensor([5, 2])[:, None],
                                torch.zeros(2, 6, dtype=torch.bool), torch.ones(2, 6, dtype=torch.bool)],
              odd=lambda ns: [*odd_tensors(PADDING), PADDING.long(), PADDING.float(), PADDING.T,
                              PADDING.numpy().astype(int), PADDING.long().tolist()]),
]


# ------------------------------------------------------------------ 07 (positional encoding)
NB07 = "07_self_attention_and_positional_encoding.ipynb"
NAMES_07 = frozenset({"num_steps", "encoding_dim", "i", "omega", "P", "pairs", "_number"})


def _07_pair() -> int:
    return int(torch.argmin((2 * torch.pi * 10000 ** (torch.arange(32) * 2 / 64) - 100).abs()))


def _07_rotation(delta: float, omega: float, sign: float = 1.0) -> torch.Tensor:
    """M(δ) on (sin, cos) pairs: sin(a + θ) = sin a cos θ + cos a sin θ, cos(a + θ) = cos a cos θ − sin a sin θ."""
    c, s = math.cos(delta * omega), sign * math.sin(delta * omega)
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)


OMEGA_1 = 1 / 10000 ** (2 / 32)


def _07_dot(ns: dict, i: int = 10, j: int = 15) -> float:
    return float(ns["P"][i] @ ns["P"][j])


SPECS_07 = [
    CheckSpec(NB07, "check_1", wanted=frozenset({"_number"}),
              right=lambda ns: [*as_ints(_07_pair()), float(_07_pair())],
              wrong=lambda ns: [_07_pair() - 1, _07_pair() + 1,  # off by one
                                int(torch.argmin((2 * torch.pi * 10000 ** (torch.arange(16) * 2 / 32) - 100).abs())),
                                2 * _07_pair(), 0, 31, -_07_pair()],
              odd=lambda ns: odd_ints(_07_pair(), whole_floats=True)),
    CheckSpec(NB07, "check_2", wanted=NAMES_07,
              right=lambda ns: [*as_tensors(_07_rotation(3, OMEGA_1))],
              wrong=lambda ns: [_07_rotation(3, OMEGA_1).T,  # the other direction: mind the signs
                                _07_rotation(3, OMEGA_1)[[1, 0]],  # the rows swapped (cos and sin mixed up)
                                _07_rotation(1, OMEGA_1),  # δ = 1
                                _07_rotation(3, 1.0),  # pair j = 0
                                _07_rotation(3, 1 / 10000 ** (1 / 32)), torch.eye(2, dtype=torch.float64),
                                _07_rotation(3, OMEGA_1) + 1e-4, torch.full((2, 2), math.nan)],
              odd=lambda ns: [*odd_tensors(_07_rotation(3, OMEGA_1)), _07_rotation(3, OMEGA_1).flatten(),
                              _07_rotation(3, OMEGA_1).half()]),
    CheckSpec(NB07, "check_3", wanted=NAMES_07,
              right=lambda ns: [_07_dot(ns), np.float64(_07_dot(ns)), torch.tensor(_07_dot(ns), dtype=torch.float64),
                                ns["P"][10] @ ns["P"][15], np.float32(_07_dot(ns)), torch.tensor(_07_dot(ns))],
              wrong=lambda ns: [_07_dot(ns, 10, 14), _07_dot(ns, 10, 16),  # off by one
                                _07_dot(ns, 10, 10),  # |P[10]|² = d/2
                                float(sum(math.cos(5 / 10000 ** (2 * j / 32)) for j in range(32))),  # 32 pairs
                                -_07_dot(ns), 0.0, math.nan, math.inf],
              odd=lambda ns: [*odd_numbers(_07_dot(ns)), str(_07_dot(ns)), ns["P"][10] * ns["P"][15]]),
]


# ------------------------------------------------------------------ 08 (causal, transformer)
NB08 = "08_causal_attention_and_the_transformer_block.ipynb"
NAMES_08 = frozenset({"device", "task", "shown", "without_attention", "evaluation", "_number"})


def _08_namespace() -> dict:
    task = induction.CopyTask()
    model = induction.make_model(task)  # untrained: a stand-in for the trained run.model
    with torch.no_grad():  # W_o ten times larger, so that switching off one head moves a few predictions
        for block in model.blocks:
            block.attention.W_o.weight.mul_(10)
    return {"run": SimpleNamespace(model=model, eval_batch=task.sample(128, torch.Generator().manual_seed(1)))}


def _08_key(ns: dict) -> int:
    return int(induction.induction_targets(ns["shown"].tokens[2][None])[0, 12])


def _08_without(ns: dict, layer: int, head: int | None = None, *, rows: bool = False,
                bias: bool = False) -> float:
    """Exercise 4, written out: the copy accuracy of run.model with head ``head`` (from 1) of
    layer ``layer`` switched off, its 32 columns of W_o zeroed; ``rows``: its rows instead (the
    wrong axis); ``bias``: W_o's bias zeroed too; ``head`` None: the whole layer."""
    model = copy.deepcopy(ns["run"].model)
    W_o = model.blocks[layer - 1].attention.W_o
    with torch.no_grad():
        if head is None:
            W_o.weight.zero_()
            W_o.bias.zero_()
        else:
            part = slice(32 * (head - 1), 32 * head)
            (W_o.weight[part] if rows else W_o.weight[:, part]).zero_()
            if bias:
                W_o.bias.zero_()
        return induction.copy_accuracy(model(ns["evaluation"].tokens), ns["evaluation"])


def _08_heads(ns: dict, **kw) -> torch.Tensor:
    """(2, 2): row l − 1 for layer l, column h − 1 for head h."""
    return torch.tensor([[_08_without(ns, layer, head, **kw) for head in (1, 2)] for layer in (1, 2)])


def _08_far(ns: dict, answers: list[torch.Tensor]) -> list[torch.Tensor]:
    """The wrong tables that the stand-in model tells apart from the right one (0.004 or more away)."""
    right = _08_heads(ns)
    return [a for a in answers if not bool(((a.double() - right.double()).abs() < 0.004).all())]


def _08_floor(ns: dict, seen: int = 1, every: bool = False) -> float:
    """Exercise 3's yardstick, written out: at position t (predicting token t + 1, which lies
    before the copy) the next letter is one of the 16 − (t + seen) letters not seen yet, all
    equally likely; the mean of ln(that count) over those positions of the evaluation batch.
    ``every``: over every position t ≤ T − 2 with t + 1 < 16 letters seen (a wrong answer)."""
    ev = ns["evaluation"]
    logs = []
    for start in ev.copy_start.tolist():
        last = ns["task"].seq_len - 2 if every else start - 2  # the last t whose token t + 1 is new
        logs += [math.log(16 - (t + seen)) for t in range(last + 1) if 16 - (t + seen) > 0]
    return sum(logs) / len(logs)


CAUSAL_3 = torch.ones(5, 5, dtype=torch.bool).tril() & (torch.arange(5) < 3)  # (5, 5): True = takes part

SPECS_08 = [
    CheckSpec(NB08, "check_1", wanted=NAMES_08, namespace=_08_namespace,
              right=lambda ns: as_ints(_08_key(ns)),
              wrong=lambda ns: [k for k in (_08_key(ns) - 1,  # the previous occurrence itself
                                            11, 12, 13, _08_key(ns) + 1, 0) if k != _08_key(ns)],
              odd=lambda ns: odd_ints(_08_key(ns))),
    CheckSpec(NB08, "check_2",
              right=lambda ns: [CAUSAL_3, CAUSAL_3.tolist(), CAUSAL_3.numpy(), tuple(map(tuple, CAUSAL_3.tolist()))],
              wrong=lambda ns: [~CAUSAL_3,  # True = ignore
                                torch.ones(5, 5, dtype=torch.bool).tril(),  # the causal part alone
                                (torch.arange(5) < 3).expand(5, 5),  # the valid length alone
                                CAUSAL_3.T,  # keys × queries
                                torch.ones(5, 5, dtype=torch.bool).tril(-1) & (torch.arange(5) < 3),  # j < i
                                torch.ones(5, 5, dtype=torch.bool).tril() & (torch.arange(5) < 4)],  # off by one
              odd=lambda ns: [*odd_tensors(CAUSAL_3), CAUSAL_3.long(), CAUSAL_3.float(), CAUSAL_3.long().tolist(),
                              CAUSAL_3[:4]]),
    CheckSpec(NB08, "check_3", wanted=NAMES_08, namespace=_08_namespace,
              right=lambda ns: [*as_floats(_08_floor(ns)), _08_floor(ns) + 0.004],
              wrong=lambda ns: [_08_floor(ns, seen=0),  # t letters seen at position t, not t + 1
                                math.log(16),  # guessing among all letters
                                _08_floor(ns, every=True),  # every position, the copy included
                                _08_floor(ns) + 0.01, 1, -1, 0, 0.0, math.nan],
              odd=lambda ns: [*odd_numbers(_08_floor(ns)), str(_08_floor(ns))]),
    CheckSpec(NB08, "check_4", wanted=NAMES_08, namespace=_08_namespace,
              right=lambda ns: [*as_tensors(_08_heads(ns)), _08_heads(ns) + 0.003],
              wrong=lambda ns: _08_far(ns, [
                  torch.tensor([[_08_without(ns, layer)] * 2 for layer in (1, 2)]),  # each whole layer
                  _08_heads(ns).T,  # layers × heads transposed
                  _08_heads(ns).flip(1),  # the heads swapped (counted from 0 and from 1)
                  _08_heads(ns, rows=True),  # W_o's rows zeroed: output features, not a head
                  _08_heads(ns, bias=True),  # the bias, shared by the heads, zeroed too
                  torch.full((2, 2), _08_without(ns, 2)),  # the old answer: without layer 2
                  100 * _08_heads(ns), 1 - _08_heads(ns), _08_heads(ns) + 0.01, torch.zeros(2, 2),
                  torch.full((2, 2), math.nan)]),
              odd=lambda ns: [*odd_tensors(_08_heads(ns)), _08_heads(ns).bool(), _08_heads(ns)[0],
                              _08_heads(ns)[None], _08_heads(ns).flatten(), *odd_numbers(_08_without(ns, 2)),
                              str(_08_heads(ns).tolist())]),
]


# ------------------------------------------------------------------ 09 (at scale)
NB09 = "09_attention_at_scale.ipynb"


def _merge(guard: bool = True, sign: float = 1.0, rescale: bool = True):
    from helpers import tiling

    def merge(a, b):
        m = torch.maximum(a.max, b.max)
        shift = m.masked_fill(m == -math.inf, 0.0) if guard else m
        if not rescale:
            return tiling.OnlineSoftmax(m, a.sum + b.sum, a.out + b.out)
        if sign > 0:
            sa, sb = torch.exp(a.max - shift), torch.exp(b.max - shift)
        else:  # exp(m − its max): the wrong way round (an empty part gives inf · 0)
            sa, sb = torch.exp(shift - a.max), torch.exp(shift - b.max)
        return tiling.OnlineSoftmax(m, sa * a.sum + sb * b.sum, sa * a.out + sb * b.out)
    return merge


def _cast(merge, dtype):
    from helpers import tiling

    return lambda a, b: tiling.OnlineSoftmax(*(t.to(dtype) for t in merge(a, b)))


TILES = 16 * 17 // 2  # ⌈1000/64⌉ = 16 blocks a side: the tiles on or below the diagonal
CACHE = 2 * 24 * 4 * 64 * 2 * 8 * 2048  # K and V · layers · K/V heads · head size · bytes · batch · tokens

SPECS_09 = [
    CheckSpec(NB09, "check_1", wanted=frozenset({"_online"}),
              right=lambda ns: [_merge(), lambda a, b: tuple(_merge()(a, b)), _cast(_merge(), torch.float32),
                                lambda a, b: [t.clone() for t in _merge()(a, b)]],
              wrong=lambda ns: [_merge(guard=False),  # NaN where both parts saw no key
                                _cast(_merge(guard=False), torch.float32),
                                _merge(rescale=False), _merge(sign=-1.0),
                                lambda a, b: a, lambda a, b: b,
                                lambda a, b: type(a)(*(t.nan_to_num(1.0) for t in _merge(guard=False)(a, b)))],
              odd=lambda ns: [*odd_functions(), _cast(_merge(), torch.float16), _cast(_merge(), torch.bfloat16),
                              lambda a, b: tuple(t.to(torch.complex128) for t in _merge()(a, b)),
                              lambda a, b: tuple(t.long() for t in _merge()(a, b)),
                              lambda a, b: (a.max, a.sum), lambda a: a,
                              lambda a, b: tuple(t.to("meta") for t in _merge()(a, b))]),
    CheckSpec(NB09, "check_2",
              right=lambda ns: [*as_ints(TILES), np.uint16(TILES)],
              wrong=lambda ns: [16 * 16,  # every tile
                                15 * 16 // 2,  # the diagonal forgotten
                                16 * 17 // 2 - 1, 16 * 17 // 2 + 1, 1000 * 1001 // 2 // 64,
                                math.ceil(1000 / 64) ** 2 // 2, 0],
              odd=lambda ns: odd_ints(TILES)),
    CheckSpec(NB09, "check_3",
              right=lambda ns: [CACHE, np.int64(CACHE), np.uint64(CACHE), torch.tensor(CACHE)],
              wrong=lambda ns: [CACHE // 4 * 16,  # 16 query heads cached, not 4 K/V heads
                                CACHE // 2,  # K only
                                CACHE * 2,  # float32
                                CACHE // 8,  # one sequence
                                CACHE // 24, CACHE + 1, CACHE * 8],
              odd=lambda ns: odd_ints(CACHE)),
]


# ------------------------------------------------------------------ 10 (rotary)
NB10 = "10_rotary_position_embedding.ipynb"
NAMES_10 = frozenset({"D", "T", "_number"})
LAYOUT = [0, 2, 4, 6, 1, 3, 5, 7]  # interleaved pairs (0, 1), (2, 3)… → half-split (i, i + 4)


def _rope_score(q, k, offset):
    return q @ h.apply_rotary(k[None], torch.tensor([-offset]))[0]


def _order_probability(V: int) -> float:
    """The order-free guess at position 3 with V tokens, by enumerating every triple."""
    triples = [(x, y, z) for x in range(V) for y in range(V) for z in range(V)]
    return sum(max(t.count(v) for v in t) / 3 for t in triples) / V**3


def _order_formula(V: int) -> float:
    return (V * V + 3 * V - 1) / (3 * V * V)


SPECS_10 = [
    CheckSpec(NB10, "check_1", wanted=NAMES_10,
              right=lambda ns: [_rope_score, lambda q, k, o: float(_rope_score(q, k, o)),
                                lambda q, k, o: _rope_score(q, k, o).numpy(),
                                lambda q, k, o: h.apply_rotary(q[None], torch.tensor([o]))[0] @ k,
                                lambda q, k, o: np.float32(_rope_score(q, k, o))],
              wrong=lambda ns: [lambda q, k, o: _rope_score(q, k, -o),  # the sign of the offset
                                lambda q, k, o: q @ k,  # no rotation
                                lambda q, k, o: q @ h.apply_rotary(k[None], torch.tensor([-o]), interleaved=True)[0],
                                lambda q, k, o: _rope_score(q, k, o) / math.sqrt(len(q)),  # scaled
                                lambda q, k, o: _rope_score(q, k, o + 1),  # off by one
                                lambda q, k, o: _rope_score(q, k, o) * math.nan],
              odd=lambda ns: [*odd_functions(), lambda q, k: 0.0, lambda q, k, o: q[:3] @ k,
                              lambda q, k, o: _rope_score(q, k, o).to(torch.complex128),
                              lambda q, k, o: str(float(_rope_score(q, k, o))),
                              lambda q, k, o: _rope_score(q, k, o)[None]]),
    CheckSpec(NB10, "check_2", wanted=NAMES_10,
              right=lambda ns: [LAYOUT, tuple(LAYOUT), torch.tensor(LAYOUT), np.array(LAYOUT),
                                torch.tensor(LAYOUT, dtype=torch.uint8), np.array(LAYOUT, dtype=np.int32),
                                [np.int64(i) for i in LAYOUT], [*range(0, 8, 2), *range(1, 8, 2)]],
              wrong=lambda ns: [[0, 4, 1, 5, 2, 6, 3, 7],  # the inverse: the other direction
                                list(range(8)),  # no reordering
                                [1, 3, 5, 7, 0, 2, 4, 6],  # pairs swapped: rotations turn the other way
                                [2, 4, 6, 0, 3, 5, 7, 1], [0, 1, 2, 3, 4, 5, 6, 7][::-1]],
              odd=lambda ns: [*odd_tensors(torch.tensor(LAYOUT)), torch.tensor(LAYOUT, dtype=torch.bool),
                              [float(i) for i in LAYOUT], [0, 0, 4, 6, 1, 3, 5, 7], [LAYOUT], LAYOUT[:7],
                              [i + 8 for i in LAYOUT], [i - 8 for i in LAYOUT], [True] + LAYOUT[1:]]),
    CheckSpec(NB10, "check_3", wanted=NAMES_10,
              right=lambda ns: as_ints(46),
              wrong=lambda ns: [45,  # i ≤ 45.03: pairs 0 … 45 are 46, not 45
                                47, 64, 0, -46, 32, 23],
              odd=lambda ns: odd_ints(46)),
    CheckSpec(NB10, "check_4", wanted=NAMES_10,  # a function of V: 0.43 read off the figure is not enough
              right=lambda ns: [_order_formula, lambda V: _order_probability(V) if V <= 30 else _order_formula(V),
                                lambda V: np.float64(_order_formula(V)), lambda V: np.float32(_order_formula(V)),
                                lambda V: torch.tensor(_order_formula(V), dtype=torch.float64),
                                lambda V: (V - 1) * (V - 2) / (3 * V * V) + 2 * (V - 1) / V**2 + 1 / V**2],
              wrong=lambda ns: [lambda V: 0.43,  # read off the figure: right for V = 10 only
                                lambda V: 1 / 3,  # ties forgotten
                                lambda V: (V - 1) * (V - 2) / (3 * V * V) + (V - 1) / V**2 + 1 / V**2,  # pair: 1/3
                                lambda V: (V - 1) * (V - 2) / (3 * V * V) + 2 * (V - 1) / V**2,  # all-equal left out
                                lambda V: 1 / V, lambda V: _order_formula(V) + 1e-4,
                                lambda V: _order_formula(10), lambda V: math.nan],
              odd=lambda ns: [*odd_functions(), *odd_numbers(0.43), lambda: 0.43, lambda V: str(_order_formula(V)),
                              lambda V: [_order_formula(V)], lambda V: complex(_order_formula(V)),
                              lambda V: torch.tensor([_order_formula(V)] * 2), lambda V: 1 / (V - 1),
                              lambda V: torch.tensor(_order_formula(V), device="meta")]),
]

# ------------------------------------------------------------------ 11 (windows, sinks, latent attention)
NB11 = "11_windows_sinks_and_latent_attention.ipynb"
NAMES_11 = frozenset({"_number"})
SINK_E = [math.e**2, 1.0, 1.0]  # e^{a_j} for the scores (2, 0, 0)
SINK_WEIGHTS = [x / (sum(SINK_E) + 4) for x in SINK_E]  # a sink logit ln 4 adds e^{ln 4} = 4 below


def _11_held(t):
    return 5 * min(t, 1023) + t  # 5 rolling caches hold W − 1 = 1023 between steps, the global one t


SPECS_11 = [
    CheckSpec(NB11, "check_1", wanted=NAMES_11,  # a whole float is taken as the integer (got != int(got))
              right=lambda ns: [*as_ints(32 * 4095), np.array(32 * 4095), float(32 * 4095), np.float64(32 * 4095)],
              wrong=lambda ns: [32 * 4096,  # the window's W positions, not its reach W − 1
                                4095, 4096,  # one layer
                                32 * 4095 + 1,  # positions counted, m itself included
                                0, 32 * 4095 - 1, 31 * 4095, -(32 * 4095), np.int64(32 * 4096)],
              odd=lambda ns: [*odd_ints(32 * 4095, whole_floats=True), (32 * 4095,), lambda: 32 * 4095,
                              math.nan, math.inf, -math.inf, torch.tensor(math.inf)]),
    CheckSpec(NB11, "check_2", wanted=NAMES_11,
              right=lambda ns: [_11_held, lambda t: 5 * min(t, 1024 - 1) + t, lambda t: float(_11_held(t)),
                                lambda t: np.int64(_11_held(t)), lambda t: np.float64(_11_held(t)),
                                lambda t: torch.tensor(_11_held(t)), lambda t: np.minimum(t, 1023) * 5 + t,
                                lambda t: torch.tensor(float(_11_held(t)), dtype=torch.float64),
                                lambda t: 6 * t - 5 * max(t - 1023, 0)],
              wrong=lambda ns: [lambda t: 5 * min(t, 1024) + t,  # the window's 1024, not the 1023 held between steps
                                lambda t: 6 * min(t, 1023), lambda t: 6 * min(t, 1024),  # the global layer windowed
                                lambda t: 6 * t,  # no window at all
                                lambda t: 5 * 1023 + t, lambda t: 5 * 1024 + t,  # as if the windows started full
                                lambda t: min(t, 1023) + t, lambda t: _11_held(t) + 1, lambda t: math.nan,
                                lambda t: _11_held(t) + 0.5],
              odd=lambda ns: [*odd_functions(), *odd_numbers(_11_held(3000)), lambda: 0,
                              lambda t: [_11_held(t)], lambda t: str(_11_held(t)), lambda t: complex(_11_held(t)),
                              lambda t: torch.tensor([_11_held(t)]), lambda t: np.array([_11_held(t)]),
                              lambda t: torch.tensor(_11_held(t), device="meta"), lambda t: True,
                              lambda t: 10**400]),
    CheckSpec(NB11, "check_3", wanted=NAMES_11,
              right=lambda ns: [*as_tensors(torch.tensor(SINK_WEIGHTS)), [round(x, 4) for x in SINK_WEIGHTS],
                                [np.float64(x) for x in SINK_WEIGHTS], np.array(SINK_WEIGHTS, dtype=np.float32),
                                [torch.tensor(x) for x in SINK_WEIGHTS]],
              wrong=lambda ns: [[x / sum(SINK_E) for x in SINK_E],  # the plain softmax: no sink
                                SINK_WEIGHTS + [4 / (sum(SINK_E) + 4)],  # the sink's own weight as a fourth
                                [x / (sum(SINK_E) + math.log(4)) for x in SINK_E],  # s, not e^s, below
                                [1 / 3, 1 / 3, 1 / 3], [2.0, 0.0, 0.0], [1, 0, 0], SINK_WEIGHTS[::-1],
                                torch.tensor([0.0, 0.0, 0.0])],
              odd=lambda ns: [*odd_tensors(torch.tensor(SINK_WEIGHTS)), "0.55, 0.07, 0.07", 0.5519, [0.5519],
                              SINK_WEIGHTS[:2], SINK_WEIGHTS + [0.0, 0.0], [0.5519, 0.0747, math.nan],
                              [0.5519, math.inf, 0.0747], [0.5519, "0.0747", 0.0747],
                              torch.tensor([True, False, False]), [10**400, 0, 0], {0.5519, 0.0747}, META,
                              [META, META, META]]),
    CheckSpec(NB11, "check_4", wanted=NAMES_11,  # a whole float is taken as the integer (got != int(got))
              right=lambda ns: [*as_ints(61 * 576 * 2), np.array(61 * 576 * 2), float(61 * 576 * 2),
                                np.float64(61 * 576 * 2)],
              wrong=lambda ns: [61 * 512 * 2,  # the decoupled RoPE key forgotten
                                576 * 2, 512 * 2,  # one layer
                                2 * 61 * 576 * 2,  # the latent cached twice, for keys and for values
                                61 * 576,  # numbers, not bytes
                                61 * 64 * 2, 61 * 576 * 2 + 1, 0, -(61 * 576 * 2)],
              odd=lambda ns: [*odd_ints(61 * 576 * 2, whole_floats=True), (61 * 576 * 2,), lambda: 61 * 576 * 2,
                              math.nan, math.inf, -math.inf, torch.tensor(math.inf)]),
]

# ------------------------------------------------------------------ 12 (linear attention)
NB12 = "12_linear_attention.ipynb"
NAMES_12 = frozenset({"_number"})
DELTA_READ = [0.5, 1 / math.sqrt(2)]  # Sᵀk_1 after the delta rule writes (k_1, v_1), (k_2, v_2)


def _outer_features(x):
    return (x[..., :, None] * x[..., None, :]).flatten(-2)  # (..., D²): φ(q)·φ(k) = (q·k)²


def _triangle_features(x):
    i, j = torch.triu_indices(x.shape[-1], x.shape[-1], 1)
    return torch.cat([x**2, math.sqrt(2) * x[..., i] * x[..., j]], dim=-1)  # (..., D(D+1)/2)


def _rotated_features(x):
    D = x.shape[-1]
    Q = torch.linalg.qr(torch.randn(D * D, D * D, dtype=torch.float64, generator=torch.Generator().manual_seed(D)))[0]
    return _outer_features(x) @ Q.to(x.dtype)  # an orthogonal rotation keeps the dot products


SPECS_12 = [
    CheckSpec(NB12, "check_1", wanted=NAMES_12,
              right=lambda ns: [lambda L, D: D * D + D, lambda L, D: D * (D + 1), lambda L, D: float(D * D + D),
                                lambda L, D: np.int64(D * D + D), lambda L, D: torch.tensor(D * D + D),
                                lambda L, D: torch.tensor(D * D + D, dtype=torch.float64)],
              wrong=lambda ns: [lambda L, D: 2 * L * D,  # softmax's KV cache
                                lambda L, D: D * D,  # the normaliser z forgotten
                                lambda L, D: L * D * D, lambda L, D: L * (D * D + D),  # every state S_1 … S_L
                                lambda L, D: D * D + D + 1, lambda L, D: 2 * D * D, lambda L, D: D,
                                lambda L, D: math.nan, lambda L, D: D * D + D + 0.5],
              odd=lambda ns: [*odd_functions(), lambda L: 0, lambda L, D: str(D * D + D),
                              lambda L, D: [D * D + D], lambda L, D: complex(D * D + D),
                              lambda L, D: np.array([D * D + D]), lambda L, D: 10**400,
                              lambda L, D: torch.tensor(D * D + D, device="meta"), lambda L, D: True]),
    CheckSpec(NB12, "check_2", wanted=NAMES_12,
              right=lambda ns: [_outer_features, _triangle_features, _rotated_features,
                                lambda x: _outer_features(x.float()), lambda x: _triangle_features(x.float()),
                                lambda x: torch.einsum("...i,...j->...ij", x, x).reshape(*x.shape[:-1], -1),
                                lambda x: _outer_features(x).clone().requires_grad_(True)],
              wrong=lambda ns: [lambda x: x**2,  # the cross terms q_i q_j k_i k_j forgotten
                                lambda x: x,  # the kernel q·k itself
                                lambda x: _outer_features(x) / 2, lambda x: _outer_features(x).abs(),
                                lambda x: torch.cat([x**2, _triangle_features(x)[..., x.shape[-1]:] / math.sqrt(2)], -1),
                                lambda x: torch.cat([x, _outer_features(x)], dim=-1),  # (q·k)² + q·k
                                lambda x: _outer_features(x[..., :2]), lambda x: _outer_features(x) * math.nan],
              odd=lambda ns: [*odd_functions(), lambda x: _outer_features(x).numpy(),
                              lambda x: _outer_features(x).tolist(), lambda x: _outer_features(x)[..., 0],
                              lambda x: _outer_features(x)[None], lambda x: _outer_features(x).to(torch.complex128),
                              lambda x: _outer_features(x).long(), lambda x: _outer_features(x) > 0,
                              lambda x: torch.empty(2, 3, 4, device="meta"), lambda: _outer_features,
                              lambda x: (_outer_features(x), _outer_features(x)),
                              lambda x: _outer_features(x).transpose(0, -1)]),
    CheckSpec(NB12, "check_3", wanted=NAMES_12,
              right=lambda ns: [*as_tensors(torch.tensor(DELTA_READ)), [round(x, 4) for x in DELTA_READ],
                                [np.float64(x) for x in DELTA_READ], [0.5, math.sqrt(2) / 2],
                                np.array(DELTA_READ, dtype=np.float32)],
              wrong=lambda ns: [[1.0, 0.7071],  # the additive update
                                [1, 0],  # v_1 unchanged: as if k_2 ⟂ k_1
                                [0, 1],  # v_2: the read for k_2
                                [0.5, 0.5], [0.7071, 0.5],  # swapped
                                [0.5, -0.7071], [0.5, 0.70], torch.tensor([0.0, 0.0])],
              odd=lambda ns: [*odd_tensors(torch.tensor(DELTA_READ)), "0.5, 0.7071", 0.5, [0.5],
                              [0.5, 0.7071, 0.0], [0.5, math.nan], [0.5, math.inf], [0.5, "0.7071"],
                              torch.tensor([True, False]), [10**400, 0], {0.5, 0.7071}, META]),
    CheckSpec(NB12, "check_4", wanted=NAMES_12,
              right=lambda ns: [*as_ints(16), np.uint8(16), np.array(16)],
              wrong=lambda ns: [256,  # the state's numbers, not its independent keys
                                17, 15, 4, 0, 32, 1, -16, 10**6],
              odd=lambda ns: [*odd_ints(16), (16,), lambda: 16, math.nan, math.inf]),
]

CHECK_SPECS: list[CheckSpec] = [*SPECS_01, *SPECS_02, *SPECS_03, *SPECS_04, *SPECS_05, *SPECS_06,
                                *SPECS_07, *SPECS_08, *SPECS_09, *SPECS_10, *SPECS_11, *SPECS_12]
