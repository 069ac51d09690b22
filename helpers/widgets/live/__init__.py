"""Live views: one of the series' models runs in the page on the reader's own input.

A page view (``..page``) replays recordings of states Python drew in advance. A live view takes
input no grid can enumerate (typed tokens, a date, points dragged on the figure) and computes in
the page: its ES module is ``view.js`` (the replay: ops, canvas, controls) followed by
``runtime.js`` (the input box, messages, the live summary and ``Picture``) and the view's own
files (the model's forward pass and what it draws), one module with no imports.

What stays true: the page draws, for an input, what the view's matplotlib ``draw`` draws for
it. Python records once what does not depend on the input (the *frame*: axes, spines, colour
bars, fixed labels), with a marker where each input-dependent part goes, and for each part
what the page needs to draw it as matplotlib would (``layouts``):

* a heatmap (``mark(image, name)``): the Axes' box in figure pixels, the colour map's table
  (``cmap(i, bytes=True)``, under, over and bad colours) and the norm (linear or power, fixed
  limits), so each cell gets matplotlib's colour for its value;
* tick labels (``mark_ticks(axis, name, vocabulary)``): each label of the vocabulary and the
  tick mark recorded once relative to its tick (a *stamp*), the axis label where it is drawn;
* a text (``mark(text, name)``, left-aligned): its recorded style, the string free;
* a line or a scatter (``mark(line, name)``): its recorded style and its Axes' data-to-pixel map.

``verify_frame`` records the frame for a second input and refuses a view whose unmarked parts
changed (a part that depends on the input must be marked). The page's numbers are the model's:
the browser tests run each engine's forward pass on >= 100 random inputs against the Python
oracle, and compare the canvas with matplotlib's pixels for a sample of inputs.

Scene: page.py's version 1 with ``"live"``: ``{"kind", "model" (the exported weights; each
tensor {"shape", "f32": base64 of little-endian float32}), "layouts" {name: layout}, "input"
{"label", "accepted", "text"}}`` and frame items ``{"live": name}``. See CONTRACT.md.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import anywidget
import ipywidgets as widgets
import numpy as np
import torch
import traitlets
from IPython.display import display
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.collections import PathCollection
from matplotlib.colors import Normalize, PowerNorm
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.text import Text

from .._common import check_figure
from .._record import Recorder, described_titles, titles, unsampled_images
from ..page import (SCENE_VERSION, Control, control_from_widget, describe_state, encode_scene,
                    figure_parts, scene_json)

__all__ = ["LiveView", "mark", "mark_ticks", "tensor_json", "live_scene", "verify_frame",
           "module_source", "LiveFrameChanged"]

KINDS = ("nw", "dates", "induction", "sinks", "memory")  # the live modules, by notebook
HERE = Path(__file__).resolve().parent
VIEW_JS = HERE.parent / "view.js"
RUNTIME_JS = HERE / "runtime.js"
GID = "live:"  # an artist whose gid starts so is drawn by the page from the input


class LiveFrameChanged(ValueError):
    """A part not marked live drew differently for another input (it must be marked)."""


def tensor_json(t: torch.Tensor | np.ndarray) -> dict:
    """A tensor as the page receives it: its shape and its float32 values, little-endian,
    row-major, base64 (exact: the page computes from the very float32 weights)."""
    if not isinstance(t, (torch.Tensor, np.ndarray)):
        raise ValueError(f"t must be a torch.Tensor or a NumPy array, got {type(t).__name__}")
    if isinstance(t, torch.Tensor) and t.device.type == "meta":
        raise ValueError("t must hold numbers (a tensor on a real device), got a 'meta' tensor")
    if (t.dtype.is_complex if isinstance(t, torch.Tensor) else t.dtype.kind not in "biuf"):
        raise ValueError(f"t must hold real numbers (bool, integer or floating), got dtype "
                         f"{t.dtype}")
    if isinstance(t, torch.Tensor):
        t = t.detach().to("cpu", torch.float32).contiguous().numpy()
    a = np.ascontiguousarray(t, dtype="<f4")
    return {"shape": list(a.shape), "f32": base64.b64encode(a.tobytes()).decode("ascii")}


def mark(artist: Artist, name: str) -> Artist:
    """Mark ``artist`` (an AxesImage, a Text, a Line2D or a scatter's PathCollection) as drawn
    by the page from the input, under ``name``."""
    if not isinstance(artist, (AxesImage, Text, Line2D, PathCollection)):
        raise ValueError(f"artist must be an AxesImage, Text, Line2D or PathCollection, got "
                         f"{type(artist).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    artist.set_gid(GID + name)
    return artist


def mark_ticks(axis: Axis, name: str, vocabulary: Sequence[str]) -> Axis:
    """Mark ``axis`` (a heatmap's x or y axis: one tick per cell) as drawn by the page, each tick
    label one of ``vocabulary``. Its label must be placed with ``axis.set_label_coords`` (else
    matplotlib moves it with the widest tick label, which the page does not)."""
    if not isinstance(axis, Axis):
        raise ValueError(f"axis must be a matplotlib Axis, got {type(axis).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    try:
        vocabulary = list(vocabulary)
    except TypeError:  # not iterable
        raise ValueError(f"vocabulary must be a non-empty list of str, got "
                         f"{type(vocabulary).__name__}") from None
    if not vocabulary or not all(isinstance(s, str) for s in vocabulary):
        raise ValueError(f"vocabulary must be a non-empty list of str, got {vocabulary[:5]!r}")
    axis.set_gid(GID + name)
    axis._live_vocabulary = list(dict.fromkeys(vocabulary))
    return axis


def _live_name(part: Artist) -> str | None:
    gid = part.get_gid()
    return gid[len(GID):] if isinstance(gid, str) and gid.startswith(GID) else None


def _live_parts(fig: Figure) -> list[Artist]:
    """Every marked part of ``fig`` (its Axes' children and figure-level artists)."""
    return [p for p in figure_parts(fig) if _live_name(p) is not None]


def _record(fig: Figure, draw: Callable[[Recorder], None]) -> list:
    rec = Recorder(fig)
    draw(rec)
    return rec.ops


def _shift(ops: list, dx: float, dy: float) -> list:
    """Text ops moved by (-dx, -dy): relative to an anchor at (dx, dy). Paths are kept with
    the anchor beside them (the page translates them)."""
    out = []
    for op in ops:
        if op[0] == "t":
            op = list(op)
            op[1], op[2] = round(op[1] - dx, 3), round(op[2] - dy, 3)
        out.append(op)
    return out


def _box(fig: Figure, bbox) -> list[float]:
    """A display-space box as [x, y, w, h] in figure pixels, y down."""
    x0, y0, x1, y1 = bbox.x0, bbox.y0, bbox.x1, bbox.y1
    return [float(x0), float(fig.bbox.height - y1), float(x1 - x0), float(y1 - y0)]


def _hex(rgba: np.ndarray) -> str:
    return "#" + bytes(np.asarray(rgba, np.uint8)).hex()


def _heatmap_layout(fig: Figure, im: AxesImage, ops: list) -> dict:
    norm, cmap = im.norm, im.cmap
    if type(norm) not in (Normalize, PowerNorm):
        raise ValueError(f"a live heatmap needs a Normalize or PowerNorm, got {type(norm).__name__}")
    if norm.vmin is None or norm.vmax is None:
        raise ValueError("a live heatmap needs fixed vmin and vmax (its colours must not "
                         "depend on the input's range)")
    if im.get_alpha() is not None:
        raise ValueError("a live heatmap is drawn opaque (no alpha)")
    lut = cmap(np.arange(cmap.N), bytes=True)
    under, over, bad = cmap(np.array([-1.0, 2.0, np.nan]), bytes=True)
    clip = next((op[9] for op in ops if op[0] == "i"), None)
    return {"type": "heatmap", "rect": _box(fig, im.axes.bbox), "lut": [_hex(c) for c in lut],
            "under": _hex(under), "over": _hex(over), "bad": _hex(bad),
            "norm": {"kind": "power" if isinstance(norm, PowerNorm) else "linear",
                     "vmin": float(norm.vmin), "vmax": float(norm.vmax),
                     "gamma": float(getattr(norm, "gamma", 1.0)), "clip": bool(norm.clip)},
            "clip": clip}


def _ticks_layout(fig: Figure, axis: Axis) -> dict:
    """Each vocabulary label and the tick mark as stamps relative to their tick, and the axis
    label (fixed). The figure has been drawn: the ticks exist."""
    ax = axis.axes
    kind = "x" if axis is ax.xaxis else "y"
    ticks = axis.get_major_ticks()
    if not ticks:
        raise ValueError(f"marked {kind} axis has no ticks: set one per cell")
    tick = ticks[0]
    loc = float(axis.get_majorticklocs()[0])
    xy = (loc, 0.0) if kind == "x" else (0.0, loc)
    px, py = ax.transData.transform(xy)
    anchor = float(px) if kind == "x" else float(fig.bbox.height - py)
    dx, dy = (anchor, 0.0) if kind == "x" else (0.0, anchor)
    label = tick.label1 if tick.label1.get_visible() else tick.label2
    old = label.get_text()
    stamps = {}
    try:
        for word in axis._live_vocabulary:
            label.set_text(word)
            stamps[word] = _shift(_record(fig, label.draw), dx, dy)
    finally:
        label.set_text(old)
    mark_ops = []
    for line in (tick.tick1line, tick.tick2line):
        if line.get_visible():
            mark_ops += _record(fig, line.draw)
    fixed = []
    for text in (axis.label, axis.offsetText):
        if text.get_visible() and text.get_text():
            fixed += _record(fig, text.draw)
    return {"type": "ticks", "axis": kind, "rect": _box(fig, ax.bbox), "anchor": anchor,
            "stamps": stamps, "mark": mark_ops, "fixed": fixed}


def _data_map(fig: Figure, ax) -> dict:
    if ax.get_xscale() != "linear" or ax.get_yscale() != "linear":
        raise ValueError("a live line or scatter needs linear axes")
    return {"rect": _box(fig, ax.bbox), "xlim": [float(v) for v in ax.get_xlim()],
            "ylim": [float(v) for v in ax.get_ylim()]}


def _layout(fig: Figure, part: Artist, title_rank: dict) -> dict:
    name = _live_name(part)
    if isinstance(part, Axis):
        if not hasattr(part, "_live_vocabulary"):
            raise ValueError(f"live part {name!r}: mark an axis with mark_ticks")
        return _ticks_layout(fig, part)
    if isinstance(part, AxesImage):
        with unsampled_images([part]):
            ops = _record(fig, part.draw)
        return _heatmap_layout(fig, part, ops)
    ops = _record(fig, part.draw)
    if isinstance(part, Text):
        if part.get_horizontalalignment() != "left" or part.get_rotation() != 0:
            raise ValueError(f"live text {name!r} must be left-aligned and level (its string "
                             f"changes; the page cannot centre text as matplotlib measures it)")
        template = next((op for op in ops if op[0] == "t"), None)
        if template is None:
            raise ValueError(f"live text {name!r} drew nothing: give it a default string")
        return {"type": "text", "op": template, "rank": title_rank.get(id(part))}
    if isinstance(part, Line2D):
        if part.get_marker() not in (None, "None", "none", "", " "):
            raise ValueError(f"live line {name!r}: no markers (a scatter draws points)")
        template = next((op for op in ops if op[0] == "p"), None)
        if template is None:
            raise ValueError(f"live line {name!r} drew nothing: give it default data")
        return {"type": "line", "op": template, **_data_map(fig, part.axes)}
    if isinstance(part, PathCollection):
        offsets = part.get_offsets()
        if len(offsets) == 0 or len(ops) % len(offsets):
            raise ValueError(f"live scatter {name!r}: draw it with at least one point, each "
                             f"point alike")
        per = len(ops) // len(offsets)
        px, py = part.get_offset_transform().transform(offsets[0])
        return {"type": "points", "marker": ops[:per], "anchor": [float(px), float(
            fig.bbox.height - py)], **_data_map(fig, part.axes)}
    raise ValueError(f"live part {name!r}: cannot draw a {type(part).__name__}")


def _frame(fig: Figure) -> list:
    """The figure's ops with ``{"live": name}`` where each marked part would draw (and no
    description of a marked title: the page gives it from the live text)."""
    rec = Recorder(fig)
    swapped = []
    for part in _live_parts(fig):
        name = _live_name(part)

        def draw(renderer, *args, _name=name, **kwargs):
            if rec.ops and isinstance(rec.ops[-1], list) and rec.ops[-1][0] == "d":
                rec.ops.pop()  # a marked title's description: the page writes its own
            rec.ops.append({"live": _name})

        swapped.append((part, part.__dict__.get("draw")))
        part.draw = draw
    try:
        with unsampled_images(fig.findobj(AxesImage)), described_titles(fig, rec):
            fig.draw(rec)
    finally:
        for part, own in swapped:
            if own is None:
                part.__dict__.pop("draw", None)
            else:
                part.draw = own
    return rec.ops


def live_scene(fig: Figure) -> dict:
    """The scene of a live figure drawn for some input: its frame and its parts' layouts."""
    check_figure("fig", fig)
    fig.draw_without_rendering()  # ticks and texts laid out
    rank = {id(text): r for text, r in titles(fig)}
    parts = _live_parts(fig)
    names = [_live_name(p) for p in parts]
    if len(set(names)) != len(names):
        raise ValueError(f"two live parts share a name: {names}")
    layouts = {_live_name(p): _layout(fig, p, rank) for p in parts}
    return {"version": SCENE_VERSION, "title": fig.get_label(),
            "width": round(fig.bbox.width), "height": round(fig.bbox.height),
            "controls": [], "frame": _frame(fig), "slots": [], "states": [],
            "layouts": layouts}


def verify_frame(frame: list, other: Figure, what: str) -> None:
    """Raise ``LiveFrameChanged`` unless ``other`` (the figure drawn for another input) has
    the same frame: every part not marked live must not depend on the input."""
    if not isinstance(frame, list):
        raise ValueError(f"frame must be a list (live_scene(fig)['frame']), got "
                         f"{type(frame).__name__}")
    check_figure("other", other)
    if not isinstance(what, str):
        raise ValueError(f"what must be a str (it names the view in the message), got "
                         f"{type(what).__name__}")
    again = live_scene(other)["frame"]
    if again == frame:
        return
    k = next((i for i, (a, b) in enumerate(zip(frame, again)) if a != b),
             min(len(frame), len(again)))
    show = lambda ops: str(ops[k])[:160] if k < len(ops) else "nothing"  # noqa: E731
    raise LiveFrameChanged(
        f"{what}: a part not marked live drew differently for another input (op {k}: "
        f"{show(frame)} then {show(again)}); mark it with live.mark or live.mark_ticks")


def module_source(files: Sequence[str]) -> str:
    """The ES module of a live view: view.js, runtime.js, then ``files`` (under live/)."""
    names = sorted(p.name for p in HERE.glob("*.js"))
    if (not isinstance(files, (list, tuple))
            or not all(isinstance(f, str) and f in names for f in files)):
        raise ValueError(f"files must be a list of the live JS files' names {names}, got "
                         f"{files!r:.80}")
    parts = [VIEW_JS, RUNTIME_JS, *(HERE / f for f in files)]
    return "\n".join(p.read_text(encoding="utf-8") for p in parts)


_classes: dict[tuple[str, ...], type] = {}


def _widget_class(files: tuple[str, ...]) -> type:
    """One LiveView subclass per module (anywidget reads ``_esm`` from the class)."""
    if files not in _classes:
        _classes[files] = type(f"LiveView_{'_'.join(Path(f).stem for f in files)}",
                               (LiveView,), {"_esm": module_source(files)})
    return _classes[files]


def _check_module(module: object) -> None:
    """Raise unless ``module`` is a live view module (CONTRACT.md)."""
    missing = [attr for attr in ("KIND", "JS", "ACCEPTED", "export", "parse", "draw")
               if not hasattr(module, attr)]
    if not isinstance(module, ModuleType) or missing:
        got = (f"{module.__name__} without {', '.join(missing)}" if isinstance(module, ModuleType)
               else type(module).__name__)
        raise ValueError(f"module must be a live view module (CONTRACT.md: KIND, JS, ACCEPTED, "
                         f"export, parse, draw), got {got}")


def _check_controls(module: ModuleType, controls: object) -> None:
    """Raise unless ``controls`` is a dict of name -> ipywidgets control, each name one that
    the module's ``draw`` takes (a draw with ``**controls`` judges the names itself)."""
    if not isinstance(controls, dict) or not all(
            isinstance(n, str) and isinstance(w, widgets.Widget) for n, w in controls.items()):
        raise ValueError(f"controls must be a dict of name -> ipywidgets control, got "
                         f"{controls!r:.80}")
    params = inspect.signature(module.draw).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        names = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "fig"]
        unknown = sorted(set(controls) - set(names))
        if unknown:
            raise ValueError(f"controls must be named after {module.__name__}.draw's "
                             f"controls {names}, got {unknown}")


class LiveView(anywidget.AnyWidget):
    """A figure the page computes from the reader's input with one of the series' models.

    Build one with ``LiveView.of(kind_module, model, text, **controls)`` (each live module's
    ``live_view`` does). ``text``: the input (the page sets it as the reader types, when a
    kernel is there); ``model``: set it to a retrained model and the page gets its weights;
    ``result``: the matplotlib Figure of the current input and controls (what the PNG shows).
    """

    scene = traitlets.Unicode("").tag(sync=True)
    text = traitlets.Unicode("").tag(sync=True)
    index = traitlets.List(traitlets.Int()).tag(sync=True)

    @classmethod
    def of(cls, module: ModuleType | str, model: object, text: str,
           controls: dict[str, widgets.Widget] | None = None) -> "LiveView":
        if isinstance(module, str):
            module = importlib.import_module(f"{__name__}.{module}")
        _check_module(module)
        view = _widget_class(tuple(module.JS))(module, model, text, controls or {})
        return view

    def __init__(self, module: ModuleType, model: object, text: str,
                 controls: dict[str, widgets.Widget]):
        _check_module(module)
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        _check_controls(module, controls)
        super().__init__()
        self._module = module
        self._widgets = dict(controls)
        self._controls: list[Control] = [control_from_widget(n, w)
                                         for n, w in self._widgets.items()]
        self._model = model
        self._figure: Figure | None = None
        self._parsed = module.parse(text, **self.kwargs)  # a bad first input is refused here
        self._drawn_text = text  # the input the figure shows: the last valid one
        with self.hold_trait_notifications():
            self.text = text
            self.index = self._indices()
        for w in self._widgets.values():  # a control set in Python moves the page's
            w.observe(lambda _change: setattr(self, "index", self._indices()), names="value")
        self.refresh()

    def _indices(self) -> list[int]:
        return [c.index_of(w.value) for c, w in zip(self._controls, self._widgets.values())]

    @property
    def kind(self) -> str:
        return self._module.KIND

    @property
    def model(self) -> object:
        return self._model

    @model.setter
    def model(self, model: object) -> None:
        """A retrained model: its weights go to the page and the figure is drawn again."""
        self._model = model
        self.refresh()

    @property
    def kwargs(self) -> dict[str, object]:
        return {name: w.value for name, w in self._widgets.items()}

    @property
    def result(self) -> Figure:
        """The Figure of the current input and controls."""
        self._figure = self._module.draw(self._model, self._parsed, fig=self._figure,
                                         **self.kwargs)
        return self._figure

    def refresh(self) -> None:
        """Record the frame and layouts again and export the model to the page. The frame is
        checked against the figure of another input (``verify_frame``) when the module gives
        random inputs."""
        fig = self.result
        scene = live_scene(fig)
        others = getattr(self._module, "random_texts", None)
        if others is not None:
            text = others(1, seed=0)[0]
            other = self._module.draw(self._model, self._module.parse(text, **self.kwargs),
                                      **self.kwargs)
            verify_frame(scene["frame"], other, f"{self.kind} view, input {text!r}")
        scene["controls"] = [{"name": c.name, "label": c.label, "kind": c.kind,
                              "values": list(c.labels)} for c in self._controls]
        scene["live"] = {"kind": self.kind, "model": self._module.export(self._model),
                         "layouts": scene.pop("layouts"),
                         "input": {"label": getattr(self._module, "INPUT_LABEL", "input"),
                                   "accepted": self._module.ACCEPTED, "text": self.text,
                                   "rows": getattr(self._module, "INPUT_ROWS", 1)}}
        self._title = scene["title"]  # the figure's label: the text summary's name of the view
        self.scene = encode_scene(scene)

    def scene_data(self) -> dict:
        return scene_json(self.scene)

    @traitlets.observe("text")
    def _text_moved(self, change) -> None:
        if not hasattr(self, "_module"):
            return
        try:
            self._parsed = self._module.parse(change["new"], **self.kwargs)
            self._drawn_text = change["new"]
        except ValueError:
            pass  # the page says why; the figure keeps the last valid input

    @traitlets.observe("index")
    def _page_moved(self, change) -> None:
        if not hasattr(self, "_widgets"):
            return
        for c, w, i in zip(self._controls, self._widgets.values(), change["new"]):
            if c.index_of(w.value) != i:
                w.value = c.values[i]

    def set_text(self, text: str) -> None:
        """Set the input from Python (the page follows): refused unless ``parse`` takes it."""
        self._module.parse(text, **self.kwargs)  # raises for a bad input; _text_moved keeps it
        self.text = text

    def text_summary(self) -> str:
        shown = describe_state(self._controls, self.index) if self._controls else ""
        return (f"[{self._title}: live, input {self._drawn_text!r}"
                f"{', ' + shown if shown else ''}]")

    def _repr_mimebundle_(self, **kwargs):
        from .._common import figure_png

        data, metadata = super()._repr_mimebundle_(**kwargs)
        data["text/plain"] = self.text_summary()
        data["image/png"] = base64.b64encode(figure_png(self.result)).decode("ascii")
        return data, metadata

    def _ipython_display_(self, **kwargs) -> None:  # ipywidgets 7 displays through this hook
        data, metadata = self._repr_mimebundle_()
        display(data, metadata=metadata, raw=True)

    def __repr__(self) -> str:
        return f"LiveView({self.text_summary()})"
