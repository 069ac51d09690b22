"""Page views: a slider view whose picture is drawn in the browser, with or without a kernel.

Python draws each state of the view with the view's own matplotlib code, records the drawing
(``_record.Recorder``: paths, images, text runs in figure pixels), and sends the recordings to
``view.js``, which replays them on a canvas under native HTML controls. A move only looks up
and redraws: no kernel round trip, so the same view works in a static page.

What is stored is what each *part* of the figure depends on, not the product of all controls:
each artist of the figure (a line, an image, a title, an axis with its ticks) is recorded
once per combination of the controls it depends on, found by moving one control at a time.
Notebook 03's three per-row sliders give 3 parts × 9 states, not 9³ frames. Identical
recordings are stored once. The scene travels as one compact string trait (zlib + base64 of
JSON; ``scene_json`` decodes it), in the format below.

The output of a displayed view also carries an ``image/png`` of its current state (drawn by
the same matplotlib code: what GitHub, VS Code and an untrusted notebook show) and a
deterministic ``text/plain``.

The scene, version 1 (what ``view.js`` draws; traits ``scene``, ``index``: one value index per
control, set by the page on a move and by Python when a control is set there)::

    {"version": 1, "title": "pooling.nw", "width": 900, "height": 360,   # figure px
     "controls": [{"name", "label", "kind": "range" | "select" | "checkbox",
                   "values": [display strings]}, ...],
     "frame": [op, ..., {"slot": s}, ...],      # drawn in order; a slot draws one state
     "slots": [{"deps": [control indices], "table": [state id per combination of the deps'
                value indices, row-major, the last dep fastest]}, ...],
     "states": [[op, ...], ...]}                # distinct recordings

Ops, in figure pixels (origin top-left, y down), colours "#rrggbbaa", clip [x, y, w, h] or null:
``["p", svg_path_data (M/L/Z), fill, stroke, line_width, dash, clip]``;
``["i", x, y, w, h, cols, rows, palette, base64 cells (1 byte each, 2 little-endian when the
palette has more than 256 colours), clip]`` (drawn nearest-neighbour, row 0 at the top);
``["t", x, y, text, size_px, colour, angle_deg_ccw, weight, style, width_px]`` ((x, y): the
start of the baseline).
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anywidget
import ipywidgets as widgets
import numpy as np
import traitlets
from IPython.display import display
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure, SubFigure
from matplotlib.image import AxesImage

from ._record import Op, Recorder, record_figure, unsampled_images

__all__ = ["PageView", "scene_json"]

SCENE_VERSION = 1
MAX_STATES = 4000  # recordings per view: beyond this, a view must offer fewer values


@dataclass(frozen=True)
class Control:
    """One control as the page shows it: a finite list of values, and their labels."""

    name: str
    label: str
    kind: str  # "range" | "select" | "checkbox"
    values: tuple
    labels: tuple[str, ...]

    def index_of(self, value: object) -> int:
        """The index of ``value``, or of the nearest value for a number between grid points."""
        for i, v in enumerate(self.values):
            if v == value and (type(v) is type(value) or not isinstance(v, bool)):
                return i
        if isinstance(value, (int, float)) and all(isinstance(v, (int, float))
                                                   for v in self.values):
            return int(np.argmin([abs(v - value) for v in self.values]))
        raise ValueError(f"{self.name}: {value!r} is not one of the control's values")


def _float_label(value: float, fmt: str) -> str:
    return format(value, fmt.lstrip(":")) if fmt else f"{value:g}"


def control_from_widget(name: str, w: widgets.Widget) -> Control:
    """The values an ipywidgets control can take, as a ``Control`` (ipywidgets 7 and 8)."""
    label = getattr(w, "description", "") or name
    if isinstance(w, widgets.Checkbox):
        return Control(name, label, "checkbox", (False, True), ("off", "on"))
    if isinstance(w, (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons,
                      widgets.SelectionSlider)):
        values, labels = tuple(w._options_values), tuple(str(s) for s in w._options_labels)
        kind = "range" if isinstance(w, widgets.SelectionSlider) else "select"
        return Control(name, label, kind, values, labels)
    if isinstance(w, widgets.IntSlider):
        values = tuple(range(w.min, w.max + 1, w.step))
        return Control(name, label, "range", values, tuple(str(v) for v in values))
    if isinstance(w, widgets.FloatLogSlider):
        count = round((w.max - w.min) / w.step) + 1
        values = tuple(float(w.base ** (w.min + k * w.step)) for k in range(count))
        return Control(name, label, "range", values,
                       tuple(_float_label(v, w.readout_format) for v in values))
    if isinstance(w, widgets.FloatSlider):
        count = round((w.max - w.min) / w.step) + 1
        values = tuple(float(w.min + k * w.step) for k in range(count))
        return Control(name, label, "range", values,
                       tuple(_float_label(v, w.readout_format) for v in values))
    raise ValueError(f"control {name!r}: a page view takes Checkbox, Dropdown, ToggleButtons, "
                     f"RadioButtons, SelectionSlider, IntSlider, FloatSlider or FloatLogSlider, "
                     f"got {type(w).__name__}")


# ------------------------------------------------------------------------------ recording

def call_draw(draw: Callable[..., Figure], values: dict[str, object]) -> Figure:
    """``draw(**values)``, refused unless it returns a matplotlib Figure."""
    fig = draw(**values)
    if not isinstance(fig, Figure):
        raise ValueError(f"draw must return a matplotlib Figure for the controls' values, "
                         f"got {type(fig).__name__}")
    return fig


def figure_parts(fig: Figure) -> list[Artist]:
    """The figure's parts, in a fixed order: every child of every Axes (lines, images, texts,
    each axis with its ticks, spines, legend, background) and every figure- or subfigure-level
    artist that is not an Axes."""
    parts: list[Artist] = []

    def visit(container: Figure | SubFigure) -> None:
        for child in container.get_children():
            if isinstance(child, SubFigure):
                visit(child)
            elif isinstance(child, Axes):
                parts.extend(child.get_children())
            else:
                parts.append(child)

    visit(fig)
    return parts


def _ops_key(ops: list[Op]) -> str:
    return json.dumps(ops, separators=(",", ":"))


class _Scene:
    """Records a view's states: the frame once, then each part alone for the states asked."""

    def __init__(self, draw: Callable[..., Figure], controls: Sequence[Control],
                 default: tuple[int, ...]):
        self.draw, self.controls, self.default = draw, list(controls), default
        self.fig = self._draw(default)
        self.parts = figure_parts(self.fig)
        self.images = self.fig.findobj(AxesImage)
        self.recorder = Recorder(self.fig)
        self.cache: dict[tuple[tuple[int, ...], int], str] = {}
        self.last: dict[int, str] = {}  # each part's latest recording
        self.axis_keys: dict[int, tuple] = {}  # what each axis part's recording was drawn from
        self.frame = self._record_frame()

    def _draw(self, state: tuple[int, ...]) -> Figure:
        return call_draw(self.draw, {c.name: c.values[i] for c, i in zip(self.controls, state)})

    def _record_frame(self) -> list:
        """The whole figure in drawing order, each part replaced by {"slot": k}; the parts' own
        ops go to the cache for the default state."""
        rec, frame_parts = self.recorder, {id(p): k for k, p in enumerate(self.parts)}

        def wrap(part: Artist, k: int) -> None:
            real = part.draw

            def draw(renderer, *args, **kwargs):
                start = len(rec.ops)
                real(renderer, *args, **kwargs)
                self.cache[(self.default, k)] = self.last[k] = _ops_key(rec.ops[start:])
                del rec.ops[start:]
                rec.ops.append({"slot": k})

            part.draw = draw

        for part in self.parts:
            wrap(part, frame_parts[id(part)])
        try:
            with unsampled_images(self.images):
                self.fig.draw(rec)
        finally:
            for part in self.parts:
                del part.draw
        frame, rec.ops = rec.ops, []
        for part in self.parts:
            _unstale(part)
        for k in range(len(self.parts)):  # a part its container did not draw (hidden axes)
            self.cache.setdefault((self.default, k), "[]")
            self.last.setdefault(k, "[]")
        return frame

    def record(self, state: tuple[int, ...], wanted: Sequence[int]) -> dict[int, str]:
        """The ops of the parts ``wanted`` in ``state``, after the view's draw updated the
        figure in place. A part is drawn again only if matplotlib marked it stale (changed)
        since its last recording; otherwise that recording still holds."""
        if any((state, k) not in self.cache for k in wanted):
            if self._draw(state) is not self.fig or figure_parts(self.fig) != self.parts:
                raise _Rebuilt
            rec = self.recorder
            stale = [k for k in wanted if _stale(self.parts[k]) or k not in self.last]
            with unsampled_images(self.images):
                for ax in {p.axes for k in stale if (p := self.parts[k]).axes is not None}:
                    ax._unstale_viewLim()
                    ax.apply_aspect()
                    ax._update_title_position(rec)
                for k in stale:
                    part = self.parts[k]
                    key = _axis_key(part)
                    if key is not None and key == self.axis_keys.get(k):
                        _unstale(part)  # an axis marked stale with the same limits and ticks
                        continue
                    if part.axes is None or part.axes.get_visible():
                        part.draw(rec)
                    _unstale(part)
                    self.last[k], rec.ops = _ops_key(rec.ops), []
                    self.axis_keys[k] = key
            for k in wanted:
                self.cache[(state, k)] = self.last[k]
        return {k: self.cache[(state, k)] for k in wanted}


