"""Views for notebook 05: where the Bahdanau decoder looks at each step of its output.

Legend: S decoding steps (the queries, one per output token), T source tokens (the keys).
Weights are laid out (S, T); each row sums to 1 over the source's valid tokens.
Steps and examples count from 1, as in the notebook's maths: step t writes output token y_t and
is row t - 1 of the weights.

``draw_alignment`` is a pure function of the tokens, the weights and the chosen step;
``alignment_view`` computes every example's greedy prediction once (``predict_many``) and
lets two sliders pick the example and the step.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox

from ..checks import check_holds_data, check_seed
from ..plotting import MASKED_COLOR, to_numpy
from ..seq2seq import Seq2Seq, make_dates, output_text, predict_many, tokenize_source
from ._common import check_figure, check_int_in, interactive_figure, start_figure
from .page import PageView

__all__ = ["step_labels", "draw_alignment", "alignment_title", "alignment_view", "demo_model",
           "demo_views"]

ALIGNMENT_LABEL = "seq2seq.alignment"  # Figure label: tells draw_alignment a figure is its own
HIGHLIGHT = "#1f77b4"
MAX_STEPS = 64  # decoding steps a view may ask for: one heatmap row each
MARGINS = {"left": 0.19, "right": 0.95, "top": 0.8, "bottom": 0.17}  # the grid's, at least
PAD_PX = 4  # the least room between a text and the figure's edge


def _check_tokens(name: str, tokens: object) -> list[str]:
    """``tokens`` as a list; raise unless it is a list or tuple of str (a lone str is refused:
    it would be read character by character)."""
    if isinstance(tokens, (list, tuple)):
        odd = [t for t in tokens if not isinstance(t, str)]
        if not odd:
            return list(tokens)
        got = f"a {type(tokens).__name__} holding a {type(odd[0]).__name__}"
    else:
        got = f"the str {tokens!r}" if isinstance(tokens, str) else type(tokens).__name__
    raise ValueError(f"{name} must be a list of str (one each), got {got}")


def _check_weights(weights: object) -> np.ndarray:
    """``weights`` (S, T) as a float64 array; raise unless they are real floating-point
    numbers (a tensor holding data, an array or a nested list)."""
    if isinstance(weights, torch.Tensor):
        check_holds_data("weights", weights)
        ok, kind = weights.is_floating_point(), str(weights.dtype).replace("torch.", "")
    else:
        try:
            array = np.asarray(weights) if not isinstance(weights, str) else None
        except (TypeError, ValueError):
            array = None
        ok = array is not None and array.dtype.kind == "f"
        kind = (type(weights).__name__ if array is None or array.dtype == object
                else str(array.dtype))
    if not ok:
        raise ValueError(f"weights must be floating-point numbers (S, T), got {kind}")
    return to_numpy(weights).astype(np.float64)


def step_labels(output_tokens: Sequence[str]) -> list[str]:
    """Row labels of an alignment map: ['1: 1', '2: 9', ..., '11: <eos>'] (step t: token y_t)."""
    output_tokens = _check_tokens("output_tokens", output_tokens)
    return [f"{t}: {token}" for t, token in enumerate(output_tokens, start=1)]


def _is_alignment_figure(fig: Figure) -> bool:
    return (fig.get_label() == ALIGNMENT_LABEL and len(fig.axes) == 2
            and len(fig.axes[0].images) == 1 and len(fig.axes[0].patches) == 1)


def _layout(fig: Figure) -> None:
    """Build the axes: heatmap on top, bars below sharing its x axis; no colorbar (the bars
    give the scale, and a colorbar would cost a third of each redraw). A fixed grid, no layout
    engine: a redraw only redraws (``_fit_margins`` widens the margins once per example)."""
    start_figure(fig, ALIGNMENT_LABEL, fixed_layout=True)  # margins set below
    fig.__dict__.pop("_fitted_margins", None)  # measured for the axes cleared here
    grid = fig.add_gridspec(2, 1, height_ratios=[3, 1], hspace=0.4, **MARGINS)
    ax_map = fig.add_subplot(grid[0])
    ax_bar = fig.add_subplot(grid[1], sharex=ax_map)
    ax_map.imshow(np.zeros((1, 1)), cmap=colormaps["Reds"].with_extremes(bad=MASKED_COLOR),
                  vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax_map.set_ylabel("step t: output token y_t")
    ax_map.tick_params(top=True, labeltop=True, bottom=False, labelbottom=False)
    ax_map.add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor=HIGHLIGHT, linewidth=2.5))
    ax_bar.set_ylim(0.0, 1.0)
    ax_bar.set_ylabel("weight")
    ax_bar.set_xlabel("source token")


def _set_content(fig: Figure, source_tokens: Sequence[str], output_tokens: Sequence[str],
                 weights: np.ndarray) -> None:
    """Put an example's weights (S, T) and tokens into the axes ``_layout`` made."""
    S, T = weights.shape
    ax_map, ax_bar = fig.axes
    image = ax_map.images[0]
    image.set_data(weights)
    image.set_extent((-0.5, T - 0.5, S - 0.5, -0.5))
    ax_map.set_xlim(-0.5, T - 0.5)
    ax_map.set_ylim(S - 0.5, -0.5)  # step 1 on top
    ax_map.set_yticks(range(S), step_labels(output_tokens))
    for ax, ha in ((ax_map, "left"), (ax_bar, "right")):  # one shared x axis, labels on both
        ax.set_xticks(range(T), list(source_tokens), rotation=45, ha=ha,
                      rotation_mode="anchor", fontsize="small")
    ax_map.patches[0].set_width(T)
    fig._tokens_shown = (tuple(source_tokens), tuple(output_tokens))  # for _shows
    # One bar per source token, kept: a shorter example hides the bars past its end (new
    # artists on every example would make a page view record each state whole).
    if len(ax_bar.patches) < T:
        ax_bar.bar(range(len(ax_bar.patches), T), 0.0, color=HIGHLIGHT)
    for k, bar in enumerate(ax_bar.patches):
        bar.set_visible(k < T)


