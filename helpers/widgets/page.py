"""Page views: a slider view whose picture is drawn in the browser, with or without a kernel.

Python draws each state of the view with the view's own matplotlib code, records the drawing
(``_record.Recorder``: paths, images, text runs in figure pixels), and sends the recordings to
``view.js``, which replays them on a canvas under native HTML controls. A move only looks up
and redraws: no kernel round trip, so the same view works in a static page.

What is stored is what each *part* of the figure depends on, not the product of all controls:
each artist of the figure (a line, an image, a title, an axis with its ticks) is recorded
once per combination of the controls it depends on, found by comparing its recordings as the
controls move (every state of a view with few states; else one control at a time and every
pair). Notebook 03's three per-row sliders give 3 parts × 9 states, not 9³ frames. Identical
recordings are stored once. The scene travels as one compact string trait (zlib + base64 of
JSON; ``scene_json`` decodes it), in the format below.

Exact, or loud: every build checks the page's picture against direct recordings of the whole
figure (``verify_scene``: every state of a view with at most ``VERIFY_ALL``, else
``VERIFY_SAMPLE`` of them); where they differ every state is recorded whole, and where that is
too many ``SceneMismatch`` names the state. A figure the recorder cannot replay (hatching,
Gouraud shading, TeX, sketched lines: ``UnsupportedDrawing``) is refused with a warning naming
the artist, and the page shows a still of it. A view shown inside a container (a VBox) is
recorded when its cell finishes, so the saved widget state holds it too.

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

A view the page cannot replay has the same keys, empty, plus ``"error"`` (the reason, naming
the artist) and ``"png"`` (base64: a still of the state it was recorded in), which the page
shows instead.

Ops, in figure pixels (origin top-left, y down), colours "#rrggbbaa"; clip: null,
[x, y, w, h], or [x, y, w, h, svg_path_data] (a clip path too; with no clip box the rectangle
is the whole figure):
``["p", svg_path_data (M/L/Z), fill, stroke, line_width, dash, clip, cap, join, dash_offset]``
(cap "butt" | "square" | "round" and join "miter" | "round" | "bevel" only when stroked;
dash_offset only when dashed and not 0; missing: butt, round, 0);
``["i", x, y, w, h, cols, rows, palette, base64 cells, clip]`` (each cell a little-endian
palette index of 1 byte, 2 above 256 colours, 3 above 65,536; drawn nearest-neighbour, row 0
at the top); ``["t", x, y, text, size_px, colour, angle_deg_ccw, weight, style, width_px,
clip, family]`` ((x, y): the start of the baseline; weight a CSS number 1..1000; clip and
family optional: family only for a face other than DejaVu Sans); ``["d", text, rank]`` draws
nothing: a title as drawn (rank 0: a suptitle, 1: an Axes' title), one line, mathtext plain,
for the canvas's description (its aria-label: the titles, suptitles first, then each control's
"label = value"). A quad mesh that tiles an axis-aligned grid (a colour bar's solids) is an
image op: as paths, its cells would leave pale seams between them on a canvas.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import math
import random
import warnings
import weakref
import zlib
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anywidget
import ipywidgets as widgets
import numpy as np
import traitlets
from IPython.display import display
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis, Tick
from matplotlib.figure import Figure, SubFigure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, Formatter

from ._record import (Op, Recorder, UnsupportedDrawing, described_titles, record_figure,
                      titles, unsampled_images)

__all__ = ["PageView", "scene_json"]  # (SceneMismatch and UnsupportedDrawing: raised, importable)

SCENE_VERSION = 1
MAX_STATES = 4000  # recordings per view: beyond this, a view must offer fewer values
PROBE_ALL = 64  # views with at most this many states are probed in every state
VERIFY_ALL = 16  # ... and at most this many are checked against direct recordings in every state
VERIFY_SAMPLE = 4  # else this many states are (every control at its last value, random ones)


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


def _grid(low: float, high: float, step: float) -> list[float]:
    """A slider's values: low, low + step, ... up to high, and high itself when the steps do
    not land on it (the slider's far end is a value too); never past high."""
    if not step > 0:
        raise ValueError(f"a slider's step must be > 0, got {step!r}")
    count = math.floor((high - low) / step * (1 + 1e-12) + 1e-9) + 1
    values = [min(low + k * step, high) for k in range(count)]
    if high - values[-1] > 1e-9 * step:
        values.append(high)
    return values


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
        values = tuple(int(v) for v in _grid(w.min, w.max, w.step))
        return Control(name, label, "range", values, tuple(str(v) for v in values))
    if isinstance(w, widgets.FloatLogSlider):  # min, max and step are exponents of base
        values = tuple(float(w.base ** e) for e in _grid(w.min, w.max, w.step))
        return Control(name, label, "range", values,
                       tuple(_float_label(v, w.readout_format) for v in values))
    if isinstance(w, widgets.FloatSlider):
        values = tuple(float(v) for v in _grid(w.min, w.max, w.step))
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


def _is_3d(ax: Axes) -> bool:
    return getattr(ax, "name", "") == "3d"


def figure_parts(fig: Figure) -> list[Artist]:
    """The figure's parts, in a fixed order: every child of every Axes (lines, images, texts,
    each axis with its ticks, spines, legend, background) and every figure- or subfigure-level
    artist that is not an Axes. A 3D Axes is one part (it projects, sorts and draws its panes
    itself: its children cannot be recorded apart)."""
    parts: list[Artist] = []

    def visit(container: Figure | SubFigure) -> None:
        for child in container.get_children():
            if isinstance(child, SubFigure):
                visit(child)
            elif isinstance(child, Axes) and not _is_3d(child):
                parts.extend(child.get_children())
            else:
                parts.append(child)

    visit(fig)
    return parts


def artist_name(part: Artist) -> str:
    """A reader's name for ``part``: its type, its label or text, and its Axes' title."""
    name = type(part).__name__
    label = part.get_label() if hasattr(part, "get_label") else ""
    if isinstance(label, str) and label and not label.startswith("_"):
        name += f" {label!r}"
    elif hasattr(part, "get_text") and str(part.get_text()).strip():
        name += f" {str(part.get_text())[:40]!r}"
    ax = part if isinstance(part, Axes) else part.axes
    if ax is not None:
        name += f" in the Axes {ax.get_title()!r}" if ax.get_title() else " in an Axes"
    return name


@contextmanager
def _named(part: Artist):
    """Re-raise the recorder's ``UnsupportedDrawing`` with the name of the part drawing."""
    try:
        yield
    except UnsupportedDrawing as error:
        raise UnsupportedDrawing(f"{artist_name(part)}: {error}") from None


def _ops_key(ops: list[Op]) -> str:
    return json.dumps(ops, separators=(",", ":"))


def _containers_visible(part: Artist) -> bool:
    """Whether every Axes and SubFigure that holds ``part`` is visible (else it is not drawn)."""
    holder = part.axes if part.axes is not None and part.axes is not part else None
    if holder is not None and not holder.get_visible():
        return False
    parent = (holder or part).get_figure(root=False) if hasattr(part, "get_figure") else None
    while isinstance(parent, SubFigure):
        if not parent.get_visible():
            return False
        parent = parent.get_figure(root=False)
    return True


_PROBE = np.array([[1.0, 1.0], [2.0, 3.0]])  # points whose transform tells two transforms apart


def _context(part: Artist, memo: dict | None = None) -> tuple | None:
    """What ``part``'s drawing depends on outside its own properties (which matplotlib's
    ``stale`` flag covers): whether its containers are visible, where its transform puts two
    points (Axes limits, position and scales all move them), its clip box and clip path, and
    its Axes' limits and place (an Axis's ticks). None: no key can be trusted (a 3D Axes
    projects with a view matrix of its own), so it is always drawn again.

    ``memo``: a dict shared by the parts of one figure in one state (nothing moves between
    their calls): each transform, clip and Axes is then worked out once, not once per part."""
    if isinstance(part, Axes) and _is_3d(part):
        return None
    memo = {} if memo is None else memo
    try:
        transform, box, path = part.get_transform(), part.get_clip_box(), part.get_clip_path()
        where = _memo(memo, transform, lambda: _where(transform))
        clip = (None if box is None else _memo(memo, box, lambda: tuple(box.bounds)),
                None if path is None else _memo(
                    memo, path, lambda: path.get_fully_transformed_path().vertices.tobytes()))
    except Exception:  # a transform that cannot take the probe: always draw again
        return None
    ax = part.axes
    place = None if ax is None else _memo(memo, ax, lambda: (
        tuple(ax.viewLim.bounds), tuple(ax.bbox.bounds), ax.get_xscale(), ax.get_yscale()))
    ticks = _locators(part) if isinstance(part, Axis) else None
    return (_containers_visible(part), part.get_visible(), where, clip, place, ticks)


def _where(transform) -> bytes:
    """What ``transform`` does: its matrix when it is affine (cached by matplotlib until one
    of its parts changes), else where it puts two probe points."""
    if transform.is_affine:
        return transform.get_matrix().tobytes()
    return transform.transform(_PROBE).tobytes()


def _memo(memo: dict, obj: object, compute: Callable[[], object]) -> object:
    """``compute()`` once per ``obj`` in ``memo`` (keyed by identity; ``obj`` is kept alive
    with its value, so that no other object can take its id while the memo lives)."""
    hit = memo.get(id(obj))
    if hit is None:
        hit = memo[id(obj)] = (obj, compute())
    return hit[1]


def _title_key(ax: Axes, renderer, boxes: dict) -> tuple | None:
    """Everything ``ax._update_title_position`` reads to place the titles, or None when it
    must run (child Axes, x tick labels or label on top, a y offset text such as '1e6'):
    whether each title has text, the bottom and top of its box where it starts (y = 1: they
    stand for its font, pad, lines and the Axes' place; it moves a title up only, by how far
    its bottom is below what it must clear, so its text along x does not matter: a title that
    only says another step is placed as before) and the window extents of the Axes it lines
    titles up with. The same key, the same places."""
    if ax._autotitlepos is False:  # placed by hand (set_title(y=...)): it returns at once
        return ()
    if ax.child_axes:
        return None
    place = tuple(ax.bbox.bounds)
    key: list = [place]
    for title in (ax.title, ax._left_title, ax._right_title):
        if not title.get_text():
            key.append(None)
            continue
        # Kept in ``boxes`` until the title or its Axes' place changes: laying it out is
        # most of this key's cost.
        if title.stale or boxes.get(title, (None,))[0] != place:
            (x, y), was_stale = title.get_position(), title.stale
            title.set_position((x, 1.0))
            box = title.get_window_extent(renderer)
            boxes[title] = (place, (box.y0, box.y1))
            title.set_position((x, y))
            title.stale = was_stale
        key.append(boxes[title][1])
    others = {id(a): a for a in _title_peers(ax)}
    for _, other in sorted(others.items()):  # the same Axes each time: by id, one order
        if other.yaxis.offsetText.get_visible() and _offset_text(other.yaxis):
            return None
        if (other.xaxis.get_ticks_position() in ("top", "unknown")
                or other.xaxis.get_label_position() == "top"):
            # It reads the x axis's box: the same ticks, labels and place, the same box.
            axis_key = _axis_key(other.xaxis)
            if axis_key is None:
                return None
            key.append((axis_key, _context(other.xaxis)))
        key.append(tuple(other.spines.get("outline", other).get_window_extent().bounds))
    return tuple(key)


def _title_peers(ax: Axes) -> list[Axes]:
    """The Axes whose extents ``ax._update_title_position`` lines ``ax``'s titles up with (its
    twins and the Axes aligned with it by ``align_titles``; ``ax`` itself among them), child
    Axes aside."""
    group = ax.get_figure(root=False)._align_label_groups["title"].get_siblings(ax)
    return [*ax._twinned_axes.get_siblings(ax), *group]


def _offset_text(axis: Axis) -> str:
    """The offset text ('1e6', '+3') ``axis`` shows with its ticks now: '' for formatters
    without one (a heatmap's fixed labels), else what its formatter gives the tick locations."""
    formatter = axis.get_major_formatter()
    if type(formatter).get_offset is Formatter.get_offset:
        return ""
    if not isinstance(formatter, FixedFormatter):
        formatter.format_ticks(axis.get_majorticklocs())
    return formatter.get_offset()


def _axis_key(part: Artist) -> tuple | None:
    """What an Axis part draws, when only the Axis itself is marked changed: views set the same
    limits or ticks again on every drawing, which marks the Axis stale, and redrawing it
    (laying out every tick label) is most of a recording's cost. None (draw it again) for
    other parts, and for an Axis any of whose ticks or labels changed (a tick label's colour)."""
    if not isinstance(part, Axis) or any(_stale(child) for child in _children(part)):
        return None
    major, minor = part.get_majorticklocs(), part.get_minorticklocs()
    return (tuple(part.get_view_interval()), tuple(major), tuple(minor),
            tuple(part.get_major_formatter().format_ticks(major)),
            tuple(part.get_minor_formatter().format_ticks(minor)),
            part.get_label_text(), part.label.get_visible(), part.get_visible(),
            part.get_label_position(), part.get_ticks_position(), part.offsetText.get_text())


class _Scene:
    """Records a view's states: the frame once, then each part alone for the states asked.

    Which parts a control changes is decided by comparing recordings. To keep that affordable,
    a part is drawn again only if something it draws from may have changed since its last
    recording: its own properties (matplotlib's ``stale`` flag, children included) or its
    context (``_context``: containers' visibility, transform, clip, Axes limits). That is an
    economy, not the guarantee: ``verify`` compares the page's picture with a direct recording
    of the whole figure, state by state, and raises where they differ.
    """

    def __init__(self, draw: Callable[..., Figure], controls: Sequence[Control],
                 default: tuple[int, ...]):
        self.draw, self.controls, self.default = draw, list(controls), default
        self.fig = self._draw(default)
        self.parts = figure_parts(self.fig)
        self.titles = {id(text): rank for text, rank in titles(self.fig)}  # id → rank
        self.images = self.fig.findobj(AxesImage)
        self.recorder = Recorder(self.fig)
        self.cache: dict[tuple[tuple[int, ...], int], str] = {}
        self.last: dict[int, str] = {}  # each part's latest recording
        self.context: dict[int, tuple | None] = {}  # the context it was recorded in
        self.axis_keys: dict[int, tuple | None] = {}  # an Axis part's _axis_key, likewise
        self.in_frame: set[int] = set()  # the parts the default drawing drew (have a place)
        self.title_places: dict = {}  # Axes → (_title_key, its titles' places) when last placed
        self.title_boxes: dict = {}  # title → (its Axes' place, its box at y = 1), for the key
        self.frame = self._record_frame()

    def _draw(self, state: tuple[int, ...]) -> Figure:
        return call_draw(self.draw, {c.name: c.values[i] for c, i in zip(self.controls, state)})

    def _draw_part(self, k: int) -> None:
        part, rec = self.parts[k], self.recorder
        with _named(part):
            if id(part) in self.titles:  # a title: its "d" op first, as record_figure has it
                rec.describe(part, self.titles[id(part)])
                part.draw(rec)
            elif isinstance(part, Axes):  # a 3D or inset Axes, its titles inside it
                with described_titles(self.fig, rec):
                    part.draw(rec)
            else:
                part.draw(rec)

    def _record_frame(self) -> list:
        """The whole figure in drawing order, each part replaced by {"slot": k}; the parts' own
        ops go to the cache for the default state."""
        rec, index = self.recorder, {id(p): k for k, p in enumerate(self.parts)}

        def wrap(part: Artist, k: int) -> None:
            real = part.draw

            def draw(renderer, *args, **kwargs):
                start = len(rec.ops)
                with _named(part):
                    real(renderer, *args, **kwargs)
                self.cache[(self.default, k)] = self.last[k] = _ops_key(rec.ops[start:])
                del rec.ops[start:]
                rec.ops.append({"slot": k})
                self.in_frame.add(k)

            part.draw = draw

        with described_titles(self.fig, rec):  # inside the wraps: a title's "d" op is its own
            for part in self.parts:
                wrap(part, index[id(part)])
            try:
                with unsampled_images(self.images):
                    self.fig.draw(rec)
            finally:
                for part in self.parts:
                    del part.draw
        frame, rec.ops = rec.ops, []
        for k, part in enumerate(self.parts):
            _unstale(part)
            self.context[k] = _context(part)
            self.axis_keys[k] = _axis_key(part)
        for k in range(len(self.parts)):  # a part its container did not draw (hidden axes)
            self.cache.setdefault((self.default, k), "[]")
            self.last.setdefault(k, "[]")
        return frame

    def _place_titles(self, ax: Axes) -> None:
        """Place ``ax``'s titles as ``Axes.draw`` does (``ax._update_title_position``), but
        where nothing it reads changed since it last ran (``_title_key``), put them where it
        put them then: it lays out every y tick label to find them, and the view's draw may
        have moved them back (``set_title`` starts a title at y = 1). A title left where it
        was is not marked changed."""
        titles = (ax.title, ax._left_title, ax._right_title)
        key = _title_key(ax, self.recorder, self.title_boxes)
        done = self.title_places.get(ax)
        if key is not None and done is not None and done[0] == key:
            for title, y in zip(titles, done[1]):
                x, now = title.get_position()
                if now != y:  # the key holds no x: where along x is the title's own
                    title.set_position((x, y))
            return
        read = {*ax.child_axes, *_title_peers(ax)}  # the Axes it reads
        with _kept_clean([*titles, *(axis for a in read for axis in (a.xaxis, a.yaxis))]):
            ax._update_title_position(self.recorder)
        self.title_places[ax] = (key, [t.get_position()[1] for t in titles])

    def record(self, state: tuple[int, ...], wanted: Sequence[int]) -> dict[int, str]:
        """The ops of the parts ``wanted`` in ``state``, after the view's draw updated the
        figure in place: each drawn again unless neither it nor its context changed since its
        last recording."""
        if any((state, k) not in self.cache for k in wanted):
            if self._draw(state) is not self.fig or figure_parts(self.fig) != self.parts:
                raise _Rebuilt
            rec = self.recorder
            with unsampled_images(self.images):
                # Axes first, as Axes.draw does: their aspect and titles' places are part of
                # what the parts are drawn from.
                for ax in {p.axes for k in wanted if (p := self.parts[k]).axes is not None}:
                    ax._unstale_viewLim()
                    ax.apply_aspect()
                    self._place_titles(ax)
                memo: dict = {}
                contexts = {k: _context(self.parts[k], memo) for k in wanted}
                again = [k for k in wanted if contexts[k] is None
                         or contexts[k] != self.context[k] or _stale(self.parts[k])]
                for k in again:
                    part = self.parts[k]
                    key = _axis_key(part)
                    if (key is not None and key == self.axis_keys[k]
                            and contexts[k] == self.context[k]):
                        _unstale(part)  # the same limits and ticks set again
                        continue
                    if _containers_visible(part):
                        self._draw_part(k)
                    _unstale(part)
                    self.last[k], rec.ops = _ops_key(rec.ops), []
                    self.context[k], self.axis_keys[k] = _context(part), key
                    if self.last[k] != "[]" and k not in self.in_frame:
                        raise _Rebuilt  # drawn here, but not in the default state: no place
            for k in wanted:
                self.cache[(state, k)] = self.last[k]
        return {k: self.cache[(state, k)] for k in wanted}


def _children(artist: Artist) -> list[Artist]:
    """``artist``'s children; an Axis's ticks as they are (``Axis.get_children`` runs the
    locators to make as many ticks as they ask for: that the Axis's context covers, see
    ``_locators``)."""
    if isinstance(artist, Axis):
        return [artist.label, artist.offsetText, *artist.majorTicks, *artist.minorTicks]
    return artist.get_children()


def _stale(artist: Artist) -> bool:
    """Whether matplotlib marked ``artist`` or anything inside it (a legend's texts, an axis's
    ticks) as changed since it was last recorded."""
    return artist.stale or any(_stale(child) for child in _children(artist))


def _unstale(artist: Artist) -> None:
    """Mark ``artist`` and everything inside it as recorded (drawing leaves some children,
    such as ticks outside the view, marked stale)."""
    artist.stale = False
    for child in _children(artist):
        _unstale(child)


def _drawn(artist: Artist) -> tuple | None:
    """What laying out a title or an axis's ticks may set on ``artist`` (a tick's place, a
    text's position and string, a tick line's data), or None for other artists."""
    if isinstance(artist, Text):
        return artist.get_position(), artist.get_text()
    if isinstance(artist, Line2D):
        return (np.asarray(artist.get_xdata(orig=True)).tobytes(),
                np.asarray(artist.get_ydata(orig=True)).tobytes())
    if isinstance(artist, Tick):
        return (artist.get_loc(),)
    return None


@contextmanager
def _kept_clean(artists: Sequence[Artist]):
    """Lay out with matplotlib inside (``Axes._update_title_position`` reads the axes' tick
    labels, which sets every tick's place and label again): afterwards, whatever was not
    marked changed before and was set to what it already was (``_drawn``) is not marked
    changed either, so it is not recorded again for nothing."""
    before = []

    def visit(artist: Artist) -> None:
        if not artist.stale and (drawn := _drawn(artist)) is not None:
            before.append((artist, drawn))
        for child in _children(artist):
            visit(child)

    for artist in artists:
        visit(artist)
    yield
    for artist, drawn in before:
        if artist.stale and _drawn(artist) == drawn:
            artist.stale = False


def _locators(axis: Axis) -> tuple:
    """Which locators ``axis`` has and their settings (``locator_params`` changes them in
    place, marking nothing stale): with the Axes' limits and place, what its ticks are."""
    return tuple((id(locator), type(locator).__name__, tuple(
        (name, value.tobytes() if isinstance(value, np.ndarray) else repr(value))
        for name, value in vars(locator).items() if name != "axis"))
        for locator in (axis.get_major_locator(), axis.get_minor_locator()))


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


def _in_drawing_order(controls: Sequence[Control], deps: Sequence[int]) -> list[int]:
    """``deps`` ordered for visiting their states: the control with the most values varies
    fastest. The same states, fewest changes in all (a control with 4 values changes 4 times,
    not 84, beside one of 21), and the parts that only a slow control changes (an axis's
    tick labels) are drawn again least often."""
    return sorted(deps, key=lambda c: len(controls[c].values))


def _check_states(count: int, title: str, why: str = "") -> None:
    if count > MAX_STATES:
        raise ValueError(f"{title or 'view'}: {why}more than {MAX_STATES} states to record; offer fewer "
                         f"values on its controls")


def describe_state(controls: Sequence[Control], state: Sequence[int]) -> str:
    """``state`` as a reader reads it: 'label = value, ...'."""
    return ", ".join(f"{c.label} = {c.labels[i]}" for c, i in zip(controls, state))


def scene_ops(scene: dict, index: Sequence[int]) -> list:
    """The ops the page draws for the value indices ``index``: the frame, each slot replaced by
    its state's ops (the state found row-major over the slot's controls, the last fastest)."""
    ops = []
    for item in scene["frame"]:
        if "slot" not in item:
            ops.append(item)
            continue
        slot, k = scene["slots"][item["slot"]], 0
        for c in slot["deps"]:
            k = k * len(scene["controls"][c]["values"]) + index[c]
        ops.extend(scene["states"][slot["table"][k]])
    return ops


def states_to_verify(controls: Sequence[Control], default: Sequence[int],
                     count: int = VERIFY_SAMPLE) -> list[tuple[int, ...]]:
    """Every state when there are at most ``VERIFY_ALL``; else ``count`` of them: every
    control at its last value, then random states (seeded: the same on every build)."""
    sizes = [len(c.values) for c in controls]
    if math.prod(sizes) <= VERIFY_ALL:
        return list(itertools.product(*map(range, sizes)))
    states = [tuple(n - 1 for n in sizes)]
    rng = random.Random(0)
    while len(states) < count:
        state = tuple(rng.randrange(n) for n in sizes)
        if state not in states and state != tuple(default):
            states.append(state)
    return states


class SceneMismatch(ValueError):
    """The page would draw another picture than matplotlib in some state."""


def verify_scene(scene: dict, draw: Callable[..., Figure], controls: Sequence[Control],
                 states: Sequence[Sequence[int]]) -> None:
    """Raise ``SceneMismatch``, naming the first such state and op, unless for every state of
    ``states`` the ops the page draws equal a direct recording of the whole figure drawn by
    ``draw`` in that state."""
    _check_scene(scene, controls, states, direct_recordings(draw, controls, states))


def direct_recordings(draw: Callable[..., Figure], controls: Sequence[Control],
                      states: Sequence[Sequence[int]]) -> list[str]:
    """For each of ``states``, the ops of the whole figure ``draw`` draws in it (JSON)."""
    return [_ops_key(record_figure(call_draw(draw, {c.name: c.values[i]
                                                    for c, i in zip(controls, state)})))
            for state in states]


def _check_scene(scene: dict, controls: Sequence[Control], states: Sequence[Sequence[int]],
                 recordings: Sequence[str]) -> None:
    """``verify_scene`` against ``recordings``: ``direct_recordings`` of ``states``."""
    for state, recording in zip(states, recordings):
        want = json.loads(recording)
        got = scene_ops(scene, state)
        if got != want:
            at = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
                      min(len(got), len(want)))
            page = got[at] if at < len(got) else "nothing"
            mpl = want[at] if at < len(want) else "nothing"
            raise SceneMismatch(
                f"{scene['title'] or 'view'}: the page would show another picture than "
                f"matplotlib draws in the state {describe_state(controls, state)}: op {at} "
                f"of {len(want)} is {_short(page)} in the page, {_short(mpl)} in matplotlib")


