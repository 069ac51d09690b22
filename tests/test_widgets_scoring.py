"""The views of notebook 04 draw what the formulas say, and every control changes the drawing."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets import scoring


def control(view: widgets.interactive, description: str) -> widgets.Widget:
    return next(c for c in view.children if getattr(c, "description", None) == description)


def heatmap(fig: Figure, panel: int = 0) -> np.ma.MaskedArray:
    axes = [ax for ax in fig.axes if ax.images]
    return np.ma.asarray(axes[panel].images[0].get_array())


# ---------------------------------------------------------------- why divide by √D
def expected_scaling(d: int, scaled: bool, Q: int = 6, K: int = 12, seed: int = 0) -> np.ndarray:
    """softmax(q·k / √d) written out with exp and sums, on the view's seeded inputs."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(Q, d, generator=gen, dtype=torch.float32).double()
    k = torch.randn(K, d, generator=gen, dtype=torch.float32).double()
    scores = torch.einsum("qd,kd->qk", q, k) / (math.sqrt(d) if scaled else 1.0)
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    return (e / e.sum(dim=1, keepdim=True)).numpy()


def test_scaling_inputs_are_seeded_unit_normals():
    q, k = scoring.scaling_inputs(256, num_queries=6, num_keys=12, seed=3)
    q2, k2 = scoring.scaling_inputs(256, num_queries=6, num_keys=12, seed=3)
    assert q.shape == (6, 256) and k.shape == (12, 256)
    assert torch.equal(q, q2) and torch.equal(k, k2)
    assert not torch.equal(q, scoring.scaling_inputs(256, 6, 12, seed=4)[0])
    both = torch.cat([q, k]).flatten()
    assert abs(both.mean().item()) < 0.05 and abs(both.var().item() - 1) < 0.05


@pytest.mark.parametrize("d", [1, 16, 512])
@pytest.mark.parametrize("scaled", [True, False])
def test_scaling_view_draws_the_softmax_of_the_scores(d, scaled):
    view = scoring.scaling_view()
    control(view, "D").value = d
    control(view, "divide scores by √D").value = scaled
    drawn = heatmap(view.result)
    want = expected_scaling(d, scaled)
    np.testing.assert_allclose(drawn, want, rtol=1e-4, atol=1e-6)
    bars = [p.get_width() for p in view.result.axes[1].patches]
    np.testing.assert_allclose(bars, want.max(axis=1), rtol=1e-4, atol=1e-6)


def test_each_control_changes_the_image():
    view = scoring.scaling_view(d=64, scaled=True)
    before = heatmap(view.result).copy()
    control(view, "D").value = 128
    after_d = heatmap(view.result).copy()
    assert not np.allclose(before, after_d)
    control(view, "divide scores by √D").value = False
    after_scale = heatmap(view.result).copy()
    assert not np.allclose(after_d, after_scale)


def test_without_scaling_the_softmax_saturates_for_large_d():
    view = scoring.scaling_view(d=1024, scaled=True)
    scaled_max = heatmap(view.result).max(axis=1).mean()
    control(view, "divide scores by √D").value = False
    raw = heatmap(view.result)
    assert np.median(raw.max(axis=1).filled(0)) > 0.95  # most rows nearly one-hot
    assert raw.max(axis=1).mean() > scaled_max + 0.3
    # With the scaling, the spread of the weights hardly depends on D.
    small = scoring.draw_scaling(4, True)
    large = scoring.draw_scaling(1024, True)
    assert abs(heatmap(small).max(axis=1).mean() - heatmap(large).max(axis=1).mean()) < 0.25


def test_draw_scaling_reuses_its_figure_and_redraws_a_foreign_one():
    fig = scoring.draw_scaling(8)
    image = fig.axes[0].images[0]
    assert scoring.draw_scaling(32, fig=fig) is fig and fig.axes[0].images[0] is image
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = scoring.draw_scaling(32, False, fig=foreign)
    assert out is foreign
    np.testing.assert_allclose(heatmap(out), expected_scaling(32, False), rtol=1e-4, atol=1e-6)
    resized = scoring.draw_scaling(32, num_queries=3, num_keys=5, fig=fig)
    assert heatmap(resized).shape == (3, 5) and len(resized.axes[1].patches) == 3


# ---------------------------------------------------------------- additive attention
def expected_additive(num_hiddens: int, Q: int = 6, seed: int = 0) -> np.ndarray:
    """w_vᵀ tanh(W_q q + W_k k) for every (query, key), masked softmax, written out."""
    batch = scoring.toy_batch(Q, seed)
    model = scoring.make_additive(num_hiddens, seed=seed)
    Wq = model.W_q.weight.detach().double()  # (H, 20)
    Wk = model.W_k.weight.detach().double()  # (H, 2)
    wv = model.w_v.weight.detach().double()[0]  # (H,)
    q, k = batch["queries"].double(), batch["keys"].double()
    B, _, K = q.shape[0], q.shape[1], k.shape[1]
    out = np.full((B, Q, K), np.nan)
    for b in range(B):
        n = int(batch["valid_lens"][b])
        for i in range(Q):
            scores = torch.stack([wv @ torch.tanh(Wq @ q[b, i] + Wk @ k[b, j]) for j in range(n)])
            e = torch.exp(scores - scores.max())
            out[b, i, :n] = (e / e.sum()).numpy()
    return out


