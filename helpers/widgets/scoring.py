"""Views for notebook 04: why scaled dot products divide by √D, and what the additive scorer's
hidden units (``num_hiddens``) do.

Legend: B batch, Q queries, K key-value pairs, D query/key size, V value size, N hidden units
(``num_hiddens``; H is kept for heads). Weights are laid out (..., Q, K). Valid lengths keep the
first ``n`` keys of a row; boolean masks use ``True`` = takes part.

Every view draws a pure function of its control values (``draw_scaling``, ``draw_hidden_size``)
whose inputs come from seeded pure functions (``scaling_inputs``, ``toy_batch``,
``additive_parameters``), so that tests can recompute what is drawn.
"""

from __future__ import annotations

import functools
import math
import numbers

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch
from matplotlib.transforms import ScaledTranslation

from ..attention import AdditiveAttention
from ..checks import (
    broadcast_shape, check_bool, check_floating, check_holds_data, check_like, check_positive_int,
    check_qk_size, check_rank, check_real, check_seed, check_size,
)
from ..plotting import to_numpy
from ._common import (
    check_figure, check_int_in, freeze_layout, interactive_figure, set_image_data, start_figure,
)
from .page import PageView

__all__ = [
    "scaling_inputs", "scaling_weights", "draw_scaling", "scaling_view",
    "toy_batch", "additive_parameters", "additive_score", "make_additive", "pairs_alike",
    "pairs_alike_over_seeds", "draw_hidden_size", "rank_labels", "hidden_size_view", "demo_views",
]

KEY_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
MAX_POINTS = 64  # queries (heatmap rows and bars) and keys (columns) a scaling picture shows
SCALING_LABEL = "scoring.scaling"  # Figure label: tells draw_scaling a figure is its own
HIDDEN_LABEL = "scoring.hidden_size"


def _check_matrices(name: str, x: torch.Tensor, layout: str) -> None:
    """Raise unless ``x`` is a floating tensor holding data with at least 2 dims ``layout``."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {layout}, got {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(f"{name} must have at least 2 dimensions {layout}, got {x.dim()} "
                         f"with shape {tuple(x.shape)}")
    check_floating(name, x)
    check_holds_data(name, x)


def _check_batch(queries: torch.Tensor, keys: torch.Tensor) -> None:
    """Raise unless the leading (batch) dims of queries and keys broadcast together."""
    if broadcast_shape(queries.shape[:-2], keys.shape[:-2]) is None:
        raise ValueError(f"keys must have batch dimensions that broadcast with queries', got "
                         f"{tuple(keys.shape[:-2])} and {tuple(queries.shape[:-2])}")


def _check_seed_named(name: str, seed: object) -> int:
    """``check_seed`` with the parameter's own name in the message (e.g. "batch_seed")."""
    try:
        return check_seed(seed)
    except ValueError as error:
        raise ValueError(str(error).replace("seed", name, 1)) from None


