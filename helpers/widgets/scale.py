"""Views for notebook 09: the online softmax (在线softmax) key block by key block, the tiles
(分块) causal attention computes or skips, and the KV cache (键值缓存) that grouped-query
attention (分组查询注意力) shrinks.

Legend: K keys of one query row, b block size, V value size, Q queries, H query heads,
G key/value heads (H/G query heads share one), L layers, d head size.

Each view is built once into a Figure it keeps; a slider move updates its artists in place.
"""

from __future__ import annotations

import numbers

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, NullLocator

from ..checks import check_bool, check_floating, check_like, check_positive_int, check_rank, check_seed
from ..plotting import show_heatmaps
from ..tiling import (
    SKIPPED, OnlineSoftmax, online_softmax_result, online_softmax_start, online_softmax_update,
    tile_flops, tile_kinds,
)
from ._common import (
    check_figure, check_int_in, freeze_layout, interactive_figure, set_image_data, start_figure,
)
from .page import PageView

__all__ = [
    "example_row", "online_trace", "draw_online", "online_view",
    "BLOCK_CHOICES", "tile_map", "draw_tiles", "tiles_view",
    "KV_HEAD_CHOICES", "MODEL", "cache_bytes_per_token", "draw_gqa", "gqa_view", "demo_views",
]


