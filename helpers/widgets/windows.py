"""A view for notebook 11: how far stacked sliding windows reach (滑动窗口注意力).

Legend: T positions (24 in the view), W window (query i sees keys i − W + 1 … i), L layers,
i output/query position, j input/key position, t tokens before the next one.

``draw_reach`` shows, in one fixed two-colour map (blue: takes part / can depend, light grey:
hidden / cannot), one layer's band mask ``causal_mask(T, T, window=W)`` (query rows, key
columns) and what output i of a stack of L such layers can depend on (``reach``: the band
composed with itself L times; output i reaches back L·(W − 1) inputs). The last row, output
T − 1 (the next token's), is outlined red in both. A third panel shows the keys and values a
KV cache must hold per layer to compute the next token after t tokens: all t for full causal
attention, at most W − 1 for a window of W. Each redraws in place into a Figure it drew.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..masking import causal_mask
from ..plotting import to_numpy
from ._common import check_figure, check_int_in, interactive_figure, set_image_data, start_figure
from .page import PageView

__all__ = ["T", "WINDOWS", "LAYERS", "CACHE_POSITIONS", "MAX_LENGTH", "reach", "cache_sizes",
           "draw_reach", "reach_view", "demo_views"]

T = 24  # positions the view shows
WINDOWS = tuple(range(1, 9))  # the slider's W
LAYERS = tuple(range(1, 5))  # the slider's L
CACHE_POSITIONS = 4 * T  # the cache panel's t: 1 … 96
MAX_LENGTH = 128  # reach() multiplies (length, length) matrices up to length times: kept small
LABEL = "windows.reach"
FIGSIZE = (11.0, 4.3)
COLORS = ("#eeeeee", "#2c6fbb")  # hidden / cannot depend, takes part / can depend
HIGHLIGHT = "C3"  # the last row, output T − 1
FULL_COLOR, WINDOW_COLOR = "0.35", "C0"


def _check_length(length: object) -> int:
    return check_int_in("length", length, 1, MAX_LENGTH, "(positions)")


def reach(window: int, layers: int, length: int = T) -> torch.Tensor:
    """Boolean (length, length), row i output, column j input: True where output i of a stack
    of ``layers`` sliding-window attention layers (``causal_mask(window=W)`` in each: query i
    sees the keys i − W < j ≤ i) can depend on input j. Computed by composing the masks, a
    boolean matrix product of the band with itself ``layers`` times (output i reaches input j
    through some chain i ≥ k₁ ≥ … ≥ j of steps shorter than W): the result is the band
    0 ≤ i − j ≤ L·(W − 1). ``window`` ≥ 1 (≥ ``length``: plain causal), ``layers`` ≥ 1,
    ``length`` 1 … 128. On the CPU; at most length − 1 products (once the band fills the causal
    triangle, more layers change nothing)."""
    window = check_int_in("window", window, 1)
    layers = check_int_in("layers", layers, 1)
    length = _check_length(length)
    band = causal_mask(length, length, window=window).double()  # (n, n), n = length: 1 = sees
    out = band
    for _ in range(layers - 1):
        step = (out @ band) > 0  # (n, n): a path i → k (earlier layers) → j (this one)
        if torch.equal(step, out > 0):  # the whole causal triangle: more layers change nothing
            break
        out = step.double()
    return out > 0  # (n, n)


def cache_sizes(window: int | None, positions: int = CACHE_POSITIONS) -> torch.Tensor:
    """Keys and values one layer must keep to compute the next token after t = 1 … ``positions``
    tokens (long, (positions,)): all t for full causal attention (``window=None``), the
    min(t, W − 1) most recent for a window of W (the new token's own key is computed, not
    kept)."""
    if window is not None:
        window = check_int_in("window", window, 1)
    positions = check_int_in("positions", positions, 1, 1 << 20)
    t = torch.arange(1, positions + 1)  # (positions,)
    return t if window is None else t.clamp(max=window - 1)


def _check_window(window: object) -> int:
    return check_int_in("window", window, WINDOWS[0], WINDOWS[-1])


def _check_layers(layers: object) -> int:
    return check_int_in("layers", layers, LAYERS[0], LAYERS[-1])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _texts(window: int, layers: int, row: np.ndarray) -> tuple[str, str, str]:
    """The suptitle and both maps' titles for a state; ``row``: ``reach`` of the last output."""
    last = T - 1
    back = layers * (window - 1)
    first = int(np.flatnonzero(row)[0])  # the earliest input output T − 1 depends on
    if first == last:
        seen = f"input {last} only"
    else:
        seen = f"inputs {first} … {last}"
    past = ", past input 0" if back > last else ""
    line1 = (f"W = {window}, L = {layers}: output {last} depends on {seen} "
             f"(reach L·(W − 1) = {back} back{past})")
    line2 = (f"a window-W cache holds W − 1 = {_plural(window - 1, 'token')}, "
             f"full attention {last}")
    keys = "key i only" if window == 1 else f"keys i − {window - 1} … i"
    inputs = "input i only" if back == 0 else f"inputs i − {back} … i"
    return (f"{line1}\n{line2}", f"one layer, W = {window}: query i sees {keys}",
            f"{_plural(layers, 'layer')}: output i depends on {inputs}")


