"""Specs for the oldest helpers: device, checks, masking, attention, positional,
kernel_regression, plotting (see ``tests/fuzz/__init__.py`` for the format).

Sizes: B batch 2, Q queries 3, K keys 5, D query/key size 4, V value size 6 (Q ≠ K, D ≠ V).
Every ``check`` compares the result with a formula written out here in float64 (or with
PyTorch's own function), never with the helper itself.
"""

from __future__ import annotations

import math
import numbers
import os
import random
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure, FigureBase

from helpers import (
    attention, checks, device, kernel_regression, masking, parallel, plotting, positional,
)
from tests.fuzz import RULES, Case, Int, OneOf, Real, Spec, T

B, Q, K, D, V = 2, 3, 5, 4, 6
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _enter(manager):
    """Enter and leave a context manager; return what it gave."""
    with manager as value:
        return value


def rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64).to(dtype)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> bool:
    return a.shape == b.shape and torch.allclose(a.double().cpu(), b.double().cpu(), atol=atol,
                                                 rtol=1e-4)


# ----------------------------------------------------------------------- rules of this file
def _device_of(v: Any) -> torch.device | None:
    """The device ``v`` names, by rules written out here (None: it names none)."""
    if isinstance(v, torch.device):
        return v
    if isinstance(v, str) and v.split(":")[0] in ("cpu", "cuda", "meta", "mps") and (
            ":" not in v or v.split(":")[1].isdigit()):
        return torch.device(v)
    if _is_int(v) and v >= 0 and torch.cuda.is_available():
        return torch.device("cuda", int(v))
    return None


def _usable(d: torch.device | None) -> bool:
    if d is None:
        return False
    if d.type == "cuda":
        return torch.cuda.is_available() and (d.index or 0) < torch.cuda.device_count()
    return d.type == "cpu"


@dataclass(frozen=True)
class Device:
    """A device: a torch.device, a name ('cpu', 'cuda:0'), or a CUDA index. ``usable``: only
    one that can hold tensors here (the CPU or a CUDA device present; never 'meta')."""
    usable: bool = True
    optional: bool = False

    def __call__(self, v: Any) -> bool:
        if v is None:
            return self.optional
        d = _device_of(v)
        return _usable(d) if self.usable else d is not None

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("'cpu'", "cpu"), ("device('cpu')", torch.device("cpu")), ("'cuda'", "cuda"),
                ("'cuda:0'", "cuda:0"), ("'cuda:7'", "cuda:7"), ("'meta'", "meta"),
                ("device('meta')", torch.device("meta")), ("'gpu7'", "gpu7"), ("'CPU'", "CPU"),
                ("''", "")]


@dataclass(frozen=True)
class Name:
    """A non-empty str (the name a check puts in its message, or a layout)."""

    def __call__(self, v: Any) -> bool:
        return isinstance(v, str) and v != ""

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("''", ""), ("'queries'", "queries"), ("b'x'", b"x"), ("['x']", ["x"])]


@dataclass(frozen=True)
class Labels:
    """None or a sequence (list, tuple, range; not a str) of str or real numbers of a length
    in ``sizes``."""
    sizes: tuple[int, ...]

    def __call__(self, v: Any) -> bool:
        if v is None:
            return True
        return isinstance(v, (list, tuple, range)) and len(v) in self.sizes and all(
            isinstance(e, str) or isinstance(e, numbers.Real) and not isinstance(e, (bool, np.bool_))
            for e in v)

    def extra_values(self) -> list[tuple[str, Any]]:
        n = self.sizes[0]
        words = [f"w{i}" for i in range(n)]
        return [(f"list{n}", words), (f"tuple{n}", tuple(words)), (f"range({n})", range(n)),
                (f"list{n + 1}", words + ["w"]), (f"list{n - 1}", words[:-1]),
                (f"[None]*{n}", [None] * n), (f"[True]*{n}", [True] * n),
                ("'ab'", "ab"), (f"'{'x' * n}'", "x" * n)]


@dataclass(frozen=True)
class FigSize:
    """None or (width, height), two finite numbers > 0, in inches."""

    def __call__(self, v: Any) -> bool:
        return v is None or isinstance(v, (tuple, list)) and len(v) == 2 and all(
            RULES["positive"](e) for e in v)

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("(4, 3)", (4, 3)), ("[4.0, 3.5]", [4.0, 3.5]), ("(0, 3)", (0, 3)), ("(4,)", (4,)),
                ("(nan, 3)", (math.nan, 3)), ("(True, 3)", (True, 3)), ("'43'", "43"),
                ("(4, 3, 1)", (4, 3, 1)), ("(-4, 3)", (-4, 3))]


@dataclass(frozen=True)
class Cmap:
    """The name of a matplotlib colormap."""

    def __call__(self, v: Any) -> bool:
        return isinstance(v, str) and v in matplotlib.colormaps

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("'viridis'", "viridis"), ("'RdBu_r'", "RdBu_r"), ("'reds'", "reds"), ("''", "")]


@dataclass(frozen=True)
class Annot:
    """True / False, or a format spec for a float such as '.1f'."""

    def __call__(self, v: Any) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return True
        if not isinstance(v, str):
            return False
        try:
            format(1.0, v)
        except ValueError:
            return False
        return True

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("'.1f'", ".1f"), ("'.0%'", ".0%"), ("'d'", "d"), ("'{:.2f}'", "{:.2f}")]


@dataclass(frozen=True)
class FigRule:
    """None or a matplotlib Figure or SubFigure."""

    def __call__(self, v: Any) -> bool:
        return v is None or isinstance(v, FigureBase)

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("Figure()", Figure()), ("SubFigure", Figure().subfigures(1, 2)[0]), ("'fig'", "fig")]


@dataclass(frozen=True)
class Shape:
    """A shape: a tuple, list or torch.Size of ints >= 0."""

    def __call__(self, v: Any) -> bool:
        return isinstance(v, (tuple, list, torch.Size)) and all(_is_int(n) and n >= 0 for n in v)

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("(2, 3, 5)", (2, 3, 5)), ("[2, 3, 5]", [2, 3, 5]), ("Size", torch.Size([2, 3, 5])),
                ("(3, 5)", (3, 5)), ("(2, 3)", (2, 3)), ("(-1, 3, 5)", (-1, 3, 5)),
                ("(2.0, 3, 5)", (2.0, 3, 5)), ("(True, 3, 5)", (True, 3, 5)), ("'235'", "235")]


class Plottable(T):
    """A tensor of numbers to plot: any real dtype (float, int, bool) is valid, complex is not."""

    def variants(self, x: torch.Tensor) -> list[tuple[str, Any, bool]]:
        out = []
        for shown, value, valid in super().variants(x):
            if shown in ("int64", "bool", "float64"):
                valid = True
            elif shown == "complex64":
                valid = False
            out.append((shown, value, valid))
        return out


class AnyDevice(T):
    """A tensor whose device the check does not judge: ``check_rank`` and ``check_floating``
    look at the type, rank and dtype only, and the helpers call ``check_like`` (or
    ``check_holds_data``) after them, whose message names both devices (tests/test_bad_input.py
    pins those messages for 'meta' tensors). So a 'meta' tensor of the right rank and dtype
    passes these two checks."""

    def variants(self, x: torch.Tensor) -> list[tuple[str, Any, bool]]:
        return [(shown, value, True if shown == "meta" else valid)
                for shown, value, valid in super().variants(x)]


