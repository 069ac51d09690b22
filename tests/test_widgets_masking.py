"""The valid-length views of notebook 03: what is drawn against masked softmax written out here,
and bad input refused with a ValueError (the exercise checks: test_notebook_checks_03.py)."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch

from helpers.widgets.page import PageView
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
    assert [s.description for s in sliders(view)] == [
        "batch 0 valid length", "batch 1 valid length", "batch 2 valid length"]
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
    assert [s.description for s in sliders(view)] == [
        "batch 0, query 0 valid length", "batch 0, query 1 valid length",
        "batch 1, query 0 valid length", "batch 1, query 1 valid length"]
    assert all(s.style.description_width == "initial" for s in sliders(view))  # not cut short
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
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(2, 2\), got \(2,\)"):
        valid_length_view(demo_scores(2, 2, 4), per_query=True, valid_lens=[1, 2])


BAD_SCORES = [
    (torch.zeros(2, 4), r"scores must have 3 dimensions \(B, Q, K\), got 2 with shape \(2, 4\)"),
    (torch.zeros(1, 2, 2, 4), r"scores must have 3 dimensions \(B, Q, K\), got 4 with shape \(1, 2, 2, 4\)"),
    ([[[0.0, 1.0]]], r"scores must be a torch.Tensor of shape \(B, Q, K\), got list"),
    (torch.zeros(2, 2, 4, dtype=torch.long), r"scores must be a floating-point tensor, got dtype torch.int64"),
    (torch.zeros(2, 0, 4), r"scores must have B, Q, K ≥ 1 in \(B, Q, K\), got \(2, 0, 4\)"),
]


@pytest.mark.parametrize("scores, message", BAD_SCORES)
def test_view_and_drawing_reject_scores_that_are_not_b_q_k(scores, message):
    with pytest.raises(ValueError, match=message):
        valid_length_view(scores)
    with pytest.raises(ValueError, match=message):
        draw_masked_softmax(scores, [1])


@pytest.mark.parametrize("lens, per_query, message", [
    ([5, 1], False, r"valid_lens must lie in \[0, K\] = \[0, 4\], got values from 1 to 5"),
    ([-1, 2], False, r"valid_lens must lie in \[0, K\] = \[0, 4\], got values from -1 to 2"),
    ([1.5, 2.0], False, r"valid_lens must hold integers, got dtype torch.float32"),
    ([[1, 2], [3, 4]], False, r"valid_lens must have shape \(2,\), got \(2, 2\)"),
    (["a", "b"], False, r"valid_lens must be integers of shape \(B,\) or \(B, Q\)"),
    ([[1, 2], [3, 9]], True, r"valid_lens must lie in \[0, K\] = \[0, 4\], got values from 1 to 9"),
])
def test_view_rejects_bad_starting_lengths(lens, per_query, message):
    with pytest.raises(ValueError, match=message):
        valid_length_view(demo_scores(2, 2, 4), per_query=per_query, valid_lens=lens)


def test_drawing_rejects_lengths_that_do_not_fit_the_scores():
    with pytest.raises(ValueError, match=r"valid_lens must have shape \(B,\)=\(3,\) or \(B, Q\)=\(3, 4\), got \(2,\)"):
        draw_masked_softmax(demo_scores(3, 4, 8), [8, 5])
    with pytest.raises(ValueError, match=r"got values from 2 to 9"):
        draw_masked_softmax(demo_scores(3, 4, 8), [8, 9, 2])


def test_scores_on_meta_and_a_figure_that_is_not_one_are_refused():
    meta = torch.empty(2, 3, 5, device="meta")  # was a RuntimeError from .item()
    with pytest.raises(ValueError, match="scores must be on a device that holds data, got meta"):
        draw_masked_softmax(meta, [5, 2])
    with pytest.raises(ValueError, match="scores must be on a device that holds data, got meta"):
        valid_length_view(meta)
    with pytest.raises(ValueError, match="fig must be a matplotlib Figure or None, got str"):
        draw_masked_softmax(demo_scores(2, 3, 5), [5, 2], fig="fig")  # was an AttributeError


@pytest.mark.parametrize("flag", [1, 0, None, "yes"])
def test_view_refuses_a_per_query_that_is_not_a_flag(flag):
    # 0 and None were taken as False; 1 and "yes" as True (then valid_lens was blamed)
    with pytest.raises(ValueError, match=f"per_query must be True or False, got {flag!r}"):
        valid_length_view(demo_scores(2, 3, 5), per_query=flag)


def test_view_refuses_more_sliders_than_fit_beside_the_maps():
    # one slider per (row, query): 8 × 8 = 64 sliders, each a line of the page
    with pytest.raises(ValueError, match=r"scores must give at most 32 valid lengths \(one slider "
                                         r"each\), got B × Q = 8 × 8 = 64"):
        valid_length_view(demo_scores(8, 8, 4), per_query=True)
    assert len(sliders(valid_length_view(demo_scores(8, 8, 4)))) == 8  # one per row: fine


@pytest.mark.parametrize("kwargs, message", [
    (dict(B=0, Q=2, K=3), r"B must be a positive int, got 0"),
    (dict(B=2, Q=True, K=3), r"Q must be a positive int, got True"),  # was a (2, 1, 3) tensor
    (dict(B=2, Q=2, K=torch.tensor(3)), r"K must be a positive int, got tensor\(3\)"),
    (dict(B=2, Q=2, K=2.0), r"K must be a positive int, got 2.0"),  # was a TypeError
    (dict(B=2, Q=2, K=3, seed=0.5), r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 0.5"),
])
def test_demo_scores_refuses_sizes_and_seeds_that_are_not_ints(kwargs, message):
    with pytest.raises(ValueError, match=message):
        demo_scores(**kwargs)


def test_demo_scores_takes_numpy_ints():
    expected = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(demo_scores(np.int64(2), 3, 4, seed=np.int64(7)), expected)  # was TypeError


def test_frozen_figure_is_drawn_once_per_png():
    fig = draw_masked_softmax(demo_scores(2, 2, 4), [4, 1])
    assert fig.get_layout_engine() is None  # no placeholder engine: savefig draws once


def test_demo_views_are_drawn():  # build time: benchmarks/bench_sliders.py
    views = demo_views()
    assert set(views) == {"valid_lens_per_row", "valid_lens_per_query"}
    for view in views.values():
        assert isinstance(view, PageView) and view.result is not None
        assert sliders(view) and all(not s.continuous_update for s in sliders(view))