# ---------------------------------------------------------------- why divide by √d
def scaling_inputs(
    d: int, num_queries: int = 6, num_keys: int = 12, seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries (Q, D) and keys (K, D) with independent N(0, 1) entries, from ``seed`` alone."""
    d, num_queries, num_keys = (check_positive_int(name, value) for name, value in (
        ("d", d), ("num_queries", num_queries), ("num_keys", num_keys)))
    gen = torch.Generator().manual_seed(check_seed(seed))
    queries = torch.randn(num_queries, d, generator=gen)  # (Q, D)
    keys = torch.randn(num_keys, d, generator=gen)  # (K, D)
    return queries, keys


def scaling_weights(queries: torch.Tensor, keys: torch.Tensor, scaled: bool = True) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) over the keys, or softmax(Q Kᵀ) when not ``scaled``: queries
    (..., Q, D) and keys (..., K, D), batch dims broadcasting → (..., Q, K)."""
    _check_matrices("queries", queries, "(..., Q, D)")
    _check_matrices("keys", keys, "(..., K, D)")
    check_like("keys", keys, "queries", queries)
    check_qk_size(queries, keys)
    _check_batch(queries, keys)
    check_bool("scaled", scaled)
    scores = queries @ keys.transpose(-2, -1)  # (..., Q, K)
    if scaled:
        scores = scores / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-1)


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of weights (..., Q, K) → (..., Q); 0·log 0 counts as 0."""
    return -(weights * torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny))).sum(-1)


def _layout_scaling(fig: Figure, num_queries: int, num_keys: int) -> None:
    """(Re)build the scaling view's artists in ``fig``: a heatmap, a colorbar, one bar per query."""
    start_figure(fig, SCALING_LABEL)  # before the colorbar, which then joins the layout
    ax_map, ax_bar = fig.subplots(1, 2, width_ratios=[2, 1])
    image = ax_map.imshow(np.zeros((num_queries, num_keys)), cmap="Reds", vmin=0.0, vmax=1.0,
                          aspect="auto", interpolation="nearest")
    ax_map.set_xlabel("Keys")
    ax_map.set_ylabel("Queries")
    fig.colorbar(image, ax=ax_map, shrink=0.8)
    ax_bar.barh(range(num_queries), np.zeros(num_queries), color="#c0392b")
    ax_bar.axvline(1 / num_keys, color="grey", linestyle="--")
    ax_bar.set_xlim(0.0, 1.0)
    ax_bar.set_ylim(num_queries - 0.5, -0.5)  # query 0 on top, as in the heatmap
    ax_bar.set_yticks(range(num_queries))
    ax_bar.set_xlabel("largest weight\n(dashed: 1/K)")  # one line is wider than the axes


def _is_scaling_figure(fig: Figure, num_queries: int, num_keys: int) -> bool:
    return (fig.get_label() == SCALING_LABEL and len(fig.axes) == 3
            and fig.axes[0].images[0].get_array().shape == (num_queries, num_keys))


