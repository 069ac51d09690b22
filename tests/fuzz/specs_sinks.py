"""Specs for ``helpers.sinks`` (see ``tests/fuzz/__init__.py`` for the format).

The reference is the formula written out in float64: w_j = exp(s_j − m) / (exp(sink − m) +
Σ_{i visible} exp(s_i − m)), m the larger of the row's largest visible score and the sink.
"""

from __future__ import annotations

import math

import torch

from helpers import sinks
from tests.fuzz import Case, Spec, T

B, Q, K = 2, 3, 5


def rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Seeded normal numbers: the same shape gives the same tensor."""
    g = torch.Generator().manual_seed(sum(shape) + 11 * len(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def sink_reference(scores: torch.Tensor, sink, mask: torch.Tensor | None) -> torch.Tensor:
    """The formula written out, float64; a row with nothing visible and sink −inf: zeros."""
    s = scores.double()
    b = torch.as_tensor(sink).double().expand(*s.shape[:-1], 1)  # (..., Q, 1)
    take = torch.ones(s.shape, dtype=torch.bool) if mask is None else mask.expand(s.shape)
    visible = torch.where(take, s, -math.inf)  # (..., Q, K)
    m = torch.maximum(visible.amax(-1, keepdim=True) if s.shape[-1] else b, b)  # (..., Q, 1)
    m = torch.where(torch.isfinite(m), m, 0.0)
    e = torch.where(take, torch.exp(s - m), 0.0)  # (..., Q, K)
    total = e.sum(-1, keepdim=True) + torch.exp(b - m)  # (..., Q, 1)
    return torch.where(total > 0, e / torch.where(total > 0, total, 1.0), 0.0)


def _check(out, kw) -> bool:
    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(kw["scores"].dtype, 1e-6)
    ref = sink_reference(kw["scores"], kw["sink"], kw["mask"])
    return (isinstance(out, torch.Tensor) and out.dtype == kw["scores"].dtype and out.shape == ref.shape
            and torch.allclose(out.double(), ref, rtol=tol, atol=tol))


MASK = lambda: torch.tensor([[True] * K, [False] * K, [True, False] * 2 + [True]])  # noqa: E731  row 1: nothing

SPECS: list[Spec] = [
    Spec("helpers.sinks.sink_softmax", call=sinks.sink_softmax,
         good=lambda: dict(scores=rand(B, Q, K), sink=rand(Q, 1), mask=MASK()),
         rules={"scores": T(min_rank=1, same_dtype=False), "sink": T(same_dtype=False),
                "mask": T(dtype="bool", optional=True)},
         check=_check,
         bad=[Case("sink-(Q,)", lambda kw: kw.update(sink=rand(Q)), r"sink must broadcast"),
              Case("sink-(Q,K)", lambda kw: kw.update(sink=rand(Q, K)), r"sink must broadcast"),
              Case("sink-True", lambda kw: kw.update(sink=True), r"sink must"),
              Case("sink-nan", lambda kw: kw.update(sink=math.nan), r"sink must"),
              Case("sink-complex", lambda kw: kw.update(sink=1j), r"sink must"),
              Case("mask-(Q,K+1)", lambda kw: kw.update(mask=torch.ones(Q, K + 1, dtype=torch.bool)),
                   r"mask must broadcast"),
              Case("scores-0-d", lambda kw: kw.update(scores=torch.tensor(1.0)), r"scores must")],
         edge=[Case(f"sink-{shown}", lambda kw, v=v: kw.update(sink=v), _check)
               for shown, v in (("0", 0), ("2.5", 2.5), ("-inf", -math.inf), ("inf", math.inf),
                                ("0-d", torch.tensor(-1.0)), ("-1e4", -1e4))]
         + [Case(f"scores-{str(dtype)[6:]}", lambda kw, dtype=dtype: kw.update(scores=rand(B, Q, K, dtype=dtype)),
                 _check) for dtype in (torch.float16, torch.bfloat16)]
         + [Case("per-head-sinks", lambda kw: kw.update(scores=rand(B, 4, Q, K), sink=rand(4, 1, 1)), _check),
            Case("no-mask", lambda kw: kw.update(mask=None), _check),
            Case("minus-inf-sink-is-softmax", lambda kw: kw.update(sink=-math.inf, mask=None),
                 lambda out, kw: torch.allclose(out, torch.softmax(kw["scores"], -1))),
            Case("K-0", lambda kw: kw.update(scores=rand(B, Q, 0), mask=None),
                 lambda out, kw: out.shape == (B, Q, 0)),
            Case("huge-scores", lambda kw: kw.update(scores=rand(B, Q, K) * 1e4), _check),
            Case("nan-sink-tensor-row-nan", lambda kw: kw.update(sink=torch.tensor([[0.0], [math.nan], [1.0]])),
                 lambda out, kw: bool(out[:, 1].isnan().all()) and not out[:, 0].isnan().any()
                 and not out[:, 2].isnan().any()),
            Case("nan-visible-score-row-nan", lambda kw: kw.update(
                scores=rand(B, Q, K).index_put((torch.tensor(0), torch.tensor(0), torch.tensor(2)),
                                               torch.tensor(math.nan))),
                 lambda out, kw: bool(out[0, 0].isnan().all()) and not out[0, 1:].isnan().any()
                 and not out[1].isnan().any()),
            Case("nan-hidden-score-changes-nothing", lambda kw: kw.update(
                scores=rand(B, Q, K).index_put((torch.tensor(0), torch.tensor(2), torch.tensor(1)),
                                               torch.tensor(math.nan))),
                 lambda out, kw: torch.allclose(out.double(), sink_reference(
                     rand(B, Q, K), kw["sink"], kw["mask"]), atol=1e-6)),
            Case("inputs-kept", lambda kw: kw.update(scores=torch.zeros(B, Q, K), sink=torch.zeros(Q, 1)),
                 lambda out, kw: bool((kw["scores"] == 0).all()) and bool((kw["sink"] == 0).all())
                 and _check(out, kw))]),
]