def _positive_or_scalar_tensor(v: Any) -> bool:
    """A finite number > 0, or a 0-d real tensor holding one (a learnt bandwidth)."""
    if isinstance(v, torch.Tensor):
        return (v.dim() == 0 and v.device.type != "meta" and v.dtype != torch.bool
                and not v.is_complex() and bool(torch.isfinite(v)) and bool(v > 0))
    return RULES["positive"](v)


# ------------------------------------------------------------------- reference formulas
def ref_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  take: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √D) V in float64 over the keys where ``take`` (True = takes part); a row
    with no key taking part gets all-zero weights. Returns (out (..., Q, V), weights (..., Q, K))."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Q, K)
    take = torch.ones(scores.shape, dtype=torch.bool) if take is None else take.expand(scores.shape)
    top = torch.where(take, scores, -math.inf).amax(-1, keepdim=True).clamp(min=-1e300)
    e = torch.where(take, torch.exp(scores - top), 0.0)
    total = e.sum(-1, keepdim=True)
    w = torch.where(total > 0, e / torch.where(total > 0, total, 1.0), 0.0)
    return w @ v, w


def lens_take(lens: Any, batch: int, queries: int, keys: int) -> torch.Tensor:
    """(B, Q, K) True where key j < the valid length of (b, i); lens (B,) or (B, Q)."""
    lens = torch.as_tensor(lens)
    take = torch.zeros(batch, queries, keys, dtype=torch.bool)
    for b in range(batch):
        for i in range(queries):
            n = int(lens[b]) if lens.dim() == 1 else int(lens[b, i])
            take[b, i, :n] = True
    return take


def causal_take(queries: int, keys: int, window: int | None = None) -> torch.Tensor:
    """(Q, K) lower-right causal: query i sees key j when j <= i + K - Q (and, with a window W,
    when i + K - Q - j < W)."""
    return torch.tensor([[0 <= i + keys - queries - j < (window or keys + queries + 1)
                          for j in range(keys)] for i in range(queries)],
                        dtype=torch.bool).reshape(queries, keys)


def sinusoid(max_len: int, num_hiddens: int) -> torch.Tensor:
    """P[i, 2j] = sin(i / 10000^(2j/N)), P[i, 2j+1] = cos(i / 10000^(2j/N)), float64."""
    i = torch.arange(max_len, dtype=torch.float64)[:, None]
    col = torch.arange(num_hiddens)[None, :]
    angle = i / 10000.0 ** ((col - col % 2).double() / num_hiddens)
    return torch.where(col % 2 == 0, torch.sin(angle), torch.cos(angle))


def f_true(x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    return 2 * torch.sin(x) + 0.4 * torch.sin(3 * x) + 0.6 * torch.sin(6 * x) + torch.sqrt(x)


def ref_nadaraya_watson(x_train, y_train, x_query, kernel="gaussian", bandwidth=1.0):
    """Σ K(u_i) y_i / Σ K(u_j) in float64, u = (x - x_i) / h; a row that reaches no point puts
    its weight on the nearest one."""
    diff = x_query.double()[:, None] - x_train.double()[None, :]  # (Q, N)
    u = diff / float(bandwidth)
    k = {"gaussian": torch.exp(-u**2 / 2), "boxcar": (u.abs() <= 1).double(),
         "constant": torch.ones_like(u), "epanechnikov": (1 - u**2).clamp(min=0)}[kernel]
    total = k.sum(1, keepdim=True)
    nearest = torch.zeros_like(k)
    nearest[torch.arange(k.shape[0]), diff.abs().argmin(1)] = 1.0
    w = torch.where(total > 0, k / torch.where(total > 0, total, 1.0), nearest)
    return w @ y_train.double(), w


# ------------------------------------------------------------------------- attention
def _sdp_good() -> dict:
    mask = torch.rand(B, Q, K) > 0.4
    mask[0, 1] = False  # a row with no key taking part: all-zero output
    return dict(queries=rand(B, Q, D), keys=rand(B, K, D), values=rand(B, K, V), mask=mask,
                dropout_p=0.0, need_weights=True)


def _sdp_check(out, kw) -> bool:
    ref_out, ref_w = ref_attention(kw["queries"], kw["keys"], kw["values"], kw["mask"])
    result, weights = out
    if kw["need_weights"]:
        if not _close(weights, ref_w):
            return False
    elif weights is not None:
        return False
    if kw["dropout_p"] > 0:
        return result.shape == ref_out.shape and not result.isnan().any()
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        kw["queries"], kw["keys"], kw["values"], attn_mask=kw["mask"]).nan_to_num(0.0)
    return _close(result, ref_out) and _close(result, sdpa)


def _dot_forward(module, **kw):
    return module(**kw), module.attention_weights


def _dot_good() -> dict:
    return dict(module=attention.DotProductAttention(), queries=rand(B, Q, D), keys=rand(B, K, D),
                values=rand(B, K, V), valid_lens=torch.tensor([4, 0]), need_weights=True,
                causal=True, window=2)


def _dot_check(out, kw) -> bool:
    result, weights = out
    q, k = kw["queries"], kw["keys"]
    take = torch.ones(q.shape[0], q.shape[1], k.shape[1], dtype=torch.bool)
    if kw["valid_lens"] is not None:
        take &= lens_take(kw["valid_lens"], q.shape[0], q.shape[1], k.shape[1])
    if kw["causal"]:
        take &= causal_take(q.shape[1], k.shape[1], kw.get("window"))
    ref_out, ref_w = ref_attention(q, k, kw["values"], take)
    if kw["need_weights"] and not _close(weights, ref_w):
        return False
    if not kw["need_weights"] and weights is not None:
        return False
    return result.dtype == q.dtype and _close(result, ref_out)


def _additive_forward(module, **kw):
    return module(**kw), module.attention_weights


def _additive_scores(module, queries, keys) -> torch.Tensor:
    """w_vᵀ tanh(W_q q + W_k k) in float64, (B, Q, K)."""
    wq, wk, wv = (m.weight.detach().double() for m in (module.W_q, module.W_k, module.w_v))
    q = queries.double() @ wq.T  # (B, Q, N)
    k = keys.double() @ wk.T  # (B, K, N)
    return (torch.tanh(q[:, :, None, :] + k[:, None, :, :]) @ wv[0])  # (B, Q, K)


def _additive_good() -> dict:
    return dict(module=attention.AdditiveAttention(key_size=3, query_size=D, num_hiddens=7),
                queries=rand(B, Q, D), keys=rand(B, K, 3), values=rand(B, K, V),
                valid_lens=torch.tensor([[1, 5, 0], [2, 3, 4]]))


