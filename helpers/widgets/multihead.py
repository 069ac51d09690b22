"""Views for notebook 06: one attention map per head of a multi-head attention layer.

Legend: Q queries, K key-value pairs, d input size (of queries, keys and values), N num_hiddens,
H heads, N/H size of one head. Weights are laid out (H, Q, K). A valid length ``n`` keeps the
first ``n`` keys (``True`` = takes part in boolean masks).

The layer's four matrices are drawn from ``seed`` and do not depend on H (their shapes do not
either): moving the heads slider splits the *same* projections into more, smaller heads. The
weights are untrained, so the patterns mean nothing beyond "each head differs".
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure, SubFigure
from matplotlib.ticker import MaxNLocator

from ..multihead import MultiHeadAttention
from ..plotting import show_heatmaps
from ._common import interactive_figure

__all__ = [
    "HEAD_CHOICES", "HIDDEN_CHOICES", "head_grid", "example_inputs", "make_model",
    "parameter_count", "head_weights", "draw_heads", "draw_view", "heads_view", "demo_views",
]

HEAD_CHOICES = (1, 2, 4, 8)  # every one divides every entry of HIDDEN_CHOICES
HIDDEN_CHOICES = (8, 16, 32)
HEADS_LABEL = "multihead.heads"  # Figure label: tells draw_heads a figure is its own


def head_grid(num_heads: int) -> tuple[int, int]:
    """(rows, cols) of the panel grid: at most four panels per row."""
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
    cols = min(num_heads, 4)
    return math.ceil(num_heads / cols), cols


def example_inputs(
    num_queries: int = 6, num_keys: int = 9, size: int = 12, seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries (1, Q, d), keys (1, K, d) and values (1, K, d), N(0, 1) entries from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    queries = torch.randn(1, num_queries, size, generator=gen)  # (1, Q, d)
    keys = torch.randn(1, num_keys, size, generator=gen)  # (1, K, d)
    values = torch.randn(1, num_keys, size, generator=gen)  # (1, K, d)
    return queries, keys, values


def make_model(
    num_hiddens: int, num_heads: int, size: int = 12, seed: int = 0,
) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` (no biases) whose weights depend on ``num_hiddens``, ``size`` and
    ``seed`` only, not on ``num_heads``: each matrix is uniform in ±1/√fan_in, as nn.Linear's
    default, drawn in the order W_q, W_k, W_v, W_o. Returned in eval mode."""
    model = MultiHeadAttention(num_hiddens, num_heads, query_size=size, key_size=size,
                               value_size=size).eval()
    gen = torch.Generator().manual_seed(seed + 1)  # not the inputs' stream
    with torch.no_grad():
        for layer in (model.W_q, model.W_k, model.W_v, model.W_o):
            bound = 1.0 / math.sqrt(layer.in_features)
            layer.weight.uniform_(-bound, bound, generator=gen)
    return model


def parameter_count(model: torch.nn.Module) -> int:
    """Number of learnable numbers in ``model``."""
    return sum(p.numel() for p in model.parameters())


def head_weights(
    num_hiddens: int, num_heads: int, valid_len: int | None = None, *,
    num_queries: int = 6, num_keys: int = 9, size: int = 12, seed: int = 0,
) -> tuple[torch.Tensor, int]:
    """Attention weights (H, Q, K) of ``make_model(...)`` on ``example_inputs(...)``, and the
    model's parameter count. ``valid_len`` keeps the first keys (None: all of them)."""
    queries, keys, values = example_inputs(num_queries, num_keys, size, seed)
    model = make_model(num_hiddens, num_heads, size, seed)
    lens = None if valid_len is None else torch.tensor([valid_len])
    with torch.no_grad():
        model(queries, keys, values, lens)
    return model.attention_weights[0], parameter_count(model)  # (H, Q, K)


