"""Views for notebook 07: the sinusoidal table of positional encoding (位置编码), its rotations.

Legend: T positions (rows of P), d the encoding size (``num_hiddens``, columns of P), j a column
pair (2j, 2j+1), ω_j = 1 / 10000^(2j/d) the frequency of pair j, δ an offset between positions.

``draw_encoding`` shows P as a heatmap beside a few of its columns as curves over positions;
``draw_rotation`` shows, on the unit circle, that the pair (P[i,2j], P[i,2j+1]) turned by the
fixed matrix M(δ) lands on the pair of row i+δ. Both redraw in place into a Figure they drew.
"""

from __future__ import annotations

import math
import numbers

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..checks import check_floating, check_positive_int, check_rank, check_real
from ..plotting import show_heatmaps, to_numpy
from ..positional import sinusoidal_table
from ._common import check_figure, check_int_in, freeze_layout, interactive_figure, start_figure
from .page import PageView

__all__ = [
    "frequencies", "rotation_matrix", "rotate_pairs",
    "draw_encoding", "encoding_view", "draw_rotation", "rotation_view", "demo_views",
]

XLABEL, YLABEL = "Column (encoding dimension)", "Row (position)"
ENCODING_LABEL = "positional.encoding"  # Figure labels: tell a draw function a figure is its own
ROTATION_LABEL = "positional.rotation"
COLORS = [colormaps["tab10"](k) for k in range(10)]


# ---------------------------------------------------------------- the maths, in float64
def frequencies(num_hiddens: int) -> torch.Tensor:
    """ω_j = 1 / 10000^(2j/d) for j = 0 … ⌈d/2⌉-1: (⌈d/2⌉,), float64."""
    num_hiddens = check_positive_int("num_hiddens", num_hiddens)
    two_j = torch.arange(0, num_hiddens, 2, dtype=torch.float64)
    return 1.0 / torch.pow(10000.0, two_j / num_hiddens)


def _turn(delta: object, omega: object) -> float:
    """δ·ω, after checking both are finite numbers and so is their product."""
    delta, omega = check_real("delta", delta), check_real("omega", omega)
    if not math.isfinite(delta * omega):
        raise ValueError(f"delta must make delta * omega finite (omega = {omega!r}), got {delta!r}")
    return delta * omega


def rotation_matrix(delta: int | float, omega: float) -> torch.Tensor:
    """M(δ) = [[cos δω, sin δω], [−sin δω, cos δω]] (2, 2), float64.

    For ω = ω_j it maps the pair (P[i,2j], P[i,2j+1]) of any row i to the pair of row i+δ.
    ``delta`` and ``omega``: finite numbers whose product is finite.
    """
    angle = _turn(delta, omega)
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)


def rotate_pairs(pairs: torch.Tensor, delta: int | float, omega: float) -> torch.Tensor:
    """Apply M(δ) to each row (x, y) of ``pairs`` (T, 2), floating → (T, 2) float64, rows
    (M(δ) [x, y]ᵀ)ᵀ. ``pairs`` is not modified."""
    check_rank("pairs", pairs, 2, "(T, 2)")
    check_floating("pairs", pairs)
    if pairs.shape[-1] != 2 or pairs.device.type == "meta":
        raise ValueError(f"pairs must be a (T, 2) tensor of numbers, got shape {tuple(pairs.shape)} "
                         f"on {pairs.device}")
    M = rotation_matrix(delta, omega)  # (2, 2), float64 on the CPU
    return pairs.to(torch.float64) @ M.to(pairs.device).T  # (T, 2)


# ---------------------------------------------------------------- the table and its columns
def _columns(num_hiddens: int, first_col: int, num_cols: int) -> range:
    """``num_cols`` adjacent columns starting at ``first_col``, moved left to fit in d."""
    count = min(num_cols, num_hiddens)
    start = min(max(first_col, 0), num_hiddens - count)
    return range(start, start + count)