def draw_scaling(
    d: int, scaled: bool = True, *, num_queries: int = 6, num_keys: int = 12, seed: int = 0,
    fig: Figure | None = None,
) -> Figure:
    """Weights softmax(q·k/√d) (or softmax(q·k)) of random queries over random keys.

    Left: the (Q, K) weights on a fixed 0–1 colour scale; right: each query's largest weight.
    The inputs are ``scaling_inputs(d, num_queries, num_keys, seed)``, d at most the slider's
    1024 and at most ``MAX_POINTS`` queries and keys. ``fig``: a Figure this function drew
    before is updated in place (fast); any other Figure is cleared and redrawn.
    """
    check_int_in("d", d, 1, KEY_SIZES[-1])
    check_int_in("num_queries", num_queries, 1, MAX_POINTS)
    check_int_in("num_keys", num_keys, 1, MAX_POINTS)
    check_bool("scaled", scaled)
    check_figure("fig", fig, optional=True)
    queries, keys = scaling_inputs(d, num_queries, num_keys, seed)
    weights = scaling_weights(queries, keys, scaled)  # (Q, K)
    if fig is None:
        fig = Figure(figsize=(7.5, 3.2))
    fresh = not _is_scaling_figure(fig, num_queries, num_keys)
    if fresh:
        _layout_scaling(fig, num_queries, num_keys)
    ax_map, ax_bar = fig.axes[0], fig.axes[1]
    set_image_data(ax_map.images[0], to_numpy(weights))
    for bar, width in zip(ax_bar.patches, weights.max(-1).values.tolist()):
        bar.set_width(width)
    spread = (queries @ keys.T).std().item() / (math.sqrt(d) if scaled else 1.0)
    ax_map.set_title(f"d = {d}, {'scores ÷ √d' if scaled else 'no scaling'} "
                     f"(score std {spread:.1f})", fontsize="medium")
    ax_bar.set_title(f"mean entropy {_entropy(weights).mean().item():.2f} nats\n"
                     f"(uniform: {math.log(num_keys):.2f})", fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def scaling_view(
    d: int = 64, scaled: bool = True, *, num_queries: int = 6, num_keys: int = 12, seed: int = 0,
) -> PageView:
    """Slider: the query/key size d (powers of two up to 1024), and a scaling switch →
    ``draw_scaling``. Raises ValueError for a ``d`` that is not one of the slider's sizes."""
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d not in KEY_SIZES:
        raise ValueError(f"d must be one of the slider's sizes {KEY_SIZES}, got {d!r}")
    check_bool("scaled", scaled)
    check_int_in("num_queries", num_queries, 1, MAX_POINTS)
    check_int_in("num_keys", num_keys, 1, MAX_POINTS)
    scaling_inputs(d, num_queries, num_keys, seed)  # checks the seed
    fig = Figure(figsize=(7.5, 3.2))

    def draw(d: int, scaled: bool) -> Figure:
        return draw_scaling(d, scaled, num_queries=num_queries, num_keys=num_keys, seed=seed,
                            fig=fig)

    return interactive_figure(
        draw, 
        d=widgets.SelectionSlider(options=KEY_SIZES, value=int(d), description="query/key size d",
                                  continuous_update=False, style={"description_width": "initial"}),
        scaled=widgets.Checkbox(value=bool(scaled), description="divide scores by √d"),
    )


# ---------------------------------------------------------------- the toy batch
TOY_SEED = 944  # chosen so that the ten keys of batch row 1 lie well apart in the key plane


def toy_batch(seed: int = TOY_SEED) -> dict[str, torch.Tensor]:
    """The toy batch of notebook 04, from ``seed`` alone (CPU tensors), for both scorers.

    ``keys`` (2, 10, 2) and ``queries`` (2, 2, 2) with N(0, 1) entries (queries of the key size,
    so that the dot product can score them too), ``values`` (2, 10, 4) = 0..39 in both batch
    rows, ``valid_lens`` [2, 6]. Query 0 of a row is called "A" and query 1 "B".
    """
    gen = torch.Generator().manual_seed(check_seed(seed))
    keys = torch.randn(2, 10, 2, generator=gen)  # (B, K, D)
    queries = torch.randn(2, 2, 2, generator=gen)  # (B, Q, D)
    return {
        "queries": queries,
        "keys": keys,
        "values": torch.arange(40.0).reshape(1, 10, 4).repeat(2, 1, 1),  # (B, K, V)
        "valid_lens": torch.tensor([2, 6]),  # (B,)
    }


# ---------------------------------------------------------------- the additive scorer
MAX_HIDDENS = 64
SCORE_SCALE = 3.0


def _draw_units(
    seed: int, query_size: int, key_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All ``MAX_HIDDENS`` units of the seeded draw: W_q (64, D_q), W_k (64, D_k), w_v (64,)."""
    gen = torch.Generator().manual_seed(seed)
    W_q = torch.randn(MAX_HIDDENS, query_size, generator=gen) / math.sqrt(query_size)
    W_k = torch.randn(MAX_HIDDENS, key_size, generator=gen) / math.sqrt(key_size)
    return W_q, W_k, torch.randn(MAX_HIDDENS, generator=gen)


def additive_parameters(
    num_hiddens: int, *, query_size: int = 2, key_size: int = 2, seed: int = 0,
    score_scale: float = SCORE_SCALE,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``W_q`` (N, D_q), ``W_k`` (N, D_k), ``w_v`` (N,) of a seeded additive scorer, N = num_hiddens.

    One draw of ``MAX_HIDDENS`` units from ``seed`` (a generator of its own: the global random
    state is neither used nor changed); the scorer with N units keeps the first N, so raising N
    adds units and keeps the others. ``W_q``, ``W_k`` have N(0, 1/fan_in) entries, so ``W_q q``
    and ``W_k k`` have unit variance for unit-variance inputs and tanh works in its curved range;
    ``w_v`` is rescaled to length ``score_scale``, so the scores spread over a few units
    whatever N is.
    """
    num_hiddens = check_int_in("num_hiddens", num_hiddens, 1, MAX_HIDDENS)
    query_size = check_positive_int("query_size", query_size)
    key_size = check_positive_int("key_size", key_size)
    score_scale = check_real("score_scale", score_scale, above=0)
    W_q, W_k, w_v = _draw_units(check_seed(seed), query_size, key_size)
    w_v = w_v[:num_hiddens]
    return W_q[:num_hiddens], W_k[:num_hiddens], w_v * (score_scale / w_v.norm())


def additive_score(
    queries: torch.Tensor, keys: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor,
    w_v: torch.Tensor,
) -> torch.Tensor:
    """a(q, k) = w_vᵀ tanh(W_q q + W_k k) for queries (..., Q, D_q) and keys (..., K, D_k),
    batch dims broadcasting, with W_q (N, D_q), W_k (N, D_k), w_v (N,): → (..., Q, K)."""
    _check_matrices("queries", queries, "(..., Q, D_q)")
    _check_matrices("keys", keys, "(..., K, D_k)")
    for name, x, rank, layout in (("W_q", W_q, 2, "(N, D_q)"), ("W_k", W_k, 2, "(N, D_k)"),
                                  ("w_v", w_v, 1, "(N,)")):
        check_rank(name, x, rank, layout)
    for name, x in (("keys", keys), ("W_q", W_q), ("W_k", W_k), ("w_v", w_v)):
        check_like(name, x, "queries", queries)
    check_size("query size of W_q (N, D_q), as queries (..., Q, D_q)", queries.shape[-1],
               W_q.shape[1])
    check_size("key size of W_k (N, D_k), as keys (..., K, D_k)", keys.shape[-1], W_k.shape[1])
    check_size("hidden units N of W_k (N, D_k), as W_q", W_q.shape[0], W_k.shape[0])
    check_size("hidden units N of w_v (N,), as W_q", W_q.shape[0], w_v.shape[0])
    _check_batch(queries, keys)
    q, k = queries @ W_q.mT, keys @ W_k.mT  # (..., Q, N), (..., K, N)
    return torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3)) @ w_v  # (..., Q, K, N) @ (N,) → (..., Q, K)


