"""Slider views for notebook 03: valid lengths (有效长度) → masked-softmax weights.

Legend: B batch, Q queries, K keys. Valid lengths are (B,) (one per batch row, shared by its
queries) or (B, Q) (one per query); a length ``n`` keeps the first ``n`` keys. Masked cells
(past the valid length) are drawn grey and are masked (``np.ma``) in the image array.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..checks import (
    check_bool, check_floating, check_holds_data, check_positive_int, check_rank, check_seed,
)
from ..masking import masked_softmax, valid_lens_to_mask
from ..plotting import show_heatmaps, to_numpy
from ._common import check_figure, freeze_layout, interactive_figure, set_image_data
from .page import PageView

__all__ = ["draw_masked_softmax", "valid_length_view", "demo_scores", "demo_views"]

MAX_SLIDERS = 32  # one slider per valid length, each a line of the page
LABEL = "masking.valid_lens"


def _lens_tensor(valid_lens: torch.Tensor | Sequence) -> torch.Tensor:
    try:
        return torch.as_tensor(valid_lens).cpu()
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"valid_lens must be integers of shape (B,) or (B, Q), got {valid_lens!r:.60}"
        ) from None


def _check_scores(scores: object) -> None:
    """Raise ValueError unless ``scores`` is a floating (B, Q, K) tensor with B, Q, K ≥ 1."""
    check_rank("scores", scores, 3, "(B, Q, K)")
    check_floating("scores", scores)
    check_holds_data("scores", scores)
    if 0 in scores.shape:
        raise ValueError(f"scores must have B, Q, K ≥ 1 in (B, Q, K), got {tuple(scores.shape)}")


def _titles(lens: torch.Tensor) -> list[str]:
    if lens.dim() == 1:
        return [f"batch {b} · valid len {int(n)}" for b, n in enumerate(lens)]
    return [f"batch {b} · lens {row.tolist()}" for b, row in enumerate(lens)]


def _panels(fig: Figure | None, B: int, Q: int, K: int):
    """The B heatmap axes of a figure this module drew with the same shape, else None."""
    if fig is None or len(fig.axes) != B + 1:  # B panels + the colorbar
        return None
    panels = fig.axes[:B]
    if all(len(ax.images) == 1 and ax.images[0].get_array().shape == (Q, K) for ax in panels):
        return panels
    return None


def draw_masked_softmax(
    scores: torch.Tensor, valid_lens: torch.Tensor | Sequence, fig: Figure | None = None
) -> Figure:
    """Draw ``masked_softmax(scores, valid_lens)`` as B panels (Q × K each), masked cells grey.

    ``scores`` (B, Q, K); ``valid_lens`` (B,) or (B, Q). The colour scale is fixed to [0, 1] so
    that moving a slider never rescales it. When ``fig`` already shows maps of this shape (drawn
    here before), only the image data and titles are updated (the layout, computed once at the
    first drawing, is kept); otherwise it is (re)drawn.
    """
    _check_scores(scores)
    check_figure("fig", fig, optional=True)
    lens = _lens_tensor(valid_lens)
    B, Q, K = scores.shape
    keep = to_numpy(valid_lens_to_mask(lens, B, Q, K))  # (B, 1 or Q, K), True = takes part
    weights = to_numpy(masked_softmax(scores, lens.to(scores.device)))  # (B, Q, K)
    titles = _titles(lens)
    panels = _panels(fig, B, Q, K)
    if panels is None:
        if fig is not None:
            fig.set_layout_engine("constrained")  # a frozen layout would not fit new panels
        fig = show_heatmaps(weights, mask=keep, titles=titles, vmin=0.0, vmax=1.0, fig=fig)
        fig.set_label(LABEL)  # the view's name (its page view's text and aria-label)
        for ax in fig.axes[:B]:  # query and key indices are integers: no ticks at 0.5
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        freeze_layout(fig)  # updates change only data and titles
        return fig
    hidden = ~np.broadcast_to(keep, weights.shape)
    for b, ax in enumerate(panels):  # only the panels whose lengths moved change
        set_image_data(ax.images[0], np.ma.masked_array(weights[b], mask=hidden[b]))
        ax.title.set_text(titles[b])  # (set_title would restyle it: a change to a page view)
    return fig


def valid_length_view(
    scores: torch.Tensor, *, per_query: bool = False,
    valid_lens: torch.Tensor | Sequence | None = None,
) -> PageView:
    """Sliders for the valid lengths of ``scores`` (B, Q, K) → the masked-softmax heatmaps.

    One slider per batch row (valid lengths (B,)), or with ``per_query`` one per (row, query)
    (valid lengths (B, Q)). ``valid_lens`` sets the starting values (default: every key valid).
    Returns the ``PageView``; its ``.result`` is the one Figure, redrawn in place.
    Raises ValueError (naming expected and actual) for scores that are not a floating
    (B, Q, K) tensor, more than ``MAX_SLIDERS`` sliders, or valid lengths of another shape,
    not integers, or outside [0, K].
    """
    _check_scores(scores)
    check_bool("per_query", per_query)
    B, Q, K = scores.shape
    shape = (B, Q) if per_query else (B,)
    if math.prod(shape) > MAX_SLIDERS:
        sizes = f"B × Q = {B} × {Q} = {B * Q}" if per_query else f"B = {B}"
        raise ValueError(f"scores must give at most {MAX_SLIDERS} valid lengths (one slider "
                         f"each), got {sizes}")
    scores = scores.detach().clone()  # later changes to the caller's tensor do not leak in
    start = torch.full(shape, K) if valid_lens is None else _lens_tensor(valid_lens)
    if tuple(start.shape) != shape:
        raise ValueError(f"valid_lens must have shape {shape}, got {tuple(start.shape)}")
    valid_lens_to_mask(start, B, Q, K)  # raises for non-integers and lengths outside [0, K]
    cells = [(i // Q, i % Q) if per_query else (i, None) for i in range(start.numel())]
    names = [f"b{b}" if q is None else f"b{b}_q{q}" for b, q in cells]
    sliders = {
        name: widgets.IntSlider(
            value=int(n), min=0, max=K, continuous_update=False,
            description=(f"batch {b} valid length" if q is None
                         else f"batch {b}, query {q} valid length"),
            style={"description_width": "initial"},
        )
        for name, (b, q), n in zip(names, cells, start.flatten().tolist())
    }
    fig = draw_masked_softmax(scores, start)

    def draw(**values: int) -> Figure:
        lens = torch.tensor([values[name] for name in names]).reshape(shape)
        return draw_masked_softmax(scores, lens, fig=fig)

    view = interactive_figure(draw, **sliders)
    return view


def demo_scores(B: int, Q: int, K: int, seed: int = 0) -> torch.Tensor:
    """Reproducible standard-normal scores (B, Q, K) from a generator of their own."""
    sizes = [check_positive_int(name, n) for name, n in (("B", B), ("Q", Q), ("K", K))]
    return torch.randn(*sizes, generator=torch.Generator().manual_seed(check_seed(seed)))


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, with the shapes notebook 03 uses."""
    return {
        "valid_lens_per_row": valid_length_view(demo_scores(3, 4, 8), valid_lens=[8, 5, 2]),
        "valid_lens_per_query": valid_length_view(
            demo_scores(2, 2, 4), per_query=True, valid_lens=[[1, 3], [2, 4]]
        ),
    }
