"""Views for notebook 11, the KV cache economy: what a cache policy does to a model streamed
past its training length (attention sinks, 注意力汇点), and what multi-head latent attention
(MLA, 多头潜在注意力) caches against what it recalls.

Legend: T positions streamed (72 in the notebook), L the training length (48), R the recent
window a cache keeps, t a position, S seeds, P = len(LATENT_SIZES), d_c the latent size, d_r
the decoupled rotary key size, CE cross-entropy in nats.

``draw_streaming`` shows, for one R, each model's per-position CE under three cache policies
(dense: every key kept; window only: the last R; sinks + window: the first token and the last
R), smoothed by a running mean over ``SMOOTH`` positions, the training length marked.
``draw_latent`` shows MLA's accuracy at each d_c beside MQA's, GQA's and MHA's, against the
numbers each caches per token and layer. Both take trained results as plain data (checked, and in the views copied,
once) and redraw in place into a Figure they drew.
"""

from __future__ import annotations

import math
from functools import lru_cache
from numbers import Integral

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullLocator

from ._common import check_figure, interactive_figure, start_figure
from .page import PageView

__all__ = ["MODELS", "POLICIES", "RECENT", "SMOOTH", "LATENT_SIZES", "draw_streaming",
           "streaming_view", "draw_latent", "latent_view", "demo_views"]

# ---------------------------------------------------------------- 1. streaming past L
MODELS = ("softmax", "sink logit")  # the two panels
POLICIES = ("dense", "window", "sinks + window")  # the three curves in each
POLICY_NAMES = {"dense": "dense", "window": "window only", "sinks + window": "sinks + window"}
POLICY_LEGEND = {"dense": "dense (reference): every key kept",
                 "window": "window only: the last R keys",
                 "sinks + window": "sinks + window: the first token and the last R"}
POLICY_COLORS = {"dense": "0.35", "window": "C3", "sinks + window": "C0"}
POLICY_WIDTHS = {"dense": 0.9, "window": 2.0, "sinks + window": 2.0}  # dense: a thin reference
POLICY_STYLES = {"dense": ":", "window": "-", "sinks + window": "-"}
FRAMED = ("window", "sinks + window")  # the curves the y-range is made for (R moves them)
RECENT = (2, 4, 8, 16)  # the slider's R
SMOOTH = 8  # the running mean's width: positions t − 7 … t
STREAMING_LABEL = "kv_economy.streaming"
STREAMING_FIGSIZE = (11.0, 5.0)


def _one_of(name: str, value: object, choices: tuple[int, ...], what: str) -> int:
    if not (isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))
            and value in choices):
        raise ValueError(f"{name} must be one of {what} {choices}, got {value!r}")
    return int(value)


def _exact_keys(name: str, data: object, keys: tuple, what: str) -> dict:
    if not isinstance(data, dict):
        raise ValueError(f"{name} must be a dict keyed by {what} {keys}, got {type(data).__name__}")
    if set(data) != set(keys) or len(data) != len(keys):
        raise ValueError(f"{name} must have exactly the keys {what} {keys}, got "
                         f"{sorted(data, key=str)!r}")
    return data


