"""One heatmap function for every notebook (``show_heatmaps``) and one theme (``set_theme``).

Legend: R rows and C columns of panels, Q queries (rows of a map), K keys (columns of a map).
Mask convention: ``mask`` is boolean, ``True`` = takes part; other cells are drawn grey.
NaN cells (a bug to see, not padding) are drawn magenta, with a legend that says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["show_heatmaps", "to_numpy", "set_theme", "MASKED_COLOR", "NAN_COLOR"]

MASKED_COLOR = "#c8c8c8"  # masked cells: grey, outside every colormap used here
NAN_COLOR = "#ff00ff"  # NaN cells: magenta, outside every colormap used here and never grey


def set_theme() -> None:
    """The one look of the series: seaborn's "ticks" style (white background, no grid lines
    over heatmap cells) in the "notebook" context with its "deep" palette. Every notebook
    calls it in its first code cell; figures made afterwards (the views' too) follow it."""
    import seaborn as sns  # imported here: `import helpers` stays fast for code that never plots

    sns.set_theme(context="notebook", style="ticks", palette="deep",
                  rc={"figure.dpi": 100, "savefig.dpi": 100, "axes.titlesize": "medium"})


def to_numpy(x: torch.Tensor | np.ndarray | Sequence) -> np.ndarray:
    """A NumPy copy of a tensor (any device, any dtype, bfloat16 included) or of an array:
    writing into the result never changes ``x``. Half precision comes back as float32."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype in (torch.float16, torch.bfloat16):
            return x.float().cpu().numpy()  # .float() made a new tensor: already a copy
        return x.cpu().numpy().copy()  # .cpu() of a CPU tensor is the tensor itself
    return np.array(x)  # copies


def _as_4d(name: str, x: np.ndarray) -> np.ndarray:
    if x.ndim == 2:
        return x[None, None]
    if x.ndim == 3:
        return x[None]
    if x.ndim == 4:
        return x
    raise ValueError(f"{name} must be 2-D (Q, K), 3-D (C, Q, K) or 4-D (R, C, Q, K), got shape {x.shape}")


def show_heatmaps(
    matrices: torch.Tensor | np.ndarray,
    xlabel: str = "Keys",
    ylabel: str = "Queries",
    titles: Sequence[str] | None = None,
    figsize: tuple[float, float] | None = None,
    cmap: str = "Reds",
    mask: torch.Tensor | np.ndarray | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = None,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    colorbar: bool = True,
    fig: Figure | None = None,
    annot: bool | str = False,
) -> Figure:
    """Draw a grid of heatmaps with one shared colorbar and return the Figure.

    ``matrices``: (Q, K), (C, Q, K) or (R, C, Q, K), a tensor on any device or an array.
    ``titles``: one per column, or one per panel (R·C). ``mask``: boolean, broadcastable to
    ``matrices``; cells where it is False are drawn grey. NaN cells that are not masked are
    drawn magenta and a legend names them. ``vmax`` defaults to the largest value shown.
    ``annot``: write each value in its cell (True: 2 decimals; or a format such as ".1f"),
    for small maps. ``fig``: an existing Figure to clear and redraw into (widgets reuse
    one figure instead of making a new one per slider move). The Figure is not registered with
    pyplot: return it from a cell (or ``display`` it) to show it, and nothing leaks.
    """
    data = _as_4d("matrices", to_numpy(matrices)).astype(np.float64)
    R, C, Q, K = data.shape
    keep = np.ones(data.shape, dtype=bool)
    if mask is not None:
        m = to_numpy(mask).astype(bool)
        try:
            keep = np.broadcast_to(_as_4d("mask", m) if m.ndim >= 2 else m, data.shape)
        except ValueError:
            raise ValueError(f"mask must broadcast to shape {data.shape}, got {m.shape}") from None
    nan = np.isnan(data) & keep  # NaN where a value should be: drawn magenta, not grey
    data = np.where(keep, data, np.nan)
    if titles is not None and len(titles) not in (C, R * C):
        per_panel = f" or {R * C} (one per panel)" if R > 1 else ""
        raise ValueError(f"titles must have {C} entries (one per column){per_panel}, got {len(titles)}")
    for name, labels, n in (("xticklabels", xticklabels, K), ("yticklabels", yticklabels, Q)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} must have {n} entries, got {len(labels)}")
    shown = data[np.isfinite(data)]
    top = vmax if vmax is not None else (float(shown.max()) if shown.size else 1.0)
    low = vmin if vmin is not None else (float(shown.min()) if shown.size else 0.0)
    if top <= low:
        top = low + 1.0
    if fig is None:
        fig = Figure(figsize=figsize or (2.5 * C + 1.0, 2.5 * R), layout="constrained")
    else:
        fig.clear()
        if figsize is not None:
            fig.set_size_inches(*figsize)
    if cmap not in colormaps:
        raise ValueError(f"cmap must be a matplotlib colormap name such as 'Reds', got {cmap!r}")
    colors = colormaps[cmap].with_extremes(bad=MASKED_COLOR)
    nan_rgba = np.zeros((Q, K, 4))
    fmt = annot if isinstance(annot, str) else ".2f"
    axes = fig.subplots(R, C, sharex=True, sharey=True, squeeze=False)
    for r in range(R):
        for c in range(C):
            ax = axes[r, c]
            image = ax.imshow(np.ma.masked_invalid(data[r, c]), cmap=colors, vmin=low, vmax=top,
                              aspect="auto", interpolation="nearest")
            if nan[r, c].any():  # a second layer: magenta where the values are NaN
                nan_rgba[...] = 0.0
                nan_rgba[nan[r, c]] = to_rgba(NAN_COLOR)
                ax.imshow(nan_rgba, aspect="auto", interpolation="nearest")
            if annot:
                for (i, j), value in np.ndenumerate(data[r, c]):
                    if np.isfinite(value):
                        dark = sum(colors(image.norm(value))[:3]) < 1.5  # light text on dark cells
                        ax.text(j, i, format(value, fmt), ha="center", va="center",
                                fontsize="small", color="white" if dark else "black")
            if r == R - 1:
                ax.set_xlabel(xlabel)
            if c == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                ax.set_title(titles[r * C + c] if len(titles) == R * C else titles[c])
            if xticklabels is not None:
                ax.set_xticks(range(K), list(xticklabels), rotation=90)
            if yticklabels is not None:
                ax.set_yticks(range(Q), list(yticklabels))
    if colorbar:
        fig.colorbar(image, ax=axes, shrink=0.8)
    if nan.any():  # say what the magenta means (and the grey, when both are there)
        handles = [Patch(color=NAN_COLOR, label="NaN")]
        if not keep.all():
            handles.append(Patch(color=MASKED_COLOR, label="masked"))
        fig.legend(handles=handles, loc="outside lower right", ncols=len(handles), fontsize="small")
    return fig
