"""Specs for the slider views of notebooks 01-06: ``helpers.widgets`` masking, multihead,
pooling, scoring, seq2seq, temperature (see ``tests/fuzz/__init__.py`` for the format).

Each ``check`` recomputes what is drawn from the formula written out here (softmax, entropy,
Nadaraya-Watson, w_vᵀ tanh(W_q q + W_k k), pair counts) and compares it with the Figure's
artists. Drawing costs tens of milliseconds, training more: the runs and models the specs
pass in are built once, lazily, and small (2 training steps).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers import toy
from helpers.device import cpu_threads
from helpers.kernel_regression import KERNELS, RegressionData, make_regression_data
from helpers.seq2seq import Seq2Seq, predict_many, tokenize_source
from helpers.widgets import masking, multihead, pooling, scoring, seq2seq, temperature
from tests.fuzz import Case, Int, OneOf, Real, Spec, T

def _fig(v) -> bool:
    """A Figure to draw into (a foreign one is cleared: see each module's tests), or None."""
    return v is None or isinstance(v, Figure)


def _int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _strs(v) -> bool:
    """A list or tuple of str (a lone str is not a list of tokens)."""
    return isinstance(v, (list, tuple)) and all(isinstance(t, str) for t in v)


def _close(a, b, tol: float = 1e-5) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.allclose(a, b, atol=tol, rtol=tol, equal_nan=True)


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """exp(x_k) / Σ_j exp(x_j) over the last axis (shifted by the row maximum)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _entropy_rows(w: np.ndarray) -> np.ndarray:
    """-Σ_k w_k log w_k, 0 log 0 = 0."""
    return -np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0).sum(axis=-1)


# ------------------------------------------------------------------------------ masking
def _masked_expected(scores: torch.Tensor, lens) -> np.ndarray:
    """Per (b, q): softmax over the first n keys, NaN for the keys k >= n."""
    s = scores.detach().double().numpy()
    B, Q, K = s.shape
    lens = np.broadcast_to(np.asarray(torch.as_tensor(lens)).reshape(B, -1), (B, Q))
    out = np.full((B, Q, K), np.nan)
    for b in range(B):
        for q in range(Q):
            n = int(lens[b, q])
            if n:
                out[b, q, :n] = _softmax_rows(s[b, q, :n])
    return out


def _masked_drawn(fig: Figure, B: int) -> np.ndarray:
    return np.stack([np.ma.filled(ax.images[0].get_array().astype(np.float64), np.nan)
                     for ax in fig.axes[:B]])


def _check_masked(fig, kw, lens=None) -> bool:
    scores = kw["scores"]
    lens = kw["valid_lens"] if lens is None else lens
    return _close(_masked_drawn(fig, scores.shape[0]), _masked_expected(scores, lens))


def _scores() -> torch.Tensor:
    return torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))  # (B, Q, K)


def _view_lens(view) -> list[int]:
    return [c.value for c in view.children if isinstance(c, widgets.IntSlider)]


MASKING = [
    Spec("helpers.widgets.masking.draw_masked_softmax", call=masking.draw_masked_softmax,
         good=lambda: dict(scores=_scores(), valid_lens=torch.tensor([5, 2]), fig=None),
         rules={"scores": T(rank=3, same_dtype=False),
                "valid_lens": T(rank=1, dtype="long", lists=True), "fig": _fig},
         check=_check_masked,
         bad=[Case("valid_lens>K", lambda kw: kw.update(valid_lens=torch.tensor([6, 2]))),
              Case("valid_lens<0", lambda kw: kw.update(valid_lens=torch.tensor([-1, 2]))),
              Case("valid_lens-B-mismatch", lambda kw: kw.update(valid_lens=torch.tensor([5]))),
              Case("valid_lens-Q-mismatch", lambda kw: kw.update(valid_lens=[[1, 2], [3, 4]])),
              Case("valid_lens-float", lambda kw: kw.update(valid_lens=[5.0, 2.0])),
              Case("scores-empty-K", lambda kw: kw.update(scores=torch.zeros(2, 3, 0)))],
         edge=[Case("per-query-lens-with-zero", lambda kw: kw.update(valid_lens=[[0, 5, 2], [1, 3, 4]]),
                    _check_masked),
               Case("foreign-fig", lambda kw: kw.update(fig=Figure()), _check_masked)]),
    Spec("helpers.widgets.masking.valid_length_view", call=masking.valid_length_view,
         good=lambda: dict(scores=_scores(), per_query=False, valid_lens=torch.tensor([5, 2])),
         rules={"scores": T(rank=3, same_dtype=False), "per_query": "flag",
                "valid_lens": T(rank=1, dtype="long", lists=True, optional=True)},
         valid=lambda kw: not (kw["per_query"] and kw["valid_lens"] is not None),
         check=lambda view, kw: _check_masked(
             view.result, kw, torch.tensor(_view_lens(view)).reshape(
                 (2, 3) if kw["per_query"] else (2,))) and _view_lens(view) == (
             [5] * (6 if kw["per_query"] else 2) if kw["valid_lens"] is None
             else torch.as_tensor(kw["valid_lens"]).flatten().tolist()),
         bad=[Case("valid_lens>K", lambda kw: kw.update(valid_lens=torch.tensor([6, 2]))),
              Case("per_query-lens-of-rows", lambda kw: kw.update(per_query=True)),
              Case("scores-empty-B", lambda kw: kw.update(scores=torch.zeros(0, 3, 5)))],
         edge=[Case("per_query-lens", lambda kw: kw.update(per_query=True,
                                                           valid_lens=[[0, 5, 2], [1, 3, 4]]),
                    lambda view, kw: _view_lens(view) == [0, 5, 2, 1, 3, 4]
                    and _check_masked(view.result, kw))]),
    Spec("helpers.widgets.masking.demo_scores", call=masking.demo_scores,
         good=lambda: dict(B=2, Q=3, K=4, seed=5),
         rules={"B": "size", "Q": "size", "K": "size", "seed": "seed"},
         check=lambda out, kw: torch.equal(out, torch.randn(
             int(kw["B"]), int(kw["Q"]), int(kw["K"]),
             generator=torch.Generator().manual_seed(int(kw["seed"]))))),
    Spec("helpers.widgets.masking.demo_views", call=masking.demo_views, good=dict,
         check=lambda out, kw: sorted(out) == ["valid_lens_per_query", "valid_lens_per_row"]
         and all(isinstance(v.result, Figure) for v in out.values())),
]


# -------------------------------------------------------------------------- temperature
def _temp_scores() -> torch.Tensor:
    return torch.tensor([[2.0, 0.5, 0.1, 0.1, -1.0], [0.1, 3.0, 0.2, 0.1, 0.0],
                         [0.5, 0.5, 0.5, 0.5, 0.5]])  # (Q, K) = (3, 5)


def _temp_expected(kw) -> np.ndarray:
    return _softmax_rows(kw["scores"].detach().double().numpy() / float(kw["temperature"]))


def _check_temperature_fig(fig: Figure, kw) -> bool:
    maps = [ax for ax in fig.subfigs[0].axes if ax.images]
    bars = fig.subfigs[1].axes[0]
    w = _temp_expected(kw)
    return (_close(maps[0].images[0].get_array(), w)
            and _close([p.get_width() for p in bars.patches], _entropy_rows(w)))


TEMPERATURE = [
    Spec("helpers.widgets.temperature.temperature_weights", call=temperature.temperature_weights,
         good=lambda: dict(scores=_temp_scores(), temperature=0.7),
         rules={"scores": T(rank=2, same_dtype=False), "temperature": "positive"},
         check=lambda out, kw: out.dtype == kw["scores"].dtype
         and _close(out, _temp_expected(kw)),
         bad=[Case("scores-no-keys", lambda kw: kw.update(scores=torch.zeros(3, 0)))],
         edge=[Case("temperature-tiny", lambda kw: kw.update(temperature=1e-3),
                    lambda out, kw: _close(out[0], [1, 0, 0, 0, 0]))]),
    Spec("helpers.widgets.temperature.entropy", call=temperature.entropy,
         good=lambda: dict(weights=torch.tensor([[0.5, 0.25, 0.25, 0.0], [0.1, 0.2, 0.3, 0.4]])),
         rules={"weights": T(min_rank=1, same_dtype=False)},
         check=lambda out, kw: _close(out, _entropy_rows(kw["weights"].double().numpy())),
         edge=[Case("uniform-is-log-K", lambda kw: kw.update(weights=torch.full((7,), 1 / 7)),
                    lambda out, kw: abs(float(out) - math.log(7)) < 1e-6)]),
    Spec("helpers.widgets.temperature.draw_temperature", call=temperature.draw_temperature,
         good=lambda: dict(scores=_temp_scores(), temperature=0.7, fig=None),
         rules={"scores": T(rank=2, same_dtype=False), "temperature": "positive", "fig": _fig},
         check=_check_temperature_fig,
         bad=[Case("scores-no-queries", lambda kw: kw.update(scores=torch.zeros(0, 4)))],
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=Figure()), _check_temperature_fig)]),
    Spec("helpers.widgets.temperature.temperature_view", call=temperature.temperature_view,
         good=lambda: dict(scores=_temp_scores(), temperature=0.7),
         # the slider runs from 10^-2 to 10^2: a start outside would be clipped without a word
         rules={"scores": T(rank=2, same_dtype=False), "temperature": Real(0.01, 100.0)},
         check=lambda view, kw: _check_temperature_fig(view.result, kw)),
    Spec("helpers.widgets.temperature.demo_scores", call=temperature.demo_scores, good=dict,
         check=lambda out, kw: out.shape == (3, 4) and out.dtype == torch.float32),
    Spec("helpers.widgets.temperature.demo_views", call=temperature.demo_views, good=dict,
         check=lambda out, kw: list(out) == ["temperature_view"]
         and isinstance(out["temperature_view"].result, Figure)),
]


# ------------------------------------------------------------------------------ pooling
@functools.cache
def _data() -> RegressionData:
    return make_regression_data(n_train=7, n_test=5, seed=3)


LOG_KERNEL = {  # log K(u), written out
    "gaussian": lambda u: -u**2 / 2,
    "boxcar": lambda u: np.where(np.abs(u) <= 1, 0.0, -np.inf),
    "constant": lambda u: np.zeros_like(u),
    "epanechnikov": lambda u: np.log(np.clip(1 - u**2, 0, None)),
}


def _nw_expected(data: RegressionData, kernel: str, bandwidth: float):
    """ŷ(x) = Σ_i K((x - x_i)/h) y_i / Σ_j K((x - x_j)/h); a query no key reaches: its nearest."""
    x, y, q = (t.double().numpy() for t in (data.x_train, data.y_train, data.x_test))
    diff = q[:, None] - x[None, :]
    with np.errstate(divide="ignore"):
        log_k = LOG_KERNEL[kernel](diff / float(bandwidth))
    for i in range(len(q)):
        if np.isinf(log_k[i]).all():
            log_k[i] = np.where(np.arange(len(x)) == np.abs(diff[i]).argmin(), 0.0, -np.inf)
    w = _softmax_rows(log_k)
    return w @ y, w


def _check_nw(fig: Figure, data, kernel, bandwidth) -> bool:
    y_hat, w = _nw_expected(data, kernel, bandwidth)
    return (_close(fig.axes[0].lines[1].get_ydata(), y_hat, 1e-4)
            and _close(fig.axes[1].images[0].get_array(), w, 1e-4)
            and fig.axes[0].get_title().startswith(f"{kernel} kernel"))


POOLING = [
    Spec("helpers.widgets.pooling.draw_nw", call=pooling.draw_nw,
         good=lambda: dict(data=_data(), kernel="gaussian", bandwidth=0.8, fig=None),
         rules={"data": lambda v: isinstance(v, RegressionData), "kernel": OneOf(tuple(KERNELS)),
                "bandwidth": "positive", "fig": _fig},
         check=lambda fig, kw: _check_nw(fig, kw["data"], kw["kernel"], kw["bandwidth"]),
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=Figure(), kernel="epanechnikov"),
                    lambda fig, kw: _check_nw(fig, kw["data"], kw["kernel"], kw["bandwidth"]))]),
    Spec("helpers.widgets.pooling.nw_view", call=pooling.nw_view,
         good=lambda: dict(data=_data(), kernel="boxcar", bandwidth=0.8),
         # the slider runs from 10^-2 to 10^1: a start outside would be clipped without a word
         rules={"data": lambda v: v is None or isinstance(v, RegressionData),
                "kernel": OneOf(tuple(KERNELS)), "bandwidth": Real(0.01, 10.0)},
         check=lambda view, kw: _check_nw(view.result, kw["data"] or make_regression_data(),
                                          kw["kernel"], kw["bandwidth"])),
    Spec("helpers.widgets.pooling.demo_views", call=pooling.demo_views, good=dict,
         check=lambda out, kw: list(out) == ["nw_view"] and isinstance(out["nw_view"].result, Figure)),
]


# ------------------------------------------------------------------------------ scoring
def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _scaling_expected(queries, keys, scaled) -> np.ndarray:
    q, k = queries.double().numpy(), keys.double().numpy()
    scores = np.einsum("...qd,...kd->...qk", q, k)
    return _softmax_rows(scores / math.sqrt(q.shape[-1]) if scaled else scores)


def _check_scaling_fig(fig: Figure, kw) -> bool:
    gen = torch.Generator().manual_seed(int(kw["seed"]))
    q = torch.randn(int(kw["num_queries"]), int(kw["d"]), generator=gen)
    k = torch.randn(int(kw["num_keys"]), int(kw["d"]), generator=gen)
    w = _scaling_expected(q, k, kw["scaled"])
    return (_close(fig.axes[0].images[0].get_array(), w, 1e-4)
            and _close([p.get_width() for p in fig.axes[1].patches], w.max(-1), 1e-4))


@functools.cache
def _scaling_fig() -> Figure:
    """One figure the draw_scaling cases redraw in place (a foreign one: the edge case)."""
    return Figure()


def _additive_expected(queries, keys, W_q, W_k, w_v) -> np.ndarray:
    """a(q, k) = Σ_n w_v[n] tanh((W_q q)_n + (W_k k)_n), one loop per query and key."""
    q, k = queries.double().numpy(), keys.double().numpy()
    Wq, Wk, wv = W_q.double().numpy(), W_k.double().numpy(), w_v.double().numpy()
    out = np.zeros(q.shape[:-1] + (k.shape[-2],))
    for i in range(q.shape[-2]):
        for j in range(k.shape[-2]):
            out[..., i, j] = np.tanh(q[..., i, :] @ Wq.T + k[..., j, :] @ Wk.T) @ wv
    return out


def _check_params(out, kw) -> bool:
    W_q, W_k, w_v = out
    N, Dq, Dk = int(kw["num_hiddens"]), int(kw["query_size"]), int(kw["key_size"])
    gen = torch.Generator().manual_seed(int(kw["seed"]))  # one draw of 64 units, first N kept
    Wq64 = torch.randn(64, Dq, generator=gen) / math.sqrt(Dq)
    Wk64 = torch.randn(64, Dk, generator=gen) / math.sqrt(Dk)
    wv = torch.randn(64, generator=gen)[:N]
    return (torch.allclose(W_q, Wq64[:N]) and torch.allclose(W_k, Wk64[:N])
            and torch.allclose(w_v, wv * float(kw["score_scale"]) / wv.norm()))


def _alike_by_hand(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    K = len(a)
    pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
    return sum((a[i] - a[j]) * (b[i] - b[j]) > 0 for i, j in pairs), len(pairs)


def _check_over_seeds(out, kw) -> bool:
    batch = scoring.toy_batch(kw["batch_seed"])
    row = int(kw["row"])
    q = batch["queries"][row]
    k = batch["keys"][row, : int(batch["valid_lens"][row])]
    want = {"num_hiddens": [], "seed": [], "alike": []}
    for seed in kw["seeds"]:
        for n in kw["hiddens"]:
            s = _additive_expected(q, k, *scoring.additive_parameters(n, seed=seed))
            want["num_hiddens"].append(n)
            want["seed"].append(seed)
            want["alike"].append(_alike_by_hand(s[0], s[1])[0])
    return out == want


@functools.cache
def _hidden_fig(purpose: str) -> Figure:
    """One drawing per purpose: "redraw" is redrawn by the cases, "labels" is only read."""
    return scoring.draw_hidden_size(3)


def _check_hidden_fig(fig: Figure, kw) -> bool:
    """The additive row: w_vᵀ tanh(W_q q + W_k k) at every pixel centre of the key plane."""
    q = scoring.toy_batch()["queries"][1]
    c = -3 + (np.arange(61) + 0.5) * (6 / 61)
    grid = torch.tensor(np.stack(np.meshgrid(c, c), -1).reshape(-1, 2))  # x along a row
    params = scoring.additive_parameters(kw["num_hiddens"], seed=kw["seed"])
    want = _additive_expected(q, grid, *params).reshape(2, 61, 61)
    panels = [ax for ax in fig.axes if ax.images][2:]
    return all(_close(ax.images[0].get_array(), want[i], 1e-4) for i, ax in enumerate(panels))


SEED_OK = "seed"
SCORING = [
    Spec("helpers.widgets.scoring.scaling_inputs", call=scoring.scaling_inputs,
         good=lambda: dict(d=5, num_queries=3, num_keys=4, seed=2),
         rules={"d": "size", "num_queries": "size", "num_keys": "size", "seed": "seed"},
         check=lambda out, kw: all(torch.equal(a, b) for a, b in zip(out, (
             lambda g: (torch.randn(int(kw["num_queries"]), int(kw["d"]), generator=g),
                        torch.randn(int(kw["num_keys"]), int(kw["d"]), generator=g)))(
             torch.Generator().manual_seed(int(kw["seed"])))))),
    Spec("helpers.widgets.scoring.scaling_weights", call=scoring.scaling_weights,
         good=lambda: dict(queries=_randn(3, 5), keys=_randn(4, 5, seed=1), scaled=True),
         rules={"queries": T(min_rank=2), "keys": T(min_rank=2), "scaled": "flag"},
         check=lambda out, kw: _close(out, _scaling_expected(kw["queries"], kw["keys"],
                                                             kw["scaled"])),
         bad=[Case("D-mismatch", lambda kw: kw.update(keys=_randn(4, 6)), r"feature size"),
              Case("D=0", lambda kw: kw.update(queries=torch.zeros(3, 0), keys=torch.zeros(4, 0))),
              Case("keys-float64", lambda kw: kw.update(keys=kw["keys"].double()))],
         edge=[Case("batched", lambda kw: kw.update(queries=_randn(2, 3, 5), keys=_randn(2, 4, 5)),
                    lambda out, kw: _close(out, _scaling_expected(kw["queries"], kw["keys"], True))),
               Case("both-float64", lambda kw: kw.update(queries=kw["queries"].double(),
                                                         keys=kw["keys"].double()),
                    lambda out, kw: out.dtype == torch.float64)]),
    Spec("helpers.widgets.scoring.draw_scaling", call=scoring.draw_scaling,
         good=lambda: dict(d=8, scaled=True, num_queries=3, num_keys=5, seed=1, fig=_scaling_fig()),
         # d up to the slider's 1024; one heatmap row and one bar per query, one column per key
         rules={"d": Int(1, 1024), "scaled": "flag", "num_queries": Int(1, 64),
                "num_keys": Int(1, 64), "seed": "seed", "fig": _fig},
         check=_check_scaling_fig,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=Figure()), _check_scaling_fig)]),
    Spec("helpers.widgets.scoring.scaling_view", call=scoring.scaling_view,
         good=lambda: dict(d=8, scaled=False, num_queries=3, num_keys=5, seed=1),
         rules={"d": lambda v: _int(v) and v in scoring.KEY_SIZES, "scaled": "flag",
                "num_queries": Int(1, 64), "num_keys": Int(1, 64), "seed": "seed"},
         check=lambda view, kw: _check_scaling_fig(view.result, kw),
         bad=[Case("d=3-not-a-slider-size", lambda kw: kw.update(d=3))],
         edge=[Case("d=1024", lambda kw: kw.update(d=1024),
                    lambda view, kw: _check_scaling_fig(view.result, kw))]),
    Spec("helpers.widgets.scoring.toy_batch", call=scoring.toy_batch, good=lambda: dict(seed=944),
         rules={"seed": "seed"},
         check=lambda out, kw: (lambda g: torch.equal(out["keys"], torch.randn(2, 10, 2, generator=g))
                                and torch.equal(out["queries"], torch.randn(2, 2, 2, generator=g)))(
             torch.Generator().manual_seed(int(kw["seed"])))
         and torch.equal(out["values"][1], torch.arange(40.0).reshape(10, 4))
         and out["valid_lens"].tolist() == [2, 6]),
    Spec("helpers.widgets.scoring.additive_parameters", call=scoring.additive_parameters,
         good=lambda: dict(num_hiddens=5, query_size=3, key_size=2, seed=4, score_scale=2.0),
         rules={"num_hiddens": Int(1, scoring.MAX_HIDDENS), "query_size": "size",
                "key_size": "size", "seed": "seed", "score_scale": "positive"},
         check=_check_params),
    Spec("helpers.widgets.scoring.additive_score", call=scoring.additive_score,
         good=lambda: dict(queries=_randn(3, 2), keys=_randn(4, 5, seed=1), W_q=_randn(6, 2, seed=2),
                           W_k=_randn(6, 5, seed=3), w_v=_randn(6, seed=4)),
         rules={"queries": T(min_rank=2), "keys": T(min_rank=2), "W_q": T(rank=2),
                "W_k": T(rank=2), "w_v": T(rank=1)},
         check=lambda out, kw: _close(out, _additive_expected(**kw)),
         bad=[Case("W_q-wrong-query-size", lambda kw: kw.update(W_q=_randn(6, 3))),
              Case("W_k-wrong-key-size", lambda kw: kw.update(W_k=_randn(6, 2))),
              Case("W_k-wrong-N", lambda kw: kw.update(W_k=_randn(7, 5))),
              Case("w_v-wrong-N", lambda kw: kw.update(w_v=_randn(5))),
              Case("batch-mismatch", lambda kw: kw.update(queries=_randn(2, 3, 2),
                                                          keys=_randn(3, 4, 5)))],
         edge=[Case("batched", lambda kw: kw.update(queries=_randn(2, 3, 2), keys=_randn(2, 4, 5)),
                    lambda out, kw: _close(out, _additive_expected(**kw)))]),
    Spec("helpers.widgets.scoring.make_additive", call=scoring.make_additive,
         good=lambda: dict(num_hiddens=5, query_size=3, key_size=2, seed=4, score_scale=2.0),
         rules={"num_hiddens": Int(1, scoring.MAX_HIDDENS), "query_size": "size",
                "key_size": "size", "seed": "seed", "score_scale": "positive"},
         check=lambda model, kw: not model.training and _check_params(
             (model.W_q.weight, model.W_k.weight, model.w_v.weight[0]), kw)),
    Spec("helpers.widgets.scoring.pairs_alike", call=scoring.pairs_alike,
         good=lambda: dict(scores=torch.tensor([[0.3, 1.0, -2.0, 0.5, 0.1],
                                                [0.2, 2.0, -1.0, -0.5, 0.4]])),
         rules={"scores": T(rank=2, same_dtype=False)},
         check=lambda out, kw: out == _alike_by_hand(*kw["scores"].double().numpy()),
         bad=[Case("three-queries", lambda kw: kw.update(scores=torch.zeros(3, 4)))],
         edge=[Case("one-key", lambda kw: kw.update(scores=torch.zeros(2, 1)),
                    lambda out, kw: out == (0, 0)),
               Case("ties-are-not-alike", lambda kw: kw.update(scores=torch.zeros(2, 3)),
                    lambda out, kw: out == (0, 3))]),
    Spec("helpers.widgets.scoring.pairs_alike_over_seeds", call=scoring.pairs_alike_over_seeds,
         good=lambda: dict(hiddens=[1, 3], seeds=range(2), row=1, batch_seed=944),
         rules={"hiddens": lambda v: isinstance(v, (list, tuple, range)) and all(
                    _int(n) and 1 <= n <= scoring.MAX_HIDDENS for n in v),
                "seeds": lambda v: isinstance(v, (list, tuple, range)) and all(
                    _int(s) and -(2**63) <= s < 2**64 for s in v),
                "row": Int(0, 1), "batch_seed": "seed"},
         check=_check_over_seeds,
         bad=[Case("hiddens=[0]", lambda kw: kw.update(hiddens=[0]), r"^hiddens\b"),
              Case("hiddens=[65]", lambda kw: kw.update(hiddens=[2, 65]), r"^hiddens\b"),
              Case("hiddens=[2.0]", lambda kw: kw.update(hiddens=[2.0]), r"^hiddens\b"),
              Case("seeds=[0.5]", lambda kw: kw.update(seeds=[0.5]), r"^seeds\b"),
              Case("seeds=['1']", lambda kw: kw.update(seeds=["1"]), r"^seeds\b")],
         edge=[Case("no-hiddens", lambda kw: kw.update(hiddens=[]),
                    lambda out, kw: out == {"num_hiddens": [], "seed": [], "alike": []}),
               Case("numpy-seeds", lambda kw: kw.update(seeds=[np.int64(3)], hiddens=(2,)),
                    _check_over_seeds)]),
    Spec("helpers.widgets.scoring.draw_hidden_size", call=scoring.draw_hidden_size,
         good=lambda: dict(num_hiddens=3, seed=1, fig=_hidden_fig("redraw")),
         rules={"num_hiddens": Int(1, scoring.MAX_HIDDENS), "seed": "seed", "fig": _fig},
         check=_check_hidden_fig,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=Figure()), _check_hidden_fig)]),
    Spec("helpers.widgets.scoring.rank_labels", call=scoring.rank_labels,
         good=lambda: dict(ax=_hidden_fig("labels").axes[2]),
         rules={"ax": lambda v: isinstance(v, Axes)},
         check=lambda out, kw: [t.get_text() for t in out] == [str(r) for r in (
             lambda s: (np.argsort(np.argsort(-s[0])) + 1))(_additive_expected(
                 scoring.toy_batch()["queries"][1], scoring.toy_batch()["keys"][1, :6],
                 *scoring.additive_parameters(3)))]),
    Spec("helpers.widgets.scoring.hidden_size_view", call=scoring.hidden_size_view,
         good=lambda: dict(num_hiddens=2, seed=0),
         rules={"num_hiddens": Int(1, 16), "seed": "seed"},
         check=lambda view, kw: _check_hidden_fig(view.result, kw)),
    Spec("helpers.widgets.scoring.demo_views", call=scoring.demo_views, good=dict,
         check=lambda out, kw: sorted(out) == ["hidden_size", "scaling"]
         and all(isinstance(v.result, Figure) for v in out.values())),
]


# ------------------------------------------------------------------------------ seq2seq
SOURCE = ["3", "May", "1", "9", "9", "8"]
OUTPUT = ["1", "9", "9", "8", "-"]
TEXTS = ["3 May 1998", "07.11.1950"]  # two examples, decoded for 6 steps: each case is quick
TARGETS = ["1998-05-03", "1950-11-07"]
MAX_STEPS = 6


def _weights() -> torch.Tensor:
    return torch.softmax(_randn(5, 6), dim=-1)  # (S, T)


def _check_alignment(fig: Figure, kw) -> bool:
    w = np.asarray(torch.as_tensor(np.asarray(kw["weights"], dtype=np.float64)))
    step = min(max(int(kw["step"]), 1), w.shape[0])
    ax_map, ax_bar = fig.axes
    return (_close(ax_map.images[0].get_array(), w)
            and _close([b.get_height() for b in ax_bar.patches], w[step - 1])
            and ax_map.patches[0].get_y() == step - 1.5
            and [t.get_text() for t in ax_map.get_yticklabels()]
            == [f"{t}: {tok}" for t, tok in enumerate(kw["output_tokens"], 1)]
            and ax_map.get_title() == kw["title"])


@functools.cache
def _model() -> Seq2Seq:
    return seq2seq.demo_model(0)


@functools.cache
def _longest(max_steps: int = MAX_STEPS) -> int:
    return max(len(tokens) for tokens, _ in predict_many(_model(), TEXTS, max_steps))


def _one_thread(function):
    """``function`` run on one CPU thread: a decoder this small runs ~10× faster so."""
    def call(**kw):
        with cpu_threads(1):
            return function(**kw)
    return call


def _check_view(view, kw) -> bool:
    tokens, weights = predict_many(kw["model"], kw["texts"], kw["max_steps"])[kw["example"] - 1]
    fig = view.result
    return (_close(fig.axes[0].images[0].get_array(), weights)
            and [t.get_text() for t in fig.axes[1].get_xticklabels()]
            == tokenize_source(kw["texts"][kw["example"] - 1]))


SEQ2SEQ = [
    Spec("helpers.widgets.seq2seq.step_labels", call=seq2seq.step_labels,
         good=lambda: dict(output_tokens=list(OUTPUT)),
         rules={"output_tokens": _strs},
         check=lambda out, kw: out == [f"{i + 1}: {t}" for i, t in enumerate(kw["output_tokens"])],
         bad=[Case("a-str", lambda kw: kw.update(output_tokens="1998"), r"^output_tokens\b"),
              Case("ints", lambda kw: kw.update(output_tokens=[1, 9]), r"^output_tokens\b")],
         edge=[Case("empty", lambda kw: kw.update(output_tokens=()), lambda out, kw: out == [])]),
    Spec("helpers.widgets.seq2seq.draw_alignment", call=seq2seq.draw_alignment,
         good=lambda: dict(source_tokens=list(SOURCE), output_tokens=list(OUTPUT),
                           weights=_weights(), step=2, title="a title", fig=None),
         rules={"source_tokens": _strs, "output_tokens": _strs,
                "weights": T(rank=2, same_dtype=False, lists=True),
                "step": "int",  # clipped to [1, S]: the view's slider runs to the longest output
                "title": lambda v: isinstance(v, str), "fig": _fig},
         check=_check_alignment,
         bad=[Case("weights-wrong-T", lambda kw: kw.update(weights=torch.rand(5, 4))),
              Case("no-steps", lambda kw: kw.update(output_tokens=[], weights=torch.zeros(0, 6))),
              Case("no-source", lambda kw: kw.update(source_tokens=[], weights=torch.zeros(5, 0))),
              Case("source-a-str", lambda kw: kw.update(source_tokens="3May198"),
                   r"^source_tokens\b")],
         edge=[Case("numpy-weights", lambda kw: kw.update(weights=kw["weights"].numpy()),
                    _check_alignment),
               Case("step-past-the-end", lambda kw: kw.update(step=99), _check_alignment),
               Case("foreign-fig", lambda kw: kw.update(fig=Figure()), _check_alignment)]),
    Spec("helpers.widgets.seq2seq.alignment_title", call=seq2seq.alignment_title,
         good=lambda: dict(text="3 May 1998", output_tokens=[*"1998-05-04", "<eos>"],
                           target="1998-05-03"),
         rules={"text": lambda v: isinstance(v, str), "output_tokens": _strs,
                "target": lambda v: v is None or isinstance(v, str)},
         check=lambda out, kw: out == f"{kw['text']!r} → 1998-05-04" + (
             "" if kw["target"] is None else f" (wrong, target {kw['target']})"),
         bad=[Case("output_tokens-a-str", lambda kw: kw.update(output_tokens="1998-05-04"),
                   r"^output_tokens\b")],
         edge=[Case("right", lambda kw: kw.update(target="1998-05-04"),
                    lambda out, kw: out == "'3 May 1998' → 1998-05-04 (right)")]),
    Spec("helpers.widgets.seq2seq.alignment_view", call=_one_thread(seq2seq.alignment_view),
         good=lambda: dict(model=_model(), texts=list(TEXTS), targets=list(TARGETS), example=2,
                           step=1, max_steps=MAX_STEPS),
         rules={"model": lambda v: isinstance(v, Seq2Seq),
                "texts": lambda v: _strs(v) and len(v) == len(TEXTS),
                "targets": lambda v: v is None or _strs(v) and len(v) == len(TEXTS),
                "example": Int(1, len(TEXTS)),
                "step": lambda v: _int(v) and 1 <= v <= _longest(),
                # one heatmap row per decoding step: a readable picture has a few dozen
                "max_steps": Int(1, 64)},
         check=_check_view,
         bad=[Case("step-past-longest", lambda kw: kw.update(step=_longest() + 1), r"^step\b"),
              Case("targets-too-few", lambda kw: kw.update(targets=TARGETS[:1]), r"^targets\b"),
              Case("texts-empty", lambda kw: kw.update(texts=[], targets=None), r"^texts\b"),
              Case("texts-a-str", lambda kw: kw.update(texts="3 May 1998", targets=None),
                   r"^texts\b")],
         edge=[Case("step-at-longest", lambda kw: kw.update(step=_longest()), _check_view)],
         limit=20.0),
    Spec("helpers.widgets.seq2seq.demo_model", call=seq2seq.demo_model, good=lambda: dict(seed=3),
         rules={"seed": "seed"},
         check=lambda model, kw: isinstance(model, Seq2Seq) and not model.training and all(
             torch.equal(a, b) for a, b in zip(model.parameters(),
                                                seq2seq.demo_model(kw["seed"]).parameters()))),
    Spec("helpers.widgets.seq2seq.demo_views", call=seq2seq.demo_views, good=dict,
         check=lambda out, kw: list(out) == ["alignment"]
         and isinstance(out["alignment"].result, Figure), limit=30.0),
]


# ---------------------------------------------------------------------------- multihead
TINY = dict(steps=2, every=1, eval_size=8, batch_size=4)  # 3 checkpoints: steps 0, 1, 2


@functools.cache
def _runs() -> dict[int, toy.Run]:
    return {H: toy.train(H, seed=0, **TINY) for H in (1, 2)}


def _is_runs(v) -> bool:
    return isinstance(v, Mapping) and len(v) > 0 and all(
        _int(k) and isinstance(r, toy.Run) for k, r in v.items())


def _check_training_fig(fig: Figure, kw) -> bool:
    run = kw["runs"][kw["num_heads"]]
    step = 2 if kw["step"] is None else kw["step"]
    (checkpoint,) = [c for c in run.checkpoints if c.step == step]
    maps = [ax for ax in fig.subfigs[0].axes if ax.images]
    shown = [ax.images[0].get_array() for ax in maps if ax.images[0].get_visible()]
    return (len(shown) == kw["num_heads"]
            and all(_close(a, w) for a, w in zip(shown, checkpoint.weights.numpy()))
            and f"step {step}:" in fig.get_suptitle())


MULTIHEAD = [
    Spec("helpers.widgets.multihead.train_runs",
         call=lambda **kw: multihead.train_runs(**kw, **TINY),
         good=lambda: dict(head_counts=(1, 2), seed=0),
         rules={"head_counts": lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(
                    _int(h) and h >= 1 and 16 % h == 0 for h in v),
                "seed": Int(0, toy.EVAL_SEED - 1)},
         check=lambda out, kw: sorted(out) == sorted(kw["head_counts"]) and all(
             run.checkpoints[-1].weights.shape[0] == H
             and [c.step for c in run.checkpoints] == [0, 1, 2] for H, run in out.items()),
         bad=[Case("head_counts=()", lambda kw: kw.update(head_counts=()), r"^head_counts\b"),
              Case("head_counts=(0,)", lambda kw: kw.update(head_counts=(0,)), r"^head_counts\b"),
              Case("head_counts=(2.0,)", lambda kw: kw.update(head_counts=(2.0,)),
                   r"^head_counts\b"),
              Case("head_counts=(3,)", lambda kw: kw.update(head_counts=(3,)))],
         edge=[Case("head_counts=[4]", lambda kw: kw.update(head_counts=[4]),
                    lambda out, kw: list(out) == [4])]),
    Spec("helpers.widgets.multihead.checkpoint_at", call=multihead.checkpoint_at,
         good=lambda: dict(run=_runs()[2], step=1),
         rules={"run": lambda v: isinstance(v, toy.Run),
                "step": lambda v: _int(v) and v in (0, 1, 2)},
         check=lambda out, kw: out is kw["run"].checkpoints[int(kw["step"])]),
    Spec("helpers.widgets.multihead.draw_training", call=multihead.draw_training,
         good=lambda: dict(runs=_runs(), num_heads=2, step=1, fig=None),
         rules={"runs": _is_runs, "num_heads": lambda v: _int(v) and v in (1, 2),
                "step": lambda v: v is None or _int(v) and v in (0, 1, 2), "fig": _fig},
         check=_check_training_fig,
         bad=[Case("runs-other-steps", lambda kw: kw.update(
                  runs={1: _runs()[1], 2: toy.Run(_runs()[2].model, _runs()[2].example,
                                                  _runs()[2].checkpoints[:2])}), r"^runs\b"),
              Case("runs-not-runs", lambda kw: kw.update(runs={2: "run"}), r"^runs\b"),
              Case("runs-key-not-its-heads", lambda kw: kw.update(runs={1000: _runs()[2]},
                                                                  num_heads=1000), r"^runs\b")],
         edge=[Case("one-head", lambda kw: kw.update(num_heads=1), _check_training_fig),
               Case("foreign-fig", lambda kw: kw.update(fig=Figure()), _check_training_fig)]),
    Spec("helpers.widgets.multihead.training_view", call=multihead.training_view,
         good=lambda: dict(runs=_runs(), num_heads=1, step=0),
         rules={"runs": _is_runs, "num_heads": lambda v: _int(v) and v in (1, 2),
                "step": lambda v: v is None or _int(v) and v in (0, 1, 2)},
         check=lambda view, kw: _check_training_fig(view.result, kw)),
    Spec("helpers.widgets.multihead.demo_views", call=multihead.demo_views, good=dict,
         check=lambda out, kw: list(out) == ["training"]
         and isinstance(out["training"].result, Figure), limit=60.0),
]

SPECS: list[Spec] = MASKING + TEMPERATURE + POOLING + SCORING + SEQ2SEQ + MULTIHEAD