def make_additive(
    num_hiddens: int, *, query_size: int = 2, key_size: int = 2, seed: int = 0,
    score_scale: float = SCORE_SCALE,
) -> AdditiveAttention:
    """An ``h.AdditiveAttention`` holding ``additive_parameters(...)`` (in eval mode)."""
    W_q, W_k, w_v = additive_parameters(num_hiddens, query_size=query_size, key_size=key_size,
                                        seed=seed, score_scale=score_scale)
    with torch.random.fork_rng(devices=[]):  # the default init draws from the global generator
        model = AdditiveAttention(key_size, query_size, num_hiddens)
    with torch.no_grad():
        model.W_q.weight.copy_(W_q)  # (N, D_q)
        model.W_k.weight.copy_(W_k)  # (N, D_k)
        model.w_v.weight.copy_(w_v[None])  # (1, N)
    return model.eval()


def pairs_alike(scores: torch.Tensor) -> tuple[int, int]:
    """For the scores (2, K) of two queries: in how many of the K(K-1)/2 pairs of keys do both
    queries put the same key first? Returns ``(alike, pairs)``; a tie counts as not alike."""
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.shape[0] != 2:
        got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores must have shape (2, K) (two queries), got {got}")
    check_floating("scores", scores)  # real numbers to order (complex ones have no order)
    check_holds_data("scores", scores)
    diff = scores[:, :, None] - scores[:, None, :]  # (2, K, K): s_i - s_j for each query
    upper = torch.ones_like(diff[0], dtype=torch.bool).triu(1)  # each pair i < j once
    K = scores.shape[1]
    return int(((diff[0] * diff[1] > 0) & upper).sum()), K * (K - 1) // 2