# ------------------------------------------------------------------ 1. the online softmax
def example_row(
    num_keys: int = 48, value_size: int = 6, seed: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of one query row (K,) and the values (K, V), float64, from ``seed``. The scores
    grow on average along the row, so the running max changes in several blocks (and the sum
    gets rescaled more than once)."""
    check_positive_int("num_keys", num_keys)
    check_positive_int("value_size", value_size)
    gen = torch.Generator().manual_seed(check_seed(seed))
    scores = torch.randn(num_keys, generator=gen, dtype=torch.float64) * 1.2 \
        + torch.linspace(0.0, 1.5, num_keys, dtype=torch.float64)  # (K,)
    values = torch.randn(num_keys, value_size, generator=gen, dtype=torch.float64)  # (K, V)
    return scores, values


def online_trace(scores: torch.Tensor, values: torch.Tensor, block_size: int) -> list[OnlineSoftmax]:
    """The online softmax state of one row before any key and after each block of
    ``block_size`` keys: a list of ⌈K/b⌉ + 1 states (max (1,), sum (1,), out (V,)).
    ``scores`` (K,) and ``values`` (K, V) share one floating dtype and device."""
    check_rank("scores", scores, 1, "(K,)")
    check_floating("scores", scores)
    if scores.device.type == "meta":
        raise ValueError("scores must hold numbers (a tensor on a real device), got a 'meta' tensor")
    check_rank("values", values, 2, "(K, V)")
    check_like("values", values, "scores", scores)
    if values.shape[0] != scores.shape[0]:
        raise ValueError(f"values must have one row per score, (K, V) with K = {scores.shape[0]}, "
                         f"got shape {tuple(values.shape)}")
    check_positive_int("block_size", block_size)
    state = online_softmax_start((), values.shape[-1], dtype=scores.dtype)
    states = [state]
    for start in range(0, scores.shape[-1], block_size):
        state = online_softmax_update(state, scores[start:start + block_size],
                                      values[start:start + block_size])
        states.append(state)
    return states


ONLINE_LABEL = "scale.online"


def _layout_online(fig: Figure, scores: np.ndarray, exact: np.ndarray, sums: np.ndarray,
                   outputs: np.ndarray, block_size: int) -> None:
    start_figure(fig, ONLINE_LABEL)
    ax_scores, ax_sum, ax_out = fig.subplots(1, 3, width_ratios=[1.6, 1.0, 1.0])
    K = len(scores)
    # One bar per key, drawn as thick vertical lines: one collection draws faster than K patches.
    ax_scores.add_collection(LineCollection([[(k, 0.0), (k, v)] for k, v in enumerate(scores)],
                                            colors="lightgrey", linewidths=5, capstyle="butt"))
    for edge in range(block_size, K, block_size):
        ax_scores.axvline(edge - 0.5, color="grey", linewidth=0.6, linestyle=":")
    ax_scores.axhline(0.0, color="black", linewidth=0.5)
    ax_scores.plot([], [], color="C3", linestyle="--", linewidth=1.5, label="running max m")
    pad = 0.1 * (scores.max() - scores.min())
    ax_scores.set_ylim(min(scores.min(), 0.0) - pad, scores.max() + 3 * pad)
    ax_scores.set_xlim(-1, K)
    ax_scores.set(xlabel="key", ylabel="score")
    ax_scores.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
    ax_scores.legend(loc="upper left", fontsize="small")
    steps = np.arange(1, len(sums) + 1)
    ax_sum.plot(steps, sums, color="C0", alpha=0.15, marker="o", markersize=3)  # every block
    ax_sum.plot([], [], color="C0", marker="o", markersize=5)  # the blocks seen so far
    ax_sum.set_ylim(0, sums.max() * 1.2)
    ax_sum.set_xlim(0.5, len(sums) + 0.5)
    ax_sum.xaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    ax_sum.set(xlabel="key blocks seen", ylabel="running sum ℓ")
    dims = np.arange(len(exact))
    ax_out.bar(dims, np.zeros(len(exact)), width=0.6, color="C2", label="out / ℓ so far")
    ax_out.scatter(dims, exact, marker="_", s=400, color="black", linewidths=2,
                   label="exact output", zorder=3)
    top = max(np.abs(outputs).max(), np.abs(exact).max()) * 1.15
    ax_out.set_ylim(-top, top * 1.45)  # room for the legend
    ax_out.axhline(0.0, color="black", linewidth=0.5)
    ax_out.xaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    ax_out.set(xlabel="output dimension", ylabel="value")
    ax_out.legend(loc="upper left", fontsize="small")
    for ax in (ax_scores, ax_sum, ax_out):  # few labels: text is most of the drawing time
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.set_title("placeholder", fontsize="medium")  # the layout keeps room for the titles


def _online_steps(step: int, block_size: int, num_keys: int, value_size: int, seed: int) -> int:
    """The number of blocks ⌈K/b⌉, after checking every number ``draw_online`` takes."""
    check_positive_int("block_size", block_size)
    check_positive_int("num_keys", num_keys)
    check_positive_int("value_size", value_size)
    check_seed(seed)
    steps = -(-num_keys // block_size)
    check_int_in("step", step)
    if not 0 <= step <= steps:
        raise ValueError(f"step must be in 0 … {steps} (⌈{num_keys}/{block_size}⌉ blocks), got {step}")
    return steps


def draw_online(
    step: int = 2, *, block_size: int = 8, num_keys: int = 48, value_size: int = 6,
    seed: int = 1, fig: Figure | None = None,
) -> Figure:
    """The online softmax of one query row after ``step`` blocks of ``block_size`` keys (0:
    none yet): left, the row's scores (the blocks seen coloured) and the running max m over
    them; middle, the running sum ℓ after each block (it drops when a larger max rescales it);
    right, the partial output out/ℓ over the keys seen against the exact
    softmax(scores)·values (black). At the last step they are equal.

    Scales are fixed by the whole trace, so only what changed moves. A Figure this function drew
    with the same sizes is updated in place; any other is cleared and redrawn."""
    steps = _online_steps(step, block_size, num_keys, value_size, seed)
    check_figure("fig", fig, optional=True)
    step, block_size, num_keys, value_size = int(step), int(block_size), int(num_keys), int(value_size)
    scores, values = example_row(num_keys, value_size, seed)
    states = online_trace(scores, values, block_size)
    exact = (torch.softmax(scores, dim=0) @ values).numpy()  # (V,)
    maxes = np.array([float(s.max) for s in states[1:]])  # (steps,)
    sums = np.array([float(s.sum) for s in states[1:]])
    outputs = np.stack([online_softmax_result(s).numpy() for s in states[1:]])  # (steps, V)
    if fig is None:
        fig = Figure(figsize=(10.0, 3.6))
    key = (num_keys, value_size, block_size, seed)
    if fig.get_label() != ONLINE_LABEL or getattr(fig, "_scale_key", None) != key:
        _layout_online(fig, scores.numpy(), exact, sums, outputs, block_size)
        fig._scale_key = key
        freeze_layout(fig)
    ax_scores, ax_sum, ax_out = fig.axes
    seen = min(step * block_size, num_keys)
    ax_scores.collections[0].set_colors(["C0"] * seen + ["lightgrey"] * (num_keys - seen))
    m = maxes[step - 1] if step else np.nan
    ax_scores.lines[-1].set_data([-0.5, seen - 0.5], [m, m])
    ax_scores.set_title(f"{step} of {steps} blocks seen: m = {m:.2f}" if step else
                        f"no key seen yet (blocks of {block_size})", fontsize="medium")
    ax_sum.lines[1].set_data(np.arange(1, step + 1), sums[:step])
    if step > 1 and maxes[step - 1] > maxes[step - 2]:
        note = f"new max: ℓ rescaled by ×{np.exp(maxes[step - 2] - maxes[step - 1]):.2f}"
    else:
        note = f"ℓ = {sums[step - 1]:.2f}, max unchanged" if step else "ℓ = 0"
    ax_sum.set_title(note, fontsize="medium")
    partial = online_softmax_result(states[step]).numpy()
    for bar, value in zip(ax_out.patches, partial):
        bar.set_height(value)
    ax_out.set_title(f"largest error: {np.abs(partial - exact).max():.3f}", fontsize="medium")
    return fig


def online_view(step: int = 2, *, block_size: int = 8, num_keys: int = 48,
                value_size: int = 6, seed: int = 1) -> PageView:
    """Slider: how many key blocks the online softmax has folded in → ``draw_online``."""
    steps = _online_steps(step, block_size, num_keys, value_size, seed)
    fig = Figure(figsize=(10.0, 3.6))

    def draw(step: int) -> Figure:
        return draw_online(step, block_size=block_size, num_keys=num_keys,
                           value_size=value_size, seed=seed, fig=fig)

    return interactive_figure(
        draw, 
        step=widgets.IntSlider(value=step, min=0, max=steps, description="key blocks folded in",
                               continuous_update=False, style={"description_width": "initial"}))


# ---------------------------------------------------------------------------- 2. tiles
def _is_choice(value: object, choices: tuple[int, ...]) -> bool:
    """An int (not a bool, not a float equal to one) among ``choices``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value in choices


BLOCK_CHOICES = (4, 8, 12, 16, 24, 32, 48, 64)
USED, MASKED_IN_TILE = 1.0, 0.35  # colour values: computed and needed / computed, then masked
TILES_LABEL = "scale.tiles"


def tile_map(num_queries: int, num_keys: int, block_size: int, *, causal: bool = True) -> np.ndarray:
    """(Q, K) float map of what tiled attention does with each score: ``USED`` (computed and
    visible), ``MASKED_IN_TILE`` (computed in a partly masked tile, then hidden), NaN (in a
    skipped tile: never computed). Causal masks are lower-right aligned. Memory: the (Q, K)
    map and the (⌈Q/b⌉, ⌈K/b⌉) tile kinds, whatever ``block_size``."""
    check_bool("causal", causal)
    kinds = tile_kinds(num_queries, num_keys, block_size, causal=causal).numpy()  # (⌈Q/b⌉, ⌈K/b⌉)
    rows = np.arange(num_queries)[:, None]  # (Q, 1)
    cols = np.arange(num_keys)[None, :]  # (1, K)
    skipped = (kinds == SKIPPED)[rows // block_size, cols // block_size]  # (Q, K): entry's tile
    visible = cols <= rows + (num_keys - num_queries) if causal else True  # (Q, K) or all
    out = np.where(visible, USED, MASKED_IN_TILE)  # (Q, K)
    return np.where(skipped, np.nan, out)


def _layout_tiles(fig: Figure, num_queries: int, num_keys: int) -> None:
    start_figure(fig, TILES_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.25, 1])
    show_heatmaps(np.ones((num_queries, num_keys)), xlabel="key", ylabel="query", cmap="Blues",
                  vmin=0.0, vmax=1.0, colorbar=False, fig=left)
    ax = left.axes[0]
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))  # few labels: text is
    ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))  # most of the drawing time
    ax.add_collection(LineCollection([], colors="white", linewidths=1.2))
    handles = [Patch(color=ax.images[0].cmap(USED), label="computed, needed"),
               Patch(color=ax.images[0].cmap(MASKED_IN_TILE), label="computed, then masked"),
               Patch(color=ax.images[0].cmap.get_bad(), label="tile skipped")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize="small")
    bars = right.subplots()
    bars.bar([0, 1, 2], [100, 0, 0], color=["lightgrey", "C0", "C2"], width=0.6)
    bars.set_xticks([0, 1, 2], ["all tiles\n(no skipping)", "tiles\ncomputed", "scores\nneeded"])
    bars.set_ylim(0, 118)
    bars.set_yticks([0, 50, 100])  # few labels: text is most of the drawing time
    bars.set_ylabel("% of the FLOPs of all tiles")
    for axes in (ax, bars):
        axes.set_title("placeholder", fontsize="medium")  # the layout keeps room for the titles
    for x in range(3):
        bars.text(x, 0, "", ha="center", va="bottom", fontsize="small")


