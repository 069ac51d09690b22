"""Views for notebook 12: the state of linear attention (线性注意力) written by the additive
update and by the delta rule (增量规则), and softmax's weights estimated with random features.

Legend: T writes, D key size, V value size, S_t (D, V) the state after t writes, Q queries,
K keys, F random features, φ the positive random features of ``positive_random_features``.

``draw_states`` shows S_t of both rules for a fixed example of T unit keys (one written twice,
some overlapping) and how far each pair written so far is from what S_t retrieves for its key;
``draw_features`` shows softmax's weights, their random-feature estimate with F features and the
estimate's error against F; ``draw_recall`` shows how well the models of ``helpers.recall``
recall N key–value pairs, against N and by the position a pair was written at. Each redraws in
place into a Figure it drew.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from .. import recall
from ..checks import check_seed
from ..device import cpu_threads
from ..linear_attention import positive_random_features, random_projection, recurrent_states
from ..plotting import show_heatmaps, to_numpy
from ._common import (
    check_figure, check_int_in, freeze_layout, interactive_figure, set_image_data, start_figure,
)
from .page import PageView

__all__ = [
    "KEY_NAMES", "memory_example", "retrieval_errors", "draw_states", "states_view",
    "FEATURE_COUNTS", "NUM_SEEDS", "softmax_example", "random_feature_weights",
    "random_feature_errors", "draw_features", "features_view", "PAIR_COUNTS", "STATE_SIZE",
    "KIND_COLORS", "draw_recall", "recall_view", "demo_views",
]

# ---------------------------------------------------------------- 1. writing into a state
_R2, _H = math.sqrt(0.5), 0.5
# The keys of the T = 8 writes, by name: a is written twice (writes 1 and 5, two values); c
# overlaps b, e overlaps c and d, f overlaps c and e, g overlaps every key (cosines 0.5–0.71).
KEY_NAMES = ("a", "b", "c", "d", "a", "e", "f", "g")
_KEYS = {"a": (1.0, 0.0, 0.0, 0.0), "b": (0.0, 1.0, 0.0, 0.0), "c": (0.0, _R2, _R2, 0.0),
         "d": (0.0, 0.0, 0.0, 1.0), "e": (0.0, 0.0, _R2, -_R2), "f": (0.0, 0.0, 1.0, 0.0),
         "g": (_H, _H, _H, _H)}
KEY_LEGEND = ("keys (unit): a = e₀, b = e₁, c = (e₁+e₂)/√2, d = e₃, e = (e₂−e₃)/√2, f = e₂, "
              "g = (e₀+e₁+e₂+e₃)/2")
RULES = ("additive", "delta rule")
RULE_COLORS = ("C1", "C0")
STATES_LABEL = "linear.states"
STATES_FIGSIZE = (9.0, 6.6)


@lru_cache(maxsize=1)
def _memory() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """keys (T, D), values (T, V) and the states (2, T + 1, D, V) of both rules (S_0 = 0)."""
    keys = torch.tensor([_KEYS[n] for n in KEY_NAMES], dtype=torch.float64)  # (T, D)
    g = torch.Generator().manual_seed(0)
    values = torch.randn(len(KEY_NAMES), 4, generator=g, dtype=torch.float64)  # (T, V)
    values = values.round(decimals=1) + 0.0  # one decimal, to read; + 0.0: no "-0.0"
    zero = keys.new_zeros(1, keys.shape[1], values.shape[1])  # (1, D, V): S_0
    states = torch.stack([
        torch.cat([zero, recurrent_states(keys[None], values[None], beta)[0]])  # (T + 1, D, V)
        for beta in (None, 1.0)])  # (2, T + 1, D, V)
    return keys, values, states


def memory_example() -> tuple[torch.Tensor, torch.Tensor]:
    """The writes the states view makes: keys (T, D) = (8, 4), unit length, named by
    ``KEY_NAMES`` (a is written twice: writes 1 and 5, with two values; several keys overlap),
    and values (T, V) = (8, 4), seed 0, rounded to one decimal. float64, fresh copies."""
    keys, values, _ = _memory()
    return keys.clone(), values.clone()


def _check_step(step: object) -> int:
    return check_int_in("step", step, 0, len(KEY_NAMES), "(writes made, 0 … T)")


def _replaced(step: int) -> list[int | None]:
    """For each write j (0-based): the 1-based step that wrote its key again by ``step``, or
    None."""
    out: list[int | None] = []
    for j, name in enumerate(KEY_NAMES):
        later = [i + 1 for i in range(j + 1, step) if KEY_NAMES[i] == name]
        out.append(later[0] if later else None)
    return out


def retrieval_errors(step: int) -> torch.Tensor:
    """How far what the state retrieves for each key written so far is from its value, after
    ``step`` writes (0 … T): (2, T) float64, row 0 the additive update (S_t = S_{t−1} + k vᵀ),
    row 1 the delta rule with β = 1; column j is |S_tᵀ k_j − v_j| (Euclidean, over V) for
    write j + 1. NaN where write j + 1 is not made yet, or its key was written again by
    ``step`` (the memory should now return the newer value: the later write's column)."""
    step = _check_step(step)
    keys, values, states = _memory()
    S = states[:, step]  # (2, D, V)
    errors = (keys @ S - values).norm(dim=-1)  # (2, T): row r, column j: |S_tᵀ k_j − v_j|
    live = torch.tensor([j < step and r is None for j, r in enumerate(_replaced(step))])
    return torch.where(live, errors, torch.nan)


@lru_cache(maxsize=1)
def _state_limits() -> tuple[float, float]:
    """One colour scale (±) for the states and one y-limit for the errors, over every step."""
    _, _, states = _memory()
    largest = states.abs().max().item()
    errors = torch.stack([retrieval_errors(t) for t in range(len(KEY_NAMES) + 1)])
    worst = errors.nan_to_num(0.0).max().item()
    return float(math.ceil(largest * 2) / 2), float(math.ceil(worst))


def _layout_states(fig: Figure) -> None:
    limit, top = _state_limits()
    T, D, V = len(KEY_NAMES), 4, 4
    start_figure(fig, STATES_LABEL)
    upper, lower = fig.subfigures(2, 1, height_ratios=[1.1, 1.0])
    show_heatmaps(np.zeros((2, D, V)), xlabel="value dimension", ylabel="key dimension",
                  titles=[f"{RULES[0]}: S ← S + k vᵀ", f"{RULES[1]} (β = 1): S ← S + k (v − Sᵀk)ᵀ"],
                  cmap="RdBu_r", vmin=-limit, vmax=limit, annot=".1f", fig=upper)
    for ax in upper.axes:
        if ax.images:
            ax.set_xticks(range(V))
            ax.set_yticks(range(D))
            for text in ax.texts:  # each cell's number, set per step
                text.set_fontsize("x-small")
        else:  # the colour bar
            ax.set_yticks([-limit, 0.0, limit])
    ax = lower.subplots()
    ax.axvspan(-0.5, 0.5, color="0.9", zorder=0, gid="current")  # the write just made
    x = np.arange(T)
    for r, (rule, color) in enumerate(zip(RULES, RULE_COLORS)):
        ax.bar(x + (r - 0.5) * 0.38, np.zeros(T), width=0.38, color=color, label=rule)
    for j in range(T):  # "replaced at 5" above a write whose key was written again
        ax.text(j, top * 0.03, "", ha="center", va="bottom", fontsize="x-small", color="0.35",
                gid=f"replaced {j}")
    for r in range(len(RULES)):  # each bar's number above it
        for j in range(T):
            ax.text(j + (r - 0.5) * 0.38, 0.0, "", ha="center", va="bottom", fontsize="x-small",
                    gid=f"error {r} {j}")
    ax.set_xticks(x, [f"{j + 1}: {n}" for j, n in enumerate(KEY_NAMES)])
    ax.set_xlim(-0.6, T - 0.4)
    ax.set_ylim(0.0, top)
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(f"write j: key\n{KEY_LEGEND}")
    ax.set_ylabel("|S_tᵀ k_j − v_j|")
    ax.set_title("how far each pair written so far is from what S_t retrieves for its key",
                 fontsize="medium")
    ax.legend(loc="upper left", fontsize="small")
    fig.suptitle("placeholder", fontsize="medium")


def draw_states(step: int = 0, *, fig: Figure | None = None) -> Figure:
    """Top: the state S_t after ``step`` writes of ``memory_example`` (0 … T = 8) for the
    additive update and for the delta rule (β = 1), each cell's number written in it, one
    colour scale for every step; bottom: ``retrieval_errors(step)`` for each write so far (a
    write whose key came again says so instead), the write just made shaded, the y-axis fixed
    for every step. The title says what was written at this step. A Figure this function drew
    is updated in place; any other is cleared and redrawn."""
    step = _check_step(step)
    check_figure("fig", fig, optional=True)
    keys, values, states = _memory()
    errors = to_numpy(retrieval_errors(step))  # (2, T)
    if fig is None:
        fig = Figure(figsize=STATES_FIGSIZE)
    fresh = fig.get_label() != STATES_LABEL
    if fresh:
        _layout_states(fig)
    maps = [ax for ax in fig.axes if ax.images]
    for ax, S in zip(maps, to_numpy(states[:, step])):  # (D, V) each
        set_image_data(ax.images[0], S)
        dark = ax.images[0].to_rgba(S)[..., :3].sum(axis=-1) < 1.5  # (D, V): as show_heatmaps
        for text in ax.texts:
            j, i = (round(c) for c in text.get_position())  # (column, row)
            text.set_text(format(S[i, j] + 0.0, ".1f"))
            text.set_color("white" if dark[i, j] else "black")  # light text on dark cells
    ax = fig.axes[-1]
    bars = [p for p in ax.patches if p.get_gid() != "current"]  # (additive …, delta …)
    for bar, error in zip(bars, errors.reshape(-1)):
        bar.set_height(0.0 if math.isnan(error) else error)
    (shade,) = [p for p in ax.patches if p.get_gid() == "current"]
    shade.set_visible(step > 0)
    if step:  # a Rectangle from axvspan: (x0, y0) is its lower left corner
        shade.set_x(step - 1.5)
    texts = {t.get_gid(): t for t in ax.texts}
    for j, again in enumerate(_replaced(step)):
        texts[f"replaced {j}"].set_text(f"replaced\nat {again}" if again else "")
    for (r, j), error in np.ndenumerate(errors):
        text = texts[f"error {r} {j}"]
        text.set_text("" if math.isnan(error) else f"{error:.2f}")
        text.set_y(0.0 if math.isnan(error) else error)
    if step == 0:
        title = "step t = 0: nothing written yet, S₀ = 0"
    else:
        name, v = KEY_NAMES[step - 1], values[step - 1].tolist()
        again = " again" if name in KEY_NAMES[:step - 1] else ""
        title = (f"step t = {step}: wrote key {name}{again} with value "
                 f"({', '.join(f'{x:.1f}' for x in v)})")
    fig.suptitle(title, fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def states_view(step: int = 0) -> PageView:
    """Slider: the number of writes made, t = 0 … T → ``draw_states``."""
    step = _check_step(step)
    fig = Figure(figsize=STATES_FIGSIZE)
    return interactive_figure(
        lambda step: draw_states(step, fig=fig),
        step=widgets.IntSlider(value=step, min=0, max=len(KEY_NAMES), step=1,
                               description="writes made t", continuous_update=False,
                               style={"description_width": "initial"}),
    )


# ---------------------------------------------------------------- 2. random features
FEATURE_COUNTS = tuple(2**i for i in range(11))  # the slider's F: 1, 2, 4, … 1024
NUM_SEEDS = 20  # projections drawn per F for the error curve (seeds 0 … 19)
MAX_FEATURES = FEATURE_COUNTS[-1]
FEATURES_LABEL = "linear.features"
FEATURES_FIGSIZE = (12.0, 4.2)
_Q, _K, _D = 8, 8, 4


@lru_cache(maxsize=1)
def _softmax() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    queries = torch.randn(_Q, _D, generator=g, dtype=torch.float64)  # (Q, D)
    keys = torch.randn(_K, _D, generator=g, dtype=torch.float64)  # (K, D)
    weights = torch.softmax(queries @ keys.T / math.sqrt(_D), dim=-1)  # (Q, K)
    return queries, keys, weights


def softmax_example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The features view's example: queries (Q, D) = (8, 4) and keys (K, D) = (8, 4), standard
    normal (seed 0), and softmax's weights softmax(q·k/√D) (Q, K). float64, fresh copies."""
    return tuple(t.clone() for t in _softmax())


def _check_features(num_features: object) -> int:
    return check_int_in("num_features", num_features, 1, MAX_FEATURES)


def _rf_weights(num_features: int, seed: int) -> torch.Tensor:
    queries, keys, _ = _softmax()
    W = random_projection(num_features, _D, generator=torch.Generator().manual_seed(seed))  # (F, D)
    phi_q = positive_random_features(queries / _D**0.25, W)  # (Q, F)
    phi_k = positive_random_features(keys / _D**0.25, W)  # (K, F)
    kernel = phi_q @ phi_k.T  # (Q, K): φ(q_i)·φ(k_j), estimates exp(q_i·k_j/√D)
    return kernel / kernel.sum(dim=-1, keepdim=True)  # (Q, K): each row sums to 1


def random_feature_weights(num_features: int, seed: int = 0) -> torch.Tensor:
    """The weights linear attention gives ``softmax_example``'s queries and keys with
    ``num_features`` positive random features (1 … 1024; projection ``random_projection(F, D)``
    drawn with ``seed``, inputs scaled by D^−¼): φ(q_i)·φ(k_j) / Σ_j' φ(q_i)·φ(k_j'), (Q, K)
    float64; each row sums to 1, and the rows tend to softmax's as F grows."""
    return _rf_weights(_check_features(num_features), check_seed(seed))


@lru_cache(maxsize=1)
def _errors() -> torch.Tensor:
    exact = _softmax()[2]
    with cpu_threads(1):  # 220 tiny products: one thread is faster (and far faster on a busy CPU)
        return torch.tensor([[(_rf_weights(n, s) - exact).abs().mean().item()
                              for s in range(NUM_SEEDS)] for n in FEATURE_COUNTS],
                            dtype=torch.float64)


def random_feature_errors() -> torch.Tensor:
    """The mean absolute error of ``random_feature_weights(F, seed)`` against softmax's weights
    (over the Q × K cells), for each F of ``FEATURE_COUNTS`` (rows) and each seed 0 … 19
    (columns): (11, 20) float64, a fresh copy."""
    return _errors().clone()


def _uniform_error() -> float:
    """The error of weights that ignore the keys, 1/K each: what a useless estimate scores."""
    exact = _softmax()[2]
    return (exact - 1 / _K).abs().mean().item()


def _error_limits() -> tuple[float, float]:
    errors = _errors()
    return errors.min().item() / 1.6, max(errors.max().item(), _uniform_error()) * 1.6


def _layout_features(fig: Figure) -> None:
    start_figure(fig, FEATURES_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.55, 1.0])
    show_heatmaps(np.zeros((2, _Q, _K)), xlabel="key j", ylabel="query i",
                  titles=["softmax(q·k/√D)", "placeholder"], cmap="Reds", vmin=0.0, vmax=1.0,
                  fig=left)
    for ax in left.axes:
        if ax.images:
            ax.set_xticks(range(_K))
            ax.set_yticks(range(_Q))
        else:
            ax.set_yticks([0.0, 0.5, 1.0])
    ax = right.subplots()
    errors = to_numpy(_errors())  # (F, seeds)
    F = np.array(FEATURE_COUNTS, dtype=float)
    ax.fill_between(F, errors.min(axis=1), errors.max(axis=1), color="C0", alpha=0.25,
                    linewidth=0, label=f"min–max of {NUM_SEEDS} seeds")
    ax.plot(F, np.median(errors, axis=1), color="C0", linewidth=2, label="median")
    ax.axhline(_uniform_error(), color="0.4", linestyle="--", linewidth=1,
               label="uniform weights 1/K")
    ax.plot([], [], "o", color="C3", markersize=7, gid="current", label="seed 0 (shown)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(F[0] / 1.4, F[-1] * 1.4)
    ax.set_ylim(*_error_limits())
    ax.set_xticks([1, 4, 16, 64, 256, 1024], ["1", "4", "16", "64", "256", "1024"])
    low, high = ax.get_ylim()
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0) if low <= t <= high]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(NullLocator())
    ax.set_xlabel("random features F")
    ax.set_ylabel("mean |weight error|")
    ax.legend(loc="lower left", fontsize="x-small")
    ax.set_title("placeholder", fontsize="medium")