def _fit_margins(fig: Figure, content: tuple) -> None:
    """Widen the grid's margins (from ``MARGINS``) until every label clears the figure's edge
    by ``PAD_PX``: long step labels ("11: <eos>") push the heatmap right, long source tokens
    the bars up; then slide a title wider than its axes sideways into the figure. Measured
    once per example and title (a step move changes no label), not per draw, and remembered
    by ``content`` (the tokens and title shown) for the figure's size."""
    axes = fig.axes
    grid = axes[0].get_subplotspec().get_gridspec()
    width, height = fig.bbox.width, fig.bbox.height

    def place(**margins: float) -> None:
        grid.update(**margins)  # (it moves the axes of pyplot's figures only)
        for ax in axes:
            ax.set_position(ax.get_subplotspec().get_position(fig))

    fitted = fig.__dict__.setdefault("_fitted_margins", {})
    key = (content, width, height, fig.dpi)
    if key in fitted:  # measured before: the same labels fit the same margins
        margins, title_xs = fitted[key]
        place(**margins)
        for ax, x in zip(axes, title_xs):
            ax.title.set_x(x)
        return

    def extent(titles: bool) -> Bbox:  # display px, with or without the titles
        for ax in axes:
            ax.title.set_visible(titles)
        try:
            return Bbox.union([ax.get_tightbbox() for ax in axes])
        finally:
            for ax in axes:
                ax.title.set_visible(True)

    place(**MARGINS)
    for ax in axes:
        ax.title.set_x(0.5)
    for _ in range(2):  # a second look: moving an axes can move its labels
        sides, tops = extent(titles=False), extent(titles=True)
        over = {"left": (PAD_PX - sides.x0) / width, "right": (sides.x1 - width + PAD_PX) / width,
                "bottom": (PAD_PX - tops.y0) / height, "top": (tops.y1 - height + PAD_PX) / height}
        if max(over.values()) <= 0:
            break
        place(left=grid.left + max(over["left"], 0.0), right=grid.right - max(over["right"], 0.0),
              bottom=grid.bottom + max(over["bottom"], 0.0), top=grid.top - max(over["top"], 0.0))
    for ax in axes:
        box = ax.title.get_window_extent()
        shift = max(PAD_PX - box.x0, 0.0) - max(box.x1 - width + PAD_PX, 0.0)  # px
        ax.title.set_x(0.5 + shift / ax.bbox.width)
    fitted[key] = ({side: getattr(grid, side) for side in MARGINS},
                   [ax.title.get_position()[0] for ax in axes])


def _shows(fig: Figure, source_tokens: Sequence[str], output_tokens: Sequence[str],
           weights: np.ndarray) -> bool:
    """Whether ``fig`` already shows these tokens and weights (then only the step changes).
    The tokens are compared with what ``_set_content`` put there, not read back from the tick
    labels: reading them updates every tick, which a page view would take for a change."""
    ax_map, ax_bar = fig.axes
    drawn = np.ma.getdata(ax_map.images[0].get_array())
    return (drawn.shape == weights.shape and np.array_equal(drawn, weights)
            and getattr(fig, "_tokens_shown", None) == (tuple(source_tokens),
                                                        tuple(output_tokens)))