def _short(op: object) -> str:
    text = json.dumps(op)
    return text if len(text) <= 90 else text[:87] + "..."


def _whole_scene(draw: Callable[..., Figure], controls: Sequence[Control],
                 default: tuple[int, ...], title: str, why: str) -> tuple:
    """One slot on every control, each state a direct recording of the whole figure."""
    deps_all = list(range(len(controls)))
    _check_states(_product(controls, deps_all), title, why)
    states = list(_states(default, controls, deps_all))
    return [{"slot": 0}], {0: deps_all}, {0: direct_recordings(draw, controls, states)}, {}


def _probe_groups(controls: Sequence[Control]) -> list[tuple[int, ...]]:
    """The groups of controls moved together to find what each part depends on: all of them
    when the states are few, else one control at a time and every pair (a part that changes
    only when two controls both leave their defaults, the highlighted panel of a (layer,
    head) grid, is found by the pairs; a joint dependence on three is left to ``verify``)."""
    every = tuple(range(len(controls)))
    if _product(controls, every) <= PROBE_ALL:
        return [every]
    return [(c,) for c in every] + list(itertools.combinations(every, 2))


def build_scene(draw: Callable[..., Figure], controls: Sequence[Control],
                default: Sequence[int], *, png_values: dict | None = None) -> dict | tuple:
    """The scene of a view (the JSON ``view.js`` draws): the frame, one slot per part that
    depends on a control, and the distinct recordings. ``default``: each control's index.
    Its title is the label of the figure drawn.

    What a part depends on is found by comparing its recordings as the controls move; the
    scene is then checked against direct recordings of the whole figure (``verify_scene``:
    every state when there are at most ``VERIFY_ALL``, else ``VERIFY_SAMPLE`` of them). Where
    they differ, every state is recorded whole instead (exact, up to ``MAX_STATES``), or, past
    that, ``SceneMismatch`` names the state. A part the page cannot replay (``_record``'s
    ``UnsupportedDrawing``) is refused, named.

    The work is done side by side (``helpers.parallel.run_all``: forked processes, one per
    core, where that is safe; else one after the other here): the probing states in one run
    of states per core (each process goes on from the figure as the default state left it),
    and each direct recording the scene is checked against. With ``png_values`` (the
    controls' values by name), the PNG of that state is drawn too, and ``(scene, png)`` is
    returned.
    """
    from ..parallel import run_all, usable_cores  # noqa: PLC0415 (lazy: parallel imports torch)
    from ._common import figure_png  # noqa: PLC0415 (_common imports this module)

    default = tuple(default)
    checked = states_to_verify(controls, default)
    extra: list[Callable[[], object]] = []
    if png_values is not None:
        extra.append(lambda: figure_png(call_draw(draw, dict(png_values))))
    extra += [functools.partial(direct_recordings, draw, controls, [state]) for state in checked]

    scene = _Scene(draw, controls, default)
    title = scene.fig.get_label()
    parts = range(len(scene.parts))
    base = scene.record(default, parts)
    groups = _probe_groups(controls)
    _check_states(sum(_product(controls, g) for g in groups), title)
    probes = [(group, state) for group in groups
              for state in _states(default, controls, _in_drawing_order(controls, group))]
    runs = _runs(probes, usable_cores())
    # One thread each: a forked child must not use the parent's OpenMP pool (it would hang),
    # and the views' tensors are small.
    results = run_all([functools.partial(_probe, scene, run) for run in runs] + extra,
                      num_threads=1)
    found, rest = results[:len(runs)], results[len(runs):]
    png = rest.pop(0) if png_values is not None else None
    recordings = [recording for (recording,) in rest]

    exact = any(f is None for f in found)  # a probe saw the figure rebuilt: direct recordings
    if not exact:
        deps: list[set[int]] = [set() for _ in parts]
        cache = {}
        for run_deps, run_cache in found:
            for k in parts:
                deps[k] |= run_deps[k]
            cache.update(run_cache)
        slots = {k: sorted(d) for k, d in enumerate(deps) if d}
        combos = {tuple(d) for d in slots.values()}
        _check_states(sum(_product(controls, d) for d in combos), title)
        try:
            tables = _tables(draw, controls, default, slots, combos, cache)
        except _Rebuilt:
            exact = True
    if exact:
        frame, slots, tables, base = _whole_scene(
            draw, controls, default, title, "its figure is rebuilt between states: ")
        result = _assemble(scene.fig, title, controls, frame, slots, tables, base)
    else:
        result = _assemble(scene.fig, title, controls, scene.frame, slots, tables, base)
        try:
            _check_scene(result, controls, checked, recordings)
        except SceneMismatch as mismatch:
            try:
                frame, slots, tables, base = _whole_scene(draw, controls, default, title,
                                                          f"{mismatch}; ")
            except ValueError as too_many:
                raise SceneMismatch(str(too_many)) from None
            result = _assemble(scene.fig, title, controls, frame, slots, tables, base)
    return result if png_values is None else (result, png)


