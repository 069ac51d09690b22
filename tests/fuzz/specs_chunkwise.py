"""Specs for ``helpers.chunkwise``: causal linear attention, the additive state with a decay and
the delta rule (Gated DeltaNet), each computed chunk by chunk (see ``tests/fuzz/__init__.py``).

Sizes: B batch 2, T tokens 7, D query/key size 4, V value size 6; chunks of 3 (T is not a
multiple). Every ``check`` compares with a formula written out one token at a time in float64
(``written_out`` and ``_delta_states``, shared with the specs of ``helpers.linear_attention``),
never with the helper itself.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from helpers import chunkwise as cw
from helpers import linear_attention as la
from tests.fuzz import Case, Real, Spec, T
from tests.fuzz.specs_linear_attention import _beta_rule, _delta_states, _diverged_or_close
from tests.fuzz.specs_tiling import rand
from tests.test_linear_attention import elu_plus_one, written_out

B, TT, D, V = 2, 7, 4, 6
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _set(**changes):
    return lambda kw: kw.update(changes)


def _all_dtype(dtype, names=("queries", "keys", "values", "beta", "decay")):
    return lambda kw: kw.update({n: kw[n].to(dtype) for n in names if isinstance(kw.get(n), torch.Tensor)})


def _qkv(T_=TT) -> dict:
    return dict(queries=rand(B, T_, D, seed=3), keys=F.normalize(rand(B, T_, D, seed=1), dim=-1),
                values=rand(B, T_, V, seed=2))


def _read(states: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return torch.einsum("btdv,btd->btv", states, q.double().cpu())


def _linear_check(phi=elu_plus_one):
    def check(out, kw) -> bool:
        q, k, v = kw["queries"], kw["keys"], kw["values"]
        expected = written_out(q, k, v, phi, None, True)
        return _diverged_or_close(out, expected, q.dtype) and bool(torch.isfinite(out).all())
    return check


def _additive_check(out, kw) -> bool:
    q, k, v = kw["queries"], kw["keys"], kw["values"]
    return _diverged_or_close(out, _read(_delta_states(k, v, None, kw.get("decay")), q), q.dtype)


def _delta_check(out, kw) -> bool:
    q, k, v = kw["queries"], kw["keys"], kw["values"]
    states = _delta_states(k, v, kw.get("beta", 1.0), kw.get("decay"))
    return _diverged_or_close(out, _read(states, q), q.dtype)


def _nan_at_token(name: str, t: int = 4):
    def change(kw):
        x = kw[name].clone()
        x[0, t, 0] = math.nan
        kw[name] = x
    return change


def _nan_from(t: int, only_t: bool = False):
    """NaN in row 0 from token t on (only at t: a query), nowhere else."""
    def check(out, kw) -> bool:
        nan = torch.isnan(out).any(-1)  # (B, T)
        want = torch.zeros_like(nan)
        if only_t:
            want[0, t] = True
        else:
            want[0, t:] = True
        return torch.equal(nan, want)
    return check


_QKV_RULES = {"queries": T(rank=3), "keys": T(rank=3), "values": T(rank=3), "chunk_size": "size"}

_SHAPE_BAD = [
    Case("queries-T-disagrees", _set(queries=rand(B, TT + 1, D)),
         r"^queries must have the \(B, T\) of keys \(2, 7\) .* got \(2, 8\)"),
    Case("queries-D-disagrees", _set(queries=rand(B, TT, D + 1)), r"feature size of queries .* expected 4, got 5"),
    Case("values-T-disagrees", _set(values=rand(B, TT - 1, V)), r"number of values .* expected 7, got 6"),
    Case("values-B-disagrees", _set(values=rand(B + 1, TT, V)), r"batch size of values .* expected 2, got 3"),
    Case("keys-float64", _set(keys=rand(B, TT, D, dtype=torch.float64)), r"^(queries|values) must have the dtype"),
]


def _edges(check, dtypes_names=("queries", "keys", "values", "beta", "decay")) -> list[Case]:
    return [
        *(Case(f"chunk={c}", _set(chunk_size=c), check) for c in (1, 2, 7, 100)),
        Case("numpy-chunk", _set(chunk_size=np.int64(4)), check),
        Case("T=1", lambda kw: kw.update({**_qkv(1), **{n: kw[n][:, :1] for n in ("beta", "decay")
                                                         if isinstance(kw.get(n), torch.Tensor)}}), check),
        Case("T=0", lambda kw: kw.update({**_qkv(0), **{n: kw[n][:, :0] for n in ("beta", "decay")
                                                         if isinstance(kw.get(n), torch.Tensor)}}),
             lambda out, kw: out.shape == (B, 0, V)),
        Case("B=0", lambda kw: kw.update({n: kw[n][:0] for n in ("queries", "keys", "values", "beta", "decay")
                                          if isinstance(kw.get(n), torch.Tensor)}),
             lambda out, kw: out.shape == (0, TT, V)),
        Case("V=0", _set(values=rand(B, TT, 0)), lambda out, kw: out.shape == (B, TT, 0)),
        *(Case(str(dtype)[6:], _all_dtype(dtype, dtypes_names), check) for dtype in FLOATS),
    ]


SPECS: list[Spec] = [
    Spec("helpers.chunkwise.chunkwise_linear_attention",
         call=cw.chunkwise_linear_attention,
         good=lambda: dict(**_qkv(), feature_map=la.elu_feature_map, chunk_size=3),
         rules={**_QKV_RULES, "feature_map": callable},
         check=_linear_check(),
         bad=[*_SHAPE_BAD,
              Case("map-negative", _set(feature_map=lambda x: x), r"^feature_map must return features >= 0"),
              Case("map-nan", _set(feature_map=torch.sqrt), r"^feature_map must return finite features"),
              Case("map-zeros", _set(feature_map=torch.zeros_like), r"^feature_map must give a normaliser"),
              Case("map-rank-2", _set(feature_map=lambda x: x.exp().sum(-1)),
                   r"^feature_map must return a tensor \(B, T, F\)")],
         edge=[*[c for c in _edges(_linear_check()) if c.id != "V=0"],
               Case("V=0", _set(values=rand(B, TT, 0)), lambda out, kw: out.shape == (B, TT, 0)),
               Case("in-place-map", _set(feature_map=lambda x: x.clamp_(min=0).add_(1)),
                    _linear_check(lambda x: torch.relu(x) + 1)),
               Case("nan-key", _nan_at_token("keys"), _nan_from(4)),
               Case("nan-query", _nan_at_token("queries"), _nan_from(4, only_t=True)),
               Case("random-features", _set(feature_map=lambda x: la.positive_random_features(
                   x, la.random_projection(16, D, generator=torch.Generator().manual_seed(0), dtype=x.dtype,
                                           orthogonal=True))),
                    _linear_check(lambda x: la.positive_random_features(x, la.random_projection(
                        16, D, generator=torch.Generator().manual_seed(0), orthogonal=True))))]),
    Spec("helpers.chunkwise.chunkwise_additive",
         call=cw.chunkwise_additive,
         good=lambda: dict(**_qkv(), decay=0.8, chunk_size=3),
         rules={**_QKV_RULES, "decay": Real(0, 1, optional=True)},
         check=_additive_check,
         bad=[*_SHAPE_BAD,
              Case("decay-(B,T+1)", _set(decay=torch.full((B, TT + 1), 0.5)), r"^decay must .* got shape \(2, 8\)"),
              Case("decay-entry-above-1", _set(decay=torch.full((B, TT), 2.0)), r"^decay must hold numbers in \[0, 1\]"),
              Case("decay-nan-entry", _set(decay=torch.full((B, TT), math.nan)), r"^decay must hold numbers"),
              Case("decay-float64", _set(decay=torch.full((B, TT), 0.5, dtype=torch.float64)),
                   r"^decay must have the dtype")],
         edge=[*_edges(_additive_check),
               Case("decay-(B,T)", _set(decay=rand(B, TT, seed=5).abs().clamp(max=1)), _additive_check),
               Case("decay-zero-entry", _set(decay=torch.tensor([[0.9, 0.0, 1, 1, 0.5, 0.5, 1]] * 2)),
                    _additive_check),
               Case("decay-(B,T),bfloat16", lambda kw: (kw.update(decay=rand(B, TT, seed=5).abs().clamp(max=1)),
                                                       _all_dtype(torch.bfloat16)(kw)), _additive_check),
               Case("nan-value", _nan_at_token("values"), _nan_from(4))]),
    Spec("helpers.chunkwise.chunkwise_delta_rule",
         call=cw.chunkwise_delta_rule,
         good=lambda: dict(**_qkv(), beta=0.5, decay=0.9, chunk_size=3),
         rules={**_QKV_RULES, "beta": _beta_rule(none_ok=False), "decay": Real(0, 1, optional=True)},
         check=_delta_check,
         bad=[*_SHAPE_BAD,
              Case("beta-(B,T+1)", _set(beta=torch.full((B, TT + 1), 0.5)), r"^beta must .* got shape \(2, 8\)"),
              Case("beta-nan-entry", _set(beta=torch.full((B, TT), math.nan)), r"^beta must hold finite"),
              Case("decay-(B,T+1)", _set(decay=torch.full((B, TT + 1), 0.5)), r"^decay must .* got shape \(2, 8\)"),
              Case("decay-entry-negative", _set(decay=torch.full((B, TT), -1.0)),
                   r"^decay must hold numbers in \[0, 1\], got -1")],
         edge=[*_edges(_delta_check),
               Case("beta-(B,T),decay-(B,T)", _set(beta=rand(B, TT, seed=4).abs().clamp(max=1),
                                                   decay=rand(B, TT, seed=5).abs().clamp(max=1)), _delta_check),
               Case("beta-(B,T),decay-(B,T),float16", lambda kw: (
                   kw.update(beta=rand(B, TT, seed=4).abs().clamp(max=1), decay=rand(B, TT, seed=5).abs().clamp(max=1)),
                   _all_dtype(torch.float16)(kw)), _delta_check),
               Case("keys-not-unit,beta=1.5", _set(keys=rand(B, TT, D, seed=1), beta=1.5), _delta_check),
               Case("nan-key", _nan_at_token("keys"), _nan_from(4)),
               Case("nan-value", _nan_at_token("values"), _nan_from(4)),
               Case("nan-query", _nan_at_token("queries"), _nan_from(4, only_t=True))]),
]