def pairs_alike_over_seeds(
    hiddens: list[int], seeds: range | list[int], *, row: int = 1, batch_seed: int = TOY_SEED,
) -> dict[str, list[int]]:
    """``pairs_alike`` of the additive scorer on the toy batch's two queries of ``row`` over its
    valid keys, for every N in ``hiddens`` and every initialisation seed in ``seeds``.

    Returns columns {"num_hiddens", "seed", "alike"} (one entry per (seed, N)), for seaborn.
    Per seed, the units' features are computed once and the scores of every N are running sums
    over the first N units (rescaling ``w_v`` to a fixed length changes no order).
    """
    if not isinstance(hiddens, (list, tuple, range)):
        raise ValueError(f"hiddens must be a list of ints in [1, {MAX_HIDDENS}], got "
                         f"{type(hiddens).__name__}")
    hiddens = [check_int_in(f"hiddens[{i}]", n, 1, MAX_HIDDENS) for i, n in enumerate(hiddens)]
    if not isinstance(seeds, (list, tuple, range)):
        raise ValueError(f"seeds must be a list or range of ints, got {type(seeds).__name__}")
    seeds = [_check_seed_named(f"seeds[{i}]", seed) for i, seed in enumerate(seeds)]
    check_int_in("row", row, 0, 1)
    batch = toy_batch(_check_seed_named("batch_seed", batch_seed))
    queries = batch["queries"][row].double()  # (2, D)
    keys = batch["keys"][row, : int(batch["valid_lens"][row])].double()  # (n, D)
    upper = torch.ones(keys.shape[0], keys.shape[0], dtype=torch.bool).triu(1)  # pairs i < j
    pick = torch.tensor(hiddens, dtype=torch.long) - 1  # running sum over the first N units
    table: dict[str, list[int]] = {"num_hiddens": [], "seed": [], "alike": []}
    for seed in seeds:
        W_q, W_k, w_v = (p.double() for p in _draw_units(seed, queries.shape[-1], keys.shape[-1]))
        units = torch.tanh((queries @ W_q.T)[:, None, :] + (keys @ W_k.T)[None])  # (2, n, 64)
        scores = (units * w_v).cumsum(-1)[..., pick]  # (2, n, len(hiddens))
        diff = scores[:, :, None, :] - scores[:, None, :, :]  # (2, n, n, len(hiddens))
        alike = ((diff[0] * diff[1] > 0) & upper[..., None]).sum((0, 1))  # (len(hiddens),)
        table["num_hiddens"] += list(hiddens)
        table["seed"] += [seed] * len(hiddens)
        table["alike"] += alike.tolist()
    return table


# ---------------------------------------------------------------- the hidden-size view
EXTENT = 3.0  # the key plane shown: [-3, 3] × [-3, 3]
GRID = 61  # pixels per side; the image holds a(q, k) at each pixel's centre
SCORE_LIMIT = 4.0  # fixed colour scale: scores from -4 (blue) to 4 (red)
ROW = 1  # the batch row shown (valid length 6)


def grid_keys(size: int = GRID, extent: float = EXTENT) -> torch.Tensor:
    """The keys at the pixel centres of the landscape images: (size * size, 2), row-major with
    the first feature along x and the second along y (image row 0 at the bottom)."""
    centres = -extent + (torch.arange(size, dtype=torch.float64) + 0.5) * (2 * extent / size)
    k2, k1 = torch.meshgrid(centres, centres, indexing="ij")  # (size, size): y varies by row
    return torch.stack([k1.flatten(), k2.flatten()], dim=-1)


def _ranks(scores: torch.Tensor) -> list[int]:
    """Rank of each key for one query (K,): 1 = highest score."""
    return (torch.argsort(torch.argsort(scores, descending=True)) + 1).tolist()