def _floats(name: str, x: object, layout: str) -> np.ndarray:
    """``x`` as a fresh float64 array; raise unless it is a real floating tensor on a device
    that holds data."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor {layout}, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating tensor {layout}, got dtype {x.dtype}")
    if x.device.type == "meta":
        raise ValueError(f"{name} must be on a device that holds data, got {x.device.type}")
    return x.detach().cpu().double().numpy().copy()


def _check_losses(losses: object, train_length: object
                  ) -> tuple[dict[str, dict[str, dict[int, np.ndarray]]], int]:
    """The losses as float64 arrays (fresh copies) and the training length, checked: every
    curve (T,) with one T, CE ≥ 0 or NaN (a position without a target), a finite value past
    the training length."""
    _exact_keys("losses", losses, MODELS, "MODELS")
    out: dict[str, dict[str, dict[int, np.ndarray]]] = {}
    length = None
    for model in MODELS:
        by_policy = _exact_keys(f"losses[{model!r}]", losses[model], POLICIES, "POLICIES")
        out[model] = {}
        for policy in POLICIES:
            by_r = _exact_keys(f"losses[{model!r}][{policy!r}]", by_policy[policy], RECENT,
                               "RECENT")
            out[model][policy] = {}
            for r in RECENT:
                name = f"losses[{model!r}][{policy!r}][{r}]"
                x = _floats(name, by_r[r], "(T,) of cross-entropies per position")
                if x.ndim != 1 or x.shape[0] < 2 or length is not None and x.shape[0] != length:
                    want = ("(T,) with T >= 2" if length is None
                            else f"(T,) = ({length},) as the others")
                    raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")
                length = x.shape[0]
                bad = np.isinf(x) | (x < 0)
                if bad.any():
                    raise ValueError(f"{name} must hold cross-entropies >= 0 (NaN where a position "
                                     f"has no target), got {x[bad][0]} at position "
                                     f"{int(np.flatnonzero(bad)[0])}")
                out[model][policy][r] = x
    if not (isinstance(train_length, Integral)
            and not isinstance(train_length, (bool, np.bool_)) and 1 <= train_length < length):
        raise ValueError(f"train_length must be an int in [1, T − 1] = [1, {length - 1}] "
                         f"(T = {length} positions), got {train_length!r}")
    train_length = int(train_length)
    for model in MODELS:
        for policy in POLICIES:
            for r in RECENT:
                if np.isnan(out[model][policy][r][train_length:]).all():
                    raise ValueError(f"losses[{model!r}][{policy!r}][{r}] must have a value at "
                                     f"some position in train_length … T − 1 = {train_length} … "
                                     f"{length - 1}, got NaN at every one")
    return out, train_length


def _running_mean(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions t where the mean of x over t − SMOOTH + 1 … t (fewer at the start; NaN
    skipped) is defined, and that mean."""
    padded = np.concatenate([np.full(SMOOTH - 1, np.nan), x])
    windows = np.lib.stride_tricks.sliding_window_view(padded, SMOOTH)  # (T, SMOOTH)
    finite = np.isfinite(windows)
    count = finite.sum(axis=1)
    total = np.where(finite, windows, 0.0).sum(axis=1)
    t = np.flatnonzero(count > 0)
    return t.astype(np.float64), total[t] / count[t]


def _streaming_limits(curves: dict) -> tuple[float, float]:
    """One y-range for every R: 0 to a little above the highest smoothed window-only or
    sinks + window curve of any R (the dense curve, the same at every R, is a reference and
    may leave the panel at the top)."""
    top = max(_running_mean(x)[1].max() for by_policy in curves.values()
              for policy in FRAMED for x in by_policy[policy].values())
    return 0.0, float(math.ceil(max(top, 1e-3) * 1.1 * 10) / 10)


def _ticks(low: float, high: float, integer: bool = False) -> list[float]:
    """At most about six round ticks inside [low, high] (none outside: every tick is drawn)."""
    found = MaxNLocator(6, steps=[1, 2, 5, 10], integer=integer).tick_values(low, high)
    return [float(t) for t in found if low - 1e-9 <= t <= high + 1e-9]


def _streaming_texts(recent: int, curves: dict, train_length: int) -> str:
    length = len(curves[MODELS[0]][POLICIES[0]][recent])
    lines = [f"R = {recent}: mean cross-entropy over positions {train_length} … {length - 1}, "
             f"past the training length {train_length}"]
    for model in MODELS:
        tails = {p: curves[model][p][recent][train_length:] for p in POLICIES}
        means = ", ".join(f"{POLICY_NAMES[p]} {np.nanmean(tails[p]):.2f}" for p in POLICIES)
        lines.append(f"{model} — {means}")
    return "\n".join(lines)


