"""PageView: one widget per view, drawn in the page from recordings of the matplotlib figure.

These tests run under ipywidgets 8 and, in ``make test-colab-widgets``, under Colab's 7.7.1.
``test_page_scenes.py`` checks every view of the series against matplotlib's own drawing.
"""

from __future__ import annotations

import base64
import io
import json

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from helpers import show_heatmaps
from helpers.widgets import figure_png, interactive_figure, page
from helpers.widgets.masking import demo_scores, valid_length_view
from helpers.widgets.page import PageView, control_from_widget, scene_json
from helpers.widgets.page import scene_ops as lookup  # the ops the page draws for an index

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def heatmap_view(data: dict):
    """A view of (3, 4) weights whose first n columns share 1/n (n from its slider)."""
    fig = Figure(figsize=(3, 2))

    def draw(n: int) -> Figure:
        weights = torch.zeros(3, 4)
        weights[:, :n] = data["scale"] / n
        return show_heatmaps(weights, mask=weights > 0, vmin=0.0, vmax=1.0, fig=fig)

    return interactive_figure(draw, n=widgets.IntSlider(value=2, min=1, max=4))


def test_controls_become_finite_lists_of_values_with_their_labels():
    cases = [
        (widgets.IntSlider(value=3, min=1, max=7, step=2, description="k"),
         "range", (1, 3, 5, 7), ("1", "3", "5", "7")),
        (widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.5,
                                readout_format=".2f", description="σ"),
         "range", tuple(10 ** e for e in (-1, -0.5, 0, 0.5, 1)),
         ("0.10", "0.32", "1.00", "3.16", "10.00")),
        (widgets.Dropdown(options=[("one", 1), ("two", 2)], value=2, description="pick"),
         "select", (1, 2), ("one", "two")),
        (widgets.SelectionSlider(options=[10, 20], value=10, description="steps"),
         "range", (10, 20), ("10", "20")),
        (widgets.ToggleButtons(options=["a", "b"], description="model"),
         "select", ("a", "b"), ("a", "b")),
        (widgets.Checkbox(value=True, description="causal"), "checkbox", (False, True),
         ("off", "on")),
    ]
    for w, kind, values, labels in cases:
        c = control_from_widget("x", w)
        assert (c.label, c.kind, c.labels) == (w.description, kind, labels)
        if kind == "range" and isinstance(values[0], float):
            np.testing.assert_allclose(c.values, values, rtol=1e-12)
        else:
            assert c.values == values
    with pytest.raises(ValueError, match=r"^control 'x': a page view takes .* got Text$"):
        control_from_widget("x", widgets.Text())


def test_kernel_controls_and_the_page_index_follow_each_other():
    view = heatmap_view({"scale": 1.0})
    slider = view.children[0]
    assert view.index == [1] and view.kwargs == {"n": 2}
    slider.value = 4  # Python moves: the page follows, the figure is redrawn at once
    assert view.index == [3]
    assert float(view.result.axes[0].images[0].get_array()[0, 3]) == 0.25
    view.index = [0]  # the page moves (what the front end sends): the control follows
    assert slider.value == 1
    assert float(view.result.axes[0].images[0].get_array()[0, 0]) == 1.0


def test_the_scene_stores_one_state_per_value_of_what_each_part_depends_on():
    view = valid_length_view(demo_scores(3, 4, 8), valid_lens=[8, 5, 2])  # notebook 03's view
    scene = view.scene_data()
    assert [c["label"] for c in scene["controls"]] == [w.description for w in view.children]
    assert [c["label"][:7] for c in scene["controls"]] == ["batch 0", "batch 1", "batch 2"]
    assert all(c["values"] == [str(n) for n in range(9)] for c in scene["controls"])
    # Each panel (its image and title) depends on its own slider only: 9 states each, not 9³.
    assert sorted(s["deps"] for s in scene["slots"]) == [[0], [0], [1], [1], [2], [2]]
    assert all(len(s["table"]) == 9 for s in scene["slots"])
    assert len(scene["states"]) <= 6 * 9
    for slot in scene["slots"]:
        assert all(0 <= t < len(scene["states"]) for t in slot["table"])
    assert (scene["width"], scene["height"]) == tuple(
        round(v) for v in view.result.bbox.size)
    assert len(view.scene) < 64 * 1024  # the widget state this view adds to a notebook


