"""The live views' Python side (helpers/widgets/live/__init__.py): what it exports, records and
refuses. The page side is tested in tests/browser/test_live_*.py."""

from __future__ import annotations

import base64
import types

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.colors import Normalize, PowerNorm
from matplotlib.figure import Figure

from helpers.widgets import live
from helpers.widgets._common import start_figure
from helpers.widgets.live import nw


def test_tensor_json_is_the_float32_values_exactly():
    t = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).T  # not contiguous
    got = live.tensor_json(t)
    assert got["shape"] == [5, 3]
    back = np.frombuffer(base64.b64decode(got["f32"]), "<f4").reshape(5, 3)
    assert np.array_equal(back, t.numpy())
    assert t.shape == (5, 3)  # the input untouched


def test_mark_refuses_what_the_page_cannot_draw():
    fig = Figure()
    ax = fig.subplots()
    with pytest.raises(ValueError, match="artist must be an AxesImage, Text, Line2D or "
                                         "PathCollection, got Rectangle"):
        live.mark(ax.bar([0], [1])[0], "bar")
    with pytest.raises(ValueError, match="name must be a non-empty str, got ''"):
        live.mark(ax.plot([0, 1])[0], "")
    with pytest.raises(ValueError, match="vocabulary must be a non-empty list of str"):
        live.mark_ticks(ax.xaxis, "x", [])


def _toy_figure(values: np.ndarray, labels: list[str], title: str, *, centred=False,
                cue: str = "fixed") -> Figure:
    fig = Figure(figsize=(4, 3))
    start_figure(fig, "toy", fixed_layout=True)
    ax = fig.add_axes((0.2, 0.2, 0.6, 0.6))
    im = ax.imshow(values, cmap="viridis", aspect="auto", interpolation="nearest",
                   norm=PowerNorm(0.5, vmin=0, vmax=1))
    live.mark(im, "cells")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("keys")
    ax.xaxis.set_label_coords(0.5, -0.15)
    live.mark_ticks(ax.xaxis, "keys", ["a", "bb", "ccc"])
    ax.set_yticks([])
    live.mark(ax.set_title(title, loc="center" if centred else "left"), "title")
    fig.text(0.02, 0.02, cue)
    return fig


def test_live_scene_records_the_frame_with_a_marker_per_part_and_their_layouts():
    fig = _toy_figure(np.full((2, 3), 0.3), ["a", "bb", "a"], "first")
    scene = live.live_scene(fig)
    markers = [f["live"] for f in scene["frame"] if isinstance(f, dict)]
    assert sorted(markers) == ["cells", "keys", "title"]
    drawn = [op for op in scene["frame"] if isinstance(op, list)]
    assert all(op[3] != "first" for op in drawn if op[0] in ("t", "d"))  # the title is live
    assert any(op[0] == "t" and op[3] == "fixed" for op in drawn)
    cells = scene["layouts"]["cells"]
    want = PowerNorm(0.5, vmin=0, vmax=1)
    assert cells["norm"] == {"kind": "power", "vmin": 0.0, "vmax": 1.0, "gamma": 0.5,
                             "clip": False}
    import matplotlib as mpl
    lut = mpl.colormaps["viridis"](np.arange(256), bytes=True)
    assert cells["lut"] == ["#" + bytes(c).hex() for c in lut]
    assert want(0.3) == pytest.approx(0.3 ** 0.5)
    keys = scene["layouts"]["keys"]
    assert sorted(keys["stamps"]) == ["a", "bb", "ccc"]
    assert [op[3] for op in keys["stamps"]["ccc"] if op[0] == "t"] == ["ccc"]
    assert [op[3] for op in keys["fixed"]] == ["keys"]  # the axis label, fixed
    assert scene["layouts"]["title"]["rank"] == 1 and scene["layouts"]["title"]["op"][3] == "first"


def test_a_centred_live_text_is_refused():
    fig = _toy_figure(np.zeros((1, 1)), ["a"], "t", centred=True)
    with pytest.raises(ValueError, match="live text 'title' must be left-aligned"):
        live.live_scene(fig)


def test_a_part_that_depends_on_the_input_unmarked_is_refused():
    one = live.live_scene(_toy_figure(np.zeros((1, 2)), ["a", "bb"], "t"))
    live.verify_frame(one["frame"], _toy_figure(np.ones((3, 3)), ["ccc", "a", "a"], "u"), "toy")
    with pytest.raises(live.LiveFrameChanged, match="a part not marked live drew differently"):
        live.verify_frame(one["frame"], _toy_figure(np.zeros((1, 2)), ["a", "bb"], "t",
                                                    cue="moved"), "toy")


@pytest.fixture(scope="module")
def model():
    return nw.demo_model(steps=20)


def test_a_live_view_exports_its_model_and_module(model):
    view = nw.live_view(model)
    scene = view.scene_data()
    assert scene["live"]["kind"] == "nw"
    w = np.frombuffer(base64.b64decode(scene["live"]["model"]["w"]["f32"]), "<f4")
    assert w.tolist() == [float(model.w.detach()[0])]
    assert scene["live"]["input"]["text"] == nw.DEFAULT_TEXT
    assert scene["controls"] == [{"name": "w", "label": "w", "kind": "select",
                                  "values": list(nw.W_CHOICES)}]
    esm = view._esm
    assert esm.count("const LIVE_ENGINE") == 1 and "function liveBuild" in esm
    assert esm.count("export default") == 1  # view.js's: one module


def test_a_retrained_model_goes_to_the_page(model):
    view = nw.live_view(model)
    before = view.scene
    other = nw.demo_model(steps=40)
    view.model = other
    assert view.scene != before
    w = base64.b64decode(view.scene_data()["live"]["model"]["w"]["f32"])
    assert np.frombuffer(w, "<f4")[0] == np.float32(other.w.detach()[0])


def test_the_text_the_page_sets_draws_the_figure_and_a_bad_one_is_kept_out(model):
    view = nw.live_view(model)
    view.text = "3 | 1 1, 2 2"  # what the page does as the reader types
    assert "ŷ(3.00)" in view.result.axes[0].get_title(loc="left")
    view.text = "3 | 1 1, 2"  # refused in the page: the figure keeps the last valid input
    assert "2 points" in view.result.axes[0].get_title(loc="left")
    with pytest.raises(ValueError, match="Point 2 must be two numbers x y, got '2'"):
        view.set_text("3 | 1 1, 2")
    bundle, _ = view._repr_mimebundle_()
    assert bundle["text/plain"] == ("[live.nw: live, input '3 | 1 1, 2 2', "
                                    "w = trained scalar w]")
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_control_set_in_python_moves_the_page(model):
    view = nw.live_view(model)
    assert view.index == [1]
    view._widgets["w"].value = nw.W_CHOICES[0]
    assert view.index == [0]
    view.index = [1]  # the page moved it back
    assert view._widgets["w"].value == nw.W_CHOICES[1]


@pytest.mark.parametrize("kind", live.KINDS)
def test_every_live_view_displays_its_widget_its_png_and_its_text(kind):
    # What a notebook stores (here under ipywidgets 8, and 7 in the Colab stage): the widget,
    # the PNG of the figure for the input (GitHub, an untrusted notebook) and a plain text.
    import importlib

    module = importlib.import_module(f"helpers.widgets.live.{kind}")
    view = module.live_view(nw.demo_model(steps=20)) if kind == "nw" else module.live_view()
    bundle, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert bundle["text/plain"].startswith(f"[live.{kind}: live, input {module.DEFAULT_TEXT!r}")
    assert view.scene_data()["live"]["kind"] == kind
