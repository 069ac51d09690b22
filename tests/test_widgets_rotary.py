"""The views of notebook 10 draw what the formulas say: scores of shifted tokens with the
positions added and with RoPE (only the first change), and every pair's angle and wavelength."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers.widgets import rotary
from tests.conftest import control, shown_png


def maps(fig: Figure) -> list[np.ndarray]:
    """The four score maps, row by row: X + P, RoPE, change of X + P, change of RoPE."""
    return [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]


# ---------------------------------------------------------------- formulas written out
def sinusoid(p: int, col: int, d: int) -> float:
    """P[p, 2j] = sin(p / 10000^(2j/d)), P[p, 2j+1] = cos(p / 10000^(2j/d))."""
    angle = p / 10000 ** ((col - col % 2) / d)
    return math.sin(angle) if col % 2 == 0 else math.cos(angle)


def rotate(v: np.ndarray, p: int, base: float = 10000.0) -> np.ndarray:
    """Half-split RoPE by hand: pair (i, i + D/2) turned by p · base^(−2i/D)."""
    D = len(v)
    out = v.copy()
    for i in range(D // 2):
        a = p * base ** (-2 * i / D)
        out[i] = v[i] * math.cos(a) - v[i + D // 2] * math.sin(a)
        out[i + D // 2] = v[i] * math.sin(a) + v[i + D // 2] * math.cos(a)
    return out


def scores_by_hand(shift: int, T: int = 12, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    X, W_q, W_k = (t.numpy() for t in rotary._tokens_and_projections(T, d))
    P = np.array([[sinusoid(shift + m, c, d) for c in range(d)] for m in range(T)])
    added = ((X + P) @ W_q) @ ((X + P) @ W_k).T / math.sqrt(d)
    q = np.stack([rotate(X[m] @ W_q, shift + m) for m in range(T)])
    k = np.stack([rotate(X[m] @ W_k, shift + m) for m in range(T)])
    return added, q @ k.T / math.sqrt(d)


@pytest.mark.parametrize("shift", [0, 1, 13, 200])
def test_shift_scores_match_the_formulas(shift):
    added, rope = scores_by_hand(shift)
    got = rotary.shift_scores(shift).numpy()
    np.testing.assert_allclose(got[0], added, atol=1e-12)
    np.testing.assert_allclose(got[1], rope, atol=1e-12)


def test_only_the_added_positions_change_with_the_shift():
    base = rotary.shift_scores(0)
    for shift in (1, 5, 77, 200):
        moved = rotary.shift_scores(shift)
        assert not torch.allclose(moved[0], base[0], atol=1e-3)  # X + P: changes
        torch.testing.assert_close(moved[1], base[1], rtol=0, atol=1e-12)  # RoPE: does not


def test_tokens_are_fixed_and_not_shared_by_reference():
    a = rotary._tokens_and_projections(12, 16)[0]
    assert torch.equal(a, rotary._tokens_and_projections(12, 16)[0])
    assert rotary.shift_scores(3).shape == (2, 12, 12)
    assert rotary.shift_scores(3, num_positions=5, size=8).shape == (2, 5, 5)


# ---------------------------------------------------------------- the shift view
def test_shift_view_draws_the_scores_and_their_change():
    view = rotary.shift_view()
    slider = control(view, "position shift s")
    assert (slider.min, slider.max, slider.step, slider.value) == (0, rotary.MAX_SHIFT, 5, 0)
    assert view._controls[0].values == tuple(range(0, rotary.MAX_SHIFT + 1, 5))  # 41 states
    first = maps(view.result)
    for shift in (0, 9, 150):
        slider.value = shift
        added, rope = scores_by_hand(shift)
        added_0, rope_0 = scores_by_hand(0)
        got = maps(view.result)
        np.testing.assert_allclose(got[0], added, atol=1e-12)
        np.testing.assert_allclose(got[1], rope, atol=1e-12)
        np.testing.assert_allclose(got[2], added - added_0, atol=1e-12)
        np.testing.assert_allclose(got[3], 0.0, atol=1e-12)  # RoPE: nothing changed
        np.testing.assert_allclose(got[1], first[1], atol=1e-12)
        titles = [ax.get_title() for ax in view.result.axes if ax.images]
        assert titles[2] == f"X + P: change (max {np.abs(added - added_0).max():.2f})"
        assert titles[3] == "RoPE: change (max 0.00)"
        assert f"positions m, n = {shift} … {shift + 11}" in view.result._suptitle.get_text()
    assert not np.allclose(maps(view.result)[0], first[0])


def test_shift_colour_scale_is_fixed_and_covers_every_shift():
    fig = rotary.draw_shift(0)
    limits = {ax.images[0].get_clim() for ax in fig.axes if ax.images}
    assert len(limits) == 1
    (low, high), = limits
    assert low == -high and high == float(math.ceil(high))
    shifts = range(rotary.MAX_SHIFT + 1)
    largest = max(np.abs(rotary.shift_scores(s).numpy()).max() for s in shifts)
    changes = max(np.abs((rotary.shift_scores(s) - rotary.shift_scores(0)).numpy()).max()
                  for s in shifts)
    assert max(largest, changes) <= high < max(largest, changes) + 1  # nothing saturates
    for shift in (3, 100, rotary.MAX_SHIFT):
        rotary.draw_shift(shift, fig=fig)
        assert {ax.images[0].get_clim() for ax in fig.axes if ax.images} == {(low, high)}


def test_draw_shift_reuses_its_figure_and_redraws_a_foreign_one():
    fig = rotary.draw_shift(4)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    place = [ax.get_position().bounds for ax in fig.axes]
    assert rotary.draw_shift(8, fig=fig) is fig
    assert [ax.images[0] for ax in fig.axes if ax.images] == images  # updated in place
    assert [ax.get_position().bounds for ax in fig.axes] == place  # laid out once, kept
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = rotary.draw_shift(2, num_positions=5, size=8, fig=foreign)
    assert out is foreign and len(maps(out)) == 4 and maps(out)[0].shape == (5, 5)
    np.testing.assert_allclose(maps(out)[1], rotary.shift_scores(2, num_positions=5, size=8)[1].numpy())


@pytest.mark.parametrize("shift", [-1, 2.0, True, "3", 10**9 - 10])
def test_bad_shift(shift):
    with pytest.raises(ValueError, match=r"shift must be an int in \[0, 999999989\] "
                                         r"\(the last position s\+T−1 at most 10\*\*9\), got "):
        rotary.shift_scores(shift)  # T = 12: the last position 10**9 - 10 + 11 is past 10**9


# ---------------------------------------------------------------- the frequencies
def test_wrapped_angles_and_wavelengths_match_the_formulas():
    positions = torch.tensor([0.0, 1.0, 7.0, 100.0, 127.5])
    for base in (10.0, 10000.0, 5e5):
        got = rotary.wrapped_angles(base, positions, size=8).numpy()
        want = [[(p * base ** (-2 * i / 8)) % (2 * math.pi) for i in range(4)] for p in positions.tolist()]
        np.testing.assert_allclose(got, want, atol=1e-12)
        np.testing.assert_allclose(rotary.wavelengths(base, size=8).numpy(),
                                   [2 * math.pi * base ** (2 * i / 8) for i in range(4)], rtol=1e-12)
    assert rotary.wavelengths(10000.0, size=16).shape == (8,)


def curves(fig: Figure) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.asarray(line.get_xdata()), np.asarray(line.get_ydata())) for line in fig.axes[0].lines]


def test_frequency_view_draws_every_pair_against_the_position():
    view = rotary.frequency_view()
    slider = control(view, "frequency base")
    assert slider.value == 10000.0
    for base in (10.0, 100.0, 10000.0, 1e6):
        slider.value = base
        lines = curves(view.result)
        assert len(lines) == 4
        for i, (x, y) in enumerate(lines):
            assert x[0] == 0 and x[-1] == 127
            want = np.mod(x * base ** (-2 * i / 8), 2 * math.pi)
            shown = ~np.isnan(y)
            np.testing.assert_allclose(y[shown], want[shown], atol=1e-9)
            # the curve breaks (NaN) exactly where the angle wraps from 2π back to 0
            wraps = np.flatnonzero(np.diff(want) < 0) + 1
            np.testing.assert_array_equal(np.flatnonzero(~shown), wraps)
        dots = np.asarray(view.result.axes[1].collections[0].get_offsets())
        np.testing.assert_allclose(dots[:, 1], [2 * math.pi * base ** (2 * i / 8) for i in range(4)])
        count = sum(2 * math.pi * base ** (2 * i / 8) < 16 for i in range(4))
        assert view.result.axes[1].get_title() == f"{count} of 4 pairs turn fully in 16 positions"
        assert view.result.axes[0].get_title().startswith(f"base = {base:,.0f}")


def test_pair_zero_ignores_the_base_and_the_others_slow_down():
    fig = rotary.draw_frequencies(10.0)
    slow = rotary.draw_frequencies(1e5, fig=Figure())
    (_, y10), (_, y_big) = curves(fig)[0], curves(slow)[0]
    np.testing.assert_array_equal(y10, y_big)  # θ_0 = base^0 = 1 for every base
    for i in (1, 2, 3):  # fewer wraps with a larger base
        assert np.isnan(curves(slow)[i][1]).sum() < np.isnan(curves(fig)[i][1]).sum()


def test_draw_frequencies_reuses_its_figure_with_fixed_axes():
    fig = rotary.draw_frequencies(10000.0)
    lines = list(fig.axes[0].lines)
    limits = (fig.axes[0].get_ylim(), fig.axes[1].get_ylim(), fig.axes[1].get_yscale())
    assert rotary.draw_frequencies(31.6, fig=fig) is fig
    assert list(fig.axes[0].lines) == lines
    assert (fig.axes[0].get_ylim(), fig.axes[1].get_ylim(), fig.axes[1].get_yscale()) == limits
    big = rotary.draw_frequencies(100.0, size=16, fig=fig)  # another size: redrawn
    assert len(big.axes[0].lines) == 8
    with pytest.raises(ValueError, match=r"size must be an even int >= 2 .* got 7"):
        rotary.draw_frequencies(100.0, size=7)


# ---------------------------------------------------------------- the module as a whole
def test_demo_views_show_figures():  # build time and latency: benchmarks/bench_sliders.py
    views = rotary.demo_views()
    assert set(views) == {"shift", "frequencies"}
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
        assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept


# ---------------------------------------------------------------- memory and bad input
def test_shift_scores_are_what_they_were_for_every_shift_of_the_slider():
    """The shifted rows of the sinusoidal table, computed for the T positions alone, are the
    rows the whole table (s + T rows, as first written) had: the same numbers, bit for bit."""
    from helpers.positional import sinusoidal_table

    X, W_q, W_k = rotary._tokens_and_projections(12, 16)
    for shift in range(rotary.MAX_SHIFT + 1):
        P = sinusoidal_table(shift + 12, 16, dtype=torch.float64)[shift:]  # (T, D)
        added = ((X + P) @ W_q) @ ((X + P) @ W_k).T / 4.0
        assert torch.equal(rotary.shift_scores(shift)[0], added), shift


def test_shift_memory_grows_with_the_picture_not_the_shift():
    """A shift of 10^6 used to build the sinusoidal table of 10^6 + T rows (over 250 MiB)."""
    from helpers.tiling import peak_bytes

    assert peak_bytes(lambda: rotary.shift_scores(10**6)) < 5 * 2**20
    fig = rotary.draw_shift(0)
    assert peak_bytes(lambda: rotary.draw_shift(10**6, fig=fig)) < 5 * 2**20
    added, rope = scores_by_hand(10**6)
    np.testing.assert_allclose(maps(fig)[0], added, atol=1e-9)
    np.testing.assert_allclose(maps(fig)[1], rope, atol=1e-6)


@pytest.mark.parametrize("base", [1, 1.0, 0, -5, math.nan, math.inf, "10", None, True])
def test_bad_bases_are_refused_as_apply_rotary_refuses_them(base):
    with pytest.raises(ValueError, match=r"^base must be a finite number > 1.0, got"):
        rotary.apply_rotary(torch.zeros(2, 4), base=base)
    for call in (lambda: rotary.wrapped_angles(base, torch.arange(3.0)),
                 lambda: rotary.wavelengths(base), lambda: rotary.draw_frequencies(base),
                 lambda: rotary.frequency_view(base)):
        with pytest.raises(ValueError, match=r"^base must be a finite number > 1.0, got"):
            call()


@pytest.mark.parametrize("call, match", [
    (lambda: rotary.frequency_view(5.0), r"^base must be in \[10, 1e6\] \(the slider's range\)"),
    (lambda: rotary.shift_view(shift=201), r"^shift must be an int in \[0, 200\]"),  # was clamped
    (lambda: rotary.shift_view(shift=7), r"^shift must be a multiple of 5 \(the slider's step\), got 7"),
    (lambda: rotary.shift_scores(np.int64(3)), None),  # a NumPy int is an int
    (lambda: rotary.shift_scores(3, size=7), r"^size must be an even int >= 2"),  # was raw
    (lambda: rotary.shift_scores(3, num_positions=0), r"^num_positions must be a positive int"),
    (lambda: rotary.wavelengths(100.0, size=5), r"^size must be an even int >= 2"),  # was silent
    (lambda: rotary.wrapped_angles(100.0, torch.zeros(2, 3)), r"^positions must be a 1-D tensor"),
    (lambda: rotary.wrapped_angles(100.0, torch.tensor([True])), r"^positions must hold real"),
    (lambda: rotary.wrapped_angles(100.0, [0, 1]), r"^positions must be a 1-D tensor \(T,\), got list"),
    (lambda: rotary.draw_frequencies(100.0, train_length=200), r"^train_length must be an int in \[1, 128\]"),
    (lambda: rotary.draw_frequencies(100.0, num_positions=1), r"^num_positions must be an int >= 2"),
    (lambda: rotary.draw_shift(1, fig=[]), r"^fig must be a matplotlib Figure or None, got list"),
])
def test_bad_input_is_refused_clearly(call, match):
    if match is None:
        assert call().shape == (2, 12, 12)
        return
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("base", [10.0, 1e6])  # the slider's ends: labels once sat on the dots
def test_length_labels_sit_beside_the_axes_apart_from_every_dot_and_inside_the_figure(base):
    fig = rotary.draw_frequencies(base)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # the layout as shown
    renderer = canvas.get_renderer()
    ax = fig.axes[1]
    labels = [t for t in ax.texts if "length" in t.get_text()]
    assert [t.get_text() for t in labels] == ["training\nlength 16", "longest\ntest length 128"]
    dots = ax.transData.transform(np.asarray(ax.collections[0].get_offsets()))  # (D/2, 2) pixels
    radius = math.sqrt(ax.collections[0].get_sizes()[0]) / 2 * fig.dpi / 72  # s is in points²
    axes_box, figure_box = ax.get_window_extent(renderer), fig.bbox
    boxes = [t.get_window_extent(renderer) for t in labels]
    for box in boxes:
        assert box.x0 > axes_box.x1  # right of the plotting area, where no dot is ever drawn
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1 and box.y0 >= figure_box.y0
        for x, y in dots:
            assert not (box.x0 - radius <= x <= box.x1 + radius and box.y0 - radius <= y <= box.y1 + radius)
    assert not boxes[0].overlaps(boxes[1])
    for text, length in zip(labels, (16, 128)):  # each label at its own line
        y = ax.transData.transform((0, length))[1]
        box = text.get_window_extent(renderer)
        assert min(abs(box.y0 - y), abs(box.y1 - y)) < 2


@pytest.mark.parametrize("base", [10.0, 10000.0, 1e6])
def test_frequency_legend_sits_below_the_curves_and_clear_of_the_training_label(base):
    """The legend once lay on pair 0's curves at the top of the angle plot, and against the
    "training" label: now it is under the axes (below the x label), inside the figure, and the
    label sits in the headroom above 2π, where no curve goes."""
    fig = rotary.draw_frequencies(base)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pair 0", "pair 1", "pair 2", "pair 3"]
    axes_box = ax.get_window_extent(renderer)
    assert legend.y1 < ax.xaxis.label.get_window_extent(renderer).y0 < axes_box.y0  # under the x label
    assert fig.bbox.x0 <= legend.x0 and legend.x1 <= fig.bbox.x1 and legend.y0 >= fig.bbox.y0
    (label,) = [t for t in ax.texts if t.get_text() == "training"]
    box = label.get_window_extent(renderer)
    assert not box.overlaps(legend) and box.y1 <= axes_box.y1
    assert box.y0 >= ax.transData.transform((0, 2 * math.pi))[1]  # above every curve


def position_labels(fig: Figure) -> dict[tuple[int, str], list[str]]:
    """The texts beside each map (index of the map, "x" under it or "y" left of it)."""
    axes = [ax for ax in fig.axes if ax.images]
    found = {}
    for i, ax in enumerate(axes):
        for text in ax.texts:
            side = "x" if text.get_transform() == ax.get_xaxis_transform() else "y"
            found.setdefault((i, side), []).append(text.get_text())
    return found


@pytest.mark.parametrize("shift", [0, 7, 200])
def test_shift_view_names_the_first_and_last_position_beside_the_outer_maps(shift):
    fig = rotary.draw_shift(shift)
    ends = [str(shift), str(shift + 11)]
    assert position_labels(fig) == {(2, "x"): ends, (3, "x"): ends, (0, "y"): ends, (2, "y"): ends}
    fig = rotary.draw_shift(3, fig=fig)  # redrawn in place: the labels follow the shift
    assert position_labels(fig)[(3, "x")] == ["3", "14"]


@pytest.mark.parametrize("shift", [0, 200])
def test_shift_position_labels_stay_apart_and_inside_the_figure(shift):
    """Laid out once for the widest label (three digits), the labels of the bottom maps never run
    into each other or into the axis labels, at any shift of the slider."""
    fig = rotary.draw_shift(0)
    rotary.draw_shift(shift, fig=fig)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.images]
    boxes = [t.get_window_extent(renderer) for ax in axes for t in ax.texts]
    assert len(boxes) == 8
    for i, a in enumerate(boxes):
        assert fig.bbox.x0 <= a.x0 and a.x1 <= fig.bbox.x1 and a.y0 >= fig.bbox.y0
        assert not any(a.overlaps(b) for b in boxes[i + 1:])
    for ax in axes[2:]:
        below = ax.xaxis.label.get_window_extent(renderer)
        assert all(t.get_window_extent(renderer).y0 > below.y1 for t in ax.texts if t.get_text() and
                   t.get_transform() == ax.get_xaxis_transform())
    for ax in axes[::2]:
        left = ax.yaxis.label.get_window_extent(renderer)
        assert all(t.get_window_extent(renderer).x0 > left.x1 for t in ax.texts
                   if t.get_transform() == ax.get_yaxis_transform())