def test_the_page_draws_the_colours_of_the_png_fallback():
    # The scene's image cells, looked up for a state, are the pixels matplotlib's PNG of that
    # state has there (cells masked grey included), within one level of 255.
    view = heatmap_view({"scale": 1.0})
    scene = view.scene_data()
    for n in (1, 3):
        view.children[0].value = n
        png = np.asarray(Image.open(io.BytesIO(figure_png(view.result))).convert("RGBA"))
        # the heatmap, and the colour bar's solids (one column of 256 colours)
        image, solids = [op for op in lookup(scene, view.index) if op[0] == "i"]
        assert solids[5:7] == [1, 256]
        _, x, y, w, h, cols, rows, palette, data, _ = image
        cells = np.frombuffer(base64.b64decode(data), np.uint8).reshape(rows, cols)
        assert (rows, cols) == (3, 4)
        for r in range(rows):
            for c in range(cols):
                # a quarter into the cell: its centre may hold an annotation
                pixel = png[int(y + (r + 0.25) * h / rows), int(x + (c + 0.25) * w / cols)]
                want = bytes.fromhex(palette[cells[r, c]][1:])
                assert np.abs(pixel.astype(int) - np.frombuffer(want, np.uint8)).max() <= 1, (
                    n, r, c)
        texts = [op[3] for op in lookup(scene, view.index) if op[0] == "t"]
        assert {"Keys", "Queries", "0.00", "1.00"} <= set(texts)  # labels, colour bar ticks


def test_refresh_records_new_data_and_the_page_receives_it():
    data = {"scale": 1.0}
    view = heatmap_view(data)
    before = view.scene_data()
    data["scale"] = 0.5  # e.g. a model retrained in place
    view.refresh()
    after = scene_json(view.scene)
    assert after["frame"] != before["frame"] or after["states"] != before["states"]
    assert float(view.result.axes[0].images[0].get_array()[0, 0]) == 0.25


def test_the_displayed_output_is_the_widget_its_png_and_a_deterministic_text(monkeypatch):
    view = heatmap_view({"scale": 1.0})
    shown = []
    monkeypatch.setattr(page, "display", lambda obj, **kw: shown.append((obj, kw)))
    view._ipython_display_()  # how IPython shows it, under ipywidgets 7 and 8
    ((data, kw),) = shown
    assert kw["raw"] is True and set(data) == {"text/plain", "image/png", WIDGET_VIEW}
    assert data[WIDGET_VIEW]["model_id"] == view.model_id
    assert base64.b64decode(data["image/png"]) == figure_png(view.result)
    assert data["text/plain"] == "[: n = 2]"
    assert view.scene  # recorded when first shown, in the state the page will load
    json.dumps(view.get_state(["scene", "index", "_esm"]))  # plain JSON: no binary buffers
    assert "export default" in view.get_state(["_esm"])["_esm"]


def test_a_bad_first_drawing_raises_and_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"^draw must return a matplotlib Figure .* got int"):
        PageView(lambda n: 3, {"n": widgets.IntSlider()})
    with pytest.raises(ValueError, match=r"^controls must be a dict .* got tuple"):
        PageView(lambda n: Figure(), (widgets.IntSlider(),))
    with pytest.raises(ValueError, match=r"^encoded must be a page view's scene .* got 'abc'"):
        scene_json("abc")


def test_each_state_carries_the_titles_it_draws_for_the_page_to_describe():
    # A title that follows a control: the page looks up a "d" op with the title of that state
    # (what the canvas's aria-label says), and the verified scene equals matplotlib's drawing.
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    fig.suptitle("fixed")

    def draw(n: int) -> Figure:
        ax.set_title(f"n is {n}")
        return fig

    view = interactive_figure(draw, n=widgets.IntSlider(value=1, min=1, max=3))
    scene = view.scene_data()
    for i, n in enumerate((1, 2, 3)):
        described = [op for op in lookup(scene, [i]) if op[0] == "d"]
        assert sorted(described) == [["d", "fixed", 0], ["d", f"n is {n}", 1]]
    page.verify_scene(scene, view._draw, view._controls, [(0,), (1,), (2,)])
