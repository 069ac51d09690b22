"""Notebook 08's views: the causal averaging view against 1/(t+1) written out here, and the
attention explorer against the weights its training run recorded (and targets found by loops)."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers import induction
from helpers.widgets import transformer as tw
from tests.conftest import shown_png

# ------------------------------------------------------------------------ the causal view


def test_averaging_weights_are_one_over_t_plus_one_on_the_past():
    T = 6
    expected = torch.tensor([[1 / (t + 1) if k <= t else 0.0 for k in range(T)] for t in range(T)])
    torch.testing.assert_close(tw.averaging_weights(T), expected)


def causal_parts(fig: Figure):
    heat, bars = fig.axes[0], fig.axes[2]
    future, *columns = bars.patches
    return heat, heat.patches[0], future, columns


@pytest.mark.parametrize("position", [0, 3, 7])
def test_draw_causal_shows_the_row_of_the_query(position):
    fig = tw.draw_causal(position)
    heat, frame, future, columns = causal_parts(fig)
    image = heat.images[0].get_array()  # (T, T) masked array
    T = len(tw.SENTENCE)
    assert image.shape == (T, T) and heat.images[0].get_clim() == (0.0, 1.0)
    hidden = np.triu(np.ones((T, T), dtype=bool), k=1)  # the future: masked, drawn grey
    np.testing.assert_array_equal(np.ma.getmaskarray(image), hidden)
    np.testing.assert_allclose(image.filled(0.0), tw.averaging_weights(T).numpy(), rtol=1e-6)
    assert frame.get_y() == position - 0.5 and frame.get_height() == 1  # the framed row
    heights = [bar.get_height() for bar in columns]
    seen, unseen = position + 1, T - 1 - position
    assert heights == pytest.approx([1 / seen] * seen + [0.0] * unseen)
    assert future.get_x() == position + 0.5 and future.get_width() == T - 1 - position
    title = fig.axes[2].get_title()
    assert title.startswith(f"query {position} ({tw.SENTENCE[position]!r}) sees {seen} token")
    assert [t.get_text() for t in heat.get_xticklabels()] == list(tw.SENTENCE)


def test_causal_view_slider_redraws_in_place():
    view = tw.causal_view(position=2)
    fig = view.result
    axes = list(fig.axes)
    (slider,) = [c for c in view.children if isinstance(c, widgets.IntSlider)]
    assert (slider.min, slider.max, slider.description) == (0, 7, "query position")
    for position in (5, 0, 7):
        slider.value = position
        assert view.result is fig and fig.axes == axes  # updated, not rebuilt
        heat, frame, future, columns = causal_parts(fig)
        assert frame.get_y() == position - 0.5
        assert columns[position].get_height() == pytest.approx(1 / (position + 1))
    assert shown_png(view).startswith(b"\x89PNG")


@pytest.mark.parametrize("bad", [-1, 8, 2.0, True])
def test_draw_causal_rejects_positions_outside_the_sentence(bad):
    with pytest.raises(ValueError, match=r"position must be an int in \[0, 7\]"):
        tw.draw_causal(bad)


def test_draw_causal_on_a_foreign_figure_and_other_words():
    foreign = Figure()
    foreign.subplots(2, 2)
    fig = tw.draw_causal(1, words=("a", "b", "c"), fig=foreign)
    assert fig is foreign and fig.axes[2].get_title().startswith("query 1 ('b') sees 2 tokens")


# ---------------------------------------------------------------------------- the explorer


@pytest.fixture(scope="module")
def run():
    """A short training run (fast): its checkpoints are what the explorer must show."""
    return induction.train_with_checkpoints(steps=20, every=10, eval_size=64, seed=2)


def main_axes(fig: Figure):
    """The chosen head's map: the first axes of the left part of the figure."""
    return fig.subfigs[0].axes[0]