def _stale(artist: Artist) -> bool:
    """Whether matplotlib marked ``artist`` or anything inside it (a legend's texts, an axis's
    ticks) as changed since it was last recorded."""
    return artist.stale or any(_stale(child) for child in artist.get_children())


def _axis_key(part: Artist) -> tuple | None:
    """What an axis's drawing depends on, for an Axis part (None for other parts): its limits,
    its tick locators and formatters (objects: new tick labels mean a new formatter), label,
    visibility and place. Setting the same limits again marks an axis stale; redrawing it
    (laying out every tick label) is most of the cost of a recording."""
    if not isinstance(part, Axis):
        return None
    return (tuple(part.get_view_interval()), part.get_major_locator(),
            part.get_major_formatter(), part.get_minor_locator(), part.get_minor_formatter(),
            part.get_label_text(), part.label.get_visible(), part.get_visible(),
            part.axes.get_position().bounds, part.get_label_position(),
            part.get_ticks_position())


def _unstale(artist: Artist) -> None:
    """Mark ``artist`` and everything inside it as recorded (drawing leaves some children,
    such as ticks outside the view, marked stale)."""
    artist.stale = False
    for child in artist.get_children():
        _unstale(child)


class _Rebuilt(Exception):
    """The view's draw rebuilt the figure for some state (new artists): record it whole."""