def _additive_check(out, kw) -> bool:
    result, weights = out
    q, k = kw["queries"], kw["keys"]
    scores = _additive_scores(kw["module"], q, k)
    take = torch.ones(scores.shape, dtype=torch.bool)
    if kw["valid_lens"] is not None:
        take = lens_take(kw["valid_lens"], *scores.shape)
    top = torch.where(take, scores, -math.inf).amax(-1, keepdim=True).clamp(min=-1e300)
    e = torch.where(take, torch.exp(scores - top), 0.0)
    total = e.sum(-1, keepdim=True)
    w = torch.where(total > 0, e / torch.where(total > 0, total, 1.0), 0.0)
    return _close(weights, w) and _close(result, w @ kw["values"].double())


ATTENTION_SPECS: list[Spec] = [
    Spec("helpers.attention.scaled_dot_product", call=attention.scaled_dot_product, good=_sdp_good,
         rules={"queries": T(min_rank=2), "keys": T(min_rank=2), "values": T(min_rank=2),
                "mask": T(dtype="bool", optional=True), "dropout_p": "probability",
                "need_weights": "flag"},
         check=_sdp_check,
         bad=[Case("mask-K+1", lambda kw: kw.update(mask=torch.ones(B, Q, K + 1, dtype=torch.bool)),
                   r"mask must broadcast"),
              Case("values-V-K+1", lambda kw: kw.update(values=rand(B, K + 1, V)), r"number of values")],
         edge=[Case("2-D-shared-keys,no-weights", lambda kw: kw.update(
             keys=rand(K, D), values=rand(K, V), need_weights=False)),
               Case("float64", lambda kw: kw.update(queries=rand(B, Q, D, dtype=torch.float64),
                                                    keys=rand(B, K, D, dtype=torch.float64),
                                                    values=rand(B, K, V, dtype=torch.float64)))]),
    Spec("helpers.attention.DotProductAttention", call=attention.DotProductAttention,
         good=lambda: dict(dropout=0.1), rules={"dropout": "probability"},
         check=lambda out, kw: isinstance(out, torch.nn.Module)
         and out.dropout.p == kw["dropout"] and out.attention_weights is None),
    Spec("helpers.attention.DotProductAttention.forward", call=_dot_forward, good=_dot_good,
         rules={"queries": T(rank=3), "keys": T(rank=3), "values": T(rank=3),
                "valid_lens": T(dtype="integer", optional=True, lists=True),
                "need_weights": "flag", "causal": "flag", "window": "size or None"},
         valid=lambda kw: kw["window"] is None or bool(kw["causal"]),  # a window needs causal
         check=_dot_check,
         bad=[Case("valid_lens-K+1", lambda kw: kw.update(valid_lens=torch.tensor([K + 1, 0])),
                   r"valid_lens must lie in \[0, K\]"),
              Case("valid_lens-(B+1,)", lambda kw: kw.update(valid_lens=[1, 1, 1]),
                   r"valid_lens must have shape"),
              Case("window-without-causal", lambda kw: kw.update(causal=False),
                   r"^window must .*needs causal=True.*got causal=False")],
         edge=[
             # K = 0 with causal=True: no key takes part, the output is zeros (as without causal)
             Case("K=0,causal", lambda kw: kw.update(keys=rand(B, 0, D), values=rand(B, 0, V),
                                                     valid_lens=None),
                  lambda out, kw: out[0].shape == (B, Q, V) and bool((out[0] == 0).all())),
             Case("K=0,causal,no-weights", lambda kw: kw.update(
                 keys=rand(B, 0, D), values=rand(B, 0, V), valid_lens=None, need_weights=False),
                  lambda out, kw: out[0].shape == (B, Q, V) and bool((out[0] == 0).all())),
             Case("Q=K=0,causal,no-weights", lambda kw: kw.update(
                 queries=rand(B, 0, D), keys=rand(B, 0, D), values=rand(B, 0, V), valid_lens=None,
                 need_weights=False), lambda out, kw: out[0].shape == (B, 0, V)),
             Case("Q=K,causal,no-weights(SDPA is_causal)", lambda kw: kw.update(
                 keys=rand(B, Q, D), values=rand(B, Q, V), valid_lens=None, need_weights=False,
                 window=None), _dot_check),
             Case("Q=K,window>=K,no-weights(SDPA is_causal)", lambda kw: kw.update(
                 keys=rand(B, Q, D), values=rand(B, Q, V), valid_lens=None, need_weights=False,
                 window=Q), _dot_check),
             Case("Q=K,window<K,no-weights(a band mask)", lambda kw: kw.update(
                 keys=rand(B, Q, D), values=rand(B, Q, V), valid_lens=None, need_weights=False,
                 window=1), _dot_check),
             Case("(B,Q)-lens", lambda kw: kw.update(
                 valid_lens=torch.tensor([[0, 5, 2], [1, 1, 3]])), _dot_check),
             Case("Q>K,causal", lambda kw: kw.update(keys=rand(B, 2, D), values=rand(B, 2, V),
                                                     valid_lens=None), _dot_check),
             Case("causal,no-window", lambda kw: kw.update(window=None), _dot_check),
             Case("window=1,no-lens,no-weights(keys no query sees)", lambda kw: kw.update(
                 valid_lens=None, window=1, need_weights=False), _dot_check),
             Case("window>K", lambda kw: kw.update(window=K + 3), _dot_check),
             Case("window,Q=0", lambda kw: kw.update(queries=rand(B, 0, D), valid_lens=None),
                  lambda out, kw: out[0].shape == (B, 0, V) and out[1].shape == (B, 0, K)),
         ]),
    Spec("helpers.attention.AdditiveAttention", call=attention.AdditiveAttention,
         good=lambda: dict(key_size=3, query_size=4, num_hiddens=5, dropout=0.0),
         rules={"key_size": "size", "query_size": "size", "num_hiddens": "size",
                "dropout": "probability"},
         check=lambda out, kw: (out.W_k.in_features, out.W_q.in_features, out.W_q.out_features,
                                out.w_v.in_features, out.dropout.p)
         == (kw["key_size"], kw["query_size"], kw["num_hiddens"], kw["num_hiddens"], kw["dropout"])),
    Spec("helpers.attention.AdditiveAttention.forward", call=_additive_forward, good=_additive_good,
         rules={"queries": T(rank=3), "keys": T(rank=3), "values": T(rank=3),
                "valid_lens": T(dtype="integer", optional=True, lists=True)},
         check=_additive_check,
         bad=[Case("keys-size-D", lambda kw: kw.update(keys=rand(B, K, D)), r"key_size"),
              Case("keys-batch-B+1", lambda kw: kw.update(keys=rand(B + 1, K, 3)), r"batch size")],
         edge=[Case("K=0", lambda kw: kw.update(keys=rand(B, 0, 3), values=rand(B, 0, V),
                                                valid_lens=None),
                    lambda out, kw: out[0].shape == (B, Q, V) and bool((out[0] == 0).all()))]),
    Spec("helpers.attention.AdditiveAttention.get_scores",
         call=lambda module, **kw: module.get_scores(**kw),
         good=lambda: dict(module=attention.AdditiveAttention(key_size=3, query_size=D, num_hiddens=7),
                           queries=rand(B, Q, D), keys=rand(B, K, 3)),
         rules={"queries": T(rank=3), "keys": T(rank=3)},
         check=lambda out, kw: _close(out, _additive_scores(kw["module"], kw["queries"], kw["keys"])),
         bad=[Case("queries-size-3", lambda kw: kw.update(queries=rand(B, Q, 3)), r"query_size"),
              Case("keys-size-D", lambda kw: kw.update(keys=rand(B, K, D)), r"key_size"),
              Case("keys-batch-B+1", lambda kw: kw.update(keys=rand(B + 1, K, 3)), r"batch size")]),
]


