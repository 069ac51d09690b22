"""The one pattern every view uses: ``interactive_figure(draw, **controls)``."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
from matplotlib.figure import Figure

__all__ = ["interactive_figure"]


def interactive_figure(
    draw: Callable[..., Figure], *, height: str = "420px", **controls: widgets.Widget
) -> widgets.interactive:
    """Wrap ``draw(**values) -> Figure`` in ``ipywidgets.interactive``.

    Moving a control calls ``draw`` with every control's value; the returned Figure is shown
    in the output area (fixed ``height`` so the page does not jump) and kept in ``.result``,
    which is what tests inspect. ``draw`` should redraw into one Figure it keeps, not make a
    new one per call. The first drawing happens at once, so ``.result`` is never None.
    """
    # auto_display: plain ``interactive`` keeps the returned Figure without showing it (7 and 8).
    view = widgets.interactive(draw, {"auto_display": True}, **controls)
    view.out.layout.min_height = height
    if view.result is None:  # ipywidgets releases differ on whether the constructor draws
        view.update()
    return view
