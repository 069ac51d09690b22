"""Views for notebook 08: what a causal query can see, and the attention explorer of a small
trained decoder (every layer and head, at every training checkpoint).

Legend: T tokens, L layers, H heads, C checkpoints, E examples. Weights are laid out (Q, K) with
Q = K = T; a boolean mask is True where a key takes part (the causal mask hides the future, drawn
grey). Layers and heads are numbered from 1 in the views, as in the notebook's text. Colours are
fixed to 0–1 so that maps compare across slider values.
"""

from __future__ import annotations

import functools
import numbers

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .. import induction
from ..checks import check_positive_int
from ..masking import causal_mask
from ..plotting import MASKED_COLOR, show_heatmaps
from ._common import (
    check_figure, check_int_in, freeze_layout, interactive_figure, set_image_data, start_figure,
)
from .page import PageView

__all__ = [
    "SENTENCE", "averaging_weights", "draw_causal", "causal_view", "draw_explorer",
    "explorer_view", "default_run", "demo_views",
]

SENTENCE = ("the", "cat", "sat", "on", "the", "mat", "and", "purred")
CAUSAL_LABEL = "transformer.causal"  # Figure labels: tell a draw function a figure is its own
EXPLORER_LABEL = "transformer.explorer"


# ------------------------------------------------------------------ what one query can see


def averaging_weights(num_tokens: int) -> torch.Tensor:
    """(T, T): query t averages the tokens 0 … t uniformly (weight 1/(t+1)), the future gets 0;
    the masked softmax of all-zero scores under ``causal_mask(T, T)``."""
    num_tokens = check_positive_int("num_tokens", num_tokens)
    keep = causal_mask(num_tokens, num_tokens)  # (T, T), True = takes part
    return keep / keep.sum(-1, keepdim=True)  # (T, T)


def _check_causal(position: object, words: object) -> tuple[int, tuple[str, ...]]:
    """``position`` as an int in [0, T − 1] and ``words`` as a tuple of T >= 1 strings."""
    if not isinstance(words, (tuple, list)) or not words or \
            not all(isinstance(w, str) for w in words):
        got = (f"{type(words).__name__} of {len(words)}" if isinstance(words, (tuple, list))
               else type(words).__name__)
        raise ValueError(f"words must be a non-empty tuple of strings, got {got}")
    words = tuple(words)
    return check_int_in("position", position, 0, len(words) - 1), words


def draw_causal(position: int = 3, *, words: tuple[str, ...] = SENTENCE,
                fig: Figure | None = None) -> Figure:
    """Left: the causal averaging weights of ``words`` (future keys grey), the row of query
    ``position`` framed. Right: that row as bars, one per key (grey: in its future).
    ``fig``: a Figure this function drew before is updated in place."""
    position, words = _check_causal(position, words)
    check_figure("fig", fig, optional=True)
    T = len(words)
    if fig is None or fig.get_label() != CAUSAL_LABEL or len(fig.axes) != 3:
        fig = _build_causal(averaging_weights(T), words, fig)
    heat, bars_ax = fig.axes[0], fig.axes[2]
    heat.patches[0].set_y(position - 0.5)  # the frame around the query's row
    future, *bars = bars_ax.patches
    future.set_x(position + 0.5)  # grey from the first future key to the end
    future.set_width(T - 1 - position)
    row = np.where(np.arange(T) <= position, 1.0 / (position + 1), 0.0)  # averaging_weights' row
    for bar, height in zip(bars, row):
        bar.set_height(height)
    bars_ax.title.set_text(f"query {position} ({words[position]!r}) sees {position + 1} "
                           f"token{'s' if position else ''}: weight 1/{position + 1} each")
    return fig


def _build_causal(weights: torch.Tensor, words: tuple[str, ...], fig: Figure | None) -> Figure:
    T = len(words)
    if fig is None:
        fig = Figure(figsize=(9.5, 3.6))
    start_figure(fig, CAUSAL_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.0, 1.25])
    show_heatmaps(weights, mask=causal_mask(T, T), vmax=1.0, fig=left, xticklabels=words,
                  yticklabels=words, xlabel="Keys", ylabel="Queries (rows)")
    left.axes[0].add_patch(Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor="black", lw=2))
    ax = right.subplots()
    ax.add_patch(Rectangle((T - 0.5, 0), 0, 1.05, facecolor=MASKED_COLOR, edgecolor="none"))
    ax.bar(range(T), [0.0] * T, width=0.8, color="#c44e52", edgecolor="none")
    ax.set_xticks(range(T), list(words), rotation=45)
    ax.set(xlim=(-0.5, T - 0.5), ylim=(0, 1.05), ylabel="attention weight",
           xlabel="Keys (grey: the query's future, masked)")
    ax.set_title(" ")
    _freeze_layout(fig)
    return fig