def _layout_streaming(fig: Figure) -> None:
    """Two panels at fixed places (no layout engine), in fractions of ``STREAMING_FIGSIZE``."""
    start_figure(fig, STREAMING_LABEL, fixed_layout=True)
    width, height = STREAMING_FIGSIZE
    left, gap, right = 0.75, 0.75, 0.2
    bottom, top = 1.15, 1.0
    side = (width - left - gap - right) / 2
    for k, model in enumerate(MODELS):
        ax = fig.add_axes([(left + k * (side + gap)) / width, bottom / height, side / width,
                           (height - bottom - top) / height])
        for policy in POLICIES:
            ax.plot([], [], color=POLICY_COLORS[policy], linewidth=POLICY_WIDTHS[policy],
                    linestyle=POLICY_STYLES[policy], gid=f"{policy}",
                    zorder=1 if policy == "dense" else 2)
        ax.axvline(1.0, color="0.5", linestyle="--", linewidth=1.2, gid="train")
        ax.axvline(1.0, color="C3", linestyle=(0, (1, 2)), linewidth=1.4, gid="evicted")
        ax.set_xlabel("position t")
        if k == 0:
            ax.set_ylabel(f"cross-entropy (nats), running mean over {SMOOTH}")
        ax.set_title(model, fontsize="medium")
        ax.yaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_locator(NullLocator())
    handles = [Line2D([], [], color=POLICY_COLORS[p], linewidth=POLICY_WIDTHS[p],
                      linestyle=POLICY_STYLES[p], label=POLICY_LEGEND[p]) for p in POLICIES]
    handles.append(Line2D([], [], color="0.5", linestyle="--", linewidth=1.2,
                          label="training length"))
    handles.append(Line2D([], [], color="C3", linestyle=(0, (1, 2)), linewidth=1.4,
                          label="t = R: the window-only cache has evicted BOS"))
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=3,
               fontsize="x-small", frameon=False)
    fig.suptitle("placeholder\nplaceholder\nplaceholder", fontsize="medium", y=0.99, va="top")


def _draw_streaming(recent: int, curves: dict, train_length: int, limits: tuple[float, float],
                    fig: Figure | None) -> Figure:
    """``draw_streaming`` on checked data (``_check_losses``'s) and its y-range."""
    if fig is None:
        fig = Figure(figsize=STREAMING_FIGSIZE)
    if fig.get_label() != STREAMING_LABEL:
        _layout_streaming(fig)
    length = len(curves[MODELS[0]][POLICIES[0]][recent])
    for ax, model in zip(fig.axes, MODELS):
        lines = {line.get_gid(): line for line in ax.lines}
        for policy in POLICIES:
            lines[policy].set_data(*_running_mean(curves[model][policy][recent]))
        lines["train"].set_xdata([train_length, train_length])
        lines["evicted"].set_xdata([recent, recent])  # query t = R no longer sees position 0
        ax.set_xlim(0.0, float(length - 1))
        ax.set_ylim(*limits)
        ax.set_xticks(_ticks(0, length - 1, integer=True))
        ax.set_yticks(_ticks(*limits))
    fig.suptitle(_streaming_texts(recent, curves, train_length), fontsize="medium", y=0.99,
                 va="top")
    return fig


def draw_streaming(recent: int, losses: dict, train_length: int, *,
                   fig: Figure | None = None) -> Figure:
    """One panel per model of ``MODELS`` (softmax, and softmax with a sink logit), each with
    the cross-entropy per position t of the three cache policies of ``POLICIES`` for the recent
    window R = ``recent`` (one of ``RECENT``), as a running mean over positions t − 7 … t
    (fewer at the start, NaN skipped), the training length marked by a dashed line and t = R,
    where the window-only cache no longer holds the first token, by a dotted one. The dense
    curve, the same at every R, is drawn thin, as a reference. The axes are the same for every
    R: x 0 … T − 1, y from 0 to a little above the highest smoothed window-only or sinks +
    window curve of any R (the dense one may leave the panel at the top). The title gives each curve's mean over positions train_length … T − 1 (not
    smoothed).

    ``losses``: {model: {policy: {R: (T,) floating tensor}}}, keys exactly ``MODELS``,
    ``POLICIES`` and ``RECENT``, one T ≥ 2 for all, values ≥ 0 or NaN (a position without a
    target), each curve with a value past the training length; ``train_length``: an int in
    [1, T − 1]. A Figure this function drew is updated in place; any other is cleared and
    redrawn."""
    recent = _one_of("recent", recent, RECENT, "RECENT")
    curves, train_length = _check_losses(losses, train_length)
    check_figure("fig", fig, optional=True)
    return _draw_streaming(recent, curves, train_length, _streaming_limits(curves), fig)