# --------------------------------------------------------------------------- masking
def _lens_valid(kw: dict, lens_key: str = "valid_lens") -> bool:
    lens = torch.as_tensor(kw[lens_key])
    shape_ok = tuple(lens.shape) in ((kw["batch"],), (kw["batch"], kw["queries"]))
    return shape_ok and (lens.numel() == 0 or 0 <= int(lens.min()) and int(lens.max()) <= kw["keys"])


def _mask_check(out, kw) -> bool:
    lens = torch.as_tensor(kw["valid_lens"])
    expected = lens_take(lens, kw["batch"], kw["queries"] if lens.dim() == 2 else 1, kw["keys"])
    want = torch.device("cpu") if kw["device"] is None else _device_of(kw["device"])
    return out.dtype == torch.bool and out.device.type == want.type and torch.equal(out.cpu(), expected)


def _sequence_check(out, kw) -> bool:
    X, lens, value = kw["X"], torch.as_tensor(kw["valid_len"]), kw["value"]
    expected = X.clone()
    for b in range(X.shape[0]):
        expected[b, int(lens[b]):] = value.item() if isinstance(value, np.generic) else value
    same = torch.equal(out, expected) or (out.is_floating_point() and torch.equal(
        out.nan_to_num(-7.0), expected.nan_to_num(-7.0)))
    return out.dtype == X.dtype and same and out.data_ptr() != X.data_ptr()


def _value_ok(v: Any) -> bool:
    """A fill value for a float32 X: a real number (not a bool), ±inf and NaN included,
    within float32's range."""
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and (
        not math.isfinite(v) or abs(v) <= torch.finfo(torch.float32).max)


def _sequence_valid(kw: dict) -> bool:
    """The fill value fits X's dtype: a real for a float X, an int for an integer X, a bool
    (or an int) for a bool X, any number for a complex X; within the dtype's range."""
    X, v = kw["X"], kw["value"]
    if not isinstance(X, torch.Tensor):
        return True  # judged by the rule of X
    if X.dtype == torch.bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, np.bool_)
    if X.is_complex():
        return isinstance(v, numbers.Complex) and not isinstance(v, (bool, np.bool_))
    if X.is_floating_point():
        return _is_real_or_inf(v) and (not math.isfinite(v) or abs(v) <= torch.finfo(X.dtype).max)
    return _is_int(v) and torch.iinfo(X.dtype).min <= v <= torch.iinfo(X.dtype).max


