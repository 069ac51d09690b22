"""Page views are exact or loud: for views a reader might write, the picture the page draws in
every state equals a direct recording of matplotlib's drawing in that state, or the view is
refused with an error naming the state or the artist (its PNG still shows the figure).

Each case is one that the page got silently wrong before (issue 27): a control that hides an
Axes, zooms the limits under an unchanged line, turns a 3D view, colours one tick label, or
matters only jointly with two others; a slider whose step overshoots its max; a view inside a
container; a figure with hatching.
"""

from __future__ import annotations

import itertools
import json
import sys

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from helpers.widgets import interactive_figure, page
from helpers.widgets.page import SceneMismatch, UnsupportedDrawing, scene_ops, verify_scene


def every_state(view) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(len(c.values)) for c in view._controls)))


def assert_exact_everywhere(view) -> dict:
    """The page's picture equals a direct recording of the whole figure in every state."""
    scene = view.scene_data()
    verify_scene(scene, view._draw, view._controls, every_state(view))
    return scene


def test_a_control_that_hides_an_axes():
    fig = Figure(figsize=(4, 2))
    left, right = fig.subplots(1, 2)
    left.plot([0, 1, 2], [1, 0, 1])
    right.plot([0, 1], [0, 1], color="tab:red")

    def draw(show: bool) -> Figure:
        right.set_visible(show)
        return fig

    scene = assert_exact_everywhere(interactive_figure(draw, show=widgets.Checkbox(value=True)))
    hidden, shown = scene_ops(scene, [0]), scene_ops(scene, [1])
    assert len(hidden) < len(shown)  # the hidden Axes draws nothing at all
    assert not any(op[0] == "p" and op[3] == "#d62728ff" for op in hidden)


@pytest.mark.parametrize("autoscale", [False, True], ids=["set_xlim", "relim+autoscale"])
def test_limits_that_move_an_unchanged_line(autoscale):
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.axhline(0.5, color="tab:green")  # never touched by draw: only its axes' limits move
    (line,) = ax.plot([0, 1], [0, 1])

    def draw(zoom: int) -> Figure:
        if autoscale:
            line.set_ydata([0, zoom])
            ax.relim()
            ax.autoscale_view()
        else:
            ax.set_xlim(0, zoom)
            ax.set_ylim(0, zoom)
        return fig

    view = interactive_figure(draw, zoom=widgets.IntSlider(value=1, min=1, max=4))
    scene = assert_exact_everywhere(view)
    green = [[op[1] for op in scene_ops(scene, [i]) if op[0] == "p" and op[3] == "#2ca02cff"]
             for i in range(4)]
    assert len(set(map(tuple, green))) == 4  # the line is at another height in every state


def test_a_3d_view_that_turns():
    fig = Figure(figsize=(3, 3))
    ax = fig.add_subplot(projection="3d")
    t = np.linspace(0, 4 * np.pi, 50)
    ax.plot(np.cos(t), np.sin(t), t)

    def draw(azim: int) -> Figure:
        ax.view_init(elev=20, azim=azim)
        return fig

    view = interactive_figure(draw, azim=widgets.IntSlider(value=0, min=0, max=90, step=30))
    scene = assert_exact_everywhere(view)
    assert scene_ops(scene, [0]) != scene_ops(scene, [3])


def test_the_colour_of_one_tick_label():
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0, 1, 0])
    ax.set_xticks([0, 1, 2])

    def draw(which: int) -> Figure:  # the same ticks and limits; one label red
        for i, label in enumerate(ax.get_xticklabels()):
            label.set_color("tab:red" if i == which else "black")
        return fig

    view = interactive_figure(draw, which=widgets.IntSlider(value=0, min=0, max=2))
    scene = assert_exact_everywhere(view)
    red = [[op[3] for op in scene_ops(scene, [i]) if op[0] == "t" and op[5] == "#d62728ff"]
           for i in range(3)]
    assert red == [["0"], ["1"], ["2"]]


def three_switch_view(values: int = 2):
    """A title that changes only when three controls are all at their last value."""
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    last = values - 1

    def draw(a, b, c) -> Figure:
        ax.set_title("all three on" if (a, b, c) == (last, last, last) else "not yet")
        return fig

    if values == 2:
        controls = {name: widgets.Checkbox(value=False, description=name) for name in "abc"}
        return interactive_figure(lambda a, b, c: draw(int(a), int(b), int(c)), **controls)
    controls = {name: widgets.IntSlider(value=0, min=0, max=last, description=name)
                for name in "abc"}
    return interactive_figure(draw, **controls)


@pytest.mark.parametrize("values", [2, 5], ids=["3 checkboxes", "3 sliders of 5 values"])
def test_a_part_that_depends_on_three_controls_jointly(values):
    # 2 x 2 x 2 states: every state is probed. 5 x 5 x 5 = 125 states: more than are probed
    # (pairs only), so the checked sample finds the state and every state is recorded whole.
    view = three_switch_view(values)
    scene = assert_exact_everywhere(view)
    last = [values - 1] * 3
    assert any(op[0] == "t" and op[3] == "all three on" for op in scene_ops(scene, last))


