"""Views for notebook 04: why scaled dot products divide by √D, and the additive scorer's size.

Legend: B batch, Q queries, K key-value pairs, D query/key size, V value size, H hidden units.
Weights are laid out (..., Q, K). Valid lengths keep the first ``n`` keys of a row; boolean
masks use ``True`` = takes part.

Every view draws a pure function of its slider values (``draw_scaling``, ``draw_additive``)
whose inputs come from seeded pure functions (``scaling_inputs``, ``toy_batch``,
``make_additive``), so that tests can recompute what is drawn.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ..attention import AdditiveAttention
from ..masking import valid_lens_to_mask
from ..plotting import show_heatmaps, to_numpy
from ._common import interactive_figure

__all__ = [
    "scaling_inputs", "scaling_weights", "draw_scaling", "scaling_view",
    "toy_batch", "make_additive", "additive_weights", "draw_additive", "additive_view",
    "demo_views",
]

KEY_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
SCALING_LABEL = "scoring.scaling"  # Figure label: tells draw_scaling a figure is its own
ADDITIVE_LABEL = "scoring.additive"


# ---------------------------------------------------------------- why divide by √D
def scaling_inputs(
    d: int, num_queries: int = 6, num_keys: int = 12, seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries (Q, D) and keys (K, D) with independent N(0, 1) entries, from ``seed`` alone."""
    gen = torch.Generator().manual_seed(seed)
    queries = torch.randn(num_queries, d, generator=gen)  # (Q, D)
    keys = torch.randn(num_keys, d, generator=gen)  # (K, D)
    return queries, keys


def scaling_weights(queries: torch.Tensor, keys: torch.Tensor, scaled: bool = True) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) over the keys, or softmax(Q Kᵀ) when not ``scaled``: (..., Q, K)."""
    scores = queries @ keys.transpose(-2, -1)  # (..., Q, K)
    if scaled:
        scores = scores / math.sqrt(queries.shape[-1])
    return torch.softmax(scores, dim=-1)


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of weights (..., Q, K) → (..., Q); 0·log 0 counts as 0."""
    return -(weights * torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny))).sum(-1)


def _freeze_layout(fig: Figure) -> None:
    """Run the constrained layout once, then keep the positions: slider moves change data and
    titles, not the layout, and re-solving it on every redraw would double the drawing time."""
    fig.draw_without_rendering()  # runs the layout engine
    fig.set_layout_engine("none")


def _layout_scaling(fig: Figure, num_queries: int, num_keys: int) -> None:
    """(Re)build the scaling view's artists in ``fig``: a heatmap, a colorbar, one bar per query."""
    fig.clear()
    fig.set_label(SCALING_LABEL)
    fig.set_layout_engine("constrained")  # before the colorbar, which then joins the layout
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
    ax_bar.set_xlabel("largest weight (dashed: 1/K)")


def _is_scaling_figure(fig: Figure, num_queries: int, num_keys: int) -> bool:
    return (fig.get_label() == SCALING_LABEL and len(fig.axes) == 3
            and fig.axes[0].images[0].get_array().shape == (num_queries, num_keys))


def draw_scaling(
    d: int, scaled: bool = True, *, num_queries: int = 6, num_keys: int = 12, seed: int = 0,
    fig: Figure | None = None,
) -> Figure:
    """Weights softmax(q·k/√D) (or softmax(q·k)) of random queries over random keys.

    Left: the (Q, K) weights on a fixed 0–1 colour scale; right: each query's largest weight.
    The inputs are ``scaling_inputs(d, num_queries, num_keys, seed)``. ``fig``: a Figure this
    function drew before is updated in place (fast); any other Figure is cleared and redrawn.
    """
    queries, keys = scaling_inputs(d, num_queries, num_keys, seed)
    weights = scaling_weights(queries, keys, scaled)  # (Q, K)
    if fig is None:
        fig = Figure(figsize=(7.5, 3.2))
    fresh = not _is_scaling_figure(fig, num_queries, num_keys)
    if fresh:
        _layout_scaling(fig, num_queries, num_keys)
    ax_map, ax_bar = fig.axes[0], fig.axes[1]
    ax_map.images[0].set_data(to_numpy(weights))
    for bar, width in zip(ax_bar.patches, weights.max(-1).values.tolist()):
        bar.set_width(width)
    spread = (queries @ keys.T).std().item() / (math.sqrt(d) if scaled else 1.0)
    ax_map.set_title(f"D = {d}, {'scores ÷ √D' if scaled else 'no scaling'} "
                     f"(score std {spread:.1f})", fontsize="medium")
    ax_bar.set_title(f"mean entropy {_entropy(weights).mean().item():.2f} nats\n"
                     f"(uniform: {math.log(num_keys):.2f})", fontsize="medium")
    if fresh:
        _freeze_layout(fig)
    return fig


def scaling_view(
    d: int = 64, scaled: bool = True, *, num_queries: int = 6, num_keys: int = 12, seed: int = 0,
) -> widgets.interactive:
    """Sliders: the query/key size D (powers of two) and a scaling switch → ``draw_scaling``."""
    fig = Figure(figsize=(7.5, 3.2))

    def draw(d: int, scaled: bool) -> Figure:
        return draw_scaling(d, scaled, num_queries=num_queries, num_keys=num_keys, seed=seed,
                            fig=fig)

    return interactive_figure(
        draw, height="340px",
        d=widgets.SelectionSlider(options=KEY_SIZES, value=d, description="D",
                                  continuous_update=False),
        scaled=widgets.Checkbox(value=scaled, description="divide scores by √D"),
    )


