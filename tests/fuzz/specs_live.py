"""Specs for the live views: ``helpers.widgets.live`` (the widget, its marks and the scene) and
its view modules ``nw``, ``dates``, ``induction``, ``sinks``, ``memory`` and ``decoder`` (see
``tests/fuzz/__init__.py`` for the format and ``helpers/widgets/live/CONTRACT.md``).

The models are each module's ``demo_model()``, built once per run (``functools.cache``: 1-3 s
each; nw's with 20 steps, its trained value does not matter here). ``good()`` only reads the
caches, so that a refused case costs no model and no figure: most generated cases are refused
before anything is drawn. A valid view (``live_view``) draws twice (``verify_frame``): a few
tenths of a second each, so the pools with many valid values (controls) are swept on
``forward`` and ``draw``, and a view's control is fuzzed with a plain rule.

The reader's text: a parse refuses a bad text with the page's own message (word for word what
the view's JS says, which the browser tests compare), written for the reader: it says what is
accepted, not the parameter's name. So the pool's one odd string ('2') cannot be judged by the
generic pattern where '2' is not a valid input (nw, induction, memory): there ``text`` is
unfuzzed and every ``BAD_INPUTS`` text of the module is a bad case with its own message, and a
text that is not a str a bad case with "text must be a str". Where '2' parses (dates: a digit;
sinks: token 2), ``text`` is fuzzed."""

from __future__ import annotations

import base64
import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from helpers import attention as plain_module  # a module that is not a live view
from helpers.seq2seq import SRC_VOCAB, Seq2Seq, output_text, tokenize_source
from helpers.streaming import TinyDecoder
from helpers.transformer import DecoderLM
from helpers.widgets import live
from helpers.widgets.live import dates, decoder, induction, memory, nw, sinks
from tests.fuzz import Case, OneOf, Spec, T

ANY = lambda v: False  # noqa: E731  only the real object (a model, parse()'s output): by hand
FIG = lambda v: v is None or isinstance(v, Figure)  # noqa: E731  a draw function's ``fig``
FIGURE = lambda v: isinstance(v, Figure)  # noqa: E731
TEXT = lambda v: isinstance(v, str)  # noqa: E731  (the pool's '2' parses where this is used)
NAME = lambda v: isinstance(v, str) and bool(v)  # noqa: E731
NOT_A_TEXT = [("None", None), ("int", 3), ("bytes", b"3 May"), ("list", ["A"])]
TEXT_UNFUZZED = ("the reader's input, refused with the page's own message (parse's contract: "
                 "word for word what the JS says), which says what is accepted, not the "
                 "parameter: the pool's '2' is not one; each BAD_INPUTS text is a bad case "
                 "with its message, a non-str a bad case ('text must be a str')")


def _bad_texts(module, param: str = "text", prefix: str = "") -> list[Case]:
    """Every BAD_INPUTS text of ``module`` with its message, and texts that are not a str."""
    cases = [Case(f"{prefix}text-bad#{i}", lambda kw, t=t: kw.update({param: t}), re.escape(m))
             for i, (t, m) in enumerate(module.BAD_INPUTS.items())]
    return cases + [Case(f"{prefix}text-{shown}", lambda kw, v=v: kw.update({param: v}),
                         rf"^text must be a str, got {type(v).__name__}")
                    for shown, v in NOT_A_TEXT]


def _marked(fig: Figure) -> dict[str, object]:
    """The marked parts of ``fig``: {name: artist or axis}."""
    found = fig.findobj(lambda a: isinstance(a.get_gid(), str) and a.get_gid().startswith("live:"))
    return {a.get_gid()[5:]: a for a in found}


def _image(fig: Figure, name: str) -> np.ndarray:
    return np.ma.getdata(_marked(fig)[name].get_array()).astype(np.float64)


def _jsonable(out: object) -> bool:
    json.dumps(out)
    return True


def _decoded(t: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(t["f32"]), "<f4").reshape(t["shape"])


def _view_right(view: object, kind: str, text: str, kwargs: dict) -> bool:
    scene = view.scene_data() if isinstance(view, live.LiveView) else {}
    return (isinstance(view, live.LiveView) and view.kind == kind and view.text == text
            and view.kwargs == kwargs and scene["live"]["kind"] == kind
            and scene["live"]["input"]["text"] == text and isinstance(view.result, Figure))


# ------------------------------------------------------------------------------ the models
@functools.cache
def _nw_model() -> object:
    return nw.demo_model(steps=20)


@functools.cache
def _dates_model() -> Seq2Seq:
    return dates.demo_model()


@functools.cache
def _induction_model() -> DecoderLM:
    return induction.demo_model()


@functools.cache
def _sinks_models() -> dict:
    return sinks.demo_model()


@functools.cache
def _memory_models() -> dict:
    return memory.demo_model()


def _nw_with_w(w: float) -> object:
    """A scalar-w NWKernelRegression whose w is ``w`` (its own points do not matter here)."""
    from helpers.kernel_regression import NWKernelRegression
    model = NWKernelRegression(torch.arange(3.0), torch.zeros(3), per_key=False)
    with torch.no_grad():
        model.w.fill_(w)
    return model


def _per_key_nw() -> object:
    from helpers.kernel_regression import NWKernelRegression
    return NWKernelRegression(torch.arange(3.0), torch.zeros(3), per_key=True)


def _small_decoder(**kwargs) -> DecoderLM:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return DecoderLM(7, 8, 2, 2, max_len=16, **kwargs).eval()


def _small_tiny(**kwargs) -> TinyDecoder:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return TinyDecoder(7, 8, 2, 1, **kwargs).eval()


# ---------------------------------------------------------------------- helpers.widgets.live
@dataclass(frozen=True)
class RealTensor(T):
    """``tensor_json``'s argument: a tensor of any real dtype (bool, integer, floating) and any
    rank; complex, a list, a string, None and 'meta' are refused."""

    def variants(self, x: torch.Tensor) -> list[tuple[str, object, bool]]:
        return [(shown, value, shown not in ("'x'", "None", "list", "complex64", "meta"))
                for shown, value, _ in super().variants(x)]


def _json_right(out: dict, kw: dict) -> bool:
    t = kw["t"]
    want = (t.detach().to(torch.float32).numpy() if isinstance(t, torch.Tensor)
            else np.asarray(t, np.float32))
    back = _decoded(out)
    return (set(out) == {"shape", "f32"} and out["shape"] == list(want.shape)
            and np.array_equal(back, want, equal_nan=True) and _jsonable(out))


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


@functools.cache
def _axes():
    return Figure().add_subplot()


def _vocabulary(v: object) -> bool:
    if isinstance(v, str):
        return bool(v)
    return isinstance(v, Sequence) and len(v) > 0 and all(isinstance(s, str) for s in v)


NW_PARTS = {"fit", "points", "query", "answer", "title", "weights", "map_title"}
NW_OTHER = "3 | 1 2, 4 -0.3, 9 3"


def _nw_parsed() -> dict:
    return nw.parse(nw.DEFAULT_TEXT)


@functools.cache
def _nw_figure() -> Figure:
    return nw.draw(_nw_model(), _nw_parsed())


@functools.cache
def _nw_frame() -> list:
    return live.live_scene(nw.draw(_nw_model(), _nw_parsed()))["frame"]


@functools.cache
def _nw_other() -> Figure:
    return nw.draw(_nw_model(), nw.parse(NW_OTHER))


def _changed_frame() -> Figure:
    fig = nw.draw(_nw_model(), nw.parse(NW_OTHER))
    fig.text(0.5, 0.02, "depends on the input")  # not marked
    return fig


