"""Specs for ``helpers.tiling``: the online softmax, the tile plan, tiled attention (forward and
backward) and the memory meter (see ``tests/fuzz/__init__.py`` for the format). The references
are written out here in float64: softmax(Q Kᵀ / √D) V with the lower-right causal mask (and its
sliding-window band), its gradients by autograd, the online-softmax recurrence, a count of the
visible entries per tile."""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from helpers import tiling
from tests.fuzz import GENERIC, Case, Real, Spec, T

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def rand(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _device_ok(v: object) -> bool:
    """A device PyTorch can name that is present: the CPU, or a CUDA device on this machine."""
    if isinstance(v, bool):
        return False
    try:
        d = torch.device(v)  # type: ignore[arg-type]
    except (RuntimeError, TypeError, ValueError):
        return False
    return d.type == "cpu" or (d.type == "cuda" and torch.cuda.is_available() and (
        d.index is None or d.index < torch.cuda.device_count()))


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    tol = {torch.float16: 3e-3, torch.bfloat16: 3e-2, torch.float32: 1e-5, torch.float64: 1e-10}[dtype]
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)


# --------------------------------------------------------------------- the online softmax
def _state(rows=(3,), n=5, V=2, dtype=torch.float32, seed=1) -> tiling.OnlineSoftmax:
    """A state that has seen n keys (scores rand(*rows, n), values rand(n, V))."""
    start = tiling.online_softmax_start(rows, V, dtype=dtype)
    return tiling.online_softmax_update(start, rand(*rows, n, seed=seed, dtype=dtype),
                                        rand(n, V, seed=seed + 1, dtype=dtype))


def _update_formula(new, kw) -> bool:
    """The recurrence written out in float64: M = max(m, max s), sum' = e^(m−M)·sum + Σ e^(s−M),
    out' = e^(m−M)·out + e^(s−M) @ values (rows that saw nothing keep m = −inf, sums 0)."""
    state, s, v = kw["state"], kw["scores"].double(), kw["values"].double()
    m = state.max.double()
    M = torch.maximum(m, s.amax(-1, keepdim=True)) if s.shape[-1] else m
    shift = torch.where(M == -math.inf, torch.zeros_like(M), M)
    p = torch.exp(s - shift)
    expected = (M, torch.exp(m - shift) * state.sum.double() + p.sum(-1, keepdim=True),
                torch.exp(m - shift) * state.out.double() + p @ v)
    dtype = state.max.dtype
    return isinstance(new, tiling.OnlineSoftmax) and all(
        got.dtype == dtype and _close(got, want, dtype) for got, want in zip(new, expected))


def _softmax_of_both(new, kw) -> bool:
    """The good call: the state saw rand(3, 5) with rand(5, 2), then the block: its result is
    softmax over all 9 keys @ all 9 values."""
    scores = torch.cat([rand(3, 5, seed=1), kw["scores"]], dim=-1).double()
    values = torch.cat([rand(5, 2, seed=2), kw["values"]]).double()
    return _update_formula(new, kw) and _close(
        tiling.online_softmax_result(new), torch.softmax(scores, -1) @ values, torch.float32)


def _result_formula(out, kw) -> bool:
    state = kw["state"]
    total = state.sum.double()
    expected = torch.where(total > 0, state.out.double() / total.clamp_min(1e-300), 0.0)
    return out.dtype == state.out.dtype and _close(out, expected, out.dtype) and bool(torch.isfinite(out).all())


def _start_formula(state, kw) -> bool:
    rows, V = tuple(int(n) for n in kw["rows"]), int(kw["value_size"])
    dtype = kw.get("dtype", torch.float32)
    return (isinstance(state, tiling.OnlineSoftmax)
            and [tuple(t.shape) for t in state] == [(*rows, 1), (*rows, 1), (*rows, V)]
            and all(t.dtype == dtype and t.device.type == "cpu" for t in state)
            and bool((state.max == -math.inf).all() and (state.sum == 0).all() and (state.out == 0).all()))