def grid_axes(fig: Figure) -> dict:
    """(layer, head) → the axes of every head, in the right part (row = layer), 0-based."""
    L, H = 2, 2
    return {divmod(i, H): ax for i, ax in enumerate(fig.subfigs[1].axes[:L * H])}


def markers(fig: Figure) -> tuple:
    """The previous-token dots and the induction squares on the chosen head's map."""
    dots, squares = main_axes(fig).collections
    return dots, squares


def targets_by_loop(run, example: int) -> tuple[set, set]:
    """(key, query) cells: previous token for queries before the copy; the token after the
    previous occurrence for the queries the loss scores."""
    tokens = run.examples.tokens[example].tolist()
    T, start = len(tokens), int(run.examples.copy_start[example])
    previous = {(i - 1, i) for i in range(1, start)}
    inducing = set()
    for i in range(start, T - 1):
        j = max(j for j in range(i) if tokens[j] == tokens[i])
        inducing.add((j + 1, i))
    return previous, inducing


def cells(scatter) -> set:
    return {(int(x), int(y)) for x, y in scatter.get_offsets()}


@pytest.mark.parametrize("step_index, layer, head, example",
                         [(0, 1, 1, 0), (1, 2, 2, 1), (2, 2, 1, 3)])
def test_draw_explorer_shows_the_recorded_weights(run, step_index, layer, head, example):
    step = run.steps[step_index]
    fig = tw.draw_explorer(run, step, layer, head, example)
    T = run.task.seq_len
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    image = main_axes(fig).images[0]
    expected = run.weights[step_index, example].numpy()  # (L, H, T, T)
    np.testing.assert_array_equal(np.ma.getmaskarray(image.get_array()), future)
    np.testing.assert_allclose(image.get_array().filled(0.0), expected[layer - 1, head - 1],
                               rtol=1e-6)
    assert image.get_clim() == (0.0, 1.0)
    letters = induction.token_labels(run.examples.tokens[example])
    assert [t.get_text() for t in main_axes(fig).get_xticklabels()] == letters
    assert [t.get_text() for t in main_axes(fig).get_yticklabels()] == letters
    assert main_axes(fig).get_title().startswith(f"layer {layer} · head {head} at step {step}\n")
    assert f"copy distance {int(run.examples.period[example])}" in main_axes(fig).get_title()
    for (l, hh), ax in grid_axes(fig).items():
        np.testing.assert_allclose(ax.images[0].get_array().filled(0.0), expected[l, hh], rtol=1e-6)
        assert ax.images[0].get_clim() == (0.0, 1.0)
        assert ax.get_title() == (f"layer {l + 1} · head {hh + 1}\n"
                                  f"prev {float(run.previous_token[step_index, l, hh]):.2f}"
                                  f" · ind {float(run.induction[step_index, l, hh]):.2f}")
        framed = ax.spines["left"].get_linewidth() > 2
        assert framed == ((l, hh) == (layer - 1, head - 1))
    previous, inducing = targets_by_loop(run, example)
    dots, squares = markers(fig)
    assert cells(dots) == previous and cells(squares) == inducing


def test_explorer_view_controls_move_the_figure_in_place(run):
    view = tw.explorer_view(run, layer=1, head=1, example=0)
    fig = view.result
    controls = {c.description: c for c in view.children if hasattr(c, "description")}
    names = ("training step", "layer", "head", "example sequence")
    step, layer, head, example = (controls[k] for k in names)
    assert isinstance(step, widgets.SelectionSlider) and list(step.options) == run.steps
    assert step.value == run.steps[-1]
    assert (layer.min, layer.max, head.min, head.max) == (1, 2, 1, 2)
    assert isinstance(example, widgets.Dropdown) and len(example.options) == len(run.examples)
    image = main_axes(fig).images[0]
    for move, expected in ((lambda: setattr(step, "value", 0), (0, 0, 0, 0)),
                           (lambda: setattr(layer, "value", 2), (0, 0, 1, 0)),
                           (lambda: setattr(head, "value", 2), (0, 0, 1, 1)),
                           (lambda: setattr(example, "value", 2), (0, 2, 1, 1)),
                           (lambda: setattr(step, "value", 10), (1, 2, 1, 1))):
        before = image.get_array().copy()
        move()
        assert view.result is fig and main_axes(fig).images[0] is image  # redrawn, not rebuilt
        c, e, l, hh = expected
        np.testing.assert_allclose(image.get_array().filled(0.0), run.weights[c, e, l, hh].numpy(),
                                   rtol=1e-6)
        assert not np.ma.allclose(before, image.get_array())
    letters = induction.token_labels(run.examples.tokens[2])
    assert [t.get_text() for t in main_axes(fig).get_xticklabels()] == letters
    assert cells(markers(fig)[1]) == targets_by_loop(run, 2)[1]
    assert shown_png(view).startswith(b"\x89PNG")