def _scene_right(out: dict, kw: dict) -> bool:
    frame = out["frame"]
    return (set(out["layouts"]) == NW_PARTS and out["layouts"]["weights"]["type"] == "heatmap"
            and out["layouts"]["title"]["type"] == "text"
            and out["layouts"]["points"]["type"] == "points"
            and all({"live": name} in frame for name in NW_PARTS) and _jsonable(out))


def _figure_with(change) -> Figure:
    fig = Figure(figsize=(3, 2))
    ax = fig.add_axes((0.2, 0.2, 0.6, 0.6))
    change(fig, ax)
    return fig


def _nw_view() -> live.LiveView:
    return nw.live_view(_nw_model())


def _refreshed() -> tuple:
    """(refresh()'s result, the scene's input before, the scene after the page set a text)."""
    view = _nw_view()
    before = view.scene_data()["live"]["input"]["text"]
    view.text = NW_OTHER  # as the page sets it: the scene follows at the next refresh
    return view.refresh(), before, view.scene_data()


@functools.cache
def _dates_view() -> live.LiveView:
    return dates.live_view(_dates_model())


def _set_text(**kw) -> live.LiveView:
    view = _dates_view()
    view.set_text(**kw)
    return view


def _good_view_args() -> dict:
    return dict(module=nw, model=_nw_model(), text=nw.DEFAULT_TEXT,
                controls={"w": widgets.Dropdown(options=list(nw.W_CHOICES),
                                                value=nw.W_CHOICES[1], description="w")})


def _js(*names: str) -> str:
    files = [live.VIEW_JS, live.RUNTIME_JS, *(live.HERE / n for n in names)]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