def _freeze_layout(fig: Figure) -> None:
    """Lay ``fig`` out once (constrained), then pin everything a tick does not move: no layout
    engine, titles at a fixed height, axis labels at fixed coordinates. Otherwise every draw
    would search again for where titles and labels go (measuring every tick label of every
    shared axes), which costs more than drawing them. Afterwards a tick changes only data and
    text (``title.set_text``).

    (``freeze_layout`` explains why the engine is dropped, not set to "none".)"""
    freeze_layout(fig)
    for ax in fig.axes:
        if ax.get_title():
            ax.set_title(ax.get_title(), y=1.0, fontsize=ax.title.get_fontsize())
        for axis in (ax.xaxis, ax.yaxis):
            label = axis.label  # where the layout put it, in display units, then in axes units
            where = label.get_transform().transform(label.get_position())
            axis.set_label_coords(*ax.transAxes.inverted().transform(where))


def causal_view(position: int = 3, *, words: tuple[str, ...] = SENTENCE) -> PageView:
    """Slider over the query position → ``draw_causal``, redrawn into one Figure."""
    position, words = _check_causal(position, words)
    fig = draw_causal(position, words=words)
    slider = widgets.IntSlider(value=position, min=0, max=len(words) - 1,
                               description="query position", style={"description_width": "initial"})
    return interactive_figure(lambda position: draw_causal(position, words=words, fig=fig),
                              position=slider)


# ------------------------------------------------------------------------- the explorer


def _check_choice(run: induction.TrainingRun, step: int, layer: int, head: int,
                  example: int) -> tuple[int, int, int, int]:
    """(checkpoint index, layer, head, example), 0-based, of a choice in ``run``."""
    if not isinstance(run, induction.TrainingRun):
        raise ValueError(f"run must be an induction.TrainingRun (train_with_checkpoints), "
                         f"got {type(run).__name__}")
    C, E, L, H = run.weights.shape[:4]
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step not in run.steps:
        raise ValueError(f"step must be one of the checkpoints {run.steps}, got {step!r}")
    for name, value, top in (("layer", layer, L), ("head", head, H)):
        check_int_in(name, value, 1, top, "(numbered from 1)")
    check_int_in("example", example, 0, E - 1)
    return run.steps.index(step), int(layer) - 1, int(head) - 1, int(example)