def _title(num_hiddens: int, num_heads: int, size: int, count: int) -> str:
    return (f"N = {num_hiddens}: {num_heads} head{'s' if num_heads > 1 else ''} of size "
            f"{num_hiddens // num_heads}\nparameters 3·{size}·{num_hiddens} + "
            f"{num_hiddens}·{num_hiddens} = {count:,}")


def draw_heads(
    weights: torch.Tensor, valid_len: int | None = None, *, title: str = "",
    fig: Figure | None = None,
) -> Figure:
    """One heatmap per head of ``weights`` (H, Q, K), at most four per row, keys past
    ``valid_len`` drawn grey, ``title`` above them. ``fig``: a Figure this function drew before
    is updated in place (fast): each grid of panels it needs is built once, in a SubFigure of
    its own, and afterwards only shown or hidden; any other Figure is cleared first."""
    if not isinstance(weights, torch.Tensor) or weights.dim() != 3:
        shape = (tuple(weights.shape) if isinstance(weights, torch.Tensor)
                 else type(weights).__name__)
        raise ValueError(f"weights must be a tensor of shape (H, Q, K), got {shape}")
    H, Q, K = weights.shape
    R, C = head_grid(H)
    keep = torch.arange(K) < (K if valid_len is None else valid_len)  # (K,), True = takes part
    shown = weights.detach().cpu().float().masked_fill(~keep, float("nan"))  # (H, Q, K)
    values = shown[~shown.isnan()]
    top = float(values.max()) if values.numel() else 1.0
    if fig is None:
        fig = Figure()
    if fig.get_label() != HEADS_LABEL:
        fig.clear()
        fig.set_label(HEADS_LABEL)
        fig.set_layout_engine("none")  # fixed margins below: 2-3× faster than "constrained"
    grid = _grid(fig, R, C, Q, K)
    size = _figsize(R, C)
    if tuple(fig.get_size_inches()) != size:
        fig.set_size_inches(size)
    for sub in fig.subfigs:  # show this grid's first H panels and its colorbar, nothing else
        sub.set_visible(sub is grid)
        for i, ax in enumerate(sub.axes):  # R·C panels, then the colorbar
            ax.set_visible(sub is grid and (i < H or i == len(sub.axes) - 1))
    for ax, panel in zip(grid.axes, shown):
        image = ax.images[0]
        image.set_data(panel.numpy())  # NaN: drawn grey
        image.set_clim(0.0, top if top > 0 else 1.0)
    fig.suptitle(title, fontsize="medium")
    return fig


def _figsize(rows: int, cols: int) -> tuple[float, float]:
    """Figure size (inches) for a rows × cols grid of panels and a colorbar."""
    return max(2.3 * cols + 1.6, 4.8), 2.1 * rows + 1.1


def _grid(fig: Figure, rows: int, cols: int, Q: int, K: int) -> SubFigure:
    """The SubFigure of ``fig`` holding rows × cols (Q, K) heatmaps and a colorbar, added (and
    drawn by ``show_heatmaps``) the first time it is asked for. It spans the whole Figure, laid
    out with fixed margins for the size ``_figsize(rows, cols)``."""
    for sub in fig.subfigs:
        if _same_layout(sub, rows, cols, Q, K):
            return sub
    sub = fig.subfigures()  # the whole Figure: hidden while another grid is shown
    sub.set_in_layout(False)  # its axes are fig.axes too: bbox_inches="tight" measures them once
    width, height = _figsize(rows, cols)
    margins = {"left": 0.75 / width, "right": 1 - 0.9 / width, "bottom": 0.6 / height,
               "top": 1 - 0.95 / height, "wspace": 0.12, "hspace": 0.3}
    show_heatmaps(torch.zeros(rows, cols, Q, K), colorbar=False,
                  titles=[f"head {i}" for i in range(rows * cols)], fig=sub)
    sub.axes[0].get_gridspec().update(**margins)  # this grid's own margins, not the rc ones
    for ax in sub.axes:
        ax.set_subplotspec(ax.get_subplotspec())  # placed again, with those margins
        # A title at a fixed height skips matplotlib's search for a free spot above the axes
        # on every draw (nothing is there: the same place, ~10% less drawing time).
        ax.set_title(ax.get_title(), y=1.0)
    cax = sub.add_axes((1 - 0.7 / width, margins["bottom"], 0.15 / width,
                        margins["top"] - margins["bottom"]))
    sub.colorbar(sub.axes[0].images[0], cax=cax)  # every panel gets the same colour limits
    ticks = {"nbins": 4, "integer": True}  # few labels: text is most of the drawing time
    sub.axes[0].xaxis.set_major_locator(MaxNLocator(**ticks))  # shared by every panel
    sub.axes[0].yaxis.set_major_locator(MaxNLocator(**ticks))
    return sub


