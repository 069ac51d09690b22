"""One heatmap function for every notebook (``show_heatmaps``) and one theme (``set_theme``).

Legend: R rows and C columns of panels, Q queries (rows of a map), K keys (columns of a map).
Mask convention: ``mask`` is boolean, ``True`` = takes part; other cells are drawn grey.
NaN cells (a bug to see, not padding) are drawn magenta, with a legend that says so.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from collections.abc import Callable, Sequence

import matplotlib as mpl
import numpy as np
import torch
from cycler import cycler
from matplotlib import colormaps
from matplotlib.colors import ColorConverter, ListedColormap, to_rgb, to_rgba
from matplotlib.figure import Figure, FigureBase
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import Patch

from . import _theme_rc

__all__ = ["show_heatmaps", "to_numpy", "set_theme", "MASKED_COLOR", "NAN_COLOR"]

MASKED_COLOR = "#c8c8c8"  # masked cells: grey, outside every colormap used here
NAN_COLOR = "#ff00ff"  # NaN cells: magenta, outside every colormap used here and never grey


def set_theme() -> None:
    """The one look of the series: seaborn's "ticks" style (white background, no grid lines
    over heatmap cells) in the "notebook" context with its "deep" palette. Every notebook
    calls it in its first code cell; figures made afterwards (the views' too) follow it. In
    Jupyter's inline backend it also shows a figure with constrained layout as drawn, not
    cropped to its tight box (``_draw_laid_out_figures_once``); other figures are cropped as
    IPython crops them. Either is stored at twice its pixels, with its size in CSS pixels
    (IPython's ``retina``), so it is sharp on a 2x screen and shown at the size it had.

    Applied without importing seaborn, which imports pandas (0.66 s a kernel, in notebooks
    that draw nothing with seaborn): the rcParams and colour codes that ``seaborn.set_theme``
    sets are frozen in ``_theme_rc``, and the tests check them against seaborn."""
    if _theme_rc.RC["image.cmap"] not in colormaps:  # seaborn registers it on import
        colormaps.register(ListedColormap(_theme_rc.ROCKET, _theme_rc.RC["image.cmap"]))
    mpl.rcParams.update(_theme_rc.RC)
    mpl.rcParams["axes.prop_cycle"] = cycler("color", [to_rgb(c) for c in _theme_rc.DEEP])
    for code, color in _theme_rc.COLOR_CODES.items():
        ColorConverter.colors[code] = to_rgb(color)  # the shared colour map: clears its cache
    _draw_laid_out_figures_once()


def _draw_laid_out_figures_once() -> None:
    """In IPython with the inline backend, show a figure that has constrained layout as drawn,
    its whole canvas, instead of cropped to its tight bounding box.

    IPython's inline PNG uses ``bbox_inches="tight"``: matplotlib lays the figure out and draws
    it once, without rendering, to measure it, then again for the picture; a third of a figure's
    time, 5 s over the series. Constrained layout has already fitted everything inside the
    canvas, so the crop removes only a margin (the canvas plus 0.1 inch a side becomes the
    canvas). Every other figure is cropped as before: one without a layout engine may hang a
    label or legend outside its canvas, which the crop brings back. Nothing happens outside
    IPython, or where another PNG formatter (or none) is registered for figures: another
    backend, ``retina``, a user's own; ``%matplotlib inline`` again restores IPython's.

    The PNG is IPython's ``retina`` one (``retina_figure``: the figure at twice its dpi, with
    ``width`` and ``height`` metadata at its 1x size, which Jupyter, nbconvert and MyST-NB
    honour), with the same keyword arguments (the crop, the face colour) as the formatter it
    replaces."""
    ipython = sys.modules.get("IPython")  # not loaded: no shell to show figures in (a script)
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    from IPython.core.pylabtools import print_figure, retina_figure  # noqa: PLC0415 (with the shell)

    png = shell.display_formatter.formatters["image/png"]
    try:
        current = png.lookup_by_type(Figure)
    except KeyError:  # no PNG for figures: not the inline backend
        return
    # IPython's own cropping formatter only (ours, set by an earlier call, is not a partial)
    if not (isinstance(current, functools.partial) and current.func is print_figure
            and current.keywords.get("bbox_inches") == "tight"):
        return
    kwargs = {k: v for k, v in current.keywords.items() if k not in ("fmt", "base64")}
    png.for_type(Figure, _once_if_laid_out(functools.partial(retina_figure, base64=True, **kwargs)))


def _once_if_laid_out(cropped: Callable[[Figure], object]) -> Callable[[Figure], object]:
    """``cropped`` (``partial(retina_figure, ..., bbox_inches="tight")``, IPython's keyword
    arguments), but with ``bbox_inches=None`` for a figure whose layout engine is constrained
    layout."""
    @functools.wraps(cropped)
    def png(fig: Figure) -> object:
        if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
            return cropped(fig, bbox_inches=None)
        return cropped(fig)
    return png


def to_numpy(x: torch.Tensor | np.ndarray | Sequence) -> np.ndarray:
    """A NumPy copy of a tensor (any device, any dtype, bfloat16 included), of an array or of a
    (nested) list of numbers: writing into the result never changes ``x``. Half precision comes
    back as float32. Raises ValueError for anything else (a str, None, a ragged list, a 'meta'
    tensor, which holds no numbers)."""
    return _as_array("x", x)


def _as_array(name: str, x: object) -> np.ndarray:
    """``to_numpy(x)``, its errors naming the caller's parameter ``name``."""
    if isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            raise ValueError(f"{name} must hold numbers (a tensor on a real device), got a 'meta' tensor")
        x = x.detach()
        if x.dtype in (torch.float16, torch.bfloat16):
            return x.float().cpu().numpy()  # .float() made a new tensor: already a copy
        return x.cpu().numpy().copy()  # .cpu() of a CPU tensor is the tensor itself
    if not isinstance(x, (np.ndarray, np.generic, list, tuple, range, numbers.Number)):
        raise ValueError(f"{name} must be a tensor, an array or a (nested) list of numbers, "
                         f"got {type(x).__name__}")
    try:
        out = np.array(x)  # copies
    except ValueError:  # a ragged list
        raise ValueError(f"{name} must be a tensor, an array or a (nested) list of numbers of one "
                         f"shape, got a ragged {type(x).__name__}") from None
    if out.dtype.kind not in "biufc":
        raise ValueError(f"{name} must hold numbers, got dtype {out.dtype}")
    return out


def _as_4d(name: str, x: np.ndarray) -> np.ndarray:
    if x.ndim == 2:
        return x[None, None]
    if x.ndim == 3:
        return x[None]
    if x.ndim == 4:
        return x
    raise ValueError(f"{name} must be 2-D (Q, K), 3-D (C, Q, K) or 4-D (R, C, Q, K), got shape {x.shape}")


def _is_finite(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) \
        and math.isfinite(value)


def _check_labels(name: str, labels: object) -> None:
    """Raise unless ``labels`` is None or a sequence (not a str) of str or real numbers."""
    if labels is None:
        return
    if not isinstance(labels, (list, tuple, range, np.ndarray)) or not all(
            isinstance(e, str) or _is_finite(e) for e in labels):
        raise ValueError(f"{name} must be None or a list of str (or numbers), got {labels!r:.60}")


def _check_options(xlabel: object, ylabel: object, figsize: object, cmap: object, vmin: object,
                   vmax: object, colorbar: object, fig: object, annot: object) -> None:
    """Raise unless ``show_heatmaps``'s options (all but the data and the labels) make sense."""
    for name, label in (("xlabel", xlabel), ("ylabel", ylabel)):
        if not isinstance(label, str):
            raise ValueError(f"{name} must be a str, got {label!r}")
    if figsize is not None and not (isinstance(figsize, (tuple, list)) and len(figsize) == 2
                                    and all(_is_finite(v) and v > 0 for v in figsize)):
        raise ValueError(f"figsize must be None or (width, height) in inches, two numbers > 0, "
                         f"got {figsize!r}")
    if not isinstance(cmap, str) or cmap not in colormaps:
        raise ValueError(f"cmap must be a matplotlib colormap name such as 'Reds', got {cmap!r}")
    for name, value in (("vmin", vmin), ("vmax", vmax)):
        if value is not None and not _is_finite(value):
            raise ValueError(f"{name} must be None or a finite number, got {value!r}")
    if vmin is not None and vmax is not None and not vmax > vmin:
        raise ValueError(f"vmax must be above vmin={vmin}, got {vmax}")
    if not isinstance(colorbar, (bool, np.bool_)):
        raise ValueError(f"colorbar must be True or False, got {colorbar!r}")
    if fig is not None and not isinstance(fig, FigureBase):
        raise ValueError(f"fig must be None or a matplotlib Figure (or SubFigure), "
                         f"got {type(fig).__name__}")
    if figsize is not None and fig is not None and not isinstance(fig, Figure):
        raise ValueError(f"figsize must be None when fig is a SubFigure (its parent sets its "
                         f"size), got {figsize!r}")
    if not isinstance(annot, (bool, np.bool_)):
        try:
            format(1.0, annot)
        except (TypeError, ValueError):
            raise ValueError(f"annot must be True, False or a format such as '.1f', "
                             f"got {annot!r}") from None


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
    fig: FigureBase | None = None,
    annot: bool | str = False,
) -> FigureBase:
    """Draw a grid of heatmaps with one shared colorbar and return the Figure.

    ``matrices``: (Q, K), (C, Q, K) or (R, C, Q, K) real numbers, a tensor on any device, an
    array or a nested list. ``titles``: one per column, or one per panel (R·C); titles and tick
    labels are lists of str (or numbers). ``mask``: boolean, broadcastable to ``matrices``;
    cells where it is False are drawn grey. NaN cells that are not masked are drawn magenta and
    a legend names them. ``vmin`` < ``vmax``, finite; ``vmax`` defaults to the largest value
    shown. ``annot``: write each value in its cell (True: 2 decimals; or a format such as
    ".1f"), for small maps. ``fig``: an existing Figure or SubFigure to clear and redraw into
    (widgets reuse one figure instead of making a new one per slider move). The Figure is not registered with
    pyplot: return it from a cell (or ``display`` it) to show it, and nothing leaks.
    """
    data = _as_array("matrices", matrices)
    if data.dtype.kind == "c":
        raise ValueError(f"matrices must hold real numbers, got dtype {data.dtype}")
    data = _as_4d("matrices", data).astype(np.float64)
    R, C, Q, K = data.shape
    _check_options(xlabel, ylabel, figsize, cmap, vmin, vmax, colorbar, fig, annot)
    keep = np.ones(data.shape, dtype=bool)
    if mask is not None:
        m = _as_array("mask", mask)
        if m.dtype != bool:
            raise ValueError(f"mask must be boolean (True = takes part), got dtype {m.dtype}")
        try:
            keep = np.broadcast_to(_as_4d("mask", m) if m.ndim >= 2 else m, data.shape)
        except ValueError:
            raise ValueError(f"mask must broadcast to shape {data.shape}, got {m.shape}") from None
    nan = np.isnan(data) & keep  # NaN where a value should be: drawn magenta, not grey
    data = np.where(keep, data, np.nan)
    for name, labels in (("titles", titles), ("xticklabels", xticklabels),
                         ("yticklabels", yticklabels)):
        _check_labels(name, labels)
    if titles is not None and len(titles) not in (C, R * C):
        per_panel = f" or {R * C} (one per panel)" if R > 1 else ""
        raise ValueError(f"titles must have {C} entries (one per column){per_panel}, got {len(titles)}")
    for name, labels, n in (("xticklabels", xticklabels, K), ("yticklabels", yticklabels, Q)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} must have {n} entries, got {len(labels)}")
    shown = data[np.isfinite(data)]
    top = vmax if vmax is not None else (float(shown.max()) if shown.size else 1.0)
    low = vmin if vmin is not None else (float(shown.min()) if shown.size else 0.0)
    if top <= low:  # an automatic end beyond the given one: move the automatic end
        if vmax is not None:
            low = top - max(1.0, abs(top))
        else:
            top = low + max(1.0, abs(low))
    if fig is None:
        fig = Figure(figsize=figsize or (2.5 * C + 1.0, 2.5 * R), layout="constrained")
    else:
        fig.clear()
        if figsize is not None:
            fig.set_size_inches(*figsize)
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
