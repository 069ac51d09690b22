"""Views for notebook 10: rotary position embedding (旋转位置编码, RoPE).

Legend: T positions, D feature size of a query/key (even), D/2 rotation pairs, s a shift added
to every position, θ_i = base^(−2i/D) the frequency of pair i, 2π/θ_i its wavelength.

``draw_shift`` scores the same T tokens placed at positions s … s+T−1 twice: with the positions
added to the inputs (X + P, notebook 07) and with RoPE; moving s changes only the first.
``draw_frequencies`` shows the angle p·θ_i of every pair at every position (wrapped to one turn)
and each pair's wavelength, for a chosen ``base``. Both redraw in place into a Figure they drew.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ..checks import check_positive_int, check_real
from ..plotting import show_heatmaps, to_numpy
from ..rotary import apply_rotary, rotary_angles
from ._common import (
    check_figure, check_int_in, freeze_layout, interactive_figure, set_image_data, start_figure,
)
from .page import PageView

__all__ = [
    "shift_scores", "draw_shift", "shift_view", "wrapped_angles", "wavelengths",
    "draw_frequencies", "frequency_view", "demo_views",
]

SHIFT_LABEL = "rotary.shift"  # Figure labels: tell a draw function a figure is its own
FREQUENCY_LABEL = "rotary.frequencies"
MAX_SHIFT = 200  # the shift slider's range, 0 … MAX_SHIFT; the colour scale covers all of it
SHIFT_STEP = 5  # the shift slider's step: 41 states to record for the page, not 201
METHODS = ("X + P", "RoPE")
SHIFT_FIGSIZE = (7.0, 6.0)
FREQUENCY_FIGSIZE = (9.0, 4.0)
CURVE_POINTS = 1024  # positions on the fine grid of the angle curves
LARGEST_POSITION = 10**9  # past any context length; float64 angles p·θ_i stay within 1e-6 rad
BASE_RANGE = (10.0, 1e6)  # the base slider's range


def _check_size(size: object) -> int:
    """The feature size D: an even int >= 2 (pairs of features rotate)."""
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 2 or size % 2:
        raise ValueError(f"size must be an even int >= 2 (pairs of features), got {size!r}")
    return int(size)


def _check_base(base: object) -> float:
    """θ_i = base^(−2i/D) needs a finite base > 1 (as ``apply_rotary``)."""
    return check_real("base", base, above=1.0)


# ---------------------------------------------------------------- scores under a shift
@lru_cache(maxsize=8)
def _tokens_and_projections(num_positions: int, size: int) -> tuple[torch.Tensor, ...]:
    """Fixed random tokens X (T, D) and projections W_q, W_k (D, D), float64, seed 0."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(num_positions, size, generator=g, dtype=torch.float64)  # (T, D)
    W_q = torch.randn(size, size, generator=g, dtype=torch.float64) / math.sqrt(size)
    W_k = torch.randn(size, size, generator=g, dtype=torch.float64) / math.sqrt(size)
    return X, W_q, W_k