def _label_digits(num_hiddens: int) -> int:
    """Digits the legend's column labels keep room for (at least two: d up to 100)."""
    return max(2, len(str(num_hiddens - 1)))


def _encoding_parts(fig: Figure, num_positions: int, count: int, digits: int):
    """(heatmap axes, curve axes) of a figure ``draw_encoding`` made with T rows, ``count``
    curves and room in the legend for ``digits``-digit columns, else None."""
    if fig.get_label() != ENCODING_LABEL or len(fig.subfigs) != 2:
        return None
    if getattr(fig, "_legend_digits", 0) < digits:
        return None
    maps = [ax for ax in fig.subfigs[0].axes if ax.images]
    curves = fig.subfigs[1].axes
    if len(maps) != 1 or maps[0].images[0].get_array().shape[0] != num_positions:
        return None
    if len(curves) != 1 or len(curves[0].lines) != count:
        return None
    return maps[0], curves[0]


def _layout_encoding(fig: Figure, P: np.ndarray, count: int, digits: int) -> None:
    """Heatmap and colour bar on the left; the curves on the right, their legend beside them
    (outside the axes: the layout makes room for it; above the curves it was wider than the
    axes). Laid out with ``digits``-digit placeholder labels: the widest a redraw writes."""
    start_figure(fig, ENCODING_LABEL)
    fig._legend_digits = digits
    left, right = fig.subfigures(1, 2, width_ratios=[1.15, 1])
    show_heatmaps(P, xlabel=XLABEL, ylabel=YLABEL, cmap="RdBu_r", vmin=-1.0, vmax=1.0, fig=left)
    left.axes[-1].set_yticks([-1.0, -0.5, 0.0, 0.5, 1.0])  # the colorbar: fewer labels to draw
    left.axes[0].add_patch(Rectangle((0, 0), 1, 1, fill=False, edgecolor="black", linewidth=1.5))
    ax = right.subplots()
    positions = np.arange(P.shape[0])
    for k in range(count):
        ax.plot(positions, np.zeros(P.shape[0]), color=COLORS[k % len(COLORS)],
                label="Col " + "8" * digits)  # the texts are set per draw
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              fontsize="small")
    ax.set_ylim(-1.1, 1.1)
    ax.set_yticks([-1.0, -0.5, 0.0, 0.5, 1.0])
    ax.set_xlabel(YLABEL)
    ax.set_ylabel("P[i, column]")


def draw_encoding(
    num_hiddens: int = 32, first_col: int = 6, *, num_positions: int = 60, num_cols: int = 4,
    fig: Figure | None = None,
) -> Figure:
    """Left: the table P = ``sinusoidal_table(num_positions, num_hiddens)`` as a heatmap, the
    chosen columns framed; right: those ``num_cols`` columns as curves over the positions.

    The columns start at ``first_col`` (moved left when they would not fit in d). A Figure this
    function drew (same T and number of curves, a legend with room for d's column numbers) is
    updated in place, the layout kept; any other Figure is cleared and redrawn.
    ``first_col`` >= 0; ``num_cols`` >= 1 (at most d are shown).
    """
    num_positions = check_positive_int("num_positions", num_positions)
    num_hiddens = check_positive_int("num_hiddens", num_hiddens)
    first_col = check_int_in("first_col", first_col, 0)
    num_cols = check_positive_int("num_cols", num_cols)
    check_figure("fig", fig, optional=True)
    P = to_numpy(sinusoidal_table(num_positions, num_hiddens, dtype=torch.float64))  # (T, d)
    cols = _columns(num_hiddens, first_col, num_cols)
    if fig is None:
        fig = Figure(figsize=(9.0, 3.4))
    digits = _label_digits(num_hiddens)
    parts = _encoding_parts(fig, num_positions, len(cols), digits)
    fresh = parts is None
    if fresh:
        _layout_encoding(fig, P, len(cols), digits)
        parts = _encoding_parts(fig, num_positions, len(cols), digits)
    ax_map, ax_curves = parts
    # What did not change is left alone (not set again, so not marked as changed): a page view
    # then records again only what a move changed (the table when d moves, not when the
    # first column does).
    image = ax_map.images[0]
    if fresh or not np.array_equal(np.asarray(image.get_array()), P):
        image.set_data(P)
        image.set_extent((-0.5, num_hiddens - 0.5, num_positions - 0.5, -0.5))
    bounds = (cols.start - 0.5, -0.5, len(cols), num_positions)
    if fresh or ax_map.patches[0].get_bbox().bounds != bounds:
        ax_map.patches[0].set_bounds(*bounds)
    ax_map.set_title(f"P: {num_positions} positions × {num_hiddens} columns", fontsize="medium")
    if fresh:
        freeze_layout(fig)  # with the placeholder labels in the legend: later ones are no wider
    for line, text, col in zip(ax_curves.lines, ax_curves.get_legend().get_texts(), cols):
        if fresh or not np.array_equal(line.get_ydata(), P[:, col]):
            line.set_ydata(P[:, col])
        line.set_label(f"Col {col}")
        text.set_text(f"Col {col}")  # the legend is updated, not rebuilt
    return fig