def _product(controls: Sequence[Control], deps: Sequence[int]) -> int:
    return math.prod(len(controls[c].values) for c in deps)


def _states(default: tuple[int, ...], controls: Sequence[Control], deps: Sequence[int]):
    """Every state that varies ``deps`` (row-major, last fastest), the other controls at
    their defaults."""
    for combo in itertools.product(*(range(len(controls[c].values)) for c in deps)):
        state = list(default)
        for c, i in zip(deps, combo):
            state[c] = i
        yield tuple(state)


def _check_states(count: int, title: str, why: str = "") -> None:
    if count > MAX_STATES:
        raise ValueError(f"{title or 'view'}: {why}more than {MAX_STATES} states to record; offer fewer "
                         f"values on its controls")


def build_scene(draw: Callable[..., Figure], controls: Sequence[Control],
                default: Sequence[int]) -> dict:
    """The scene of a view (the JSON ``view.js`` draws): the frame, one slot per part that
    depends on a control, and the distinct recordings. ``default``: each control's index.
    Its title is the label of the figure drawn."""
    default = tuple(default)
    scene = _Scene(draw, controls, default)
    title = scene.fig.get_label()
    try:
        parts = range(len(scene.parts))
        base = scene.record(default, parts)
        deps: list[set[int]] = [set() for _ in parts]
        # One control at a time, then every pair together: a part that changes only when two
        # controls both leave their defaults (the highlighted panel of a (layer, head) grid)
        # is found by the pairs.
        groups = [(c,) for c in range(len(controls))]
        groups += list(itertools.combinations(range(len(controls)), 2))
        _check_states(sum(_product(controls, g) for g in groups), title)
        for group in groups:
            for state in _states(default, controls, group):
                ops = scene.record(state, parts)
                for c in group:  # does moving c alone, from its default to here, change it?
                    if state[c] != default[c]:
                        before = scene.record(state[:c] + (default[c],) + state[c + 1:], parts)
                        deps_c = [k for k in parts if ops[k] != before[k]]
                        for k in deps_c:
                            deps[k].add(c)
        deps = [sorted(d) for d in deps]
        frame, slots = scene.frame, {k: d for k, d in enumerate(deps) if d}
        _check_states(sum(_product(controls, d) for d in {tuple(d) for d in slots.values()}), title)
        tables = {}
        for d in {tuple(d) for d in slots.values()}:
            wanted = [k for k, dk in slots.items() if tuple(dk) == d]
            rows = [scene.record(state, wanted) for state in _states(default, controls, d)]
            for k in wanted:
                tables[k] = [row[k] for row in rows]
    except _Rebuilt:  # the figure changes its artists between states: one slot, all controls
        deps_all = list(range(len(controls)))
        _check_states(_product(controls, deps_all), title, "its figure is rebuilt between states: ")
        whole = []
        for state in _states(default, controls, deps_all):
            whole.append(_ops_key(record_figure(scene._draw(state))))
        frame, slots, tables = [{"slot": 0}], {0: deps_all}, {0: whole}
        base = {}
    # Parts that never change go into the frame itself; the others become slots.
    states: dict[str, int] = {}
    out_frame, out_slots = [], []
    for op in frame:
        if not isinstance(op, dict):
            out_frame.append(op)
        elif op["slot"] not in slots:
            out_frame.extend(json.loads(base[op["slot"]]))
        else:
            k = op["slot"]
            table = [states.setdefault(key, len(states)) for key in tables[k]]
            out_frame.append({"slot": len(out_slots)})
            out_slots.append({"deps": slots[k], "table": table})
    return {
        "version": SCENE_VERSION,
        "title": title,
        "width": round(scene.fig.bbox.width), "height": round(scene.fig.bbox.height),
        "controls": [{"name": c.name, "label": c.label, "kind": c.kind, "values": list(c.labels)}
                     for c in controls],
        "frame": out_frame,
        "slots": out_slots,
        "states": [json.loads(key) for key in states],
    }


