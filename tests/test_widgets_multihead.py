"""Notebook 06's view: the toy model's heads at each training checkpoint, on a fixed 0–1 scale."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets.page import PageView
from helpers import toy
from helpers.widgets import multihead as mw
from tests.conftest import control, shown_png


@pytest.fixture(scope="module")
def runs() -> dict[int, toy.Run]:
    return mw.train_runs(steps=20, every=5)  # checkpoints at 0, 5, 10, 15, 20


def heatmaps(fig: Figure) -> list:
    """The heatmap axes (one per head of the largest model), in head order."""
    return [ax for ax in fig.axes if ax.images]


def shown(fig: Figure) -> list:
    """The heatmap axes whose image is visible."""
    return [ax for ax in heatmaps(fig) if ax.images[0].get_visible()]


def curves(fig: Figure):
    return next(ax for ax in fig.axes if not ax.images and ax.lines)


def formula_weights(model: toy.NeighbourModel, tokens: torch.Tensor) -> torch.Tensor:
    """softmax(Q_i K_iᵀ / √(d/H)) for each head i of the model on tokens (T,), written out:
    x = embedding + position vectors, head i owns rows i·d/H … (i+1)·d/H of W_q and W_k.
    Returns (H, T, T)."""
    x = model.embedding.weight[tokens].double()  # (T, d)
    x = x + model.position_vectors.double()
    att = model.attention
    H, d = att.num_heads, att.W_q.out_features
    p = d // H
    Wq, Wk = att.W_q.weight.double(), att.W_k.weight.double()  # (d, d)
    out = []
    for i in range(H):
        rows = slice(i * p, (i + 1) * p)
        scores = (x @ Wq[rows].T) @ (x @ Wk[rows].T).T / math.sqrt(p)  # (T, T)
        out.append(torch.softmax(scores, dim=-1))
    return torch.stack(out).detach()


@pytest.mark.parametrize("num_heads", [1, 2])
def test_each_panel_is_that_heads_weights_at_that_step_on_a_fixed_scale(runs, num_heads):
    view = mw.training_view(runs, num_heads=num_heads)
    fig = view.result
    for step in (0, 10, 5, 20, 15):
        control(view, "training step").value = step
        checkpoint = runs[num_heads].checkpoints[step // 5]
        assert checkpoint.step == step
        panels = shown(fig)
        assert len(panels) == num_heads
        for i, ax in enumerate(panels):
            np.testing.assert_allclose(ax.images[0].get_array(), checkpoint.weights[i].numpy(),
                                       rtol=1e-6)
            assert ax.images[0].get_clim() == (0.0, 1.0)  # the same colours at every step
            assert ax.get_title() == f"head {i} (size {16 // num_heads})"


def test_the_last_step_shows_the_trained_models_weights_written_out(runs):
    fig = mw.draw_training(runs, 2)  # default: the last step
    run = runs[2]
    expected = formula_weights(run.model, run.example)
    for i, ax in enumerate(shown(fig)):
        np.testing.assert_allclose(ax.images[0].get_array(), expected[i].numpy(), atol=1e-5)
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()).sum(1), 1.0, rtol=1e-5)


def test_title_curves_and_marker_follow_the_step_and_the_model(runs):
    view = mw.training_view(runs)
    fig = view.result
    for num_heads, step in ((2, 5), (1, 15), (1, 0), (2, 20)):
        control(view, "number of heads H").value = num_heads
        control(view, "training step").value = step
        run = runs[num_heads]
        prev_acc, next_acc = mw.checkpoint_at(run, step).accuracy
        heads = f"{num_heads} head{'s' if num_heads > 1 else ''}"
        assert fig.get_suptitle() == (f"{heads}, step {step}: accuracy previous {prev_acc:.2f}, "
                                      f"next {next_acc:.2f}")
        ax = curves(fig)
        previous, following = ax.lines[:2]
        steps = [c.step for c in run.checkpoints]
        np.testing.assert_array_equal(previous.get_xdata(), steps)
        accuracies = [c.accuracy for c in run.checkpoints]
        np.testing.assert_array_equal(previous.get_ydata(), [a[0] for a in accuracies])
        np.testing.assert_array_equal(following.get_ydata(), [a[1] for a in accuracies])
        assert list(ax.lines[-1].get_xdata()) == [step, step]  # the marker
        chance = [line for line in ax.lines if line.get_label() == "chance, 1/V"]
        assert list(chance[0].get_ydata()) == [1 / toy.VOCAB_SIZE] * 2


def test_the_one_head_model_says_it_has_no_second_head(runs):
    fig = mw.draw_training(runs, 1, 10)
    first, second = heatmaps(fig)
    assert first.images[0].get_visible() and not first.texts[0].get_visible()
    assert not second.images[0].get_visible()
    assert second.texts[0].get_visible() and "no head 1" in second.texts[0].get_text()
    mw.draw_training(runs, 2, 10, fig=fig)
    assert second.images[0].get_visible() and not second.texts[0].get_visible()


def test_moving_the_controls_updates_the_figure_in_place(runs):
    view = mw.training_view(runs, num_heads=2, step=0)
    fig = view.result
    images = [ax.images[0] for ax in heatmaps(fig)]
    before = [im.get_array().copy() for im in images]
    control(view, "training step").value = 20
    control(view, "number of heads H").value = 1
    assert view.result is fig and [ax.images[0] for ax in heatmaps(fig)] == images
    assert not np.allclose(images[0].get_array(), before[0])
    assert shown_png(view).startswith(b"\x89PNG")


def test_a_foreign_figure_is_cleared_and_redrawn(runs):
    foreign = Figure()
    foreign.subplots(3, 3)
    fig = mw.draw_training(runs, 2, 5, fig=foreign)
    assert fig is foreign and len(heatmaps(fig)) == 2
    np.testing.assert_allclose(heatmaps(fig)[1].images[0].get_array(),
                               runs[2].checkpoints[1].weights[1].numpy(), rtol=1e-6)


def test_bad_choices_are_refused_with_what_was_expected(runs):
    with pytest.raises(ValueError, match=r"num_heads must be one of \[1, 2\], got 4"):
        mw.draw_training(runs, 4)
    with pytest.raises(ValueError, match=r"step must be one of the checkpointed steps .* got 7"):
        mw.draw_training(runs, 2, 7)
    other = {1: runs[1], 2: toy.train(2, steps=6, every=3)}
    with pytest.raises(ValueError, match=r"runs must have checkpoints at the same steps, got"):
        mw.training_view(other)


TINY = dict(steps=2, every=1, eval_size=8, batch_size=4)


@pytest.mark.parametrize("head_counts, message", [
    (2, r"head_counts must be a non-empty tuple of positive ints, got int"),  # was a TypeError
    ((), r"head_counts must be a non-empty tuple of positive ints, got \(\)"),  # was {}
    ((0,), r"head_counts\[0\] must be a positive int, got 0"),
    ((1, 2.0), r"head_counts\[1\] must be a positive int, got 2.0"),
])
def test_train_runs_refuses_head_counts_that_are_not_positive_ints(head_counts, message):
    with pytest.raises(ValueError, match=message):
        mw.train_runs(head_counts, **TINY)


def test_train_runs_takes_a_list_and_numpy_ints():
    runs = mw.train_runs([np.int64(1)], **TINY)
    assert list(runs) == [1] and type(next(iter(runs))) is int
    assert [c.step for c in runs[1].checkpoints] == [0, 1, 2]


@pytest.mark.parametrize("step", [5.0, False, torch.tensor(5), np.float64(10.0)])
def test_checkpoint_at_refuses_a_step_that_is_not_an_int(runs, step):
    # each compared equal to a checkpointed step (5, 0, 5, 10) and was taken
    with pytest.raises(ValueError, match=r"step must be one of the checkpointed steps \[0, 5, .*got"):
        mw.checkpoint_at(runs[2], step)


@pytest.mark.parametrize("call, message", [
    (lambda runs: mw.checkpoint_at("run", 5), r"run must be a toy.Run, got str"),
    (lambda runs: mw.draw_training([runs[1]], 1), r"runs must be a non-empty dict \{num_heads: toy.Run\}, got list"),
    (lambda runs: mw.draw_training({}, 1), r"runs must be a non-empty dict \{num_heads: toy.Run\}, got \{\}"),
    (lambda runs: mw.training_view({2: "run"}), r"runs must map each head count to a toy.Run, got str for 2"),
    (lambda runs: mw.draw_training({1000: runs[2]}, 1000),  # drew 1000 panels (max key)
     r"runs must map each head count to a run with that many heads, got a 2-head run for 1000"),
    (lambda runs: mw.draw_training(runs, 2.0), r"num_heads must be one of \[1, 2\], got 2.0"),
    (lambda runs: mw.training_view(runs, True), r"num_heads must be one of \[1, 2\], got True"),
    (lambda runs: mw.training_view(runs, 2, 7), r"step must be one of the checkpointed steps .* got 7"),
    (lambda runs: mw.training_view(runs, 2, 5.0), r"step must be one of the checkpointed steps .* got 5.0"),
    (lambda runs: mw.draw_training(runs, 2, fig="fig"), r"fig must be a matplotlib Figure or None, got str"),
])
def test_runs_heads_steps_and_figures_of_the_wrong_kind_are_refused(runs, call, message):
    # each was an AttributeError, a TypeError, a TraitError or a float taken as a head count
    with pytest.raises(ValueError, match=message):
        call(runs)


def test_demo_views_show_a_figure():  # build time: benchmarks/bench_sliders.py
    views = mw.demo_views()
    assert set(views) == {"training"}
    view = views["training"]
    assert isinstance(view, PageView) and isinstance(view.result, Figure)
    assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept
    step = control(view, "training step")
    assert step.value == step.options[-1] == 200 and tuple(step.options[:3]) == (0, 5, 10)
    assert control(view, "number of heads H").value == 2