def _runs(probes: list, count: int) -> list[list]:
    """``probes`` cut into ``count`` runs of consecutive states (at most one per state; none
    empty): neighbours differ in one control, so each run redraws little from state to state."""
    count = max(1, min(count, len(probes)))
    size, extra = divmod(len(probes), count)
    runs, start = [], 0
    for i in range(count):
        stop = start + size + (i < extra)
        runs.append(probes[start:stop])
        start = stop
    return [run for run in runs if run]


def _probe(scene: _Scene, probes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]):
    """Record every part in each (group, state) of ``probes`` and in the states with one of
    the group's controls back at its default: which controls each part depends on (a set per
    part) and the recordings made, ``{(state, part): ops}``; None if the figure was rebuilt."""
    parts, default = range(len(scene.parts)), scene.default
    deps: list[set[int]] = [set() for _ in parts]
    # The states with one control back at its default, first and in drawing order: a run that
    # starts midway through a group (in a forked worker, from the default state) would jump
    # to each of them and back, redrawing most parts twice per state.
    befores = {state[:c] + (default[c],) + state[c + 1:]
               for group, state in probes for c in group if state[c] != default[c]}
    order = _in_drawing_order(scene.controls, range(len(default)))
    try:
        for state in sorted(befores, key=lambda s: tuple(s[c] for c in order)):
            scene.record(state, parts)
        for group, state in probes:
            ops = scene.record(state, parts)
            for c in group:  # does moving c alone, from its default to here, change it?
                if state[c] != default[c]:
                    before = scene.record(state[:c] + (default[c],) + state[c + 1:], parts)
                    for k in parts:
                        if ops[k] != before[k]:
                            deps[k].add(c)
    except _Rebuilt:
        return None
    return deps, dict(scene.cache)