LIVE = [
    Spec("helpers.widgets.live.tensor_json", call=live.tensor_json,
         good=lambda: dict(t=_rand(2, 3)), rules={"t": RealTensor()}, check=_json_right,
         bad=[Case("str-array", lambda kw: kw.update(t=np.array(["a", "b"])),
                   r"^t must hold real numbers .* got dtype <U1"),
              Case("object-array", lambda kw: kw.update(t=np.array([None, 1])),
                   r"^t must hold real numbers .* got dtype object"),
              Case("complex-array", lambda kw: kw.update(t=np.ones(2, complex)),
                   r"^t must hold real numbers .* got dtype complex128")],
         edge=[Case("numpy-float64", lambda kw: kw.update(t=np.linspace(0, 1, 6).reshape(2, 3)),
                    _json_right),
               Case("not-contiguous", lambda kw: kw.update(t=_rand(3, 5).T), _json_right),
               # 0-d: one value; its shape comes as [1] (np.ascontiguousarray gives ndim >= 1),
               # which the page reads alike (data[0]; a size of 1 either way)
               Case("0-d", lambda kw: kw.update(t=torch.tensor(1.5)),
                    lambda out, kw: out["shape"] in ([], [1])
                    and _decoded(out).tolist() in (1.5, [1.5])),
               Case("empty", lambda kw: kw.update(t=torch.zeros(0, 3)), _json_right),
               Case("nan-inf", lambda kw: kw.update(t=torch.tensor([math.nan, math.inf])),
                    _json_right),
               Case("requires-grad", lambda kw: kw.update(t=_rand(2, 2).requires_grad_()),
                    _json_right),
               Case("numpy-int", lambda kw: kw.update(t=np.arange(4)), _json_right)]),
    Spec("helpers.widgets.live.mark", call=live.mark,
         good=lambda: dict(artist=Line2D([0, 1], [0, 1]), name="fit"),
         rules={"artist": ANY, "name": NAME},
         check=lambda out, kw: out is kw["artist"] and out.get_gid() == "live:" + kw["name"],
         bad=[Case("artist-rectangle", lambda kw: kw.update(artist=Rectangle((0, 0), 1, 1)),
                   r"^artist must be an AxesImage, Text, Line2D or PathCollection, got Rectangle"),
              Case("artist-axes", lambda kw: kw.update(artist=_axes()),
                   r"^artist must be .* got Axes"),
              Case("name-empty", lambda kw: kw.update(name=""),
                   r"^name must be a non-empty str, got ''")],
         edge=[Case(f"artist-{what}", lambda kw, make=make: kw.update(artist=make()),
                    lambda out, kw: out.get_gid() == "live:fit")
               for what, make in (("text", lambda: Text(0, 0, "x")),
                                  ("image", lambda: Figure().subplots().imshow(np.zeros((2, 2)))),
                                  ("scatter", lambda: Figure().subplots().scatter([0], [1])))]),
    Spec("helpers.widgets.live.mark_ticks", call=live.mark_ticks,
         good=lambda: dict(axis=_axes().xaxis, name="keys", vocabulary=["a", "bb", "a"]),
         rules={"axis": ANY, "name": NAME, "vocabulary": _vocabulary},
         check=lambda out, kw: (out is kw["axis"] and out.get_gid() == "live:" + kw["name"]
                                and out._live_vocabulary == list(dict.fromkeys(kw["vocabulary"]))),
         bad=[Case("vocabulary-empty", lambda kw: kw.update(vocabulary=[]),
                   r"^vocabulary must be a non-empty list of str, got \[\]"),
              Case("vocabulary-ints", lambda kw: kw.update(vocabulary=[1, 2]),
                   r"^vocabulary must be a non-empty list of str, got \[1, 2\]"),
              Case("vocabulary-empty-str", lambda kw: kw.update(vocabulary=""),
                   r"^vocabulary must be a non-empty list of str, got \[\]"),
              Case("axis-an-axes", lambda kw: kw.update(axis=_axes()),
                   r"^axis must be a matplotlib Axis, got Axes"),
              Case("name-empty", lambda kw: kw.update(name=""),
                   r"^name must be a non-empty str, got ''")],
         edge=[Case("vocabulary-letters", lambda kw: kw.update(vocabulary="ABCA"),
                    lambda out, kw: out._live_vocabulary == ["A", "B", "C"]),
               Case("vocabulary-tuple", lambda kw: kw.update(vocabulary=("x", "y")),
                    lambda out, kw: out._live_vocabulary == ["x", "y"]),
               Case("y-axis", lambda kw: kw.update(axis=_axes().yaxis),
                    lambda out, kw: out is _axes().yaxis and out.get_gid() == "live:keys")]),
    Spec("helpers.widgets.live.live_scene", call=live.live_scene,
         good=lambda: dict(fig=_nw_figure()), rules={"fig": FIGURE}, check=_scene_right,
         bad=[Case("centred-live-text", lambda kw: kw.update(fig=_figure_with(
                  lambda fig, ax: live.mark(ax.set_title("t"), "t"))),
                   r"^live text 't' must be left-aligned and level"),
              Case("two-parts-one-name", lambda kw: kw.update(fig=_figure_with(
                  lambda fig, ax: (live.mark(ax.plot([0, 1])[0], "a"),
                                   live.mark(ax.plot([1, 0])[0], "a")))),
                   r"^two live parts share a name"),
              Case("heatmap-log-norm", lambda kw: kw.update(fig=_figure_with(
                  lambda fig, ax: live.mark(ax.imshow(np.ones((2, 2)), norm=LogNorm(1, 2)), "m"))),
                   r"^a live heatmap needs a Normalize or PowerNorm, got LogNorm"),
              Case("line-with-markers", lambda kw: kw.update(fig=_figure_with(
                  lambda fig, ax: live.mark(ax.plot([0, 1], marker="o")[0], "l"))),
                   r"^live line 'l': no markers")],
         edge=[Case("nothing-marked", lambda kw: kw.update(fig=_figure_with(
             lambda fig, ax: ax.plot([0, 1]))),
             lambda out, kw: out["layouts"] == {} and isinstance(out["frame"], list))]),
    Spec("helpers.widgets.live.verify_frame", call=live.verify_frame,
         good=lambda: dict(frame=_nw_frame(), other=_nw_other(), what="nw view"),
         rules={"frame": ANY, "other": FIGURE, "what": TEXT},  # frame: a list, by hand
         check=lambda out, kw: out is None,
         bad=[Case("unmarked-part-changed", lambda kw: kw.update(other=_changed_frame()),
                   r"^nw view: a part not marked live drew differently for another input "
                   r"\(op \d+: .* then .*\); mark it with live.mark"),
              Case("frame-another-figure's", lambda kw: kw.update(frame=live.live_scene(
                  _figure_with(lambda fig, ax: None))["frame"]),
                   r"^nw view: a part not marked live drew differently"),
              Case("frame-a-tuple", lambda kw: kw.update(frame=tuple(_nw_frame())),
                   r"^frame must be a list \(live_scene\(fig\)\['frame'\]\), got tuple")],
         edge=[Case("same-input", lambda kw: kw.update(other=nw.draw(_nw_model(), _nw_parsed())),
                    lambda out, kw: out is None),
               Case("other-w", lambda kw: kw.update(other=nw.draw(
                   _nw_model(), nw.parse(NW_OTHER), w=nw.W_CHOICES[0])),
                    lambda out, kw: out is None)]),
    Spec("helpers.widgets.live.module_source", call=live.module_source,
         good=lambda: dict(files=["nw.js"]), rules={"files": ANY},  # a list of names: by hand
         check=lambda out, kw: out == _js(*kw["files"]),
         bad=[Case("unknown-file", lambda kw: kw.update(files=["nope.js"]),
                   r"^files must be a list of the live JS files' names \[.*\], got \['nope.js'\]"),
              Case("a-str", lambda kw: kw.update(files="nw.js"),
                   r"^files must be a list of .* got 'nw.js'"),
              Case("outside", lambda kw: kw.update(files=["../view.js"]),
                   r"^files must be .* got \['../view.js'\]"),
              Case("a-python-file", lambda kw: kw.update(files=["nw.py"]),
                   r"^files must be .* got \['nw.py'\]"),
              Case("an-int", lambda kw: kw.update(files=[1]), r"^files must be .* got \[1\]")],
         edge=[Case("none", lambda kw: kw.update(files=[]), lambda out, kw: out == _js()),
               Case("two-a-tuple", lambda kw: kw.update(files=("decoder.js", "induction.js")),
                    lambda out, kw: out == _js("decoder.js", "induction.js"))]),
    Spec("helpers.widgets.live.LiveFrameChanged", call=live.LiveFrameChanged, good=dict,
         check=lambda out, kw: isinstance(out, ValueError)),
    Spec("helpers.widgets.live.LiveView", call=live.LiveView, good=_good_view_args,
         rules={"module": ANY, "model": ANY, "controls": ANY},  # module, controls: by hand
         unfuzzed={"text": TEXT_UNFUZZED + " (the nw module's here)"},
         check=lambda out, kw: _view_right(out, "nw", kw["text"], {"w": nw.W_CHOICES[1]}),
         bad=[Case("module-not-live", lambda kw: kw.update(module=plain_module),
                   r"^module must be a live view module \(CONTRACT.md: .*\), got "
                   r"helpers.attention without KIND, JS, ACCEPTED, export, parse, draw"),
              Case("module-a-name", lambda kw: kw.update(module="nw"),
                   r"^module must be a live view module .* got str"),
              Case("model-per-key", lambda kw: kw.update(model=_per_key_nw()),
                   r"^model must be a scalar-w NWKernelRegression \(per_key=False\), got w of "
                   r"shape \(3,\)"),
              Case("controls-a-list", lambda kw: kw.update(controls=[kw["controls"]["w"]]),
                   r"^controls must be a dict of name -> ipywidgets control, got \["),
              Case("controls-not-widgets", lambda kw: kw.update(controls={"w": "1"}),
                   r"^controls must be a dict of name -> ipywidgets control, got \{'w': '1'\}"),
              Case("controls-unknown-name", lambda kw: kw.update(controls={
                  "width": widgets.Dropdown(options=["a"])}),
                   r"^controls must be named after helpers.widgets.live.nw.draw's controls "
                   r"\['w'\], got \['width'\]"),
              Case("controls-a-text-box", lambda kw: kw.update(controls={"w": widgets.Text()}),
                   r"^control 'w': a page view takes .* got Text"),
              Case("controls-value-not-allowed", lambda kw: kw.update(controls={
                  "w": widgets.Dropdown(options=["w = 2"])}),
                   r"^w must be one of \['1 \(untrained\)', 'trained scalar w'\], got 'w = 2'"),
              *_bad_texts(nw)[:3], *_bad_texts(nw)[-len(NOT_A_TEXT):]],
         edge=[Case("no-controls", lambda kw: kw.update(controls={}),
                    lambda out, kw: _view_right(out, "nw", kw["text"], {})),
               Case("dates-module", lambda kw: kw.update(
                   module=dates, model=_dates_model(), text="May 3, 1998", controls={}),
                    lambda out, kw: _view_right(out, "dates", "May 3, 1998", {}))]),
    Spec("helpers.widgets.live.LiveView.refresh", call=_refreshed, good=dict,
         check=lambda out, kw: (out[0] is None and out[1] == nw.DEFAULT_TEXT
                                and out[2]["live"]["input"]["text"] == NW_OTHER
                                and np.array_equal(_decoded(out[2]["live"]["model"]["w"]),
                                                   _nw_model().w.detach().numpy()))),
    Spec("helpers.widgets.live.LiveView.scene_data", call=lambda: _nw_view().scene_data(),
         good=dict,
         check=lambda out, kw: (out["title"] == "live.nw" and set(out["live"]["layouts"]) == NW_PARTS
                                and out["live"]["input"]["text"] == nw.DEFAULT_TEXT
                                and out["controls"][0]["values"] == list(nw.W_CHOICES)
                                and out["live"]["model"]["max_points"] == nw.MAX_POINTS)),
    Spec("helpers.widgets.live.LiveView.text_summary", call=lambda: _nw_view().text_summary(),
         good=dict,
         check=lambda out, kw: out == (f"[live.nw: live, input {nw.DEFAULT_TEXT!r}, "
                                       f"w = trained scalar w]")),
    Spec("helpers.widgets.live.LiveView.set_text", call=_set_text,
         good=lambda: dict(text="May 3, 1998"), rules={"text": TEXT},
         check=lambda out, kw: (out.text == kw["text"]
                                and f"input {kw['text']!r}" in out.text_summary()),
         bad=_bad_texts(dates),
         edge=[Case("impossible-date", lambda kw: kw.update(text="31 February 2001"),
                    lambda out, kw: out.text == "31 February 2001")]),
]