def test_toy_batch_matches_the_notebook_description():
    batch = scoring.toy_batch()
    assert batch["queries"].shape == (2, 1, 20) and batch["dot_queries"].shape == (2, 1, 2)
    assert batch["keys"].shape == (2, 10, 2)
    assert torch.equal(batch["values"][1], torch.arange(40.0).reshape(10, 4))
    assert batch["valid_lens"].tolist() == [2, 6]
    again = scoring.toy_batch()
    assert all(torch.equal(batch[name], again[name]) for name in batch)


def test_make_additive_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a, b = scoring.make_additive(16, seed=1), scoring.make_additive(16, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    for name, p in a.state_dict().items():
        assert torch.equal(p, b.state_dict()[name])
    assert a.W_q.weight.shape == (16, 20) and a.W_k.weight.shape == (16, 2)
    wide = scoring.make_additive(400, seed=1, score_scale=2.0)
    assert abs(wide.W_q.weight.std().item() * math.sqrt(20) - 1) < 0.05  # N(0, 1/D_q)
    assert abs(wide.W_k.weight.std().item() * math.sqrt(2) - 1) < 0.1  # N(0, 1/D_k)
    assert abs(wide.w_v.weight.std().item() * math.sqrt(400) / 2.0 - 1) < 0.1  # N(0, 4/H)
    assert not torch.equal(a.W_q.weight, scoring.make_additive(16, seed=2).W_q.weight)


@pytest.mark.parametrize("num_hiddens", [1, 8, 33])
def test_additive_view_draws_the_additive_formula(num_hiddens):
    view = scoring.additive_view()
    control(view, "hidden H").value = num_hiddens
    want = expected_additive(num_hiddens)
    for b in range(2):
        drawn = heatmap(view.result, b)
        np.testing.assert_array_equal(np.ma.getmaskarray(drawn), np.isnan(want[b]))
        np.testing.assert_allclose(drawn.filled(np.nan), want[b], rtol=1e-4, atol=1e-6)
    assert str(num_hiddens) in view.result.get_suptitle()
    # Colours run from 0 to the largest weight shown, in every panel.
    for ax in [ax for ax in view.result.axes if ax.images]:
        assert ax.images[0].get_clim() == pytest.approx((0.0, np.nanmax(want)), rel=1e-4)


def test_masked_keys_are_masked_and_rows_sum_to_one():
    fig = scoring.draw_additive(8)
    first, second = heatmap(fig, 0), heatmap(fig, 1)
    assert np.ma.getmaskarray(first)[:, 2:].all() and not np.ma.getmaskarray(first)[:, :2].any()
    assert np.ma.getmaskarray(second)[:, 6:].all() and not np.ma.getmaskarray(second)[:, :6].any()
    np.testing.assert_allclose(first.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(second.sum(axis=1), 1.0, rtol=1e-5)


def test_draw_additive_reuses_its_figure_and_redraws_a_foreign_one():
    fig = scoring.draw_additive(3)
    image = heatmap(fig, 0)
    assert scoring.draw_additive(9, fig=fig) is fig
    assert [ax for ax in fig.axes if ax.images][0].images[0].get_array() is not image
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = scoring.draw_additive(9, fig=foreign)
    assert out is foreign and len([ax for ax in out.axes if ax.images]) == 2
    np.testing.assert_allclose(heatmap(out, 1).filled(np.nan), expected_additive(9)[1],
                               rtol=1e-4, atol=1e-6)


def test_hidden_size_slider_changes_the_image_reproducibly():
    view = scoring.additive_view(num_hiddens=4)
    slider = control(view, "hidden H")
    first = heatmap(view.result, 1).copy()
    slider.value = 5
    assert not np.ma.allclose(first, heatmap(view.result, 1))
    slider.value = 4
    np.testing.assert_array_equal(heatmap(view.result, 1).filled(-1), first.filled(-1))


def test_one_hidden_unit_ranks_the_keys_alike_for_every_query():
    # score = w tanh(a_q + b·k) is monotone in b·k for every query: one shared ranking.
    weights = scoring.additive_weights(1)[1, :, :6]  # batch row 1, valid keys
    orders = {tuple(row.argsort().tolist()) for row in weights}
    assert len(orders) == 1
    richer = scoring.additive_weights(32)[1, :, :6]
    assert len({tuple(row.argsort().tolist()) for row in richer}) > 1


# ---------------------------------------------------------------- the module as a whole
def test_demo_views_show_figures():  # build time: benchmarks/bench_sliders.py
    views = scoring.demo_views()
    assert set(views) == {"scaling", "additive"}
    for view in views.values():
        assert isinstance(view, widgets.interactive) and isinstance(view.result, Figure)