def _tables(draw: Callable[..., Figure], controls: Sequence[Control], default: tuple[int, ...],
            slots: dict[int, list[int]], combos: set[tuple[int, ...]], cache: dict) -> dict:
    """Each slot's recordings, row-major over its controls, from ``cache`` where the probes made
    them; the others (parts that depend on three controls or more) recorded by a scene of their
    own, in runs of neighbouring states side by side (raises ``_Rebuilt`` as ``_Scene.record``
    does)."""
    from ..parallel import run_all, usable_cores  # noqa: PLC0415

    missing = []  # (state, wanted parts), in drawing order
    for d in sorted(combos):
        wanted = [k for k, dk in slots.items() if tuple(dk) == d]
        for state in _states(default, controls, _in_drawing_order(controls, d)):
            if any((state, k) not in cache for k in wanted):
                missing.append((state, wanted))
    if missing:
        scene = _Scene(draw, controls, default)
        found = run_all([functools.partial(_record_states, scene, run)
                         for run in _runs(missing, usable_cores())], num_threads=1)
        if any(f is None for f in found):
            raise _Rebuilt
        for recorded in found:
            cache.update(recorded)
    return {k: [cache[(state, k)] for state in _states(default, controls, d)]
            for d in combos for k in slots if tuple(slots[k]) == d}


