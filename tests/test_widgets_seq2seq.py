"""The alignment view of notebook 05 draws the weights the model's greedy decoding used, and
both sliders change the drawing. Steps and examples count from 1 (step t is row t - 1)."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib as mpl
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.plotting import set_theme
from helpers.widgets.page import PageView
from helpers import seq2seq as s
from helpers.widgets import seq2seq as ws
from tests.conftest import control, shown_png

TEXTS = ["3 May 1998", "September 21, 2004", "07.11.1950", "Jan 9, 2011"]
TARGETS = ["1998-05-03", "2004-09-21", "1950-11-07", "2011-01-09"]


@pytest.fixture
def model() -> s.Seq2Seq:
    return ws.demo_model(seed=2)  # untrained; its outputs run to max_steps: many steps


def drawn(fig: Figure) -> np.ndarray:
    return np.ma.getdata(fig.axes[0].images[0].get_array())


def bars(fig: Figure) -> np.ndarray:
    """The heights of the bars shown (a shorter example hides the bars past its end)."""
    return np.array([p.get_height() for p in fig.axes[1].patches if p.get_visible()])


def labels(ticks) -> list[str]:
    return [t.get_text() for t in ticks]


def first_step_weights(model: s.Seq2Seq, text: str) -> np.ndarray:
    """Step 1 written out: query = the decoder's initial state, keys = encoder outputs,
    α_j ∝ exp(w_vᵀ tanh(W_q s_0 + W_k h_j))."""
    src, lens = s.encode_sources([text])
    with torch.no_grad():
        enc, state = model.encoder(src, lens)
        att = model.decoder.attention
        scores = torch.tanh(state[0] @ att.W_q.weight.T + enc[0] @ att.W_k.weight.T) @ att.w_v.weight[0]
    e = np.exp((scores - scores.max()).double().numpy())
    return e / e.sum()


def test_the_image_is_what_predict_returns_for_the_chosen_example(model):
    view = ws.alignment_view(model, TEXTS, TARGETS)
    assert (control(view, "example date").min, control(view, "example date").max) == (1, 4)
    for i in [2, 0, 3, 1]:
        control(view, "example date").value = i + 1
        tokens, weights = s.predict(model, TEXTS[i])
        fig = view.result
        np.testing.assert_allclose(drawn(fig), weights.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(drawn(fig)[0], first_step_weights(model, TEXTS[i]),
                                   rtol=1e-4, atol=1e-6)
        assert labels(fig.axes[0].get_yticklabels()) == [f"{t}: {tok}" for t, tok in
                                                         enumerate(tokens, start=1)]
        assert labels(fig.axes[1].get_xticklabels()) == s.tokenize_source(TEXTS[i])
        assert TEXTS[i] in fig.axes[0].get_title()


def test_the_step_slider_moves_the_outline_and_the_bars(model):
    view = ws.alignment_view(model, TEXTS, TARGETS, example=2)
    tokens, weights = s.predict(model, TEXTS[1])
    fig = view.result
    image = fig.axes[0].images[0]
    slider = control(view, "decoding step t")
    assert (slider.min, slider.max, slider.value) == (1, len(tokens), 1)
    np.testing.assert_allclose(bars(fig), weights[0].numpy(), rtol=1e-6)  # step 1 = row 0
    assert fig.axes[1].get_title() == f"step 1: writes {tokens[0]!r}"
    for step in [5, 3, len(tokens)]:
        before = bars(fig).copy()
        slider.value = step
        assert view.result is fig and fig.axes[0].images[0] is image  # updated in place
        np.testing.assert_allclose(bars(fig), weights[step - 1].numpy(), rtol=1e-6)
        assert fig.axes[0].patches[0].get_y() == step - 1.5  # outlines row step - 1
        assert fig.axes[1].get_title() == f"step {step}: writes {tokens[step - 1]!r}"
        assert not np.allclose(before, bars(fig))
    np.testing.assert_allclose(drawn(fig), weights.numpy(), rtol=1e-6)


def test_the_example_slider_changes_the_image(model):
    view = ws.alignment_view(model, TEXTS)
    first = drawn(view.result).copy()
    control(view, "example date").value = 2
    second = drawn(view.result)
    assert first.shape != second.shape or not np.allclose(first, second)
    control(view, "example date").value = 1
    np.testing.assert_array_equal(drawn(view.result), first)


def test_examples_of_any_length_keep_the_figure_s_artists(model):
    # New bars for a longer example would make the page view record every state whole; the
    # view makes the longest example's bars first and hides those past a shorter one's end.
    texts = ["3 May 1998", "September 21, 2004", "07.11.1950"]
    view = ws.alignment_view(model, texts)
    fig = view.result
    artists = list(fig.axes[1].patches)
    for example in [2, 3, 1, 2]:
        control(view, "example date").value = example
        assert view.result is fig and list(fig.axes[1].patches) == artists
        assert len(bars(fig)) == len(s.tokenize_source(texts[example - 1]))
    scene = view.scene_data()
    assert len(scene["slots"]) > 1  # recorded part by part, not each state whole


def test_margins_fit_the_labels_once_per_example(model):
    # Long labels widen the margins (step "12: …" labels push the heatmap right, "September"
    # the bars up); a step move changes no label, so the axes stay where they are.
    with mpl.rc_context():
        set_theme()  # the notebooks' larger fonts
        view = ws.alignment_view(model, ["September 21, 2004", "3 May 1998"])
        places = lambda: [ax.get_position().bounds for ax in view.result.axes]  # noqa: E731
        first = places()
        assert first[0][0] > ws.MARGINS["left"] and first[1][1] > ws.MARGINS["bottom"]
        control(view, "decoding step t").value = 3
        assert places() == first
        control(view, "example date").value = 2
        assert places() != first
        control(view, "example date").value = 1
        assert places() == first  # the same example, the same layout


def test_weights_rows_sum_to_one_and_step_is_clipped(model):
    tokens, weights = s.predict(model, TEXTS[0])
    fig = ws.draw_alignment(s.tokenize_source(TEXTS[0]), tokens, weights, step=99)
    last = len(tokens)  # the last step, row last - 1
    assert fig.axes[0].patches[0].get_y() == last - 1.5
    np.testing.assert_allclose(drawn(fig).sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(bars(fig), weights[last - 1].numpy(), rtol=1e-6)
    fig = ws.draw_alignment(s.tokenize_source(TEXTS[0]), tokens, weights, step=0, fig=fig)
    np.testing.assert_allclose(bars(fig), weights[0].numpy(), rtol=1e-6)  # clipped to step 1


def test_draw_alignment_redraws_a_foreign_figure_and_checks_shapes():
    src, out = ["3", "May", "1", "9", "9", "8"], list("1998-05-03") + [s.EOS]
    weights = torch.softmax(torch.randn(11, 6), -1)
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    fig = ws.draw_alignment(src, out, weights, 3, fig=foreign)
    assert fig is foreign
    np.testing.assert_allclose(drawn(fig), weights.numpy(), rtol=1e-6)
    other = torch.softmax(torch.randn(11, 6), -1)  # same shape, other weights: redrawn
    np.testing.assert_allclose(drawn(ws.draw_alignment(src, out, other, fig=fig)), other.numpy(),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        ws.draw_alignment(src, out, weights.T)
    with pytest.raises(ValueError, match="step"):
        ws.draw_alignment(src, out, weights, step=2.5)


def test_step_labels_count_from_one():
    assert ws.step_labels(["1", "9", s.EOS]) == ["1: 1", "2: 9", "3: <eos>"]
    assert ws.step_labels([]) == []


def test_titles_say_right_or_wrong():
    assert ws.alignment_title("3 May 1998", list("1998-05-03") + [s.EOS], "1998-05-03") == \
        "'3 May 1998' → 1998-05-03 (right)"
    assert ws.alignment_title("3 May 1998", list("1998-05-30") + [s.EOS], "1998-05-03") == \
        "'3 May 1998' → 1998-05-30 (wrong, target 1998-05-03)"
    assert ws.alignment_title("3 May 1998", list("19")) == "'3 May 1998' → 19"


def test_view_checks_its_inputs(model):
    with pytest.raises(ValueError):
        ws.alignment_view(model, [])
    with pytest.raises(ValueError):
        ws.alignment_view(model, TEXTS, TARGETS[:2])
    with pytest.raises(ValueError):
        ws.alignment_view(model, "3 May 1998")
    for example in (0, 5):
        with pytest.raises(ValueError, match="example"):
            ws.alignment_view(model, TEXTS, example=example)
    with pytest.raises(ValueError, match="step"):
        ws.alignment_view(model, TEXTS, step=0)


SRC, OUT = ["3", "May", "1", "9", "9", "8"], ["1", "9", "9", "8", "-"]


@pytest.mark.parametrize("bad", ["1998", [1, 9], None, 3])
def test_tokens_that_are_not_a_list_of_str_are_refused(bad):
    # a str was split into characters without a word; ints and None were raw errors
    with pytest.raises(ValueError, match="output_tokens must be a list of str"):
        ws.step_labels(bad)
    with pytest.raises(ValueError, match="output_tokens must be a list of str"):
        ws.alignment_title("3 May 1998", bad)
    with pytest.raises(ValueError, match="source_tokens must be a list of str"):
        ws.draw_alignment(bad, OUT, torch.rand(5, 6))


@pytest.mark.parametrize("weights, message", [
    (torch.ones(5, 6, dtype=torch.long), r"weights must be floating-point numbers \(S, T\), got int64"),
    (torch.ones(5, 6, dtype=torch.bool), r"weights must be floating-point numbers \(S, T\), got bool"),
    (torch.ones(5, 6, dtype=torch.complex64), r"weights must be floating-point numbers \(S, T\), got complex64"),
    (torch.ones(5, 6, device="meta"), r"weights must be on a device that holds data, got meta"),
    ("x", r"weights must be floating-point numbers \(S, T\), got str"),
])
def test_weights_that_are_not_real_numbers_are_refused(weights, message):
    # ints, bools and complex numbers (imaginary part dropped) were drawn without a word
    with pytest.raises(ValueError, match=message):
        ws.draw_alignment(SRC, OUT, weights)


def test_no_steps_no_source_tokens_odd_titles_and_figures_are_refused():
    with pytest.raises(ValueError, match=r"weights must have at least one row \(one decoding "
                                         r"step\), got shape \(0, 6\)"):
        ws.draw_alignment(SRC, [], torch.zeros(0, 6))
    with pytest.raises(ValueError, match=r"weights must have at least one column \(one source "
                                         r"token\), got shape \(5, 0\)"):
        ws.draw_alignment([], OUT, torch.zeros(5, 0))  # was drawn: an empty map
    with pytest.raises(ValueError, match="title must be a str, got int"):
        ws.draw_alignment(SRC, OUT, torch.rand(5, 6), title=2)  # was drawn as "2"
    with pytest.raises(ValueError, match="fig must be a matplotlib Figure or None, got str"):
        ws.draw_alignment(SRC, OUT, torch.rand(5, 6), fig="fig")  # was an AttributeError
    with pytest.raises(ValueError, match="text must be a str, got int"):
        ws.alignment_title(2, OUT)
    with pytest.raises(ValueError, match="target must be a str or None, got float"):
        ws.alignment_title("3 May 1998", OUT, 0.5)  # was "(wrong, target 0.5)"


def test_a_view_refuses_what_its_sliders_cannot_show(model):
    longest = max(len(tokens) for tokens, _ in s.predict_many(model, TEXTS))
    with pytest.raises(ValueError, match=rf"step must be an int in \[1, {longest}\] \(the longest "
                                         rf"output\), got {longest + 1}"):
        ws.alignment_view(model, TEXTS, step=longest + 1)  # the slider clipped it silently
    with pytest.raises(ValueError, match=r"max_steps must be an int in \[1, 64\] \(one heatmap row "
                                         r"per step\), got 65"):
        ws.alignment_view(model, TEXTS, max_steps=65)  # decoding time and rows grew without end
    with pytest.raises(ValueError, match="targets must be None or one str per text \\(4\\), got 2"):
        ws.alignment_view(model, TEXTS, TARGETS[:2])
    with pytest.raises(ValueError, match="targets must be a list of str"):
        ws.alignment_view(model, TEXTS, 3)  # was a TypeError (len)
    with pytest.raises(ValueError, match="texts must be a list of str"):
        ws.alignment_view(model, 3)  # was a TypeError (len)
    with pytest.raises(ValueError, match="model must be a Seq2Seq, got str"):
        ws.alignment_view("model", TEXTS)


def test_a_view_takes_numpy_ints(model):
    view = ws.alignment_view(model, TEXTS, example=np.int64(2), step=np.int32(1), max_steps=np.int64(12))
    assert control(view, "example date").value == 2  # np.int64 was refused
    want = s.predict(model, TEXTS[1])[1].numpy()
    np.testing.assert_allclose(drawn(view.result), want, rtol=1e-6)


@pytest.mark.parametrize("seed, message", [
    (0.5, r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 0.5"),  # was used as 0
    (True, r"seed must be an int in \[-2\*\*63, 2\*\*64\), got True"),
    (float("inf"), r"seed must be an int .*got inf"),  # was an OverflowError
])
def test_demo_model_refuses_a_seed_that_is_not_an_int(seed, message):
    with pytest.raises(ValueError, match=message):
        ws.demo_model(seed)


def test_demo_model_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a, b = ws.demo_model(3), ws.demo_model(3)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.decoder.dense.weight, ws.demo_model(4).decoder.dense.weight)


def test_demo_views_show_figures():  # build time: benchmarks/bench_sliders.py
    views = ws.demo_views()
    assert set(views) == {"alignment"}
    view = views["alignment"]
    assert isinstance(view, PageView) and isinstance(view.result, Figure)
    assert shown_png(view).startswith(b"\x89PNG")  # shown in the output area, not only kept
    assert control(view, "example date").max == 6 and control(view, "decoding step t").max >= 2
