"""Live view for notebook 02: Nadaraya-Watson regression on the reader's own points.

The reader drags training points and the query on the figure, or types them; the prediction
curve, the prediction at the query and the (Q, K) attention weights follow, for the Gaussian
kernel with w = 1 or with the scalar w the notebook trained (``NWKernelRegression``). Weights
are softmax(-((x_q - x_i) w)² / 2) over the K points, one row per query of a fixed grid.

Input: ``"q | x1 y1, x2 y2, ..."`` (the query, then 1 to ``MAX_POINTS`` points). The per-key
model is not offered: its widths belong to the 200 keys it was trained on, and a point the
reader adds has none.
"""

from __future__ import annotations

import math
import random
import re

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from ...kernel_regression import NWKernelRegression, make_regression_data, target_function
from ...plotting import to_numpy
from .._common import check_figure, start_figure
from . import LiveView, mark, tensor_json

__all__ = ["KIND", "JS", "DEFAULT_TEXT", "ACCEPTED", "W_CHOICES", "BAD_INPUTS", "live_view",
           "parse", "forward", "draw", "export"]
# (demo_model, random_texts, queries, default_text: the tests' and the view's)

KIND = "nw"
JS = ["nw.js"]
LABEL = "live.nw"
INPUT_LABEL = "query | points (x y, ...)"
INPUT_ROWS = 3
MAX_POINTS = 40
X_RANGE = (0.0, 20.0)  # the notebook's wide data: x in [0, 20)
Y_RANGE = (-2.0, 8.0)
GRID = 100  # queries of the heatmap and the curve: 0, 0.2, ..., 19.8
ACCEPTED = (f"The query x, a bar |, then 1 to {MAX_POINTS} training points as x y pairs "
            f"separated by commas, x in [0, 20], y in [-2, 8] (e.g. 7.5 | 1 2.1, 4 -0.3, 9 3). "
            f"Or drag the points and the query on the figure.")
W_CHOICES = ("1 (untrained)", "trained scalar w")
FIGSIZE = (9.0, 3.8)
WEIGHT_TICKS = [0.0, 0.02, 0.1, 0.25, 0.5, 1.0]

_NUMBER = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"  # ASCII, as nw.js
_PAIR = re.compile(rf"^\s*({_NUMBER})\s+({_NUMBER})\s*$")


def default_text(seed: int = 0, count: int = 20) -> str:
    """``count`` points of the notebook's wide data (every 10th of 200), query 7.5."""
    data = make_regression_data(n_train=200, n_test=200, width=20.0, seed=seed)
    idx = torch.linspace(0, 199, count).round().long()
    pairs = ", ".join(f"{x:.2f} {y:.2f}" for x, y in zip(data.x_train[idx].tolist(),
                                                          data.y_train[idx].tolist()))
    return f"7.5 | {pairs}"


DEFAULT_TEXT = default_text()


def _number(word: str, what: str, low: float, high: float) -> float:
    if not re.fullmatch(_NUMBER, word.strip()):
        raise ValueError(f"{what} must be a number, got {word.strip()!r}. {ACCEPTED}")
    v = float(word)
    if not (low <= v <= high) or not math.isfinite(v):
        raise ValueError(f"{what} must lie in [{low:g}, {high:g}], got {word.strip()}. {ACCEPTED}")
    return v