def _sinusoid_rows(first: int, count: int, size: int) -> torch.Tensor:
    """Rows first … first+count−1 of ``sinusoidal_table(·, size, dtype=torch.float64)`` (count,
    D) computed as it does (the same operations, so the same numbers), for these rows alone."""
    i = torch.arange(first, first + count, dtype=torch.float64)[:, None]  # (T, 1)
    two_j = torch.arange(0, size, 2, dtype=torch.float64)  # (D/2,)
    angles = i / torch.pow(10000.0, two_j / size)  # (T, D/2)
    P = torch.empty(count, size, dtype=torch.float64)
    P[:, 0::2] = torch.sin(angles)
    P[:, 1::2] = torch.cos(angles[:, : size // 2])
    return P  # (T, D)


def shift_scores(shift: int, *, num_positions: int = 12, size: int = 16) -> torch.Tensor:
    """Scores (2, T, T), float64, of fixed random tokens X at positions s … s+T−1 (s = shift):
    [0] with the sinusoidal table added, ((X + P_s) W_q)((X + P_s) W_k)ᵀ / √D;
    [1] with RoPE, (R_s X W_q)(R_s X W_k)ᵀ / √D (``apply_rotary``, half-split layout).
    Rows are queries (position m), columns keys (position n). Memory: (T, D) and (T, T)
    tensors whatever the shift; the last position s+T−1 must be at most 10⁹ (beyond, float64
    angles p·θ_i lose precision and RoPE's scores would drift with the shift)."""
    num_positions = check_positive_int("num_positions", num_positions)
    shift = check_int_in("shift", shift, 0, LARGEST_POSITION - num_positions + 1,
                         "(the last position s+T−1 at most 10**9)")
    size = _check_size(size)
    X, W_q, W_k = _tokens_and_projections(num_positions, size)
    P = _sinusoid_rows(shift, num_positions, size)  # (T, D)
    added = ((X + P) @ W_q) @ ((X + P) @ W_k).T / math.sqrt(size)  # (T, T)
    positions = torch.arange(shift, shift + num_positions)
    q, k = apply_rotary(X @ W_q, positions), apply_rotary(X @ W_k, positions)  # (T, D) each
    rotated = q @ k.T / math.sqrt(size)  # (T, T)
    return torch.stack([added, rotated])  # (2, T, T)


@lru_cache(maxsize=8)
def _score_limit(num_positions: int, size: int) -> float:
    """One colour scale for every shift 0 … MAX_SHIFT: the largest |score| or |change from
    shift 0| met, rounded up."""
    first = shift_scores(0, num_positions=num_positions, size=size)
    largest = 0.0
    for s in range(MAX_SHIFT + 1):
        scores = shift_scores(s, num_positions=num_positions, size=size)
        largest = max(largest, scores.abs().max().item(), (scores - first).abs().max().item())
    return float(math.ceil(largest))


def _is_shift_figure(fig: Figure, num_positions: int) -> bool:
    maps = [ax for ax in fig.axes if ax.images]
    return (fig.get_label() == SHIFT_LABEL and len(maps) == 4
            and maps[0].images[0].get_array().shape == (num_positions, num_positions))


def draw_shift(
    shift: int = 0, *, num_positions: int = 12, size: int = 16, fig: Figure | None = None,
) -> Figure:
    """Top row: the scores of ``shift_scores`` for X + P and RoPE; bottom row: how much each
    changed from shift 0 (the map at shift s minus the map at shift 0). One fixed colour scale
    (±the largest |score| or |change| over shifts 0 … MAX_SHIFT) for all four maps and every
    shift; the title says at which positions the tokens sit, and labels beside the outer maps
    name the first and last position of the rows and columns. A Figure this function drew with
    the same T is updated in place; any other is cleared and redrawn."""
    check_figure("fig", fig, optional=True)
    scores = shift_scores(shift, num_positions=num_positions, size=size)  # (2, T, T)
    change = scores - shift_scores(0, num_positions=num_positions, size=size)  # (2, T, T)
    maps = torch.stack([scores, change])  # (2, 2, T, T): rows scores / change, columns methods
    largest = change.abs().amax(dim=(-2, -1))  # (2,)
    titles = [f"{m}: scores" for m in METHODS] + [
        f"{m}: change (max {c:.2f})" for m, c in zip(METHODS, largest.tolist())]
    if fig is None:
        fig = Figure(figsize=SHIFT_FIGSIZE)
    fresh = not _is_shift_figure(fig, num_positions)
    if fresh:
        limit = _score_limit(num_positions, size)
        fig.clear()
        fig.set_layout_engine("constrained")
        show_heatmaps(maps, xlabel="key position n", ylabel="query position m", titles=titles,
                      cmap="RdBu_r", vmin=-limit, vmax=limit, fig=fig)
        fig.set_label(SHIFT_LABEL)
        for ax in fig.axes:  # few ticks: each tick costs as much to draw as a map
            if ax.images:
                ax.set_xticks([])
                ax.set_yticks([])
            else:  # the colorbar
                ax.set_yticks([-limit, 0.0, limit])
        _add_position_labels([ax for ax in fig.axes if ax.images], num_positions,
                             max(shift, MAX_SHIFT))
    axes = [ax for ax in fig.axes if ax.images]  # row by row: (scores, scores, change, change)
    for ax in axes:  # the positions s + i beside the outer maps' first and last rows and columns
        for label in ax.texts:
            label.set_text(str(shift + int(label.get_gid())))
    data = to_numpy(maps).reshape(4, num_positions, num_positions)
    for ax, values, title in zip(axes, data, titles):
        set_image_data(ax.images[0], values)
        ax.set_title(title, fontsize="medium")
    fig.suptitle(f"the same {num_positions} tokens at positions m, n = {shift} … "
                 f"{shift + num_positions - 1} (shift s = {shift})", fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def _add_position_labels(axes: list, num_positions: int, largest_shift: int) -> None:
    """Tick labels as plain texts (a text costs far less to draw than a tick, and a view draws
    every state): under the first and last column of the bottom maps, each flush with its
    map's outer edge (clear of the next map's labels), and beside the first and last row of
    the left maps. Each text's gid is its index i (``draw_shift`` writes s + i into it); the
    layout makes room for the widest position, that of ``largest_shift``."""
    widest = str(largest_shift + num_positions - 1)
    for ax in axes[2:]:  # the bottom row: key positions
        ax.set_xlabel(ax.get_xlabel(), labelpad=14)
        for i, x, side in ((0, -0.5, "left"), (num_positions - 1, num_positions - 0.5, "right")):
            ax.text(x, -0.02, widest, gid=str(i), transform=ax.get_xaxis_transform(), ha=side,
                    va="top", fontsize="small")
    for ax in axes[::2]:  # the left column: query positions
        ax.set_ylabel(ax.get_ylabel(), labelpad=6 + 6 * len(widest))  # points: about a digit each
        for i in (0, num_positions - 1):
            ax.text(-0.02, i, widest, gid=str(i), transform=ax.get_yaxis_transform(), ha="right",
                    va="center", fontsize="small")


def shift_view(shift: int = 0, *, num_positions: int = 12, size: int = 16) -> PageView:
    """Slider: the shift s added to every position, 0 … MAX_SHIFT in steps of SHIFT_STEP
    (every shift changes the X + P maps and none the RoPE ones: 41 states show that as well as
    201, and are recorded for the page five times faster) → ``draw_shift``."""
    check_int_in("shift", shift, 0, MAX_SHIFT, "(the slider's range)")
    if shift % SHIFT_STEP:
        raise ValueError(f"shift must be a multiple of {SHIFT_STEP} (the slider's step), "
                         f"got {shift}")
    check_positive_int("num_positions", num_positions)
    _check_size(size)
    fig = Figure(figsize=SHIFT_FIGSIZE)

    def draw(shift: int) -> Figure:
        return draw_shift(shift, num_positions=num_positions, size=size, fig=fig)

    return interactive_figure(
        draw,
        shift=widgets.IntSlider(value=shift, min=0, max=MAX_SHIFT, step=SHIFT_STEP,
                                description="position shift s", continuous_update=False,
                                style={"description_width": "initial"}),
    )


# ---------------------------------------------------------------- the frequencies
def wrapped_angles(base: float, positions: torch.Tensor, *, size: int = 8) -> torch.Tensor:
    """The angle p·θ_i of pair i at each position p of ``positions`` (T,), wrapped to [0, 2π):
    (T, D/2), float64. ``positions`` (integer or floating) may be fractional (to draw smooth
    curves)."""
    base = _check_base(base)
    size = _check_size(size)
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1:
        got = f"shape {tuple(positions.shape)}" if isinstance(positions, torch.Tensor) \
            else type(positions).__name__
        raise ValueError(f"positions must be a 1-D tensor (T,), got {got}")
    if positions.dtype == torch.bool or positions.is_complex():
        raise ValueError(f"positions must hold real numbers, got dtype {positions.dtype}")
    if positions.device.type == "meta":
        raise ValueError("positions must hold numbers (a tensor on a real device), got a 'meta' tensor")
    return torch.remainder(rotary_angles(positions, size, base=base), 2 * math.pi)


def wavelengths(base: float, *, size: int = 8) -> torch.Tensor:
    """Positions per full turn of each pair, 2π/θ_i = 2π · base^(2i/D): (D/2,), float64."""
    base = _check_base(base)
    size = _check_size(size)
    i = torch.arange(size // 2, dtype=torch.float64)
    return 2 * math.pi * torch.pow(torch.tensor(float(base), dtype=torch.float64), 2 * i / size)


def _curves(base: float, size: int, num_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """x (P,) and y (P, D/2) of the wrapped angles on a fine grid of positions, NaN where a pair
    wraps from 2π back to 0 (so the curve breaks there instead of drawing a vertical line)."""
    x = torch.linspace(0, num_positions - 1, CURVE_POINTS, dtype=torch.float64)  # (P,)
    y = wrapped_angles(base, x, size=size)  # (P, D/2)
    wraps = torch.zeros_like(y, dtype=torch.bool)
    wraps[1:] = y[1:] < y[:-1]
    return to_numpy(x), to_numpy(torch.where(wraps, torch.nan, y))


def _is_frequency_figure(fig: Figure, size: int) -> bool:
    return (fig.get_label() == FREQUENCY_LABEL and len(fig.axes) == 2
            and len(fig.axes[0].lines) == size // 2)


def _layout_frequencies(fig: Figure, size: int, num_positions: int, train_length: int) -> None:
    start_figure(fig, FREQUENCY_LABEL)
    ax_angles, ax_waves = fig.subplots(1, 2, width_ratios=[1.4, 1.0])
    pairs = np.arange(size // 2)
    colors = [f"C{i % 10}" for i in pairs]
    for i in pairs:
        ax_angles.plot([], [], color=colors[i], linewidth=1.5, label=f"pair {i}")
    ax_angles.axvspan(0, train_length - 1, color="0.9", zorder=0)
    # the label in the band's own headroom above 2π, where no curve goes (and no legend: it
    # sits below the axes, clear of every curve)
    ax_angles.text(train_length / 2, 2 * math.pi * 1.02, "training", ha="center", va="bottom",
                   fontsize="small")
    ax_angles.set_xlim(0, num_positions - 1)
    ax_angles.set_ylim(0, 2 * math.pi * 1.12)
    ax_angles.set_yticks([0, math.pi, 2 * math.pi], ["0", "π", "2π"])
    ax_angles.set_xlabel("position p")
    ax_angles.set_ylabel("angle p·θ_i mod 2π")
    ax_angles.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(pairs),
                     fontsize="small", handlelength=1.2, columnspacing=1.0, frameon=False)
    ax_waves.scatter(pairs, np.ones(len(pairs)), c=colors, s=40, zorder=3)
    for length, text, style, side in ((train_length, "training\nlength", "--", "top"),
                                      (num_positions, "longest\ntest length", ":", "bottom")):
        ax_waves.axhline(length, color="black", linestyle=style, linewidth=1)
        # the label right of the axes, at its line (x in axes units, y in data units): no
        # dot is ever drawn there, whatever the base; cheaper to draw than a legend
        ax_waves.text(1.03, length, f"{text} {length}", transform=ax_waves.get_yaxis_transform(),
                      ha="left", va=side, fontsize="small")  # apart: one below, one above
    ax_waves.set_yscale("log")
    ax_waves.set_ylim(1.0, 1e7)
    ax_waves.set_yticks([1e0, 1e2, 1e4, 1e6], ["1", "100", "10⁴", "10⁶"])
    ax_waves.minorticks_off()  # every tick costs drawing time; four say enough
    ax_waves.set_xticks(pairs)
    ax_waves.set_xlim(-0.5, len(pairs) - 0.5)
    ax_waves.set_xlabel("pair i")
    ax_waves.set_ylabel("wavelength 2π/θ_i (positions)")


def _check_frequency_args(base: object, size: object, num_positions: object,
                          train_length: object) -> tuple[float, int, int, int]:
    base, size = _check_base(base), _check_size(size)
    num_positions = check_int_in("num_positions", num_positions, 2)
    train_length = check_int_in("train_length", train_length, 1, num_positions,
                                "(at most num_positions)")
    return base, size, num_positions, train_length


def draw_frequencies(
    base: float = 10000.0, *, size: int = 8, num_positions: int = 128, train_length: int = 16,
    fig: Figure | None = None,
) -> Figure:
    """Left: the angle p·θ_i of every pair against the position p, wrapped to [0, 2π), the
    training positions shaded; right: each pair's wavelength 2π/θ_i on a fixed log scale, beside
    the training length and the longest test length. A Figure this function drew with the same
    ``size`` is updated in place; any other is cleared and redrawn. ``base``: a finite number
    > 1; ``train_length``: 1 … ``num_positions`` (the positions drawn, at least 2)."""
    base, size, num_positions, train_length = _check_frequency_args(
        base, size, num_positions, train_length)
    check_figure("fig", fig, optional=True)
    x, y = _curves(base, size, num_positions)
    waves = to_numpy(wavelengths(base, size=size))  # (D/2,)
    if fig is None:
        fig = Figure(figsize=FREQUENCY_FIGSIZE)
    fresh = not _is_frequency_figure(fig, size)
    if fresh:
        _layout_frequencies(fig, size, num_positions, train_length)
    ax_angles, ax_waves = fig.axes
    for line, values in zip(ax_angles.lines, y.T):
        line.set_data(x, values)
    ax_waves.collections[0].set_offsets(np.column_stack([np.arange(size // 2), waves]))
    wrap = int((waves < train_length).sum())
    ax_angles.set_title(f"base = {base:,.0f}: θ_i = base^(−2i/{size})", fontsize="medium")
    ax_waves.set_title(f"{wrap} of {size // 2} pairs turn fully in {train_length} positions",
                       fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def frequency_view(
    base: float = 10000.0, *, size: int = 8, num_positions: int = 128, train_length: int = 16,
) -> PageView:
    """Slider: the ``base`` of θ_i = base^(−2i/D), from 10 to 10⁶ → ``draw_frequencies``."""
    base = _check_frequency_args(base, size, num_positions, train_length)[0]
    if not BASE_RANGE[0] <= base <= BASE_RANGE[1]:
        raise ValueError(f"base must be in [10, 1e6] (the slider's range), got {base!r}")
    fig = Figure(figsize=FREQUENCY_FIGSIZE)

    def draw(base: float) -> Figure:
        return draw_frequencies(base, size=size, num_positions=num_positions,
                                train_length=train_length, fig=fig)

    return interactive_figure(
        draw, 
        base=widgets.FloatLogSlider(value=base, base=10, min=1, max=6, step=0.25,
                                    description="frequency base", readout_format=",.0f",
                                    continuous_update=False,
                                    style={"description_width": "initial"}),
    )


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 10 shows them."""
    return {"shift": shift_view(), "frequencies": frequency_view()}
