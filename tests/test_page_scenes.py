"""Every slider view of the series, as the page draws it, against matplotlib's own drawing.

For each view (``demo_views()`` of every widget module: the views the notebooks show), the
ops the page looks up for a state must be exactly what the recording renderer writes when the
whole figure is drawn in that state, in every state a reader can reach (2,705 states over the
series; a build checks only a sample of the larger views). The image cells must
have matplotlib's colours for their values, and the recorded text must be the figure's text.
(That the cells are the PNG fallback's pixels: ``test_widgets_page.py``; that the canvas shows
them: the browser tests.)
Slower than the other widget tests (every view records its scene), so not re-run under
ipywidgets 7: ``test_widgets_page.py`` covers the widget there.
"""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
from matplotlib.image import AxesImage

from helpers.widgets._record import record_figure
from helpers.widgets.page import scene_ops as lookup
from tests.test_widgets_record import cells_rgba

VIEWS = {  # module → the keys of its demo_views(): every view the notebooks show
    "temperature": ["temperature_view"], "pooling": ["nw_view"],
    "masking": ["valid_lens_per_row", "valid_lens_per_query"],
    "scoring": ["scaling", "hidden_size"], "seq2seq": ["alignment"], "multihead": ["training"],
    "positional": ["encoding", "rotation"], "transformer": ["causal", "explorer"],
    "scale": ["online", "tiles", "gqa"], "rotary": ["shift", "frequencies"],
    "linear": ["states", "features", "recall"], "windows": ["reach"],
    "kv_economy": ["streaming", "latent"],
}
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


def every_state(scene: dict) -> list[list[int]]:
    return [list(s) for s in itertools.product(*(range(len(c["values"]))
                                                 for c in scene["controls"]))]


@pytest.mark.parametrize("module, key", _views())
def test_the_page_draws_what_matplotlib_draws_in_every_state(module, key, built_views):
    view = built_views(module, key)
    scene = view.scene_data()
    assert len(view.scene) <= STATE_BUDGET // 2, f"{len(view.scene)} bytes of widget state"
    for index in every_state(scene):
        assert lookup(scene, index) == whole_figure_ops(view, index), f"state {index}"
    view.update()  # the figure back in the controls' state


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
        assert any(cells_rgba(op).shape == want.shape and (cells_rgba(op) == want).all()
                   for op in images), f"no image op with the colours of {im} ({want.shape})"
    texts = {t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))
             if t.get_text().strip() and t.get_visible() and "$" not in t.get_text()}
    drawn = {op[3] for op in ops if op[0] == "t"}
    assert texts & drawn and len(drawn) >= min(len(texts), 3)