def _record_states(scene: _Scene, states: Sequence[tuple[tuple[int, ...], list[int]]]):
    """``{(state, part): ops}`` for each (state, wanted parts) of ``states``; None if the
    figure was rebuilt."""
    recorded = {}
    try:
        for state, wanted in states:
            recorded.update({(state, k): ops for k, ops in scene.record(state, wanted).items()})
    except _Rebuilt:
        return None
    return recorded


def _assemble(fig: Figure, title: str, controls: Sequence[Control], frame: list, slots: dict,
              tables: dict, base: dict) -> dict:
    """The scene's JSON: parts that never change go into the frame itself; the others become
    slots, their recordings stored once each."""
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
        "width": round(fig.bbox.width), "height": round(fig.bbox.height),
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

# Views made in a kernel's cell and not displayed by themselves (inside a VBox, a Tab, any
# container) are recorded when the cell finishes: their scene must be in the widget state that
# the notebook saves, whether or not a browser ever renders them.
_pending: weakref.WeakSet = weakref.WeakSet()
_hooked: set[int] = set()  # the IPython shells the hook is registered with


def _record_pending(*_result) -> None:
    """IPython's post_run_cell hook: record the scene of every view still without one."""
    for view in list(_pending):
        if not view.scene:
            view.refresh()
    _pending.clear()