def encoding_view(
    num_hiddens: int = 32, first_col: int = 6, *, num_positions: int = 60, num_cols: int = 4,
    max_hiddens: int = 64,
) -> PageView:
    """Sliders: the encoding dimension d (the powers of two from 8, or from ``num_cols`` if
    larger, to ``max_hiddens``: 8, 16, 32, 64 by default) and the first column shown (even, 0 …
    ``max_hiddens`` − ``num_cols``; moved left when the columns would not fit in d) →
    ``draw_encoding``.

    Doublings of d: pair j of the d-wide table has the frequency of pair 2j of the 2d-wide one
    (ω_j depends on j/d only), so each step of d stretches the same table sideways. Even first
    columns: each step moves by one sine/cosine pair. The grid (4 × 31 by default) keeps the
    view's states few enough to record for the page quickly."""
    check_positive_int("num_positions", num_positions)
    num_cols = check_positive_int("num_cols", num_cols)
    max_hiddens = check_int_in("max_hiddens", max_hiddens, num_cols, why="(at least num_cols)")
    sizes = [2 ** k for k in range(3, max_hiddens.bit_length()) if 2 ** k >= num_cols]
    if not sizes:
        raise ValueError(f"max_hiddens must leave a power of two >= max(8, num_cols = {num_cols}), "
                         f"got {max_hiddens}")
    if not (isinstance(num_hiddens, numbers.Integral) and not isinstance(num_hiddens, bool)
            and num_hiddens in sizes):
        raise ValueError(f"num_hiddens must be one of the slider's values "
                         f"{', '.join(map(str, sizes))} (powers of two), got {num_hiddens!r}")
    last = max_hiddens - num_cols
    first_col = check_int_in("first_col", first_col, 0, last - last % 2,
                             "(the slider's range, even)")
    if first_col % 2:
        raise ValueError(f"first_col must be even (the slider moves by a sine/cosine pair), "
                         f"got {first_col}")
    fig = Figure(figsize=(9.0, 3.4))

    def draw(num_hiddens: int, first_col: int) -> Figure:
        return draw_encoding(num_hiddens, first_col, num_positions=num_positions,
                             num_cols=num_cols, fig=fig)

    return interactive_figure(
        draw,
        num_hiddens=widgets.SelectionSlider(options=sizes, value=int(num_hiddens),
                                            description="encoding dimension d",
                                            continuous_update=False,
                                            style={"description_width": "initial"}),
        first_col=widgets.IntSlider(value=first_col, min=0, max=last, step=2,
                                    description="first column shown", continuous_update=False,
                                    style={"description_width": "initial"}),
    )


# ---------------------------------------------------------------- relative position: rotations
def _is_rotation_figure(fig: Figure, num_positions: int) -> bool:
    return (fig.get_label() == ROTATION_LABEL and len(fig.axes) == 1
            and len(fig.axes[0].collections) == 2
            and len(fig.axes[0].collections[0].get_offsets()) == num_positions)