def draw_features(num_features: int = 16, *, fig: Figure | None = None) -> Figure:
    """Left: softmax's weights of ``softmax_example``; middle: ``random_feature_weights(F, 0)``
    for F = ``num_features`` (1 … 1024), both on one fixed 0–1 colour scale; right: the mean
    absolute error of the weights against F (``random_feature_errors``: median and min–max over
    the seeds, weights of 1/K each for comparison) on fixed log–log axes, a dot at the error of
    the map shown. A Figure this function drew is updated in place; any other is cleared and
    redrawn."""
    num_features = _check_features(num_features)
    check_figure("fig", fig, optional=True)
    weights = _rf_weights(num_features, 0)  # (Q, K)
    error = (weights - _softmax()[2]).abs().mean().item()
    if fig is None:
        fig = Figure(figsize=FEATURES_FIGSIZE)
    fresh = fig.get_label() != FEATURES_LABEL
    if fresh:
        _layout_features(fig)
    exact_ax, estimate_ax = [ax for ax in fig.axes if ax.images]
    set_image_data(exact_ax.images[0], to_numpy(_softmax()[2]))
    set_image_data(estimate_ax.images[0], to_numpy(weights))
    estimate_ax.set_title(f"random features, F = {num_features}", fontsize="medium")
    ax = fig.axes[-1]
    (dot,) = [line for line in ax.lines if line.get_gid() == "current"]
    dot.set_data([num_features], [error])
    ax.set_title(f"F = {num_features}: mean |error| {error:.3f}", fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def features_view(num_features: int = 16) -> PageView:
    """Slider: the number of random features F, one of ``FEATURE_COUNTS`` → ``draw_features``."""
    if not (isinstance(num_features, numbers.Integral) and not isinstance(num_features, bool)
            and num_features in FEATURE_COUNTS):
        raise ValueError(f"num_features must be one of the slider's {FEATURE_COUNTS}, got "
                         f"{num_features!r}")
    fig = Figure(figsize=FEATURES_FIGSIZE)
    return interactive_figure(
        lambda num_features: draw_features(num_features, fig=fig),
        num_features=widgets.SelectionSlider(
            options=list(FEATURE_COUNTS), value=int(num_features),
            description="random features F", continuous_update=False,
            style={"description_width": "initial"}),
    )


# ---------------------------------------------------------------- 3. associative recall
PAIR_COUNTS = (4, 8, 12, 16, 24, 32, 48, 64)  # the slider's N: pairs written per sequence
STATE_SIZE = 16  # D of the notebook's RecallModel(64, 64, 16, kind): each state is D × D
KIND_COLORS = {"softmax": "C3", "linear": "C2", "positive": "C4", "additive": "C1", "decay": "C5",
               "delta": "C0", "delta_token": "C9"}  # additive and delta as RULE_COLORS
RECALL_LABEL = "linear.recall"
RECALL_FIGSIZE = (11.0, 4.4)
_ORDER = "(" + ", ".join(recall.KINDS) + ")"


def _check_num_pairs(num_pairs: object) -> int:
    if not (isinstance(num_pairs, numbers.Integral) and not isinstance(num_pairs, (bool, np.bool_))
            and num_pairs in PAIR_COUNTS):
        raise ValueError(f"num_pairs must be one of PAIR_COUNTS {PAIR_COUNTS}, got {num_pairs!r}")
    return int(num_pairs)


def _fractions(name: str, x: object, shape: tuple[int, ...], layout: str) -> np.ndarray:
    """``x`` as a float64 array; raise unless it is a real floating tensor of ``shape`` (a
    leading dim of any size ≥ 1 where ``shape`` starts with -1), every value in [0, 1]."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor {layout}, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating tensor of accuracies, got dtype {x.dtype}")
    if x.device.type == "meta":
        raise ValueError(f"{name} must be on a device that holds data, got {x.device.type}")
    if x.dim() != len(shape) or any(w not in (-1, g) for w, g in zip(shape, x.shape)) or (
            x.dim() and x.shape[0] == 0):
        raise ValueError(f"{name} must have shape {layout}, got {tuple(x.shape)}")
    out = x.detach().cpu().double().numpy().copy()
    if not (np.isfinite(out).all() and (out >= 0).all() and (out <= 1).all()):
        raise ValueError(f"{name} must hold accuracies in [0, 1], got values from "
                         f"{np.nanmin(out) if not np.isnan(out).all() else 'nan'} to "
                         f"{np.nanmax(out) if not np.isnan(out).all() else 'nan'}"
                         f"{' and NaN' if np.isnan(out).any() else ''}")
    return out


def _check_kinds(name: str, data: object) -> tuple[str, ...]:
    """The kinds ``data`` is keyed by, in the order of recall.KINDS: a non-empty subset."""
    if not isinstance(data, dict):
        raise ValueError(f"{name} must be a dict keyed by kinds of recall.KINDS {_ORDER}, got "
                         f"{type(data).__name__}")
    if not data or not all(isinstance(k, str) and k in recall.KINDS for k in data):
        raise ValueError(f"{name} must be keyed by one or more kinds of recall.KINDS {_ORDER}, "
                         f"got {sorted(map(repr, data))}")
    return tuple(k for k in recall.KINDS if k in data)


def _check_recall(accuracy: object, by_position: object
                  ) -> tuple[dict[str, np.ndarray], dict[str, list[np.ndarray]]]:
    """Both data sets as float64 arrays (fresh copies), keyed by the same kinds (in the order of
    recall.KINDS): accuracy[kind] (seeds, len(PAIR_COUNTS)), by_position[kind][i]
    (PAIR_COUNTS[i],)."""
    kinds = _check_kinds("accuracy", accuracy)
    if _check_kinds("by_position", by_position) != kinds:
        raise ValueError(f"by_position must have the kinds of accuracy {list(kinds)}, got "
                         f"{sorted(map(repr, by_position))}")
    P = len(PAIR_COUNTS)
    acc = {kind: _fractions(f"accuracy[{kind!r}]", accuracy[kind], (-1, P),
                            f"(seeds, len(PAIR_COUNTS)) = (seeds, {P})")
           for kind in kinds}
    pos = {}
    for kind in kinds:
        curves = by_position[kind]
        if not isinstance(curves, (list, tuple)) or len(curves) != P:
            got = f"length {len(curves)}" if isinstance(curves, (list, tuple)) else \
                type(curves).__name__
            raise ValueError(f"by_position[{kind!r}] must be a list of {P} tensors, one (N,) per "
                             f"N of PAIR_COUNTS {PAIR_COUNTS}, got {got}")
        pos[kind] = [_fractions(f"by_position[{kind!r}][{i}]", c, (n,), f"(N,) = ({n},)")
                     for i, (n, c) in enumerate(zip(PAIR_COUNTS, curves))]
    return acc, pos


def _positions(n: int) -> np.ndarray:
    """Where the n pairs sit on the right panel's x axis: (j + ½) / n for write j = 0 … n − 1."""
    return (np.arange(n) + 0.5) / n


def _band_vertices(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.concatenate([np.stack([x, low], 1), np.stack([x[::-1], high[::-1]], 1)])


def _layout_recall(fig: Figure, kinds: tuple[str, ...]) -> None:
    start_figure(fig, RECALL_LABEL)
    fig._recall_kinds = kinds  # what the lines were drawn for: other kinds lay the figure out anew
    left, right = fig.subplots(1, 2)
    N = np.array(PAIR_COUNTS, dtype=float)
    for kind in kinds:
        color = KIND_COLORS[kind]
        left.fill_between(N, np.zeros_like(N), np.zeros_like(N), color=color, alpha=0.2,
                          linewidth=0, gid=f"band {kind}")
        left.plot(N, np.zeros_like(N), color=color, linewidth=2, marker=".", label=kind,
                  gid=f"mean {kind}")
    for kind in kinds:
        left.plot([], [], "o", color=KIND_COLORS[kind], markersize=7, markeredgecolor="white",
                  gid=f"current {kind}", zorder=4)
    left.axvline(STATE_SIZE, color="0.3", linestyle=":", linewidth=1.5,
                 label=f"state size D = {STATE_SIZE}", gid="state size")
    left.axvline(PAIR_COUNTS[0], color="0.6", linewidth=1, zorder=0, gid="shown")
    left.set_xscale("log", base=2)
    left.set_xlim(N[0] / 1.2, N[-1] * 1.2)
    left.set_ylim(0.0, 1.02)
    left.set_xticks(N, [str(n) for n in PAIR_COUNTS])
    left.xaxis.set_minor_locator(NullLocator())
    left.set_xlabel("key–value pairs written N")
    left.set_ylabel("accuracy (mean, band: min–max over seeds)")
    left.set_title("recall against the number of pairs", fontsize="medium")
    left.legend(loc="lower left", fontsize="x-small")
    for kind in kinds:
        right.plot([], [], color=KIND_COLORS[kind], linewidth=1.5, marker=".", markersize=4,
                   label=kind, gid=f"position {kind}")
    right.set_xlim(0.0, 1.0)
    right.set_ylim(0.0, 1.02)
    right.set_xticks([0.0, 0.25, 0.5, 0.75, 1.0], ["0\noldest", "0.25", "0.5", "0.75", "1\nnewest"])
    right.set_xlabel("position of the pair in write order, (j + ½) / N")
    right.set_ylabel("accuracy (mean over seeds)")
    right.set_title("placeholder", fontsize="medium")
    right.legend(loc="lower right", fontsize="x-small")
    fig.suptitle("placeholder", fontsize="medium")


def _draw_recall(num_pairs: int, acc: dict[str, np.ndarray], pos: dict[str, list[np.ndarray]],
                 fig: Figure | None) -> Figure:
    """``draw_recall`` on checked data (``_check_recall``'s)."""
    if fig is None:
        fig = Figure(figsize=RECALL_FIGSIZE)
    kinds = tuple(acc)
    fresh = fig.get_label() != RECALL_LABEL or getattr(fig, "_recall_kinds", None) != kinds
    if fresh:
        _layout_recall(fig, kinds)
    left, right = fig.axes[:2]
    lines = {line.get_gid(): line for ax in (left, right) for line in ax.lines}
    bands = {c.get_gid(): c for c in left.collections}
    N = np.array(PAIR_COUNTS, dtype=float)
    i = PAIR_COUNTS.index(num_pairs)
    means = {}
    for kind in kinds:
        a = acc[kind]  # (seeds, P)
        mean = a.mean(axis=0)  # (P,)
        means[kind] = mean[i]
        lines[f"mean {kind}"].set_ydata(mean)
        bands[f"band {kind}"].set_verts([_band_vertices(N, a.min(axis=0), a.max(axis=0))])
        lines[f"current {kind}"].set_data([num_pairs], [mean[i]])
        lines[f"position {kind}"].set_data(_positions(num_pairs), pos[kind][i])
    lines["shown"].set_xdata([num_pairs, num_pairs])
    right.set_title(f"which pairs are recalled, N = {num_pairs}", fontsize="medium")
    fig.suptitle(f"N = {num_pairs}, D = {STATE_SIZE}, mean accuracy: "
                 + ", ".join(f"{kind} {means[kind]:.2f}" for kind in kinds),
                 fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def draw_recall(num_pairs: int, accuracy: dict, by_position: dict, *,
                fig: Figure | None = None) -> Figure:
    """Left: the accuracy of each kind given (some of ``recall.KINDS``) against the number of pairs N
    (``PAIR_COUNTS``, log-2 axis): the mean over seeds as a line, their min–max as a band, a dot
    at N = ``num_pairs`` (one of ``PAIR_COUNTS``) and a grey line there, a dotted line at the
    state size D = 16; right: the accuracy by write position at that N, the pair written j-th
    (0 the oldest) at x = (j + ½) / N, so the axis is 0–1 for every N. Both y-axes are 0–1.02,
    fixed. One colour per kind (``KIND_COLORS``). The title gives each kind's mean accuracy at N.

    ``accuracy``: {kind: (seeds, len(PAIR_COUNTS)) floating tensor}, column i the accuracy at
    PAIR_COUNTS[i] of each seed's model; ``by_position``: {kind: a list of len(PAIR_COUNTS)
    tensors, the i-th (PAIR_COUNTS[i],)}, the accuracy of each position (mean over seeds).
    Keyed by the same one or more kinds of ``recall.KINDS`` (drawn in that order), values in
    [0, 1]. A Figure this function drew for the same kinds is updated in place; any other is
    cleared and redrawn."""
    num_pairs = _check_num_pairs(num_pairs)
    acc, pos = _check_recall(accuracy, by_position)
    check_figure("fig", fig, optional=True)
    return _draw_recall(num_pairs, acc, pos, fig)


def recall_view(accuracy: dict, by_position: dict, num_pairs: int = 16) -> PageView:
    """Slider: the number of pairs N, one of ``PAIR_COUNTS`` → ``draw_recall`` of ``accuracy``
    and ``by_position`` (checked, and copied, once here)."""
    num_pairs = _check_num_pairs(num_pairs)
    acc, pos = _check_recall(accuracy, by_position)
    fig = Figure(figsize=RECALL_FIGSIZE)
    return interactive_figure(
        lambda num_pairs: _draw_recall(num_pairs, acc, pos, fig),
        num_pairs=widgets.SelectionSlider(
            options=list(PAIR_COUNTS), value=num_pairs, description="pairs written N",
            continuous_update=False, style={"description_width": "initial"}),
    )


DEMO_KINDS = ("softmax", "linear", "positive", "additive", "decay", "delta")  # notebook 12's view


@lru_cache(maxsize=1)
def _demo_recall() -> tuple[dict[str, torch.Tensor], dict[str, list[torch.Tensor]]]:
    """The recall view's data for the demo: each kind of ``DEMO_KINDS`` trained once as notebook
    12 trains its seed 0 (initial weights from seed 0, 200 steps), a few seconds on a CPU. The
    global random state is left as it was."""
    accuracy, by_position = {}, {}
    for kind in DEMO_KINDS:
        with torch.random.fork_rng(devices=[]):  # seeded weights, the caller's generator untouched
            torch.manual_seed(0)
            model = recall.RecallModel(64, 64, STATE_SIZE, kind)
        recall.train(model, steps=200, seed=0)
        accuracy[kind] = torch.tensor([[recall.accuracy(model, n) for n in PAIR_COUNTS]],
                                      dtype=torch.float64)  # (1, P)
        by_position[kind] = [recall.accuracy_by_position(model, n) for n in PAIR_COUNTS]
    return accuracy, by_position


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 12 shows them (the recall view with one seed per
    kind, trained on first use: a few seconds)."""
    return {"states": states_view(), "features": features_view(),
            "recall": recall_view(*_demo_recall())}