def _record_after_cell(view: "PageView") -> None:
    """In an IPython kernel, have ``view`` recorded when the current cell finishes (unless it
    is displayed, and so recorded, before then). Elsewhere (a script, a test) nothing: the
    scene is recorded when it is first displayed or asked for."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover (IPython is a dependency)
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return
    if id(shell) not in _hooked:
        shell.events.register("post_run_cell", _record_pending)
        _hooked.add(id(shell))
    _pending.add(view)


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
        self._png: tuple[dict, bytes] | None = None  # (values, the PNG of that state)
        self._syncing = False
        self.index = self._indices()
        self.update()  # the first drawing's error is raised here
        for w in self._widgets.values():
            w.observe(self._control_moved, names="value")
        _record_after_cell(self)

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
        """Record every state again (the data behind ``draw`` changed) and push it to the page.
        A figure the page cannot replay (``UnsupportedDrawing``) is refused with a warning
        naming the artist; the page then says so beside a still of the current state."""
        values, self._png = self.kwargs, None  # a refusal below leaves no PNG of an earlier one
        try:
            try:
                scene, png = build_scene(self._draw, self._controls, self._indices(),
                                         png_values=values)
                self._png = (values, png)
            except UnsupportedDrawing as error:
                scene = self._refusal(error)
            self.scene = encode_scene(scene)
        finally:
            self._figure = None  # recording may have drawn other states into the Figure
            _pending.discard(self)
        self.update()

    def _refusal(self, error: UnsupportedDrawing) -> dict:
        """The scene of a view the page cannot replay: the reason, and the PNG of the current
        state (what the output's image/png shows too)."""
        from ._common import figure_png

        fig = self.update()
        message = (f"{fig.get_label() or 'view'}: {error}. The page cannot replay this view "
                   f"and shows a still of it instead; the output's PNG shows the figure too.")
        warnings.warn(message, stacklevel=3)
        return {"version": SCENE_VERSION, "title": fig.get_label(), "error": message,
                "png": base64.b64encode(figure_png(fig)).decode("ascii"),
                "width": round(fig.bbox.width), "height": round(fig.bbox.height),
                "controls": [], "frame": [], "slots": [], "states": []}

    def scene_data(self) -> dict:
        """The scene as the page receives it (decoded JSON), recorded first if need be."""
        if not self.scene:
            self.refresh()
        return scene_json(self.scene)

    # How it shows up in a notebook.
    def text_summary(self) -> str:
        """The deterministic text/plain of the output: the view and its values."""
        return f"[{self.title}: {describe_state(self._controls, self.index)}]"

    def _repr_mimebundle_(self, **kwargs):
        from ._common import figure_png

        if not self.scene:
            self.refresh()
        data, metadata = super()._repr_mimebundle_(**kwargs)
        data["text/plain"] = self.text_summary()
        # The PNG that the recording just drew of the current values (used once, and only if
        # no control moved since: the very objects the controls hold now).
        made, self._png = self._png, None
        now = self.kwargs
        png = made[1] if made is not None and made[0].keys() == now.keys() and all(
            made[0][k] is now[k] for k in now) else None
        data["image/png"] = base64.b64encode(png or figure_png(self.result)).decode("ascii")
        return data, metadata

    def _ipython_display_(self, **kwargs) -> None:  # ipywidgets 7 displays through this hook
        data, metadata = self._repr_mimebundle_()
        display(data, metadata=metadata, raw=True)

    def __repr__(self) -> str:
        return f"PageView({self.text_summary()})"
