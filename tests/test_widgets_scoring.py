"""The views of notebook 04 draw what the formulas say, every control changes the drawing, bad
input is refused with a ValueError, and the notebook's exercise checks survive wrong answers."""

from __future__ import annotations

import itertools
import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers.widgets import scoring
from tests.conftest import control

def heatmap(fig: Figure, panel: int = 0) -> np.ma.MaskedArray:
    axes = [ax for ax in fig.axes if ax.images]
    return np.ma.asarray(axes[panel].images[0].get_array())


# ---------------------------------------------------------------- why divide by √d
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
    control(view, "query/key size d").value = d
    control(view, "divide scores by √d").value = scaled
    drawn = heatmap(view.result)
    want = expected_scaling(d, scaled)
    np.testing.assert_allclose(drawn, want, rtol=1e-4, atol=1e-6)
    bars = [p.get_width() for p in view.result.axes[1].patches]
    np.testing.assert_allclose(bars, want.max(axis=1), rtol=1e-4, atol=1e-6)
    assert view.result.axes[0].images[0].get_clim() == (0.0, 1.0)  # fixed scale for every d
    assert f"d = {d}" in view.result.axes[0].get_title()


def test_each_control_changes_the_image():
    view = scoring.scaling_view(d=64, scaled=True)
    before = heatmap(view.result).copy()
    control(view, "query/key size d").value = 128
    after_d = heatmap(view.result).copy()
    assert not np.allclose(before, after_d)
    control(view, "divide scores by √d").value = False
    after_scale = heatmap(view.result).copy()
    assert not np.allclose(after_d, after_scale)


def test_without_scaling_the_softmax_saturates_for_large_d():
    view = scoring.scaling_view(d=1024, scaled=True)
    scaled_max = heatmap(view.result).max(axis=1).mean()
    control(view, "divide scores by √d").value = False
    raw = heatmap(view.result)
    assert np.median(raw.max(axis=1).filled(0)) > 0.95  # most rows nearly one-hot
    assert raw.max(axis=1).mean() > scaled_max + 0.3
    # With the scaling, the spread of the weights hardly depends on d.
    small = scoring.draw_scaling(4, True)
    large = scoring.draw_scaling(1024, True)
    assert abs(heatmap(small).max(axis=1).mean() - heatmap(large).max(axis=1).mean()) < 0.25


def test_draw_scaling_reuses_its_figure_and_redraws_a_foreign_one():
    fig = scoring.draw_scaling(8)
    image = fig.axes[0].images[0]
    assert scoring.draw_scaling(32, fig=fig) is fig and fig.axes[0].images[0] is image
    assert fig.get_layout_engine() is None  # frozen: savefig draws it once
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = scoring.draw_scaling(32, False, fig=foreign)
    assert out is foreign
    np.testing.assert_allclose(heatmap(out), expected_scaling(32, False), rtol=1e-4, atol=1e-6)
    resized = scoring.draw_scaling(32, num_queries=3, num_keys=5, fig=fig)
    assert heatmap(resized).shape == (3, 5) and len(resized.axes[1].patches) == 3


