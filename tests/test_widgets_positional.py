"""The views of notebook 07 draw the sinusoidal table and its rotations as the formulas say."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers.widgets import positional
from tests.conftest import control, shown_png


def formula(i: float, col: int, d: int) -> float:
    """P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d)), written out."""
    two_j = col - col % 2
    angle = i / 10000 ** (two_j / d)
    return math.sin(angle) if col % 2 == 0 else math.cos(angle)


def expected_table(T: int, d: int) -> np.ndarray:
    return np.array([[formula(i, col, d) for col in range(d)] for i in range(T)])


def heatmap_axes(fig: Figure):
    return next(ax for ax in fig.axes if ax.images)


def curve_axes(fig: Figure):
    return next(ax for ax in fig.axes if ax.lines)


def frame(fig: Figure) -> tuple[float, float]:
    """(first column, number of columns) framed on the heatmap."""
    rect = heatmap_axes(fig).patches[0]
    return rect.get_x() + 0.5, rect.get_width()


# ---------------------------------------------------------------- the table and its columns
@pytest.mark.parametrize("d", [32, 8, 16, 64])
def test_encoding_view_draws_the_table_and_its_columns(d):
    view = positional.encoding_view()
    control(view, "encoding dimension d").value = d
    control(view, "first column shown").value = 0
    control(view, "first column shown").value = min(6, d - 4)
    ax = heatmap_axes(view.result)
    want = expected_table(60, d)
    np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), want, atol=1e-12)
    assert ax.get_xlabel() == "Column (encoding dimension)" and ax.get_ylabel() == "Row (position)"
    first = min(6, d - 4)
    curves = curve_axes(view.result)
    labels = [line.get_label() for line in curves.lines]
    assert labels == [f"Col {c}" for c in range(first, first + 4)]
    for line, col in zip(curves.lines, range(first, first + 4)):
        np.testing.assert_array_equal(line.get_xdata(), np.arange(60))
        np.testing.assert_allclose(line.get_ydata(), want[:, col], atol=1e-12)
    assert frame(view.result) == (first, 4)


def test_column_slider_moves_the_curves_and_the_frame():
    view = positional.encoding_view(32, 6)
    image = heatmap_axes(view.result).images[0]
    place = heatmap_axes(view.result).get_position().bounds
    before = [line.get_ydata().copy() for line in curve_axes(view.result).lines]
    control(view, "first column shown").value = 20
    after = [line.get_ydata() for line in curve_axes(view.result).lines]
    assert not any(np.allclose(b, a) for b, a in zip(before, after))
    assert frame(view.result) == (20, 4)
    assert heatmap_axes(view.result).images[0] is image  # same layout: updated in place
    assert heatmap_axes(view.result).get_position().bounds == place  # laid out once, kept
    np.testing.assert_allclose(after[0], [formula(i, 20, 32) for i in range(60)], atol=1e-12)


def test_dimension_slider_redraws_the_table_and_the_columns_move_left_to_fit():
    # The page view needs fixed value lists: d in doublings, first column in even steps
    # (one sine/cosine pair) over the widest table; columns past d are moved left to fit.
    view = positional.encoding_view(32, 26)
    column = control(view, "first column shown")
    assert (column.min, column.max, column.step) == (0, 60, 2)
    assert tuple(control(view, "encoding dimension d").options) == (8, 16, 32, 64)
    assert [len(c.values) for c in view._controls] == [4, 31]  # 124 states to record
    control(view, "encoding dimension d").value = 16
    assert column.value == 26  # the slider keeps its place
    assert heatmap_axes(view.result).images[0].get_array().shape == (60, 16)
    assert frame(view.result) == (12, 4)
    np.testing.assert_allclose(curve_axes(view.result).lines[-1].get_ydata(),
                               expected_table(60, 16)[:, 15], atol=1e-12)


def test_doubling_d_stretches_the_table_sideways():
    # What notebook 07 says of the d slider: pair j of the d-wide table has the frequency of
    # pair 2j of the 2d-wide one, so columns 6, 7 at d = 16 are columns 12, 13 at d = 32 and
    # 24, 25 at d = 64 (the first two curves of those views).
    view = positional.encoding_view(16, 6)
    curves = []
    for d, first in ((16, 6), (32, 12), (64, 24)):
        control(view, "encoding dimension d").value = d
        control(view, "first column shown").value = first
        curves.append([line.get_ydata().copy() for line in curve_axes(view.result).lines[:2]])
    for other in curves[1:]:
        np.testing.assert_allclose(other, curves[0], atol=1e-12)


def test_draw_encoding_leaves_the_table_alone_when_only_the_columns_move():
    # A page view records again only what a move marked as changed: the table (a 60 × d image)
    # once per d, not once per first column.
    fig = positional.draw_encoding(32, 6)
    image = heatmap_axes(fig).images[0]
    image.stale = False
    positional.draw_encoding(32, 10, fig=fig)
    assert not image.stale and frame(fig) == (10, 4)
    positional.draw_encoding(16, 10, fig=fig)
    assert image.stale and image.get_array().shape == (60, 16)


def test_low_frequencies_sit_in_the_later_columns():
    # Column pair j oscillates with frequency 1/10000^(2j/d): sign changes along the rows
    # become rarer from left to right (like the higher bits of a binary counter).
    P = np.asarray(heatmap_axes(positional.draw_encoding(32)).images[0].get_array())
    crossings = [(np.diff(np.sign(P[:, 2 * j])) != 0).sum() for j in range(16)]
    assert crossings == sorted(crossings, reverse=True) and crossings[0] > crossings[-1]


def test_draw_encoding_reuses_its_figure_and_clamps_columns():
    fig = positional.draw_encoding(16, 2)
    image = heatmap_axes(fig).images[0]
    assert positional.draw_encoding(16, 9, fig=fig) is fig and heatmap_axes(fig).images[0] is image
    fig = positional.draw_encoding(16, 50, fig=fig)  # too far right: the last 4 columns
    assert frame(fig) == (12, 4)
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = positional.draw_encoding(5, 0, num_positions=7, num_cols=6, fig=foreign)
    assert out is foreign and len(curve_axes(out).lines) == 5  # only N columns exist
    np.testing.assert_allclose(np.asarray(heatmap_axes(out).images[0].get_array()),
                               expected_table(7, 5), atol=1e-12)


# ---------------------------------------------------------------- relative position
def drawn_points(fig: Figure) -> tuple[np.ndarray, np.ndarray]:
    dots, rings = fig.axes[0].collections
    return np.asarray(dots.get_offsets()), np.asarray(rings.get_offsets())


@pytest.mark.parametrize("j", [0, 3, 9, 15])
def test_rotated_points_are_the_pairs_of_row_i_plus_delta(j):
    view = positional.rotation_view()
    control(view, "column pair j").value = j
    for delta in [-3, 0, 1, 5, 17, 20]:
        control(view, "position offset δ").value = delta
        dots, rings = drawn_points(view.result)
        rows = range(8)
        want_dots = [[formula(i, 2 * j, 32), formula(i, 2 * j + 1, 32)] for i in rows]
        want_rings = [[formula(i + delta, 2 * j, 32), formula(i + delta, 2 * j + 1, 32)]
                      for i in rows]
        np.testing.assert_allclose(dots, want_dots, atol=1e-12)
        np.testing.assert_allclose(rings, want_rings, atol=1e-12)
        assert f"pair j = {j}" in view.result.axes[0].get_title()
        assert f"δ = {delta}:" in view.result.axes[0].get_title()


def test_arcs_run_on_the_unit_circle_from_each_dot_to_its_ring():
    fig = positional.draw_rotation(4, 3)
    dots, rings = drawn_points(fig)
    arcs = fig.axes[0].lines[1:]
    assert len(arcs) == 8
    for arc, dot, ring in zip(arcs, dots, rings):
        x, y = arc.get_data()
        np.testing.assert_allclose(np.hypot(x, y), 1.0, atol=1e-12)
        np.testing.assert_allclose([x[0], y[0]], dot, atol=1e-12)
        np.testing.assert_allclose([x[-1], y[-1]], ring, atol=1e-12)


def test_rotation_view_offers_every_offset_and_every_third_pair():
    # Every integer δ in ±20 (one step turns pair 0 by 1 rad, as notebook 07 says), and the
    # pairs 0, 3, … 15: the fastest to the slowest frequency in 6 stops. 6 × 41 = 246 states.
    view = positional.rotation_view()
    assert [(c.name, c.values) for c in view._controls] == [
        ("j", (0, 3, 6, 9, 12, 15)), ("delta", tuple(range(-20, 21)))]
    control(view, "column pair j").value = 0
    control(view, "position offset δ").value = 1
    assert "δ = 1: turn by δ·ω_j = 1.000 rad" in view.result.axes[0].get_title()
    control(view, "column pair j").value = 15
    control(view, "position offset δ").value = 20
    assert "δ = 20: turn by δ·ω_j = 0.004 rad" in view.result.axes[0].get_title()
    # another d: every third pair and the last one
    other = positional.rotation_view(0, 0, num_hiddens=24, max_delta=3, pair_step=3)
    assert [c.values for c in other._controls] == [(0, 3, 6, 9, 11), (-3, -2, -1, 0, 1, 2, 3)]
    positional.rotation_view(0, 11, num_hiddens=24)  # the last pair is on the slider


def test_draw_rotation_leaves_the_dots_alone_when_only_delta_moves():
    # The dots and their labels depend on j only: not marked as changed when δ moves, so a
    # page view records them once per pair.
    fig = positional.draw_rotation(2, 3)
    dots, rings = fig.axes[0].collections
    for artist in (dots, rings, *fig.axes[0].texts):
        artist.stale = False
    positional.draw_rotation(5, 3, fig=fig)
    assert rings.stale and not dots.stale and not any(t.stale for t in fig.axes[0].texts)
    positional.draw_rotation(5, 6, fig=fig)
    assert dots.stale and all(t.stale for t in fig.axes[0].texts)


def test_each_slider_changes_the_drawing():
    view = positional.rotation_view(delta=2, j=3)
    dots, rings = (a.copy() for a in drawn_points(view.result))
    control(view, "position offset δ").value = 6
    dots_2, rings_2 = drawn_points(view.result)
    np.testing.assert_array_equal(dots, dots_2)
    assert not np.allclose(rings, rings_2)
    control(view, "column pair j").value = 9
    dots_3, _ = drawn_points(view.result)
    assert not np.allclose(dots_2, dots_3)


def test_odd_width_and_bad_pair():
    fig = positional.draw_rotation(3, 2, num_hiddens=7, num_positions=5)
    dots, rings = drawn_points(fig)
    want = [[formula(i + 3, 4, 7), formula(i + 3, 5, 7)] for i in range(5)]  # the last pair
    np.testing.assert_allclose(rings, want, atol=1e-12)
    with pytest.raises(ValueError, match=r"j must be in 0 … 2"):
        positional.draw_rotation(1, 3, num_hiddens=7)


def test_rotation_matrices_form_a_group():
    w = 0.3
    M = positional.rotation_matrix
    torch.testing.assert_close(M(2, w) @ M(5, w), M(7, w))
    torch.testing.assert_close(M(-4, w), M(4, w).T)
    torch.testing.assert_close(M(3, w) @ M(3, w).T, torch.eye(2, dtype=torch.float64))
    m = M(3, w)
    assert abs((m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]).item() - 1.0) < 1e-12  # det 1
    expected = [1 / 10000 ** (2 * j / 9) for j in range(5)]
    np.testing.assert_allclose(positional.frequencies(9).numpy(), expected, rtol=1e-12)


# ---------------------------------------------------------------- the module as a whole
def test_demo_views_show_figures():  # build time: benchmarks/bench_sliders.py
    views = positional.demo_views()
    assert set(views) == {"encoding", "rotation"}
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
        assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept


# ---------------------------------------------------------------- memory and bad input
def test_rotation_draws_what_it_did_and_allocates_only_the_pairs_drawn():
    """The pairs were cut from the whole (T, d) table: d = 10^6 allocated 64 MB for 8 points.
    Now only the T pairs drawn are computed, as sinusoidal_table computes them: bit for bit
    the same for the view's d = 32 (and to the last bit, ±1 ulp, for other d)."""
    from helpers.positional import sinusoidal_table
    from helpers.tiling import peak_bytes

    fig = positional.draw_rotation(2, 2)
    for j in range(16):
        for delta in (-20, -3, 0, 7, 20):
            positional.draw_rotation(delta, j, fig=fig)
            P = sinusoidal_table(8, 32, dtype=torch.float64)  # the old way: the whole table
            pairs = P[:, 2 * j: 2 * j + 2]
            omega = positional.frequencies(32)[j].item()
            dots, rings = drawn_points(fig)
            np.testing.assert_array_equal(dots, pairs.numpy())
            np.testing.assert_array_equal(rings, positional.rotate_pairs(pairs, delta, omega).numpy())
    assert peak_bytes(lambda: positional.draw_rotation(1, 0, num_hiddens=10**6, fig=fig)) < 2**20
    dots, _ = drawn_points(fig)
    np.testing.assert_allclose(dots, [[math.sin(i), math.cos(i)] for i in range(8)], atol=1e-15)