def draw_tiles(
    block_size: int = 16, causal: bool = True, *, num_queries: int = 100, num_keys: int = 100,
    size: int = 64, fig: Figure | None = None,
) -> Figure:
    """Left: every score of a (Q, K) attention, coloured by what tiled attention with blocks of
    ``block_size`` does with it (white lines: tile borders; grey: tiles skipped under the causal
    mask). Right: the FLOPs of the tiles computed, and of the visible scores alone, as % of all
    tiles (QKᵀ and P·V, D = V = ``size``). A Figure this function drew with the same Q and K
    is updated in place."""
    check_positive_int("size", size)
    check_figure("fig", fig, optional=True)
    data = tile_map(num_queries, num_keys, block_size, causal=causal)
    computed, total = tile_flops(num_queries, num_keys, block_size, size, size, causal=causal)
    needed = int(np.sum(data == USED)) * 2 * (size + size)
    kinds = tile_kinds(num_queries, num_keys, block_size, causal=causal)
    if fig is None:
        fig = Figure(figsize=(9.0, 4.4))
    if fig.get_label() != TILES_LABEL or getattr(fig, "_scale_key", None) != (num_queries, num_keys):
        _layout_tiles(fig, num_queries, num_keys)
        fig._scale_key = (num_queries, num_keys)
        freeze_layout(fig)
    ax, bars = fig.axes
    set_image_data(ax.images[0], np.ma.masked_invalid(data))
    borders = [[(x - 0.5, -0.5), (x - 0.5, num_queries - 0.5)] for x in range(block_size, num_keys, block_size)]
    borders += [[(-0.5, y - 0.5), (num_keys - 0.5, y - 0.5)] for y in range(block_size, num_queries, block_size)]
    ax.collections[0].set_segments(borders)
    n_tiles, n_skipped = kinds.numel(), int((kinds == SKIPPED).sum())
    ax.set_title(f"blocks of {block_size}: {n_tiles - n_skipped} of {n_tiles} tiles computed, "
                 f"{n_skipped} skipped", fontsize="medium")
    shares = [100.0, 100.0 * computed / total, 100.0 * needed / total]
    for bar, text, share in zip(bars.patches, bars.texts, shares):
        bar.set_height(share)
        text.set_y(share + 2)
        text.set_text(f"{share:.0f}%")
    bars.set_title(f"skipping saves {100 - shares[1]:.0f}%" if causal else "no mask: nothing to skip",
                   fontsize="medium")
    return fig


