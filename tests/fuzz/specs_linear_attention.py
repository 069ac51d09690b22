"""Specs for ``helpers.linear_attention``: the feature maps, the random projection (iid and
orthogonal), the visible prefixes, linear attention (forward and gradients, in its three forms),
the recurrent states and the delta rule, with and without a decay (see ``tests/fuzz/__init__.py``
for the format).

Sizes: B batch 2, Q queries 3, K keys 5, D query/key size 4, V value size 6 (Q ≠ K, D ≠ V).
Every ``check`` compares with a formula written out here in float64 — elu(x) + 1 as x + 1 / eˣ,
the kernel sums over the keys each query sees (loops over b, i, j), the delta rule one token at a
time — or with PyTorch's own SDPA, never with the helper itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from helpers import linear_attention as la
from tests.fuzz import RULES, Case, OneOf, Real, Spec, T, _is_int
from tests.fuzz.specs_tiling import attend_with_grad, rand  # the same call and draws
from tests.test_linear_attention import elu_plus_one, take_mask, vectorised, written_out  # the formulas

B, Q, K, D, V = 2, 3, 5, 4, 6
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TOL = {torch.float16: 3e-3, torch.bfloat16: 3e-2, torch.float32: 1e-5, torch.float64: 1e-10}


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> bool:
    """Equal shapes and |a − b| ≤ tol·(|b| + scale), tol of ``dtype`` (``scale``: the size of the
    largest entries, where an absolute error is what rounding leaves)."""
    tol = TOL[dtype]
    return a.shape == b.shape and torch.allclose(a.double().cpu(), b.double().cpu(), rtol=tol,
                                                 atol=tol * scale)


# ------------------------------------------------------------------------ rules of this file
@dataclass(frozen=True)
class Device:
    """None (the CPU) or a device that can hold tensors here: the CPU, or a CUDA device present."""

    def __call__(self, v: Any) -> bool:
        if v is None:
            return True
        if isinstance(v, torch.device):
            d = v
        elif isinstance(v, str) and v.split(":")[0] in ("cpu", "cuda", "meta") and (
                ":" not in v or v.split(":")[1].isdigit()):
            d = torch.device(v)
        elif _is_int(v) and v >= 0 and torch.cuda.is_available():
            d = torch.device("cuda", int(v))
        else:
            return False
        return d.type == "cpu" or d.type == "cuda" and torch.cuda.is_available() and (
            (d.index or 0) < torch.cuda.device_count())

    def extra_values(self) -> list[tuple[str, Any]]:
        return [("'cpu'", "cpu"), ("device('cpu')", torch.device("cpu")), ("'cuda'", "cuda"),
                ("'cuda:7'", "cuda:7"), ("'meta'", "meta"), ("'gpu7'", "gpu7"), ("''", "")]


def _beta_rule(none_ok: bool):
    """A finite real number (Python or NumPy, not a bool); None where ``none_ok``. The pool's
    tensors are 0-d, never the (B, T) a tensor β must be: the bad and edge cases try those."""
    return lambda v: none_ok if v is None else RULES["finite"](v)


def _lens_ok(lens: Any, batch: int, queries: int, keys: int) -> bool:
    """valid_lens None, or (B,) or (B, Q) integers in [0, K]."""
    if lens is None:
        return True
    lens = torch.as_tensor(lens)
    return tuple(lens.shape) in ((batch,), (batch, queries)) and (
        lens.numel() == 0 or 0 <= int(lens.min()) and int(lens.max()) <= keys)


def _attention_valid(kw: dict) -> bool:
    """``valid`` is asked only when every argument follows its own rule: the tensors are then
    (B, Q, D), (B, K, D), (B, K, V)."""
    q, k = kw["queries"], kw["keys"]
    return _lens_ok(kw.get("valid_lens"), q.shape[0], q.shape[1], k.shape[1])


def _set(**changes):
    return lambda kw: kw.update(changes)


# ------------------------------------------ reference formulas: tests/test_linear_attention.py
_attend_with_grad = attend_with_grad(la.linear_attention)


def _attention_check(result, kw, phi=elu_plus_one) -> bool:
    """The output against the entry-by-entry formula; the gradients against autograd of the
    vectorised formula (finite, of the inputs' dtype, 0 for the keys no query sees)."""
    out, grads = result
    q, k, v = (kw[n] for n in ("queries", "keys", "values"))
    lens, causal = kw.get("valid_lens"), bool(kw.get("causal", False))
    dtype = q.dtype
    expected = written_out(q, k, v, phi, lens, causal)
    if not (out.dtype == dtype and _close(out, expected, dtype) and bool(torch.isfinite(out).all())):
        return False
    take = take_mask(q.shape[0], q.shape[1], k.shape[1], lens, causal)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = vectorised(*leaves, take, phi)
    d_out = rand(*ref.shape, seed=9, dtype=dtype).double()
    expected_grads = torch.autograd.grad(ref, leaves, d_out, allow_unused=True)
    unseen = ~take.any(1)  # (B, K)
    return (all(g.dtype == dtype and g.shape == x.shape and bool(torch.isfinite(g).all())
                and _close(g, torch.zeros_like(x) if e is None else e, dtype, 10.0)
                for g, e, x in zip(grads, expected_grads, (q, k, v)))
            and bool((grads[1][unseen] == 0).all() and (grads[2][unseen] == 0).all()))


def _taylor(x: torch.Tensor, terms: int = 30) -> torch.Tensor:
    """Features of e^{q·k} for x ≥ 0: per dimension xⁿ/√n! (n < terms), their product over the
    dimensions: ψ(q)·ψ(k) = Π_d Σ_n (q_d k_d)ⁿ/n! = e^{q·k} up to the series' tail."""
    n = torch.arange(terms, dtype=x.dtype, device=x.device)
    psi = x[..., None] ** n / torch.exp(torch.lgamma(n + 1) / 2)  # (B, T, D, terms)
    phi = psi[..., 0, :]
    for d in range(1, x.shape[-1]):
        phi = (phi[..., :, None] * psi[..., d, None, :]).flatten(-2)
    return phi


def _softmax_check(result, kw) -> bool:
    """With the exponential kernel's features of x / D^¼, SDPA with the same boolean mask."""
    out, _ = result
    q, k, v = (kw[n] for n in ("queries", "keys", "values"))
    take = take_mask(q.shape[0], q.shape[1], k.shape[1], kw.get("valid_lens"), bool(kw.get("causal")))
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=take)
    return bool(take.any(-1).all()) and _close(out, sdpa, torch.float64)


