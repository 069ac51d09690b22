"""The valid-length views of notebook 03: what is drawn against masked softmax written out here."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch

from helpers.widgets.masking import demo_scores, demo_views, draw_masked_softmax, valid_length_view


def expected_weights(scores: torch.Tensor, lens: list[list[int]]) -> np.ndarray:
    """Row by row: exp(x_k) / Σ_{j<n} exp(x_j) for k < n; NaN marks keys k ≥ n (masked)."""
    B, Q, K = scores.shape
    out = np.full((B, Q, K), np.nan)
    for b in range(B):
        for q in range(Q):
            n = lens[b][q]
            row = [float(x) for x in scores[b, q, :n]]
            total = sum(math.exp(x) for x in row)
            for k in range(n):
                out[b, q, k] = math.exp(row[k]) / total
    return out


def drawn(fig) -> list[np.ma.MaskedArray]:
    """The image array of each heatmap panel (the last axes is the colorbar)."""
    return [ax.images[0].get_array() for ax in fig.axes[:-1]]


def assert_drawn_equals(fig, expected: np.ndarray) -> None:
    images = drawn(fig)
    assert len(images) == expected.shape[0]
    for image, exp in zip(images, expected):
        assert isinstance(image, np.ma.MaskedArray)
        masked = np.ma.getmaskarray(image)
        np.testing.assert_array_equal(masked, np.isnan(exp))  # masked exactly past the lengths
        np.testing.assert_allclose(image.filled(np.nan), exp, rtol=1e-5, atol=1e-7, equal_nan=True)


def sliders(view) -> list[widgets.IntSlider]:
    return [c for c in view.children if isinstance(c, widgets.IntSlider)]


def test_draw_per_row_lengths_matches_formula():
    scores = demo_scores(3, 4, 8, seed=1)
    fig = draw_masked_softmax(scores, torch.tensor([8, 5, 2]))
    assert_drawn_equals(fig, expected_weights(scores, [[8] * 4, [5] * 4, [2] * 4]))
    assert [ax.get_title() for ax in fig.axes[:-1]] == [
        "batch 0 · valid len 8", "batch 1 · valid len 5", "batch 2 · valid len 2"]


def test_draw_per_query_lengths_and_zero_length_row():
    scores = demo_scores(2, 3, 5, seed=2)
    lens = [[0, 5, 2], [1, 3, 4]]
    fig = draw_masked_softmax(scores, lens)
    expected = expected_weights(scores, lens)
    assert_drawn_equals(fig, expected)
    assert np.ma.getmaskarray(drawn(fig)[0])[0].all()  # length 0: the whole row is grey


def test_redraw_reuses_figure_and_artists_and_leaves_scores_alone():
    scores = demo_scores(2, 2, 4)
    before = scores.clone()
    fig = draw_masked_softmax(scores, [4, 4])
    images = [ax.images[0] for ax in fig.axes[:-1]]
    again = draw_masked_softmax(scores, [1, 3], fig=fig)
    assert again is fig and [ax.images[0] for ax in fig.axes[:-1]] == images
    assert_drawn_equals(fig, expected_weights(scores, [[1, 1], [3, 3]]))
    torch.testing.assert_close(scores, before)


def test_redraw_with_another_shape_rebuilds_panels():
    fig = draw_masked_softmax(demo_scores(2, 2, 4), [4, 4])
    scores = demo_scores(3, 2, 6)
    draw_masked_softmax(scores, [6, 0, 3], fig=fig)
    assert_drawn_equals(fig, expected_weights(scores, [[6, 6], [0, 0], [3, 3]]))


def test_per_row_view_slider_changes_image():
    scores = demo_scores(3, 4, 8)
    view = valid_length_view(scores, valid_lens=[8, 5, 2])
    fig = view.result
    assert [s.value for s in sliders(view)] == [8, 5, 2]
    assert [s.max for s in sliders(view)] == [8, 8, 8]
    first = [image.copy() for image in drawn(fig)]
    sliders(view)[1].value = 3
    assert view.result is fig  # redrawn in place
    after = drawn(fig)
    assert not np.array_equal(after[1].filled(-1), first[1].filled(-1))
    np.testing.assert_array_equal(after[0].filled(-1), first[0].filled(-1))  # other rows unchanged
    assert_drawn_equals(fig, expected_weights(scores, [[8] * 4, [3] * 4, [2] * 4]))
    assert fig.axes[1].get_title() == "batch 1 · valid len 3"


def test_per_query_view_one_slider_per_query():
    scores = demo_scores(2, 2, 4)
    view = valid_length_view(scores, per_query=True, valid_lens=[[1, 3], [2, 4]])
    assert len(sliders(view)) == 4
    assert_drawn_equals(view.result, expected_weights(scores, [[1, 3], [2, 4]]))
    sliders(view)[2].value = 0  # batch 1, query 0
    assert_drawn_equals(view.result, expected_weights(scores, [[1, 3], [0, 4]]))
    sliders(view)[1].value = 4  # batch 0, query 1
    assert_drawn_equals(view.result, expected_weights(scores, [[1, 4], [0, 4]]))


def test_view_does_not_follow_later_changes_to_the_callers_scores():
    scores = demo_scores(1, 2, 3)
    view = valid_length_view(scores)
    expected = expected_weights(scores, [[3, 3]])
    scores.fill_(100.0)
    sliders(view)[0].value = 3  # same value: no change; force a redraw via another value
    sliders(view)[0].value = 2
    sliders(view)[0].value = 3
    assert_drawn_equals(view.result, expected)


def test_view_rejects_lengths_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        valid_length_view(demo_scores(2, 2, 4), per_query=True, valid_lens=[1, 2])


def test_demo_views_are_drawn():  # build time: benchmarks/bench_sliders.py
    views = demo_views()
    assert set(views) == {"valid_lens_per_row", "valid_lens_per_query"}
    for view in views.values():
        assert isinstance(view, widgets.interactive) and view.result is not None
        assert sliders(view) and all(not s.continuous_update for s in sliders(view))
