"""The one pattern every view uses: ``interactive_figure(draw, **controls)``."""

from __future__ import annotations

import io
import numbers
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib as mpl
import numpy as np
from matplotlib import cbook
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from ..checks import check_bool
from .page import PageView

__all__ = ["interactive_figure", "figure_png", "start_figure", "freeze_layout", "drop_layout_engine",
           "set_image_data"]


# Checks the views share (not re-exported: the public checks live in ``helpers.checks``).
def check_figure(name: str, fig: object, *, optional: bool = False) -> None:
    """Raise unless ``fig`` is a matplotlib Figure (or None, when ``optional``)."""
    if not (isinstance(fig, Figure) or optional and fig is None):
        kind = "a matplotlib Figure or None" if optional else "a matplotlib Figure"
        raise ValueError(f"{name} must be {kind}, got {type(fig).__name__}")


def check_int_in(name: str, value: object, low: int | None = None, high: int | None = None,
                 why: str = "") -> int:
    """Return ``value`` as an int; raise unless it is an integer (not a bool) in [low, high]
    (an open end where a bound is None). ``why`` is added to the message, e.g. "(⌈K/b⌉ blocks)"."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok and (low is not None and value < low or high is not None and value > high):
        ok = False
    if not ok:
        where = (f" in [{low}, {high}]" if low is not None and high is not None
                 else f" >= {low}" if low is not None else f" <= {high}" if high is not None else "")
        raise ValueError(f"{name} must be an int{where}{' ' + why if why else ''}, got {value!r}")
    return int(value)


def drop_layout_engine(fig: Figure) -> None:
    """Remove ``fig``'s layout engine, so that ``figure_png`` draws it once. ``None``, not
    ``"none"``: the "none" placeholder engine makes ``savefig`` run a second, non-rendering
    pass over every artist before each PNG. The rc guard keeps ``None`` from falling back to
    an engine that rcParams name."""
    check_figure("fig", fig)
    with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def start_figure(fig: Figure, label: str, *, fixed_layout: bool = False) -> Figure:
    """Clear ``fig`` for a view to (re)build its artists in: give it the view's ``label`` (how
    the tests and the browser test find it) and constrained layout, or, with ``fixed_layout``,
    no layout engine (the view sets its own margins: no layout pass on a redraw)."""
    check_figure("fig", fig)
    if not isinstance(label, str):
        raise ValueError(f"label must be a str, got {type(label).__name__}")
    check_bool("fixed_layout", fixed_layout)
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
    check_figure("fig", fig)
    fig.draw_without_rendering()
    drop_layout_engine(fig)


def set_image_data(image: AxesImage, data: np.ndarray) -> bool:
    """``image.set_data(data)`` unless the image holds that data already (the same values,
    mask, shape and dtype): a page view records an image again whenever it is set, and a view
    that redraws every panel on a move changes only some. ``data``: a 2-D NumPy array of
    numbers (a masked array too) — a heatmap's values. True if it was set."""
    if not isinstance(image, AxesImage):
        raise ValueError(f"image must be a matplotlib AxesImage, got {type(image).__name__}")
    if not (isinstance(data, np.ndarray) and data.ndim == 2 and data.dtype.kind in "biuf"):
        what = (f"an array of shape {data.shape} and dtype {data.dtype}"
                if isinstance(data, np.ndarray) else type(data).__name__)
        raise ValueError(f"data must be a 2-D NumPy array of numbers (a heatmap's values), got "
                         f"{what}")
    new = cbook.safe_masked_invalid(data)  # what set_data stores (NaN and inf masked)
    old = image.get_array()
    if (old is not None and old.shape == new.shape and old.dtype == new.dtype
            and np.array_equal(np.ma.getmaskarray(old), np.ma.getmaskarray(new))
            and np.array_equal(np.ma.getdata(old), np.ma.getdata(new), equal_nan=True)):
        return False
    image.set_data(data)
    return True


def figure_png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes, drawn once.

    IPython's default display of a Figure uses ``bbox_inches="tight"``, which draws the figure
    twice (once to measure it); the views lay their figures out themselves, so once is enough.
    """
    check_figure("fig", fig)
    if not isinstance(fig.canvas, FigureCanvasAgg):  # a Figure made without pyplot
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def interactive_figure(draw: Callable[..., Figure], **controls: widgets.Widget) -> PageView:
    """Wrap ``draw(**values) -> Figure`` and its controls in a ``PageView``.

    The page draws the view in the browser from recordings of ``draw``'s figure (made when the
    view is first displayed); ``.result`` is the Figure of the controls' current values, drawn
    on demand, which is what tests inspect. ``draw`` should redraw into one Figure it keeps,
    not make a new one per call. The first drawing happens at once, so the error of a ``draw``
    that fails for the controls' first values is raised here, and one that returns no Figure
    raises ValueError. Works with ipywidgets 7 (Colab) and 8.
    """
    return PageView(draw, controls)  # it refuses a draw that is not callable