def _is_real_or_inf(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _masked_softmax_check(out, kw) -> bool:
    X, lens = kw["X"], kw["valid_lens"]
    take = None if lens is None else lens_take(lens, *X.shape)
    s = X.double()
    take = torch.ones(s.shape, dtype=torch.bool) if take is None else take
    top = torch.where(take, s, -math.inf).amax(-1, keepdim=True).clamp(min=-1e300)
    e = torch.where(take, torch.exp(s - top), 0.0)
    total = e.sum(-1, keepdim=True)
    ref = torch.where(total > 0, e / torch.where(total > 0, total, 1.0), 0.0)
    return out.dtype == X.dtype and _close(out, ref)


def _softmax_mask_check(out, kw) -> bool:
    s, mask = kw["scores"].double(), kw["mask"]
    take = torch.ones(s.shape, dtype=torch.bool) if mask is None else mask.expand(s.shape)
    top = torch.where(take, s, -math.inf).amax(-1, keepdim=True).clamp(min=-1e300)
    e = torch.where(take, torch.exp(s - top), 0.0)
    total = e.sum(-1, keepdim=True)
    ref = torch.where(total > 0, e / torch.where(total > 0, total, 1.0), 0.0)
    return out.dtype == kw["scores"].dtype and _close(out, ref)


def _causal_check(out, kw) -> bool:
    want = torch.device("cpu") if kw["device"] is None else _device_of(kw["device"])
    return out.dtype == torch.bool and out.device.type == want.type and torch.equal(
        out.cpu(), causal_take(kw["num_queries"], kw["num_keys"], kw["window"]))


MASKING_SPECS: list[Spec] = [
    Spec("helpers.masking.valid_lens_to_mask", call=masking.valid_lens_to_mask,
         good=lambda: dict(valid_lens=torch.tensor([3, 0]), batch=B, queries=Q, keys=K, device="cpu"),
         rules={"valid_lens": T(dtype="integer", lists=True), "batch": "count", "queries": "count",
                "keys": "count", "device": Device()},
         valid=_lens_valid, check=_mask_check,
         edge=[Case("(B,Q)-lens", lambda kw: kw.update(valid_lens=[[0, 1, 5], [2, 2, 2]])),
               Case("batch-0", lambda kw: kw.update(valid_lens=[], batch=0))]),
    Spec("helpers.masking.sequence_mask", call=masking.sequence_mask,
         good=lambda: dict(X=rand(B, 4, 3), valid_len=torch.tensor([1, 4]), value=-1.5),
         rules={"X": T(min_rank=2, dtype="any", same_dtype=False),
                "valid_len": T(dtype="integer", lists=True), "value": _value_ok},
         check=_sequence_check,
         valid=_sequence_valid,
         bad=[Case("valid_len-T+1", lambda kw: kw.update(valid_len=[5, 0]), r"valid_len must lie"),
              Case("X-bool-value-1.5", lambda kw: kw.update(X=torch.ones(B, 4, dtype=torch.bool)),
                   r"value must be"),
              Case("X-float16-value-1e30", lambda kw: kw.update(X=rand(B, 4, dtype=torch.float16),
                                                                value=1e30), r"value must be"),
              Case("X-int8-value-300", lambda kw: kw.update(X=torch.zeros(B, 4, dtype=torch.int8),
                                                            value=300), r"value must be")],
         edge=[Case("X-int-value-7", lambda kw: kw.update(X=torch.arange(8).reshape(B, 4), value=7)),
               Case("X-bool-value-False", lambda kw: kw.update(X=torch.ones(B, 4, dtype=torch.bool),
                                                                value=False))]),
    Spec("helpers.masking.masked_softmax", call=masking.masked_softmax,
         good=lambda: dict(X=rand(B, Q, K), valid_lens=torch.tensor([2, 0])),
         rules={"X": T(rank=3, same_dtype=False),
                "valid_lens": T(dtype="integer", optional=True, lists=True)},
         check=_masked_softmax_check,
         edge=[Case("(B,Q)-lens", lambda kw: kw.update(valid_lens=[[0, 1, 5], [2, 2, 2]])),
               Case("bfloat16", lambda kw: kw.update(X=rand(B, Q, K, dtype=torch.bfloat16)),
                    lambda out, kw: out.dtype == torch.bfloat16 and _close(
                        out, masking.masked_softmax(kw["X"].double(), kw["valid_lens"]), atol=1e-2))]),
    Spec("helpers.masking.softmax_with_mask", call=masking.softmax_with_mask,
         good=lambda: dict(scores=rand(B, Q, K), mask=torch.tensor(  # (Q, K); row 1: nothing
             [[True] * K, [False] * K, [True, False] * 2 + [True]])),
         rules={"scores": T(min_rank=1, same_dtype=False), "mask": T(dtype="bool", optional=True)},
         check=_softmax_mask_check,
         bad=[Case("mask-(Q,K+1)", lambda kw: kw.update(mask=torch.ones(Q, K + 1, dtype=torch.bool)),
                   r"mask must broadcast")]),
    Spec("helpers.masking.causal_mask", call=masking.causal_mask,
         good=lambda: dict(num_queries=Q, num_keys=K, device=None, window=2),
         rules={"num_queries": "size", "num_keys": "size", "device": Device(optional=True),
                "window": "size or None"},
         check=_causal_check),
]


# ------------------------------------------------------------------------ positional
def _table_check(out, kw) -> bool:
    atol = {torch.float16: 1e-3, torch.bfloat16: 1e-2}.get(kw["dtype"], 1e-6)
    return out.dtype == kw["dtype"] and _close(out, sinusoid(kw["max_len"], kw["num_hiddens"]), atol=atol)


def _pe_forward(module, **kw):
    return module(**kw)


POSITIONAL_SPECS: list[Spec] = [
    Spec("helpers.positional.sinusoidal_table", call=positional.sinusoidal_table,
         good=lambda: dict(max_len=6, num_hiddens=5, dtype=torch.float32),
         rules={"max_len": "size", "num_hiddens": "size", "dtype": OneOf(FLOATS)},
         check=_table_check,
         bad=[Case("dtype-int64", lambda kw: kw.update(dtype=torch.int64), r"dtype must be"),
              Case("dtype-complex64", lambda kw: kw.update(dtype=torch.complex64), r"dtype must be")]),
    Spec("helpers.positional.PositionalEncoding", call=positional.PositionalEncoding,
         good=lambda: dict(num_hiddens=5, dropout=0.0, max_len=7),
         rules={"num_hiddens": "size", "dropout": "probability", "max_len": "size"},
         check=lambda out, kw: out.dropout.p == kw["dropout"] and _close(
             out.P[0], sinusoid(kw["max_len"], kw["num_hiddens"]), atol=1e-6)),
    Spec("helpers.positional.PositionalEncoding.forward", call=_pe_forward,
         good=lambda: dict(module=positional.PositionalEncoding(5, 0.0, max_len=7), X=rand(B, 4, 5)),
         rules={"X": T(rank=3, same_dtype=False)},
         check=lambda out, kw: out.dtype == kw["X"].dtype and _close(
             out, kw["X"].double() + sinusoid(kw["X"].shape[1], 5)),
         bad=[Case("T-over-max_len", lambda kw: kw.update(X=rand(B, 8, 5)), r"max_len"),
              Case("N-6", lambda kw: kw.update(X=rand(B, 4, 6)), r"num_hiddens")]),
]


# ----------------------------------------------------------------- kernel regression
def _data_good() -> dict:
    return dict(x_train=torch.rand(4) * 5, y_train=rand(4), x_test=torch.linspace(0, 5, 3),
                y_truth=rand(3))


def _regression_data_check(out, kw) -> bool:
    want = torch.device("cpu") if kw["device"] is None else _device_of(kw["device"])
    tensors = (out.x_train, out.y_train, out.x_test, out.y_truth)
    originals = (kw["data"].x_train, kw["data"].y_train, kw["data"].x_test, kw["data"].y_truth)
    return out is not kw["data"] and all(t.device.type == want.type and torch.equal(t.cpu(), o)
                                         for t, o in zip(tensors, originals))


def _make_data_check(out, kw) -> bool:
    n, m, width = kw["n_train"], kw["n_test"], kw["width"]
    x_test = torch.arange(m, dtype=torch.float64) * width / m
    again = kernel_regression.make_regression_data(**kw)
    return (out.x_train.shape == out.y_train.shape == (n,) and out.x_test.shape == (m,)
            and bool((out.x_train[1:] >= out.x_train[:-1]).all())
            and bool(((out.x_train >= 0) & (out.x_train <= width)).all())
            and torch.allclose(out.x_test.double(), x_test, rtol=1e-6)
            and torch.allclose(out.y_truth.double(), f_true(out.x_test), rtol=1e-5, atol=1e-4)
            and torch.equal(again.x_train, out.x_train) and torch.equal(again.y_train, out.y_train))


def _nw_check(out, kw) -> bool:
    y_hat, w = out
    ref_y, ref_w = ref_nadaraya_watson(kw["x_train"], kw["y_train"], kw["x_query"], kw["kernel"],
                                       kw["bandwidth"])
    return (w.shape == (kw["x_query"].shape[0], kw["x_train"].shape[0])
            and _close(w, ref_w) and _close(y_hat, ref_y))


def _nwk_forward(module, **kw):
    return module(**kw), module.attention_weights


def _nwk_check(out, kw) -> bool:
    y_hat, weights = out
    m, q = kw["module"], kw["queries"].double()
    x, y, w = m.x_train.double(), m.y_train.double(), m.w.detach().double()
    scores = -((q[:, None] - x[None, :]) * w) ** 2 / 2
    if kw["leave_one_out"]:
        scores = scores.masked_fill(torch.eye(len(q), dtype=torch.bool), -math.inf)
    ref_w = torch.softmax(scores, dim=1)
    return _close(weights, ref_w) and _close(y_hat, ref_w @ y)


def _nwk_good() -> dict:
    x = torch.sort(torch.rand(5) * 5).values
    return dict(module=kernel_regression.NWKernelRegression(x, f_true(x).float(), per_key=True, init=0.7),
                queries=torch.rand(5) * 5, leave_one_out=True)


REGRESSION_SPECS: list[Spec] = [
    Spec("helpers.kernel_regression.target_function", call=kernel_regression.target_function,
         good=lambda: dict(x=torch.rand(2, 3) * 5), rules={"x": T(same_dtype=False)},
         check=lambda out, kw: out.dtype == kw["x"].dtype and _close(out, f_true(kw["x"])),
         bad=[Case("x-negative", lambda kw: kw.update(x=torch.tensor([1.0, -0.5])), r"x must be >= 0")],
         edge=[Case("empty", lambda kw: kw.update(x=torch.zeros(0)), lambda out, kw: out.shape == (0,))]),
    Spec("helpers.kernel_regression.RegressionData", call=kernel_regression.RegressionData,
         good=_data_good,
         rules={name: T(rank=1, same_dtype=False) for name in ("x_train", "y_train", "x_test", "y_truth")},
         check=lambda out, kw: all(getattr(out, n) is kw[n] for n in kw),
         bad=[Case("y_train-N+1", lambda kw: kw.update(y_train=rand(5)), r"y_train"),
              Case("y_truth-Q+1", lambda kw: kw.update(y_truth=rand(4)), r"y_truth")]),
    Spec("helpers.kernel_regression.RegressionData.to", call=lambda data, **kw: data.to(**kw),
         good=lambda: dict(data=kernel_regression.make_regression_data(5, 4), device="cpu"),
         rules={"device": Device()},
         check=lambda out, kw: _regression_data_check(out, kw)),
    Spec("helpers.kernel_regression.make_regression_data",
         call=kernel_regression.make_regression_data,
         good=lambda: dict(n_train=6, n_test=5, width=4.0, noise=0.3, seed=2),
         rules={"n_train": "size", "n_test": "size", "width": "positive", "noise": "non-negative",
                "seed": "seed"},
         check=_make_data_check),
    Spec("helpers.kernel_regression.nadaraya_watson", call=kernel_regression.nadaraya_watson,
         good=lambda: dict(x_train=torch.rand(6) * 5, y_train=rand(6), x_query=torch.rand(4) * 5,
                           kernel="gaussian", bandwidth=0.7),
         rules={"x_train": T(rank=1, same_dtype=False), "y_train": T(rank=1, same_dtype=False),
                "x_query": T(rank=1, same_dtype=False),
                "kernel": OneOf(("gaussian", "boxcar", "constant", "epanechnikov")),
                "bandwidth": _positive_or_scalar_tensor},
         check=_nw_check,
         bad=[Case("y_train-N+1", lambda kw: kw.update(y_train=rand(7)), r"y_train")],
         edge=[Case(f"{kernel}-narrow", lambda kw, kernel=kernel: kw.update(kernel=kernel, bandwidth=0.01))
               for kernel in ("boxcar", "epanechnikov")]
         + [Case("bandwidth-tensor", lambda kw: kw.update(bandwidth=torch.tensor(0.3)))]),
    Spec("helpers.kernel_regression.NWKernelRegression", call=kernel_regression.NWKernelRegression,
         good=lambda: dict(x_train=torch.rand(5), y_train=rand(5), per_key=False, init=0.5),
         rules={"x_train": T(rank=1, same_dtype=False), "y_train": T(rank=1, same_dtype=False),
                "per_key": "flag", "init": "finite"},
         check=lambda out, kw: out.w.shape == ((5,) if kw["per_key"] else (1,))
         and bool((out.w == float(kw["init"])).all()) and out.w.dtype == kw["x_train"].dtype
         and torch.equal(out.x_train, kw["x_train"]) and _close(out.y_train, kw["y_train"], atol=1e-3)
         and out.x_train.data_ptr() != kw["x_train"].data_ptr(),
         bad=[Case("y_train-N+1", lambda kw: kw.update(y_train=rand(6)), r"y_train")]),
    Spec("helpers.kernel_regression.NWKernelRegression.forward", call=_nwk_forward, good=_nwk_good,
         rules={"queries": T(rank=1, same_dtype=False), "leave_one_out": "flag"},
         check=_nwk_check,
         valid=lambda kw: not kw["leave_one_out"] or (
             isinstance(kw["queries"], torch.Tensor) and kw["queries"].shape == (5,)),
         bad=[Case("leave_one_out-Q!=N", lambda kw: kw.update(queries=torch.rand(3)), r"leave_one_out")],
         edge=[Case("Q!=N", lambda kw: kw.update(queries=torch.rand(3), leave_one_out=False))]),
]


# -------------------------------------------------------------------------- plotting
def _heatmaps_good() -> dict:
    mask = torch.rand(2, Q, K) > 0.3
    return dict(matrices=torch.rand(2, Q, K), xlabel="Keys", ylabel="Queries", titles=None,
                figsize=None, cmap="Reds", mask=mask, vmin=0.0, vmax=None, xticklabels=None,
                yticklabels=None, colorbar=True, fig=None, annot=False)


def _as_array(x: Any) -> np.ndarray:
    return np.array(x.tolist() if isinstance(x, torch.Tensor) else x, dtype=np.float64)


def _heatmaps_check(fig, kw) -> bool:
    data = _as_array(kw["matrices"])
    data = data.reshape((1,) * (4 - data.ndim) + data.shape)
    R, C, Qn, Kn = data.shape
    keep = np.ones(data.shape, dtype=bool)
    if kw["mask"] is not None:
        m = np.array(kw["mask"].tolist() if isinstance(kw["mask"], torch.Tensor) else kw["mask"])
        keep = np.broadcast_to(m.reshape((1,) * (4 - m.ndim) + m.shape) if m.ndim >= 2 else m,
                               data.shape)
    panels = [ax for ax in fig.axes if ax.images]
    if not isinstance(fig, FigureBase) or len(panels) != R * C:
        return False
    if kw["fig"] is not None and fig is not kw["fig"]:
        return False
    if len(fig.axes) != R * C + (1 if kw["colorbar"] else 0):
        return False
    if kw["figsize"] is not None and not np.allclose(fig.get_size_inches(), kw["figsize"]):
        return False
    titles = kw["titles"]
    for index, ax in enumerate(panels):
        r, c = divmod(index, C)
        shown = np.ma.filled(ax.images[0].get_array().astype(np.float64), np.nan)
        if not np.array_equal(shown, np.where(keep[r, c], data[r, c], np.nan), equal_nan=True):
            return False
        if kw["vmin"] is not None and ax.images[0].norm.vmin != kw["vmin"]:
            return False
        if kw["vmax"] is not None and ax.images[0].norm.vmax != kw["vmax"]:
            return False
        if titles is not None:
            want = titles[index] if len(titles) == R * C else titles[c]
            if ax.get_title() != str(want):
                return False
        if kw["annot"] is not False and kw["annot"] is not np.False_:
            if len(ax.texts) != int(keep[r, c].sum()):
                return False
        if r == R - 1 and ax.get_xlabel() != kw["xlabel"]:
            return False
        if kw["xticklabels"] is not None and [t.get_text() for t in ax.get_xticklabels()] != [
                str(s) for s in kw["xticklabels"]]:
            return False
    return True


def _heatmaps_valid(kw: dict) -> bool:
    vmin, vmax = kw["vmin"], kw["vmax"]
    if vmin is not None and vmax is not None and _is_real(vmin) and _is_real(vmax) and vmax <= vmin:
        return False
    x = kw["matrices"]
    if isinstance(x, torch.Tensor) and x.dim() not in (2, 3, 4):
        return False
    return True


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and math.isfinite(v)


def _to_numpy_check(out, kw) -> bool:
    x = kw["x"]
    if isinstance(x, torch.Tensor):
        ref = np.array(x.detach().cpu().tolist(), dtype=None)
        if x.dtype in (torch.float16, torch.bfloat16):
            ref = ref.astype(np.float32)
    else:
        ref = np.array(x)
    if not isinstance(out, np.ndarray) or out.shape != ref.shape or not np.array_equal(out, ref):
        return False
    if isinstance(x, torch.Tensor) and x.device.type == "cpu":
        return not np.shares_memory(out, x.detach().numpy())
    return True


def _set_theme_in_rc_context() -> tuple[object, float, bool]:
    """set_theme() inside an rc_context, so the theme does not leak into later tests; returns
    its result and the rcParams it set."""
    import matplotlib as mpl

    with mpl.rc_context():
        out = plotting.set_theme()
        return out, mpl.rcParams["figure.dpi"], mpl.rcParams["axes.grid"]


def _set_theme_check(result, kw) -> bool:
    out, dpi, grid = result
    return out is None and dpi == 100 and grid is False


PLOTTING_SPECS: list[Spec] = [
    Spec("helpers.plotting.show_heatmaps", call=plotting.show_heatmaps, good=_heatmaps_good,
         rules={"matrices": Plottable(min_rank=2, same_dtype=False, lists=True),
                "xlabel": lambda v: isinstance(v, str), "ylabel": lambda v: isinstance(v, str),
                "titles": Labels((2,)), "figsize": FigSize(), "cmap": Cmap(),
                "mask": T(dtype="bool", optional=True, lists=True),
                "vmin": Real(optional=True), "vmax": Real(optional=True),
                "xticklabels": Labels((K,)), "yticklabels": Labels((Q,)), "colorbar": "flag",
                "fig": FigRule(), "annot": Annot()},
         valid=_heatmaps_valid, check=_heatmaps_check,
         bad=[Case("matrices-5-D", lambda kw: kw.update(matrices=torch.rand(1, 1, 1, 2, 2), mask=None),
                   r"matrices must be"),
              Case("mask-(Q,K+1)", lambda kw: kw.update(mask=torch.ones(Q, K + 1, dtype=torch.bool)),
                   r"mask must broadcast"),
              Case("matrices-ragged-list", lambda kw: kw.update(matrices=[[1.0, 2.0], [3.0]], mask=None),
                   r"matrices must"),
              Case("vmin-above-vmax", lambda kw: kw.update(vmin=0.8, vmax=0.2), r"vmax must")],
         edge=[Case("4-D,titles-per-panel", lambda kw: kw.update(
             matrices=torch.rand(2, 2, Q, K), mask=None, titles=["a", "b", "c", "d"])),
               Case("2-D,numpy,annot", lambda kw: kw.update(
                   matrices=np.random.rand(Q, K), mask=np.ones((Q, K), dtype=bool), annot=".1f")),
               Case("NaN-cell", lambda kw: kw.update(matrices=torch.tensor([[0.5, math.nan]]), mask=None)),
               Case("bfloat16", lambda kw: kw.update(matrices=torch.rand(Q, K).bfloat16(), mask=None))]),
    Spec("helpers.plotting.to_numpy", call=plotting.to_numpy,
         good=lambda: dict(x=rand(2, 3)),
         rules={"x": T(dtype="any", same_dtype=False, lists=True)},
         check=_to_numpy_check,
         bad=[Case("ragged-list", lambda kw: kw.update(x=[[1.0, 2.0], [3.0]]), r"x must")],
         edge=[Case(str(dtype), lambda kw, dtype=dtype: kw.update(x=rand(2, 3, dtype=dtype)))
               for dtype in (torch.float16, torch.bfloat16)]
         + [Case("numpy", lambda kw: kw.update(x=np.arange(6.0).reshape(2, 3))),
            Case("requires_grad", lambda kw: kw.update(x=rand(2, 3).requires_grad_()))]),
    Spec("helpers.plotting.set_theme", call=_set_theme_in_rc_context, good=dict,
         check=_set_theme_check),
]


# ---------------------------------------------------------------------------- device
def _seeded(**kw):
    device.set_seed(**kw)
    return random.random(), float(np.random.rand()), torch.rand(3)


def _seed_check(out, kw) -> bool:
    seed = int(kw["seed"])
    return (out[0] == random.Random(seed).random()
            and out[1] == float(np.random.RandomState(seed % 2**32).rand())
            and torch.equal(out[2], torch.rand(3, generator=torch.Generator().manual_seed(seed))))


def _threads(**kw):
    before = torch.get_num_threads()
    with device.cpu_threads(**kw) as value:
        inside = torch.get_num_threads()
    return value, before, inside, torch.get_num_threads()


DEVICE_SPECS: list[Spec] = [
    Spec("helpers.device.get_device", call=device.get_device, good=dict,
         check=lambda out, kw: isinstance(out, torch.device)
         and out.type == ("cuda" if torch.cuda.is_available() else out.type)
         and out.type in ("cuda", "mps", "cpu")),
    Spec("helpers.device.set_seed", call=_seeded, good=lambda: dict(seed=3),
         rules={"seed": "seed"}, check=_seed_check),
    Spec("helpers.device.cpu_threads", call=_threads,
         good=lambda: dict(num_threads=1), rules={"num_threads": "size or None"},
         check=lambda out, kw: out[0] is None and out[3] == out[1] and out[2] == (
             out[1] if kw["num_threads"] is None else kw["num_threads"])),
]


def _draw() -> torch.Tensor:
    return torch.rand(2)


def _jobs_ok(v: object) -> bool:
    """A list, tuple or dict whose every value is callable (the pool's odd values never are)."""
    if isinstance(v, dict):
        v = list(v.values())
    return isinstance(v, (list, tuple)) and all(callable(job) for job in v)


def _run_all(**kw):
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    out = parallel.run_all(**kw)
    return out, state, threads, torch.get_rng_state(), torch.get_num_threads()


def _run_all_check(out, kw) -> bool:
    """Every job's draw is the first draw from the caller's state; the state and the thread
    count are as they were. (_draw jobs give a list of tensors; others are not generated.)"""
    results, state, threads, state_after, threads_after = out
    want = torch.rand(2, generator=torch.Generator().set_state(state))
    values = results.values() if isinstance(results, dict) else results
    return (torch.equal(state, state_after) and threads == threads_after
            and all(not isinstance(r, torch.Tensor) or torch.equal(r, want) for r in values))


PARALLEL_SPECS: list[Spec] = [
    Spec("helpers.parallel.run_all", call=_run_all,
         good=lambda: dict(jobs=[_draw, _draw, _draw], processes=2, num_threads=1),
         rules={"jobs": _jobs_ok, "processes": "size or None", "num_threads": "size or None"},
         check=_run_all_check,
         edge=[Case("jobs=dict", lambda kw: kw.update(jobs={"a": _draw, "b": _draw}),
                    lambda out, kw: list(out[0]) == ["a", "b"] and _run_all_check(out, kw)),
               Case("jobs=empty", lambda kw: kw.update(jobs=[]), lambda out, kw: out[0] == [])],
         bad=[Case("jobs=[_draw, 3]", lambda kw: kw.update(jobs=[_draw, 3]), r"jobs\[1\] must be callable"),
              Case("jobs=generator", lambda kw: kw.update(jobs=(j for j in [_draw])),
                   r"jobs must be a list or a dict")]),
    Spec("helpers.parallel.usable_cores", call=parallel.usable_cores, good=dict,
         check=lambda out, kw: out == len(os.sched_getaffinity(0))),
]


# ---------------------------------------------------------------------------- checks
def _returns(value_key: str, convert=lambda v: v):
    return lambda out, kw: out == convert(kw[value_key]) and type(out) is type(convert(kw[value_key]))


def _mask_shape_valid(kw: dict) -> bool:
    mask, shape, dev = kw["mask"], kw["shape"], kw["device"]
    if not (isinstance(shape, (tuple, list, torch.Size)) and all(_is_int(n) and n >= 0 for n in shape)):
        return True  # judged by the rule of shape
    if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
        try:
            if tuple(torch.broadcast_shapes(mask.shape, tuple(shape))) != tuple(shape):
                return False
        except RuntimeError:
            return False
    return dev is None or _device_of(dev) is None or _device_of(dev).type == "cpu"


def _real_valid(kw: dict) -> bool:
    value, above, at_least = kw["value"], kw["above"], kw["at_least"]
    if not (_is_real(value) and (above is None or _is_real(above))
            and (at_least is None or _is_real(at_least))):
        return True  # judged by the rules
    return (above is None or value > above) and (at_least is None or value >= at_least)


CHECKS_SPECS: list[Spec] = [
    Spec("helpers.checks.broadcast_shape", call=lambda shapes: checks.broadcast_shape(*shapes),
         good=lambda: dict(shapes=[(2, 1, 3), (4, 3), (1,)]),
         check=lambda out, kw: out == tuple(torch.broadcast_shapes(*kw["shapes"])),
         bad=[Case("a-number", lambda kw: kw.update(shapes=[3, (2,)]), r"shapes must"),
              Case("a-negative-size", lambda kw: kw.update(shapes=[(2, -1)]), r"shapes must"),
              Case("a-float-size", lambda kw: kw.update(shapes=[(2.0, 3)]), r"shapes must"),
              Case("a-bool-size", lambda kw: kw.update(shapes=[(True, 3)]), r"shapes must"),
              Case("a-str", lambda kw: kw.update(shapes=["23"]), r"shapes must")],
         edge=[Case("none", lambda kw: kw.update(shapes=[]), lambda out, kw: out == ()),
               Case("do-not-broadcast", lambda kw: kw.update(shapes=[(2, 3), (4, 3)]),
                    lambda out, kw: out is None),
               Case("size-0", lambda kw: kw.update(shapes=[(0, 1), (1, 3)]), lambda out, kw: out == (0, 3)),
               Case("torch.Size+np.int64", lambda kw: kw.update(shapes=[torch.Size([2, 1]), (np.int64(5),)]),
                    lambda out, kw: out == (2, 5))]),
    Spec("helpers.checks.check_rank", call=checks.check_rank,
         good=lambda: dict(name="queries", x=rand(B, Q, D), rank=3, layout="(B, Q, D)"),
         rules={"name": Name(), "x": AnyDevice(rank=3, dtype="any", same_dtype=False), "rank": "count",
                "layout": Name()},
         names={"x": r"\bqueries\b"},
         valid=lambda kw: not (isinstance(kw["x"], torch.Tensor) and _is_int(kw["rank"])
                               and kw["x"].dim() != kw["rank"]),
         check=lambda out, kw: out is None),
    Spec("helpers.checks.check_size", call=checks.check_size,
         good=lambda: dict(what="batch size of keys (B)", expected=2, actual=2),
         rules={"what": Name(), "expected": "count", "actual": "count"},
         names={"actual": r"batch size of keys"},
         valid=lambda kw: kw["expected"] == kw["actual"], check=lambda out, kw: out is None),
    Spec("helpers.checks.check_floating", call=checks.check_floating,
         good=lambda: dict(name="scores", x=rand(Q, K)),
         rules={"name": Name(), "x": AnyDevice(same_dtype=False)}, names={"x": r"\bscores\b"},
         check=lambda out, kw: out is None),
    Spec("helpers.checks.check_int", call=checks.check_int,
         good=lambda: dict(name="steps", value=2, minimum=0),
         rules={"name": Name(), "value": "count", "minimum": "int"}, names={"value": r"\bsteps\b"},
         valid=lambda kw: not (_is_int(kw["value"]) and _is_int(kw["minimum"])
                               and kw["value"] < kw["minimum"]),
         check=_returns("value", int)),
    Spec("helpers.checks.check_positive_int", call=checks.check_positive_int,
         good=lambda: dict(name="heads", value=2), rules={"name": Name(), "value": "size"},
         names={"value": r"\bheads\b"}, check=_returns("value", int)),
    Spec("helpers.checks.check_seed", call=checks.check_seed, good=lambda: dict(seed=5),
         rules={"seed": "seed"}, check=_returns("seed", int)),
    Spec("helpers.checks.check_real", call=checks.check_real,
         good=lambda: dict(name="width", value=2.0, above=None, at_least=None),
         rules={"name": Name(), "value": "finite", "above": Real(optional=True),
                "at_least": Real(optional=True)},
         names={"value": r"\bwidth\b"}, valid=_real_valid, check=_returns("value", float)),
    Spec("helpers.checks.check_probability", call=checks.check_probability,
         good=lambda: dict(name="dropout", p=0.25), rules={"name": Name(), "p": "probability"},
         names={"p": r"\bdropout\b"}, check=_returns("p", float)),
    Spec("helpers.checks.check_bool", call=checks.check_bool,
         good=lambda: dict(name="causal", value=True), rules={"name": Name(), "value": "flag"},
         names={"value": r"\bcausal\b"}, check=lambda out, kw: out is None),
    Spec("helpers.checks.check_like", call=checks.check_like,
         good=lambda: dict(name="keys", x=rand(K, D), ref_name="queries", ref=rand(Q, D)),
         rules={"name": Name(), "x": T(), "ref_name": Name(), "ref": T()},
         names={"x": r"\bkeys\b", "ref": r"\bqueries\b"}, check=lambda out, kw: out is None),
    Spec("helpers.checks.check_qk_size", call=checks.check_qk_size,
         good=lambda: dict(queries=rand(B, Q, D), keys=rand(B, K, D)),
         rules={"queries": T(min_rank=1, dtype="any", same_dtype=False),
                "keys": T(min_rank=1, dtype="any", same_dtype=False)},
         check=lambda out, kw: out is None,
         bad=[Case("D-mismatch", lambda kw: kw.update(keys=rand(B, K, D + 1)), r"feature size"),
              Case("D=0", lambda kw: kw.update(queries=rand(B, Q, 0), keys=rand(B, K, 0)),
                   r"feature size")]),
    Spec("helpers.checks.check_mask", call=checks.check_mask,
         good=lambda: dict(name="mask", mask=torch.rand(Q, K) > 0.5, shape=(B, Q, K),
                           layout="(B, Q, K)", device=None),
         rules={"name": Name(), "mask": T(dtype="bool"), "shape": Shape(), "layout": Name(),
                "device": Device(optional=True)},
         valid=_mask_shape_valid, check=lambda out, kw: out is None),
    Spec("helpers.checks.as_device", call=checks.as_device,
         good=lambda: dict(name="where", device="cpu"),
         rules={"name": Name(), "device": Device(usable=False)}, names={"device": r"\bwhere\b"},
         check=lambda out, kw: out == _device_of(kw["device"])),
]


SPECS: list[Spec] = (ATTENTION_SPECS + MASKING_SPECS + POSITIONAL_SPECS + REGRESSION_SPECS
                     + PLOTTING_SPECS + DEVICE_SPECS + PARALLEL_SPECS + CHECKS_SPECS)