@functools.lru_cache(maxsize=4)
def _grid_units(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """tanh(W_q q + W_k k) of all ``MAX_HIDDENS`` units of ``seed``'s draw at every pixel of the
    key plane, for queries A and B of ``ROW``: (2, GRID², 64) float64, and ``w_v`` (64,)
    unscaled. Computed once per seed; a slider move then only sums the first N units."""
    queries = toy_batch()["queries"][ROW].double()  # (2, D)
    W_q, W_k, w_v = (p.double() for p in _draw_units(seed, queries.shape[-1], queries.shape[-1]))
    units = torch.tanh((queries @ W_q.T)[:, None, :] + (grid_keys() @ W_k.T)[None])  # (2, G², 64)
    return units.numpy(), w_v.numpy()


def _hidden_size_data(num_hiddens: int, seed: int) -> dict:
    """Everything ``draw_hidden_size`` draws, computed in float64 (ranks and counts do not
    depend on the CPU's rounding): the landscapes, the valid keys' ranks, the pair counts."""
    batch = toy_batch()
    queries = batch["queries"][ROW].double()  # (2, D): query A, query B
    keys = batch["keys"][ROW].double()  # (K, D)
    n_valid = int(batch["valid_lens"][ROW])
    params = [p.double() for p in additive_parameters(num_hiddens, seed=seed)]  # checks N
    scale = math.sqrt(queries.shape[-1])
    dot = (queries @ grid_keys().T / scale).reshape(2, GRID, GRID)  # (2, GRID, GRID)
    units, w_v = _grid_units(seed)  # (2, G², 64), (64,)
    w_n = w_v[:num_hiddens] * (SCORE_SCALE / np.linalg.norm(w_v[:num_hiddens]))  # as in params
    additive = (units[..., :num_hiddens] @ w_n).reshape(2, GRID, GRID)  # w_vᵀ tanh(...) per pixel
    dot_keys = queries @ keys[:n_valid].T / scale  # (2, n)
    additive_keys = additive_score(queries, keys[:n_valid], *params)  # (2, n)
    return {
        "queries": queries, "keys": keys, "n_valid": n_valid,
        "landscapes": {"dot": dot.numpy(), "additive": additive},
        "ranks": {"dot": [_ranks(s) for s in dot_keys],
                  "additive": [_ranks(s) for s in additive_keys]},
        "alike": {"dot": pairs_alike(dot_keys), "additive": pairs_alike(additive_keys)},
    }


def _hidden_size_title(num_hiddens: int, alike: dict) -> str:
    (a, pairs), (d, _) = alike["additive"], alike["dot"]
    return (f"additive scorer with num_hiddens = {num_hiddens}\n"
            f"same order for A and B: {a} of {pairs} key pairs (dot product: {d} of {pairs})")


def _layout_hidden_size(fig: Figure, data: dict) -> None:
    """(Re)build the view's artists: 2 × 2 landscapes (rows: dot product, additive; columns:
    query A, query B), the keys (valid: dots with their rank; padding: grey crosses), each
    query as an arrow on the dot-product maps, and one colorbar."""
    start_figure(fig, HIDDEN_LABEL)
    axes = fig.subplots(2, 2, sharex=True, sharey=True)
    keys, n = data["keys"].numpy(), data["n_valid"]
    for r, kind in enumerate(("dot", "additive")):
        for c, name in enumerate("AB"):
            ax = axes[r, c]
            image = ax.imshow(data["landscapes"][kind][c], origin="lower", cmap="RdBu_r",
                              vmin=-SCORE_LIMIT, vmax=SCORE_LIMIT, interpolation="nearest",
                              extent=(-EXTENT, EXTENT, -EXTENT, EXTENT))
            ax.scatter(keys[:n, 0], keys[:n, 1], s=36, c="black", edgecolors="white",
                       linewidths=0.8, zorder=3)
            ax.scatter(keys[n:, 0], keys[n:, 1], s=28, c="grey", marker="x", zorder=3)
            beside = ax.transData + ScaledTranslation(4 / 72, 3 / 72, fig.dpi_scale_trans)
            for (x, y), rank in zip(keys[:n], data["ranks"][kind][c]):  # plain texts: cheap
                ax.text(x, y, str(rank), transform=beside, fontsize="small",
                        fontweight="bold", zorder=4, gid="rank")
            if kind == "dot":
                ax.add_patch(FancyArrowPatch((0, 0), tuple(data["queries"][c].tolist()),
                                             arrowstyle="->", mutation_scale=12, lw=1.5,
                                             color="black", zorder=4))
            ax.set_xticks([])  # the plane's coordinates do not matter here; ticks cost time
            ax.set_yticks([])
            scorer = "dot product q·k/√2" if kind == "dot" else "additive"
            ax.set_title(f"{scorer} · query {name}", y=1.0)  # a fixed y: no auto placement per draw
            if r == 1:
                ax.set_xlabel("key feature 1 (−3 to 3)")
            if c == 0:
                ax.set_ylabel("key feature 2 (−3 to 3)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="score a(q, k)", ticks=[-4, -2, 0, 2, 4])


def rank_labels(ax: Axes) -> list:
    """The rank numbers written beside the valid keys of one landscape panel, in key order."""
    if not isinstance(ax, Axes):
        raise ValueError(f"ax must be a matplotlib Axes (a panel of draw_hidden_size), got "
                         f"{type(ax).__name__}")
    return [t for t in ax.texts if t.get_gid() == "rank"]


def _is_hidden_size_figure(fig: Figure) -> bool:
    panels = [ax for ax in fig.axes if ax.images]
    return (fig.get_label() == HIDDEN_LABEL and len(panels) == 4
            and all(ax.images[0].get_array().shape == (GRID, GRID) for ax in panels))


def draw_hidden_size(num_hiddens: int, *, seed: int = 0, fig: Figure | None = None) -> Figure:
    """The score landscapes a(q, k) over the key plane, for query A and B of the toy batch's
    row 1: top the dot product q·k/√2, bottom the additive scorer with ``num_hiddens`` units
    (``additive_parameters(num_hiddens, seed=seed)``), on one fixed colour scale (±4).

    The dots are the row's 6 valid keys, labelled with their rank for that query (1 = highest
    score, so largest weight); grey crosses are its padding keys. The title counts the pairs
    of valid keys that the two queries order alike (``pairs_alike``). ``fig``: a Figure this
    function drew before is updated in place (fast); any other Figure is cleared and redrawn.
    """
    seed = check_seed(seed)
    check_int_in("num_hiddens", num_hiddens, 1, MAX_HIDDENS)
    check_figure("fig", fig, optional=True)
    data = _hidden_size_data(num_hiddens, seed)
    if fig is None:
        fig = Figure(figsize=(6.8, 5.9))
    fresh = not _is_hidden_size_figure(fig)
    if fresh:
        _layout_hidden_size(fig, data)
    panels = [ax for ax in fig.axes if ax.images]
    for c, ax in enumerate(panels[2:]):  # the additive row: the dot product does not change
        set_image_data(ax.images[0], data["landscapes"]["additive"][c])
        for label, rank in zip(rank_labels(ax), data["ranks"]["additive"][c]):
            label.set_text(str(rank))
    fig.suptitle(_hidden_size_title(num_hiddens, data["alike"]))
    if fresh:
        freeze_layout(fig)
    return fig


def hidden_size_view(num_hiddens: int = 1, *, seed: int = 0) -> PageView:
    """Slider: the additive scorer's number of hidden units (1–16) → ``draw_hidden_size``."""
    check_int_in("num_hiddens", num_hiddens, 1, 16)
    seed = check_seed(seed)
    fig = draw_hidden_size(num_hiddens, seed=seed)

    def draw(num_hiddens: int) -> Figure:
        return draw_hidden_size(num_hiddens, seed=seed, fig=fig)

    return interactive_figure(
        draw, 
        num_hiddens=widgets.IntSlider(value=int(num_hiddens), min=1, max=16,
                                      description="hidden units num_hiddens",
                                      continuous_update=False,
                                      style={"description_width": "initial"}),
    )


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 04 shows them."""
    return {"scaling": scaling_view(), "hidden_size": hidden_size_view()}
