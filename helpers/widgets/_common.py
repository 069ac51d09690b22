"""The one pattern every view uses: ``interactive_figure(draw, **controls)``."""

from __future__ import annotations

import io
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib as mpl
from IPython.display import Image, display
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["interactive_figure", "figure_png", "start_figure", "freeze_layout", "drop_layout_engine"]


def drop_layout_engine(fig: Figure) -> None:
    """Remove ``fig``'s layout engine, so that ``figure_png`` draws it once. ``None``, not
    ``"none"``: the "none" placeholder engine makes ``savefig`` run a second, non-rendering
    pass over every artist before each PNG. The rc guard keeps ``None`` from falling back to
    an engine that rcParams name."""
    with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def start_figure(fig: Figure, label: str, *, fixed_layout: bool = False) -> Figure:
    """Clear ``fig`` for a view to (re)build its artists in: give it the view's ``label`` (how
    the tests and the browser test find it) and constrained layout, or, with ``fixed_layout``,
    no layout engine (the view sets its own margins: no layout pass on a redraw)."""
    fig.clear()
    fig.set_label(label)
    if fixed_layout:
        drop_layout_engine(fig)
    else:
        fig.set_layout_engine("constrained")
    return fig


def freeze_layout(fig: Figure) -> None:
    """Lay a freshly built ``fig`` out once with its engine (a draw without rendering), then
    keep those positions (``drop_layout_engine``): a redraw after a slider move changes data
    and text, not the layout, and skips the layout pass, which costs as much as the drawing."""
    fig.draw_without_rendering()
    drop_layout_engine(fig)


def figure_png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes, drawn once.

    IPython's default display of a Figure uses ``bbox_inches="tight"``, which draws the figure
    twice (once to measure it); the views lay their figures out themselves, so once is enough.
    """
    if not isinstance(fig.canvas, FigureCanvasAgg):  # a Figure made without pyplot
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def interactive_figure(
    draw: Callable[..., Figure], *, height: str = "420px", **controls: widgets.Widget
) -> widgets.interactive:
    """Wrap ``draw(**values) -> Figure`` in ``ipywidgets.interactive``.

    Moving a control calls ``draw`` with every control's value; the returned Figure is shown
    in the output area as one PNG (``figure_png``; fixed ``height`` so the page does not jump)
    and kept in ``.result``, which is what tests inspect. ``draw`` should redraw into one
    Figure it keeps, not make a new one per call. The first drawing happens at once, so
    ``.result`` is never None. Works with ipywidgets 7 (Colab) and 8.
    """

    def show(**values: object) -> Figure:
        fig = draw(**values)
        display(Image(data=figure_png(fig), format="png"))  # into the view's Output
        return fig

    view = widgets.interactive(show, **controls)
    view.out.layout.min_height = height
    if view.result is None:  # ipywidgets releases differ on whether the constructor draws
        view.update()
    return view
