"""Specs for the slider views of notebooks 07-10 and the pattern they share: helpers.widgets
._common, .positional, .transformer, .scale and .rotary (see ``tests/fuzz/__init__.py`` for the
format). Every draw function is checked against its formula on the data it drew; the view
builders against the control they build. Valid draws are kept few (tens of ms each): sizes are
small, and a parameter a view only passes on is fuzzed on its draw function too."""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from helpers import induction
from helpers.widgets import _common
from helpers.widgets import positional as pw
from helpers.widgets import rotary as rw
from helpers.widgets import scale as sw
from helpers.widgets import transformer as tw
from helpers.widgets.page import PageView, encode_scene, scene_json
from tests.fuzz import Case, Int, Real, Spec, T

TAU = 2 * math.pi


# --------------------------------------------------------------------------- rules
def _int(v: object) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True)
class IntChoice:
    """An int (Python or NumPy, not a bool, not a float equal to one) among ``choices``."""
    choices: tuple[int, ...]

    def __call__(self, v: object) -> bool:
        return _int(v) and v in self.choices

    def extra_values(self) -> list[tuple[str, object]]:
        return [(repr(c), c) for c in self.choices] + [
            ("3", 3), (f"{float(self.choices[0])!r}", float(self.choices[0]))]


@dataclass(frozen=True)
class Even:
    """An even int >= 2 (a feature size of pairs)."""

    def __call__(self, v: object) -> bool:
        return _int(v) and v >= 2 and v % 2 == 0

    def extra_values(self) -> list[tuple[str, object]]:
        return [("3", 3), ("4", 4), ("6", 6)]


FIG = lambda v: v is None or isinstance(v, Figure)  # noqa: E731  a draw function's ``fig``
FIGURE = lambda v: isinstance(v, Figure)  # noqa: E731
NOT_A_TENSOR_ARGUMENT = lambda v: False  # noqa: E731  no scalar is valid (tensors: by hand)


def _small_figure() -> Figure:
    fig = Figure(figsize=(1.5, 1.0))
    fig.add_subplot().plot([0, 1], [0, 1])
    return fig


def _foreign() -> Figure:
    """A Figure no view drew: a draw function must clear it and draw its own."""
    fig = Figure()
    fig.subplots(2, 2)
    return fig


def _is_view(out: object) -> bool:
    return isinstance(out, PageView) and isinstance(out.result, Figure)


def _control(view: PageView, description: str) -> widgets.Widget:
    (found,) = [c for c in view.children if getattr(c, "description", None) == description]
    return found


def _bars(ax) -> np.ndarray:
    return np.array([bar.get_height() for bar in ax.patches])


# ------------------------------------------------------------------------ _common
def _refuses_two(n: int) -> Figure:
    if n == 2:
        raise ValueError(f"n must be 1 or 3, got {n}")
    return _small_figure()


def _page_view(data: dict | None = None) -> PageView:
    """A page view of one line y = n·x (n from a slider: 1, 2, 3) on fixed axes."""
    data = {"scale": 1.0} if data is None else data
    fig = Figure(figsize=(2.0, 1.5), label="fuzz.view")
    ax = fig.add_subplot()
    line, = ax.plot([0, 1], [0, 1])
    ax.set_ylim(0, 3)

    def draw(n: int) -> Figure:
        line.set_ydata([0, n * data["scale"]])
        return fig

    return PageView(draw, {"n": widgets.IntSlider(value=2, min=1, max=3)})


def _refreshed(view: PageView) -> tuple:
    """(refresh()'s result, the scene before, the scene after new data and a refresh)."""
    before = view.scene_data()
    data = next(c.cell_contents for c in view._draw.__closure__ if isinstance(c.cell_contents, dict))
    data["scale"] = 0.5
    return view.refresh(), before, view.scene_data()


def _interactive_good() -> dict:
    fig = _small_figure()
    return dict(draw=lambda n: fig, n=widgets.IntSlider(value=2, min=1, max=3))