def tiles_view(block_size: int = 16, causal: bool = True, *, num_queries: int = 100,
               num_keys: int = 100, size: int = 64) -> PageView:
    """Slider: the block size (one of ``BLOCK_CHOICES``); checkbox: the causal mask →
    ``draw_tiles``."""
    if not _is_choice(block_size, BLOCK_CHOICES):
        raise ValueError(f"block_size must be one of the slider's {BLOCK_CHOICES}, got {block_size!r}")
    check_bool("causal", causal)
    for name, value in (("num_queries", num_queries), ("num_keys", num_keys), ("size", size)):
        check_positive_int(name, value)
    fig = Figure(figsize=(9.0, 4.4))

    def draw(block_size: int, causal: bool) -> Figure:
        return draw_tiles(block_size, causal, num_queries=num_queries, num_keys=num_keys,
                          size=size, fig=fig)

    return interactive_figure(
        draw, 
        block_size=widgets.SelectionSlider(options=list(BLOCK_CHOICES), value=block_size,
                                           description="block size b", continuous_update=False,
                                           style={"description_width": "initial"}),
        causal=widgets.Checkbox(value=bool(causal), description="causal mask"))


# -------------------------------------------------------------------- 3. grouped-query KV
MODEL = {"layers": 32, "heads": 32, "head_size": 128, "bytes": 2}  # Llama-2-7B's shape, float16
KV_HEAD_CHOICES = (32, 16, 8, 4, 2, 1)
CONTEXTS = np.array([512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072])
GQA_LABEL = "scale.gqa"


