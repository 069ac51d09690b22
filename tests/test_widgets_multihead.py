"""The multi-head view: what it draws against per-head formulas written out here."""

from __future__ import annotations

import math
import re

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers import MultiHeadAttention
from helpers.widgets.multihead import (
    HEAD_CHOICES, HIDDEN_CHOICES, demo_views, draw_heads, draw_view, example_inputs, head_grid,
    head_weights, heads_view, make_model,
)
from tests.conftest import shown_png


def formula_weights(model: MultiHeadAttention, queries, keys, valid_len: int) -> torch.Tensor:
    """softmax over the first ``valid_len`` keys of (X W_q[i]ᵀ)(Y W_k[i]ᵀ)ᵀ / √(N/H), one
    head at a time, where head i owns rows i·N/H ... (i+1)·N/H of W_q and W_k; float64;
    (H, Q, K)."""
    H = model.num_heads
    N = model.W_q.out_features
    p = N // H
    X, Y = queries[0].double(), keys[0].double()  # (Q, d), (K, d)
    Wq, Wk = model.W_q.weight.detach().double(), model.W_k.weight.detach().double()  # (N, d)
    out = torch.zeros(H, X.shape[0], Y.shape[0], dtype=torch.float64)
    for i in range(H):
        rows = slice(i * p, (i + 1) * p)
        scores = (X @ Wq[rows].T) @ (Y @ Wk[rows].T).T / math.sqrt(p)  # (Q, K)
        kept = scores[:, :valid_len]
        e = torch.exp(kept - kept.max(dim=1, keepdim=True).values)
        out[i, :, :valid_len] = e / e.sum(dim=1, keepdim=True)
    return out


def panels(fig: Figure) -> list:
    """The visible heatmap axes, in head order."""
    return [ax for ax in fig.axes if ax.images and ax.get_visible()]


def slider(view: widgets.interactive, description: str) -> widgets.Widget:
    (found,) = [c for c in view.children if getattr(c, "description", None) == description]
    return found


def param_count_in(fig: Figure) -> int:
    return int(fig.get_suptitle().rsplit("=", 1)[1].replace(",", ""))