# ------------------------------------------------------------------------------ nw
def _nw_by_hand(model, parsed: dict, w: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Weights softmax(−((q − x_i) w)² / 2) over the points, for the grid and the query, in
    float64: (GRID, K) weights, (GRID,) predictions, the query's prediction."""
    x, y = np.array(parsed["x"]), np.array(parsed["y"])
    scale = 1.0 if w == nw.W_CHOICES[0] else float(model.w.detach()[0])

    def at(q: float) -> np.ndarray:
        s = -(((q - x) * scale) ** 2) / 2
        e = np.exp(s - s.max())
        return e / e.sum()

    weights = np.stack([at(q) for q in np.arange(nw.GRID) * (20.0 / nw.GRID)])
    return weights, weights @ y, float(at(parsed["query"]) @ y)


def _nw_forward_right(out: dict, kw: dict) -> bool:
    weights, fit, answer = _nw_by_hand(kw["model"], kw["parsed"], kw.get("w", nw.W_CHOICES[1]))
    return (set(out) == {"fit", "weights", "answer", "query_weights", "w"}
            and np.allclose(out["weights"], weights, atol=1e-5)
            and np.allclose(out["fit"], fit, atol=1e-4) and abs(out["answer"] - answer) < 1e-4)


def _nw_draw_right(fig: Figure, kw: dict) -> bool:
    weights, _, _ = _nw_by_hand(kw["model"], kw["parsed"], kw.get("w", nw.W_CHOICES[1]))
    order = np.argsort(kw["parsed"]["x"], kind="stable")
    return (isinstance(fig, Figure) and fig.get_label() == "live.nw"
            and set(_marked(fig)) == NW_PARTS
            and np.allclose(_image(fig, "weights"), weights[:, order], atol=1e-5))


NW_W = OneOf(nw.W_CHOICES)
NW_W_PLAIN = lambda v: isinstance(v, str) and v in nw.W_CHOICES  # noqa: E731  no extra values
NW_MODEL_BAD = [Case("model-per-key", lambda kw: kw.update(model=_per_key_nw()),
                     r"^model must be a scalar-w NWKernelRegression \(per_key=False\), got w of "
                     r"shape \(3,\)"),
                Case("model-a-decoder", lambda kw: kw.update(model=_small_decoder()),
                     r"^model must be a scalar-w NWKernelRegression .* got DecoderLM")]
NW_PARSED_BAD = [Case(f"parsed-{what}", lambda kw, change=change: kw.update(
    parsed=change(nw.parse(nw.DEFAULT_TEXT))), r"^parsed must be parse\(\)'s \{'query', 'x', 'y'\}")
    for what, change in (
        ("no-points", lambda p: {**p, "x": [], "y": []}),
        ("x-y-lengths", lambda p: {**p, "y": p["y"][:-1]}),
        ("query-outside", lambda p: {**p, "query": 25.0}),
        ("query-nan", lambda p: {**p, "query": math.nan}),
        ("query-a-str", lambda p: {**p, "query": "7.5"}),
        ("y-outside", lambda p: {**p, "y": [9.0] * len(p["x"])}),
        ("41-points", lambda p: {**p, "x": [1.0] * 41, "y": [1.0] * 41}),
        ("x-a-tuple", lambda p: {**p, "x": tuple(p["x"])}),
        ("a-key-more", lambda p: {**p, "w": 1.0}),
        ("a-key-less", lambda p: {"x": p["x"], "y": p["y"]}))]

NW = [
    Spec("helpers.widgets.live.nw.parse", call=nw.parse, good=lambda: dict(text=nw.DEFAULT_TEXT),
         unfuzzed={"text": TEXT_UNFUZZED},
         check=lambda out, kw: (out["query"] == 7.5 and len(out["x"]) == len(out["y"]) == 20
                                and out == nw.parse(nw.DEFAULT_TEXT.replace(", ", ",\n  "))),
         bad=_bad_texts(nw) + [
             Case("nan", lambda kw: kw.update(text="nan | 1 2"), r"The query must be a number"),
             Case("two-bars", lambda kw: kw.update(text="1 | 1 2 | 3 4"), r"one bar \|")],
         edge=[Case("one-point", lambda kw: kw.update(text=" 0 | 20 -2 "),
                    lambda out, kw: out == {"query": 0.0, "x": [20.0], "y": [-2.0]}),
               Case("forty-points", lambda kw: kw.update(
                   text="1e1 | " + ", ".join(["1.5 .5"] * 40)),
                    lambda out, kw: out["query"] == 10.0 and out["x"] == [1.5] * 40)]),
    Spec("helpers.widgets.live.nw.forward", call=nw.forward,
         good=lambda: dict(model=_nw_model(), parsed=_nw_parsed(), w=nw.W_CHOICES[1]),
         rules={"model": ANY, "parsed": ANY, "w": NW_W}, check=_nw_forward_right,
         bad=NW_MODEL_BAD + NW_PARSED_BAD,
         edge=[Case("one-point", lambda kw: kw.update(parsed=nw.parse("0 | 20 8")),
                    _nw_forward_right),
               Case("another-w", lambda kw: kw.update(model=_nw_with_w(4.0)), _nw_forward_right),
               Case("w-1", lambda kw: kw.update(model=_nw_with_w(4.0), w=nw.W_CHOICES[0]),
                    _nw_forward_right)]),
    Spec("helpers.widgets.live.nw.draw", call=nw.draw,
         good=lambda: dict(model=_nw_model(), parsed=_nw_parsed(), fig=None, w=nw.W_CHOICES[1]),
         rules={"model": ANY, "parsed": ANY, "fig": FIG, "w": NW_W}, check=_nw_draw_right,
         bad=NW_MODEL_BAD + NW_PARSED_BAD[:2],
         edge=[Case("own-fig", lambda kw: kw.update(fig=nw.draw(_nw_model(), nw.parse(NW_OTHER))),
                    _nw_draw_right),
               Case("foreign-fig", lambda kw: kw.update(fig=_figure_with(lambda f, a: None)),
                    _nw_draw_right)]),
    Spec("helpers.widgets.live.nw.export", call=nw.export, good=lambda: dict(model=_nw_model()),
         rules={"model": ANY},
         check=lambda out, kw: (_jsonable(out) and out["choices"] == list(nw.W_CHOICES)
                                and np.array_equal(_decoded(out["w"]), kw["model"].w.detach().numpy())
                                and out["grid"]["shape"] == [nw.GRID]),
         bad=NW_MODEL_BAD),
    Spec("helpers.widgets.live.nw.live_view", call=nw.live_view,
         good=lambda: dict(model=_nw_model(), text=nw.DEFAULT_TEXT, w=nw.W_CHOICES[1]),
         rules={"model": ANY, "w": NW_W_PLAIN}, unfuzzed={"text": TEXT_UNFUZZED},
         check=lambda out, kw: _view_right(out, "nw", kw["text"], {"w": kw["w"]}),
         bad=NW_MODEL_BAD + _bad_texts(nw)[:2] + _bad_texts(nw)[-len(NOT_A_TEXT):],
         edge=[Case("untrained-w", lambda kw: kw.update(w=nw.W_CHOICES[0], text=NW_OTHER),
                    lambda out, kw: _view_right(out, "nw", NW_OTHER, {"w": nw.W_CHOICES[0]}))]),
]


# ------------------------------------------------------------------------------ dates
def _dates_forward_right(out: dict, kw: dict) -> bool:
    S, T = dates.MAX_STEPS, len(kw["parsed"]["tokens"])
    logits = out["logits"]
    return (out["weights"].shape == (S, T) and logits.shape[0] == S
            and np.allclose(out["weights"].sum(-1), 1.0, atol=1e-5)
            and np.allclose(out["probs"].sum(-1), 1.0, atol=1e-6)
            and out["ids"] == logits.argmax(-1).tolist()
            and out["output"] == output_text(out["tokens"][:out["steps"]])
            and out["title"].startswith(f"'{kw['parsed']['text'][:33]}"))


def _dates_draw_right(fig: Figure, kw: dict) -> bool:
    out = dates.forward(kw["model"], kw["parsed"])
    return (isinstance(fig, Figure) and fig.get_label() == "live.dates"
            and set(_marked(fig)) == {"weights", "source", "steps", "title", "verdict"}
            and np.allclose(_image(fig, "weights"), out["weights"][:out["steps"]])
            and fig._suptitle.get_text() == out["title"])


def _dates_parse_right(out: dict, kw: dict) -> bool:
    tokens = tokenize_source(kw["text"])
    return (out["tokens"] == tokens and out["ids"] == SRC_VOCAB.encode(tokens)
            and out["text"] == " ".join(kw["text"].split()))


DATES_MODEL_BAD = [Case("model-no-attention", lambda kw: kw.update(model=Seq2Seq(attention=False)),
                        r"^model must be a Seq2Seq with attention \(Seq2Seq\(attention=True\)\), "
                        r"got a Seq2Seq with a MeanContextDecoder"),
                   Case("model-a-decoder", lambda kw: kw.update(model=_small_decoder()),
                        r"^model must be a Seq2Seq with attention .* got DecoderLM")]
DATES_PARSED_BAD = [Case(f"parsed-{what}", lambda kw, change=change: kw.update(
    parsed=change(dates.parse(dates.DEFAULT_TEXT))), r"^parsed must be parse\(\)'s dict")
    for what, change in (
        ("no-tokens", lambda p: {**p, "tokens": []}),
        ("unknown-token", lambda p: {**p, "tokens": ["Mai"]}),
        ("pad", lambda p: {**p, "tokens": ["<pad>"]}),
        ("17-tokens", lambda p: {**p, "tokens": ["1"] * 17}),
        ("tokens-a-str", lambda p: {**p, "tokens": "3 May 1998"}),
        ("no-note", lambda p: {k: v for k, v in p.items() if k != "note"}),
        ("just-tokens", lambda p: p["tokens"]))]

DATES = [
    Spec("helpers.widgets.live.dates.parse", call=dates.parse,
         good=lambda: dict(text=dates.DEFAULT_TEXT), rules={"text": TEXT},
         check=_dates_parse_right,
         bad=_bad_texts(dates),
         edge=[Case(f"{what}", lambda kw, t=t: kw.update(text=t),
                    lambda out, kw, target=target: (_dates_parse_right(out, kw)
                                                    and out["target"] == target))
               for what, t, target in (("impossible", "31 February 2001", None),
                                       ("dotted", "03.05.1998", "1998-05-03"),
                                       ("month-first", "September 3, 1998", "1998-09-03"),
                                       ("not-a-date", ", , .", None),
                                       ("spaces", "  3\tMay\n1998 ", "1998-05-03"),
                                       ("sixteen", "1" * 16, None))]),
    Spec("helpers.widgets.live.dates.forward", call=dates.forward,
         good=lambda: dict(model=_dates_model(), parsed=dates.parse(dates.DEFAULT_TEXT)),
         rules={"model": ANY, "parsed": ANY}, check=_dates_forward_right,
         bad=DATES_MODEL_BAD + DATES_PARSED_BAD,
         edge=[Case("one-token", lambda kw: kw.update(parsed=dates.parse(",")),
                    _dates_forward_right),
               Case("long", lambda kw: kw.update(parsed=dates.parse("September 30, 1998 May")),
                    _dates_forward_right),
               Case("training-mode-kept", lambda kw: kw.update(model=dates.demo_model().train()),
                    lambda out, kw: _dates_forward_right(out, kw) and kw["model"].training)]),
    Spec("helpers.widgets.live.dates.draw", call=dates.draw,
         good=lambda: dict(model=_dates_model(), parsed=dates.parse(dates.DEFAULT_TEXT), fig=None),
         rules={"model": ANY, "parsed": ANY, "fig": FIG}, check=_dates_draw_right,
         bad=DATES_MODEL_BAD + DATES_PARSED_BAD[:2],
         edge=[Case("own-fig", lambda kw: kw.update(fig=dates.draw(
             _dates_model(), dates.parse("1 1 1 1 1 1 1 1 1 1 1 1 1 1"))), _dates_draw_right),
               Case("foreign-fig", lambda kw: kw.update(fig=_figure_with(lambda f, a: None)),
                    _dates_draw_right)]),
    Spec("helpers.widgets.live.dates.export", call=dates.export,
         good=lambda: dict(model=_dates_model()), rules={"model": ANY},
         check=lambda out, kw: (_jsonable(out)
                                and set(out["weights"]) == set(kw["model"].state_dict())
                                and out["max_steps"] == dates.MAX_STEPS),
         bad=DATES_MODEL_BAD),
    Spec("helpers.widgets.live.dates.live_view", call=dates.live_view,
         good=lambda: dict(model=_dates_model(), text=dates.DEFAULT_TEXT),
         rules={"model": lambda v: v is None, "text": TEXT},  # None: demo_model()
         check=lambda out, kw: _view_right(out, "dates", kw["text"], {}),
         bad=DATES_MODEL_BAD + _bad_texts(dates)[:3]),
]


# ------------------------------------------------------------------------------ induction
def _induction_forward_right(out: dict, kw: dict) -> bool:
    tokens = kw["parsed"]
    T = len(tokens)
    ref = decoder.reference(kw["model"], tokens)
    heads = induction.pick_heads(kw["model"])
    lp, hp = heads["previous"]["layer"] - 1, heads["previous"]["head"] - 1
    li, hi = heads["induction"]["layer"] - 1, heads["induction"]["head"] - 1
    previous = out["previous"]
    score = None if T < 2 else float(np.mean([previous[i, i - 1] for i in range(1, T)]))
    return (previous.shape == out["induction"].shape == (T, T)
            and np.array_equal(previous, ref["weights"][lp, hp])
            and np.array_equal(out["induction"], ref["weights"][li, hi])
            and np.allclose(previous.sum(-1), 1.0, atol=1e-5)
            and not np.triu(previous, 1).any()
            and np.allclose(out["probs"], torch.softmax(torch.from_numpy(ref["logits"][-1]), -1))
            and (score is None and out["previous_score"] is None
                 or abs(out["previous_score"] - score) < 1e-5))


def _induction_draw_right(fig: Figure, kw: dict) -> bool:
    out = induction.forward(kw["model"], kw["parsed"])
    T = len(kw["parsed"])
    future = np.triu(np.ones((T, T), bool), 1)
    images = [_image(fig, kind) for kind in ("previous", "induction")]
    return (isinstance(fig, Figure) and fig.get_label() == "live.induction"
            and all(np.isnan(im[future]).all() for im in images)
            and np.allclose(images[0][~future], out["previous"][~future])
            and np.allclose(images[1][~future], out["induction"][~future]))


INDUCTION_MODEL_BAD = [
    Case("model-a-tiny-decoder", lambda kw: kw.update(model=_small_tiny()),
         r"^model must be notebook 08's DecoderLM \(induction.make_model\), got TinyDecoder"),
    Case("model-other-vocabulary", lambda kw: kw.update(model=_small_decoder()),
         r"^model must have the copy task's vocab_size and max_len \(16, 16\), got \(7, 16\)")]
INDUCTION_PARSED_BAD = [Case(f"parsed-{what}", lambda kw, p=p: kw.update(parsed=p),
                             r"^parsed must be parse\(\)'s list of 1 … 16 ids in \[0, 16\), got")
                        for what, p in (("empty", []), ("id-16", [1, 16]), ("negative", [-1]),
                                        ("17-ids", [1] * 17), ("bools", [True, False]),
                                        ("floats", [1.0]), ("a-str", "ABC"),
                                        ("a-tensor", torch.tensor([1, 2])))]
CONTROLS_NONE = r"^controls must be none \(this view has no controls\), got \['w'\]"

INDUCTION = [
    Spec("helpers.widgets.live.induction.parse", call=induction.parse,
         good=lambda: dict(text=induction.DEFAULT_TEXT), unfuzzed={"text": TEXT_UNFUZZED},
         check=lambda out, kw: out == [induction.LETTERS.index(c)
                                       for c in kw["text"].upper() if not c.isspace()],
         bad=_bad_texts(induction) + [
             Case("a-control", lambda kw: kw.update(w=1), CONTROLS_NONE)],
         edge=[Case("lower-case-tabs", lambda kw: kw.update(text="\tab\ncp "),
                    lambda out, kw: out == [0, 1, 2, 15]),
               Case("sixteen", lambda kw: kw.update(text="P" * 16),
                    lambda out, kw: out == [15] * 16)]),
    Spec("helpers.widgets.live.induction.forward", call=induction.forward,
         good=lambda: dict(model=_induction_model(), parsed=induction.parse(induction.DEFAULT_TEXT)),
         rules={"model": ANY, "parsed": ANY}, check=_induction_forward_right,
         bad=INDUCTION_MODEL_BAD + INDUCTION_PARSED_BAD + [
             Case("a-control", lambda kw: kw.update(w=1), CONTROLS_NONE)],
         edge=[Case("one-letter", lambda kw: kw.update(parsed=[3]), _induction_forward_right),
               Case("a-tuple", lambda kw: kw.update(parsed=(0, 1, 0, 1)),
                    _induction_forward_right)]),
    Spec("helpers.widgets.live.induction.draw", call=induction.draw,
         good=lambda: dict(model=_induction_model(),
                           parsed=induction.parse(induction.DEFAULT_TEXT), fig=None),
         rules={"model": ANY, "parsed": ANY, "fig": FIG}, check=_induction_draw_right,
         bad=INDUCTION_MODEL_BAD + INDUCTION_PARSED_BAD[:3] + [
             Case("a-control", lambda kw: kw.update(w=1), CONTROLS_NONE)],
         edge=[Case("one-letter", lambda kw: kw.update(parsed=[3]), _induction_draw_right)]),
    Spec("helpers.widgets.live.induction.export", call=induction.export,
         good=lambda: dict(model=_induction_model()), rules={"model": ANY},
         check=lambda out, kw: (_jsonable(out) and out["heads"] == induction.pick_heads(kw["model"])
                                and out["decoder"]["config"]["vocab_size"] == 16
                                and out["letters"] == induction.LETTERS),
         bad=INDUCTION_MODEL_BAD),
    Spec("helpers.widgets.live.induction.live_view", call=induction.live_view,
         good=lambda: dict(model=_induction_model(), text=induction.DEFAULT_TEXT),
         rules={"model": lambda v: v is None},  # None: demo_model() (built once a session)
         unfuzzed={"text": TEXT_UNFUZZED},
         check=lambda out, kw: _view_right(out, "induction", kw["text"], {}),
         bad=INDUCTION_MODEL_BAD + _bad_texts(induction)[:2] + [
             Case("text-None", lambda kw: kw.update(text=None), r"^text must be a str, got NoneType"),
             Case("a-control", lambda kw: kw.update(w=1), CONTROLS_NONE)]),
]


# ------------------------------------------------------------------------------ sinks
SINKS_SHORT = "14 12 12 13 6 1 6 14 15 10"  # 11 tokens with BOS: evicted from t = R on


def _sinks_parsed() -> list[int]:
    return sinks.parse(SINKS_SHORT)


def _sinks_forward_right(out: dict, kw: dict) -> bool:
    recent = int(kw.get("recent", 4))
    T = len(kw["parsed"])
    ok = True
    for c in ("kept", "evicted"):
        w = out[f"weights_{c}"]  # (H, T, T)
        ok &= (w.shape == (sinks.HEADS, T, T) and out[f"probs_{c}"].shape == (T, sinks.VOCAB + 1)
               and np.allclose(out[f"probs_{c}"].sum(-1), 1.0)
               and np.allclose(w.sum(-1) + out[f"nobody_{c}"], 1.0)
               and np.array_equal(out[f"bos_{c}"], w[:, :, 0])
               and np.allclose(out[f"others_{c}"], w[:, :, 1:].sum(-1))
               and not np.triu(w, 1).any())
    ok &= bool((out["bos_kept"] > 0).all()) and not out["bos_evicted"][:, recent:].any()
    if kw.get("variant", "softmax") == "softmax":
        ok &= np.allclose(out["nobody_kept"], 0.0)
    return bool(ok)


def _sinks_draw_right(fig: Figure, kw: dict) -> bool:
    T = len(kw["parsed"])
    values = _image(fig, "weights")
    return (isinstance(fig, Figure) and fig.get_label() == "live.sinks"
            and values.shape == (3 * sinks.HEADS, T) and _image(fig, "guesses").shape == (1, T)
            and np.allclose(values.reshape(sinks.HEADS, 3, T).sum(1), 1.0))


def _swapped_models() -> dict:
    m = _sinks_models()
    return {"softmax": m["sink logit"], "sink logit": m["softmax"]}


SINKS_MODEL_BAD = [
    Case("model-a-key-missing", lambda kw: kw.update(model={"softmax": _sinks_models()["softmax"]}),
         r"^model must be a dict with the keys \['softmax', 'sink logit'\] .* got \['softmax'\]"),
    Case("model-one-decoder", lambda kw: kw.update(model=_sinks_models()["softmax"]),
         r"^model must be a dict with the keys .* got TinyDecoder"),
    Case("model-swapped", lambda kw: kw.update(model=_swapped_models()),
         r"^model\['softmax'\] must not have a sink logit \(sink=False\), got sink=True"),
    Case("model-other-shape", lambda kw: kw.update(model={**_sinks_models(),
                                                        "softmax": _small_tiny()}),
         r"^model\['softmax'\] must have the notebook's shape .* got \(7, 7, 1, 2\)")]
SINKS_PARSED_BAD = [Case(f"parsed-{what}", lambda kw, p=p: kw.update(parsed=p),
                         r"^parsed must be parse\(\)'s list \[16, t_1, …\]")
                    for what, p in (("no-bos", [1, 2, 3]), ("only-bos", [16]),
                                    ("token-16", [16, 16]), ("48-tokens", [16] + [1] * 48),
                                    ("bools", [16, True]), ("a-str", "16 1 2"))]
SINKS_CONTROLS_BAD = [
    Case("variant-bogus", lambda kw: kw.update(variant="sinks"),
         r"^variant must be one of \('softmax', 'sink logit'\), got 'sinks'"),
    Case("variant-an-int", lambda kw: kw.update(variant=0), r"^variant must be one of .* got 0"),
    Case("recent-3", lambda kw: kw.update(recent=3), r"^recent must be one of \(2, 4, 8, 16\), got 3"),
    Case("recent-4.0", lambda kw: kw.update(recent=4.0), r"^recent must be one of .* got 4.0"),
    Case("recent-True", lambda kw: kw.update(recent=True), r"^recent must be one of .* got True"),
    Case("recent-tensor", lambda kw: kw.update(recent=torch.tensor(4)),
         r"^recent must be one of .* got tensor\(4\)"),
    Case("evict-a-str", lambda kw: kw.update(evict="yes"), r"^evict must be True or False, got 'yes'"),
    Case("evict-1", lambda kw: kw.update(evict=1), r"^evict must be True or False, got 1"),
    Case("unknown-control", lambda kw: kw.update(window=4),
         r"^controls must be among variant, recent and evict, got \['window'\]")]

SINKS = [
    Spec("helpers.widgets.live.sinks.parse", call=sinks.parse,
         good=lambda: dict(text=sinks.DEFAULT_TEXT), rules={"text": TEXT},
         check=lambda out, kw: out == [sinks.BOS] + [int(w) for w in re.split(r"[ ,\t\r\n]+", kw["text"])
                                                     if w and w != "BOS"],
         bad=_bad_texts(sinks),
         edge=[Case("leading-bos", lambda kw: kw.update(text="BOS 3,4\t5"),
                    lambda out, kw: out == [16, 3, 4, 5]),
               Case("47-tokens", lambda kw: kw.update(text=" ".join(["15"] * 47)),
                    lambda out, kw: out == [16] + [15] * 47)]),
    Spec("helpers.widgets.live.sinks.forward", call=sinks.forward,
         good=lambda: dict(model=_sinks_models(), parsed=_sinks_parsed()),
         rules={"model": ANY, "parsed": ANY}, check=_sinks_forward_right,
         bad=SINKS_MODEL_BAD + SINKS_PARSED_BAD + SINKS_CONTROLS_BAD,
         edge=[Case("sink-logit-R2", lambda kw: kw.update(variant="sink logit", recent=np.int64(2)),
                    _sinks_forward_right),
               Case("one-token-R16", lambda kw: kw.update(parsed=[16, 3], recent=16, evict=np.True_),
                    _sinks_forward_right)]),
    Spec("helpers.widgets.live.sinks.draw", call=sinks.draw,
         good=lambda: dict(model=_sinks_models(), parsed=_sinks_parsed(), fig=None),
         rules={"model": ANY, "parsed": ANY, "fig": FIG}, check=_sinks_draw_right,
         bad=SINKS_MODEL_BAD[:2] + SINKS_PARSED_BAD[:2] + SINKS_CONTROLS_BAD,
         edge=[Case("evicted-sink-logit", lambda kw: kw.update(
             variant="sink logit", recent=2, evict=True, parsed=[16, 1, 2, 3]),
             lambda out, kw: out.get_label() == "live.sinks"
             and np.isnan(_image(out, "weights")[0::3, 2:]).all())]),
    Spec("helpers.widgets.live.sinks.export", call=sinks.export,
         good=lambda: dict(model=_sinks_models()), rules={"model": ANY},
         check=lambda out, kw: (_jsonable(out) and list(out["models"]) == list(sinks.MODELS)
                                and out["models"]["sink logit"]["config"]["sink"] is True),
         bad=SINKS_MODEL_BAD),
    Spec("helpers.widgets.live.sinks.live_view", call=sinks.live_view,
         good=lambda: dict(model=_sinks_models(), text=SINKS_SHORT),
         rules={"model": lambda v: v is None, "text": TEXT},  # None: demo_model() (trained anew)
         check=lambda out, kw: _view_right(out, "sinks", kw["text"], {
             "variant": "softmax", "recent": 4, "evict": False}),
         bad=SINKS_MODEL_BAD[:1] + SINKS_CONTROLS_BAD + _bad_texts(sinks)[:2],
         edge=[Case("controls", lambda kw: kw.update(variant="sink logit", recent=8, evict=True),
                    lambda out, kw: _view_right(out, "sinks", kw["text"], {
                        "variant": "sink logit", "recent": 8, "evict": True}))]),
]


# ------------------------------------------------------------------------------ memory
MEMORY_PARSED = ((3, 17), (8, 42), (21, 5), (30, 9), (3, 40))  # parse(DEFAULT_TEXT)


def _memory_forward_right(out: dict, kw: dict) -> bool:
    writes = kw["parsed"]
    M, T = len(dict.fromkeys(k for k, _ in writes)), len(writes)
    kind = kw.get("memory", "delta")
    ok = (out["logits"].shape == out["probs"].shape == (M, 64)
          and np.allclose(out["probs"].sum(-1), 1.0, atol=1e-6)
          and out["recalled"] == out["logits"].argmax(-1).tolist()
          and out["weights"].shape == (M, T)
          and out["state"].shape == ((T, 32) if kind == "softmax" else (16, 16)))
    if kind in ("softmax", "linear"):  # normalised weights
        ok = ok and np.allclose(out["weights"].sum(-1), 1.0, atol=1e-5)
    return bool(ok)


def _memory_draw_right(fig: Figure, kw: dict) -> bool:
    writes = kw["parsed"]
    M, T = len(dict.fromkeys(k for k, _ in writes)), len(writes)
    U = len(dict.fromkeys(v for _, v in writes))
    probs = _image(fig, "probs")
    return (isinstance(fig, Figure) and fig.get_label() == "live.memory"
            and _image(fig, "weights").shape == (M, T) and probs.shape == (M, U + 1)
            and np.allclose(probs.sum(-1), 1.0) and np.abs(_image(fig, "state")).max() == 1.0
            and f"of {M} keys read back" in _marked(fig)["title"].get_text())


MEMORY_MODEL_BAD = [
    Case("model-a-key-missing", lambda kw: kw.update(model={
        k: v for k, v in _memory_models().items() if k != "decay"}),
         r"^model must be a dict with the keys \['softmax', 'linear', 'additive', 'decay', "
         r"'delta'\] .* got \['additive', 'delta', 'linear', 'softmax'\]"),
    Case("model-one-model", lambda kw: kw.update(model=_memory_models()["delta"]),
         r"^model must be a dict with the keys .* got RecallModel"),
    Case("model-kinds-swapped", lambda kw: kw.update(model={
        **_memory_models(), "linear": _memory_models()["softmax"]}),
         r"^model\['linear'\] must be a recall.RecallModel of kind 'linear', got RecallModel of "
         r"kind 'softmax'")]
MEMORY_PARSED_BAD = [Case(f"parsed-{what}", lambda kw, p=p: kw.update(parsed=p),
                          r"^parsed must be parse\(\)'s \(\(key, value\), …\): 1 … 12 pairs of ids "
                          r"in \[0, 64\), got")
                     for what, p in (("empty", ()), ("key-64", ((64, 1),)), ("value-neg", ((1, -1),)),
                                     ("13-writes", ((1, 1),) * 13), ("flat", (3, 17)),
                                     ("a-triple", ((1, 2, 3),)), ("bools", ((True, 1),)),
                                     ("a-str", "3=17"))]
MEMORY_OF = OneOf(memory.MEMORIES)
MEMORY_PLAIN = lambda v: isinstance(v, str) and v in memory.MEMORIES  # noqa: E731  no extra values

MEMORY = [
    Spec("helpers.widgets.live.memory.parse", call=memory.parse,
         good=lambda: dict(text=memory.DEFAULT_TEXT), unfuzzed={"text": TEXT_UNFUZZED},
         check=lambda out, kw: out == MEMORY_PARSED,
         bad=_bad_texts(memory),
         edge=[Case("separators", lambda kw: kw.update(text=" 3 = 17;8=42,21=5\n30=9\t3=40 "),
                    lambda out, kw: out == MEMORY_PARSED),
               Case("twelve", lambda kw: kw.update(text=" ".join(f"{k}=63" for k in range(12))),
                    lambda out, kw: out == tuple((k, 63) for k in range(12)))]),
    Spec("helpers.widgets.live.memory.forward", call=memory.forward,
         good=lambda: dict(model=_memory_models(), parsed=MEMORY_PARSED, memory="delta"),
         rules={"model": ANY, "parsed": ANY, "memory": MEMORY_OF}, check=_memory_forward_right,
         bad=MEMORY_MODEL_BAD + MEMORY_PARSED_BAD,
         edge=[Case("lists", lambda kw: kw.update(parsed=[[1, 2], [63, 0]]), _memory_forward_right),
               Case("one-write-softmax", lambda kw: kw.update(parsed=((0, 0),), memory="softmax"),
                    _memory_forward_right)]),
    Spec("helpers.widgets.live.memory.draw", call=memory.draw,
         good=lambda: dict(model=_memory_models(), parsed=MEMORY_PARSED, fig=None, memory="delta"),
         rules={"model": ANY, "parsed": ANY, "fig": FIG, "memory": MEMORY_OF},
         check=_memory_draw_right,
         bad=MEMORY_MODEL_BAD[:2] + MEMORY_PARSED_BAD[:2],
         edge=[Case("own-fig", lambda kw: kw.update(fig=memory.draw(
             _memory_models(), ((1, 1),), memory="softmax")), _memory_draw_right)]),
    Spec("helpers.widgets.live.memory.export", call=memory.export,
         good=lambda: dict(model=_memory_models()), rules={"model": ANY},
         check=lambda out, kw: (_jsonable(out) and list(out["models"]) == list(memory.MEMORIES)
                                and "beta_logit" in out["models"]["delta"]
                                and "decay_logit" in out["models"]["decay"]),
         bad=MEMORY_MODEL_BAD),
    Spec("helpers.widgets.live.memory.live_view", call=memory.live_view,
         good=lambda: dict(model=_memory_models(), text=memory.DEFAULT_TEXT, memory="delta"),
         rules={"model": lambda v: v is None, "memory": MEMORY_PLAIN},  # None: demo_model()
         unfuzzed={"text": TEXT_UNFUZZED},
         check=lambda out, kw: _view_right(out, "memory", kw["text"], {"memory": kw["memory"]}),
         bad=MEMORY_MODEL_BAD[:2] + _bad_texts(memory)[:2] + [
             Case("text-None", lambda kw: kw.update(text=None), r"^text must be a str, got NoneType")],
         edge=[Case("softmax", lambda kw: kw.update(memory="softmax", text="1=2"),
                    lambda out, kw: _view_right(out, "memory", "1=2", {"memory": "softmax"}))]),
]


# ------------------------------------------------------------------------------ decoder
def _export_right(out: dict, kw: dict) -> bool:
    m = kw["model"]
    c = out["config"]
    blocks = m.blocks
    return (_jsonable(out) and c["num_layers"] == len(blocks) == len(out["blocks"])
            and c["num_heads"] == blocks[0].attention.num_heads and c["vocab_size"] == m.vocab_size
            and np.array_equal(_decoded(out["embedding"]), m.embedding.weight.detach().numpy())
            and np.array_equal(_decoded(out["head"]["weight"]), m.head.weight.detach().numpy()))


def _reference_right(out: dict, kw: dict) -> bool:
    m, tokens = kw["model"], list(kw["tokens"])
    T, L, H = len(tokens), len(m.blocks), m.blocks[0].attention.num_heads
    w = out["weights"]
    ok = (out["logits"].shape == (T, m.head.out_features) and w.shape == (L, H, T, T)
          and not np.triu(w, 1).any())
    if not getattr(m.blocks[0].attention, "sink", False):
        ok = ok and np.allclose(w.sum(-1), 1.0, atol=1e-5)
    if kw.get("cache") is None:
        with torch.no_grad():
            ok = ok and np.allclose(out["logits"], m(torch.tensor([tokens]))[0].numpy(), atol=1e-6)
    return bool(ok)


DECODER_MODEL_BAD = [
    Case("model-latent", lambda kw: kw.update(model=_small_tiny(latent_size=4)),
         r"^model must not use latent attention .* got latent_size set"),
    Case("model-alibi", lambda kw: kw.update(model=_small_decoder(positional="alibi")),
         r"^model positional must be one of \('sinusoidal', 'rope', 'none'\) for the page, got "
         r"'alibi'"),
    Case("model-dropout-training", lambda kw: kw.update(model=_small_decoder(dropout=0.1).train()),
         r"^model must be in eval mode \(model.eval\(\)\) or have dropout 0"),
    Case("model-a-linear", lambda kw: kw.update(model=torch.nn.Linear(2, 2)),
         r"^model must be a DecoderLM or a TinyDecoder, got Linear")]

DECODER = [
    Spec("helpers.widgets.live.decoder.export_decoder", call=decoder.export_decoder,
         good=lambda: dict(model=_small_decoder()), rules={"model": ANY}, check=_export_right,
         bad=DECODER_MODEL_BAD,
         edge=[Case("tiny-everything", lambda kw: kw.update(model=_small_tiny(
             gate=True, num_kv_heads=1, ffn=True, sink=True, window=3)), _export_right),
               Case("rope-windows", lambda kw: kw.update(model=_small_decoder(
                   positional="rope", window=[2, None])),
                    lambda out, kw: _export_right(out, kw) and out["P"] is None
                    and out["config"]["windows"] == [2, None]),
               Case("dropout-eval", lambda kw: kw.update(model=_small_decoder(dropout=0.1)),
                    _export_right)]),
    Spec("helpers.widgets.live.decoder.reference", call=decoder.reference,
         good=lambda: dict(model=_small_decoder(), tokens=[1, 2, 3, 4, 5, 6], cache=None),
         rules={"model": ANY, "tokens": ANY,  # tokens: a list of ids, by hand
                "cache": lambda v: v is None},  # a dict: by hand
         check=_reference_right,
         bad=DECODER_MODEL_BAD + [
             Case(f"tokens-{what}", lambda kw, t=t: kw.update(tokens=t),
                  r"^tokens must be a non-empty list of int token ids, got")
             for what, t in (("empty", []), ("bools", [True, 1]), ("floats", [1.0, 2.0]),
                             ("a-str", "123"), ("a-tensor", torch.tensor([1, 2])),
                             ("nested", [[1, 2]]))] + [
             Case("tokens-out-of-range", lambda kw: kw.update(tokens=[1, 7]),
                  r"^tokens must lie in \[0, vocab_size\) = \[0, 7\), got values from 1 to 7"),
             Case("tokens-negative", lambda kw: kw.update(tokens=[-1]),
                  r"^tokens must lie in \[0, vocab_size\)"),
             Case("tokens-past-max-len", lambda kw: kw.update(tokens=[1] * 17),
                  r"^sequence length must be at most max_len=16, got 17"),
             Case("cache-window-0", lambda kw: kw.update(cache={"window": 0}),
                  r"^cache window must be an int >= 1, got 0"),
             Case("cache-no-window", lambda kw: kw.update(cache={}),
                  r"^cache window must be an int >= 1, got None"),
             Case("cache-sinks-negative", lambda kw: kw.update(cache={"window": 2, "sinks": -1}),
                  r"^cache sinks must be an int >= 0, got -1"),
             Case("cache-unknown-key", lambda kw: kw.update(cache={"size": 2}),
                  r"^cache must be None or a dict with keys window, sinks, rope_positions, got"),
             Case("cache-rope-positions", lambda kw: kw.update(
                 cache={"window": 2, "rope_positions": "new"}),
                  r"^cache rope_positions must be one of \('original', 'cache'\), got 'new'")],
         edge=[Case("cache-window-sinks", lambda kw: kw.update(cache={"window": 3, "sinks": 1}),
                    _reference_right),
               Case("cache-window-past-tokens", lambda kw: kw.update(cache={"window": 16}),
                    lambda out, kw: _reference_right(out, kw) and np.allclose(
                        out["logits"], decoder.reference(kw["model"], kw["tokens"])["logits"],
                        atol=1e-5)),
               Case("tiny-rope-cache", lambda kw: kw.update(
                   model=_small_tiny(sink=True), cache={"window": 2, "sinks": 1,
                                                        "rope_positions": "cache"}),
                    _reference_right),
               Case("tuple-numpy-ids", lambda kw: kw.update(tokens=(np.int64(1), 2, 6)),
                    _reference_right),
               Case("max-len", lambda kw: kw.update(tokens=[0] * 16), _reference_right)]),
]

SPECS: list[Spec] = LIVE + NW + DATES + INDUCTION + SINKS + MEMORY + DECODER
