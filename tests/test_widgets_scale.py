"""The views of notebook 09 draw what the formulas written out here say: the online softmax's
running max, running sum and partial output; the tiles a causal mask lets tiled attention skip;
the KV cache of grouped-query attention."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.path import Path

from helpers.widgets.page import PageView
from helpers.widgets import scale
from tests.conftest import control, shown_png


# ------------------------------------------------------------------ 1. the online softmax
def seen_formulas(step: int, block_size: int = 8):
    """Running max, running sum and out/ℓ over the first step·b keys, written out in float64."""
    scores, values = scale.example_row()
    seen = scores[: step * block_size]
    m = max(seen.tolist())
    e = [math.exp(x - m) for x in seen.tolist()]
    total = sum(e)
    out = [sum(w * values[k, j].item() for k, w in enumerate(e)) / total
           for j in range(values.shape[1])]
    return m, total, np.array(out)


def online_parts(fig: Figure):
    ax_scores, ax_sum, ax_out = fig.axes
    return ax_scores, ax_sum, ax_out


@pytest.mark.parametrize("step", range(1, 7))
def test_online_view_draws_the_running_values_of_the_formulas(step):
    view = scale.online_view(step=0)
    control(view, "key blocks folded in").value = step
    ax_scores, ax_sum, ax_out = online_parts(view.result)
    m, total, partial = seen_formulas(step)
    # the running max: a line at m over the keys seen
    xs, ys = ax_scores.lines[-1].get_data()
    assert list(xs) == [-0.5, step * 8 - 0.5] and ys[0] == ys[1] == pytest.approx(m, abs=1e-12)
    assert f"m = {m:.2f}" in ax_scores.get_title()
    # the keys seen are coloured, the others grey
    colors = ax_scores.collections[0].get_colors()
    assert [tuple(c) for c in colors[: step * 8]] == [to_rgba("C0")] * (step * 8)
    assert all(tuple(c) == to_rgba("lightgrey") for c in colors[step * 8:])
    # the running sum of every block seen so far, each relative to the max of its own time
    xs, ys = ax_sum.lines[1].get_data()
    assert list(xs) == list(range(1, step + 1))
    assert ys[-1] == pytest.approx(total, rel=1e-12)
    assert [pytest.approx(seen_formulas(s)[1], rel=1e-12) for s in range(1, step + 1)] == list(ys)
    # out / ℓ over the keys seen
    heights = [bar.get_height() for bar in ax_out.patches]
    np.testing.assert_allclose(heights, partial, rtol=1e-10, atol=1e-12)


def test_the_last_step_is_the_exact_softmax_and_earlier_ones_are_not():
    scores, values = scale.example_row()
    exact = (torch.softmax(scores, 0) @ values).numpy()
    for step in range(1, 7):
        fig = scale.draw_online(step)
        heights = np.array([bar.get_height() for bar in fig.axes[2].patches])
        np.testing.assert_allclose(fig.axes[2].collections[0].get_offsets()[:, 1], exact)
        if step == 6:
            np.testing.assert_allclose(heights, exact, rtol=1e-12, atol=1e-12)
            assert fig.axes[2].get_title() == "largest error: 0.000"
        else:
            assert np.abs(heights - exact).max() > 1e-3


def test_a_larger_max_rescales_the_running_sum():
    # the example row's max grows in blocks 2, 3, 4 and 6; ℓ drops in 3 and 6
    maxes = [seen_formulas(s)[0] for s in range(1, 7)]
    sums = [seen_formulas(s)[1] for s in range(1, 7)]
    assert sum(b > a for a, b in zip(maxes, maxes[1:])) >= 3
    assert any(b < a for a, b in zip(sums, sums[1:]))
    for step in range(2, 7):
        title = scale.draw_online(step).axes[1].get_title()
        if maxes[step - 1] > maxes[step - 2]:
            assert title == f"new max: ℓ rescaled by ×{math.exp(maxes[step - 2] - maxes[step - 1]):.2f}"
        else:
            assert "max unchanged" in title


def test_step_zero_shows_nothing_seen_and_scales_stay_fixed():
    view = scale.online_view(step=3)
    fig = view.result
    limits = [ax.get_ylim() for ax in fig.axes]
    control(view, "key blocks folded in").value = 0
    assert view.result is fig  # redrawn in place
    ax_scores, ax_sum, ax_out = online_parts(fig)
    assert np.isnan(ax_scores.lines[-1].get_data()[1]).all()
    assert len(ax_sum.lines[1].get_data()[0]) == 0
    assert all(bar.get_height() == 0 for bar in ax_out.patches)
    assert [ax.get_ylim() for ax in fig.axes] == limits


def test_online_trace_and_bad_steps():
    scores, values = scale.example_row(num_keys=10)
    states = scale.online_trace(scores, values, 4)
    assert len(states) == 4  # before any key, then ⌈10/4⌉ = 3 blocks
    assert float(states[-1].max) == float(scores.max())
    with pytest.raises(ValueError, match=r"step must be in 0 … 6 \(⌈48/8⌉ blocks\), got 7"):
        scale.draw_online(7)


def test_online_slider_changes_the_displayed_png():
    view = scale.online_view(step=1)
    before = shown_png(view)
    control(view, "key blocks folded in").value = 4
    after = shown_png(view)
    assert before.startswith(b"\x89PNG") and after.startswith(b"\x89PNG") and before != after


# ------------------------------------------------------------------------------ 2. tiles
def expected_map(Q: int, K: int, b: int, causal: bool) -> np.ndarray:
    visible = np.array([[(j <= i + K - Q) or not causal for j in range(K)] for i in range(Q)])
    out = np.where(visible, scale.USED, scale.MASKED_IN_TILE)
    for q0 in range(0, Q, b):
        for k0 in range(0, K, b):
            if not visible[q0:q0 + b, k0:k0 + b].any():
                out[q0:q0 + b, k0:k0 + b] = np.nan  # a tile with nothing visible: skipped
    return out


@pytest.mark.parametrize("block_size", scale.BLOCK_CHOICES)
def test_tiles_view_colours_every_score_by_what_its_tile_does(block_size):
    view = scale.tiles_view(block_size=scale.BLOCK_CHOICES[0])
    control(view, "block size b").value = block_size
    ax, bars = view.result.axes
    drawn = ax.images[0].get_array()
    want = expected_map(100, 100, block_size, True)
    np.testing.assert_array_equal(np.ma.getmaskarray(drawn), np.isnan(want))
    np.testing.assert_array_equal(drawn.filled(np.nan), want)
    assert ax.images[0].get_clim() == (0.0, 1.0)  # fixed colour scale
    n = math.ceil(100 / block_size)
    skipped = sum(1 for i in range(n) for j in range(n) if np.isnan(want[i * block_size, j * block_size]))
    assert ax.get_title() == f"blocks of {block_size}: {n * n - skipped} of {n * n} tiles computed, {skipped} skipped"
    assert len(ax.collections[0].get_segments()) == 2 * (n - 1)  # tile borders
    # FLOPs: the tiles computed and the scores needed, as % of all tiles
    flops_all = 2 * 100 * 100 * 128
    computed = sum(min(block_size, 100 - i * block_size) * min(block_size, 100 - j * block_size)
                   for i in range(n) for j in range(n)
                   if not np.isnan(want[i * block_size, j * block_size])) * 2 * 128
    needed = 100 * 101 // 2 * 2 * 128
    heights = [p.get_height() for p in bars.patches]
    assert heights == pytest.approx([100.0, 100 * computed / flops_all, 100 * needed / flops_all])
    assert bars.get_ylim() == (0, 118)


def test_without_the_causal_mask_every_tile_is_computed():
    view = scale.tiles_view(block_size=24, causal=True)
    fig = view.result
    control(view, "causal mask").value = False
    assert view.result is fig
    ax, bars = fig.axes
    drawn = ax.images[0].get_array()
    assert not np.ma.getmaskarray(drawn).any() and (drawn == scale.USED).all()
    assert [p.get_height() for p in bars.patches] == [100.0, 100.0, 100.0]
    assert "0 skipped" in ax.get_title() and bars.get_title() == "no mask: nothing to skip"


def test_tile_map_with_fewer_queries_than_keys_is_lower_right():
    data = scale.tile_map(3, 10, 4)  # 3 new queries against 10 keys (a KV cache)
    assert data.shape == (3, 10)
    np.testing.assert_array_equal(data, expected_map(3, 10, 4, True))
    assert (data[:, :7] == scale.USED).all()  # every query sees the 7 keys before it


def test_tiles_slider_changes_the_displayed_png():
    view = scale.tiles_view(block_size=16)
    before = shown_png(view)
    control(view, "block size b").value = 48
    assert shown_png(view) != before


# ----------------------------------------------------------------------- 3. grouped-query
@pytest.mark.parametrize("kv_heads", scale.KV_HEAD_CHOICES)
def test_gqa_view_shows_the_groups_and_the_cache_formula(kv_heads):
    view = scale.gqa_view(kv_heads=32)
    control(view, "key/value heads G").value = kv_heads
    ax, lines = view.result.axes
    group = 32 // kv_heads
    rows = np.asarray(ax.images[0].get_array())
    assert rows.shape == (2, 32)
    assert (rows[0] == rows[0, 0]).all()  # every query head drawn alike
    reads = [h // group for h in range(32)]  # the K/V head query head h reads
    np.testing.assert_array_equal(rows[1], [r % 2 for r in reads])  # neighbouring groups alternate
    assert len(ax.collections[1].get_segments()) == kv_heads - 1  # a border between groups
    per_token = 2 * 32 * kv_heads * 128 * 2
    (current,) = [line for line in lines.lines if line.get_gid() == "current"]
    xs, ys = current.get_data()
    np.testing.assert_allclose(ys, np.asarray(xs) * per_token / 2**30)
    assert lines.get_title().startswith(f"2·32·{kv_heads}·128·2 B = {per_token // 1024} KiB a token")
    assert f"\n({100 - 100 * kv_heads // 32}% saved against multi-head)" in lines.get_title()
    assert lines.get_ylim() == pytest.approx((5e-3, 300))  # fixed scale
    assert scale.cache_bytes_per_token(32, kv_heads, 128, 2) == per_token


@pytest.mark.parametrize("kv_heads", scale.KV_HEAD_CHOICES)
def test_gqa_titles_stay_inside_the_figure(kv_heads):
    # the right-hand title once ran past the figure's right edge (clipped) for every G
    fig = scale.draw_gqa(kv_heads)
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    width, height = fig.bbox.width, fig.bbox.height
    for ax in fig.axes:
        box = ax.title.get_window_extent(renderer)
        assert ax.get_title() and 0 <= box.x0 and box.x1 <= width and box.y1 <= height, (
            ax.get_title(), box)
        assert box.y0 >= ax.bbox.y1  # above its axes, not over them


def _drawn(fig: Figure):
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    return renderer


def _touches(box, path, width_px: float) -> bool:
    """Whether a text's box, grown by half the line's width and 1 px, meets the line's path
    (display coordinates)."""
    return path.intersects_bbox(box.padded(width_px / 2 + 1), filled=False)


@pytest.mark.parametrize("kv_heads", scale.KV_HEAD_CHOICES)
def test_gqa_no_label_touches_a_line(kv_heads):
    # "G=32" once sat on the 80 GiB line (64 GiB is a few pixels below 80 on this log scale),
    # and the line's own label nearly did: the line now stops where the curves do, its label
    # 3 points above it. Every text of the cache panel, and the K/V head numbers of the
    # left one, against every line near it, in every state of the view.
    fig = scale.draw_gqa(kv_heads)
    renderer = _drawn(fig)
    px = fig.dpi / 72
    heads, lines = fig.axes
    texts = [t for t in lines.texts if t.get_text()]
    assert len(texts) == len(scale.KV_HEAD_CHOICES) + 1  # G=… labels and the 80 GiB one
    for text in texts:
        box = text.get_window_extent(renderer)
        for line in lines.lines:
            path = line.get_transform().transform_path(line.get_path())
            assert not _touches(box, path, line.get_linewidth() * px), (text.get_text(), line)
    borders = heads.collections[1]  # the black lines between groups
    for text in (t for t in heads.texts if t.get_text()):
        box = text.get_window_extent(renderer)
        for segment in borders.get_segments():
            path = Path(heads.transData.transform(segment))
            assert not _touches(box, path, borders.get_linewidth()[0] * px), text.get_text()


def test_gqa_numbers_heads_from_1():
    # The series numbers heads from 1: the query-head ticks and the K/V heads' labels.
    fig = scale.draw_gqa(8)
    heads = fig.axes[0]
    assert [t.get_text() for t in heads.get_xticklabels()] == ["1", "8", "16", "24", "32"]
    np.testing.assert_array_equal(heads.get_xticks(), [0, 7, 15, 23, 31])
    assert [t.get_text() for t in heads.texts if t.get_text()] == [str(g) for g in range(1, 9)]
    assert heads.get_xlabel() == "query head"


def test_gqa_names_the_two_ends_and_rejects_other_head_counts():
    assert scale.draw_gqa(32).axes[0].get_title().startswith("multi-head: G = 32")
    assert scale.draw_gqa(1).axes[0].get_title().startswith("multi-query: G = 1 K/V head,")
    assert scale.draw_gqa(4).axes[0].get_title().startswith("grouped-query: G = 4")
    with pytest.raises(ValueError, match=r"kv_heads must be one of \(32, 16, 8, 4, 2, 1\) .* got 3"):
        scale.draw_gqa(3)


def test_gqa_slider_changes_the_displayed_png():
    view = scale.gqa_view(kv_heads=8)
    before = shown_png(view)
    control(view, "key/value heads G").value = 1
    assert shown_png(view) != before


def test_demo_views_show_figures():  # build time and latency: benchmarks/bench_sliders.py
    views = scale.demo_views()
    assert set(views) == {"online", "tiles", "gqa"}
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
        assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept


# ------------------------------------------------------------------ memory and bad input
def old_tile_map(Q: int, K: int, b: int, causal: bool) -> np.ndarray:
    """tile_map as it was first written: each tile kind repeated b × b times, then cut to
    (Q, K) (memory ∝ b², whatever Q and K)."""
    from helpers.tiling import SKIPPED, tile_kinds

    kinds = tile_kinds(Q, K, b, causal=causal).numpy()
    per_entry = np.repeat(np.repeat(kinds, b, axis=0), b, axis=1)[:Q, :K]
    visible = np.array([[j <= i + K - Q or not causal for j in range(K)] for i in range(Q)])
    return np.where(per_entry == SKIPPED, np.nan, np.where(visible, scale.USED, scale.MASKED_IN_TILE))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", [(100, 100), (3, 10), (13, 7), (1, 1)])
def test_tile_map_is_what_it_was_for_every_block_size_of_the_slider(shape, causal):
    for block_size in (*scale.BLOCK_CHOICES, 1, 5, 99, 100, 101):
        np.testing.assert_array_equal(scale.tile_map(*shape, block_size, causal=causal),
                                      old_tile_map(*shape, block_size, causal))


def test_tile_memory_grows_with_the_picture_not_the_block_size():
    """A block size of 4096 on an 8 × 8 map used to allocate a 4096 × 4096 map (128 MiB)."""
    import tracemalloc

    from helpers.tiling import peak_bytes

    def numpy_peak(fn) -> int:
        tracemalloc.start()
        try:
            fn()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert numpy_peak(lambda: scale.tile_map(8, 8, 4096)) < 5 * 2**20
    assert peak_bytes(lambda: scale.tile_map(8, 8, 4096)) < 5 * 2**20  # the torch part
    fig = scale.draw_tiles(4096, num_queries=8, num_keys=8)
    assert numpy_peak(lambda: scale.draw_tiles(4096, False, num_queries=8, num_keys=8, fig=fig)) \
        < 5 * 2**20
    np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), np.full((8, 8), scale.USED))


@pytest.mark.parametrize("call, match", [
    (lambda: scale.draw_online(2.0), r"^step must be an int"),  # was a TypeError
    (lambda: scale.draw_online(np.int64(2), block_size=np.int64(8)), None),  # NumPy ints work
    (lambda: scale.draw_online(1, seed=1.5), r"^seed must be an int"),
    (lambda: scale.online_view(step=7), r"^step must be in 0 … 6"),  # was clamped to 6
    (lambda: scale.example_row(0), r"^num_keys must be a positive int, got 0"),
    (lambda: scale.online_trace(torch.zeros(4, dtype=torch.float64), torch.zeros(3, 2,
                                dtype=torch.float64), 2), r"^values must have one row per score"),
    (lambda: scale.online_trace(torch.zeros(4), torch.zeros(4, 2, dtype=torch.float64), 2),
     r"^values must have the dtype and device of scores"),  # was a RuntimeError
    (lambda: scale.tile_map(4, 4, 2, causal=None), r"^causal must be True or False"),
    (lambda: scale.draw_tiles(16, size=0), r"^size must be a positive int, got 0"),  # named qk_size
    (lambda: scale.tiles_view(block_size=5), r"^block_size must be one of the slider's"),  # TraitError
    (lambda: scale.draw_gqa(8.0), r"^kv_heads must be one of"),  # was a TypeError
    (lambda: scale.draw_gqa(True), r"^kv_heads must be one of"),  # was drawn as G = 1
    (lambda: scale.gqa_view(kv_heads=3), r"^kv_heads must be one of the slider's"),  # TraitError
    (lambda: scale.cache_bytes_per_token(32, 0, 128, 2), r"^kv_heads must be a positive int"),
    (lambda: scale.draw_online(fig="x"), r"^fig must be a matplotlib Figure or None, got str"),
])
def test_bad_input_is_refused_clearly(call, match):
    if match is None:
        assert isinstance(call(), Figure)
        return
    with pytest.raises(ValueError, match=match):
        call()


def test_gqa_accepts_numpy_ints():
    fig = scale.draw_gqa(np.int64(4))
    assert fig.axes[0].get_title().startswith("grouped-query: G = 4 K/V heads, 8 query heads each")