def test_a_mismatch_that_cannot_be_recorded_whole_is_refused_naming_the_state(monkeypatch):
    monkeypatch.setattr(page, "MAX_STATES", 100)  # 125 states would be needed
    view = three_switch_view(5)
    with pytest.raises(SceneMismatch, match=r"in the state a = 4, b = 4, c = 4: op \d+") as error:
        view.scene_data()
    assert "more than 100 states" in str(error.value)


def test_verify_scene_names_the_state_and_the_op():
    view = three_switch_view(2)
    scene = view.scene_data()
    wrong = json.loads(json.dumps(scene))
    for ops in wrong["states"]:  # every recording of the title says "not yet"
        for op in ops:
            if op[0] == "t" and op[3] == "all three on":
                op[3] = "not yet"
    verify_scene(wrong, view._draw, view._controls, [(0, 0, 0), (1, 1, 0)])  # still right
    with pytest.raises(SceneMismatch, match=r"a = on, b = on, c = on: op \d+ of \d+ is .*not "
                                            r"yet.* in the page, .*all three on.* in matplotlib"):
        verify_scene(wrong, view._draw, view._controls, every_state(view))


@pytest.mark.parametrize("make, values", [
    (lambda: widgets.FloatSlider(value=0.35, min=0, max=1, step=0.35), (0.0, 0.35, 0.7, 1.0)),
    (lambda: widgets.IntSlider(value=3, min=0, max=10, step=3), (0, 3, 6, 9, 10)),
    (lambda: widgets.FloatLogSlider(value=1, base=10, min=-1, max=0.8, step=0.5),
     (0.1, 10 ** -0.5, 1.0, 10 ** 0.5, 10 ** 0.8)),
])
def test_slider_values_never_pass_max_and_reach_it(make, values):
    slider = make()
    seen = []

    def draw(x) -> Figure:
        top = slider.max if not isinstance(slider, widgets.FloatLogSlider) else 10 ** slider.max
        if x > top:
            raise ValueError(f"{x} is past the slider's max")
        seen.append(x)
        fig = Figure(figsize=(2, 1))
        fig.text(0.1, 0.5, f"x = {x:.3f}")
        return fig

    view = interactive_figure(draw, x=slider)
    assert view._controls[0].values == pytest.approx(values)
    assert max(view._controls[0].values) == pytest.approx(values[-1])
    scene = view.scene_data()  # every value drawn: none raised
    assert len(scene["controls"][0]["values"]) == len(values)


def test_a_figure_the_page_cannot_replay_is_refused_naming_the_artist():
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()

    def draw(n: int) -> Figure:
        ax.clear()
        ax.bar(range(n), range(1, n + 1), hatch="//", label="hatched bars")
        return fig

    view = interactive_figure(draw, n=widgets.IntSlider(value=2, min=1, max=3))
    with pytest.warns(UserWarning, match=r"Rectangle.* hatch.*PNG"):
        scene = view.scene_data()
    assert "hatch" in scene["error"] and "Rectangle" in scene["error"]
    assert scene["png"] and scene["states"] == [] and scene["frame"] == []
    data, _ = view._repr_mimebundle_()  # the output still carries the PNG and the text
    assert data["image/png"] and data["text/plain"] == "[: n = 2]"
    with pytest.raises(UnsupportedDrawing, match="hatch"):  # build_scene itself refuses
        page.build_scene(view._draw, view._controls, view.index)


NOTEBOOK_CELL = """
import ipywidgets as widgets
from matplotlib.figure import Figure
from helpers.widgets import interactive_figure

fig = Figure(figsize=(2, 1))

def draw(n):
    fig.clear()
    fig.text(0.1, 0.5, f"n = {n}")
    return fig

view = interactive_figure(draw, n=widgets.IntSlider(value=1, min=0, max=3))
widgets.VBox([widgets.Label("inside a container"), view])
"""


def test_a_view_inside_a_container_is_recorded_in_the_saved_widget_state(tmp_path):
    # Executed as `make notebooks` does (nbclient, no browser): the view is displayed only as a
    # child of a VBox, so its own display hook never runs; its scene must still be saved.
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from pathlib import Path

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(NOTEBOOK_CELL)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    root = Path(__file__).resolve().parents[1]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(root)}},
                                     store_widget_state=True)
    client.execute()
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    views = [m for m in state.values() if m["model_name"] == "AnyModel"
             and "scene" in m["state"]]
    assert len(views) == 1, [m["model_name"] for m in state.values()]
    scene = page.scene_json(views[0]["state"]["scene"])
    assert [c["values"] for c in scene["controls"]] == [["0", "1", "2", "3"]]
    texts = {op[3] for ops in scene["states"] for op in ops if op[0] == "t"}
    assert texts == {"n = 0", "n = 1", "n = 2", "n = 3"}