COMMON = [
    Spec("helpers.widgets._common.interactive_figure", call=_common.interactive_figure,
         good=_interactive_good,
         rules={"draw": callable},
         check=lambda out, kw: _is_view(out) and out.result is kw["draw"](2),
         bad=[Case("draw-returns-None", lambda kw: kw.update(draw=lambda n: None),
                   r"^draw must return a matplotlib Figure .* got NoneType"),
              Case("draw-raises", lambda kw: kw.update(draw=_refuses_two),
                   r"^n must be 1 or 3, got 2")]),  # the draw's own error, not ipywidgets' log
    Spec("helpers.widgets.page.PageView", call=PageView,
         good=lambda: {"draw": _interactive_good()["draw"],
                       "controls": {"n": widgets.IntSlider(value=2, min=1, max=3)}},
         rules={"draw": callable, "controls": lambda v: False},  # a dict of controls: by hand
         check=lambda out, kw: _is_view(out) and out.result is kw["draw"](2) and out.index == [1],
         bad=[Case("draw-returns-None", lambda kw: kw.update(draw=lambda n: None),
                   r"^draw must return a matplotlib Figure .* got NoneType"),
              Case("a-text-control", lambda kw: kw.update(controls={"n": widgets.Text("a")}),
                   r"^control 'n': a page view takes Checkbox, .* got Text"),
              Case("controls-a-list", lambda kw: kw.update(controls=[widgets.IntSlider()]),
                   r"^controls must be a dict of name → ipywidgets control, got list")]),
    Spec("helpers.widgets.page.PageView.update", call=lambda: _page_view().update(), good=dict,
         check=lambda out, kw: isinstance(out, Figure) and out.get_label() == "fuzz.view"
         and list(out.axes[0].lines[0].get_ydata()) == [0, 2]),
    Spec("helpers.widgets.page.PageView.text_summary", call=lambda: _page_view().text_summary(),
         good=dict, check=lambda out, kw: out == "[fuzz.view: n = 2]"),
    Spec("helpers.widgets.page.PageView.scene_data", call=lambda: _page_view().scene_data(),
         good=dict, check=lambda out, kw: out["controls"][0]["values"] == ["1", "2", "3"]
         and [s["deps"] for s in out["slots"]] and all(s["deps"] == [0] for s in out["slots"])),
    Spec("helpers.widgets.page.PageView.refresh", call=lambda: _refreshed(_page_view()),
         good=dict, check=lambda out, kw: out[0] is None and out[1] != out[2]),
    Spec("helpers.widgets.page.scene_json", call=scene_json,
         good=lambda: dict(encoded=encode_scene({"version": 1})),
         rules={"encoded": lambda v: False},  # only a real scene string is valid: by hand
         check=lambda out, kw: out == {"version": 1},
         bad=[Case("not-base64", lambda kw: kw.update(encoded="%%%"),
                   r"^encoded must be a page view's scene .* got '%%%'"),
              Case("not-zlib", lambda kw: kw.update(encoded="aGVsbG8="),
                   r"^encoded must be a page view's scene .* got 'aGVsbG8='")]),
    Spec("helpers.widgets._common.figure_png", call=_common.figure_png,
         good=lambda: dict(fig=_small_figure()), rules={"fig": FIGURE},
         check=lambda out, kw: isinstance(out, bytes) and out.startswith(b"\x89PNG\r\n\x1a\n")),
    Spec("helpers.widgets._common.start_figure", call=_common.start_figure,
         good=lambda: dict(fig=_small_figure(), label="a view", fixed_layout=False),
         rules={"fig": FIGURE, "label": lambda v: isinstance(v, str), "fixed_layout": "flag"},
         check=lambda out, kw: (out is kw["fig"] and not out.axes and out.get_label() == kw["label"]
                                and (out.get_layout_engine() is None if kw["fixed_layout"] else
                                     isinstance(out.get_layout_engine(), ConstrainedLayoutEngine)))),
    Spec("helpers.widgets._common.freeze_layout", call=_common.freeze_layout,
         good=lambda: dict(fig=Figure(layout="constrained")), rules={"fig": FIGURE},
         check=lambda out, kw: out is None and kw["fig"].get_layout_engine() is None),
    Spec("helpers.widgets._common.set_image_data", call=_common.set_image_data,
         good=lambda: dict(image=Figure().subplots().imshow(np.zeros((2, 3))),
                           data=np.array([[0.0, 0.5, 1.0], [np.nan, 0.25, 0.75]])),
         rules={"image": lambda v: False,  # only a real AxesImage is valid: by hand
                "data": lambda v: (isinstance(v, np.ndarray) and v.ndim == 2
                                   and v.dtype.kind in "biuf")},
         check=lambda out, kw: out is True and np.array_equal(
             np.ma.getdata(kw["image"].get_array()), kw["data"], equal_nan=True),
         bad=[Case("a-1d-array", lambda kw: kw.update(data=np.zeros(3)),
                   r"^data must be a 2-D NumPy array of numbers .* got an array of shape \(3,\)"),
              Case("a-tensor", lambda kw: kw.update(data=torch.zeros(2, 3)),
                   r"^data must be a 2-D NumPy array .* got Tensor"),
              Case("a-figure", lambda kw: kw.update(image=Figure()),
                   r"^image must be a matplotlib AxesImage, got Figure")]),
    Spec("helpers.widgets._common.drop_layout_engine", call=_common.drop_layout_engine,
         good=lambda: dict(fig=Figure(layout="constrained")), rules={"fig": FIGURE},
         check=lambda out, kw: out is None and kw["fig"].get_layout_engine() is None),
]


# ------------------------------------------------------------------------ positional
def _sinusoid(i: float, col: int, d: int) -> float:
    """P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))."""
    angle = i / 10000 ** ((col - col % 2) / d)
    return math.sin(angle) if col % 2 == 0 else math.cos(angle)


def _rotation(delta: float, omega: float) -> np.ndarray:
    a = delta * omega
    return np.array([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])


def _encoding_right(fig: Figure, kw: dict) -> bool:
    d, T, count = kw["num_hiddens"], kw["num_positions"], min(kw["num_cols"], kw["num_hiddens"])
    first = min(kw["first_col"], d - count)  # columns that would not fit move left
    want = np.array([[_sinusoid(i, c, d) for c in range(d)] for i in range(T)])
    heat = next(ax for ax in fig.axes if ax.images)
    curves = next(ax for ax in fig.axes if ax.lines)
    return (np.allclose(np.asarray(heat.images[0].get_array()), want, atol=1e-12)
            and [line.get_label() for line in curves.lines]
            == [f"Col {c}" for c in range(first, first + count)]
            and all(np.allclose(line.get_ydata(), want[:, c], atol=1e-12)
                    for line, c in zip(curves.lines, range(first, first + count))))


