"""Every slider view of the series, as the page draws it, against matplotlib's own drawing.

For each view (``demo_views()`` of every widget module: the views the notebooks show), the
ops the page looks up for a state must be exactly what the recording renderer writes when the
whole figure is drawn in that state: every state for the smaller views, a sample of states
(the defaults, both ends of every control, random ones) for the larger. The image cells must
have matplotlib's colours for their values, and the recorded text must be the figure's text.
(That the cells are the PNG fallback's pixels: ``test_widgets_page.py``; that the canvas shows
them: the browser tests.)
Slower than the other widget tests (every view records its scene), so not re-run under
ipywidgets 7: ``test_widgets_page.py`` covers the widget there.
"""

from __future__ import annotations

import base64
import importlib
import itertools
import math
import random

import numpy as np
import pytest
from matplotlib.image import AxesImage

from helpers.widgets._record import record_figure
from tests.test_widgets_page import lookup

VIEWS = {  # module → the keys of its demo_views(): every view the notebooks show
    "temperature": ["temperature_view"], "pooling": ["nw_view"],
    "masking": ["valid_lens_per_row", "valid_lens_per_query"],
    "scoring": ["scaling", "hidden_size"], "seq2seq": ["alignment"], "multihead": ["training"],
    "positional": ["encoding", "rotation"], "transformer": ["causal", "explorer"],
    "scale": ["online", "tiles", "gqa"], "rotary": ["shift", "frequencies"],
}
EXHAUSTIVE = 120  # views with at most this many states are checked in every state
SAMPLED = 16  # random states beyond the defaults and the ends of each control
STATE_BUDGET = 1024 * 1024  # widget state per notebook; one view may use at most half of it


def _views():
    return [pytest.param(m, k, id=f"{m}.{k}") for m, keys in VIEWS.items() for k in keys]


@pytest.fixture(scope="module")
def built_views():
    cache = {}

    def get(module: str, key: str):
        if module not in cache:
            cache[module] = importlib.import_module(f"helpers.widgets.{module}").demo_views()
            assert sorted(cache[module]) == sorted(VIEWS[module])  # no view left unchecked
        return cache[module][key]

    return get


def whole_figure_ops(view, index: list[int]) -> list:
    """What the recording renderer writes when the view's figure is drawn whole in ``index``."""
    values = {c.name: c.values[i] for c, i in zip(view._controls, index)}
    return record_figure(view._draw(**values))


def states_to_check(scene: dict, default: list[int]) -> list[list[int]]:
    sizes = [len(c["values"]) for c in scene["controls"]]
    if math.prod(sizes) <= EXHAUSTIVE:
        return [list(s) for s in itertools.product(*map(range, sizes))]
    states = [list(default)]
    for c, n in enumerate(sizes):  # both ends of every control, the others at their defaults
        for i in (0, n - 1):
            states.append(default[:c] + [i] + default[c + 1:])
    rng = random.Random(0)
    states += [[rng.randrange(n) for n in sizes] for _ in range(SAMPLED)]
    return states


@pytest.mark.parametrize("module, key", _views())
def test_the_page_draws_what_matplotlib_draws_in_every_state_checked(module, key, built_views):
    view = built_views(module, key)
    scene = view.scene_data()
    default = list(view.index)
    assert len(view.scene) <= STATE_BUDGET // 2, f"{len(view.scene)} bytes of widget state"
    for index in states_to_check(scene, default):
        assert lookup(scene, index) == whole_figure_ops(view, index), f"state {index}"
    view.update()  # the figure back in the controls' state


def _cells_rgba(op: list) -> np.ndarray:
    """An image op's cells as (rows, cols, 4) bytes, row 0 at the top."""
    _, x, y, w, h, cols, rows, palette, data, clip = op
    cells = np.frombuffer(base64.b64decode(data), np.uint8 if len(palette) <= 256 else "<u2")
    table = np.array([[int(c[k:k + 2], 16) for k in (1, 3, 5, 7)] for c in palette], np.uint8)
    return table[cells.reshape(rows, cols)]


@pytest.mark.parametrize("module, key", _views())
def test_heatmap_cells_have_the_colour_map_of_their_values_and_the_texts_arrive(
        module, key, built_views):
    # Each image the figure shows is in the page as cells whose colours are matplotlib's colour
    # map of the values (its norm, fixed scale, masked and NaN colours), exactly; the figure's
    # titles and labels arrive as text runs.
    view = built_views(module, key)
    scene = view.scene_data()
    ops = lookup(scene, view.index)
    fig = view.update()  # (another test may have drawn other states into the figure)
    images = [op for op in ops if op[0] == "i"]
    for im in fig.findobj(AxesImage):
        if not im.get_visible() or not (im.axes and im.axes.get_visible()):
            continue
        values = np.ma.masked_invalid(im.get_array())
        want = im.to_rgba(values, bytes=True)  # (rows, cols, 4), row 0 = the array's first
        if im.origin == "lower":
            want = want[::-1]
        (x0, x1, y0, y1) = im.get_extent()
        if x0 > x1:
            want = want[:, ::-1]
        if (y0 < y1) != (im.origin == "lower"):  # an extent that flips the rows again
            want = want[::-1]
        alpha = im.get_alpha()
        if alpha is not None:
            want = want.copy()
            want[..., 3] = np.round(want[..., 3] * alpha)
        assert any(_cells_rgba(op).shape == want.shape and (_cells_rgba(op) == want).all()
                   for op in images), f"no image op with the colours of {im} ({want.shape})"
    texts = {t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))
             if t.get_text().strip() and t.get_visible() and "$" not in t.get_text()}
    drawn = {op[3] for op in ops if op[0] == "t"}
    assert texts & drawn and len(drawn) >= min(len(texts), 3)
