"""Views for notebook 06: the heads of the toy model (``helpers.toy``) while it trains.

Legend: T positions (the queries and the keys of self-attention), H heads, V vocabulary size.
Weights are laid out (H, T, T), queries × keys, on one colour scale, 0 to 1, at every step, so
that maps drawn at different steps can be compared.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .. import toy
from ..checks import check_positive_int
from ..plotting import show_heatmaps
from ._common import check_figure, freeze_layout, interactive_figure, set_image_data, start_figure
from .page import PageView

__all__ = ["train_runs", "checkpoint_at", "draw_training", "training_view", "demo_views"]

TRAINING_LABEL = "multihead.training"  # Figure label: draw_training knows its own figures
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def train_runs(
    head_counts: tuple[int, ...] = (1, 2), *, seed: int = 0, **kwargs,
) -> dict[int, toy.Run]:
    """One ``toy.train`` run per head count (a non-empty tuple or list of positive ints),
    same seed and budget (``kwargs`` go to ``toy.train``): {H: run}."""
    if not isinstance(head_counts, (tuple, list)) or not head_counts:
        got = (repr(head_counts) if isinstance(head_counts, (tuple, list))
               else type(head_counts).__name__)
        raise ValueError(f"head_counts must be a non-empty tuple of positive ints, got {got}")
    counts = [check_positive_int(f"head_counts[{i}]", H) for i, H in enumerate(head_counts)]
    return {H: toy.train(H, seed=seed, **kwargs) for H in counts}


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def checkpoint_at(run: toy.Run, step: int) -> toy.Checkpoint:
    """The checkpoint of ``run`` taken at training step ``step`` (an int)."""
    if not isinstance(run, toy.Run):
        raise ValueError(f"run must be a toy.Run, got {type(run).__name__}")
    steps = [c.step for c in run.checkpoints]
    if not _is_int(step) or step not in steps:  # 5.0, True or tensor(5) would compare equal
        raise ValueError(f"step must be one of the checkpointed steps {steps}, got {step!r}")
    return run.checkpoints[steps.index(step)]


def _check_runs(runs: Mapping[int, toy.Run], num_heads: int) -> toy.Run:
    """The run of ``num_heads``; raise unless ``runs`` is a non-empty {H: toy.Run} whose
    runs share their checkpointed steps, and ``num_heads`` one of its keys (an int)."""
    if not isinstance(runs, Mapping) or not runs:
        got = "{}" if isinstance(runs, Mapping) else type(runs).__name__
        raise ValueError(f"runs must be a non-empty dict {{num_heads: toy.Run}}, got {got}")
    for H, run in runs.items():
        if not _is_int(H) or not isinstance(run, toy.Run):
            raise ValueError(f"runs must map each head count to a toy.Run, got "
                             f"{type(run).__name__} for {H!r}")
        if run.model.attention.num_heads != H:  # the figure draws max(runs) panels
            raise ValueError(f"runs must map each head count to a run with that many heads, "
                             f"got a {run.model.attention.num_heads}-head run for {H!r}")
    steps = {tuple(c.step for c in run.checkpoints) for run in runs.values()}
    if len(steps) != 1:
        raise ValueError(f"runs must have checkpoints at the same steps, got {sorted(steps)}")
    if not _is_int(num_heads) or num_heads not in runs:  # 2.0 and True are dict keys too
        raise ValueError(f"num_heads must be one of {sorted(runs)}, got {num_heads!r}")
    return runs[num_heads]


def _tick_labels(example) -> list[str]:
    """'position token' for each position of the example sequence, tokens as letters."""
    return [f"{i} {LETTERS[int(t)] if int(t) < len(LETTERS) else int(t)}"
            for i, t in enumerate(example)]


def _layout(fig: Figure, runs: Mapping[int, toy.Run]) -> None:
    """Build the figure once: max(H) heatmaps (0–1) on the left, accuracy curves on the right."""
    start_figure(fig, TRAINING_LABEL)
    left, right = fig.subfigures(1, 2, width_ratios=[1.9, 1])
    first = next(iter(runs.values()))
    H = max(runs)
    T = len(first.example)
    labels = _tick_labels(first.example)
    show_heatmaps(np.zeros((H, T, T)), xlabel="Keys (position, token)",
                  ylabel="Queries (position, token)", titles=[f"head {i}" for i in range(H)],
                  vmin=0.0, vmax=1.0, xticklabels=labels, yticklabels=labels, fig=left)
    for panel in left.axes[:H]:
        panel.tick_params(axis="x", labelrotation=0, labelsize="small")  # short: fit unturned
        panel.tick_params(axis="y", labelsize="small")
        panel.text(0.5, 0.5, "", ha="center", va="center", transform=panel.transAxes,
                   visible=False)  # says "no head" where a model has fewer heads
    left.axes[-1].set_yticks([0.0, 0.5, 1.0])  # the colorbar: few labels, drawn fast
    ax = right.subplots()
    steps = [c.step for c in first.checkpoints]
    ax.plot(steps, np.zeros(len(steps)), label="previous token")
    ax.plot(steps, np.zeros(len(steps)), label="next token")
    ax.axhline(1 / first.model.vocab_size, color="grey", linestyle=":", linewidth=1,
               label="chance, 1/V")
    ax.axvline(0, color="black", linewidth=1)  # the step shown on the left
    pad = 0.02 * (steps[-1] - steps[0])  # the step marker stays visible at both ends
    ax.set(xlim=(steps[0] - pad, steps[-1] + pad), ylim=(0.0, 1.05), yticks=[0.0, 0.5, 1.0],
           xlabel="training step", ylabel="accuracy (held-out)")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    ax.legend(loc="center right", fontsize="small")


def _parts(fig: Figure, runs: Mapping[int, toy.Run]):
    """(heatmap axes, accuracy axes) of a figure ``_layout`` built for these runs, else None."""
    if fig.get_label() != TRAINING_LABEL or len(fig.subfigs) != 2:
        return None
    maps = [ax for ax in fig.subfigs[0].axes if ax.images]
    curves = fig.subfigs[1].axes
    first = next(iter(runs.values()))
    T = len(first.example)
    if len(maps) != max(runs) or maps[0].images[0].get_array().shape != (T, T):
        return None
    if len(curves) != 1 or len(curves[0].lines[0].get_xdata()) != len(first.checkpoints):
        return None
    return maps, curves[0]


def draw_training(
    runs: Mapping[int, toy.Run], num_heads: int = 2, step: int | None = None, *,
    fig: Figure | None = None,
) -> Figure:
    """The attention weights of the ``num_heads``-head run at ``step`` (default: the last) on
    its example sequence, one heatmap per head on a fixed 0–1 scale, beside that run's
    held-out accuracy (previous and next token) over training, the step marked. ``runs``:
    {H: toy.Run}, checkpointed at the same steps. A Figure this function drew for the same
    runs is updated in place; any other Figure is cleared and redrawn."""
    run = _check_runs(runs, num_heads)
    checkpoint = checkpoint_at(run, run.checkpoints[-1].step if step is None else step)
    check_figure("fig", fig, optional=True)
    if fig is None:
        fig = Figure(figsize=(9.2, 3.5))
    parts = _parts(fig, runs)
    fresh = parts is None
    if fresh:
        _layout(fig, runs)
        parts = _parts(fig, runs)
    maps, ax = parts
    weights = checkpoint.weights.detach().cpu().float().numpy()  # (H, T, T)
    size = run.model.attention.W_q.out_features // num_heads
    for i, panel in enumerate(maps):
        has_head = i < num_heads
        panel.images[0].set_visible(has_head)
        panel.texts[0].set_visible(not has_head)
        if has_head:
            set_image_data(panel.images[0], weights[i])  # the colour limits stay 0 and 1
            panel.set_title(f"head {i} (size {size})")
        else:
            panel.set_title(f"head {i}")
            panel.texts[0].set_text(f"the {num_heads}-head\nmodel has\nno head {i}")
    previous, following, *_ = ax.lines
    accuracies = np.array([c.accuracy for c in run.checkpoints])  # (steps, 2)
    previous.set_ydata(accuracies[:, 0])
    following.set_ydata(accuracies[:, 1])
    ax.lines[-1].set_xdata([checkpoint.step, checkpoint.step])
    prev_acc, next_acc = checkpoint.accuracy
    fig.suptitle(f"{num_heads} head{'s' if num_heads > 1 else ''}, step {checkpoint.step}: "
                 f"accuracy previous {prev_acc:.2f}, next {next_acc:.2f}", fontsize="medium")
    if fresh:
        freeze_layout(fig)
    return fig


def training_view(
    runs: Mapping[int, toy.Run], num_heads: int = 2, step: int | None = None,
) -> PageView:
    """Controls: the training step (the checkpoints of the runs) and the number of heads
    (one button per run) → ``draw_training``, redrawn into one Figure."""
    run = _check_runs(runs, num_heads)
    steps = [c.step for c in run.checkpoints]
    step = steps[-1] if step is None else checkpoint_at(run, step).step  # one of the slider's
    fig = Figure(figsize=(9.2, 3.5))
    controls = {
        "step": widgets.SelectionSlider(options=steps, value=step,
                                        description="training step", continuous_update=False,
                                        style={"description_width": "initial"}),
        "num_heads": widgets.ToggleButtons(
            options=[(f"{H} head{'s' if H > 1 else ''}", H) for H in sorted(runs)],
            value=int(num_heads), description="number of heads H",
            style={"description_width": "initial"}),
    }

    def draw(step: int, num_heads: int) -> Figure:
        return draw_training(runs, num_heads, step, fig=fig)

    return interactive_figure(draw, **controls)


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as notebook 06 shows it (trains the two toy models first)."""
    return {"training": training_view(train_runs())}