@pytest.mark.parametrize("call, match", [
    (lambda: positional.draw_rotation(1, 1.5), r"^j must be an int, got 1.5"),  # was a TypeError
    (lambda: positional.draw_rotation(1, 0, num_hiddens=1), r"^num_hiddens must be an int >= 2"),
    (lambda: positional.draw_rotation(0.5, 1), r"^delta must be an int, got 0.5"),
    (lambda: positional.draw_rotation(np.int64(3), np.int64(1)), None),  # NumPy ints work
    (lambda: positional.rotation_view(delta=30), r"^delta must be an int in \[-20, 20\]"),  # clamped
    (lambda: positional.rotation_view(j=16), r"^j must be in 0 … 15"),  # was a TraitError
    (lambda: positional.rotation_matrix(math.nan, 0.3), r"^delta must be a finite number"),
    (lambda: positional.rotation_matrix(1e300, 1e300), r"^delta must make delta \* omega finite"),
    (lambda: positional.rotate_pairs(torch.zeros(3, 3), 1, 0.3), r"^pairs must be a \(T, 2\)"),
    (lambda: positional.rotate_pairs(torch.zeros(3, 2, dtype=torch.long), 1, 0.3),
     r"^pairs must be a floating-point tensor"),
    (lambda: positional.frequencies(0), r"^num_hiddens must be a positive int, got 0"),
    (lambda: positional.draw_encoding(32, -1), r"^first_col must be an int >= 0, got -1"),
    (lambda: positional.draw_encoding(32, 2.5), r"^first_col must be an int >= 0, got 2.5"),
    (lambda: positional.draw_encoding(32, 2, num_cols=0), r"^num_cols must be a positive int"),
    (lambda: positional.encoding_view(100), r"^num_hiddens must be one of the slider's values 8, 16, 32, 64 "),
    (lambda: positional.encoding_view(12), r"^num_hiddens must be one of the slider's values .* got 12"),
    (lambda: positional.encoding_view(8, num_cols=2, max_hiddens=7),
     r"^max_hiddens must leave a power of two >= max\(8, num_cols = 2\), got 7"),
    (lambda: positional.encoding_view(32, 5), r"^first_col must be even .* got 5"),
    (lambda: positional.encoding_view(32, 62), r"^first_col must be an int in \[0, 60\]"),
    (lambda: positional.rotation_view(j=2), r"^j must be one of the slider's pairs 0, 3, 6, 9, 12, 15 "),
    (lambda: positional.rotation_view(pair_step=0), r"^pair_step must be an int >= 1, got 0"),
    (lambda: positional.rotation_view(delta=3, j=0, max_delta=2), r"^delta must be an int in \[-2, 2\]"),
    (lambda: positional.encoding_view(32, num_cols=70), r"^max_hiddens must be an int >= 70"),
    (lambda: positional.draw_encoding(fig=1), r"^fig must be a matplotlib Figure or None, got int"),
])
def test_bad_input_is_refused_clearly(call, match):
    if match is None:
        assert isinstance(call(), Figure)
        return
    with pytest.raises(ValueError, match=match):
        call()