def _rotation_right(fig: Figure, kw: dict) -> bool:
    d, j, delta, T = kw["num_hiddens"], kw["j"], kw["delta"], kw["num_positions"]
    dots, rings = (np.asarray(c.get_offsets()) for c in fig.axes[0].collections)
    return (np.allclose(dots, [[_sinusoid(i, 2 * j, d), _sinusoid(i, 2 * j + 1, d)] for i in range(T)],
                        atol=1e-12)
            and np.allclose(rings, [[_sinusoid(i + delta, 2 * j, d), _sinusoid(i + delta, 2 * j + 1, d)]
                                    for i in range(T)], atol=1e-9))


def _encoding_valid(kw: dict) -> bool:
    if "max_hiddens" not in kw:  # draw_encoding: any sizes
        return kw["num_cols"] <= kw["num_hiddens"]
    # encoding_view: the slider's values, d a power of two >= 8, the first column even
    d = kw["num_hiddens"]
    return (max(8, kw["num_cols"]) <= d <= kw["max_hiddens"] and d & (d - 1) == 0
            and kw["first_col"] % 2 == 0 and kw["first_col"] <= kw["max_hiddens"] - kw["num_cols"])


def _rotation_valid(kw: dict) -> bool:
    if "max_delta" not in kw:  # draw_rotation: any offset
        return kw["j"] < kw["num_hiddens"] // 2
    last = kw["num_hiddens"] // 2 - 1  # the slider's pairs: every pair_step-th, and the last
    return (kw["j"] <= last and (kw["j"] % kw["pair_step"] == 0 or kw["j"] == last)
            and abs(kw["delta"]) <= kw["max_delta"])


POSITIONAL = [
    Spec("helpers.widgets.positional.frequencies", call=pw.frequencies,
         good=lambda: dict(num_hiddens=9), rules={"num_hiddens": "size"},
         check=lambda out, kw: out.dtype == torch.float64 and np.allclose(
             out.numpy(), [1 / 10000 ** (2 * j / kw["num_hiddens"])
                           for j in range(math.ceil(kw["num_hiddens"] / 2))], rtol=1e-12)),
    Spec("helpers.widgets.positional.rotation_matrix", call=pw.rotation_matrix,
         good=lambda: dict(delta=3, omega=0.3), rules={"delta": "finite", "omega": "finite"},
         check=lambda out, kw: out.dtype == torch.float64 and np.allclose(
             out.numpy(), _rotation(kw["delta"], kw["omega"]), atol=1e-12),
         bad=[Case("delta*omega=inf", lambda kw: kw.update(delta=1e300, omega=1e300),
                   r"^delta must make delta \* omega finite")]),
    Spec("helpers.widgets.positional.rotate_pairs", call=pw.rotate_pairs,
         good=lambda: dict(pairs=torch.randn(5, 2), delta=2, omega=0.7),
         rules={"pairs": T(rank=2, same_dtype=False), "delta": "finite", "omega": "finite"},
         check=lambda out, kw: out.dtype == torch.float64 and np.allclose(
             out.numpy(), kw["pairs"].double().numpy() @ _rotation(kw["delta"], kw["omega"]).T,
             atol=1e-9),
         bad=[Case("pairs-(5,3)", lambda kw: kw.update(pairs=torch.randn(5, 3)),
                   r"^pairs must be a \(T, 2\) tensor")],
         edge=[Case("pairs-unchanged", lambda kw: kw.update(pairs=torch.ones(3, 2)),
                    lambda out, kw: torch.equal(kw["pairs"], torch.ones(3, 2)))]),
    Spec("helpers.widgets.positional.draw_encoding", call=pw.draw_encoding,
         good=lambda: dict(num_hiddens=8, first_col=2, num_positions=10, num_cols=3, fig=None),
         rules={"num_hiddens": "size", "first_col": "count", "num_positions": "size",
                "num_cols": "size", "fig": FIG},
         check=_encoding_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _encoding_right),
               Case("first_col-past-d", lambda kw: kw.update(first_col=50), _encoding_right)]),
    Spec("helpers.widgets.positional.encoding_view", call=pw.encoding_view,
         good=lambda: dict(num_hiddens=8, first_col=2, num_positions=10, num_cols=3, max_hiddens=12),
         rules={"num_hiddens": "size", "first_col": "count", "num_positions": "size",
                "num_cols": "size", "max_hiddens": "size"},
         valid=_encoding_valid,
         check=lambda out, kw: (_is_view(out) and _control(out, "encoding dimension d").options[-1]
                                == 2 ** (int(kw["max_hiddens"]).bit_length() - 1)
                                and _encoding_right(out.result, {**kw, "first_col": min(
                                    kw["first_col"], kw["num_hiddens"] - kw["num_cols"])}))),
    Spec("helpers.widgets.positional.draw_rotation", call=pw.draw_rotation,
         good=lambda: dict(delta=2, j=1, num_hiddens=8, num_positions=5, fig=None),
         rules={"delta": "int", "j": Int(0), "num_hiddens": Int(2), "num_positions": "size",
                "fig": FIG},
         valid=_rotation_valid, check=_rotation_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _rotation_right),
               Case("odd-d", lambda kw: kw.update(num_hiddens=7, j=2), _rotation_right)]),
    Spec("helpers.widgets.positional.rotation_view", call=pw.rotation_view,
         good=lambda: dict(delta=3, j=2, num_hiddens=10, num_positions=5, max_delta=4, pair_step=2),
         rules={"delta": "int", "j": Int(0), "num_hiddens": Int(2), "num_positions": "size",
                "max_delta": Int(0), "pair_step": Int(1)},
         valid=_rotation_valid,
         check=lambda out, kw: (_is_view(out) and _control(out, "position offset δ").max == kw["max_delta"]
                                and _control(out, "column pair j").max == kw["num_hiddens"] // 2 - 1
                                and _rotation_right(out.result, kw))),
    Spec("helpers.widgets.positional.demo_views", call=pw.demo_views, good=dict, limit=60,
         check=lambda out, kw: set(out) == {"encoding", "rotation"}
         and all(_is_view(v) for v in out.values())),
]


