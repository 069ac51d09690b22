"""show_heatmaps: what it draws is what it was given, masked cells distinct, any device."""

from __future__ import annotations

import functools
from ast import literal_eval

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from matplotlib.colors import to_rgba

from helpers import set_theme, show_heatmaps, to_numpy
from helpers.plotting import MASKED_COLOR, NAN_COLOR
from tests.test_assert_close import fresh


@pytest.mark.parametrize("shape, panels", [((4, 6), 1), ((3, 4, 6), 3), ((2, 3, 4, 6), 6)])
def test_ranks_and_panel_data(device, shape, panels):
    data = torch.rand(*shape, device=device)
    fig = show_heatmaps(data)
    assert isinstance(fig, Figure)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == panels
    flat = data.reshape(-1, 4, 6).cpu().numpy()
    for image, expected in zip(images, flat):
        np.testing.assert_allclose(image.get_array(), expected, rtol=1e-6)
    assert len(fig.axes) == panels + 1  # one shared colorbar


def test_masked_cells_are_masked_and_drawn_grey():
    w = torch.rand(3, 5)
    mask = torch.arange(5)[None, :] < torch.tensor([[1], [3], [5]])
    fig = show_heatmaps(w, mask=mask)
    arr = fig.axes[0].images[0].get_array()
    assert np.array_equal(np.ma.getmaskarray(arr), ~mask.numpy())
    image = fig.axes[0].images[0]
    grey = image.cmap.get_bad()
    assert tuple(np.round(grey[:3], 2)) == (0.78, 0.78, 0.78)
    assert image.cmap(image.norm(0.0))[:3] != tuple(grey[:3])  # a zero weight is not grey