def encode_scene(scene: dict) -> str:
    """The ``scene`` trait: base64 of zlib-compressed JSON."""
    raw = json.dumps(scene, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def scene_json(encoded: str) -> dict:
    """Decode a ``scene`` trait (what the page receives) back to its JSON."""
    if not isinstance(encoded, str):
        raise ValueError(f"encoded must be a str (a PageView's scene), got {type(encoded).__name__}")
    try:
        return json.loads(zlib.decompress(base64.b64decode(encoded, validate=True)))
    except (ValueError, zlib.error) as error:
        raise ValueError(f"encoded must be a page view's scene (base64 of zlib-compressed "
                         f"JSON), got {encoded[:24]!r} ({error})") from None


# ------------------------------------------------------------------------------ the widget

class PageView(anywidget.AnyWidget):
    """A slider view drawn in the page from precomputed recordings (see the module docstring).

    ``draw(**values) -> Figure`` draws one state (redrawing into one Figure it keeps);
    ``controls`` are ipywidgets controls (never displayed: the page draws native ones) whose
    values are the kernel-side state. Moving a control in the page sets ``index`` and the
    control's value; setting a control in Python moves the page. ``result`` is the Figure of the
    current values; ``refresh()`` recomputes the recordings (after the data behind ``draw``
    changed, e.g. a retrained model). The recordings are made when the view is first displayed
    (or ``scene`` is asked for), not when it is built.
    """

    _esm = Path(__file__).with_name("view.js")
    scene = traitlets.Unicode("").tag(sync=True)
    index = traitlets.List(traitlets.Int()).tag(sync=True)

    def __init__(self, draw: Callable[..., Figure], controls: dict[str, widgets.Widget]):
        if not callable(draw):
            raise ValueError(f"draw must be a callable returning a Figure, got "
                             f"{type(draw).__name__}")
        if not isinstance(controls, dict) or not all(
                isinstance(k, str) and isinstance(w, widgets.Widget) for k, w in controls.items()):
            raise ValueError(f"controls must be a dict of name → ipywidgets control, got "
                             f"{type(controls).__name__}")
        super().__init__()
        self._draw = draw
        self._widgets = dict(controls)
        self._controls = [control_from_widget(name, w) for name, w in self._widgets.items()]
        self._figure: Figure | None = None
        self._syncing = False
        self.index = self._indices()
        self.update()  # the first drawing's error is raised here
        for w in self._widgets.values():
            w.observe(self._control_moved, names="value")

    # Kernel-side state.
    @property
    def children(self) -> tuple[widgets.Widget, ...]:
        """The controls (kernel side), in page order."""
        return tuple(self._widgets.values())

    @property
    def kwargs(self) -> dict[str, object]:
        """The controls' current values, by name."""
        return {name: w.value for name, w in self._widgets.items()}

    @property
    def result(self) -> Figure:
        """The Figure of the controls' current values."""
        if self._figure is None:
            self.update()
        return self._figure

    def _indices(self) -> list[int]:
        """Each control's value as an index into its values (the nearest, between them)."""
        return [c.index_of(w.value) for c, w in zip(self._controls, self._widgets.values())]

    @property
    def title(self) -> str:
        return self.result.get_label()

    def update(self) -> Figure:
        """Draw the current values now and return the Figure."""
        self._figure = call_draw(self._draw, self.kwargs)
        return self._figure

    def _control_moved(self, change) -> None:
        self.update()  # the figure follows at once (no PNG: a drawing costs a few ms)
        if not self._syncing:
            self._syncing = True
            try:
                self.index = self._indices()
            finally:
                self._syncing = False

    @traitlets.observe("index")
    def _page_moved(self, change) -> None:
        if self._syncing or not self._widgets:
            return
        self._syncing = True
        try:
            for c, w, i in zip(self._controls, self._widgets.values(), change["new"]):
                if c.index_of(w.value) != i:
                    w.value = c.values[i]
        finally:
            self._syncing = False

    # What the page draws.
    def refresh(self) -> None:
        """Record every state again (the data behind ``draw`` changed) and push it to the page."""
        try:
            self.scene = encode_scene(build_scene(self._draw, self._controls, self._indices()))
        finally:
            self._figure = None  # recording drew other states into the Figure
        self.update()

    def scene_data(self) -> dict:
        """The scene as the page receives it (decoded JSON), recorded first if need be."""
        if not self.scene:
            self.refresh()
        return scene_json(self.scene)

    # How it shows up in a notebook.
    def text_summary(self) -> str:
        """The deterministic text/plain of the output: the view and its values."""
        values = ", ".join(f"{c.label} = {c.labels[i]}" for c, i in zip(self._controls, self.index))
        return f"[{self.title}: {values}]"

    def _repr_mimebundle_(self, **kwargs):
        from ._common import figure_png

        if not self.scene:
            self.refresh()
        data, metadata = super()._repr_mimebundle_(**kwargs)
        data["text/plain"] = self.text_summary()
        data["image/png"] = base64.b64encode(figure_png(self.result)).decode("ascii")
        return data, metadata

    def _ipython_display_(self, **kwargs) -> None:  # ipywidgets 7 displays through this hook
        data, metadata = self._repr_mimebundle_()
        display(data, metadata=metadata, raw=True)

    def __repr__(self) -> str:
        return f"PageView({self.text_summary()})"
