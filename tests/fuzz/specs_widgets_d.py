"""Specs for the slider view of notebook 11: ``helpers.widgets.windows`` (see
``tests/fuzz/__init__.py`` for the format). Each ``check`` compares with the formulas written
out in ``tests/test_widgets_windows.py``: output i of L windowed layers depends on input j iff
0 ≤ i − j ≤ L·(W − 1), a layer's band is 0 ≤ i − j < W, a cache holds min(t, W − 1) keys.
Draws cost a few ms (a fresh figure about 0.3 s)."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from helpers.widgets import linear as lw
from helpers.widgets import windows as ww
from tests.fuzz import Case, Int, Spec
from tests.fuzz.specs_widgets_a import _control, _foreign, _is_view  # the same helpers
from tests.test_widgets_windows import band_by_hand, reach_by_hand, suptitle_by_hand

FIG = lambda v: v is None or isinstance(v, Figure)  # noqa: E731  a draw function's ``fig``
WINDOW, LAYERS = Int(1, 8), Int(1, 4)  # the view's sliders


def _reach_right(out: torch.Tensor, kw: dict) -> bool:
    n = int(kw.get("length", ww.T))
    return (isinstance(out, torch.Tensor) and out.dtype == torch.bool and out.shape == (n, n)
            and np.array_equal(out.numpy(), reach_by_hand(int(kw["window"]), int(kw["layers"]), n)))


def _cache_right(out: torch.Tensor, kw: dict) -> bool:
    t = np.arange(1, int(kw["positions"]) + 1)
    want = t if kw["window"] is None else np.minimum(t, int(kw["window"]) - 1)
    return isinstance(out, torch.Tensor) and np.array_equal(out.numpy(), want)


def _figure_right(fig: Figure, kw: dict) -> bool:
    window, layers = int(kw["window"]), int(kw["layers"])
    maps = [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]
    lines = {line.get_gid(): line for line in fig.axes[-1].lines}
    return (isinstance(fig, Figure) and fig.get_label() == "windows.reach" and len(maps) == 2
            and np.array_equal(maps[0], band_by_hand(window).astype(float))
            and np.array_equal(maps[1], reach_by_hand(window, layers).astype(float))
            and np.array_equal(lines["window"].get_ydata(),
                               np.minimum(np.arange(1, 97), window - 1))
            and fig._suptitle.get_text() == suptitle_by_hand(window, layers))


SPECS = [
    Spec("helpers.widgets.windows.reach", call=ww.reach,
         good=lambda: dict(window=3, layers=2, length=20),
         rules={"window": "size", "layers": "size", "length": Int(1, ww.MAX_LENGTH)},
         check=_reach_right,
         edge=[Case("window-past-length", lambda kw: kw.update(window=50), _reach_right),
               Case("many-layers", lambda kw: kw.update(layers=10**9, length=40), _reach_right),
               Case("one-position", lambda kw: kw.update(length=1), _reach_right),
               Case("numpy-ints", lambda kw: kw.update(window=np.int64(4), layers=np.int32(3)),
                    _reach_right)]),
    Spec("helpers.widgets.windows.cache_sizes", call=ww.cache_sizes,
         good=lambda: dict(window=4, positions=96),
         rules={"window": Int(1, None, optional=True), "positions": Int(1, 1 << 20)},
         check=_cache_right),
    Spec("helpers.widgets.windows.draw_reach", call=ww.draw_reach,
         good=lambda: dict(window=4, layers=2, fig=None),
         rules={"window": WINDOW, "layers": LAYERS, "fig": FIG}, check=_figure_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _figure_right),
               Case("other-view-fig", lambda kw: kw.update(fig=lw.draw_states(2)), _figure_right),
               Case("own-fig", lambda kw: kw.update(fig=ww.draw_reach(8, 4)), _figure_right)]),
    Spec("helpers.widgets.windows.reach_view", call=ww.reach_view,
         good=lambda: dict(window=3, layers=4), rules={"window": WINDOW, "layers": LAYERS},
         check=lambda out, kw: _is_view(out)
         and _control(out, "window W").value == kw["window"]
         and _control(out, "layers L").value == kw["layers"]
         and _figure_right(out.result, kw)),
    Spec("helpers.widgets.windows.demo_views", call=ww.demo_views, good=dict,
         check=lambda out, kw: list(out) == ["reach"] and _is_view(out["reach"])
         and _figure_right(out["reach"].result, dict(window=4, layers=2))),
]