def test_titles_are_described_in_every_state_an_inset_axes_too():
    # The page's description ("d" ops) follows the titles as matplotlib draws them, including
    # a title inside an inset Axes (recorded as one part with the Axes around it).
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    inset = ax.inset_axes([0.55, 0.55, 0.4, 0.4])

    def draw(n: int) -> Figure:
        ax.set_title(f"main {n}")
        inset.set_title(f"inset {n}")
        return fig

    view = interactive_figure(draw, n=widgets.IntSlider(value=0, min=0, max=2))
    scene = assert_exact_everywhere(view)
    for i in range(3):
        assert sorted(op[1] for op in scene_ops(scene, [i]) if op[0] == "d") == [
            f"inset {i}", f"main {i}"]


# ------------------------------------------------------------------ the economies of recording
# Recording skips work where nothing it reads changed (a title's place, an axis's ticks, text
# metrics). Each case below must come out exact in every state without the whole-figure
# fallback: the economy itself is exact, not rescued by the check.

@pytest.fixture
def no_fallback(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the scene was recorded whole: the part-by-part recording "
                             "differed from matplotlib's drawing")

    monkeypatch.setattr(page, "_whole_scene", refuse)


def test_a_title_above_top_tick_labels_that_change(no_fallback):
    # The title sits above the top tick labels, which grow with n; the view's draw calls
    # set_title (which puts the title back at y = 1) in every state, also when only the
    # colour of the line changes: the title must still be drawn where matplotlib places it.
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.tick_params(top=True, labeltop=True, bottom=False, labelbottom=False)
    (line,) = ax.plot([0, 5], [0, 1])

    def draw(n: int, colour: str) -> Figure:
        ax.set_xticks(range(n), ["w" * (2 * k + 1) for k in range(n)], rotation=60)
        ax.set_title(f"{n} labels")
        line.set_color(colour)
        return fig

    view = interactive_figure(draw, n=widgets.IntSlider(value=2, min=1, max=5),
                              colour=widgets.Dropdown(options=["tab:blue", "tab:red"]))
    scene = assert_exact_everywhere(view)
    title_y = {op[2] for i in range(5)
               for op in scene_ops(scene, [i, 0]) if op[0] == "t" and op[3].endswith("labels")}
    assert len(title_y) > 2  # the title moves up as the labels grow


def test_a_y_offset_text_under_a_title(no_fallback):
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    (line,) = ax.plot([0, 1, 2], [1.0, 3.0, 2.0])

    def draw(exponent: int, width: float) -> Figure:
        line.set_ydata(np.array([1.0, 3.0, 2.0]) * 10.0 ** exponent + 10.0 ** exponent)
        line.set_linewidth(width)
        ax.relim()
        ax.autoscale_view()
        ax.set_title("scaled")
        return fig

    view = interactive_figure(draw, exponent=widgets.SelectionSlider(options=[0, 6, 9]),
                              width=widgets.FloatSlider(value=1.0, min=1.0, max=3.0, step=1.0))
    scene = assert_exact_everywhere(view)
    texts = {op[3] for op in scene_ops(scene, [2, 0]) if op[0] == "t"}
    assert any("e9" in t or "10" in t for t in texts) or any(
        op[0] == "p" for op in scene_ops(scene, [2, 0]))  # the offset text is drawn


def test_locator_settings_changed_in_place(no_fallback):
    # locator_params changes the locator in place and marks no tick changed: fewer or more
    # ticks under the same limits.
    fig = Figure(figsize=(4, 2))
    ax = fig.subplots()
    ax.plot([0, 100], [0, 1])
    ax.set_xlim(0, 100)

    def draw(nbins: int) -> Figure:
        ax.locator_params(axis="x", nbins=nbins)
        return fig

    view = interactive_figure(draw, nbins=widgets.SelectionSlider(options=[2, 10, 4]))
    scene = assert_exact_everywhere(view)
    counts = [sum(op[0] == "t" for op in scene_ops(scene, [i])) for i in range(3)]
    assert len(set(counts)) == 3


def test_text_metrics_follow_the_rcparams_that_shape_them():
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    from helpers.widgets._record import Recorder

    fig = Figure(figsize=(2, 1), dpi=100)
    prop = FontProperties(size=11)
    seen = []
    for hinting, family in [("default", "DejaVu Sans"), ("no_hinting", "DejaVu Sans"),
                            ("default", "DejaVu Serif")]:
        with matplotlib.rc_context({"text.hinting": hinting, "font.sans-serif": [family]}):
            got = Recorder(fig).get_text_width_height_descent("Wavy text", prop, False)
            want = RendererAgg(10, 10, 100).get_text_width_height_descent("Wavy text", prop,
                                                                          False)
            assert got == pytest.approx(want, abs=0)
            seen.append(got)
    assert len(set(seen)) > 1  # the settings do change the metrics