def streaming_view(losses: dict, train_length: int, recent: int = 4) -> PageView:
    """Slider: the recent window R, one of ``RECENT`` → ``draw_streaming`` of ``losses`` and
    ``train_length`` (checked, and copied, once here)."""
    recent = _one_of("recent", recent, RECENT, "RECENT")
    curves, train_length = _check_losses(losses, train_length)
    limits = _streaming_limits(curves)
    fig = Figure(figsize=STREAMING_FIGSIZE)
    return interactive_figure(
        lambda recent: _draw_streaming(recent, curves, train_length, limits, fig),
        recent=widgets.SelectionSlider(
            options=list(RECENT), value=recent, description="cache window R",
            continuous_update=False, style={"description_width": "initial"}),
    )


# ---------------------------------------------------------------- 2. multi-head latent attention
LATENT_SIZES = (4, 8, 12)  # the slider's d_c
ARCHITECTURES = ("mla", "mqa", "gqa", "mha")
SHARED = ("mqa", "gqa", "mha")  # one accuracy per seed and one cache size each
NAMES = {"mla": "MLA", "mqa": "MQA", "gqa": "GQA", "mha": "MHA"}
COLORS = {"mla": "C0", "mqa": "C1", "gqa": "C2", "mha": "0.3"}
MARKERS = {"mqa": "s", "gqa": "D", "mha": "^"}
SHOWN_COLOR = "C3"
LATENT_LABEL = "kv_economy.latent"
LATENT_FIGSIZE = (11.0, 4.8)


def _check_latent(accuracy: object, numbers_: object) -> tuple[dict, dict]:
    """accuracy["mla"] (S, P) and the others (S,) as fresh float64 arrays, in [0, 1];
    numbers["mla"] P ints ≥ 1 and the others an int ≥ 1 each."""
    P = len(LATENT_SIZES)
    _exact_keys("accuracy", accuracy, ARCHITECTURES, "the architectures")
    mla = _floats("accuracy['mla']", accuracy["mla"], f"(seeds, len(LATENT_SIZES)) = (S, {P})")
    if mla.ndim != 2 or mla.shape[1] != P or mla.shape[0] == 0:
        raise ValueError(f"accuracy['mla'] must have shape (seeds, len(LATENT_SIZES)) = (S, {P}) "
                         f"with S >= 1, got {tuple(mla.shape)}")
    acc = {"mla": mla}
    for arch in SHARED:
        a = _floats(f"accuracy['{arch}']", accuracy[arch], "(seeds,)")
        if a.shape != (mla.shape[0],):
            raise ValueError(f"accuracy['{arch}'] must have shape (seeds,) = ({mla.shape[0]},), as "
                             f"accuracy['mla'] has {mla.shape[0]} seeds, got {tuple(a.shape)}")
        acc[arch] = a
    for arch in ARCHITECTURES:
        a = acc[arch]
        if not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
            raise ValueError(f"accuracy['{arch}'] must hold accuracies in [0, 1], got "
                             f"{a[~(np.isfinite(a) & (a >= 0) & (a <= 1))][0]}")
    _exact_keys("numbers", numbers_, ARCHITECTURES, "the architectures")

    def count(name: str, v: object) -> int:
        if not (isinstance(v, Integral) and not isinstance(v, (bool, np.bool_)) and v >= 1):
            raise ValueError(f"{name} must be an int >= 1 (numbers cached per token and layer), "
                             f"got {v!r}")
        return int(v)

    cached = {arch: count(f"numbers['{arch}']", numbers_[arch]) for arch in SHARED}
    sizes = numbers_["mla"]
    if not isinstance(sizes, (tuple, list)) or len(sizes) != P:
        got = f"length {len(sizes)}" if isinstance(sizes, (tuple, list)) else type(sizes).__name__
        raise ValueError(f"numbers['mla'] must be a tuple of {P} ints, one per d_c of "
                         f"LATENT_SIZES {LATENT_SIZES}, got {got}")
    cached["mla"] = tuple(count(f"numbers['mla'][{i}]", v) for i, v in enumerate(sizes))
    return acc, cached