@pytest.mark.parametrize("num_heads", HEAD_CHOICES)
@pytest.mark.parametrize("num_hiddens", HIDDEN_CHOICES)
def test_each_panel_is_one_head_of_the_formula_and_of_the_model(num_heads, num_hiddens):
    view = heads_view(num_heads=num_heads, num_hiddens=num_hiddens, valid_len=7)
    queries, keys, values = example_inputs()
    model = make_model(num_hiddens, num_heads)
    expected = formula_weights(model, queries, keys, valid_len=7)
    with torch.no_grad():
        model(queries, keys, values, torch.tensor([7]))
    shown = panels(view.result)
    assert len(shown) == num_heads
    for i, ax in enumerate(shown):
        drawn = ax.images[0].get_array()  # masked array (Q, K)
        assert ax.get_title() == f"head {i}"
        np.testing.assert_allclose(drawn.filled(0.0), expected[i].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(drawn.filled(0.0), model.attention_weights[0, i].numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_head_weights_rows_sum_to_one_over_the_valid_keys():
    weights, _ = head_weights(16, 4, 5)
    assert weights.shape == (4, 6, 9)
    torch.testing.assert_close(weights[..., :5].sum(-1), torch.ones(4, 6))
    assert (weights[..., 5:] == 0).all()


@pytest.mark.parametrize("valid_len", [1, 4, 9])
def test_keys_past_the_valid_length_are_masked_and_the_rest_are_not(valid_len):
    view = heads_view(num_heads=8, valid_len=valid_len)
    for ax in panels(view.result):
        drawn = ax.images[0].get_array()
        assert np.ma.getmaskarray(drawn)[:, valid_len:].all()
        assert not np.ma.getmaskarray(drawn)[:, :valid_len].any()
        np.testing.assert_allclose(drawn[:, :valid_len].sum(axis=1), 1.0, rtol=1e-5)


def test_the_valid_length_slider_changes_the_images_in_place():
    view = heads_view(num_heads=4, valid_len=9)
    fig = view.result
    axes = panels(fig)
    before = [ax.images[0].get_array().copy() for ax in axes]
    slider(view, "valid length").value = 3
    assert view.result is fig and panels(fig) == axes  # same axes: updated, not rebuilt
    queries, keys, _ = example_inputs()
    expected = formula_weights(make_model(16, 4), queries, keys, valid_len=3)
    for i, (ax, old) in enumerate(zip(panels(fig), before)):
        new = ax.images[0].get_array()
        assert not np.ma.allclose(new, old)
        np.testing.assert_allclose(new.filled(0.0), expected[i].numpy(), rtol=1e-5, atol=1e-6)
        assert np.ma.getmaskarray(new)[:, 3:].all()
        # the colour scale follows the largest weight still shown
        assert ax.images[0].get_clim()[1] == pytest.approx(float(expected[:, :, :3].max()))


def test_the_heads_slider_changes_the_number_of_panels_and_the_grid():
    view = heads_view(num_heads=1)
    fig = view.result
    for H in (2, 8, 4, 1):
        slider(view, "heads H").value = H
        shown = panels(fig)
        assert view.result is fig and len(shown) == H
        assert shown[0].get_gridspec().get_geometry() == head_grid(H)
        assert f"{H} head" in fig.get_suptitle() and f"of size {16 // H}" in fig.get_suptitle()


def test_the_hidden_size_slider_redraws_other_weights():
    view = heads_view(num_heads=2, num_hiddens=8, valid_len=9)
    before = panels(view.result)[0].images[0].get_array().copy()
    slider(view, "N").value = 32
    queries, keys, _ = example_inputs()
    expected = formula_weights(make_model(32, 2), queries, keys, valid_len=9)
    after = panels(view.result)[0].images[0].get_array()
    assert not np.ma.allclose(before, after)
    np.testing.assert_allclose(after, expected[0].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_hiddens", HIDDEN_CHOICES)
def test_parameter_count_is_right_and_the_same_for_every_head_count(num_hiddens):
    view = heads_view(num_hiddens=num_hiddens)
    counts = set()
    for H in HEAD_CHOICES:
        slider(view, "heads H").value = H
        reference = MultiHeadAttention(num_hiddens, H, query_size=12, key_size=12, value_size=12)
        expected = sum(p.numel() for p in reference.parameters())
        assert param_count_in(view.result) == expected
        assert expected == 3 * 12 * num_hiddens + num_hiddens**2  # the formula in the title
        counts.add(param_count_in(view.result))
    assert len(counts) == 1


def test_the_seeded_matrices_do_not_depend_on_the_number_of_heads():
    one, eight = make_model(16, 1).state_dict(), make_model(16, 8).state_dict()
    assert one.keys() == eight.keys()
    for name in one:
        torch.testing.assert_close(one[name], eight[name])
    assert not torch.equal(one["W_q.weight"], make_model(16, 1, seed=1).state_dict()["W_q.weight"])


def test_draw_heads_without_a_figure_and_with_a_foreign_one():
    weights = torch.softmax(torch.randn(2, 3, 5), dim=-1)
    fig = draw_heads(weights, title="two heads")
    assert isinstance(fig, Figure) and len(panels(fig)) == 2 and fig.get_suptitle() == "two heads"
    foreign = Figure()
    foreign.subplots(3, 3)
    assert draw_heads(weights, 2, fig=foreign) is foreign and len(panels(foreign)) == 2
    np.testing.assert_allclose(panels(foreign)[1].images[0].get_array()[:, :2],
                               weights[1, :, :2].numpy(), rtol=1e-6)


@pytest.mark.parametrize("bad", [torch.zeros(3, 4), torch.zeros(1, 2, 3, 4), np.zeros((2, 3, 4))])
def test_draw_heads_rejects_other_shapes(bad):
    with pytest.raises(ValueError, match=r"\(H, Q, K\)"):
        draw_heads(bad)


@pytest.mark.parametrize("H, grid",
                         [(1, (1, 1)), (3, (1, 3)), (4, (1, 4)), (6, (2, 4)), (8, (2, 4))])
def test_head_grid(H, grid):
    assert head_grid(H) == grid


def test_demo_views_show_a_figure():  # build time: benchmarks/bench_sliders.py
    views = demo_views()
    assert set(views) == {"heads"}
    view = views["heads"]
    assert isinstance(view, widgets.interactive) and isinstance(view.result, Figure)
    assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept
    assert re.search(r"parameters .* = \d", view.result.get_suptitle())


def test_draw_view_is_what_the_view_shows_for_the_same_values():
    view = heads_view(num_heads=8, num_hiddens=32, valid_len=4)
    static = draw_view(num_heads=8, num_hiddens=32, valid_len=4)
    assert static is not view.result and static.get_suptitle() == view.result.get_suptitle()
    for mine, theirs in zip(panels(static), panels(view.result), strict=True):
        np.testing.assert_array_equal(mine.images[0].get_array(), theirs.images[0].get_array())