def test_bfloat16_and_titles_and_tick_labels():
    fig = show_heatmaps(torch.eye(3, dtype=torch.bfloat16)[None].repeat(2, 1, 1), titles=["a", "b"],
                        xticklabels=["x", "y", "z"], yticklabels=["p", "q", "r"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["a", "b"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["x", "y", "z"]


def test_redraw_into_same_figure():
    fig = show_heatmaps(torch.rand(2, 2))
    again = show_heatmaps(torch.rand(1, 3, 2, 2), fig=fig)
    assert again is fig and len([a for a in fig.axes if a.images]) == 3


def test_input_not_modified():
    w = torch.rand(2, 3)
    before = w.clone()
    show_heatmaps(w, mask=w > 0.5)
    assert torch.equal(w, before)


@pytest.mark.parametrize("kwargs, match", [
    (dict(matrices=torch.rand(5)), r"2-D \(Q, K\), 3-D \(C, Q, K\) or 4-D \(R, C, Q, K\), got shape \(5,\)"),
    (dict(matrices=torch.rand(2, 3, 3), titles=["only one", "two", "three"]), r"titles must have 2 entries \(one per column\), got 3"),
    (dict(matrices=torch.rand(3, 4), mask=torch.ones(2, 4, dtype=torch.bool)), r"mask must broadcast to shape \(1, 1, 3, 4\)"),
    (dict(matrices=torch.rand(3, 4), xticklabels=["a"]), r"xticklabels must have 4 entries, got 1"),
    (dict(matrices=torch.rand(3, 4), cmap="nope"), r"cmap must be a matplotlib colormap name such as 'Reds', got 'nope'"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        show_heatmaps(**kwargs)


def test_nan_cells_are_magenta_not_grey_and_the_legend_says_so():
    w = torch.tensor([[0.5, float("nan"), 0.5], [0.2, 0.3, 0.5]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    fig = show_heatmaps(w, mask=mask)
    ax = fig.axes[0]
    base, layer = ax.images  # the values, then the NaN layer on top
    assert np.array_equal(np.ma.getmaskarray(base.get_array()), [[0, 1, 0], [0, 0, 1]])
    rgba = np.asarray(layer.get_array())
    expected = np.zeros((2, 3), dtype=bool)
    expected[0, 1] = True  # only the NaN cell is coloured; the masked cell stays see-through
    assert np.array_equal(rgba[..., 3] > 0, expected)
    assert tuple(rgba[0, 1, :3]) == tuple(to_rgba(NAN_COLOR)[:3]) != tuple(to_rgba(MASKED_COLOR)[:3])
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert labels == ["NaN", "masked"]


def test_no_nan_no_legend_and_no_extra_layer():
    fig = show_heatmaps(torch.rand(2, 3), mask=torch.tensor([[True, False, True]]))
    assert len(fig.axes[0].images) == 1 and not fig.legends


def test_a_masked_nan_is_just_masked():
    w = torch.tensor([[0.5, float("nan")]])
    fig = show_heatmaps(w, mask=torch.tensor([[True, False]]))
    assert len(fig.axes[0].images) == 1 and not fig.legends


def test_annot_writes_each_shown_value_in_its_cell():
    w = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    fig = show_heatmaps(w, mask=torch.tensor([[True, True], [True, False]]), annot=True)
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
             for t in fig.axes[0].texts}
    assert texts == {(0, 0): "0.25", (0, 1): "0.75", (1, 0): "1.00"}  # the masked cell: none
    dark, light = (next(t for t in fig.axes[0].texts if t.get_text() == v) for v in ("1.00", "0.25"))
    assert dark.get_color() == "white" and light.get_color() == "black"
    fig = show_heatmaps(w, annot=".1f")
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.0", "0.2", "0.8", "1.0"]


def test_to_numpy_is_a_copy(device):
    for x in (torch.arange(4.0, device=device), torch.ones(3, dtype=torch.bfloat16, device=device)):
        before = x.clone()
        arr = to_numpy(x)
        arr[0] = 42.0
        assert torch.equal(x, before)
    array = np.zeros(3)
    to_numpy(array)[0] = 1.0
    assert array[0] == 0.0


def test_set_theme_gives_one_look():
    import matplotlib as mpl

    with mpl.rc_context():
        set_theme()
        assert mpl.rcParams["axes.grid"] is False  # no grid lines over heatmap cells
        assert mpl.rcParams["figure.dpi"] == 100
        assert mpl.rcParams["xtick.major.size"] > 0  # the "ticks" style


# set_theme applies seaborn's theme, frozen in helpers/_theme_rc.py, without importing seaborn.
# Each case runs in fresh interpreters: the same steps, then helpers' or seaborn's set_theme.
THEMES = {
    "helpers": "helpers.set_theme()",
    "seaborn": """import seaborn; seaborn.set_theme(context="notebook", style="ticks", palette="deep",
                  rc={"figure.dpi": 100, "savefig.dpi": 100, "axes.titlesize": "medium"})""",
}
BEFORE = {
    "fresh": "",
    "user-changed-rc": """mpl.rcParams.update({"axes.grid": True, "font.size": 20, "image.cmap": "viridis",
                          "figure.dpi": 72, "xtick.bottom": False, "axes.titleweight": "bold"})
mpl.rcParams["axes.prop_cycle"] = mpl.cycler(color=["red", "blue"])
to_rgba("b")  # the colour cache now holds matplotlib's own blue""",
    "seaborn-imported-first": "import seaborn",  # as notebooks that draw with seaborn do
}
PROBE = """
import json, sys
import matplotlib as mpl
mpl.use("Agg")
from cycler import Cycler
from matplotlib.colors import to_rgba
import helpers
{before}
{theme}
modules = sorted(m for m in ("seaborn", "pandas") if m in sys.modules)
rc = {{k: repr(v.by_key()["color"] if isinstance(v, Cycler) else v) for k, v in mpl.rcParams.items()}}
codes = {{code: to_rgba(code) for code in "bgrmyck"}}
cmap = mpl.colormaps[mpl.rcParams["image.cmap"]](range(256)).tolist()
print(json.dumps(dict(rc=rc, codes=codes, cmap=cmap, modules=modules)))
"""


@functools.cache
def theme_state(theme: str, before: str) -> dict:
    """matplotlib's rcParams (reprs), colour codes, image.cmap's colours and which of seaborn and
    pandas are imported, after ``BEFORE[before]`` then ``THEMES[theme]`` in a fresh Python."""
    return fresh(PROBE.format(before=BEFORE[before], theme=THEMES[theme]))


@pytest.mark.parametrize("before", BEFORE)
def test_set_theme_leaves_matplotlib_as_seaborn_set_theme_does(before):
    ours, seaborns = theme_state("helpers", before), theme_state("seaborn", before)
    differ = {k: (v, seaborns["rc"].get(k)) for k, v in ours["rc"].items() if v != seaborns["rc"].get(k)}
    assert differ == {} and ours["rc"].keys() == seaborns["rc"].keys()
    assert ours["codes"] == seaborns["codes"]
    assert ours["cmap"] == seaborns["cmap"]  # "rocket", registered by set_theme without seaborn


def test_set_theme_imports_neither_seaborn_nor_pandas():
    assert theme_state("helpers", "fresh")["modules"] == []
    assert theme_state("seaborn", "fresh")["modules"] == ["pandas", "seaborn"]  # what it avoids


def test_set_theme_resets_what_the_user_changed_as_seaborn_does():
    rc = theme_state("helpers", "user-changed-rc")["rc"]
    assert (rc["axes.grid"], rc["font.size"], rc["image.cmap"], rc["figure.dpi"], rc["xtick.bottom"]) \
        == ("False", "12.0", "'rocket'", "100.0", "True")
    cycle = literal_eval(rc["axes.prop_cycle"])
    assert len(cycle) == 10 and cycle[0] == to_rgba("#4C72B0")[:3]  # the "deep" palette
    assert rc["axes.titleweight"] == "'bold'"  # not part of the theme: left as the user set it
    codes = theme_state("helpers", "user-changed-rc")["codes"]
    assert codes["b"] == list(to_rgba("#4C72B0"))  # not the cached matplotlib blue


# ----------------------------------------------------------------- defects pinned (fuzz)
@pytest.mark.parametrize("x, match", [
    ("x", r"^x must be a tensor, an array or a \(nested\) list of numbers, got str"),
    (None, r"^x must be a tensor, an array or a \(nested\) list of numbers, got NoneType"),
    ([[1.0, 2.0], [3.0]], r"^x must be .* of one shape, got a ragged list"),
    (torch.ones(2, device="meta"), r"^x must hold numbers \(a tensor on a real device\), got a 'meta' tensor"),
])
def test_to_numpy_refuses_what_is_not_numbers(x, match):
    """A str or None used to come back as a 0-d array, a ragged list as NumPy's vague error,
    a 'meta' tensor as a raw NotImplementedError."""
    with pytest.raises(ValueError, match=match):
        to_numpy(x)


@pytest.mark.parametrize("kwargs, match", [
    (dict(titles=3), r"^titles must be None or a list of str"),
    (dict(titles="ab"), r"^titles must be None or a list of str"),
    (dict(xticklabels=5), r"^xticklabels must be None or a list of str"),
    (dict(xlabel=None), r"^xlabel must be a str, got None"),
    (dict(figsize=(0, 3)), r"^figsize must be None or \(width, height\) .* got \(0, 3\)"),
    (dict(figsize=4), r"^figsize must be None or \(width, height\)"),
    (dict(cmap=["Reds"]), r"^cmap must be a matplotlib colormap name .* got \['Reds'\]"),
    (dict(vmin=float("nan")), r"^vmin must be None or a finite number, got nan"),
    (dict(vmax="2"), r"^vmax must be None or a finite number, got '2'"),
    (dict(vmin=0.8, vmax=0.2), r"^vmax must be above vmin=0.8, got 0.2"),
    (dict(colorbar="no"), r"^colorbar must be True or False, got 'no'"),
    (dict(fig="fig"), r"^fig must be None or a matplotlib Figure .* got str"),
    (dict(annot="d"), r"^annot must be True, False or a format such as '.1f', got 'd'"),
    (dict(annot=None), r"^annot must be True, False or a format"),
    (dict(mask=torch.ones(3, 4, dtype=torch.int64)), r"^mask must be boolean \(True = takes part\), got dtype int64"),
    (dict(matrices=torch.ones(3, 4, dtype=torch.complex64)), r"^matrices must hold real numbers, got dtype complex64"),
    (dict(matrices=torch.ones(3, 4, device="meta")), r"^matrices must hold numbers"),
])
def test_show_heatmaps_checks_every_option(kwargs, match):
    """Each used to be a raw TypeError / NotImplementedError deep in matplotlib, or silent:
    a NaN vmin, vmin above vmax, a truthy colorbar, an integer mask cast to bool, complex data
    cast to its real part."""
    with pytest.raises(ValueError, match=match):
        show_heatmaps(**{"matrices": torch.rand(3, 4), **kwargs})


def test_show_heatmaps_huge_vmin_still_spans_a_range():
    """With vmin = 1e30 and vmax automatic, vmax used to become vmin + 1 == vmin (float)."""
    fig = show_heatmaps(torch.rand(3, 4), vmin=1e30)
    norm = fig.axes[0].images[0].norm
    assert norm.vmin == 1e30 and norm.vmax > norm.vmin
    fig = show_heatmaps(torch.rand(3, 4) + 5, vmin=None, vmax=0.5)  # the given end stays
    norm = fig.axes[0].images[0].norm
    assert norm.vmax == 0.5 and norm.vmin < 0.5


def test_show_heatmaps_draws_into_a_subfigure():
    """Widgets pass a SubFigure as ``fig``; a figsize cannot resize one."""
    sub = Figure().subfigures(1, 2)[0]
    data = torch.rand(2, 3, 4)
    assert show_heatmaps(data, fig=sub) is sub
    assert [np.asarray(ax.images[0].get_array()).tolist() for ax in sub.axes if ax.images] == data.tolist()
    with pytest.raises(ValueError, match=r"^figsize must be None when fig is a SubFigure"):
        show_heatmaps(data, fig=sub, figsize=(4, 3))


# In IPython with the inline backend, set_theme has a figure with constrained layout shown as
# drawn (one layout pass) and every other figure cropped as IPython crops it (a second pass to
# measure it). A fresh interpreter: a shell of its own, with the inline backend's formatters.
INLINE_PROBE = """
import base64, io, json
import matplotlib as mpl
mpl.use("Agg")
import numpy as np
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.pylabtools import print_figure
from matplotlib.figure import Figure
from matplotlib_inline.backend_inline import configure_inline_support
from PIL import Image
import helpers

shell = InteractiveShell.instance()
configure_inline_support(shell, "module://matplotlib_inline.backend_inline")  # %matplotlib inline
{setup}
png = shell.display_formatter.formatters["image/png"]

def stored(fig):  # what the notebook stores: the formatter's base64 PNG, and its metadata
    out = png(fig)
    return out if isinstance(out, tuple) else (out, {{}})

def shown(fig):  # the stored PNG, decoded
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(stored(fig)[0]))))

def drawn(fig, k):  # the figure's own canvas, drawn once at k times its dpi
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=k * fig.dpi)
    return np.asarray(Image.open(buf))

def cropped(fig, fmt):  # IPython's own inline PNG ("png", or "retina": twice the dpi)
    return np.asarray(Image.open(io.BytesIO(
        print_figure(fig, fmt, bbox_inches="tight"))))

def figure(layout):
    fig = Figure(figsize=(4, 2.5), dpi=100, layout=layout)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(xlabel="below the axes", ylabel="left of them", title="above")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside the axes, on the right
    return fig

laid_out, plain = figure("constrained"), figure(None)
print(json.dumps(dict(
    laid_out_shape=shown(laid_out).shape[:2],
    laid_out_size=stored(laid_out)[1],
    laid_out_as_drawn=bool(np.array_equal(shown(laid_out), drawn(laid_out, 1))),
    laid_out_as_drawn_2x=bool(np.array_equal(shown(laid_out), drawn(laid_out, 2))),
    plain_shape=shown(plain).shape[:2],
    plain_size=stored(plain)[1],
    plain_as_ipython=bool(np.array_equal(shown(plain), cropped(plain, "png"))),
    plain_as_ipython_2x=bool(np.array_equal(shown(plain), cropped(plain, "retina"))),
    wrapped_once=getattr(getattr(png.lookup_by_type(Figure), "__wrapped__", None), "__wrapped__", None) is None,
    ours=hasattr(png.lookup_by_type(Figure), "__wrapped__"),
)))
"""


def inline_state(setup: str) -> dict:
    return fresh(INLINE_PROBE.format(setup=setup))


def test_set_theme_shows_a_laid_out_figure_as_drawn_and_crops_the_others_as_ipython_does():
    # Both at twice their pixels (IPython's "retina"), shown at their 1x size.
    state = inline_state("helpers.set_theme()\nhelpers.set_theme()  # twice: wrapped once")
    assert state["ours"] and state["wrapped_once"]
    # 4 × 2.5 inches at 200 dpi: the whole canvas, shown 400 × 250 CSS px
    assert state["laid_out_shape"] == [500, 800]
    assert state["laid_out_size"] == {"width": 400, "height": 250}
    assert state["laid_out_as_drawn_2x"]  # pixel for pixel the canvas at 2x, drawn once
    # The plain figure's legend hangs outside its canvas: cropped to its tight box it is wider
    # than the canvas, exactly the PNG IPython itself makes at 2x.
    assert state["plain_as_ipython_2x"] and state["plain_shape"][1] > 800
    h, w = state["plain_shape"]
    assert state["plain_size"] == {"width": w // 2, "height": h // 2}


def test_without_set_theme_ipython_crops_every_figure():
    state = inline_state("")  # what the test above changes: IPython's own formatter
    assert not state["ours"] and state["plain_size"] == {}  # 1x, no size metadata
    assert not state["laid_out_as_drawn"] and state["laid_out_shape"] != [250, 400]
    assert state["plain_as_ipython"]


def test_set_theme_outside_ipython_does_not_import_it():
    # A script has no shell to show figures in: set_theme looks for a loaded IPython, no more.
    assert fresh("""
        import json, sys
        import matplotlib as mpl
        mpl.use("Agg")
        import helpers
        helpers.set_theme()
        print(json.dumps("IPython" in sys.modules))
    """) is False


def test_set_theme_leaves_a_formatter_that_is_not_ipythons_cropping_one_alone():
    state = inline_state('shell.run_line_magic("config", "InlineBackend.print_figure_kwargs = {}")\n'
                         "helpers.set_theme()")
    assert not state["ours"]  # the user chose no crop (or another format): nothing to change