# ------------------------------------------------------------------------ transformer
@functools.cache
def _run() -> induction.TrainingRun:
    """A short training run (a few seconds): checkpoints 0, 10, 20; 2 layers × 2 heads."""
    return induction.train_with_checkpoints(steps=20, every=10, eval_size=64, seed=2)


@dataclass(frozen=True)
class Checkpoint:
    """None (the last) or one of the checkpoints 0, 10, 20 of ``_run()``, an int."""

    def __call__(self, v: object) -> bool:
        return v is None or _int(v) and v in (0, 10, 20)

    def extra_values(self) -> list[tuple[str, object]]:
        return [("10", 10), ("20", 20), ("5", 5), ("10.0", 10.0)]


WORDS = lambda v: (isinstance(v, (tuple, list)) and len(v) > 0  # noqa: E731
                   and all(isinstance(w, str) for w in v))


def _causal_right(fig: Figure, kw: dict) -> bool:
    p, T = kw["position"], len(kw["words"])
    heights = _bars(fig.axes[2])[1:]  # the first patch: the grey future
    return np.allclose(heights, [1 / (p + 1) if k <= p else 0.0 for k in range(T)])


def _explorer_right(fig: Figure, kw: dict) -> bool:
    run = kw["run"]
    c = len(run.steps) - 1 if kw["step"] is None else run.steps.index(kw["step"])
    image = fig.subfigs[0].axes[0].images[0].get_array()
    want = run.weights[c, kw["example"], kw["layer"] - 1, kw["head"] - 1].numpy()
    return np.allclose(image.filled(0.0), want, rtol=1e-6)


def _explorer_good() -> dict:
    return dict(run=_run(), step=10, layer=1, head=2, example=1)


TRANSFORMER_RULES = {"run": lambda v: isinstance(v, induction.TrainingRun), "step": Checkpoint(),
                     "layer": Int(1, 2), "head": Int(1, 2), "example": Int(0)}

TRANSFORMER = [
    Spec("helpers.widgets.transformer.averaging_weights", call=tw.averaging_weights,
         good=lambda: dict(num_tokens=5), rules={"num_tokens": "size"},
         check=lambda out, kw: torch.allclose(out, torch.tensor(
             [[1 / (t + 1) if k <= t else 0.0 for k in range(kw["num_tokens"])]
              for t in range(kw["num_tokens"])]))),
    Spec("helpers.widgets.transformer.draw_causal", call=tw.draw_causal,
         good=lambda: dict(position=2, words=("a", "b", "c", "d"), fig=None),
         rules={"position": Int(0), "words": WORDS, "fig": FIG},
         valid=lambda kw: kw["position"] < len(kw["words"]), check=_causal_right,
         bad=[Case("words=()", lambda kw: kw.update(words=()), r"^words must be a non-empty tuple"),
              Case("words-with-int", lambda kw: kw.update(words=("a", 3)),
                   r"^words must be a non-empty tuple of strings"),
              Case("position=4", lambda kw: kw.update(position=4), r"^position must be an int in \[0, 3\]")],
         edge=[Case("words-list", lambda kw: kw.update(words=["x", "y", "z"]), _causal_right),
               Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _causal_right)]),
    Spec("helpers.widgets.transformer.causal_view", call=tw.causal_view,
         good=lambda: dict(position=2, words=("a", "b", "c", "d")),
         rules={"position": Int(0), "words": WORDS},
         valid=lambda kw: kw["position"] < len(kw["words"]),
         check=lambda out, kw: (_is_view(out) and _control(out, "query position").max == len(kw["words"]) - 1
                                and _causal_right(out.result, kw))),
    Spec("helpers.widgets.transformer.draw_explorer", call=tw.draw_explorer,
         good=lambda: {**_explorer_good(), "fig": None},
         rules={**TRANSFORMER_RULES, "fig": FIG},
         valid=lambda kw: kw["example"] < len(_run().examples), check=_explorer_right,
         bad=[Case("example=E", lambda kw: kw.update(example=len(_run().examples)),
                   r"^example must be an int in \[0, \d+\]")],
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _explorer_right)],
         limit=30),
    Spec("helpers.widgets.transformer.explorer_view", call=tw.explorer_view, good=_explorer_good,
         rules={k: TRANSFORMER_RULES[k] for k in ("run", "step")},
         unfuzzed={name: "checked before the view is built by the check draw_explorer uses "
                         f"(whose spec fuzzes it); case {case} here"
                   for name, case in (("layer", "layer=3"), ("head", "head=3"), ("example", "example=E"))},
         check=lambda out, kw: (_is_view(out) and _explorer_right(out.result, kw)
                                and _control(out, "training step").value == (
                                    kw["run"].steps[-1] if kw["step"] is None else kw["step"])),
         bad=[Case(f"{name}=3", lambda kw, name=name: kw.update({name: 3}), rf"^{name} must be an int in")
              for name in ("layer", "head")]
         + [Case("example=E", lambda kw: kw.update(example=len(_run().examples)),
                 r"^example must be an int in \[0, \d+\]")],
         limit=30),
    Spec("helpers.widgets.transformer.default_run", call=tw.default_run, good=dict, limit=300,
         check=lambda out, kw: isinstance(out, induction.TrainingRun) and out.steps[-1] == 200
         and out is tw.default_run()),
    Spec("helpers.widgets.transformer.demo_views", call=tw.demo_views, good=dict, limit=300,
         check=lambda out, kw: set(out) == {"causal", "explorer"}
         and all(_is_view(v) for v in out.values())),
]