def _times(ratio: float) -> str:
    return f"{ratio:.1f}".removesuffix(".0") + "×"


def _spread(a: np.ndarray) -> str:
    return f"seeds {a.min():.2f}–{a.max():.2f}" if len(a) > 1 else "one seed"


def _latent_texts(latent_size: int, acc: dict, cached: dict) -> tuple[str, str]:
    """The suptitle (two lines) and the ratio written beside MLA's bar."""
    i = LATENT_SIZES.index(latent_size)
    a, n, full = acc["mla"][:, i], cached["mla"][i], cached["mha"]
    ratio = full / n
    less = f"{_times(ratio)} less" if ratio >= 1 else f"{_times(1 / ratio)} more"
    first = (f"MLA, d_c = {latent_size}: accuracy {a.mean():.2f} ({_spread(a)}), caching {n} "
             f"numbers a token and layer ({less} than MHA)")
    second = ", ".join(f"{NAMES[arch]} {acc[arch].mean():.2f} at {cached[arch]}"
                       for arch in SHARED)
    return f"{first}\nthe others (mean accuracy at numbers cached): {second}", less


def _layout_latent(fig: Figure, seeds: int, cached: dict) -> None:
    """Both panels at fixed places (no layout engine); with several seeds, one faint line per
    seed and a min–max bar on each other architecture's mean."""
    start_figure(fig, LATENT_LABEL, fixed_layout=True)
    width, height = LATENT_FIGSIZE
    bottom, top = 0.75, 0.95
    inner = (height - bottom - top) / height
    ax = fig.add_axes([0.75 / width, bottom / height, 5.2 / width, inner])
    x = np.array(cached["mla"], dtype=np.float64)
    every = sorted({*cached["mla"], *(cached[arch] for arch in SHARED)})
    lo, hi = every[0] / 1.4, every[-1] * 1.4
    if seeds > 1:
        for s in range(seeds):
            ax.plot(x, np.zeros_like(x), color=COLORS["mla"], alpha=0.3, linewidth=1, marker=".",
                    markersize=5, gid=f"seed {s}", label="MLA, each seed" if s == 0 else None)
    ax.plot(x, np.zeros_like(x), color=COLORS["mla"], linewidth=2.5, marker="o", markersize=5,
            label="MLA (d_c = " + ", ".join(map(str, LATENT_SIZES)) + ")"
            + (", mean over seeds" if seeds > 1 else ""), gid="mla mean")
    for arch in SHARED:
        if seeds > 1:
            ax.plot([cached[arch]] * 2, [0, 0], color=COLORS[arch], linewidth=1.5,
                    gid=f"{arch} range")
        ax.plot([cached[arch]], [0], MARKERS[arch], color=COLORS[arch], markersize=7,
                linestyle="none", gid=f"{arch} mean", zorder=5,
                label=NAMES[arch])
    ax.axvline(x[0], color=SHOWN_COLOR, linewidth=1, linestyle=":", zorder=0, gid="shown")
    ax.plot([], [], "o", markersize=12, markerfacecolor="none", markeredgecolor=SHOWN_COLOR,
            markeredgewidth=2, zorder=6, gid="current")  # a ring: a marker at the same place shows
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0.0, 1.02)
    ax.set_xticks(every, [str(v) for v in every])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("numbers cached per token and layer")
    ax.set_ylabel("accuracy")
    ax.set_title("accuracy against what the cache holds", fontsize="medium")
    ax.legend(loc="lower right", fontsize="x-small", title_fontsize="x-small",
              title="MQA, GQA, MHA: mean, bar min–max over seeds" if seeds > 1 else None)
    bars = fig.add_axes([7.0 / width, bottom / height, 3.7 / width, inner])
    rows = ("mha", "gqa", "mqa", "mla")
    bars.barh([3, 2, 1, 0], [0] * 4, height=0.6, color=[COLORS[a] for a in rows])
    for k in range(4):
        bars.text(0.0, 3 - k, "", va="center", ha="left", fontsize="small", gid=f"count {k}")
    bars.set_yticks([3, 2, 1, 0], [NAMES[a] for a in rows])
    bars.set_ylim(-0.6, 3.6)
    bars.xaxis.set_minor_locator(NullLocator())
    bars.set_xlabel("numbers cached per token and layer")
    bars.set_title("placeholder", fontsize="medium")
    fig.suptitle("placeholder", fontsize="medium", y=0.985, va="top")