def parse(text: str, **controls) -> dict:
    """``"q | x y, x y, ..."`` → {"query": float, "x": [...], "y": [...]}; ValueError says
    what is accepted (the page's parse gives the same message)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"The input is empty. {ACCEPTED}")
    if text.count("|") != 1:
        raise ValueError(f"Write the query, one bar |, then the points. {ACCEPTED}")
    q, rest = text.split("|")
    query = _number(q, "The query", *X_RANGE)
    items = [s for s in rest.split(",")]
    if not rest.strip():
        raise ValueError(f"Give at least one training point. {ACCEPTED}")
    if len(items) > MAX_POINTS:
        raise ValueError(f"{len(items)} points: at most {MAX_POINTS}. {ACCEPTED}")
    xs, ys = [], []
    for k, item in enumerate(items, 1):
        m = _PAIR.match(item)
        if not m:
            raise ValueError(f"Point {k} must be two numbers x y, got {item.strip()!r}. "
                             f"{ACCEPTED}")
        xs.append(_number(m.group(1), f"Point {k}'s x", *X_RANGE))
        ys.append(_number(m.group(2), f"Point {k}'s y", *Y_RANGE))
    return {"query": query, "x": xs, "y": ys}


def _w(model: NWKernelRegression, w: str) -> torch.Tensor:
    if not isinstance(w, str) or w not in W_CHOICES:
        raise ValueError(f"w must be one of {list(W_CHOICES)}, got {w!r}")
    if not isinstance(model, NWKernelRegression):
        raise ValueError(f"model must be a scalar-w NWKernelRegression (per_key=False), got "
                         f"{type(model).__name__}")
    if model.w.numel() != 1:
        raise ValueError(f"model must be a scalar-w NWKernelRegression (per_key=False), got "
                         f"w of shape {tuple(model.w.shape)}")
    return torch.ones(1) if w == W_CHOICES[0] else model.w.detach().to("cpu", torch.float32)


def _check_parsed(parsed: object) -> dict:
    """Raise unless ``parsed`` is what ``parse`` returns: a query and 1 … MAX_POINTS points,
    in range."""
    def within(v: object, low: float, high: float) -> bool:
        return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                and low <= v <= high)

    ok = (isinstance(parsed, dict) and set(parsed) == {"query", "x", "y"}
          and within(parsed["query"], *X_RANGE)
          and isinstance(parsed["x"], list) and isinstance(parsed["y"], list)
          and 1 <= len(parsed["x"]) == len(parsed["y"]) <= MAX_POINTS
          and all(within(v, *X_RANGE) for v in parsed["x"])
          and all(within(v, *Y_RANGE) for v in parsed["y"]))
    if not ok:
        raise ValueError(f"parsed must be parse()'s {{'query', 'x', 'y'}}: a query in "
                         f"[{X_RANGE[0]:g}, {X_RANGE[1]:g}] and 1 … {MAX_POINTS} points (x in "
                         f"[{X_RANGE[0]:g}, {X_RANGE[1]:g}], y in [{Y_RANGE[0]:g}, "
                         f"{Y_RANGE[1]:g}]), got {parsed!r:.80}")
    return parsed


def queries() -> torch.Tensor:
    """The fixed grid of queries (GRID,): 0, 0.2, ..., 19.8 in float32."""
    return torch.arange(GRID, dtype=torch.float32) * (X_RANGE[1] / GRID)


def forward(model: NWKernelRegression, parsed: dict, w: str = W_CHOICES[1]) -> dict:
    """The oracle: ``NWKernelRegression`` on the reader's points (float32), for the grid and
    the query: weights (GRID, K) and (K,), predictions (GRID,) and the query's."""
    _check_parsed(parsed)
    _w(model, w)
    x = torch.tensor(parsed["x"], dtype=torch.float32)
    y = torch.tensor(parsed["y"], dtype=torch.float32)
    nw = NWKernelRegression(x, y, per_key=False)
    with torch.no_grad():
        nw.w.copy_(_w(model, w))
        fit = nw(queries())
        weights = nw.attention_weights
        at = nw(torch.tensor([parsed["query"]], dtype=torch.float32))
        query_weights = nw.attention_weights[0]
    return {"fit": fit.numpy(), "weights": weights.numpy(), "answer": float(at[0]),
            "query_weights": query_weights.numpy(), "w": float(nw.w.detach()[0])}


def _order(parsed: dict) -> np.ndarray:
    """The points' order by x (stable): the heatmap's columns."""
    return np.argsort(np.asarray(parsed["x"], np.float64), kind="stable")


def _title(parsed: dict, out: dict, w: str) -> str:
    which = "w = 1" if w == W_CHOICES[0] else f"trained w = {out['w']:.2f}"
    return f"{which}, {len(parsed['x'])} points: ŷ({parsed['query']:.2f}) = {out['answer']:.2f}"


