"""View for notebook 01: the temperature τ（温度）of a softmax, from one-hot to uniform.

Legend: Q queries, K keys. Weights softmax(scores / τ) are laid out (Q, K), each row summing
to 1; entropy (熵) is in nats (natural logarithm), at most log K (uniform weights).

``temperature_weights`` and ``entropy`` compute; ``draw_temperature`` is a pure function of the
scores and τ; ``temperature_view`` wraps it in a log-scale slider; ``demo_views`` builds the
view for the benchmark.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..checks import check_floating, check_holds_data, check_rank, check_real
from ..plotting import show_heatmaps, to_numpy
from ._common import check_figure, freeze_layout, interactive_figure, start_figure
from .page import PageView

__all__ = ["temperature_weights", "entropy", "draw_temperature", "temperature_view",
           "demo_scores", "demo_views"]

TEMPERATURE_LABEL = "temperature"  # Figure label: tells draw_temperature a figure is its own
FIGSIZE = (7.6, 2.9)
CMAP = "Reds"
SLIDER_RANGE = (0.01, 100.0)  # the view's log-scale slider: 10^-2 to 10^2


def _check_scores(scores: torch.Tensor) -> None:
    """Raise unless ``scores`` is a floating (Q, K) tensor holding data, Q, K ≥ 1."""
    check_rank("scores", scores, 2, "(Q, K)")
    check_floating("scores", scores)
    check_holds_data("scores", scores)
    if 0 in scores.shape:
        raise ValueError(f"scores must have at least one query and one key (Q, K), "
                         f"got shape {tuple(scores.shape)}")


def temperature_weights(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(scores / τ) over the keys: scores (Q, K) → weights (Q, K), rows summing to 1.

    τ → 0: each row puts all its weight on its highest score (one-hot; ties share it);
    τ → ∞: every row tends to uniform 1/K. τ = 1 is the plain softmax. ``scores`` is not
    changed.
    """
    _check_scores(scores)
    return torch.softmax(scores / check_real("temperature", temperature, above=0), dim=-1)


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy of each row, -Σ_k w_k log w_k in nats (0 · log 0 = 0): (..., K) → (...).

    0 for a one-hot row, log K for a uniform one.
    """
    check_floating("weights", weights)
    check_holds_data("weights", weights)
    if weights.dim() == 0:
        raise ValueError("weights must have at least 1 dimension (..., K), got 0 (a lone number)")
    return torch.special.entr(weights).sum(dim=-1)


def _layout(fig: Figure, num_queries: int, num_keys: int) -> None:
    """(Re)build the artists: the weights (annotated, colour scale fixed to 0–1) on the left,
    one entropy bar per query on the right with the uniform maximum log K dashed."""
    start_figure(fig, TEMPERATURE_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.25, 1])
    show_heatmaps(np.zeros((num_queries, num_keys)), xlabel="Keys", ylabel="Queries",
                  titles=["weights"], vmin=0.0, vmax=1.0, cmap=CMAP, annot=True, fig=left)
    for axis in (left.axes[0].xaxis, left.axes[0].yaxis):  # indices are integers: no 0.5 ticks
        axis.set_major_locator(MaxNLocator(integer=True))
    left.axes[-1].set_yticks([0.0, 0.5, 1.0])  # the colorbar: few labels, fixed
    ax = right.subplots()
    top = math.log(num_keys) if num_keys > 1 else 1.0
    ax.barh(range(num_queries), np.zeros(num_queries), color="#c0392b", height=0.6)
    for q in range(num_queries):  # the value at the end of each bar
        ax.text(0.0, q, "", va="center", ha="left", fontsize="small")
    ax.axvline(top, color="grey", linestyle="--")
    ax.set_xlim(0.0, 1.3 * top)  # fixed: the bars grow and shrink, the axis does not move
    ax.set_ylim(num_queries - 0.5, -0.5)  # query 0 on top, as in the heatmap
    ax.set_yticks(range(num_queries))
    ax.set_ylabel("Queries")
    ax.set_xlabel(f"nats (dashed: uniform, log {num_keys})")


def _parts(fig: Figure, num_queries: int, num_keys: int):
    """(heatmap axes, entropy axes) of a figure this module drew for (Q, K) maps, else None."""
    if fig.get_label() != TEMPERATURE_LABEL or len(fig.subfigs) != 2:
        return None
    maps = [ax for ax in fig.subfigs[0].axes if ax.images]
    bars = fig.subfigs[1].axes
    if len(maps) != 1 or maps[0].images[0].get_array().shape != (num_queries, num_keys):
        return None
    if len(bars) != 1 or len(bars[0].patches) != num_queries:
        return None
    return maps[0], bars[0]


def draw_temperature(
    scores: torch.Tensor, temperature: float = 1.0, *, fig: Figure | None = None,
) -> Figure:
    """Left: the weights softmax(scores / τ) (Q, K), each cell's value written in it, colour
    scale fixed to 0–1; right: each query's entropy (nats) against the uniform maximum log K.

    ``fig``: a Figure this function drew before (same Q and K) is updated in place (the layout,
    computed at the first drawing, is kept); any other Figure is cleared and redrawn. Returns
    the Figure (not registered with pyplot).
    """
    weights = temperature_weights(scores, temperature)  # (Q, K)
    check_figure("fig", fig, optional=True)
    ent = to_numpy(entropy(weights.double()))  # (Q,)
    weights = to_numpy(weights).astype(np.float64)
    Q, K = weights.shape
    if fig is None:
        fig = Figure(figsize=FIGSIZE)
    parts = _parts(fig, Q, K)
    fresh = parts is None
    if fresh:
        _layout(fig, Q, K)
        parts = _parts(fig, Q, K)
    ax_map, ax_bar = parts
    image = ax_map.images[0]
    image.set_data(weights)
    colors = colormaps[CMAP]
    for text, value in zip(ax_map.texts, weights.ravel()):  # row-major, as show_heatmaps wrote
        text.set_text(f"{value:.2f}")
        text.set_color("white" if sum(colors(image.norm(value))[:3]) < 1.5 else "black")
    for bar, text, value in zip(ax_bar.patches, ax_bar.texts, ent):
        bar.set_width(value)
        text.set_x(value)
        text.set_text(f" {value:.2f}")
    ax_map.set_title(f"softmax(scores / τ), τ = {float(temperature):.3g}", fontsize="medium")
    ax_bar.set_title(f"entropy per query: mean {ent.mean():.2f}", fontsize="medium")
    if fresh:
        freeze_layout(fig)  # lay out once; a redraw after a slider move skips the layout
    return fig


def temperature_view(scores: torch.Tensor, temperature: float = 1.0) -> PageView:
    """A log-scale slider for τ (0.01 to 100) → ``draw_temperature(scores, τ)``.

    ``scores`` (Q, K) is copied: later changes to the caller's tensor do not show. A starting
    ``temperature`` outside the slider's range is refused (the slider would clip it silently).
    """
    temperature_weights(scores, temperature)  # check the inputs now, not in the first callback
    low, high = SLIDER_RANGE
    if not low <= temperature <= high:
        raise ValueError(f"temperature must lie on the slider, in [{low:g}, {high:g}], "
                         f"got {temperature!r}")
    scores = scores.detach().clone()
    fig = Figure(figsize=FIGSIZE)

    def draw(temperature: float) -> Figure:
        return draw_temperature(scores, temperature, fig=fig)

    return interactive_figure(
        draw, 
        temperature=widgets.FloatLogSlider(
            value=float(temperature), base=10, min=-2, max=2, step=0.1,
            description="temperature τ", readout_format=".2f", continuous_update=False,
            style={"description_width": "initial"}),
    )


def demo_scores() -> torch.Tensor:
    """The (Q, K) = (3, 4) scores of notebook 01: two peaked rows and one row of equal scores."""
    return torch.tensor([[2.0, 0.5, 0.1, 0.1],
                         [0.1, 3.0, 0.2, 0.1],
                         [0.5, 0.5, 0.5, 0.5]])


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 01 shows it."""
    return {"temperature_view": temperature_view(demo_scores())}