def _same_layout(fig: Figure | SubFigure, rows: int, cols: int, Q: int, K: int) -> bool:
    """True when ``fig`` holds rows·cols heatmaps of shape (Q, K) and a colorbar."""
    axes = fig.axes
    return (len(axes) == rows * cols + 1
            and all(ax.images and ax.images[0].get_array().shape == (Q, K)
                    for ax in axes[:rows * cols])
            and axes[0].get_gridspec().get_geometry() == (rows, cols))


def draw_view(
    num_heads: int = 4, num_hiddens: int = 16, valid_len: int = 6, *,
    num_queries: int = 6, num_keys: int = 9, size: int = 12, seed: int = 0,
    fig: Figure | None = None,
) -> Figure:
    """What ``heads_view`` shows for these slider values: ``draw_heads`` of ``head_weights``,
    titled with the head size and the parameter count."""
    weights, count = head_weights(num_hiddens, num_heads, valid_len, num_queries=num_queries,
                                  num_keys=num_keys, size=size, seed=seed)
    title = _title(num_hiddens, num_heads, size, count)
    return draw_heads(weights, valid_len, title=title, fig=fig)


def heads_view(
    num_heads: int = 4, num_hiddens: int = 16, valid_len: int = 6, *,
    num_queries: int = 6, num_keys: int = 9, size: int = 12, seed: int = 0,
) -> widgets.interactive:
    """Sliders: heads H (divisors of every N offered), num_hiddens N and the valid length
    → what ``draw_view`` draws, redrawn into one Figure (the weights of each setting computed
    once, a grid of panels for every H built at the start)."""
    controls = {
        "num_heads": widgets.SelectionSlider(options=list(HEAD_CHOICES), value=num_heads,
                                             description="heads H", continuous_update=False),
        "num_hiddens": widgets.SelectionSlider(options=list(HIDDEN_CHOICES), value=num_hiddens,
                                               description="N"),
        "valid_len": widgets.IntSlider(value=valid_len, min=1, max=num_keys,
                                       description="valid length"),
    }
    fig = Figure()
    computed: dict[tuple[int, int, int], tuple[torch.Tensor, int]] = {}  # at most 3·4·num_keys

    def draw(num_heads: int, num_hiddens: int, valid_len: int) -> Figure:
        # Building a layer and running it was most of a tick's compute (and tiny torch ops can
        # wait milliseconds for a thread on a busy machine): once per setting is enough.
        key = (num_heads, num_hiddens, valid_len)
        if key not in computed:
            computed[key] = head_weights(num_hiddens, num_heads, valid_len,
                                         num_queries=num_queries, num_keys=num_keys, size=size,
                                         seed=seed)
        weights, count = computed[key]
        return draw_heads(weights, valid_len, title=_title(num_hiddens, num_heads, size, count),
                          fig=fig)

    for heads in HEAD_CHOICES:  # every grid now: moving the heads slider only shows another
        draw(heads, num_hiddens, valid_len)
    return interactive_figure(draw, height="520px", **controls)


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as the notebook shows it."""
    return {"heads": heads_view()}