def _layout_rotation(fig: Figure, num_positions: int) -> None:
    start_figure(fig, ROTATION_LABEL)
    ax = fig.subplots()
    theta = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(theta), np.sin(theta), color="lightgrey", linewidth=1, zorder=0)
    zeros = np.zeros((num_positions, 2))
    colors = [COLORS[i % len(COLORS)] for i in range(num_positions)]
    ax.scatter(zeros[:, 0], zeros[:, 1], s=40, c=colors, label="(P[i,2j], P[i,2j+1])", zorder=3)
    ax.scatter(zeros[:, 0], zeros[:, 1], s=150, facecolors="none", edgecolors=colors,
               linewidths=1.5, label="M(δ) · pair of row i", zorder=2)
    for i in range(num_positions):  # the arc each pair travels along the circle
        ax.plot([], [], color=colors[i], linewidth=1, alpha=0.7, zorder=1)
    for i in range(num_positions):
        ax.annotate(str(i), (0, 0), xytext=(5, 5), textcoords="offset points", fontsize="small")
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.25, 1.25)
    ax.set_aspect("equal")
    ax.set_xlabel("P[i, 2j]  (sin)")
    ax.set_ylabel("P[i, 2j+1]  (cos)")
    fig.legend(loc="outside lower center", ncols=2, fontsize="small")


def _check_rotation_args(delta: object, j: object, num_hiddens: object,
                         num_positions: object) -> tuple[int, int, int, int]:
    num_hiddens = check_int_in("num_hiddens", num_hiddens, 2, why="(at least one column pair)")
    num_positions = check_positive_int("num_positions", num_positions)
    delta = check_int_in("delta", delta)
    j = check_int_in("j", j)
    if not 0 <= j < num_hiddens // 2:
        raise ValueError(
            f"j must be in 0 … {num_hiddens // 2 - 1} for num_hiddens={num_hiddens}, got {j}")
    return delta, j, num_hiddens, num_positions