def _layout(fig: Figure) -> None:
    """The three panels at fixed places (no layout engine: every state has the same layout),
    in fractions of ``FIGSIZE`` (a Figure of another size gets the same proportions)."""
    start_figure(fig, LABEL, fixed_layout=True)
    width, height = FIGSIZE
    side, gap = 2.5, 0.95  # inches: each map is square
    bottom, left = 0.95, 0.7
    maps = []
    for k, (x, y) in enumerate([("key j", "query i"), ("input j", "output i")]):
        ax = fig.add_axes([(left + k * (side + gap)) / width, bottom / height,
                           side / width, side / height])
        ax.imshow(np.zeros((T, T)), cmap=ListedColormap(COLORS), vmin=0.0, vmax=1.0,
                  interpolation="nearest", aspect="equal")
        ax.add_patch(Rectangle((-0.5, T - 1.5), T, 1, fill=False, edgecolor=HIGHLIGHT,
                               linewidth=2, clip_on=False))
        ticks = [0, 8, 16, T - 1]
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.set_title("placeholder", fontsize="small")
        maps.append(ax)
    cache_left = left + 2 * side + 2 * gap
    ax = fig.add_axes([cache_left / width, bottom / height,
                       (width - cache_left - 0.2) / width, side / height])
    t = np.arange(1, CACHE_POSITIONS + 1)
    ax.plot(t, to_numpy(cache_sizes(None)), color=FULL_COLOR, linewidth=2,
            label="full causal: t", gid="full")
    ax.plot(t, np.zeros_like(t), color=WINDOW_COLOR, linewidth=2, label="window W: min(t, W − 1)",
            gid="window")
    ax.axvline(T - 1, color="0.6", linestyle=":", linewidth=1.2, gid="next")
    ax.plot([T - 1, T - 1], [T - 1, 0], linestyle="none", marker="o", markersize=5,
            color=HIGHLIGHT, gid="current", label=f"next token after t = {T - 1}")
    ax.set_xlim(0, CACHE_POSITIONS + 1)
    ax.set_ylim(0, CACHE_POSITIONS + 1)
    ax.set_xticks([0, T - 1, 48, 72, CACHE_POSITIONS])
    ax.set_xlabel("tokens so far t")
    ax.set_ylabel("keys/values cached per layer")
    ax.set_title("KV cache for the next token", fontsize="small")
    ax.legend(loc="upper left", fontsize="x-small")
    fig.legend(handles=[Patch(facecolor=COLORS[1], label="takes part / can depend"),
                        Patch(facecolor=COLORS[0], edgecolor="0.7", label="hidden / cannot"),
                        Patch(fill=False, edgecolor=HIGHLIGHT, linewidth=2,
                              label=f"output {T - 1}: the next token's row")],
               loc="lower left", bbox_to_anchor=(left / width, 0.0), ncol=3,
               fontsize="x-small", frameon=False)
    fig.suptitle("placeholder\nplaceholder", fontsize="medium", y=0.99, va="top")


def draw_reach(window: int = 4, layers: int = 2, *, fig: Figure | None = None) -> Figure:
    """Left: one layer's band mask ``causal_mask(T, T, window=W)`` (T = 24, query rows, key
    columns); middle: ``reach(W, L)``, what output i can depend on after L layers; both in one
    fixed two-colour map, the last row (output 23) outlined red. Right: ``cache_sizes`` for
    t = 1 … 96 (full causal attention and the window W), axes fixed for every state, a dot at
    t = 23. The suptitle states this state's numbers (computed from ``reach``). ``window``
    1 … 8, ``layers`` 1 … 4. A Figure this function drew is updated in place; any other is
    cleared and redrawn."""
    window, layers = _check_window(window), _check_layers(layers)
    check_figure("fig", fig, optional=True)
    if fig is None:
        fig = Figure(figsize=FIGSIZE)
    if fig.get_label() != LABEL:
        _layout(fig)
    band = to_numpy(causal_mask(T, T, window=window))  # (T, T) bool
    reached = to_numpy(reach(window, layers))  # (T, T) bool
    left, middle, cache = fig.axes
    suptitle, left_title, middle_title = _texts(window, layers, reached[-1])
    for ax, data, title in ((left, band, left_title), (middle, reached, middle_title)):
        set_image_data(ax.images[0], data.astype(np.float64))
        ax.set_title(title, fontsize="small")
    lines = {line.get_gid(): line for line in cache.lines}
    held = to_numpy(cache_sizes(window))
    lines["window"].set_ydata(held)
    lines["current"].set_ydata([T - 1, held[T - 2]])  # t = 23: full 23, window min(23, W − 1)
    fig.suptitle(suptitle, fontsize="medium", y=0.99, va="top")
    return fig


def reach_view(window: int = 4, layers: int = 2) -> PageView:
    """Sliders: the window W (1 … 8) and the layers L (1 … 4) → ``draw_reach``."""
    window, layers = _check_window(window), _check_layers(layers)
    fig = Figure(figsize=FIGSIZE)
    style = {"description_width": "initial"}
    return interactive_figure(
        lambda window, layers: draw_reach(window, layers, fig=fig),
        window=widgets.IntSlider(value=window, min=WINDOWS[0], max=WINDOWS[-1], step=1,
                                 description="window W", continuous_update=False, style=style),
        layers=widgets.IntSlider(value=layers, min=LAYERS[0], max=LAYERS[-1], step=1,
                                 description="layers L", continuous_update=False, style=style),
    )


def demo_views() -> dict[str, widgets.Widget]:
    """The view of this module, as notebook 11 shows it."""
    return {"reach": reach_view()}
