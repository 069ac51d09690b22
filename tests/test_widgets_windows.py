"""The view of notebook 11 draws what the formulas say: one layer's sliding-window band, what
output i of L stacked windowed layers depends on (0 ≤ i − j ≤ L·(W − 1), checked against the
closed formula and against autograd through a random stack), and the KV cache each needs."""

from __future__ import annotations

import io
import math

import matplotlib.image
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text

from helpers.attention import DotProductAttention
from helpers.masking import causal_mask
from helpers.widgets import windows as ww
from helpers.widgets._common import figure_png
from helpers.widgets._record import record_figure
from helpers.widgets.page import PageView
from tests.conftest import control, shown_png
from tests.test_view_layout import theme  # the series' rcParams, or matplotlib's

T = 24
STATES = [(w, l) for w in range(1, 9) for l in range(1, 5)]


# ---------------------------------------------------------------- formulas written out
def band_by_hand(window: int, n: int = T) -> np.ndarray:
    """Query i sees key j iff 0 ≤ i − j < W."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (i - j >= 0) & (i - j < window)


def reach_by_hand(window: int, layers: int, n: int = T) -> np.ndarray:
    """Output i depends on input j iff 0 ≤ i − j ≤ L·(W − 1)."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (i - j >= 0) & (i - j <= layers * (window - 1))


def suptitle_by_hand(window: int, layers: int) -> str:
    back = layers * (window - 1)
    first = max(0, 23 - back)
    seen = "input 23 only" if first == 23 else f"inputs {first} … 23"
    past = ", past input 0" if back > 23 else ""
    tokens = "token" if window == 2 else "tokens"
    return (f"W = {window}, L = {layers}: output 23 depends on {seen} "
            f"(reach L·(W − 1) = {back} back{past})\n"
            f"a window-W cache holds W − 1 = {window - 1} {tokens}, full attention 23")