def _rows_ok(v: object) -> bool:
    return isinstance(v, tuple) and all(
        isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n >= 0 for n in v)


def _fields(out, kw) -> bool:
    return isinstance(out, tiling.OnlineSoftmax) and all(
        a is b for a, b in zip(out, (kw["max"], kw["sum"], kw["out"])))


def _sneaked(**fields) -> tiling.OnlineSoftmax:
    """A state with the given fields replaced, built past the constructor's checks (``_make``),
    as a caller's own code could: the functions must check it again."""
    good = _state()
    return tiling.OnlineSoftmax._make(fields.get(name, getattr(good, name)) for name in good._fields)


# ---------------------------------------------------------------------------------- tiles
def _visible(Q: int, K: int, causal: bool, window: int | None = None) -> torch.Tensor:
    """(Q, K), True = takes part: key j visible to query i iff j ≤ i + K − Q when causal, and
    i + K − Q − j < W too with a window W."""
    if not causal:
        return torch.ones(Q, K, dtype=torch.bool)
    behind = torch.arange(Q)[:, None] + (K - Q) - torch.arange(K)[None, :]  # (Q, K)
    return (behind >= 0) & (behind < (K + 1 if window is None else int(window)))


def _mask_of(kw) -> torch.Tensor:
    """The (Q, K) visibility a call of tile_kinds, tile_flops or hbm_accesses describes."""
    return _visible(int(kw["num_queries"]), int(kw["num_keys"]), bool(kw.get("causal", False)),
                    kw.get("window"))


def _kinds_by_count(Q, K, b, seen) -> torch.Tensor:
    return torch.tensor([[tiling.FULL if t.all() else tiling.SKIPPED if not t.any() else tiling.PARTIAL
                          for t in (seen[q0:q0 + b, k0:k0 + b] for k0 in range(0, K, b))]
                         for q0 in range(0, Q, b)])


def _kinds_check(out, kw) -> bool:
    expected = _kinds_by_count(int(kw["num_queries"]), int(kw["num_keys"]), int(kw["block_size"]),
                               _mask_of(kw))
    return torch.equal(out, expected)


def _flops_check(out, kw) -> bool:
    Q, K, b = int(kw["num_queries"]), int(kw["num_keys"]), int(kw["block_size"])
    per = 2 * (int(kw["qk_size"]) + int(kw["value_size"]))
    seen = _mask_of(kw)
    computed = sum(t.numel() for t in (seen[q0:q0 + b, k0:k0 + b] for q0 in range(0, Q, b)
                                       for k0 in range(0, K, b)) if t.any()) * per
    return out == (computed, Q * K * per) and all(type(x) is int for x in out)


def _hbm_check(out, kw) -> bool:
    """Standard: the paper's Algorithm 0 (read Q, K; write and read S; write and read P; read V;
    write O). Tiled: Q read and O written once, K and V blocks read per tile with a visible key."""
    Q, K, b = int(kw["num_queries"]), int(kw["num_keys"]), int(kw["block_size"])
    D, V = int(kw["qk_size"]), int(kw["value_size"])
    seen = _mask_of(kw)
    reads = sum(min(b, K - k0) for q0 in range(0, Q, b) for k0 in range(0, K, b)
                if seen[q0:q0 + b, k0:k0 + b].any())
    expected = (Q * D + K * D + 4 * Q * K + K * V + Q * V, Q * (D + V) + reads * (D + V))
    return out == expected and all(type(x) is int for x in out)


def _lengths_ok(v: object) -> bool:
    return isinstance(v, (list, tuple)) and all(
        isinstance(n, numbers.Integral) and not isinstance(n, (bool, np.bool_)) and n >= 1 for n in v)


def _fit_check(out, kw) -> bool:
    """Each length whose estimated peak, (4·B·H·L² + 16·B·H·L·d)·bytes, is ≤ share · free."""
    B, H, d, nbytes = (int(kw[n]) for n in ("batch", "heads", "head_size", "bytes_per_number"))
    budget = float(kw.get("share", 0.8)) * int(kw["free_bytes"])
    expected = tuple(int(L) for L in kw["lengths"]
                     if (4 * B * H * int(L) ** 2 + 16 * B * H * int(L) * d) * nbytes <= budget)
    return out == expected and all(type(L) is int for L in out)


