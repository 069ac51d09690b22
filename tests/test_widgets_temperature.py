"""The temperature view: what it draws equals softmax(scores / τ) and its entropy, computed
here."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers.widgets.temperature import (
    demo_scores, demo_views, draw_temperature, entropy, temperature_view, temperature_weights,
)
from tests.conftest import shown_png


def by_hand(scores, tau):
    """exp(s / τ) / row sum in float64 (shifted by the row maximum so small τ cannot overflow),
    and each row's -Σ w log w with 0 log 0 = 0."""
    s = scores.double() / tau
    e = torch.exp(s - s.max(dim=1, keepdim=True).values)
    w = e / e.sum(dim=1, keepdim=True)
    logs = torch.where(w > 0, torch.log(w), torch.zeros_like(w))
    return w.numpy(), (-(w * logs).sum(dim=1)).numpy()


def drawn(fig):
    """(heatmap array, colour limits, cell texts, bar widths, bar texts) as drawn in ``fig``."""
    ax_map, ax_bar = fig.subfigs[0].axes[0], fig.subfigs[1].axes[0]
    image = ax_map.images[0]
    return (np.asarray(image.get_array()), image.get_clim(), [t.get_text() for t in ax_map.texts],
            np.array([p.get_width() for p in ax_bar.patches]),
            [t.get_text().strip() for t in ax_bar.texts])


@pytest.fixture
def scores():
    return torch.tensor([[1.0, -0.5, 0.3, 2.0, 0.0],
                         [0.2, 0.2, 0.2, 0.2, 0.2],
                         [3.0, 2.5, -1.0, 0.0, 1.0]])  # (Q, K) = (3, 5), Q != K


def slider(view):
    return next(c for c in view.children if isinstance(c, widgets.FloatLogSlider))


def test_weights_and_entropy_match_the_formulas(scores):
    for tau in (0.05, 1.0, 7.0):
        w_hand, h_hand = by_hand(scores, tau)
        w = temperature_weights(scores, tau)
        np.testing.assert_allclose(w.numpy(), w_hand, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(entropy(torch.from_numpy(w_hand)).numpy(), h_hand, rtol=1e-12)
        np.testing.assert_allclose(entropy(w).numpy(), h_hand, rtol=1e-5, atol=1e-6)


def test_the_two_limits_one_hot_and_uniform(scores):
    cold = temperature_weights(scores, 1e-3)
    assert torch.equal(cold[0], torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0]))  # all on the top score
    np.testing.assert_allclose(entropy(cold)[[0, 2]].numpy(), 0.0, atol=1e-6)
    hot = temperature_weights(scores, 1e4)
    np.testing.assert_allclose(hot.numpy(), np.full((3, 5), 0.2), atol=1e-4)
    np.testing.assert_allclose(entropy(hot.double()).numpy(), math.log(5), atol=1e-7)
    # equal scores: uniform at every temperature, entropy log K
    for tau in (1e-3, 1.0, 1e4):
        np.testing.assert_allclose(entropy(temperature_weights(scores, tau)[1:2].double()).item(),
                                   math.log(5), rtol=1e-6)


def test_entropy_grows_with_temperature(scores):
    taus = [0.01, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0]
    ent = np.stack([entropy(temperature_weights(scores.double(), t)).numpy() for t in taus])
    assert (np.diff(ent[:, [0, 2]], axis=0) > 0).all()
    assert (ent <= math.log(5) + 1e-9).all()


def test_bad_input_is_rejected_with_a_message(scores):
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
            temperature_weights(scores, bad)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0, got '1'"):
        temperature_weights(scores, "1")
    with pytest.raises(ValueError, match=r"scores must have 2 dimensions \(Q, K\), got 3"):
        temperature_weights(scores[None], 1.0)
    with pytest.raises(ValueError, match="floating-point"):
        temperature_weights(torch.ones(2, 3, dtype=torch.long), 1.0)
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        temperature_view(scores, temperature=0.0)


def test_any_real_temperature_works_and_a_tensor_or_bool_is_refused(scores):
    w_hand, _ = by_hand(scores, 0.5)
    for tau in (np.float32(0.5), np.float64(0.5), 0.5):  # NumPy reals are numbers (was refused)
        np.testing.assert_allclose(temperature_weights(scores, tau).numpy(), w_hand, rtol=1e-5,
                                   atol=1e-7)
    for bad in (torch.tensor(0.5), True):  # a 0-d tensor was taken as a number
        with pytest.raises(ValueError, match="temperature must be a finite number > 0, got"):
            temperature_weights(scores, bad)


def test_scores_without_keys_or_on_meta_and_odd_weights_are_refused(scores):
    with pytest.raises(ValueError, match=r"scores must have at least one query and one key .*got"):
        temperature_weights(torch.zeros(3, 0), 1.0)  # rows of no weights cannot sum to 1
    with pytest.raises(ValueError, match=r"scores must have at least one query and one key .*got"):
        draw_temperature(torch.zeros(0, 4), 1.0)
    meta = torch.empty(3, 5, device="meta")  # computed nothing and returned an empty shell
    with pytest.raises(ValueError, match="scores must be on a device that holds data, got meta"):
        temperature_weights(meta, 1.0)
    with pytest.raises(ValueError, match="weights must be on a device that holds data, got meta"):
        entropy(meta)
    with pytest.raises(ValueError, match=r"weights must have at least 1 dimension \(\.\.\., K\), got 0"):
        entropy(torch.tensor(0.5))  # was -0.5 log 0.5 of a lone number