def dependence_by_autograd(layers_fn, n: int, size: int = 3) -> np.ndarray:
    """(n, n): True where some component of output i has a nonzero gradient with respect to
    some component of input j (float64, random input)."""
    x = torch.randn(1, n, size, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(layers_fn, x)  # (1, n, size, 1, n, size)
    return (jac[0, :, :, 0].abs().sum(dim=(1, 3)) > 0).numpy()  # (n, n)


def random_stack(window: int, layers: int, size: int, by_hand: bool):
    """A stack of ``layers`` windowed self-attention layers with random float64 projections:
    written out (softmax over the band, −inf elsewhere) or with ``DotProductAttention``."""
    g = torch.Generator().manual_seed(window * 10 + layers)
    weights = [torch.randn(3, size, size, generator=g, dtype=torch.float64) for _ in range(layers)]
    attention = DotProductAttention()

    def run(x):  # (1, n, size)
        n = x.shape[1]
        band = causal_mask(n, n, window=window)  # (n, n): True = takes part
        for w in weights:
            q, k, v = x @ w[0], x @ w[1], x @ w[2]  # (1, n, size) each
            if by_hand:
                scores = (q @ k.transpose(1, 2)) / math.sqrt(size)  # (1, n, n)
                scores = scores.masked_fill(~band, -math.inf)
                x = torch.softmax(scores, dim=-1) @ v
            else:
                x = attention(q, k, v, causal=True, window=window)
        return x

    return run


# ---------------------------------------------------------------- reach
@pytest.mark.parametrize("window, layers", STATES)
def test_reach_is_the_closed_formula_for_every_state(window, layers):
    got = ww.reach(window, layers)
    assert got.dtype == torch.bool and got.shape == (T, T)
    np.testing.assert_array_equal(got.numpy(), reach_by_hand(window, layers))


@pytest.mark.parametrize("window, layers, n", [
    (1, 1, 1), (3, 2, 1), (2, 5, 7), (5, 1, 5), (40, 3, 30), (3, 100, 17), (4, 3, 128),
    (2, 200, 50)])
def test_reach_is_the_closed_formula_for_other_lengths(window, layers, n):
    np.testing.assert_array_equal(ww.reach(window, layers, n).numpy(),
                                  reach_by_hand(window, layers, n))


def test_one_layer_is_the_band_mask():
    for window in range(1, 9):
        assert torch.equal(ww.reach(window, 1), causal_mask(T, T, window=window))
        np.testing.assert_array_equal(causal_mask(T, T, window=window).numpy(),
                                      band_by_hand(window))


@pytest.mark.parametrize("by_hand", [True, False],
                         ids=["softmax-written-out", "DotProductAttention"])
@pytest.mark.parametrize("window, layers", [(1, 3), (2, 1), (2, 3), (3, 2), (4, 2), (3, 4), (5, 4)])
def test_reach_is_what_autograd_finds_in_a_random_windowed_stack(window, layers, by_hand):
    n = 16  # (5, 4): reach 16 ≥ n − 1, the whole triangle; the others a band inside it
    stack = random_stack(window, layers, size=3, by_hand=by_hand)
    found = dependence_by_autograd(stack, n)
    np.testing.assert_array_equal(found, ww.reach(window, layers, n).numpy())


def test_cache_sizes():
    t = np.arange(1, 97)
    np.testing.assert_array_equal(ww.cache_sizes(None).numpy(), t)
    for window in (1, 2, 4, 8, 200):
        np.testing.assert_array_equal(ww.cache_sizes(window).numpy(), np.minimum(t, window - 1))
    assert ww.cache_sizes(4, 2).tolist() == [1, 2]


# ---------------------------------------------------------------- the view
def images(fig: Figure) -> list[np.ndarray]:
    return [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]


def lines(fig: Figure) -> dict:
    return {line.get_gid(): line for line in fig.axes[-1].lines}


def pixels(fig: Figure) -> np.ndarray:
    return matplotlib.image.imread(io.BytesIO(figure_png(fig)))


def test_view_draws_the_band_the_reach_and_the_cache_in_every_state():
    view = ww.reach_view()
    w_slider, l_slider = control(view, "window W"), control(view, "layers L")
    assert (w_slider.min, w_slider.max, w_slider.value) == (1, 8, 4)
    assert (l_slider.min, l_slider.max, l_slider.value) == (1, 4, 2)
    assert not w_slider.continuous_update and not l_slider.continuous_update
    assert [c.values for c in view._controls] == [tuple(range(1, 9)), tuple(range(1, 5))]  # 32
    t = np.arange(1, 97)
    for window, layers in STATES:
        w_slider.value, l_slider.value = window, layers
        fig = view.result
        band, reached = images(fig)
        assert band.dtype == reached.dtype == np.float64
        np.testing.assert_array_equal(band, band_by_hand(window).astype(float))
        np.testing.assert_array_equal(reached, reach_by_hand(window, layers).astype(float))
        found = lines(fig)
        np.testing.assert_array_equal(found["full"].get_xdata(), t)
        np.testing.assert_array_equal(found["full"].get_ydata(), t)
        np.testing.assert_array_equal(found["window"].get_ydata(), np.minimum(t, window - 1))
        assert list(found["current"].get_xdata()) == [23, 23]
        assert list(found["current"].get_ydata()) == [23, min(23, window - 1)]
        assert fig._suptitle.get_text() == suptitle_by_hand(window, layers)
        back = layers * (window - 1)
        left, middle = (ax.get_title() for ax in fig.axes[:2])
        assert left == (f"one layer, W = {window}: query i sees "
                        + ("key i only" if window == 1 else f"keys i − {window - 1} … i"))
        assert middle == (f"{layers} layer{'s' if layers > 1 else ''}: output i depends on "
                          + ("input i only" if back == 0 else f"inputs i − {back} … i"))


@pytest.mark.parametrize("window, layers, want", [
    (4, 2, "W = 4, L = 2: output 23 depends on inputs 17 … 23 (reach L·(W − 1) = 6 back)\n"
           "a window-W cache holds W − 1 = 3 tokens, full attention 23"),
    (1, 3, "W = 1, L = 3: output 23 depends on input 23 only (reach L·(W − 1) = 0 back)\n"
           "a window-W cache holds W − 1 = 0 tokens, full attention 23"),
    (2, 1, "W = 2, L = 1: output 23 depends on inputs 22 … 23 (reach L·(W − 1) = 1 back)\n"
           "a window-W cache holds W − 1 = 1 token, full attention 23"),
    (6, 4, "W = 6, L = 4: output 23 depends on inputs 3 … 23 (reach L·(W − 1) = 20 back)\n"
           "a window-W cache holds W − 1 = 5 tokens, full attention 23"),
    (7, 4, "W = 7, L = 4: output 23 depends on inputs 0 … 23 "
           "(reach L·(W − 1) = 24 back, past input 0)\n"
           "a window-W cache holds W − 1 = 6 tokens, full attention 23"),
    (8, 4, "W = 8, L = 4: output 23 depends on inputs 0 … 23 "
           "(reach L·(W − 1) = 28 back, past input 0)\n"
           "a window-W cache holds W − 1 = 7 tokens, full attention 23"),
])
def test_suptitle_states_the_numbers(window, layers, want):
    assert ww.draw_reach(window, layers)._suptitle.get_text() == want


def test_colours_axes_and_highlight_are_fixed_in_every_state():
    fig = ww.draw_reach(1, 1)
    ims = [ax.images[0] for ax in fig.axes[:2]]
    colours = [im.cmap(np.array([0.0, 1.0])).tolist() for im in ims]
    assert colours[0] == colours[1] and colours[0][0] != colours[0][1]  # one two-colour map
    assert ims[0].cmap.N == 2
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in fig.axes]
    boxes = [[(p.get_xy(), p.get_width(), p.get_height()) for p in ax.patches]
             for ax in fig.axes[:2]]
    assert boxes[0] == boxes[1] == [((-0.5, T - 1.5), T, 1)]  # the last row, in both maps
    assert fig.axes[-1].get_xlim() == (0, 97) and fig.axes[-1].get_ylim() == (0, 97)
    for window, layers in STATES:
        ww.draw_reach(window, layers, fig=fig)
        assert [im.get_clim() for im in ims] == [(0.0, 1.0)] * 2
        assert [(ax.get_xlim(), ax.get_ylim()) for ax in fig.axes] == limits