def draw_rotation(
    delta: int = 2, j: int = 3, *, num_hiddens: int = 32, num_positions: int = 8,
    fig: Figure | None = None,
) -> Figure:
    """The pairs (P[i,2j], P[i,2j+1]) of rows i = 0 … T-1 on the unit circle (dots, labelled i)
    and their images M(δ)·pair (rings of the same colour, reached along an arc of δ·ω_j
    radians): each ring sits on row i+δ's pair.

    ``j`` must be below d//2 (an odd d's last column has no partner). A Figure this function
    drew before with the same T is updated in place; any other is cleared and redrawn. Memory:
    the T pairs drawn, whatever d.
    """
    delta, j, num_hiddens, num_positions = _check_rotation_args(delta, j, num_hiddens, num_positions)
    check_figure("fig", fig, optional=True)
    two_j = torch.tensor([2.0 * j], dtype=torch.float64) / num_hiddens  # (1,): 2j/d
    scale = torch.pow(10000.0, two_j)  # 10000^(2j/d), as sinusoidal_table computes it
    omega = (1.0 / scale).item()  # ω_j, as frequencies(num_hiddens)[j]
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] / scale  # (T, 1)
    pairs = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)  # (T, 2): P[:, 2j : 2j+2]
    images = rotate_pairs(pairs, delta, omega)  # (T, 2): M(δ) applied to each row's pair
    if fig is None:
        fig = Figure(figsize=(5.2, 5.0))
    fresh = not _is_rotation_figure(fig, num_positions)
    if fresh:
        _layout_rotation(fig, num_positions)
    ax = fig.axes[0]
    dots, rings = ax.collections
    start, end = to_numpy(pairs), to_numpy(images)
    # The dots and their labels depend on j only: set again only when they move, so that a
    # page view records them once per j, not once per state.
    moved = fresh or not np.array_equal(np.asarray(dots.get_offsets()), start)
    if moved:
        dots.set_offsets(start)
    rings.set_offsets(end)
    # Turn angles along each arc, one point per 0.2 rad: smooth for a long arc, few points for
    # a short one (the page view stores every arc of every state).
    steps = int(min(max(math.ceil(abs(delta * omega) / 0.2), 1), 200)) + 1
    t = np.linspace(0.0, delta * omega, steps)[:, None]  # (steps, 1)
    arc_x = start[:, 0] * np.cos(t) + start[:, 1] * np.sin(t)  # M(s) applied, s from 0 to δ
    arc_y = -start[:, 0] * np.sin(t) + start[:, 1] * np.cos(t)  # (steps, T)
    for arc, x, y in zip(ax.lines[1:], arc_x.T, arc_y.T):
        arc.set_data(x, y)
    for text, xy in zip(ax.texts if moved else (), start):
        text.xy = tuple(xy)
        text.stale = True  # a plain attribute: tell matplotlib (and the page view) it moved
    ax.set_title(f"pair j = {j} (columns {2 * j}, {2 * j + 1}), ω_j = {omega:.4f}\n"
                 f"δ = {delta}: turn by δ·ω_j = {delta * omega:.3f} rad clockwise",
                 fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def _pair_choices(num_hiddens: int, pair_step: int) -> list[int]:
    """The pairs j the view's slider offers: every ``pair_step``-th from 0, and the last pair."""
    last = num_hiddens // 2 - 1
    return sorted(set(range(0, last + 1, pair_step)) | {last})


def rotation_view(
    delta: int = 2, j: int = 3, *, num_hiddens: int = 32, num_positions: int = 8,
    max_delta: int = 20, pair_step: int = 3,
) -> PageView:
    """Sliders: the column pair j (every ``pair_step``-th pair from 0, and the last: 0, 3, 6,
    9, 12, 15 for d = 32) and the offset δ (every integer, −``max_delta`` … ``max_delta``) →
    ``draw_rotation``.

    Every offset: one step of δ turns pair 0 by ω_0 = 1 rad. Every third pair covers the
    frequencies from the fastest (ω_0 = 1) to the slowest (ω_15 ≈ 0.0002 for d = 32), each
    ≈ 5.6 times slower than the one before; the pairs between turn by amounts between their
    neighbours'. 6 × 41 = 246 states by default (all 16 pairs would be 656), each recorded
    for the page when the view is shown."""
    max_delta = check_int_in("max_delta", max_delta, 0)
    pair_step = check_int_in("pair_step", pair_step, 1)
    delta, j, num_hiddens, num_positions = _check_rotation_args(delta, j, num_hiddens,
                                                                num_positions)
    check_int_in("delta", delta, -max_delta, max_delta, "(the slider's range, ±max_delta)")
    pairs = _pair_choices(num_hiddens, pair_step)
    if j not in pairs:
        shown = ", ".join(map(str, pairs)) if len(pairs) <= 8 else \
            f"{pairs[0]}, {pairs[1]}, … {pairs[-1]}"
        raise ValueError(f"j must be one of the slider's pairs {shown} (every {pair_step}-th "
                         f"pair and the last), got {j}")
    fig = Figure(figsize=(5.2, 5.0))

    def draw(delta: int, j: int) -> Figure:
        return draw_rotation(delta, j, num_hiddens=num_hiddens, num_positions=num_positions,
                             fig=fig)

    return interactive_figure(  # j first: the title's order (the pair, then the offset)
        draw,
        j=widgets.IntSlider(value=j, min=0, max=pairs[-1], step=pair_step,
                            description="column pair j", continuous_update=False,
                            style={"description_width": "initial"}),
        delta=widgets.IntSlider(value=delta, min=-max_delta, max=max_delta,
                                description="position offset δ", continuous_update=False,
                                style={"description_width": "initial"}),
    )


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 07 shows them."""
    return {"encoding": encoding_view(), "rotation": rotation_view()}
