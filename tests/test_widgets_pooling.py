"""The Nadaraya-Watson view: what it draws equals the regression computed here for the slider values."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers import make_regression_data, nadaraya_watson
from helpers.widgets.pooling import demo_views, draw_nw, nw_view
from tests.conftest import control, shown_png


def drawn(fig):
    """(prediction line's y, heatmap array, heatmap colour limits) as drawn in ``fig``."""
    image = fig.axes[1].images[0]
    return np.asarray(fig.axes[0].lines[1].get_ydata()), np.asarray(image.get_array()), image.get_clim()


def gaussian_by_hand(data, bandwidth):
    """softmax over keys of -((x - x_i)/h)² / 2, written as exp / row sum."""
    x, xi = data.x_test.double()[:, None], data.x_train.double()[None, :]
    k = torch.exp(-(((x - xi) / bandwidth) ** 2) / 2)
    w = k / k.sum(1, keepdim=True)
    return (w @ data.y_train.double()).numpy(), w.numpy()


def boxcar_by_hand(data, bandwidth):
    """Average of the y_i with |x - x_i| <= h (every query here reaches at least one key)."""
    inside = ((data.x_test[:, None] - data.x_train[None, :]).abs() <= bandwidth).double()
    assert inside.sum(1).min() > 0
    w = inside / inside.sum(1, keepdim=True)
    return (w @ data.y_train.double()).numpy(), w.numpy()


@pytest.fixture
def data():
    return make_regression_data(n_train=23, n_test=17, seed=4)  # Q != N


def test_the_first_drawing_is_the_gaussian_with_bandwidth_one(data):
    view = nw_view(data)
    assert isinstance(view, PageView) and isinstance(view.result, Figure)
    assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept
    y_line, image, clim = drawn(view.result)
    y_hand, w_hand = gaussian_by_hand(data, 1.0)
    assert image.shape == (17, 23)
    np.testing.assert_allclose(image, w_hand, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y_line, y_hand, rtol=1e-5, atol=1e-6)
    assert clim == (0.0, 1.0)


def test_moving_the_bandwidth_redraws_fit_and_heatmap_together_in_the_same_figure(data):
    view = nw_view(data)
    fig = view.result
    before_line, before_image, _ = (a.copy() if isinstance(a, np.ndarray) else a for a in drawn(fig))
    slider = control(view, "bandwidth σ")
    slider.value = 0.3
    assert view.result is fig
    y_line, image, clim = drawn(fig)
    y_ref, w_ref = nadaraya_watson(data.x_train, data.y_train, data.x_test, "gaussian", slider.value)
    np.testing.assert_allclose(image, w_ref.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y_line, y_ref.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(image, gaussian_by_hand(data, slider.value)[1], rtol=1e-5, atol=1e-7)
    assert not np.allclose(image, before_image) and not np.allclose(y_line, before_line)
    assert clim == (0.0, 1.0)  # the colour scale does not follow the weights
    assert "0.3" in fig.axes[0].get_title()


def test_choosing_a_kernel_redraws_with_that_kernel(data):
    view = nw_view(data)
    control(view, "bandwidth σ").value = 0.8
    _, gaussian_image, _ = drawn(view.result)
    gaussian_image = gaussian_image.copy()
    control(view, "kernel").value = "boxcar"
    y_line, image, _ = drawn(view.result)
    y_hand, w_hand = boxcar_by_hand(data, 0.8)
    np.testing.assert_allclose(image, w_hand, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y_line, y_hand, rtol=1e-5, atol=1e-6)
    assert not np.allclose(image, gaussian_image)
    assert "boxcar" in view.result.axes[0].get_title()


@pytest.mark.parametrize("kernel", ["epanechnikov", "constant", "gaussian", "boxcar"])
def test_every_kernel_draws_what_nadaraya_watson_returns(data, kernel):
    view = nw_view(data, kernel="gaussian", bandwidth=2.0)
    control(view, "kernel").value = kernel
    control(view, "bandwidth σ").value = 0.05  # narrow: compact kernels leave queries unreached
    y_line, image, _ = drawn(view.result)
    y_ref, w_ref = nadaraya_watson(data.x_train, data.y_train, data.x_test, kernel, 0.05)
    np.testing.assert_allclose(image, w_ref.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y_line, y_ref.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.isnan(image).any()
    np.testing.assert_allclose(image.sum(1), np.ones(17), rtol=1e-5)


def test_constant_kernel_draws_average_pooling(data):
    view = nw_view(data, kernel="constant")
    y_line, image, _ = drawn(view.result)
    np.testing.assert_allclose(image, np.full((17, 23), 1 / 23), rtol=1e-6)
    np.testing.assert_allclose(y_line, np.full(17, data.y_train.mean().item()), rtol=1e-5)


def test_draw_nw_alone_makes_a_two_panel_figure_with_a_colorbar(data):
    fig = draw_nw(data, "epanechnikov", 1.5)
    assert isinstance(fig, Figure) and len(fig.axes) == 3  # fit, heatmap, colorbar
    _, image, _ = drawn(fig)
    _, w_ref = nadaraya_watson(data.x_train, data.y_train, data.x_test, "epanechnikov", 1.5)
    np.testing.assert_allclose(image, w_ref.numpy(), rtol=1e-5, atol=1e-7)
    ax_fit = fig.axes[0]
    np.testing.assert_allclose(ax_fit.lines[0].get_ydata(), data.y_truth.numpy())
    np.testing.assert_allclose(ax_fit.collections[0].get_offsets(),
                               np.stack([data.x_train.numpy(), data.y_train.numpy()], 1))


def test_draw_nw_updates_its_own_figure_in_place_and_redraws_a_foreign_one(data):
    fig = draw_nw(data, "gaussian", 1.0)
    line, image = fig.axes[0].lines[1], fig.axes[1].images[0]
    assert draw_nw(data, "gaussian", 0.2, fig=fig) is fig
    assert fig.axes[0].lines[1] is line and fig.axes[1].images[0] is image  # same artists
    other = make_regression_data(n_train=9, n_test=5)  # other sizes: the layout is rebuilt
    draw_nw(other, "gaussian", 0.2, fig=fig)
    assert fig.axes[1].images[0].get_array().shape == (5, 9) and len(fig.axes) == 3
    foreign = Figure()
    foreign.subplots(2, 2)
    assert draw_nw(data, "boxcar", 0.5, fig=foreign) is foreign and len(foreign.axes) == 3


def test_the_default_view_uses_the_notebook_data():
    view = nw_view()
    default = make_regression_data()
    _, image, _ = drawn(view.result)
    _, w_ref = nadaraya_watson(default.x_train, default.y_train, default.x_test)
    np.testing.assert_allclose(image, w_ref.numpy(), rtol=1e-5, atol=1e-7)
    slider = control(view, "bandwidth σ")
    assert slider.continuous_update is False and math.isclose(slider.value, 1.0)
    assert sorted(control(view, "kernel").options) == ["boxcar", "constant", "epanechnikov", "gaussian"]


def test_demo_views_builds_every_view():
    views = demo_views()
    assert set(views) == {"nw_view"}
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)


def test_one_fixed_colour_scale_for_every_bandwidth_and_kernel(data):
    """0 to 1, square-root spaced: a narrow kernel's one-hot rows are dark, a wide kernel's
    1/K weights are pale but visible, and no slider move rescales the map."""
    view = nw_view(data)
    image = view.result.axes[1].images[0]
    colorbar_ticks = list(view.result.axes[2].get_yticks())
    for kernel, bandwidth in [("gaussian", 0.01), ("gaussian", 10.0), ("boxcar", 0.5),
                              ("constant", 1.0)]:
        control(view, "kernel").value = kernel
        control(view, "bandwidth σ").value = bandwidth
        norm = view.result.axes[1].images[0].norm
        assert view.result.axes[1].images[0] is image
        assert isinstance(norm, PowerNorm) and norm.gamma == 0.5
        assert (norm.vmin, norm.vmax) == (0.0, 1.0)
        assert list(view.result.axes[2].get_yticks()) == colorbar_ticks
    norm = image.norm
    uniform = norm(1 / 23)  # the constant kernel's weights: pale, but far from white
    assert 0.15 < uniform < 0.25 and norm(1.0) == 1.0 and norm(0.0) == 0.0


@pytest.mark.parametrize("bad", [None, "data", (1, 2)])
def test_data_that_is_not_regression_data_is_refused(data, bad):
    with pytest.raises(ValueError, match="data must be a RegressionData"):
        draw_nw(bad)  # was an AttributeError (.x_train)
    if bad is not None:  # None: the view's default data
        with pytest.raises(ValueError, match="data must be a RegressionData or None"):
            nw_view(bad)  # was a failing first drawing


@pytest.mark.parametrize("bandwidth", [torch.tensor(0.5), True, 0.0, float("nan")])
def test_a_bandwidth_that_is_not_a_positive_number_is_refused(data, bandwidth):
    # a 0-d tensor was drawn (and formatted into the title) as if it were a number
    with pytest.raises(ValueError, match="bandwidth must be a finite number > 0, got"):
        draw_nw(data, "gaussian", bandwidth)


def test_a_figure_that_is_not_one_is_refused(data):
    with pytest.raises(ValueError, match="fig must be a matplotlib Figure or None, got str"):
        draw_nw(data, fig="fig")  # was an AttributeError


@pytest.mark.parametrize("kernel", ["bogus", None, 2])
def test_the_view_refuses_an_unknown_kernel(data, kernel):  # was a TraitError
    with pytest.raises(ValueError, match=r"kernel must be one of \['boxcar', 'constant', "
                                         r"'epanechnikov', 'gaussian'\], got"):
        nw_view(data, kernel=kernel)


@pytest.mark.parametrize("bandwidth", [0.005, 20.0, -1.0, float("inf")])
def test_the_view_refuses_a_bandwidth_off_its_slider(data, bandwidth):
    # the slider (10^-2 to 10^1) clipped 0.005 and 20 without a word; -1 and inf drew nothing
    with pytest.raises(ValueError, match=r"bandwidth must lie on the slider, in \[0.01, 10\], got"):
        nw_view(data, bandwidth=bandwidth)
    for edge in (0.01, 10.0):
        assert math.isclose(control(nw_view(data, bandwidth=edge), "bandwidth σ").value, edge)