def test_every_control_changes_the_picture_and_the_png_fallback_is_drawn():
    view = ww.reach_view()
    base = pixels(view.result)
    control(view, "window W").value = 5
    moved_w = pixels(view.result)
    control(view, "window W").value = 4
    assert np.array_equal(pixels(view.result), base)  # back: the same picture
    control(view, "layers L").value = 3
    moved_l = pixels(view.result)
    assert not np.array_equal(base, moved_w) and not np.array_equal(base, moved_l)
    assert shown_png(view).startswith(b"\x89PNG")
    assert np.array_equal(matplotlib.image.imread(io.BytesIO(shown_png(view))), moved_l)
    scene = view.scene_data()
    assert [c["label"] for c in scene["controls"]] == ["window W", "layers L"]
    deps = {tuple(slot["deps"]) for slot in scene["slots"]}
    assert (0,) in deps and (0, 1) in deps  # parts that move with W alone, and with both


@pytest.mark.parametrize("first", [(1, 1), (8, 4), (3, 2)])
def test_drawing_into_its_own_figure_is_the_same_as_a_fresh_figure(first):
    fig = ww.draw_reach(*first)
    artists = [ax.images[0] for ax in fig.axes[:2]]
    for window, layers in [(4, 2), (8, 1), (1, 4), (6, 3)]:
        assert ww.draw_reach(window, layers, fig=fig) is fig
        assert [ax.images[0] for ax in fig.axes[:2]] == artists  # updated in place
        assert record_figure(fig) == record_figure(ww.draw_reach(window, layers))
    assert np.array_equal(pixels(fig), pixels(ww.draw_reach(6, 3)))


def test_a_foreign_figure_is_cleared_and_redrawn():
    foreign = Figure()
    foreign.subplots(2, 2)
    out = ww.draw_reach(np.int64(3), np.int32(2), fig=foreign)
    assert out is foreign and len(out.axes) == 3
    np.testing.assert_array_equal(images(out)[1], reach_by_hand(3, 2).astype(float))
    assert out._suptitle.get_text() == suptitle_by_hand(3, 2)
    same_size = Figure(figsize=ww.FIGSIZE)
    same_size.add_subplot().plot([0, 1])
    assert record_figure(ww.draw_reach(3, 2, fig=same_size)) == record_figure(ww.draw_reach(3, 2))