def draw_alignment(
    source_tokens: Sequence[str], output_tokens: Sequence[str],
    weights: torch.Tensor | np.ndarray, step: int = 1, *, title: str = "",
    fig: Figure | None = None,
) -> Figure:
    """Alignment heatmap of ``weights`` (S, T): output tokens down (labelled 'step: token'),
    source tokens across, colours on a fixed 0–1 scale.

    Step ``step`` (counted from 1, clipped to [1, S]; row ``step - 1``) is outlined, and its
    weights are drawn as bars under the heatmap. ``fig``: a Figure this function drew before is
    updated in place (its axes are kept; when only the step changes, only the outline and the
    bars move); any other Figure is cleared and redrawn.
    """
    source_tokens = _check_tokens("source_tokens", source_tokens)
    output_tokens = _check_tokens("output_tokens", output_tokens)
    weights = _check_weights(weights)
    if weights.ndim != 2 or weights.shape != (len(output_tokens), len(source_tokens)):
        raise ValueError(f"weights must have shape (S, T) = ({len(output_tokens)}, "
                         f"{len(source_tokens)}), got {weights.shape}")
    S, T = weights.shape
    if S == 0:
        raise ValueError(f"weights must have at least one row (one decoding step), got shape "
                         f"{weights.shape}")
    if T == 0:
        raise ValueError(f"weights must have at least one column (one source token), got shape "
                         f"{weights.shape}")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise ValueError(f"step must be an int, got {type(step).__name__} {step!r}")
    step = min(max(int(step), 1), S)
    if not isinstance(title, str):
        raise ValueError(f"title must be a str, got {type(title).__name__}")
    check_figure("fig", fig, optional=True)
    if fig is None:
        fig = Figure(figsize=(6.0, 5.6))
    changed = not _is_alignment_figure(fig)
    if changed:
        _layout(fig)
    changed = changed or not _shows(fig, source_tokens, output_tokens, weights)
    if changed:
        _set_content(fig, source_tokens, output_tokens, weights)
    ax_map, ax_bar = fig.axes
    ax_map.patches[0].set_y(step - 1.5)  # row step - 1
    for bar, height in zip(ax_bar.patches, weights[step - 1]):
        bar.set_height(height)
    changed = changed or ax_map.get_title() != title
    ax_map.set_title(title, fontsize="medium")
    ax_bar.set_title(f"step {step}: writes {output_tokens[step - 1]!r}", fontsize="medium")
    if changed:
        _fit_margins(fig, (tuple(source_tokens), tuple(output_tokens), title))
    return fig


def alignment_title(text: str, output_tokens: Sequence[str], target: str | None = None) -> str:
    """'3 May 1998' → 1998-05-03 (right) — with the target spelled out when the output is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if target is not None and not isinstance(target, str):
        raise ValueError(f"target must be a str or None, got {type(target).__name__}")
    output = output_text(_check_tokens("output_tokens", output_tokens))
    if target is None:
        return f"{text!r} → {output}"
    verdict = "right" if output == target else f"wrong, target {target}"
    return f"{text!r} → {output} ({verdict})"


def alignment_view(
    model: Seq2Seq, texts: Sequence[str], targets: Sequence[str] | None = None, *,
    example: int = 1, step: int = 1, max_steps: int = 12,
) -> PageView:
    """Sliders: which example of ``texts`` (1 = the first) and which decoding step (from 1)
    → ``draw_alignment``.

    The greedy predictions (``predict_many(model, texts, max_steps)``) are computed once here;
    moving a slider only draws. ``targets``, if given, mark each output right or wrong.
    ``max_steps`` is at most ``MAX_STEPS`` and ``step`` at most the longest output (the step
    slider's end): a value past a slider is refused, not clipped.
    """
    if not isinstance(model, Seq2Seq):
        raise ValueError(f"model must be a Seq2Seq, got {type(model).__name__}")
    texts = _check_tokens("texts", texts)
    if not texts:
        raise ValueError("texts must be a non-empty list of str (source texts), got []")
    if targets is not None:
        targets = _check_tokens("targets", targets)
        if len(targets) != len(texts):
            raise ValueError(f"targets must be None or one str per text ({len(texts)}), "
                             f"got {len(targets)}")
    example = check_int_in("example", example, 1, len(texts))
    check_int_in("step", step, 1)
    max_steps = check_int_in("max_steps", max_steps, 1, MAX_STEPS, "(one heatmap row per step)")
    preds = predict_many(model, texts, max_steps)
    longest = max(len(tokens) for tokens, _ in preds)
    step = check_int_in("step", step, 1, longest, "(the longest output)")
    sources = [tokenize_source(t) for t in texts]
    fig = Figure(figsize=(6.0, 5.6))
    longest_source = max(range(len(texts)), key=lambda i: len(sources[i]))

    def draw(example: int, step: int) -> Figure:
        i = example - 1
        tokens, weights = preds[i]
        title = alignment_title(texts[i], tokens, None if targets is None else targets[i])
        return draw_alignment(sources[i], tokens, weights, step, title=title, fig=fig)

    draw(longest_source + 1, 1)  # every bar any example needs, made once
    view = interactive_figure(
        draw,
        example=widgets.IntSlider(value=example, min=1, max=len(texts), description="example date",
                                  continuous_update=False, style={"description_width": "initial"}),
        step=widgets.IntSlider(value=step, min=1, max=longest, description="decoding step t",
                               style={"description_width": "initial"}),
    )
    return view


def demo_model(seed: int = 0) -> Seq2Seq:
    """A small untrained ``Seq2Seq`` whose weights depend on ``seed`` only (global RNG untouched)."""
    seed = check_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Seq2Seq(16, 32)
    return model.eval()


def demo_views() -> dict[str, widgets.Widget]:
    """The view of notebook 05 on an untrained model (the notebook trains it first)."""
    data = make_dates(6, seed=2)
    return {"alignment": alignment_view(demo_model(), data.texts, data.targets)}