def _with_feature_map(phi, check=_attention_check):
    return lambda result, kw: check(result, kw, phi)


def _hidden_nan(kw):
    """NaN and inf in the keys and values no query sees (past the longest valid length)."""
    kw.update(valid_lens=torch.tensor([[2, 3, 0], [4, 1, 4]]), causal=False)
    for name, fill in (("keys", math.nan), ("values", math.inf)):
        x = kw[name].clone()
        x[0, 3:], x[1, 4:] = fill, -fill
        kw[name] = x


def _visible_nan(where: str):
    """One NaN entry in key 1, value 1 or query 1 of row 0 (seen: the good call's row 0 has
    lengths 0, 5, 2, causal, K − Q = 2)."""
    def change(kw):
        name = {"key": "keys", "value": "values", "query": "queries"}[where]
        x = kw[name].clone()
        x[0, 1, 0] = math.nan
        kw[name] = x
    return change


def _nan_check(where: str):
    """NaN exactly in the outputs that see the NaN (a value: its column only); the others as the
    formula written out (which never touches the NaN for them)."""
    def check(result, kw) -> bool:
        out, _ = result
        q, k, v = (kw[n] for n in ("queries", "keys", "values"))
        take = take_mask(q.shape[0], q.shape[1], k.shape[1], kw.get("valid_lens"), bool(kw.get("causal")))
        expected = torch.zeros(out.shape, dtype=torch.bool)
        if where == "query":
            expected[0, 1] = take[0, 1].any()
        else:
            expected[0] = take[0, :, 1, None] & (torch.arange(out.shape[-1]) == 0 if where == "value" else True)
        ok = bool(expected.any()) and torch.equal(torch.isnan(out).cpu(), expected)
        formula = written_out(q, k, v, elu_plus_one, kw.get("valid_lens"), bool(kw.get("causal")))
        return ok and _close(out[~expected], formula[~expected], out.dtype)
    return check