# ---------------------------------------------------------------- additive attention
def toy_batch(num_queries: int = 1, seed: int = 0) -> dict[str, torch.Tensor]:
    """The toy batch of notebook 04, from ``seed`` alone (CPU tensors).

    ``queries`` (2, Q, 20) for the additive scorer, ``dot_queries`` (2, Q, 2) for the dot
    product (same size as the keys), ``keys`` (2, 10, 2), ``values`` (2, 10, 4) = 0..39 in
    both batch rows, ``valid_lens`` [2, 6]. With ``num_queries=1`` it is the notebook's batch.
    """
    gen = torch.Generator().manual_seed(seed)
    return {
        "queries": torch.randn(2, num_queries, 20, generator=gen),  # (B, Q, D_q)
        "keys": torch.randn(2, 10, 2, generator=gen),  # (B, K, D_k)
        "dot_queries": torch.randn(2, num_queries, 2, generator=gen),  # (B, Q, D_k)
        "values": torch.arange(40.0).reshape(1, 10, 4).repeat(2, 1, 1),  # (B, K, V)
        "valid_lens": torch.tensor([2, 6]),  # (B,)
    }


def make_additive(num_hiddens: int, key_size: int = 2, query_size: int = 20, seed: int = 0,
                  score_scale: float = 3.0) -> AdditiveAttention:
    """An ``AdditiveAttention`` whose weights depend only on ``seed`` and the arguments.

    ``W_q`` and ``W_k`` are drawn from N(0, 1/fan_in), so that ``W_q q`` and ``W_k k`` have
    unit variance for unit-variance inputs and tanh works in its curved range; ``w_v`` from
    N(0, score_scale²/H), so that the scores spread over a few units whatever H is. (PyTorch's
    default init gives scores so close together that every map looks uniform.) A generator of
    its own is used: the global random state is neither used nor changed.
    """
    with torch.random.fork_rng(devices=[]):  # the default init below draws from the global RNG
        model = AdditiveAttention(key_size, query_size, num_hiddens)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.W_q.weight.normal_(0.0, 1 / math.sqrt(query_size), generator=gen)  # (H, D_q)
        model.W_k.weight.normal_(0.0, 1 / math.sqrt(key_size), generator=gen)  # (H, D_k)
        model.w_v.weight.normal_(0.0, score_scale / math.sqrt(num_hiddens), generator=gen)  # (1, H)
    return model.eval()


def additive_weights(num_hiddens: int, num_queries: int = 6, seed: int = 0) -> torch.Tensor:
    """Weights (2, Q, 10) of ``make_additive(num_hiddens, seed=seed)`` on ``toy_batch``."""
    batch = toy_batch(num_queries, seed)
    model = make_additive(num_hiddens, seed=seed)
    with torch.no_grad():
        model(batch["queries"], batch["keys"], batch["values"], batch["valid_lens"])
    return model.attention_weights


def _panels(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.images]


def draw_additive(
    num_hiddens: int, *, num_queries: int = 6, seed: int = 0, fig: Figure | None = None,
) -> Figure:
    """Heatmaps of the additive scorer's weights on the toy batch, one panel per batch row.

    Masked keys (past each row's valid length) are grey; colours run from 0 to the largest
    weight shown (an untrained scorer's weights are close to uniform: a fixed 0–1 scale would
    hide their differences). A Figure this function drew before is updated in place; any other
    Figure (or None) gets a fresh ``show_heatmaps`` drawing.
    """
    weights = additive_weights(num_hiddens, num_queries, seed)  # (B, Q, K)
    B, Q, K = weights.shape
    lens = toy_batch(num_queries, seed)["valid_lens"]
    mask = valid_lens_to_mask(lens, B, Q, K).expand(B, Q, K)  # True = takes part
    title = f"additive attention, num_hiddens = {num_hiddens}"
    if fig is not None and fig.get_label() == ADDITIVE_LABEL and len(_panels(fig)) == B \
            and _panels(fig)[0].images[0].get_array().shape == (Q, K):
        shown = np.where(to_numpy(mask), to_numpy(weights), np.nan)
        top = float(np.nanmax(shown))
        for ax, panel in zip(_panels(fig), shown):
            ax.images[0].set_data(np.ma.masked_invalid(panel))
            ax.images[0].set_clim(0.0, top)  # the colorbar follows the last image
        fig.suptitle(title)
        return fig
    titles = [f"batch row {b}: valid length {int(n)}" for b, n in enumerate(lens)]
    if fig is not None:
        fig.set_layout_engine("constrained")  # a frozen figure of ours gets a fresh layout
    fig = show_heatmaps(weights, titles=titles, mask=mask, vmin=0.0,
                        figsize=(7.5, 2.8), fig=fig)
    fig.set_label(ADDITIVE_LABEL)
    fig.suptitle(title)
    _freeze_layout(fig)
    return fig


def additive_view(
    num_hiddens: int = 8, *, num_queries: int = 6, seed: int = 0,
) -> widgets.interactive:
    """Slider: the hidden size H of the additive scorer → ``draw_additive``."""
    fig = draw_additive(num_hiddens, num_queries=num_queries, seed=seed)

    def draw(num_hiddens: int) -> Figure:
        return draw_additive(num_hiddens, num_queries=num_queries, seed=seed, fig=fig)

    return interactive_figure(
        draw, height="320px",
        num_hiddens=widgets.IntSlider(value=num_hiddens, min=1, max=64, description="hidden H",
                                      continuous_update=False),
    )


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 04 shows them."""
    return {"scaling": scaling_view(), "additive": additive_view()}