def test_a_figure_that_is_not_one_is_refused(scores):
    with pytest.raises(ValueError, match="fig must be a matplotlib Figure or None, got str"):
        draw_temperature(scores, 1.0, fig="fig")  # was an AttributeError


def test_the_view_refuses_a_start_outside_its_slider_and_scores_that_are_not_a_tensor(scores):
    for tau in (0.005, 150.0):  # the slider would have clipped it to 0.01 or 100 without a word
        with pytest.raises(ValueError, match=r"temperature must lie on the slider, in \[0.01, 100\], got"):
            temperature_view(scores, tau)
    for tau in (0.01, 100.0):
        assert slider(temperature_view(scores, tau)).value == pytest.approx(tau)
    with pytest.raises(ValueError, match="scores must be a torch.Tensor of shape \\(Q, K\\), got list"):
        temperature_view([[1.0, 2.0]])  # was an AttributeError (.detach)


def test_inputs_are_not_changed(scores):
    before = scores.clone()
    temperature_weights(scores, 0.5)
    draw_temperature(scores, 0.5)
    view = temperature_view(scores)
    assert torch.equal(scores, before)
    scores[0, 0] = 100.0  # the view copied the scores: later changes do not show
    slider(view).value = 1.0 + 1e-9
    np.testing.assert_allclose(drawn(view.result)[0], by_hand(before, slider(view).value)[0],
                               rtol=1e-5, atol=1e-7)


def test_the_first_drawing_is_the_plain_softmax(scores):
    view = temperature_view(scores)
    assert isinstance(view, PageView) and isinstance(view.result, Figure)
    assert shown_png(view).startswith(b"\x89PNG")
    image, clim, cells, bars, bar_texts = drawn(view.result)
    w_hand, h_hand = by_hand(scores, 1.0)
    np.testing.assert_allclose(image, w_hand, rtol=1e-5, atol=1e-7)
    assert clim == (0.0, 1.0)
    assert cells == [f"{v:.2f}" for v in w_hand.ravel()]
    np.testing.assert_allclose(bars, h_hand, rtol=1e-6)
    assert bar_texts == [f"{v:.2f}" for v in h_hand]
    assert "τ = 1" in view.result.subfigs[0].axes[0].get_title()


def test_moving_the_slider_redraws_in_place_with_a_fixed_colour_scale(scores):
    view = temperature_view(scores)
    fig = view.result
    image_artist = fig.subfigs[0].axes[0].images[0]
    s = slider(view)
    assert s.min == -2 and s.max == 2 and s.base == 10 and s.continuous_update is False
    assert s.description == "temperature τ"
    for value in (0.01, 100.0, 0.3):
        s.value = value
        assert view.result is fig and fig.subfigs[0].axes[0].images[0] is image_artist
        image, clim, cells, bars, bar_texts = drawn(fig)
        w_hand, h_hand = by_hand(scores, s.value)
        np.testing.assert_allclose(image, w_hand, rtol=1e-5, atol=1e-7)
        assert clim == (0.0, 1.0)  # never rescaled
        assert cells == [f"{v:.2f}" for v in w_hand.ravel()]
        np.testing.assert_allclose(bars, h_hand, rtol=1e-5, atol=1e-7)
        title = fig.subfigs[1].axes[0].get_title()
        assert f"mean {h_hand.mean():.2f}" in title
    s.value = 0.01
    image, _, _, bars, _ = drawn(fig)
    assert image[0, 3] > 0.999 and image[2, 0] > 0.99 and bars[[0, 2]].max() < 0.01
    s.value = 100.0
    image, _, _, bars, _ = drawn(fig)
    np.testing.assert_allclose(image, 0.2, atol=0.01)
    np.testing.assert_allclose(bars, math.log(5), atol=1e-3)


def test_the_uniform_maximum_is_drawn_at_log_k(scores):
    fig = draw_temperature(scores, 2.0)
    ax_bar = fig.subfigs[1].axes[0]
    (line,) = ax_bar.lines
    assert line.get_xdata()[0] == pytest.approx(math.log(5))
    assert "log 5" in ax_bar.get_xlabel()
    assert ax_bar.get_xlim()[1] > math.log(5)  # the maximum fits on the fixed axis


def test_a_foreign_figure_or_other_shape_is_redrawn(scores):
    fig = draw_temperature(scores, 1.0)
    assert draw_temperature(scores[:2, :3], 1.0, fig=fig) is fig
    assert drawn(fig)[0].shape == (2, 3) and len(drawn(fig)[3]) == 2
    foreign = Figure()
    foreign.subplots(2, 2)
    assert draw_temperature(scores, 0.5, fig=foreign) is foreign
    np.testing.assert_allclose(drawn(foreign)[0], by_hand(scores, 0.5)[0], rtol=1e-5, atol=1e-7)


def test_demo_views_builds_the_notebook_view():
    views = demo_views()
    assert set(views) == {"temperature_view"}
    view = views["temperature_view"]
    np.testing.assert_allclose(drawn(view.result)[0], by_hand(demo_scores(), 1.0)[0],
                               rtol=1e-5, atol=1e-7)
    assert demo_scores().shape == (3, 4)