def _targets(run: induction.TrainingRun, example: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 2) (key, query) cells of one example: the previous-token targets (before the copy)
    and the induction targets of the queries the loss scores (as ``run``'s two scores)."""
    batch = run.examples[example]
    inducing = torch.where(batch.predictable, induction.induction_targets(batch.tokens), -1)
    cells = []
    for keys in (induction.offset_targets(batch, 1)[0], inducing[0]):
        q = torch.nonzero(keys >= 0).flatten()
        cells.append(np.stack([keys[q].numpy(), q.numpy()], axis=-1).astype(float))  # (n, 2) x, y
    return cells[0], cells[1]


def draw_explorer(run: induction.TrainingRun, step: int | None = None, layer: int = 2,
                  head: int = 1, example: int = 0, *, fig: Figure | None = None) -> Figure:
    """The attention maps of ``run`` at checkpoint ``step`` (default: the last) on example
    ``example``: left, layer ``layer``'s head ``head`` with the tokens on the axes (dots: the
    previous token, squares: the token after the previous occurrence of the query's token);
    right, every layer × head (the chosen one framed, its two scores at this step in the
    titles: ``previous_token`` and ``induction`` of ``run``). Colours 0–1.
    ``fig``: a Figure this function drew for the same run is updated in place (fast)."""
    step = run.steps[-1] if step is None and isinstance(run, induction.TrainingRun) else step
    c, li, hi, e = _check_choice(run, step, layer, head, example)
    check_figure("fig", fig, optional=True)
    step, layer, head, example = run.steps[c], li + 1, hi + 1, e
    ours = fig is not None and fig.get_label() == EXPLORER_LABEL
    if not ours or getattr(fig, "_explorer_run", None) is not run:
        fig = _build_explorer(run, fig)
    state = fig._explorer_state
    weights = state["weights"][c, e]  # (L, H, T, T)
    keep = state["keep"]
    main = state["main"]
    set_image_data(main.images[0], np.ma.masked_array(weights[li, hi], mask=~keep))
    if state["example"] != e:  # tokens on the axes and the target markers follow the example
        labels = state["labels"][e]
        main.set_xticks(range(len(labels)), labels)
        main.set_yticks(range(len(labels)), labels)
        previous, inducing = state["targets"][e]
        state["previous"].set_offsets(previous)
        state["induction"].set_offsets(inducing)
        state["example"] = e
    main.title.set_text(f"layer {layer} · head {head} at step {step}\n"
                        f"example {example + 1}: copy distance {state['periods'][e]}")
    for (l, hh), ax in state["grid"].items():  # the grid's images change on a step or example
        set_image_data(ax.images[0], np.ma.masked_array(weights[l, hh], mask=~keep))
        ax.title.set_text(f"layer {l + 1} · head {hh + 1}\nprev {state['prev'][c, l, hh]:.2f}"
                          f" · ind {state['ind'][c, l, hh]:.2f}")
        colour, width = ("black", 2.5) if (l, hh) == (li, hi) else ("#999999", 0.6)  # the chosen
        for spine in ax.spines.values():  # one framed; set only when it changes (a page view
            if spine.get_linewidth() != width:  # records a spine again whenever it is set)
                spine.set_edgecolor(colour)
                spine.set_linewidth(width)
    return fig


def _build_explorer(run: induction.TrainingRun, fig: Figure | None) -> Figure:
    C, E, L, H, T, _ = run.weights.shape
    if fig is None:
        fig = Figure(figsize=(9.6, 4.5))
    start_figure(fig, EXPLORER_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.0, 1.05])
    keep = causal_mask(T, T).numpy()  # (T, T), True = takes part
    labels = induction.token_labels(run.examples.tokens[0])
    show_heatmaps(torch.zeros(T, T), mask=keep, vmax=1.0, fig=left, colorbar=False,
                  xticklabels=labels, yticklabels=labels, ylabel="Queries")
    main = left.axes[0]
    main.tick_params(axis="x", labelrotation=0)
    main.set_title(" \n ", fontsize="medium")  # room for the title, set on every draw
    targets = [_targets(run, i) for i in range(E)]
    previous, inducing = targets[0]
    dots = main.scatter(previous[:, 0], previous[:, 1], s=9, c="#1f3b73", marker="o", linewidths=0)
    squares = main.scatter(inducing[:, 0], inducing[:, 1], s=70, marker="s", facecolors="none",
                           edgecolors="#1f3b73", linewidths=1.2)
    # What the markers mean, in the axis label (a legend would be laid out again on every draw).
    main.set_xlabel("Keys\n•  previous token (before the copy)\n□  token after the previous "
                    "occurrence", linespacing=1.6)
    show_heatmaps(torch.zeros(L, H, T, T), mask=keep, vmax=1.0, fig=right,
                  titles=[f"L{l + 1} H{hh + 1}\n " for l in range(L) for hh in range(H)],
                  xlabel="", ylabel="")
    grid = {}
    right.axes[-1].set_yticks([0.0, 0.5, 1.0])  # the colorbar: few labels, less text to draw
    for i, ax_ in enumerate(right.axes[:L * H]):
        ax_.set_xticks([])
        ax_.set_yticks([])
        grid[divmod(i, H)] = ax_
        ax_.set_title(ax_.get_title(), fontsize="small")
    _freeze_layout(fig)
    fig._explorer_run = run  # the run this figure shows, and what its ticks update
    fig._explorer_state = {
        "main": main, "keep": keep, "grid": grid, "example": 0,
        "previous": dots, "induction": squares,
        # Everything a tick reads, as NumPy and lists: no torch op runs in a callback (on a
        # busy machine a tiny op can wait milliseconds for a thread).
        "weights": run.weights.numpy(), "prev": run.previous_token.numpy(),
        "ind": run.induction.numpy(), "targets": targets,
        "labels": [induction.token_labels(tokens) for tokens in run.examples.tokens],
        "periods": run.examples.period.tolist(),
    }
    return fig


def explorer_view(run: induction.TrainingRun, step: int | None = None, layer: int = 2,
                  head: int = 1, example: int = 0) -> PageView:
    """Controls: training step (the checkpoints of ``run``), layer, head and example →
    ``draw_explorer``, redrawn into one Figure. Everything shown was recorded during training:
    a move only redraws."""
    step = run.steps[-1] if step is None and isinstance(run, induction.TrainingRun) else step
    c, li, hi, e = _check_choice(run, step, layer, head, example)
    step, layer, head, example = run.steps[c], li + 1, hi + 1, e
    C, E, L, H = run.weights.shape[:4]
    fig = draw_explorer(run, step, layer, head, example)
    options = [(f"{i + 1}: copy distance {int(p)}", i) for i, p in enumerate(run.examples.period)]
    controls = {
        "step": widgets.SelectionSlider(options=list(run.steps), value=step,
                                        description="training step",
                                        style={"description_width": "initial"}),
        "layer": widgets.IntSlider(value=layer, min=1, max=L, description="layer"),
        "head": widgets.IntSlider(value=head, min=1, max=H, description="head"),
        "example": widgets.Dropdown(options=options, value=example, description="example sequence",
                                   style={"description_width": "initial"}),
    }

    def draw(step: int, layer: int, head: int, example: int) -> Figure:
        return draw_explorer(run, step, layer, head, example, fig=fig)

    return interactive_figure(draw, **controls)


@functools.cache
def default_run() -> induction.TrainingRun:
    """``induction.train_with_checkpoints()`` with its defaults, trained once per session."""
    return induction.train_with_checkpoints()


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as the notebook shows it."""
    return {"causal": causal_view(), "explorer": explorer_view(default_run())}