def test_the_untrained_checkpoint_is_diffuse(run):
    """What the checkpoint slider is for: at step 0 no head has a weight near 1 in the copy."""
    untrained = run.weights[0]  # (E, L, H, T, T)
    assert untrained.max() <= 1.0 and untrained[..., 4:, :].max() < 0.6


@pytest.mark.parametrize("kwargs, match", [
    (dict(step=5), r"step must be one of the checkpoints \[0, 10, 20\], got 5"),
    (dict(layer=3), r"layer must be an int in \[1, 2\] \(numbered from 1\), got 3"),
    (dict(head=0), r"head must be an int in \[1, 2\] \(numbered from 1\), got 0"),
    (dict(example=9), r"example must be an int in \[0, 3\], got 9"),
])
def test_draw_explorer_rejects_bad_choices(run, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tw.draw_explorer(run, **kwargs)
    with pytest.raises(ValueError, match=match):
        tw.explorer_view(run, **kwargs)


def test_a_figure_of_another_run_is_rebuilt(run):
    other = induction.train_with_checkpoints(steps=10, every=10, eval_size=32, seed=5)
    fig = tw.draw_explorer(run, layer=1)
    again = tw.draw_explorer(other, layer=1, fig=fig)
    assert again is fig
    np.testing.assert_allclose(main_axes(fig).images[0].get_array().filled(0.0),
                               other.weights[-1, 0, 0, 0].numpy(), rtol=1e-6)


def test_demo_views_show_a_figure(run, monkeypatch):
    monkeypatch.setattr(tw, "default_run", lambda: run)  # no 200-step training here
    views = tw.demo_views()
    assert set(views) == {"causal", "explorer"}
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
        assert shown_png(view).startswith(b"\x89PNG")


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, match", [
    (lambda run: tw.draw_causal(np.int64(2)), None),  # a NumPy int is an int (was refused)
    (lambda run: tw.draw_causal(1, words=()), r"^words must be a non-empty tuple of strings"),
    (lambda run: tw.draw_causal(1, words="abc"), r"^words must be a non-empty tuple of strings"),
    (lambda run: tw.causal_view(9), r"^position must be an int in \[0, 7\]"),
    (lambda run: tw.averaging_weights(0), r"^num_tokens must be a positive int, got 0"),
    (lambda run: tw.draw_explorer(run, step=0.0), r"^step must be one of the checkpoints"),  # 0.0 == 0
    (lambda run: tw.draw_explorer(run, step=False), r"^step must be one of the checkpoints"),
    (lambda run: tw.draw_explorer(run, step=np.int64(10), layer=np.int64(2)), None),
    (lambda run: tw.draw_explorer("run"), r"^run must be an induction.TrainingRun"),  # was raw
    (lambda run: tw.explorer_view(None), r"^run must be an induction.TrainingRun"),
    (lambda run: tw.draw_explorer(run, fig="x"), r"^fig must be a matplotlib Figure or None"),
])
def test_bad_input_is_refused_clearly(run, call, match):
    if match is None:
        assert isinstance(call(run), Figure)
        return
    with pytest.raises(ValueError, match=match):
        call(run)