@pytest.mark.parametrize("name", ["series", "matplotlib"])
@pytest.mark.parametrize("window, layers", [(1, 1), (2, 1), (8, 4), (7, 3)])
def test_texts_are_readable_inside_the_figure_and_apart(window, layers, name):
    # under the series' theme (larger fonts) and matplotlib's: no text under x-small, each
    # inside the figure, the titles (the map titles overflow their maps) and panels apart
    with theme(name):
        assert_texts_readable(ww.draw_reach(window, layers), 20)


def assert_texts_readable(fig, min_texts: int) -> None:
    """No visible text under x-small, each inside the figure, and the titles (suptitle and
    every Axes') and the panels apart from each other. Shared with the other views' tests."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    smallest = FontProperties(size="x-small").get_size_in_points()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert len(texts) > min_texts
    for t in texts:
        assert t.get_fontsize() >= smallest - 1e-9, t.get_text()
        box = t.get_window_extent(renderer)
        assert (fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0
                and box.y1 <= fig.bbox.y1), t.get_text()
    titles = [fig._suptitle.get_window_extent(renderer)] + [
        ax.title.get_window_extent(renderer) for ax in fig.axes]
    panels = [ax.get_window_extent(renderer) for ax in fig.axes]
    for boxes in (titles, panels):
        for i, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[i + 1:])


def test_demo_views():
    views = ww.demo_views()
    assert list(views) == ["reach"]
    view = views["reach"]
    assert isinstance(view, PageView) and isinstance(view.result, Figure)
    assert view.result.get_label() == "windows.reach"
    assert view.result._suptitle.get_text() == suptitle_by_hand(4, 2)


@pytest.mark.parametrize("call, match", [
    (lambda: ww.reach(0, 1), r"^window must be an int >= 1, got 0"),
    (lambda: ww.reach(2.0, 1), r"^window must be an int >= 1, got 2.0"),
    (lambda: ww.reach(True, 1), r"^window must be an int >= 1, got True"),
    (lambda: ww.reach(3, 0), r"^layers must be an int >= 1, got 0"),
    (lambda: ww.reach(3, None), r"^layers must be an int >= 1, got None"),
    (lambda: ww.reach(3, 2, 0), r"^length must be an int in \[1, 128\] \(positions\), got 0"),
    (lambda: ww.reach(3, 2, 129), r"^length must be an int in \[1, 128\]"),
    (lambda: ww.reach(3, 2, "24"), r"^length must be an int .* got '24'"),
    (lambda: ww.cache_sizes(0), r"^window must be an int >= 1, got 0"),
    (lambda: ww.cache_sizes(4, 0), r"^positions must be an int in \[1, 1048576\], got 0"),
    (lambda: ww.draw_reach(0, 2), r"^window must be an int in \[1, 8\], got 0"),
    (lambda: ww.draw_reach(9, 2), r"^window must be an int in \[1, 8\], got 9"),
    (lambda: ww.draw_reach(4.0, 2), r"^window must be an int in \[1, 8\], got 4.0"),
    (lambda: ww.draw_reach(4, 0), r"^layers must be an int in \[1, 4\], got 0"),
    (lambda: ww.draw_reach(4, 5), r"^layers must be an int in \[1, 4\], got 5"),
    (lambda: ww.draw_reach(4, np.float64(2)), r"^layers must be an int in \[1, 4\], got"),
    (lambda: ww.draw_reach(4, 2, fig="fig"), r"^fig must be a matplotlib Figure or None, got str"),
    (lambda: ww.reach_view(window=9), r"^window must be an int in \[1, 8\], got 9"),
    (lambda: ww.reach_view(layers=False), r"^layers must be an int in \[1, 4\], got False"),
])
def test_bad_input_is_refused_clearly(call, match):
    with pytest.raises(ValueError, match=match):
        call()