# ------------------------------------------------------------------------ tiled attention
def attend_with_grad(attend):
    """A call for a spec: ``attend(**kw)`` on fresh copies of the tensors that can take a
    gradient (floating, not meta), and their gradients for a fixed random dO: (output, (dQ, dK,
    dV)); a tensor the output does not depend on gets a zero gradient. Shared by the specs of
    tiled_attention and linear_attention."""
    def call(**kw):
        args = {}
        for name in ("queries", "keys", "values"):
            x = kw.get(name)
            ok = isinstance(x, torch.Tensor) and x.is_floating_point() and x.device.type != "meta"
            args[name] = x.detach().clone().requires_grad_() if ok else x
        out = attend(**{**kw, **args})
        leaves = [args[n] for n in ("queries", "keys", "values")]
        d_out = rand(*out.shape, seed=9, dtype=out.dtype)
        grads = torch.autograd.grad(out, leaves, d_out, allow_unused=True)
        return out.detach(), tuple(torch.zeros_like(x) if g is None else g
                                   for g, x in zip(grads, leaves))
    return call


_attend_with_grad = attend_with_grad(tiling.tiled_attention)


def _reference(q, k, v, causal, window=None):
    """softmax(Q Kᵀ / √D) V in float64; a query that sees no key: zeros (and zero gradients)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Q, K)
    seen = _visible(q.shape[-2], k.shape[-2], causal, window)
    anything = seen.any(-1, keepdim=True)  # (Q, 1)
    s = torch.where(anything, s.masked_fill(~seen, -math.inf), 0.0)
    return torch.softmax(s, dim=-1) * anything @ v


def _attention_check(result, kw) -> bool:
    out, grads = result
    q, k, v = (kw[n] for n in ("queries", "keys", "values"))
    dtype = q.dtype
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = _reference(*leaves, bool(kw.get("causal", False)), kw.get("window"))
    d_out = rand(*expected.shape, seed=9, dtype=dtype).double()
    expected_grads = torch.autograd.grad(expected, leaves, d_out, allow_unused=True)
    return (out.dtype == dtype and _close(out, expected, dtype) and all(
        g.dtype == dtype and g.shape == x.shape and bool(torch.isfinite(g).all())
        and _close(g, torch.zeros_like(x) if e is None else e, dtype)
        for g, e, x in zip(grads, expected_grads, (q, k, v))))


def _zeros_for_blind_queries(result, kw) -> bool:
    out, (dq, _, _) = result
    blind = kw["queries"].shape[-2] - kw["keys"].shape[-2]
    return _attention_check(result, kw) and bool((out[..., :blind, :] == 0).all()
                                                 and (dq[..., :blind, :] == 0).all())


def _set(**changes):
    return lambda kw: kw.update(changes)


def _all_dtype(dtype):
    return lambda kw: kw.update({n: kw[n].to(dtype) for n in ("queries", "keys", "values")})


# ------------------------------------------------------------------------------- the meter
def _two_then_one():
    a = torch.ones(250, dtype=torch.float64)  # 2000 bytes
    b = a * 2  # 4000 live
    del a
    return b + 1  # 4000 again, then 2000 when b goes


_X = torch.zeros(100)


def _window_needs_causal(kw) -> bool:
    """A call is valid as a whole only if a window comes with causal=True."""
    return kw.get("window") is None or bool(kw.get("causal"))


def _cost_spec(target: str, call, check, *extra: Case) -> Spec:
    """A spec of one of the tile-map costs (tile_flops, hbm_accesses): the same arguments and
    edge cases, each checked against its own formula (``check``); ``extra``: more edges."""
    return Spec(target, call=call,
                good=lambda: dict(num_queries=10, num_keys=7, block_size=3, qk_size=4,
                                  value_size=5, causal=True, window=4),
                rules={"num_queries": "size", "num_keys": "size", "block_size": "size",
                       "qk_size": "size", "value_size": "size", "causal": "flag",
                       "window": "size or None"},
                valid=_window_needs_causal,
                check=check,
                bad=[Case("window-without-causal", _set(causal=False),
                          r"^window must .*needs causal=True.*got causal=False")],
                edge=[Case("not-causal", _set(causal=False, window=None), check),
                      Case("causal-no-window", _set(window=None), check),
                      Case("window=1-long", _set(num_queries=40, num_keys=40, window=1), check),
                      Case("window>K", _set(window=50), check),
                      Case("square", _set(num_queries=12, num_keys=12, block_size=4), check),
                      Case("Q<K", _set(num_queries=4, num_keys=11), check),
                      *extra,
                      Case("numpy-sizes", _set(qk_size=np.int64(8), value_size=np.int64(2)),
                           check)])


SPECS: list[Spec] = [
    Spec("helpers.tiling.OnlineSoftmax", call=tiling.OnlineSoftmax,
         good=lambda: dict(max=rand(3, 1), sum=rand(3, 1).abs(), out=rand(3, 2)),
         rules={"max": T(min_rank=1), "sum": T(min_rank=1), "out": T(min_rank=1)},
         check=_fields,
         bad=[Case("max-not-(...,1)", _set(max=rand(3, 2)), r"^max must be a tensor of shape \(\.\.\., 1\)"),
              Case("sum-other-rows", _set(sum=rand(2, 1)), r"^sum must .* got shape \(2, 1\)"),
              Case("out-other-rows", _set(out=rand(2, 2)), r"^out must .* got shape \(2, 2\)"),
              Case("out-rank-1", _set(out=rand(2)), r"^out must .* got shape \(2,\)"),
              Case("max-0-d", _set(max=torch.tensor(0.0)), r"^max must .* got shape \(\)"),
              Case("all-meta", lambda kw: kw.update({n: t.to("meta") for n, t in kw.items()}),
                   r"^max must .*meta")],
         edge=[Case("one-row", _set(max=rand(1), sum=rand(1), out=rand(6)), _fields),
               Case("float16", lambda kw: kw.update({n: t.half() for n, t in kw.items()}), _fields),
               Case("no-values", _set(out=rand(3, 0)), _fields)]),
    Spec("helpers.tiling.online_softmax_start", call=tiling.online_softmax_start,
         good=lambda: dict(rows=(2, 3), value_size=4, dtype=torch.float32, device="cpu"),
         rules={"rows": _rows_ok, "value_size": "size", "dtype": lambda v: v in FLOATS,
                "device": lambda v: v is None or _device_ok(v)},
         check=_start_formula,
         bad=[Case("rows=(2,-1)", _set(rows=(2, -1))), Case("rows=[2,3]", _set(rows=[2, 3])),
              Case("rows=(2.0,)", _set(rows=(2.0,))), Case("rows=(True,)", _set(rows=(True,))),
              Case("rows=('2',)", _set(rows=("2",))),
              Case("dtype=int64", _set(dtype=torch.int64), r"^dtype must"),
              Case("dtype=complex64", _set(dtype=torch.complex64), r"^dtype must"),
              Case("dtype='float32'", _set(dtype="float32"), r"^dtype must"),
              Case("device='gpu7'", _set(device="gpu7"), r"^device must"),
              Case("device='meta'", _set(device="meta"), r"^device must")]
         + ([] if torch.cuda.is_available() else
            [Case("device='cuda'-absent", _set(device="cuda"), r"^device must")]),
         edge=[Case("rows=()", _set(rows=()), _start_formula),
               Case("rows=torch.Size", _set(rows=torch.zeros(2, 3, 7).shape[:-1]), _start_formula),
               Case("rows-numpy-and-0", _set(rows=(np.int64(2), 0)), _start_formula),
               Case("bfloat16", _set(dtype=torch.bfloat16), _start_formula),
               Case("device=torch.device", _set(device=torch.device("cpu")), _start_formula)]),
    Spec("helpers.tiling.online_softmax_update", call=tiling.online_softmax_update,
         good=lambda: dict(state=_state(), scores=rand(3, 4, seed=3), values=rand(4, 2, seed=4)),
         rules={"state": lambda v: isinstance(v, tiling.OnlineSoftmax), "scores": T(min_rank=1),
                "values": T(min_rank=2)},
         check=_softmax_of_both,
         bad=[Case("scores-other-rows", _set(scores=rand(4, 4)), r"^scores must .* got shape \(4, 4\)"),
              Case("scores-0-d", _set(scores=torch.tensor(1.0)), r"^scores must .* got shape \(\)"),
              Case("values-n-disagrees", _set(values=rand(5, 2)), r"number of values .* expected 4, got 5"),
              Case("values-V-disagrees", _set(values=rand(4, 3)), r"value size .* expected 2, got 3"),
              Case("values-extra-lead", _set(values=rand(2, 4, 2)), r"^values must .* got shape \(2, 4, 2\)"),
              Case("state-a-tuple", lambda kw: kw.update(state=tuple(kw["state"])), r"^state must"),
              Case("state-sum-bad", _set(state=_sneaked(sum=rand(2, 1))), r"^state\.sum must"),
              Case("state-out-dtype", _set(state=_sneaked(out=rand(3, 2, dtype=torch.float64))),
                   r"^state\.out must"),
              Case("state-max-list", _set(state=_sneaked(max=[[0.0]] * 3)), r"^state\.max must")],
         edge=[Case("one-row-1-d-scores", lambda kw: kw.update(
                   state=_state(rows=()), scores=rand(4, seed=3)), _update_formula),
               Case("batched-values-broadcast", lambda kw: kw.update(
                   state=_state(rows=(2, 3)), scores=rand(2, 3, 4), values=rand(1, 4, 2)),
                   _update_formula),
               Case("all-hidden-from-start", lambda kw: kw.update(
                   state=tiling.online_softmax_start((3,), 2),
                   scores=torch.full((3, 4), -math.inf)), _update_formula),
               Case("some-hidden", lambda kw: kw["scores"].__setitem__((0, slice(None)), -math.inf),
                    _update_formula),
               Case("empty-block", _set(scores=rand(3, 0), values=rand(0, 2)), _update_formula),
               Case("float64", lambda kw: kw.update(
                   state=_state(dtype=torch.float64), scores=kw["scores"].double(),
                   values=kw["values"].double()), _update_formula),
               Case("bfloat16", lambda kw: kw.update(
                   state=_state(dtype=torch.bfloat16), scores=kw["scores"].bfloat16(),
                   values=kw["values"].bfloat16()), _update_formula)]),
    Spec("helpers.tiling.online_softmax_result", call=tiling.online_softmax_result,
         good=lambda: dict(state=_state()),
         rules={"state": lambda v: isinstance(v, tiling.OnlineSoftmax)},
         check=lambda out, kw: _result_formula(out, kw) and _close(
             out, torch.softmax(rand(3, 5, seed=1), -1) @ rand(5, 2, seed=2), torch.float32),
         bad=[Case("state-a-tuple", lambda kw: kw.update(state=tuple(kw["state"])), r"^state must"),
              Case("state-max-(3,2)", _set(state=_sneaked(max=rand(3, 2))), r"^state\.max must"),
              Case("state-out-rows", _set(state=_sneaked(out=rand(2, 2))), r"^state\.out must"),
              Case("state-meta", _set(state=_sneaked(max=rand(3, 1).to("meta"))), r"^state\.max must")],
         edge=[Case("fresh-start", _set(state=tiling.online_softmax_start((3,), 2)), _result_formula),
               Case("one-row", _set(state=_state(rows=())), _result_formula),
               Case("nothing-seen", _set(state=tiling.online_softmax_update(
                   tiling.online_softmax_start((2,), 3), torch.full((2, 4), -math.inf), rand(4, 3))),
                    _result_formula),
               Case("float16", _set(state=_state(dtype=torch.float16)), _result_formula)]),
    Spec("helpers.tiling.tile_kinds", call=tiling.tile_kinds,
         good=lambda: dict(num_queries=10, num_keys=7, block_size=3, causal=True, window=4),
         rules={"num_queries": "size", "num_keys": "size", "block_size": "size", "causal": "flag",
                "window": "size or None"},
         valid=_window_needs_causal,
         check=_kinds_check,
         bad=[Case("window-without-causal", _set(causal=False),
                   r"^window must .*needs causal=True.*got causal=False")],
         edge=[Case("not-causal", _set(causal=False, window=None), _kinds_check),
               Case("causal-no-window", _set(window=None), _kinds_check),
               Case("window=1-long", _set(num_queries=40, num_keys=40, window=1), _kinds_check),
               Case("window-Q>K", _set(num_queries=20, num_keys=9, window=2), _kinds_check),
               Case("window>K", _set(window=50), _kinds_check),
               Case("Q<K", _set(num_queries=4, num_keys=11), _kinds_check),
               Case("block>Q,K", _set(block_size=50), _kinds_check),
               Case("block=1", _set(block_size=1), _kinds_check),
               Case("numpy-sizes", _set(num_queries=np.int64(9), block_size=np.int32(4)), _kinds_check)]),
    _cost_spec("helpers.tiling.tile_flops", tiling.tile_flops, _flops_check),
    _cost_spec("helpers.tiling.hbm_accesses", tiling.hbm_accesses, _hbm_check,
               Case("block>Q,K", _set(block_size=50), _hbm_check)),
    Spec("helpers.tiling.lengths_that_fit", call=tiling.lengths_that_fit,
         good=lambda: dict(free_bytes=15 * 2**30, lengths=[1024, 2048, 4096, 8192], batch=4,
                           heads=16, head_size=64, bytes_per_number=2, share=0.8),
         rules={"free_bytes": "count", "lengths": _lengths_ok, "batch": "size", "heads": "size",
                "head_size": "size", "bytes_per_number": "size",
                "share": Real(0.0, 1.0, lo_open=True)},
         check=_fit_check,
         bad=[Case("lengths-with-0", _set(lengths=[1024, 0]), r"^lengths must be a list or tuple"),
              Case("lengths-with-bool", _set(lengths=[True]), r"^lengths must be a list or tuple"),
              Case("lengths-a-range", _set(lengths=range(1, 3)), r"^lengths must be a list or tuple")],
         edge=[Case("h100", _set(free_bytes=79 * 2**30), _fit_check),
               Case("tiny-gpu", _set(free_bytes=2 * 2**30), _fit_check),
               Case("nothing-free", _set(free_bytes=0), lambda out, kw: out == ()),
               Case("no-lengths", _set(lengths=()), lambda out, kw: out == ()),
               Case("numpy-lengths", _set(lengths=(np.int64(1024), np.int32(2048))), _fit_check),
               Case("share=int-1", _set(share=1), _fit_check)]),
    Spec("helpers.tiling.tiled_attention", call=_attend_with_grad,
         good=lambda: dict(queries=rand(2, 5, 4, seed=1), keys=rand(2, 7, 4, seed=2),
                           values=rand(2, 7, 3, seed=3), block_size=3, causal=True, window=3),
         rules={"queries": T(min_rank=2), "keys": T(min_rank=2), "values": T(min_rank=2),
                "block_size": "size", "causal": "flag", "window": "size or None"},
         valid=_window_needs_causal,
         check=_attention_check,
         bad=[Case("keys-D-disagrees", _set(keys=rand(2, 7, 5)), r"feature size of keys .* expected 4, got 5"),
              Case("values-K-disagrees", _set(values=rand(2, 6, 3)), r"number of values .* expected 7, got 6"),
              Case("leads-disagree", _set(keys=rand(3, 7, 4), values=rand(3, 7, 3)),
                   r"^leading dims of queries, keys and values must broadcast, got"),
              Case("D=0", _set(queries=rand(2, 5, 0), keys=rand(2, 7, 0)), r"feature size D .* must .* got 0"),
              Case("mixed-dtypes", _set(keys=rand(2, 7, 4, dtype=torch.float64)), GENERIC),
              Case("window-without-causal", _set(causal=False),
                   r"^window must .*needs causal=True.*got causal=False")],
         edge=[Case("not-causal", _set(causal=False, window=None), _attention_check),
               Case("causal-no-window", _set(window=None), _attention_check),
               Case("causal-Q>K-blind-queries", _set(queries=rand(2, 9, 4), window=None),
                    _zeros_for_blind_queries),
               Case("window-Q>K-blind-queries", _set(queries=rand(2, 9, 4), window=2),
                    _zeros_for_blind_queries),
               Case("window=1-block=1", _set(window=1, block_size=1), _attention_check),
               Case("window=1-long", _set(queries=rand(2, 40, 4), keys=rand(2, 40, 4),
                                          values=rand(2, 40, 3), window=1, block_size=4),
                    _attention_check),
               Case("window>K", _set(window=50), _attention_check),
               Case("causal-block=1", _set(window=None, block_size=1), _attention_check),
               Case("block>Q,K", _set(block_size=64), _attention_check),
               Case("broadcast-leads", _set(queries=rand(2, 1, 5, 4), keys=rand(1, 3, 7, 4),
                                            values=rand(3, 7, 3), causal=True), _attention_check),
               Case("no-leading-dims", _set(queries=rand(5, 4), keys=rand(7, 4), values=rand(7, 3)),
                    _attention_check),
               Case("no-keys", _set(keys=rand(2, 0, 4), values=rand(2, 0, 3)), _attention_check),
               Case("no-queries", _set(queries=rand(2, 0, 4)), _attention_check),
               Case("float64-causal", lambda kw: (_all_dtype(torch.float64)(kw),
                                                  kw.update(window=None)), _attention_check),
               Case("float64-window", _all_dtype(torch.float64), _attention_check),
               Case("float16-window", _all_dtype(torch.float16), _attention_check),
               Case("bfloat16-not-causal", lambda kw: (_all_dtype(torch.bfloat16)(kw), kw.update(
                   causal=False, window=None)), _attention_check),
               Case("numpy-block", _set(block_size=np.int64(2)), _attention_check)]),
    Spec("helpers.tiling.peak_bytes", call=tiling.peak_bytes,
         good=lambda: dict(fn=lambda: torch.empty(1000), device="cpu"),
         rules={"fn": callable, "device": _device_ok},
         check=lambda out, kw: out == 4000,
         bad=[Case("device='gpu7'", _set(device="gpu7"), r"^device must"),
              Case("device='meta'", _set(device="meta"), r"^device must")]
         + ([] if torch.cuda.is_available() else
            [Case("device='cuda'-absent", _set(device="cuda"), r"^device must")]),
         edge=[Case("live-storages-once", _set(fn=_two_then_one), lambda out, kw: out == 4000),
               Case("a-view-allocates-nothing", _set(fn=lambda: _X[:50]), lambda out, kw: out == 0),
               Case("no-result", _set(fn=lambda: None), lambda out, kw: out == 0),
               Case("device=torch.device", _set(device=torch.device("cpu")), lambda out, kw: out == 4000),
               # under autograd the graph keeps what the naive path saves: scores and weights
               # (two (6, 9) float32 matrices) beyond the output; tiled_attention keeps per
               # query only its output row and one log-sum-exp
               Case("naive-with-grad", _set(fn=lambda: torch.softmax(
                   rand(6, 4).requires_grad_() @ rand(9, 4).T, -1) @ rand(9, 3)),
                    lambda out, kw: out >= 2 * 6 * 9 * 4),
               Case("tiled-with-grad", _set(fn=lambda: tiling.tiled_attention(
                   rand(1, 64, 4).requires_grad_(), rand(1, 64, 4), rand(1, 64, 3), block_size=8)),
                    lambda out, kw: 64 * (3 + 1) * 4 <= out < 64 * 64 * 4)]),
]
