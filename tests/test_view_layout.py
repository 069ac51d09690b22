"""Every view's text stays inside its figure, and every control says what it is.

For each view the notebooks show (``VIEWS`` of ``test_page_scenes.py``), in its first state
and with each control at its first and at its last value (one control at a time), the figure
is drawn on the Agg canvas and each text drawn (titles, axis and tick labels, legend texts,
colour-bar labels, annotations) must lie inside the figure: a label cut off in the PNG is cut
off in the page too (the page replays the same drawing in the figure's pixels). Under the
series' theme (``set_theme``: seaborn's "notebook" context, larger fonts and ticks than
matplotlib's), as every notebook draws them, and under matplotlib's defaults.
"""

from __future__ import annotations

import importlib
import re
from contextlib import contextmanager

import ipywidgets as widgets
import matplotlib as mpl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from matplotlib.text import Text

from helpers.plotting import set_theme
from tests.test_page_scenes import VIEWS

TOLERANCE_PX = 1.0
THEMES = ["series", "matplotlib"]


@contextmanager
def theme(name: str):
    """rcParams as a notebook has them after ``set_theme()`` ("series"), or matplotlib's own
    ("matplotlib"); restored afterwards. Views are built and drawn inside it (tick labels take
    their font when they are made, at a draw)."""
    with mpl.rc_context():
        mpl.rcdefaults()
        if name == "series":
            set_theme()
        yield


@pytest.fixture(scope="module")
def views():
    cache = {}

    def get(module: str, key: str, theme_name: str = "series"):
        if (module, theme_name) not in cache:
            with theme(theme_name):
                built = importlib.import_module(f"helpers.widgets.{module}").demo_views()
            cache[module, theme_name] = built
        return cache[module, theme_name][key]

    return get


def _views():
    return [pytest.param(m, k, id=f"{m}.{k}") for m, keys in VIEWS.items() for k in keys]


def extreme_states(view) -> list[tuple[int, ...]]:
    """The controls' first state, then each control at its first and at its last value."""
    first = tuple(view._indices())
    states = [first]
    for i, control in enumerate(view._controls):
        for j in (0, len(control.values) - 1):
            state = first[:i] + (j,) + first[i + 1:]
            if state not in states:
                states.append(state)
    return states


def drawn_texts(fig) -> list[Text]:
    """Draw ``fig`` on the Agg canvas; return the visible, non-empty texts it drew (a tick label
    of a tick outside the view limits, or an annotation whose point is off its axes, is not
    drawn and not returned)."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    drawn = []
    original = Text.draw

    def record(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return original(self, renderer)

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = original
    every = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return [t for t in every if any(t is d for d in drawn)]


def texts_outside(fig) -> list[str]:
    """'text' (x0, y0, x1, y1) of each drawn text, and of each legend's frame, reaching past
    the figure by more than 1 px."""
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    legends = [(f"legend frame of {[t.get_text() for t in leg.get_texts()]}", leg)
               for leg in fig.findobj(Legend) if leg.get_visible()]
    out = []
    for name, artist in [(repr(t.get_text()), t) for t in texts] + legends:
        box = artist.get_window_extent(renderer)
        if (box.x0 < -TOLERANCE_PX or box.y0 < -TOLERANCE_PX
                or box.x1 > width + TOLERANCE_PX or box.y1 > height + TOLERANCE_PX):
            out.append(f"{name} at ({box.x0:.0f}, {box.y0:.0f}, {box.x1:.0f}, "
                       f"{box.y1:.0f}) in a {width:.0f}×{height:.0f} figure")
    return out


@pytest.mark.parametrize("theme_name", THEMES)
@pytest.mark.parametrize("module, key", _views())
def test_every_text_lies_inside_the_figure_in_the_extreme_states(module, key, theme_name, views):
    view = views(module, key, theme_name)
    failures = []
    with theme(theme_name):
        try:
            for state in extreme_states(view):
                values = {c.name: c.values[i] for c, i in zip(view._controls, state)}
                outside = texts_outside(view._draw(**values))
                where = ", ".join(f"{c.label} = {c.labels[i]}"
                                  for c, i in zip(view._controls, state))
                failures += [f"{module}.{key} ({theme_name} theme) [{where}]: {t}"
                             for t in outside]
        finally:
            view.update()  # the figure back in the controls' state
    assert not failures, "text outside the figure:\n" + "\n".join(failures)


def test_long_step_labels_and_source_tokens_stay_inside_the_alignment_figure():
    # Notebook 05's trained model writes 11 steps ("11: <eos>"), wider than demo_views' labels:
    # its y label ran out of the figure. Here an untrained model whose outputs run to 12 steps,
    # on dates with long tokens ("September") and a title wider than the heatmap.
    from helpers.widgets import seq2seq

    texts = ["September 21, 2004", "3 May 1998", "07.11.1950", "December 30, 2099"]
    targets = ["2004-09-21", "1998-05-03", "1950-11-07", "2099-12-30"]
    failures = []
    with theme("series"):
        view = seq2seq.alignment_view(seq2seq.demo_model(seed=2), texts, targets)
        assert view._controls[1].values[-1] >= 10  # two-digit step labels
        for state in extreme_states(view):
            values = {c.name: c.values[i] for c, i in zip(view._controls, state)}
            where = ", ".join(f"{c.label} = {c.labels[i]}" for c, i in zip(view._controls, state))
            failures += [f"[{where}]: {t}" for t in texts_outside(view._draw(**values))]
    assert not failures, "text outside the figure:\n" + "\n".join(failures)


def test_the_layout_check_sees_a_label_outside_the_figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_axes((0.0, 0.2, 1.0, 0.7))  # no room left of the axes for its label
    ax.set_ylabel("a y label with no room")
    ax.legend(handles=ax.plot([0, 1], label="a legend entry"), loc="upper left",
              bbox_to_anchor=(0.9, 1.0))
    outside = texts_outside(fig)
    assert any("a y label with no room" in t for t in outside)
    assert any("'a legend entry'" in t for t in outside)
    assert any("legend frame of ['a legend entry']" in t for t in outside)
    assert not any("'0.0'" in t for t in outside)  # the x tick labels fit


WORD = re.compile(r"[A-Za-z]{3,}")
DEFAULT_WIDTH_CHARS = 12  # about what ipywidgets' default description width shows


@pytest.mark.parametrize("module, key", _views())
def test_every_control_says_in_words_what_it_is(module, key, views):
    # A bare symbol ("d", "τ", "b0 q0") says little, also to a screen reader; a long
    # description must have the room to show (else ipywidgets truncates it).
    view = views(module, key)
    for name, widget in view._widgets.items():
        label = widget.description
        assert WORD.search(label), f"{module}.{key}: control {name!r} is labelled {label!r}"
        if len(label) > DEFAULT_WIDTH_CHARS and not isinstance(widget, widgets.Checkbox):
            width = widget.style.description_width
            assert width == "initial", (f"{module}.{key}: {label!r} is longer than the default "
                                        f"description width; style is {width!r}")