@pytest.mark.parametrize("call, message", [
    (lambda: scoring.scaling_view(d=3), r"d must be one of the slider's sizes \[1, 2, 4.*1024\], got 3"),
    (lambda: scoring.scaling_view(d=True), r"d must be one of the slider's sizes .* got True"),
    (lambda: scoring.scaling_view(num_queries=0), r"num_queries must be an int in \[1, 64\], got 0"),
    (lambda: scoring.draw_scaling(0), r"d must be an int in \[1, 1024\], got 0"),
    (lambda: scoring.draw_scaling(8, num_keys=2.5), r"num_keys must be an int in \[1, 64\], got 2.5"),
    (lambda: scoring.scaling_inputs(8, seed=0.5), r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 0.5"),
    (lambda: scoring.draw_scaling(1025), r"d must be an int in \[1, 1024\], got 1025"),
    (lambda: scoring.draw_scaling(8, num_queries=65), r"num_queries must be an int in \[1, 64\], got 65"),
    (lambda: scoring.scaling_view(num_keys=100), r"num_keys must be an int in \[1, 64\], got 100"),
    (lambda: scoring.draw_scaling(8, scaled="no"), r"scaled must be True or False, got 'no'"),
    (lambda: scoring.scaling_view(scaled=None), r"scaled must be True or False, got None"),
    (lambda: scoring.draw_scaling(8, fig="fig"), r"fig must be a matplotlib Figure or None, got str"),
])
def test_scaling_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- the toy batch and the scorer
def test_toy_batch_is_one_seeded_batch_for_both_scorers():
    batch = scoring.toy_batch()
    assert batch["queries"].shape == (2, 2, 2) and batch["keys"].shape == (2, 10, 2)
    assert batch["queries"].shape[-1] == batch["keys"].shape[-1]  # the dot product can score it
    assert torch.equal(batch["values"][1], torch.arange(40.0).reshape(10, 4))
    assert batch["valid_lens"].tolist() == [2, 6]
    gen = torch.Generator().manual_seed(scoring.TOY_SEED)  # keys first, then queries
    assert torch.equal(batch["keys"], torch.randn(2, 10, 2, generator=gen))
    assert torch.equal(batch["queries"], torch.randn(2, 2, 2, generator=gen))
    again = scoring.toy_batch()
    assert all(torch.equal(batch[name], again[name]) for name in batch)


def test_additive_parameters_are_seeded_nested_and_leave_the_global_generator_alone():
    state = torch.get_rng_state()
    W_q, W_k, w_v = scoring.additive_parameters(16, seed=1)
    model = scoring.make_additive(16, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert W_q.shape == (16, 2) and W_k.shape == (16, 2) and w_v.shape == (16,)
    assert torch.equal(model.W_q.weight, W_q) and torch.equal(model.W_k.weight, W_k)
    assert torch.equal(model.w_v.weight[0], w_v) and not model.training
    assert w_v.norm().item() == pytest.approx(scoring.SCORE_SCALE, rel=1e-6)
    # Nested: the scorer with 5 units is the first 5 units of the one with 16 (w_v rescaled).
    W_q5, W_k5, w_v5 = scoring.additive_parameters(5, seed=1)
    assert torch.equal(W_q5, W_q[:5]) and torch.equal(W_k5, W_k[:5])
    torch.testing.assert_close(w_v5, w_v[:5] * (scoring.SCORE_SCALE / w_v[:5].norm()))
    assert not torch.equal(W_q, scoring.additive_parameters(16, seed=2)[0])
    # N(0, 1/fan_in) entries, over all 64 units of many seeds.
    wide_q = torch.cat([scoring.additive_parameters(64, query_size=20, seed=s)[0] for s in range(20)])
    assert abs(wide_q.std().item() * math.sqrt(20) - 1) < 0.05


def test_make_additive_computes_the_formula_written_out():
    batch = scoring.toy_batch()
    model = scoring.make_additive(7, seed=3)
    Wq, Wk, wv = (p.detach().double() for p in (model.W_q.weight, model.W_k.weight, model.w_v.weight[0]))
    q, k = batch["queries"].double(), batch["keys"].double()
    want = torch.tensor([[[float(wv @ torch.tanh(Wq @ q[b, i] + Wk @ k[b, j])) for j in range(10)]
                          for i in range(2)] for b in range(2)], dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(model.get_scores(batch["queries"], batch["keys"]).double(), want,
                                   rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(scoring.additive_score(q, k, Wq, Wk, wv), want)


def test_pairs_alike_counts_pairs_in_the_same_order():
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        s = torch.randn(2, 7, generator=gen, dtype=torch.float64)
        want = sum((s[0, i] - s[0, j]) * (s[1, i] - s[1, j]) > 0
                   for i, j in itertools.combinations(range(7), 2))
        assert scoring.pairs_alike(s) == (int(want), 21)
    assert scoring.pairs_alike(torch.tensor([[1.0, 2, 3], [3, 2, 1]])) == (0, 3)  # reversed
    assert scoring.pairs_alike(torch.tensor([[1.0, 1, 3], [0, 2, 4]])) == (2, 3)  # a tie is not alike
    for bad in (torch.zeros(3, 4), torch.zeros(2), [[1, 2], [2, 1]]):
        with pytest.raises(ValueError, match=r"scores must have shape \(2, K\)"):
            scoring.pairs_alike(bad)


def test_pairs_alike_over_seeds_matches_a_direct_count():
    table = scoring.pairs_alike_over_seeds([1, 2, 5, 16], [0, 3])
    assert table["num_hiddens"] == [1, 2, 5, 16] * 2 and table["seed"] == [0] * 4 + [3] * 4
    batch = scoring.toy_batch()
    q, k = batch["queries"][1].double(), batch["keys"][1, :6].double()
    for n, seed, alike in zip(*table.values()):
        params = [p.double() for p in scoring.additive_parameters(n, seed=seed)]
        assert alike == scoring.pairs_alike(scoring.additive_score(q, k, *params))[0]


def test_one_hidden_unit_orders_the_keys_alike_for_every_query_and_seed():
    # score = w tanh(u·q + r·k) rises or falls with r·k for every query: one shared order.
    table = scoring.pairs_alike_over_seeds([1], range(50))
    assert table["alike"] == [15] * 50
    richer = scoring.pairs_alike_over_seeds([4], range(50))
    assert min(richer["alike"]) < 15  # more units allow different orders (not for every seed)


# ---------------------------------------------------------------- the hidden-size view
def expected_landscapes(num_hiddens: int, seed: int = 0) -> dict[str, np.ndarray]:
    """a(q, k) at every pixel centre of the key plane, for query A and B of row 1, written out
    with numpy from the parameters (not from the view's code)."""
    batch = scoring.toy_batch()
    q = batch["queries"][1].double().numpy()  # (2, 2)
    Wq, Wk, wv = (p.double().numpy() for p in scoring.additive_parameters(num_hiddens, seed=seed))
    n, L = scoring.GRID, scoring.EXTENT
    centres = -L + (np.arange(n) + 0.5) * (2 * L / n)
    ky, kx = np.meshgrid(centres, centres, indexing="ij")  # image row = y (origin lower)
    dot = np.stack([(qa[0] * kx + qa[1] * ky) / math.sqrt(2) for qa in q])
    additive = np.stack([
        sum(wv[u] * np.tanh(Wq[u] @ qa + Wk[u, 0] * kx + Wk[u, 1] * ky) for u in range(num_hiddens))
        for qa in q
    ])
    return {"dot": dot, "additive": additive}


def expected_ranks(scores: list[float]) -> list[str]:
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    ranks = [0] * len(scores)
    for r, i in enumerate(order, start=1):
        ranks[i] = r
    return [str(r) for r in ranks]


def panels(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.images]


@pytest.mark.parametrize("num_hiddens", [1, 5, 16])
def test_hidden_size_view_draws_the_score_landscapes(num_hiddens):
    view = scoring.hidden_size_view()
    control(view, "hidden units num_hiddens").value = num_hiddens
    fig = view.result
    want = expected_landscapes(num_hiddens)
    axes = panels(fig)
    assert len(axes) == 4
    for i, ax in enumerate(axes):
        kind = "dot" if i < 2 else "additive"
        np.testing.assert_allclose(ax.images[0].get_array(), want[kind][i % 2], rtol=1e-6, atol=1e-6)
        assert ax.images[0].get_clim() == (-scoring.SCORE_LIMIT, scoring.SCORE_LIMIT)
        assert ax.images[0].get_extent() == [-3.0, 3.0, -3.0, 3.0]
    # The rank labels: rank 1 = highest score among the row's 6 valid keys, per query.
    batch = scoring.toy_batch()
    q, k = batch["queries"][1].double(), batch["keys"][1, :6].double()
    Wq, Wk, wv = (p.double() for p in scoring.additive_parameters(num_hiddens))
    for c in range(2):
        add = [float(wv @ torch.tanh(Wq @ q[c] + Wk @ k[j])) for j in range(6)]
        dot = [float(q[c] @ k[j]) / math.sqrt(2) for j in range(6)]
        assert [t.get_text() for t in scoring.rank_labels(axes[2 + c])] == expected_ranks(add)
        assert [t.get_text() for t in scoring.rank_labels(axes[c])] == expected_ranks(dot)
    # The title counts the pairs that A and B order alike, for both scorers.
    add_scores = torch.tensor([[float(wv @ torch.tanh(Wq @ q[c] + Wk @ k[j])) for j in range(6)]
                               for c in range(2)])
    alike = sum((add_scores[0, i] - add_scores[0, j]) * (add_scores[1, i] - add_scores[1, j]) > 0
                for i, j in itertools.combinations(range(6), 2))
    assert f"num_hiddens = {num_hiddens}" in fig.get_suptitle()
    assert f"{int(alike)} of 15 key pairs" in fig.get_suptitle()


def test_one_hidden_unit_gives_the_same_ranks_in_both_additive_panels():
    for seed in range(4):
        fig = scoring.draw_hidden_size(1, seed=seed)
        a, b = panels(fig)[2:]
        ranks = [[t.get_text() for t in scoring.rank_labels(ax)] for ax in (a, b)]
        assert len(ranks[0]) == 6 and ranks[0] == ranks[1]
        assert "15 of 15 key pairs" in fig.get_suptitle()
    # The dot product's two queries point different ways: they order the keys differently.
    assert "dot product: 15 of 15" not in fig.get_suptitle()


def test_hidden_size_slider_changes_only_the_additive_row_and_is_reproducible():
    view = scoring.hidden_size_view(num_hiddens=4)
    slider = control(view, "hidden units num_hiddens")
    assert (slider.min, slider.max, slider.continuous_update) == (1, 16, False)
    fig = view.result
    first = [ax.images[0].get_array().copy() for ax in panels(fig)]
    slider.value = 5
    assert view.result is fig
    after = [ax.images[0].get_array() for ax in panels(fig)]
    np.testing.assert_array_equal(after[0], first[0])  # the dot product does not change
    np.testing.assert_array_equal(after[1], first[1])
    assert not np.allclose(after[2], first[2]) and not np.allclose(after[3], first[3])
    slider.value = 4
    for now, then in zip(panels(fig), first):
        np.testing.assert_array_equal(now.images[0].get_array(), then)
    assert fig.get_layout_engine() is None  # frozen: savefig draws it once


def test_draw_hidden_size_reuses_its_figure_and_redraws_a_foreign_one():
    fig = scoring.draw_hidden_size(3)
    image = panels(fig)[2].images[0]
    assert scoring.draw_hidden_size(9, fig=fig) is fig and panels(fig)[2].images[0] is image
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = scoring.draw_hidden_size(9, fig=foreign)
    assert out is foreign and len(panels(out)) == 4
    np.testing.assert_allclose(panels(out)[3].images[0].get_array(),
                               expected_landscapes(9)["additive"][1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda: scoring.hidden_size_view(num_hiddens=0), r"num_hiddens must be an int in \[1, 16\], got 0"),
    (lambda: scoring.hidden_size_view(num_hiddens=17), r"num_hiddens must be an int in \[1, 16\], got 17"),
    (lambda: scoring.hidden_size_view(num_hiddens=2.0), r"num_hiddens must be an int in \[1, 16\], got 2.0"),
    (lambda: scoring.hidden_size_view(seed=2**64), r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 18446744073709551616"),
    (lambda: scoring.draw_hidden_size(3, fig="fig"), r"fig must be a matplotlib Figure or None, got str"),
    (lambda: scoring.rank_labels("ax"), r"ax must be a matplotlib Axes \(a panel of draw_hidden_size\), got str"),
    (lambda: scoring.make_additive(8, score_scale=float("nan")), r"score_scale must be a finite number > 0, got nan"),
    (lambda: scoring.additive_parameters(8, score_scale=0), r"score_scale must be a finite number > 0, got 0"),
    (lambda: scoring.pairs_alike_over_seeds([1], [0], batch_seed=0.5), r"batch_seed must be an int in \[-2\*\*63, 2\*\*64\), got 0.5"),
    (lambda: scoring.pairs_alike_over_seeds([1], [0, "1"]), r"seeds\[1\] must be an int in \[-2\*\*63, 2\*\*64\), got '1'"),
    (lambda: scoring.pairs_alike_over_seeds(4, [0]), r"hiddens must be a list of ints in \[1, 64\], got int"),
    (lambda: scoring.pairs_alike_over_seeds([4], 3), r"seeds must be a list or range of ints, got int"),
    (lambda: scoring.draw_hidden_size(65), r"num_hiddens must be an int in \[1, 64\], got 65"),
    (lambda: scoring.draw_hidden_size(True), r"num_hiddens must be an int in \[1, 64\], got True"),
    (lambda: scoring.make_additive(8, query_size=0), r"query_size must be a positive int, got 0"),
    (lambda: scoring.pairs_alike_over_seeds([2, 0], [0]), r"hiddens\[1\] must be an int in \[1, 64\], got 0"),
    (lambda: scoring.toy_batch(seed="1"), r"seed must be an int in \[-2\*\*63, 2\*\*64\), got '1'"),
])
def test_hidden_size_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()



def test_numpy_ints_and_any_seed_torch_takes_are_accepted():
    # np.int64 sizes and negative seeds were refused (a Python int >= 0 only)
    q, k = scoring.scaling_inputs(np.int64(4), num_queries=np.int32(2), seed=-3)
    gen = torch.Generator().manual_seed(-3)
    assert torch.equal(q, torch.randn(2, 4, generator=gen)) and k.shape == (12, 4)
    W_q, _, _ = scoring.additive_parameters(np.int64(3), seed=np.int64(5))
    assert torch.equal(W_q, scoring.additive_parameters(3, seed=5)[0])
    table = scoring.pairs_alike_over_seeds((np.int64(1),), [np.int64(2)])
    assert table == scoring.pairs_alike_over_seeds([1], [2])


def test_pairs_alike_over_no_sizes_is_an_empty_table():
    # was an IndexError: torch.tensor([]) is a float tensor, not indices
    assert scoring.pairs_alike_over_seeds([], range(3)) == {"num_hiddens": [], "seed": [], "alike": []}


def test_scaling_weights_checks_its_tensors():
    q, k = torch.randn(3, 5), torch.randn(4, 5)
    with pytest.raises(ValueError, match=r"queries must have at least 2 dimensions \(\.\.\., Q, D\), got 1"):
        scoring.scaling_weights(q[0], k)  # was a (4,) tensor of weights
    with pytest.raises(ValueError, match=r"feature size of keys \(D, same as queries\): expected 5, got 6"):
        scoring.scaling_weights(q, torch.randn(4, 6))  # was a RuntimeError from the matmul
    with pytest.raises(ValueError, match=r"keys must have the dtype and device of queries"):
        scoring.scaling_weights(q, k.double())
    with pytest.raises(ValueError, match="queries must be on a device that holds data, got meta"):
        scoring.scaling_weights(q.to("meta"), k.to("meta"))  # was an empty shell
    with pytest.raises(ValueError, match="scaled must be True or False, got 1"):
        scoring.scaling_weights(q, k, 1)
    with pytest.raises(ValueError, match=r"keys must have batch dimensions that broadcast with "
                                         r"queries', got \(3,\) and \(2,\)"):
        scoring.scaling_weights(torch.randn(2, 3, 5), torch.randn(3, 4, 5))


@pytest.mark.parametrize("change, message", [
    (dict(queries=torch.randn(3, 2).long()), r"queries must be a floating-point tensor, got dtype torch.int64"),
    (dict(keys=torch.randn(4)), r"keys must have at least 2 dimensions \(\.\.\., K, D_k\), got 1"),
    (dict(W_q=torch.randn(1, 6, 2)), r"W_q must have 2 dimensions \(N, D_q\), got 3"),
    (dict(w_v=torch.randn(6, 1)), r"w_v must have 1 dimensions \(N,\), got 2"),
    (dict(W_q=torch.randn(6, 3)), r"query size of W_q \(N, D_q\), as queries \(\.\.\., Q, D_q\): expected 2, got 3"),
    (dict(W_k=torch.randn(6, 2)), r"key size of W_k \(N, D_k\), as keys \(\.\.\., K, D_k\): expected 5, got 2"),
    (dict(W_k=torch.randn(7, 5)), r"hidden units N of W_k \(N, D_k\), as W_q: expected 6, got 7"),
    (dict(w_v=torch.randn(5)), r"hidden units N of w_v \(N,\), as W_q: expected 6, got 5"),
    (dict(w_v=torch.randn(6).double()), r"w_v must have the dtype and device of queries"),
    (dict(W_k=torch.randn(6, 5, device="meta")), r"W_k must have the dtype and device of queries"),
    (dict(queries=torch.randn(2, 3, 2), keys=torch.randn(3, 4, 5)),
     r"keys must have batch dimensions that broadcast with queries', got \(3,\) and \(2,\)"),
])
def test_additive_score_checks_its_tensors(change, message):
    # each was a RuntimeError or IndexError from a matmul, or an empty 'meta' shell
    kwargs = dict(queries=torch.randn(3, 2), keys=torch.randn(4, 5), W_q=torch.randn(6, 2),
                  W_k=torch.randn(6, 5), w_v=torch.randn(6))
    with pytest.raises(ValueError, match=message):
        scoring.additive_score(**{**kwargs, **change})


@pytest.mark.parametrize("scores, message", [
    (torch.tensor([[1, 2], [2, 1]]), r"scores must be a floating-point tensor, got dtype torch.int64"),
    (torch.zeros(2, 3, dtype=torch.complex64), r"scores must be a floating-point tensor"),
    (torch.zeros(2, 3, device="meta"), r"scores must be on a device that holds data, got meta"),
])
def test_pairs_alike_refuses_scores_it_cannot_order(scores, message):
    with pytest.raises(ValueError, match=message):  # complex and meta were raw errors
        scoring.pairs_alike(scores)

# ---------------------------------------------------------------- the module as a whole
def test_demo_views_show_figures():  # build time: benchmarks/bench_sliders.py
    views = scoring.demo_views()
    assert set(views) == {"scaling", "hidden_size"}
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