def _draw_latent(latent_size: int, acc: dict, cached: dict, fig: Figure | None) -> Figure:
    """``draw_latent`` on checked data (``_check_latent``'s)."""
    mla = acc["mla"]
    seeds = mla.shape[0]
    if fig is None:
        fig = Figure(figsize=LATENT_FIGSIZE)
    if fig.get_label() != LATENT_LABEL or fig.__dict__.get("_latent_layout") != (seeds, cached):
        _layout_latent(fig, seeds, cached)
        fig._latent_layout = (seeds, cached)
    ax, bars = fig.axes
    i = LATENT_SIZES.index(latent_size)
    lines = {line.get_gid(): line for line in ax.lines}
    if seeds > 1:
        for s in range(seeds):
            lines[f"seed {s}"].set_ydata(mla[s])
    mean = mla.mean(axis=0)  # (P,)
    lines["mla mean"].set_ydata(mean)
    for arch in SHARED:
        lines[f"{arch} mean"].set_ydata([acc[arch].mean()])
        if seeds > 1:
            lines[f"{arch} range"].set_ydata([acc[arch].min(), acc[arch].max()])
    n = cached["mla"][i]
    lines["shown"].set_xdata([n, n])
    lines["current"].set_data([n], [mean[i]])
    title, less = _latent_texts(latent_size, acc, cached)
    values = (cached["mha"], cached["gqa"], cached["mqa"], n)
    top = max(cached["mha"], cached["gqa"], cached["mqa"], max(cached["mla"]))
    for bar, value in zip(bars.patches, values):
        bar.set_width(value)
    texts = {t.get_gid(): t for t in bars.texts}
    for k, value in enumerate(values):
        texts[f"count {k}"].set_text(f" {value}" + (f"  ({less})" if k == 3 else ""))
        texts[f"count {k}"].set_x(value)
    bars.set_xlim(0.0, top * 1.45)
    bars.set_xticks(_ticks(0, top * 1.45, integer=True))
    bars.set_title(f"MLA with d_c = {latent_size} caches {less} than MHA", fontsize="medium")
    fig.suptitle(title, fontsize="medium", y=0.985, va="top")
    return fig


def draw_latent(latent_size: int, accuracy: dict, numbers: dict, *,
                fig: Figure | None = None) -> Figure:
    """Left: accuracy against the numbers each architecture caches per token and layer (log-2
    axis): MLA at each d_c of ``LATENT_SIZES`` (mean over seeds, bold; each seed a faint line
    when there are several), MQA, GQA and MHA one marker each at their mean (with a min–max bar
    over seeds when there are several), MLA's d_c = ``latent_size`` marked; y fixed at
    0 … 1.02. Right: the numbers MHA, GQA, MQA and this MLA cache, as bars on an axis fixed for
    every d_c. The titles give this d_c's accuracy (mean, and the seeds' range), the others'
    means, and how many times less MLA caches than MHA.

    ``accuracy``: {"mla": (S, P) floating tensor, column i the accuracy at LATENT_SIZES[i] of
    each seed's model, "mqa", "gqa", "mha": (S,) each}, values in [0, 1]; ``numbers``:
    {"mla": a tuple of P ints (d_c + d_r for each d_c), "mqa", "gqa", "mha": an int each},
    each ≥ 1. A Figure this function drew is updated in place (rebuilt when the number of
    seeds or the numbers change); any other is cleared and redrawn."""
    latent_size = _one_of("latent_size", latent_size, LATENT_SIZES, "LATENT_SIZES")
    checked = _check_latent(accuracy, numbers)
    check_figure("fig", fig, optional=True)
    return _draw_latent(latent_size, *checked, fig)