def cache_bytes_per_token(layers: int, kv_heads: int, head_size: int, bytes_per_number: int) -> int:
    """2 · L · G · d · bytes: a key and a value of size d for each of G key/value heads in each
    of L layers."""
    for name, value in (("layers", layers), ("kv_heads", kv_heads), ("head_size", head_size),
                        ("bytes_per_number", bytes_per_number)):
        check_positive_int(name, value)
    return 2 * layers * kv_heads * head_size * bytes_per_number


def _layout_gqa(fig: Figure, heads: int) -> None:
    start_figure(fig, GQA_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.2, 1])
    show_heatmaps(np.zeros((2, heads)), xlabel="query head", ylabel="", cmap="Blues", vmin=-0.6,
                  vmax=1.3, colorbar=False, yticklabels=["query head", "reads K/V head"], fig=left)
    ax = left.axes[0]
    numbered = sorted({0, *range(7, heads, 8), heads - 1})  # heads are numbered from 1
    ax.set_xticks(numbered, [str(i + 1) for i in numbered])
    ax.add_collection(LineCollection([[(x - 0.5, -0.5), (x - 0.5, 0.5)] for x in range(1, heads)],
                                     colors="white", linewidths=1))  # every query head its own
    ax.add_collection(LineCollection([], colors="black", linewidths=2))  # K/V groups
    for _ in range(heads):
        ax.text(0, 1, "", ha="center", va="center", fontsize="x-small")
    lines = right.subplots()
    for g in KV_HEAD_CHOICES:
        per_token = cache_bytes_per_token(MODEL["layers"], g, MODEL["head_size"], MODEL["bytes"])
        lines.plot(CONTEXTS, CONTEXTS * per_token / 2**30, color="grey", alpha=0.35, linewidth=1)
        lines.text(CONTEXTS[-1] * 1.3, CONTEXTS[-1] * per_token / 2**30, f"G={g}",
                   va="center", fontsize="x-small", color="grey")
    # The 80 GiB line stops where the curves do: the G labels to its right (G=32's sits at
    # 64 GiB, a few pixels below 80) never touch it; its own label sits 3 points above it.
    lines.plot([CONTEXTS[0] / 1.3, CONTEXTS[-1]], [80, 80], color="black", linestyle=":",
               linewidth=1)
    lines.annotate("80 GiB: one large GPU", (CONTEXTS[0], 80), xytext=(0, 3),
                   textcoords="offset points", va="bottom", fontsize="x-small")
    lines.plot([], [], color="C3", linewidth=2.5, gid="current")
    lines.set_xscale("log", base=2)
    lines.set_yscale("log")
    lines.set_xlabel("tokens in the cache (one sequence)")
    lines.set_ylabel("KV cache (GiB)")
    lines.set_xlim(CONTEXTS[0] / 1.3, CONTEXTS[-1] * 4)  # room for the labels
    lines.set_ylim(5e-3, 300)
    lines.set_xticks([2**10, 2**13, 2**17], ["1k", "8k", "128k"])
    lines.set_yticks([0.01, 0.1, 1, 10, 100], ["0.01", "0.1", "1", "10", "100"])
    for axis in (lines.xaxis, lines.yaxis):  # few labels: text is most of the drawing time
        axis.set_minor_locator(NullLocator())
    ax.set_title("placeholder", fontsize="medium")  # the layout keeps room for the titles
    lines.set_title("placeholder\nplaceholder", fontsize="medium")  # (two lines: see draw_gqa)


