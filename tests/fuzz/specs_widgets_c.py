"""Specs for the slider views of notebook 12: ``helpers.widgets.linear`` (see
``tests/fuzz/__init__.py`` for the format). Each ``check`` recomputes what is drawn from the
formulas written out here (the additive and delta-rule states by a loop in NumPy, the
retrieval errors, softmax, positive random features exp(W x − |x|²/2)/√F) and compares it
with the returned numbers or the Figure's artists. Draws cost tens of milliseconds."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from helpers.widgets import linear as lw
from tests.fuzz import Case, Int, Spec
from tests.fuzz.specs_widgets_a import _control, _foreign, _is_view  # the same helpers
from tests.test_widgets_linear import rf_weights_by_hand, softmax_by_hand  # the formulas written out

T = len(lw.KEY_NAMES)
FIG = lambda v: v is None or isinstance(v, Figure)  # noqa: E731  a draw function's ``fig``


@dataclass(frozen=True)
class Choice:
    """An int (Python or NumPy, not a bool, not a float equal to one) among ``choices``."""
    choices: tuple[int, ...]

    def __call__(self, v: object) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) \
            and v in self.choices

    def extra_values(self) -> list[tuple[str, object]]:
        return [(repr(c), c) for c in self.choices] + [("3", 3), ("16.0", 16.0), ("2048", 2048)]


# ------------------------------------------------------------------ the states view
def _example() -> tuple[np.ndarray, np.ndarray]:
    keys, values = lw.memory_example()
    return keys.numpy(), values.numpy()


def _states(step: int) -> np.ndarray:
    """(2, D, V): S += k vᵀ, and S += k (v − Sᵀk)ᵀ, over the first ``step`` writes."""
    keys, values = _example()
    S = np.zeros((2, keys.shape[1], values.shape[1]))
    for k, v in zip(keys[:step], values[:step]):
        S[0] += np.outer(k, v)
        S[1] += np.outer(k, v - S[1].T @ k)
    return S


def _errors(step: int) -> np.ndarray:
    """(2, T): |S_tᵀ k_j − v_j|, NaN for writes not made or whose key came again by ``step``."""
    keys, values = _example()
    out = np.full((2, T), np.nan)
    for r, S in enumerate(_states(int(step))):
        for j in range(int(step)):
            if lw.KEY_NAMES[j] not in lw.KEY_NAMES[j + 1:int(step)]:
                out[r, j] = np.linalg.norm(S.T @ keys[j] - values[j])
    return out


def _errors_right(out: torch.Tensor, kw: dict) -> bool:
    return (isinstance(out, torch.Tensor) and out.dtype == torch.float64 and out.shape == (2, T)
            and np.allclose(out.numpy(), _errors(kw["step"]), atol=1e-12, equal_nan=True))


def _states_figure_right(fig: Figure, kw: dict) -> bool:
    step = int(kw["step"])
    maps = [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]
    ax = fig.axes[-1]
    heights = np.array([p.get_height() for p in ax.patches if p.get_gid() != "current"])
    return (isinstance(fig, Figure) and len(maps) == 2
            and np.allclose(maps, _states(step), atol=1e-12)
            and heights.shape == (2 * T,)
            and np.allclose(heights.reshape(2, T), np.nan_to_num(_errors(step)), atol=1e-12)
            and fig._suptitle.get_text().startswith(f"step t = {step}:"))


def _example_right(out, kw) -> bool:
    keys, values = out
    return (keys.shape == (T, 4) and values.shape == (T, 4) and keys.dtype == torch.float64
            and torch.allclose(keys.norm(dim=1), torch.ones(T, dtype=torch.float64))
            and torch.equal(keys[0], keys[lw.KEY_NAMES.index("a", 1)]))


STATES = [
    Spec("helpers.widgets.linear.memory_example", call=lw.memory_example, good=dict,
         check=_example_right),
    Spec("helpers.widgets.linear.retrieval_errors", call=lw.retrieval_errors,
         good=lambda: dict(step=5), rules={"step": Int(0, T)}, check=_errors_right),
    Spec("helpers.widgets.linear.draw_states", call=lw.draw_states,
         good=lambda: dict(step=5, fig=None), rules={"step": Int(0, T), "fig": FIG},
         check=_states_figure_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _states_figure_right),
               Case("features-fig", lambda kw: kw.update(fig=lw.draw_features(4)),
                    _states_figure_right)]),
    Spec("helpers.widgets.linear.states_view", call=lw.states_view,
         good=lambda: dict(step=3), rules={"step": Int(0, T)},
         check=lambda out, kw: _is_view(out) and _control(out, "writes made t").value == kw["step"]
         and _states_figure_right(out.result, kw)),
]


# ------------------------------------------------------------------ the features view
def _softmax_example_right(out, kw) -> bool:
    q, k, w = out
    return (q.shape == k.shape == (8, 4) and w.dtype == torch.float64
            and np.allclose(w.numpy(), softmax_by_hand(), atol=1e-12))


def _rf_right(out: torch.Tensor, kw: dict) -> bool:
    return (out.dtype == torch.float64 and out.shape == (8, 8)
            and np.allclose(out.numpy(), rf_weights_by_hand(int(kw["num_features"]), int(kw["seed"])), rtol=1e-10))


def _rf_errors_right(out: torch.Tensor, kw: dict) -> bool:
    exact = softmax_by_hand()
    return (out.shape == (len(lw.FEATURE_COUNTS), lw.NUM_SEEDS) and all(
        math.isclose(out[i, s].item(), np.abs(rf_weights_by_hand(int(n), int(s)) - exact).mean(), rel_tol=1e-10)
        for i, n in enumerate(lw.FEATURE_COUNTS) for s in (0, lw.NUM_SEEDS - 1)))


def _features_figure_right(fig: Figure, kw: dict) -> bool:
    n = int(kw["num_features"])
    maps = [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]
    estimate = rf_weights_by_hand(int(n), 0)
    (dot,) = [line for line in fig.axes[-1].lines if line.get_gid() == "current"]
    return (len(maps) == 2 and np.allclose(maps[0], softmax_by_hand(), atol=1e-12)
            and np.allclose(maps[1], estimate, rtol=1e-10)
            and list(dot.get_xdata()) == [n]
            and math.isclose(dot.get_ydata()[0], np.abs(estimate - softmax_by_hand()).mean(), rel_tol=1e-10))


FEATURES = [
    Spec("helpers.widgets.linear.softmax_example", call=lw.softmax_example, good=dict,
         check=_softmax_example_right),
    Spec("helpers.widgets.linear.random_feature_weights", call=lw.random_feature_weights,
         good=lambda: dict(num_features=16, seed=3),
         rules={"num_features": Int(1, lw.MAX_FEATURES), "seed": "seed"}, check=_rf_right),
    Spec("helpers.widgets.linear.random_feature_errors", call=lw.random_feature_errors, good=dict,
         check=_rf_errors_right, limit=30),
    Spec("helpers.widgets.linear.draw_features", call=lw.draw_features,
         good=lambda: dict(num_features=16, fig=None),
         rules={"num_features": Int(1, lw.MAX_FEATURES), "fig": FIG}, check=_features_figure_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _features_figure_right),
               Case("states-fig", lambda kw: kw.update(fig=lw.draw_states(2)),
                    _features_figure_right)]),
    Spec("helpers.widgets.linear.features_view", call=lw.features_view,
         good=lambda: dict(num_features=64), rules={"num_features": Choice(lw.FEATURE_COUNTS)},
         check=lambda out, kw: _is_view(out)
         and _control(out, "random features F").value == kw["num_features"]
         and _features_figure_right(out.result, kw)),
    Spec("helpers.widgets.linear.demo_views", call=lw.demo_views, good=dict, limit=60,
         check=lambda out, kw: list(out) == ["states", "features", "recall"]
         and all(_is_view(v) for v in out.values())),
]


# ------------------------------------------------------------------ the recall view
KINDS = ("softmax", "linear", "positive", "additive", "decay", "delta", "delta_token")  # recall.KINDS
P = len(lw.PAIR_COUNTS)


def _accuracy() -> dict[str, torch.Tensor]:
    """Hand-made (seeds = 2, P) accuracies per kind, no training."""
    N = torch.tensor(lw.PAIR_COUNTS, dtype=torch.float64)
    return {k: torch.stack([(1 - r * N / 300), (1 - r * N / 200)]).clamp(0, 1)
            for r, k in enumerate(KINDS)}


def _by_position() -> dict[str, list[torch.Tensor]]:
    return {k: [torch.linspace(0.1 * r, 1.0, n, dtype=torch.float64) for n in lw.PAIR_COUNTS]
            for r, k in enumerate(KINDS)}


def _fractions(v: object, shape: tuple[int | None, ...]) -> bool:
    return (isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.device.type != "meta"
            and v.dim() == len(shape) and all(w is None or w == g for w, g in zip(shape, v.shape))
            and v.numel() > 0 and bool(((v >= 0) & (v <= 1)).all()))


@dataclass(frozen=True)
class KindDict:
    """A dict keyed by one or more kinds of recall.KINDS: accuracies (seeds, P), or
    (``positions``) lists of P tensors (N,). Both arguments must have the same kinds (the
    spec's ``valid``)."""
    positions: bool = False

    def __call__(self, v: object) -> bool:
        if not (isinstance(v, dict) and v and all(isinstance(k, str) and k in KINDS for k in v)):
            return False
        if not self.positions:
            return all(_fractions(x, (None, P)) for x in v.values())
        return all(isinstance(x, (list, tuple)) and len(x) == P
                   and all(_fractions(c, (n,)) for c, n in zip(x, lw.PAIR_COUNTS))
                   for x in v.values())

    def extra_values(self) -> list[tuple[str, object]]:
        good = _by_position() if self.positions else _accuracy()
        out = [("good", good), ("[]", []), ("missing-delta", {k: good[k] for k in KINDS[:3]}),
               ("extra-key", {**good, "gated": good["delta"]}),
               ("reordered", {k: good[k] for k in reversed(KINDS)})]
        if self.positions:
            out += [("short-list", {**good, "linear": good["linear"][:-1]}),
                    ("tensor-not-list", {**good, "linear": torch.ones(P, 4)}),
                    ("wrong-n", {**good, "linear": [torch.ones(n + 1) for n in lw.PAIR_COUNTS]}),
                    ("above-1", {**good, "linear": [c + 1 for c in good["linear"]]}),
                    ("float32", {k: [c.float() for c in x] for k, x in good.items()})]
        else:
            out += [("one-seed", {k: x[:1] for k, x in good.items()}),
                    ("no-seeds", {**good, "delta": good["delta"][:0]}),
                    ("one-n-short", {**good, "delta": good["delta"][:, 1:]}),
                    ("rank-1", {**good, "delta": good["delta"][0]}),
                    ("long", {**good, "delta": good["delta"].long()}),
                    ("numpy", {**good, "delta": good["delta"].numpy()}),
                    ("nan", {**good, "delta": good["delta"] * math.nan}),
                    ("negative", {**good, "delta": -good["delta"]}),
                    ("meta", {**good, "delta": torch.empty(2, P, device="meta")}),
                    ("float32", {k: x.float() for k, x in good.items()})]
        return out


def _recall_figure_right(fig: Figure, kw: dict) -> bool:
    n = int(kw["num_pairs"])
    i = lw.PAIR_COUNTS.index(n)
    lines = {line.get_gid(): line for ax in fig.axes for line in ax.lines}
    acc, pos = kw["accuracy"], kw["by_position"]
    return (isinstance(fig, Figure) and all(
        np.allclose(lines[f"mean {k}"].get_ydata(), acc[k].double().mean(0).numpy(), atol=1e-7)
        and list(lines[f"current {k}"].get_xdata()) == [n]
        and np.allclose(lines[f"position {k}"].get_xdata(), (np.arange(n) + 0.5) / n)
        and np.allclose(lines[f"position {k}"].get_ydata(), pos[k][i].double().numpy(), atol=1e-7)
        for k in acc)
        and fig._suptitle.get_text().startswith(f"N = {n}, D = 16, mean accuracy: ")
        and all(ax.get_ylim() == (0.0, 1.02) for ax in fig.axes[:2]))


def _same_kinds(kw: dict) -> bool:
    return set(kw["accuracy"]) == set(kw["by_position"])


RECALL = [
    Spec("helpers.widgets.linear.draw_recall", call=lw.draw_recall,
         good=lambda: dict(num_pairs=16, accuracy=_accuracy(), by_position=_by_position(),
                           fig=None),
         rules={"num_pairs": Choice(lw.PAIR_COUNTS), "accuracy": KindDict(),
                "by_position": KindDict(positions=True), "fig": FIG},
         valid=_same_kinds,
         check=_recall_figure_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _recall_figure_right),
               Case("states-fig", lambda kw: kw.update(fig=lw.draw_states(2)),
                    _recall_figure_right),
               Case("own-fig-new-data", lambda kw: kw.update(
                   fig=lw.draw_recall(4, {k: torch.zeros(3, P) for k in KINDS}, _by_position())),
                    _recall_figure_right),
               Case("three-kinds", lambda kw: kw.update(
                   accuracy={k: kw["accuracy"][k] for k in ("delta", "softmax", "additive")},
                   by_position={k: kw["by_position"][k] for k in ("additive", "delta", "softmax")}),
                    _recall_figure_right)]),
    Spec("helpers.widgets.linear.recall_view", call=lw.recall_view,
         good=lambda: dict(accuracy=_accuracy(), by_position=_by_position(), num_pairs=24),
         rules={"num_pairs": Choice(lw.PAIR_COUNTS), "accuracy": KindDict(),
                "by_position": KindDict(positions=True)},
         valid=_same_kinds,
         check=lambda out, kw: _is_view(out)
         and _control(out, "pairs written N").value == kw["num_pairs"]
         and _recall_figure_right(out.result, kw)),
]

SPECS: list[Spec] = STATES + FEATURES + RECALL
