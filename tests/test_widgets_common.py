"""interactive_figure: the pattern every slider view is built on (a PageView)."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from helpers import show_heatmaps
from helpers.widgets import figure_png, interactive_figure
from helpers.widgets.page import PageView


def make_view():
    calls = []
    fig = show_heatmaps(torch.zeros(3, 4))

    def draw(n: int):
        calls.append(n)
        weights = torch.zeros(3, 4)
        weights[:, :n] = 1.0 / n
        return show_heatmaps(weights, mask=weights > 0, fig=fig)

    view = interactive_figure(draw, n=widgets.IntSlider(value=2, min=1, max=4))
    return view, fig, calls


def test_first_drawing_happens_at_once_and_result_is_the_figure():
    view, fig, calls = make_view()
    assert calls == [2]
    assert view.result is fig
    assert isinstance(view, PageView) and view.kwargs == {"n": 2}


def test_moving_the_slider_redraws_the_same_figure():
    view, fig, calls = make_view()
    slider = view.children[0]
    slider.value = 4
    assert calls == [2, 4] and view.result is fig
    arr = fig.axes[0].images[0].get_array()
    assert not arr.mask.any() and float(arr[0, 3]) == 0.25


def test_the_displayed_output_carries_the_png_of_the_current_state_and_a_plain_text():
    # GitHub, VS Code and an untrusted JupyterLab show the image/png beside the widget view;
    # nbval and a terminal see the text/plain, which names the view and its values only.
    import base64

    view, fig, _ = make_view()
    data, _ = view._repr_mimebundle_()
    assert set(data) == {"text/plain", "image/png", "application/vnd.jupyter.widget-view+json"}
    first = base64.b64decode(data["image/png"])
    assert first[:8] == b"\x89PNG\r\n\x1a\n" and first == figure_png(fig)
    assert data["text/plain"] == "[: n = 2]" and "0x" not in data["text/plain"]
    view.children[0].value = 3
    data, _ = view._repr_mimebundle_()
    assert base64.b64decode(data["image/png"]) == figure_png(fig) != first  # the new state
    assert data["text/plain"] == "[: n = 3]"


def test_figure_png_draws_once_where_a_tight_bbox_draws_twice(monkeypatch):
    from IPython.core.pylabtools import print_figure

    fig = show_heatmaps(torch.eye(3))
    fig.draw_without_rendering()
    fig.set_layout_engine(None)  # laid out once; no engine left to pre-draw
    draws = []
    real = type(fig).draw
    monkeypatch.setattr(type(fig), "draw", lambda self, r: (draws.append(1), real(self, r))[1])
    print_figure(fig, "png", bbox_inches="tight")  # what IPython's default display does
    assert len(draws) == 2
    png = figure_png(fig)
    assert png.startswith(b"\x89PNG") and len(draws) == 3


def _draws_per_png(fig) -> int:
    """How many times ``figure_png`` draws ``fig``."""
    calls = []
    real = fig.draw
    fig.draw = lambda renderer: (calls.append(1), real(renderer))[1]
    figure_png(fig)
    return len(calls)


def test_freeze_layout_keeps_positions_and_draws_each_png_once():
    import matplotlib as mpl
    from matplotlib.figure import Figure

    from helpers.widgets._common import freeze_layout

    placeholder = Figure(layout="constrained")
    placeholder.subplots(2, 2)
    placeholder.draw_without_rendering()
    placeholder.set_layout_engine("none")  # what the views used to do
    assert _draws_per_png(placeholder) == 2  # savefig's extra pass: the cost freeze_layout removes
    fig = Figure(layout="constrained")
    axes = fig.subplots(2, 2)
    fig.suptitle("a title the layout makes room for")
    with mpl.rc_context({"figure.constrained_layout.use": True}):  # rc asking for an engine:
        freeze_layout(fig)  # None must still mean none
    assert fig.get_layout_engine() is None
    laid_out = [ax.get_position().bounds for ax in axes.flat]
    assert _draws_per_png(fig) == 1
    axes[0, 0].set_title("a longer title after the layout " * 3)
    figure_png(fig)
    assert [ax.get_position().bounds for ax in axes.flat] == laid_out  # frozen


def test_a_first_drawing_that_fails_raises_its_own_error():
    # ipywidgets only logs an error of the callback: the view used to come back with no figure
    # (.result None), the reader seeing bare sliders and the caller no error.
    import pytest

    def fragile(n: int):
        raise ValueError(f"n must be odd, got {n}")

    with pytest.raises(ValueError, match=r"^n must be odd, got 2$"):
        interactive_figure(fragile, n=widgets.IntSlider(value=2, min=1, max=4))
    with pytest.raises(ValueError, match=r"^draw must return a matplotlib Figure .* got NoneType"):
        interactive_figure(lambda n: None, n=widgets.IntSlider(value=2, min=1, max=4))


def test_bad_arguments_are_refused_clearly():
    import pytest
    from matplotlib.figure import Figure

    from helpers.widgets._common import start_figure

    slider = widgets.IntSlider(value=2, min=1, max=4)
    for call, match in ((lambda: interactive_figure(None, n=slider), r"^draw must be a callable"),
                        (lambda: figure_png("x"), r"^fig must be a matplotlib Figure, got str"),
                        (lambda: start_figure(Figure(), 3), r"^label must be a str, got int"),
                        (lambda: start_figure(Figure(), "v", fixed_layout=1),
                         r"^fixed_layout must be True or False, got 1")):
        with pytest.raises(ValueError, match=match):
            call()


def test_set_image_data_sets_only_what_changes():
    import numpy as np
    from matplotlib.figure import Figure

    from helpers.widgets._common import set_image_data

    data = np.array([[0.1, np.nan], [0.3, 0.4]])
    image = Figure().subplots().imshow(data)
    image.stale = False
    # The same values (NaN masked, as set_data masks it): nothing is set, nothing marked.
    assert set_image_data(image, data.copy()) is False and not image.stale
    held = image.get_array()
    changes = {
        "a value": np.array([[0.1, np.nan], [0.3, 0.5]]),
        "the mask": np.ma.masked_array(data, mask=[[True, True], [False, False]]),
        "the shape": np.array([[0.1, np.nan, 0.0], [0.3, 0.4, 0.0]]),
        "the dtype": data.astype(np.float32),
    }
    for what, new in changes.items():
        image.set_data(data)
        image.stale = False
        assert set_image_data(image, new) is True, what
        assert image.stale, what
        assert image.get_array().shape == np.shape(new) and image.get_array() is not held, what
    np.testing.assert_array_equal(np.ma.getmaskarray(image.get_array()), np.isnan(data))