# ------------------------------------------------------------------------ scale
def _online_valid(kw: dict) -> bool:
    return kw["step"] <= -(-kw["num_keys"] // kw["block_size"])


def _online_right(fig: Figure, kw: dict) -> bool:
    """The bars: softmax over the first min(step·b, K) scores, times their values."""
    scores, values = sw.example_row(kw["num_keys"], kw["value_size"], kw["seed"])
    seen = min(kw["step"] * kw["block_size"], kw["num_keys"])
    if seen == 0:
        want = np.zeros(kw["value_size"])
    else:
        s = scores[:seen].tolist()
        e = [math.exp(x - max(s)) for x in s]
        want = np.array(e) @ values[:seen].numpy() / sum(e)
    return np.allclose(_bars(fig.axes[2]), want, atol=1e-12)


def _tiles_formula(Q: int, K: int, b: int, causal: bool) -> np.ndarray:
    """Each score: USED if visible (j <= i + K - Q, or no mask), else MASKED_IN_TILE; NaN
    when nothing of its b × b tile is visible."""
    visible = np.array([[j <= i + K - Q or not causal for j in range(K)] for i in range(Q)])
    out = np.where(visible, sw.USED, sw.MASKED_IN_TILE)
    for q0 in range(0, Q, b):
        for k0 in range(0, K, b):
            if not visible[q0:q0 + b, k0:k0 + b].any():
                out[q0:q0 + b, k0:k0 + b] = np.nan
    return out


def _tile_map_right(out: np.ndarray, kw: dict) -> bool:
    want = _tiles_formula(kw["num_queries"], kw["num_keys"], kw["block_size"], kw["causal"])
    return np.array_equal(out, want, equal_nan=True)


def _tiles_right(fig: Figure, kw: dict) -> bool:
    want = _tiles_formula(kw["num_queries"], kw["num_keys"], kw["block_size"], kw["causal"])
    drawn = fig.axes[0].images[0].get_array()
    visible = np.isfinite(want)
    needed = int((want == sw.USED).sum())
    share = _bars(fig.axes[1])[2]
    return (np.array_equal(np.ma.getmaskarray(drawn), ~visible)
            and np.array_equal(drawn.filled(np.nan)[visible], want[visible])
            and math.isclose(share, 100 * needed / (kw["num_queries"] * kw["num_keys"]), rel_tol=1e-12))


def _gqa_right(fig: Figure, kw: dict) -> bool:
    group = 32 // kw["kv_heads"]
    rows = np.asarray(fig.axes[0].images[0].get_array())
    return np.array_equal(rows[1], [(h // group) % 2 for h in range(32)])


ONLINE_GOOD = dict(step=2, block_size=8, num_keys=20, value_size=3, seed=1)
ONLINE_RULES = {"step": Int(0), "block_size": "size", "num_keys": "size", "value_size": "size",
                "seed": "seed"}
TILES_GOOD = dict(block_size=16, causal=True, num_queries=30, num_keys=20, size=8)

SCALE = [
    Spec("helpers.widgets.scale.example_row", call=sw.example_row,
         good=lambda: dict(num_keys=7, value_size=3, seed=1),
         rules={"num_keys": "size", "value_size": "size", "seed": "seed"},
         check=lambda out, kw: (
             out[0].shape == (kw["num_keys"],) and out[1].shape == (kw["num_keys"], kw["value_size"])
             and out[0].dtype == out[1].dtype == torch.float64
             and all(torch.equal(a, b) for a, b in zip(out, sw.example_row(**kw))))),
    Spec("helpers.widgets.scale.online_trace", call=sw.online_trace,
         good=lambda: dict(zip(("scores", "values"), sw.example_row(10, 3)), block_size=4),
         rules={"scores": T(rank=1), "values": T(rank=2), "block_size": "size"},
         check=lambda out, kw: (
             len(out) == -(-10 // kw["block_size"]) + 1 and float(out[0].sum) == 0.0
             and all(float(state.max) == float(kw["scores"][:k * kw["block_size"]].max())
                     for k, state in enumerate(out) if k)
             and torch.allclose(out[-1].out / out[-1].sum,
                                torch.softmax(kw["scores"], 0) @ kw["values"], atol=1e-12)),
         bad=[Case("values-9-rows", lambda kw: kw.update(values=torch.zeros(9, 3, dtype=torch.float64)),
                   r"^values must have one row per score"),
              Case("values-float32", lambda kw: kw.update(values=kw["values"].float()),
                   r"^values must have the dtype and device of scores")],
         edge=[Case("float32", lambda kw: kw.update(scores=kw["scores"].float(),
                                                    values=kw["values"].float()),
                    lambda out, kw: out[-1].out.dtype == torch.float32)]),
    Spec("helpers.widgets.scale.draw_online", call=sw.draw_online,
         good=lambda: {**ONLINE_GOOD, "fig": None}, rules={**ONLINE_RULES, "fig": FIG},
         valid=_online_valid, check=_online_right,
         bad=[Case("step=4", lambda kw: kw.update(step=4),
                   r"^step must be in 0 … 3 \(⌈20/8⌉ blocks\), got 4")],
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _online_right)]),
    Spec("helpers.widgets.scale.online_view", call=sw.online_view, good=lambda: dict(ONLINE_GOOD),
         rules={"step": Int(0), "block_size": "size"},
         unfuzzed={"num_keys": "passed on to draw_online, whose spec fuzzes it (the view checks it "
                               "first: case num_keys=0)",
                   "value_size": "passed on to draw_online, whose spec fuzzes it (case value_size=0.5)",
                   "seed": "passed on to draw_online, whose spec fuzzes it (case seed=1.5)"},
         valid=_online_valid,
         check=lambda out, kw: (_is_view(out) and _online_right(out.result, kw)
                                and _control(out, "key blocks folded in").max == -(-20 // kw["block_size"])),
         bad=[Case("num_keys=0", lambda kw: kw.update(num_keys=0), r"^num_keys must be a positive int"),
              Case("value_size=0.5", lambda kw: kw.update(value_size=0.5), r"^value_size must be"),
              Case("seed=1.5", lambda kw: kw.update(seed=1.5), r"^seed must be an int")]),
    Spec("helpers.widgets.scale.tile_map", call=sw.tile_map,
         good=lambda: dict(num_queries=7, num_keys=10, block_size=4, causal=True),
         rules={"num_queries": "size", "num_keys": "size", "block_size": "size", "causal": "flag"},
         check=_tile_map_right,
         edge=[Case("block_size=4096", lambda kw: kw.update(block_size=4096),
                    _tile_map_right)]),
    Spec("helpers.widgets.scale.draw_tiles", call=sw.draw_tiles,
         good=lambda: {**TILES_GOOD, "fig": None},
         rules={"block_size": "size", "causal": "flag", "size": "size", "fig": FIG},
         unfuzzed={"num_queries": "the map's rows, checked by tile_map (whose spec fuzzes it; "
                                  "case num_queries=0 here)",
                   "num_keys": "the map's columns, checked by tile_map (whose spec fuzzes it; "
                               "case num_keys=2.0 here)"},
         check=_tiles_right,
         bad=[Case("num_queries=0", lambda kw: kw.update(num_queries=0), r"^num_queries must be"),
              Case("num_keys=2.0", lambda kw: kw.update(num_keys=2.0), r"^num_keys must be")],
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _tiles_right),
               Case("block_size=4096", lambda kw: kw.update(block_size=4096), _tiles_right)]),
    Spec("helpers.widgets.scale.tiles_view", call=sw.tiles_view, good=lambda: dict(TILES_GOOD),
         rules={"block_size": IntChoice(sw.BLOCK_CHOICES), "causal": "flag"},
         unfuzzed={"num_queries": "passed on to draw_tiles (checked there by tile_map, whose spec "
                                  "fuzzes it; case num_queries=-1 here)",
                   "num_keys": "passed on to draw_tiles (as num_queries; case num_keys=None here)",
                   "size": "passed on to draw_tiles, whose spec fuzzes it (case size=0 here)"},
         check=lambda out, kw: _is_view(out) and _tiles_right(out.result, kw),
         bad=[Case("num_queries=-1", lambda kw: kw.update(num_queries=-1), r"^num_queries must be"),
              Case("num_keys=None", lambda kw: kw.update(num_keys=None), r"^num_keys must be"),
              Case("size=0", lambda kw: kw.update(size=0), r"^size must be a positive int")]),
    Spec("helpers.widgets.scale.cache_bytes_per_token", call=sw.cache_bytes_per_token,
         good=lambda: dict(layers=32, kv_heads=8, head_size=128, bytes_per_number=2),
         rules={"layers": "size", "kv_heads": "size", "head_size": "size", "bytes_per_number": "size"},
         check=lambda out, kw: out == 2 * kw["layers"] * kw["kv_heads"] * kw["head_size"]
         * kw["bytes_per_number"]),
    Spec("helpers.widgets.scale.draw_gqa", call=sw.draw_gqa, good=lambda: dict(kv_heads=8, fig=None),
         rules={"kv_heads": IntChoice(sw.KV_HEAD_CHOICES), "fig": FIG}, check=_gqa_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _gqa_right)]),
    Spec("helpers.widgets.scale.gqa_view", call=sw.gqa_view, good=lambda: dict(kv_heads=8),
         rules={"kv_heads": IntChoice(sw.KV_HEAD_CHOICES)},
         check=lambda out, kw: _is_view(out) and _gqa_right(out.result, kw)),
    Spec("helpers.widgets.scale.demo_views", call=sw.demo_views, good=dict, limit=60,
         check=lambda out, kw: set(out) == {"online", "tiles", "gqa"}
         and all(_is_view(v) for v in out.values())),
]


# ------------------------------------------------------------------------ rotary
def _shift_formula(shift: int, T: int, D: int) -> tuple[np.ndarray, np.ndarray]:
    """((X + P) W_q)((X + P) W_k)ᵀ/√D and (R X W_q)(R X W_k)ᵀ/√D, R: half-split RoPE."""
    X, W_q, W_k = (t.numpy() for t in rw._tokens_and_projections(T, D))
    P = np.array([[_sinusoid(shift + m, c, D) for c in range(D)] for m in range(T)])
    added = ((X + P) @ W_q) @ ((X + P) @ W_k).T / math.sqrt(D)

    def rotate(v: np.ndarray, p: int) -> np.ndarray:
        out = v.copy()
        for i in range(D // 2):
            a = p * 10000.0 ** (-2 * i / D)
            out[i] = v[i] * math.cos(a) - v[i + D // 2] * math.sin(a)
            out[i + D // 2] = v[i] * math.sin(a) + v[i + D // 2] * math.cos(a)
        return out

    q = np.stack([rotate(X[m] @ W_q, shift + m) for m in range(T)])
    k = np.stack([rotate(X[m] @ W_k, shift + m) for m in range(T)])
    return added, q @ k.T / math.sqrt(D)


def _shift_right(out: torch.Tensor, kw: dict) -> bool:
    T, D = kw["num_positions"], kw["size"]
    added, rope = _shift_formula(kw["shift"], T, D)
    # near 10^9 the float64 angles (p·θ_i, p/10000^(2j/D)) carry up to ~1e-7 rad of rounding
    atol = 1e-9 + 1e-15 * kw["shift"]
    return (out.shape == (2, T, T) and np.allclose(out[0].numpy(), added, atol=atol)
            and np.allclose(out[1].numpy(), rope, atol=10 * atol))


def _shift_figure_right(fig: Figure, kw: dict) -> bool:
    maps = [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]
    scores = rw.shift_scores(kw["shift"], num_positions=kw["num_positions"], size=kw["size"])
    first = rw.shift_scores(0, num_positions=kw["num_positions"], size=kw["size"])
    return (_shift_right(scores, kw) and len(maps) == 4
            and np.array_equal(maps[0], scores[0].numpy()) and np.array_equal(maps[1], scores[1].numpy())
            and np.array_equal(maps[2], (scores - first)[0].numpy()))


def _angles_close(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal as angles: within 1e-9 of each other modulo 2π, and in [0, 2π] (2π itself: a
    remainder just below a full turn may round up to it)."""
    gap = np.abs(got - want) % TAU
    return bool(((got >= 0) & (got <= TAU)).all() and (np.minimum(gap, TAU - gap) < 1e-9).all())


def _wrapped_right(out: torch.Tensor, kw: dict) -> bool:
    D, base = kw["size"], kw["base"]
    p = kw["positions"].double().numpy()
    want = np.array([[(x * base ** (-2 * i / D)) % TAU for i in range(D // 2)] for x in p])
    return out.dtype == torch.float64 and out.shape == (len(p), D // 2) and _angles_close(out.numpy(), want)


def _frequencies_right(fig: Figure, kw: dict) -> bool:
    D, base, T = kw["size"], kw["base"], kw["num_positions"]
    lines = fig.axes[0].lines
    waves = np.asarray(fig.axes[1].collections[0].get_offsets())[:, 1]
    ok = len(lines) == D // 2 and np.allclose(waves, [TAU * base ** (2 * i / D) for i in range(D // 2)],
                                              rtol=1e-12)
    for i, line in enumerate(lines):
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        shown = ~np.isnan(y)
        ok = ok and x[0] == 0 and x[-1] == T - 1 and _angles_close(
            y[shown], (x[shown] * base ** (-2 * i / D)) % TAU)
    count = sum(TAU * base ** (2 * i / D) < kw["train_length"] for i in range(D // 2))
    return ok and fig.axes[1].get_title() == (
        f"{count} of {D // 2} pairs turn fully in {kw['train_length']} positions")


SHIFT_GOOD = dict(shift=3, num_positions=5, size=8)
LAST_SHIFT = 10**9 - 4  # the last position s + T − 1 = 10^9 for T = 5
FREQUENCY_GOOD = dict(base=100.0, size=4, num_positions=32, train_length=8)
FREQUENCY_RULES = {"base": Real(1.0, lo_open=True), "size": Even(), "num_positions": Int(2),
                   "train_length": Int(1)}


def _frequency_valid(kw: dict) -> bool:
    return kw["train_length"] <= kw["num_positions"]


def _positions_case(value: object) -> Case:
    return Case(f"positions={value!r}", lambda kw: kw.update(positions=value))


ROTARY = [
    Spec("helpers.widgets.rotary.shift_scores", call=rw.shift_scores, good=lambda: dict(SHIFT_GOOD),
         rules={"shift": Int(0, LAST_SHIFT), "num_positions": "size", "size": Even()},
         valid=lambda kw: kw["shift"] + kw["num_positions"] - 1 <= 10**9, check=_shift_right),
    Spec("helpers.widgets.rotary.draw_shift", call=rw.draw_shift, good=lambda: {**SHIFT_GOOD, "fig": None},
         rules={"shift": Int(0, LAST_SHIFT), "fig": FIG},
         unfuzzed={"num_positions": "passed on to shift_scores (checked there first), whose spec "
                                    "fuzzes it; case num_positions=0 here",
                   "size": "passed on to shift_scores (checked there first), whose spec fuzzes it; "
                           "case size=7 here"},
         check=_shift_figure_right,
         bad=[Case("num_positions=0", lambda kw: kw.update(num_positions=0), r"^num_positions must be"),
              Case("size=7", lambda kw: kw.update(size=7), r"^size must be an even int >= 2")],
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _shift_figure_right)]),
    Spec("helpers.widgets.rotary.shift_view", call=rw.shift_view,
         good=lambda: dict(SHIFT_GOOD, shift=rw.SHIFT_STEP),
         rules={"shift": Int(0, rw.MAX_SHIFT)},
         valid=lambda kw: kw["shift"] % rw.SHIFT_STEP == 0,  # the slider's values only
         unfuzzed={"num_positions": "passed on to draw_shift (checked there by shift_scores, whose "
                                    "spec fuzzes it); case num_positions=1.0 here",
                   "size": "passed on to draw_shift (checked there by shift_scores, whose spec "
                           "fuzzes it); case size=0 here"},
         check=lambda out, kw: _is_view(out) and _shift_figure_right(out.result, kw),
         bad=[Case("num_positions=1.0", lambda kw: kw.update(num_positions=1.0), r"^num_positions must be"),
              Case("size=0", lambda kw: kw.update(size=0), r"^size must be an even int >= 2")]),
    Spec("helpers.widgets.rotary.wrapped_angles", call=rw.wrapped_angles,
         good=lambda: dict(base=100.0, positions=torch.tensor([0.0, 1.0, 2.5, 7.0, 127.5]), size=8),
         rules={"base": Real(1.0, lo_open=True), "positions": NOT_A_TENSOR_ARGUMENT, "size": Even()},
         check=_wrapped_right,
         # The pools' tensor rule T cannot say "integer or floating" (its int64 variant is
         # judged by one dtype): the tensor variants of ``positions`` are written out here.
         bad=[_positions_case(torch.zeros(2, 3)), _positions_case(torch.zeros(())),
              _positions_case(torch.tensor([True, False])),
              _positions_case(torch.zeros(3, dtype=torch.complex64)),
              _positions_case(torch.empty(3, device="meta")), _positions_case([0.0, 1.0])],
         edge=[Case("positions-int64", lambda kw: kw.update(positions=torch.arange(6)), _wrapped_right),
               Case("positions-float32", lambda kw: kw.update(positions=torch.arange(6.0)),
                    _wrapped_right),
               Case("positions-empty", lambda kw: kw.update(positions=torch.zeros(0)),
                    lambda out, kw: out.shape == (0, 4))]),
    Spec("helpers.widgets.rotary.wavelengths", call=rw.wavelengths, good=lambda: dict(base=100.0, size=8),
         rules={"base": Real(1.0, lo_open=True), "size": Even()},
         check=lambda out, kw: out.dtype == torch.float64 and np.allclose(
             out.numpy(), [TAU * kw["base"] ** (2 * i / kw["size"]) for i in range(kw["size"] // 2)],
             rtol=1e-12)),
    Spec("helpers.widgets.rotary.draw_frequencies", call=rw.draw_frequencies,
         good=lambda: {**FREQUENCY_GOOD, "fig": None}, rules={**FREQUENCY_RULES, "fig": FIG},
         valid=_frequency_valid, check=_frequencies_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _frequencies_right)]),
    Spec("helpers.widgets.rotary.frequency_view", call=rw.frequency_view,
         good=lambda: dict(FREQUENCY_GOOD),
         rules={"base": Real(10.0, 1e6)},
         unfuzzed={"size": "passed on to draw_frequencies (checked first), whose spec fuzzes it; "
                           "case size=3 here",
                   "num_positions": "passed on to draw_frequencies (checked first), whose spec "
                                    "fuzzes it; case num_positions=1 here",
                   "train_length": "passed on to draw_frequencies (checked first), whose spec "
                                   "fuzzes it; case train_length=33 here"},
         check=lambda out, kw: _is_view(out) and _frequencies_right(out.result, kw),
         bad=[Case("size=3", lambda kw: kw.update(size=3), r"^size must be an even int >= 2"),
              Case("num_positions=1", lambda kw: kw.update(num_positions=1), r"^num_positions must be"),
              Case("train_length=33", lambda kw: kw.update(train_length=33),
                   r"^train_length must be an int in \[1, 32\]")]),
    Spec("helpers.widgets.rotary.demo_views", call=rw.demo_views, good=dict, limit=60,
         check=lambda out, kw: set(out) == {"shift", "frequencies"}
         and all(_is_view(v) for v in out.values())),
]

SPECS: list[Spec] = COMMON + POSITIONAL + TRANSFORMER + SCALE + ROTARY