def latent_view(accuracy: dict, numbers: dict, latent_size: int = 4) -> PageView:
    """Slider: the latent size d_c, one of ``LATENT_SIZES`` → ``draw_latent`` of ``accuracy``
    and ``numbers`` (checked, and copied, once here)."""
    latent_size = _one_of("latent_size", latent_size, LATENT_SIZES, "LATENT_SIZES")
    checked = _check_latent(accuracy, numbers)
    fig = Figure(figsize=LATENT_FIGSIZE)
    return interactive_figure(
        lambda latent_size: _draw_latent(latent_size, *checked, fig),
        latent_size=widgets.SelectionSlider(
            options=list(LATENT_SIZES), value=latent_size, description="latent size d_c",
            continuous_update=False, style={"description_width": "initial"}),
    )


# ---------------------------------------------------------------- the demo
@lru_cache(maxsize=1)
def _synthetic() -> tuple[dict, int, dict, dict]:
    """Small deterministic stand-ins for the trained results (seed 0), the shapes notebook 11
    uses: T = 72 positions, training length 48, 3 seeds. Not measurements."""
    g = torch.Generator().manual_seed(0)
    T, L = 72, 48
    t = torch.arange(T, dtype=torch.float64)
    losses: dict = {}
    for model in MODELS:
        losses[model] = {p: {} for p in POLICIES}
        for r in RECENT:
            noise = lambda: 0.15 * torch.randn(T, generator=g, dtype=torch.float64)  # noqa: E731
            base = 1.0 + 0.3 * torch.exp(-t / 4)  # (T,): the first tokens are harder
            past = (t >= L).double()
            if model == "softmax":
                dense = base + 0.25 * past * (t - L) / (T - L)  # drifts past the training length
                window = base + (t > r).double() * (0.6 - 0.02 * r)  # the sink evicted
            else:
                dense = base + 0.03 * past
                window = base + (t > r).double() * 0.02
            sinks = base + 0.01 * past
            for policy, curve in (("dense", dense), ("window", window), ("sinks + window", sinks)):
                x = (curve + noise()).clamp(min=0.05)
                x[-1] = torch.nan  # the last position has no target
                losses[model][policy][r] = x
    S, P = 3, len(LATENT_SIZES)
    mean = torch.tensor([0.85, 0.99, 1.0], dtype=torch.float64)
    mla = (mean + 0.04 * torch.randn(S, P, generator=g, dtype=torch.float64)).clamp(0, 1)
    accuracy = {"mla": mla}
    for arch, level in (("mqa", 0.87), ("gqa", 0.99), ("mha", 1.0)):
        accuracy[arch] = (level + 0.03 * torch.randn(S, generator=g, dtype=torch.float64)).clamp(0, 1)
    # d_c + d_r (d_r = 4); 2·G·d_h with 8 heads of d_h = 4: MQA G = 1, GQA G = 2, MHA G = 8
    numbers_ = {"mla": tuple(d + 4 for d in LATENT_SIZES), "mqa": 8, "gqa": 16, "mha": 64}
    return losses, L, accuracy, numbers_


def demo_views() -> dict[str, widgets.Widget]:
    """Both views of this module, on ``_synthetic`` data of the shapes notebook 11 passes (the
    notebook shows its trained models' numbers; training them here would take about 10 s, and
    what a view draws for its data is what the tests check)."""
    losses, train_length, accuracy, numbers_ = _synthetic()
    return {"streaming": streaming_view(losses, train_length),
            "latent": latent_view(accuracy, numbers_)}