def draw_gqa(kv_heads: int = 8, *, fig: Figure | None = None) -> Figure:
    """Left: which key/value head each of the H = 32 query heads of ``MODEL`` reads (H/G
    neighbours share one; G = H is multi-head, G = 1 multi-query attention); heads are
    numbered from 1, as everywhere in the series. Right: the KV cache of one sequence against
    its length for every G (grey) and this one (red), log scales fixed, no label touching a
    line; the title gives the bytes per token, 2 · L · G · d · bytes, and the share saved
    against multi-head attention, on two lines that stay inside the figure."""
    heads = MODEL["heads"]
    check_figure("fig", fig, optional=True)
    if not _is_choice(kv_heads, KV_HEAD_CHOICES):
        raise ValueError(f"kv_heads must be one of {KV_HEAD_CHOICES} (divisors of H = {heads}), "
                         f"got {kv_heads!r}")
    kv_heads = int(kv_heads)
    if fig is None:
        fig = Figure(figsize=(10.0, 3.6))
    if fig.get_label() != GQA_LABEL:
        _layout_gqa(fig, heads)
        freeze_layout(fig)
    ax, lines = fig.axes
    group = heads // kv_heads  # query heads per K/V head
    kv_of = np.arange(heads) // group  # (H,): the K/V head each query head reads
    set_image_data(ax.images[0], np.stack([np.full(heads, 0.45), kv_of % 2]))  # groups: alternate
    ax.collections[1].set_segments([[(x - 0.5, -0.5), (x - 0.5, 1.5)]
                                    for x in range(group, heads, group)])
    for i, text in enumerate(ax.texts):  # the K/V head's number (from 1), once per group
        centre = (i // group) * group + (group - 1) / 2  # when it fits
        show = i % group == 0 and (group >= 2 or heads <= 16)
        text.set_position((centre, 1))
        text.set_text(str(kv_of[i] + 1) if show else "")
        text.set_color("white" if kv_of[i] % 2 else "black")  # readable on both shades
    per_token = cache_bytes_per_token(MODEL["layers"], kv_heads, MODEL["head_size"], MODEL["bytes"])
    full = cache_bytes_per_token(MODEL["layers"], heads, MODEL["head_size"], MODEL["bytes"])
    name = ("multi-head" if kv_heads == heads else "multi-query" if kv_heads == 1
            else "grouped-query")
    ax.set_title(f"{name}: G = {kv_heads} K/V head{'s' if kv_heads > 1 else ''}, "
                 f"{group} query head{'s' if group > 1 else ''} each", fontsize="medium")
    (current,) = [line for line in lines.lines if line.get_gid() == "current"]
    current.set_data(CONTEXTS, CONTEXTS * per_token / 2**30)
    lines.set_title(f"2·{MODEL['layers']}·{kv_heads}·{MODEL['head_size']}·{MODEL['bytes']} B = "
                    f"{per_token // 1024} KiB a token\n({100 * (1 - per_token / full):.0f}% saved "
                    "against multi-head)", fontsize="medium")  # two lines: one is wider than the axes
    return fig


def gqa_view(kv_heads: int = 8) -> PageView:
    """Slider: the number of key/value heads G (one of ``KV_HEAD_CHOICES``) → ``draw_gqa``."""
    if not _is_choice(kv_heads, KV_HEAD_CHOICES):
        raise ValueError(f"kv_heads must be one of the slider's {KV_HEAD_CHOICES}, got {kv_heads!r}")
    fig = Figure(figsize=(10.0, 3.6))
    return interactive_figure(
        lambda kv_heads: draw_gqa(kv_heads, fig=fig), 
        kv_heads=widgets.SelectionSlider(options=list(KV_HEAD_CHOICES), value=kv_heads,
                                         description="key/value heads G", continuous_update=False,
                                         style={"description_width": "initial"}))


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 09 shows them."""
    return {"online": online_view(), "tiles": tiles_view(), "gqa": gqa_view()}