def _prf_formula(out, kw) -> bool:
    """exp(W x − |x|²/2) / √F, in float64, every feature > 0."""
    x, W = kw["x"].double(), kw["projection"].double()
    expected = torch.exp(x @ W.T - (x * x).sum(-1, keepdim=True) / 2) / math.sqrt(W.shape[0])
    return (out.dtype == kw["x"].dtype and bool((out > 0).all())
            and _close(out, expected, out.dtype, float(expected.abs().max()) if expected.numel() else 1.0))


def _projection_check(out, kw) -> bool:
    """(F, D) standard normal numbers drawn in float64 with the generator, then cast; with
    ``orthogonal``, rows orthogonal within each block of D (Gram matrix diagonal)."""
    Fn, Dn = int(kw["num_features"]), int(kw["size"])
    dtype, device = kw["dtype"], kw["device"]
    want = torch.device("cpu") if device is None else torch.device(device)
    ok = out.shape == (Fn, Dn) and out.dtype == dtype and out.device.type == want.type
    if kw.get("orthogonal"):
        W = out.double().cpu()
        tol = 1e-10 if dtype == torch.float64 else 3e-2 if dtype == torch.bfloat16 else 3e-3 * Dn
        for start in range(0, Fn, Dn):
            block = W[start:start + Dn]
            gram = block @ block.T
            ok = ok and bool((gram - torch.diag(gram.diagonal())).abs().max() <= tol * gram.diagonal().max())
        return ok and bool(torch.isfinite(out).all())
    if kw["generator"] is not None:  # good()'s generator, seeded 0
        expected = torch.randn(Fn, Dn, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        ok = ok and torch.equal(out.cpu(), expected.to(dtype))
    return ok and bool(torch.isfinite(out).all())


def _prefix_check(out, kw) -> bool:
    """How many keys each query sees, counted from ``sees``; and they are a prefix."""
    Bn, Qn, Kn = (int(kw[n]) for n in ("batch", "queries", "keys"))
    take = take_mask(Bn, Qn, Kn, kw["valid_lens"], bool(kw["causal"]))
    want = torch.device("cpu") if kw["device"] is None else torch.device(kw["device"])
    return (out.dtype == torch.long and out.device.type == want.type
            and torch.equal(out.cpu(), take.sum(-1))
            and torch.equal(take, torch.arange(Kn) < out.cpu()[..., None]))


def _delta_states(k, v, beta, decay=None) -> torch.Tensor:
    """S_t = α_t S_{t−1} + β_t k_t (v_t − α_t S_{t−1}ᵀk_t)ᵀ (β None: S_t = α_t S_{t−1} +
    k_t v_tᵀ; α None: 1) from S_0 = 0, one token at a time in float64: (B, T, D, V)."""
    k, v = k.double().cpu(), v.double().cpu()
    Bn, Tn, Dn = k.shape
    if beta is not None and not isinstance(beta, torch.Tensor):
        beta = torch.full((Bn, Tn), float(beta), dtype=torch.float64)
    if decay is not None and not isinstance(decay, torch.Tensor):
        decay = torch.full((Bn, Tn), float(decay), dtype=torch.float64)
    states = torch.zeros(Bn, Tn, Dn, v.shape[-1], dtype=torch.float64)
    for b in range(Bn):
        S = torch.zeros(Dn, v.shape[-1], dtype=torch.float64)
        for t in range(Tn):
            if decay is not None:
                S = float(decay[b, t]) * S
            write = v[b, t] if beta is None else float(beta[b, t]) * (v[b, t] - S.T @ k[b, t])
            S = S + torch.outer(k[b, t], write)
            states[b, t] = S
    return states


def _diverged_or_close(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> bool:
    """Close to the float64 formula, relative to its largest entry; where the formula's numbers
    outgrow float32 (|β|·|k|² far above 2: the state grows each step), only shape and dtype."""
    if out.shape != expected.shape or out.dtype != dtype:
        return False
    top = float(expected.abs().max()) if expected.numel() else 0.0
    if not math.isfinite(top) or top > 1e30:
        return True
    return _close(out, expected, dtype, max(top, 1.0))


def _states_check(out, kw) -> bool:
    k, v = kw["keys"], kw["values"]
    return _diverged_or_close(out, _delta_states(k, v, kw.get("beta"), kw.get("decay")), k.dtype)


def _delta_check(out, kw) -> bool:
    """o_t = S_tᵀ q_t with S_t after token t's own write."""
    q, k, v = kw["queries"], kw["keys"], kw["values"]
    states = _delta_states(k, v, kw.get("beta", 1.0), kw.get("decay"))
    expected = torch.einsum("btdv,btd->btv", states, q.double().cpu())
    return _diverged_or_close(out, expected, q.dtype)


def _all_dtype(dtype, names=("queries", "keys", "values")):
    return lambda kw: kw.update({n: kw[n].to(dtype) for n in names if n in kw})


_W = rand(64, D, seed=5)



# The decay refusals of recurrent_states and delta_rule (the same rule, the same messages).
_DECAY_BAD = [
    Case("decay-(B,T+1)", _set(decay=rand(B, K + 1).abs() / 9),
         r"^decay must .* = \(2, 5\), got shape \(2, 6\)"),
    Case("decay-above-1-entry", _set(decay=torch.tensor([[0.5, 1.5, 1, 1, 1]] * 2)),
         r"^decay must hold numbers in \[0, 1\], got 1.5"),
    Case("decay-negative-entry", _set(decay=torch.full((B, K), -0.25)),
         r"^decay must hold numbers in \[0, 1\], got -0.25"),
    Case("decay-nan-entry", _set(decay=torch.full((B, K), math.nan)), r"^decay must hold numbers"),
    Case("decay-float64", _set(decay=torch.full((B, K), 0.5, dtype=torch.float64)),
         r"^decay must have the dtype"),
    Case("decay-int", _set(decay=torch.ones(B, K, dtype=torch.long)), r"^decay must be a floating"),
    Case("decay-a-list", _set(decay=[0.5] * K), r"^decay must be a number"),
]

SPECS: list[Spec] = [
    Spec("helpers.linear_attention.elu_feature_map", call=la.elu_feature_map,
         good=lambda: dict(x=rand(B, Q, D) * 5),
         rules={"x": T(min_rank=1, same_dtype=False)},
         check=lambda out, kw: out.dtype == kw["x"].dtype and bool((out >= 0).all()) and _close(
             out, elu_plus_one(kw["x"].double()), out.dtype, 1e-3),
         bad=[Case("x-0-d", _set(x=torch.tensor(1.0)), r"^x must be a tensor of shape \(\.\.\., D\)")],
         edge=[Case("very-negative", _set(x=torch.tensor([-30.0, -80.0, 0.0, 90.0])),
                    lambda out, kw: bool((out > 0).all()) and _close(
                        out, elu_plus_one(kw["x"].double()), torch.float32)),
               Case("below-tiny", _set(x=torch.tensor([-200.0, -1e4, -87.0])),
                    lambda out, kw: bool((out[:2] == torch.finfo(torch.float32).tiny).all() and (out > 0).all())),
               Case("float16-below-tiny", _set(x=torch.tensor([-20.0, -1e4], dtype=torch.float16)),
                    lambda out, kw: bool((out == torch.finfo(torch.float16).tiny).all())),
               Case("no-entries", _set(x=rand(2, 0, 3)), lambda out, kw: out.shape == (2, 0, 3)),
               Case("float16", _set(x=rand(7, dtype=torch.float16)),
                    lambda out, kw: out.dtype == torch.float16 and _close(
                        out, elu_plus_one(kw["x"].double()), torch.float16))]),
    Spec("helpers.linear_attention.random_projection", call=la.random_projection,
         good=lambda: dict(num_features=7, size=3, generator=torch.Generator().manual_seed(0),
                           dtype=torch.float32, device="cpu", orthogonal=False),
         rules={"num_features": "size", "size": "size",
                "generator": lambda v: v is None or isinstance(v, torch.Generator) and v.device.type == "cpu",
                "dtype": OneOf(FLOATS), "device": Device(), "orthogonal": "flag"},
         check=_projection_check,
         bad=[Case("dtype=int64", _set(dtype=torch.int64), r"^dtype must"),
              Case("dtype=complex64", _set(dtype=torch.complex64), r"^dtype must"),
              Case("dtype='float32'", _set(dtype="float32"), r"^dtype must")],
         edge=[Case("float64,device=None", _set(dtype=torch.float64, device=None), _projection_check),
               Case("numpy-sizes", _set(num_features=np.int64(5), size=np.int32(2)), _projection_check),
               Case("no-generator", _set(generator=None), _projection_check),
               Case("orthogonal", _set(orthogonal=True), _projection_check),
               Case("orthogonal,F<D", _set(orthogonal=True, num_features=2, size=5), _projection_check),
               Case("orthogonal,float64", _set(orthogonal=True, dtype=torch.float64, num_features=9),
                    _projection_check),
               Case("orthogonal,float16", _set(orthogonal=True, dtype=torch.float16), _projection_check),
               Case("orthogonal,numpy", _set(orthogonal=np.True_, generator=None), _projection_check)]),
    Spec("helpers.linear_attention.positive_random_features", call=la.positive_random_features,
         good=lambda: dict(x=rand(B, Q, D), projection=rand(7, D, seed=1)),
         rules={"x": T(min_rank=1, same_dtype=False), "projection": T(rank=2, same_dtype=False)},
         check=_prf_formula,
         bad=[Case("projection-D-disagrees", _set(projection=rand(7, D + 1)),
                   r"feature size of projection .* expected 4, got 5"),
              Case("projection-no-rows", _set(projection=rand(0, D)), r"^projection must .* got 0"),
              Case("projection-meta", _set(projection=torch.empty(7, D, device="meta")),
                   r"^projection must be on the device of x \(cpu\), got meta"),
              Case("x-0-d", _set(x=torch.tensor(1.0)), r"^x must be a tensor of shape")],
         edge=[Case("one-vector", _set(x=rand(D)), _prf_formula),
               Case("no-vectors", _set(x=rand(0, D)), lambda out, kw: out.shape == (0, 7)),
               Case("float64", _all_dtype(torch.float64, ("x", "projection")), _prf_formula),
               Case("float16", _all_dtype(torch.float16, ("x", "projection")), _prf_formula),
               Case("bfloat16", _all_dtype(torch.bfloat16, ("x", "projection")), _prf_formula),
               Case("float16-x,float32-projection", _all_dtype(torch.float16, ("x",)), _prf_formula),
               Case("float32-x,float16-projection", _all_dtype(torch.float16, ("projection",)), _prf_formula),
               Case("underflow", lambda kw: kw.update(x=kw["x"] * 40),
                    lambda out, kw: bool((out > 0).all() and torch.isfinite(out).all())),
               Case("far-from-0", lambda kw: kw.update(x=kw["x"] * 4),
                    lambda out, kw: bool((out >= 0).all() and torch.isfinite(out).all()))]),
    Spec("helpers.linear_attention.visible_prefix", call=la.visible_prefix,
         good=lambda: dict(valid_lens=torch.tensor([4, 0]), batch=B, queries=Q, keys=K, device="cpu",
                           causal=True),
         rules={"valid_lens": T(dtype="integer", optional=True, lists=True), "batch": "count",
                "queries": "count", "keys": "count", "device": Device(), "causal": "flag"},
         valid=lambda kw: _lens_ok(kw["valid_lens"], kw["batch"], kw["queries"], kw["keys"]),
         check=_prefix_check,
         bad=[Case("lens-K+1", _set(valid_lens=[K + 1, 0]), r"valid_lens must lie in \[0, K\]"),
              Case("lens-negative", _set(valid_lens=[-1, 0]), r"valid_lens must lie in \[0, K\]"),
              Case("lens-(B+1,)", _set(valid_lens=[1, 1, 1]), r"valid_lens must have shape")],
         edge=[Case("(B,Q)-lens", _set(valid_lens=[[0, 5, 2], [1, 1, 3]]), _prefix_check),
               Case("Q>K,causal", _set(valid_lens=None, queries=8), _prefix_check),
               Case("not-causal", _set(causal=False), _prefix_check),
               Case("K=0", _set(valid_lens=None, keys=0), _prefix_check),
               Case("B=0", _set(valid_lens=[], batch=0), _prefix_check),
               Case("numpy-sizes", _set(batch=np.int64(2), queries=np.int32(4)), _prefix_check)]),
    Spec("helpers.linear_attention.linear_attention", call=_attend_with_grad,
         good=lambda: dict(queries=rand(B, Q, D, seed=1), keys=rand(B, K, D, seed=2),
                           values=rand(B, K, V, seed=3), valid_lens=torch.tensor([[0, 5, 2], [1, 1, 3]]),
                           feature_map=la.elu_feature_map, causal=True, form="linear"),
         rules={"queries": T(rank=3), "keys": T(rank=3), "values": T(rank=3),
                "valid_lens": T(dtype="integer", optional=True, lists=True),
                "feature_map": callable, "causal": "flag", "form": OneOf(la.FORMS)},
         valid=_attention_valid,
         check=_attention_check,
         bad=[Case("keys-D-disagrees", _set(keys=rand(B, K, D + 1)), r"feature size of keys .* expected 4, got 5"),
              Case("values-K-disagrees", _set(values=rand(B, K - 1, V)), r"number of values .* expected 5, got 4"),
              Case("keys-B-disagrees", _set(keys=rand(B + 1, K, D)), r"batch size of keys .* expected 2, got 3"),
              Case("D=0", _set(queries=rand(B, Q, 0), keys=rand(B, K, 0)), r"feature size D .* got 0"),
              Case("lens-K+1", _set(valid_lens=torch.tensor([K + 1, 0])), r"valid_lens must lie in \[0, K\]"),
              Case("lens-negative", _set(valid_lens=[[0, -1, 2], [1, 1, 3]]), r"valid_lens must lie in \[0, K\]"),
              Case("lens-(B+1,)", _set(valid_lens=[1, 1, 1]), r"valid_lens must have shape"),
              Case("lens-(B,Q+1)", _set(valid_lens=[[1] * 4] * 2), r"valid_lens must have shape .* got \(2, 4\)"),
              Case("map-negative", _set(feature_map=lambda x: x), r"^feature_map must return features >= 0"),
              Case("map-nan", _set(feature_map=torch.sqrt),
                   r"^feature_map must return finite features for finite queries, got NaN or inf"),
              Case("map-overflows", _set(feature_map=lambda x: torch.exp(x * 1e3)),
                   r"^feature_map must return finite features for finite queries"),
              Case("map-zeros", _set(feature_map=torch.zeros_like),
                   r"^feature_map must give a normaliser φ\(q\)·Σφ\(k\) > 0 for a query that sees keys, got 0"),
              Case("map-rank-2", _set(feature_map=lambda x: x.exp().sum(-1)),
                   r"^feature_map must return a tensor \(B, T, F\) .* = \(2, 3\), got \(2, 3\)"),
              Case("map-other-T", _set(feature_map=lambda x: x.exp()[:, :1]),
                   r"^feature_map must return a tensor \(B, T, F\) .* = \(2, 3\), got \(2, 1, 4\)"),
              Case("map-a-list", _set(feature_map=lambda x: x.exp().tolist()), r"^feature_map must .* got list"),
              Case("map-int", _set(feature_map=lambda x: x.exp().long()), r"^feature_map\(queries\) must"),
              Case("map-no-features", _set(feature_map=lambda x: x.exp()[..., :0]),
                   r"^feature_map must return at least one feature \(F >= 1\), got 0"),
              Case("map-F-differs", _set(feature_map=lambda x: x.exp().repeat(1, 1, x.shape[1] // 2)),
                   r"number of features of keys \(F, same as queries\): expected 4, got 8"),
              Case("mixed-dtypes", _set(keys=rand(B, K, D, dtype=torch.float64)), r"^keys must")],
         edge=[*(Case(f"form={form}", _set(form=form), _attention_check) for form in la.FORMS[:1] + la.FORMS[2:]),
               *(Case(f"(B,)-lens,{form}", _set(valid_lens=[3, 0], form=form), _attention_check)
                 for form in la.FORMS),
               *(Case(f"no-lens,not-causal,{form}", _set(valid_lens=None, causal=False, form=form),
                      _attention_check) for form in la.FORMS),
               *(Case(f"Q>K,causal,{form}", _set(queries=rand(B, 8, D), valid_lens=None, form=form),
                      _attention_check) for form in la.FORMS),
               Case("lens-as-lists", _set(valid_lens=[[0, 5, 2], [1, 1, 3]]), _attention_check),
               Case("numpy-causal", _set(causal=np.True_), _attention_check),
               Case("hidden-nan-and-inf", _hidden_nan, _attention_check),
               *(Case(f"visible-nan-{where},{form}", lambda kw, w=where, f=form: (
                   _visible_nan(w)(kw), kw.update(form=f)), _nan_check(where))
                 for where in ("key", "value", "query") for form in la.FORMS),
               Case("in-place-map", _set(feature_map=lambda x: x.clamp_(min=0).add_(1)),
                    _with_feature_map(lambda x: torch.relu(x) + 1)),
               Case("float16,float16-projection", lambda kw: (
                   _all_dtype(torch.float16)(kw),
                   kw.update(feature_map=lambda x: la.positive_random_features(x, _W.half()))),
                    _with_feature_map(lambda x: la.positive_random_features(x, _W.half().double()))),
               Case("hidden-nan-and-inf,quadratic", lambda kw: (_hidden_nan(kw), kw.update(form="quadratic")),
                    _attention_check),
               Case("hidden-nan-and-inf,recurrent", lambda kw: (_hidden_nan(kw), kw.update(form="recurrent")),
                    _attention_check),
               Case("K=0", _set(keys=rand(B, 0, D), values=rand(B, 0, V), valid_lens=None),
                    lambda out, kw: out[0].shape == (B, Q, V) and bool((out[0] == 0).all() and (out[1][0] == 0).all())),
               Case("Q=0", _set(queries=rand(B, 0, D), valid_lens=None), _attention_check),
               Case("B=0", _set(queries=rand(0, Q, D), keys=rand(0, K, D), values=rand(0, K, V), valid_lens=[]),
                    lambda out, kw: out[0].shape == (0, Q, V)),
               *(Case(f"{str(dtype)[6:]},{form}", _all_dtype(dtype), _attention_check)
                 for dtype in FLOATS for form in ("linear",)),
               Case("float16,quadratic", lambda kw: (_all_dtype(torch.float16)(kw), kw.update(form="quadratic")),
                    _attention_check),
               Case("bfloat16,recurrent", lambda kw: (_all_dtype(torch.bfloat16)(kw), kw.update(form="recurrent")),
                    _attention_check),
               Case("exponential-kernel=SDPA", lambda kw: kw.update(
                   queries=rand(B, Q, 2, seed=1, dtype=torch.float64).abs(),
                   keys=rand(B, K, 2, seed=2, dtype=torch.float64).abs(), values=rand(B, K, V, dtype=torch.float64),
                   valid_lens=[[5, 4, 3], [1, 2, 5]], feature_map=lambda x: _taylor(x / 2 ** 0.25)),
                    _softmax_check),
               Case("random-features", _set(feature_map=lambda x: la.positive_random_features(x, _W.to(x.dtype))),
                    _with_feature_map(lambda x: la.positive_random_features(x, _W.to(x.dtype)))),
               Case("polynomial-kernel", lambda kw: kw.update(
                   queries=kw["queries"].abs(), keys=kw["keys"].abs(),
                   feature_map=lambda x: (x[..., :, None] * x[..., None, :]).flatten(-2)),
                    _with_feature_map(lambda x: (x[..., :, None] * x[..., None, :]).flatten(-2)))]),
    Spec("helpers.linear_attention.recurrent_states", call=la.recurrent_states,
         good=lambda: dict(keys=rand(B, K, D, seed=1), values=rand(B, K, V, seed=2), beta=0.5, decay=0.9),
         rules={"keys": T(rank=3), "values": T(rank=3), "beta": _beta_rule(none_ok=True),
                "decay": Real(0, 1, optional=True)},
         check=_states_check,
         bad=[Case("values-T-disagrees", _set(values=rand(B, K - 1, V)), r"number of values .* expected 5, got 4"),
              Case("values-B-disagrees", _set(values=rand(B + 1, K, V)), r"batch size of values .* expected 2, got 3"),
              Case("beta-(B,T+1)", _set(beta=rand(B, K + 1)), r"^beta must .* = \(2, 5\), got shape \(2, 6\)"),
              Case("beta-(T,)", _set(beta=rand(K)), r"^beta must .* = \(2, 5\), got shape \(5,\)"),
              Case("beta-nan-entry", _set(beta=torch.tensor([[0.5, math.nan, 1, 1, 1]] * 2)),
                   r"^beta must hold finite numbers, got NaN"),
              Case("beta-inf-entry", _set(beta=torch.full((B, K), math.inf)), r"^beta must hold finite numbers"),
              Case("beta-float64", _set(beta=rand(B, K, dtype=torch.float64)), r"^beta must have the dtype"),
              Case("beta-int", _set(beta=torch.ones(B, K, dtype=torch.long)), r"^beta must be a floating"),
              Case("beta-meta", _set(beta=torch.empty(B, K, device="meta")), r"^beta must have the dtype and device"),
              Case("beta-a-list", _set(beta=[0.5] * K), r"^beta must be a finite number"),
              *_DECAY_BAD],
         edge=[Case("additive", _set(beta=None), _states_check),
               Case("decay-(B,T)", _set(decay=rand(B, K, seed=4).abs().clamp(max=1)), _states_check),
               Case("decay-zero-entry", _set(decay=torch.tensor([[0.5, 0.0, 1, 1, 0.9]] * 2)), _states_check),
               Case("no-decay", _set(decay=None), _states_check),
               Case("additive,decay-(B,T)", _set(beta=None, decay=rand(B, K, seed=4).abs().clamp(max=1)),
                    _states_check),
               Case("beta-(B,T)", _set(beta=rand(B, K, seed=4).abs()), _states_check),
               Case("beta-numpy", _set(beta=np.float32(0.25)), _states_check),
               Case("D=0", _set(keys=rand(B, K, 0)), lambda out, kw: out.shape == (B, K, 0, V)),
               Case("T=0", _set(keys=rand(B, 0, D), values=rand(B, 0, V)),
                    lambda out, kw: out.shape == (B, 0, D, V)),
               Case("float16", _all_dtype(torch.float16, ("keys", "values")), _states_check),
               Case("bfloat16-additive", lambda kw: (_all_dtype(torch.bfloat16, ("keys", "values"))(kw),
                                                    kw.update(beta=None)), _states_check),
               Case("float64", _all_dtype(torch.float64, ("keys", "values")), _states_check)]),
    Spec("helpers.linear_attention.delta_rule", call=la.delta_rule,
         good=lambda: dict(queries=rand(B, K, D, seed=3), keys=rand(B, K, D, seed=1),
                           values=rand(B, K, V, seed=2), beta=0.5, decay=0.9),
         rules={"queries": T(rank=3), "keys": T(rank=3), "values": T(rank=3),
                "beta": _beta_rule(none_ok=False), "decay": Real(0, 1, optional=True)},
         check=_delta_check,
         bad=[Case("queries-T-disagrees", _set(queries=rand(B, K + 1, D)),
                   r"^queries must have the \(B, T\) of keys \(2, 5\) .* got \(2, 6\)"),
              Case("queries-D-disagrees", _set(queries=rand(B, K, D + 1)),
                   r"feature size of queries .* expected 4, got 5"),
              Case("values-T-disagrees", _set(values=rand(B, K - 1, V)), r"number of values .* expected 5, got 4"),
              Case("beta-(B,T+1)", _set(beta=rand(B, K + 1)), r"^beta must .* got shape \(2, 6\)"),
              Case("beta-nan-entry", _set(beta=torch.full((B, K), math.nan)), r"^beta must hold finite"),
              *_DECAY_BAD],
         edge=[Case("beta-(B,T)", _set(beta=rand(B, K, seed=4).abs()), _delta_check),
               Case("decay-(B,T)", _set(decay=rand(B, K, seed=4).abs().clamp(max=1)), _delta_check),
               Case("decay-zero-entry", _set(decay=torch.tensor([[0.5, 0.0, 1, 1, 0.9]] * 2)), _delta_check),
               Case("no-decay", _set(decay=None), _delta_check),
               Case("unit-keys,beta=1", lambda kw: kw.update(keys=F.normalize(kw["keys"], dim=-1), beta=1),
                    _delta_check),
               Case("T=0", _set(queries=rand(B, 0, D), keys=rand(B, 0, D), values=rand(B, 0, V)),
                    lambda out, kw: out.shape == (B, 0, V)),
               Case("float16", _all_dtype(torch.float16), _delta_check),
               Case("bfloat16", _all_dtype(torch.bfloat16), _delta_check),
               Case("float64", _all_dtype(torch.float64), _delta_check)]),
]