def draw(model: NWKernelRegression, parsed: dict, *, fig: Figure | None = None,
         w: str = W_CHOICES[1]) -> Figure:
    """Left: truth, the reader's points, the prediction curve, the query and ŷ there. Right:
    the (GRID, K) weights, columns in the points' x order, on the notebook's √ scale."""
    check_figure("fig", fig, optional=True)
    out = forward(model, parsed, w)
    fig = Figure(figsize=FIGSIZE) if fig is None else fig
    start_figure(fig, LABEL, fixed_layout=True)
    ax_fit, ax_map = fig.subplots(1, 2, width_ratios=[1.3, 1], gridspec_kw=dict(
        left=0.065, right=0.92, bottom=0.14, top=0.86, wspace=0.22))
    grid = to_numpy(queries()).astype(np.float64)
    ax_fit.plot(grid, to_numpy(target_function(queries())), color="#1f77b4", lw=1.2,
                label="truth")
    mark(ax_fit.plot(grid, out["fit"].astype(np.float64), color="#d62728", lw=1.5,
                     label="prediction")[0], "fit")
    mark(ax_fit.scatter(parsed["x"], parsed["y"], s=22, color="#555555", zorder=3,
                        label="training points"), "points")
    q = parsed["query"]
    mark(ax_fit.plot([q, q], list(Y_RANGE), color="#2ca02c", lw=1.2, ls="--",
                     label="query")[0], "query")
    mark(ax_fit.scatter([q], [out["answer"]], s=40, color="#2ca02c", zorder=4,
                        edgecolors="black", linewidths=0.6), "answer")
    ax_fit.set_xlim(*X_RANGE)
    ax_fit.set_ylim(*Y_RANGE)
    ax_fit.set_xlabel("x")
    ax_fit.set_ylabel("y")
    ax_fit.legend(loc="upper left", fontsize="x-small", ncols=2)
    mark(ax_fit.set_title(_title(parsed, out, w), fontsize="medium", loc="left", y=1.02),
         "title")
    order = _order(parsed)
    image = ax_map.imshow(out["weights"][:, order].astype(np.float64), cmap="Reds",
                          aspect="auto", interpolation="nearest",
                          norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
                          extent=(-0.5, len(order) - 0.5, X_RANGE[1], X_RANGE[0]))
    mark(image, "weights")
    ax_map.set_xticks([])
    ax_map.set_xlabel("training points (keys), left to right by x")
    ax_map.set_ylabel("query x (grid)")
    colorbar = fig.colorbar(image, ax=ax_map, fraction=0.06, pad=0.03)
    colorbar.set_ticks(WEIGHT_TICKS)
    colorbar.set_label("weight (√ scale)", fontsize="small")
    mark(ax_map.set_title(f"attention weights (largest {out['weights'].max():.2f})",
                          fontsize="medium", loc="left", y=1.02), "map_title")
    return fig


def export(model: NWKernelRegression) -> dict:
    """The trained scalar w and the query grid (float32)."""
    _w(model, W_CHOICES[1])
    return {"w": tensor_json(model.w), "grid": tensor_json(queries()),
            "x_range": list(X_RANGE), "y_range": list(Y_RANGE), "max_points": MAX_POINTS,
            "accepted": ACCEPTED, "choices": list(W_CHOICES)}


def random_texts(n: int, seed: int) -> list[str]:
    """``n`` valid inputs: 1-40 points anywhere in range, numbers with 0-3 decimals."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, MAX_POINTS)
        d = rng.randint(0, 3)
        pts = ", ".join(f"{rng.uniform(*X_RANGE):.{d}f} {rng.uniform(*Y_RANGE):.{d}f}"
                        for _ in range(k))
        out.append(f"{rng.uniform(*X_RANGE):.{d}f} | {pts}")
    return out


BAD_INPUTS = {
    "": "The input is empty",
    "7.5 1 2, 3 4": "one bar |",
    "7.5 |": "at least one training point",
    "25 | 1 2": "The query must lie in [0, 20]",
    "7.5 | 1 2, 3": "Point 2 must be two numbers x y",
    "7.5 | 1 9": "Point 1's y must lie in [-2, 8]",
    "x | 1 2": "The query must be a number",
    "7.5 | " + ", ".join(["1 1"] * 41): "41 points: at most 40",
}


def demo_model(steps: int = 300) -> NWKernelRegression:
    """The notebook's scalar-w model: the wide data (200 points on [0, 20)), trained with Adam
    on the leave-one-out loss as notebook 02 does (lr 0.1: w ≈ 6.9 after 300 steps)."""
    from ...adam import Adam

    wide = make_regression_data(n_train=200, n_test=200, width=20.0)
    model = NWKernelRegression(wide.x_train, wide.y_train, per_key=False)
    opt = Adam(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(wide.x_train, leave_one_out=True),
                                            wide.y_train)
        loss.backward()
        opt.step()
    return model


def live_view(model: NWKernelRegression, text: str = DEFAULT_TEXT,
              w: str = W_CHOICES[1]) -> LiveView:
    """The live view of ``model`` (a trained scalar-w ``NWKernelRegression``)."""
    _w(model, w)
    return LiveView.of(__import__(__name__, fromlist=["x"]), model, text, {
        "w": widgets.Dropdown(options=list(W_CHOICES), value=w, description="w")})
