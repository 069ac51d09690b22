"""A matplotlib renderer that records what it is asked to draw, for the page views' ES module.

Matplotlib stays the drawing library: a figure is drawn as usual, and this renderer writes down
each path, image and run of text in figure pixels (origin top-left, y down) instead of painting
them. ``helpers/widgets/view.js`` replays the list on a canvas. Only three primitives are needed:
matplotlib's base renderer turns markers and collections into paths, and mathtext (``$…$``, log
axes' tick labels) into glyph paths, matplotlib's own outlines. A quad mesh whose cells tile an
axis-aligned grid unstroked and without antialiasing (a colour bar's solids, pcolormesh) is one
image: as paths, adjacent cells would leave pale seams on a canvas, which antialiases every
edge. Paths keep their line cap, join and dash offset; any op may be clipped by a rectangle and
a path. Each title drawn (an Axes' titles, a figure's suptitle) adds a "d" op, its text, which
draws nothing: the page's description of the figure. The op formats are listed in ``page.py``'s
module docstring.

What a canvas cannot replay as matplotlib draws it raises ``UnsupportedDrawing`` instead of
drawing something else: hatching, Gouraud shading, usetex text, sketch (xkcd) lines, agg
filters, and images rotated or skewed by their transform.
"""

from __future__ import annotations

import base64
import functools
import inspect
import re
from contextlib import contextmanager

import numpy as np
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.backend_bases import GraphicsContextBase, RendererBase
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure, SubFigure
from matplotlib.font_manager import findfont, get_font, weight_dict
from matplotlib.image import AxesImage
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Affine2D

# No __all__: a private module (its names reach readers through page.py).

Op = list  # ["p", ...] | ["i", ...] | ["t", ...] | ["d", ...] | {"slot": k}
# RendererBase._draw_text_as_path takes the Text as ``mtext`` from matplotlib 3.11 (required
# there), not in 3.10 (Colab's).
_TEXT_AS_PATH_TAKES_MTEXT = "mtext" in inspect.signature(RendererBase._draw_text_as_path).parameters
CAPS = {"butt": "butt", "projecting": "square", "round": "round"}  # matplotlib → canvas


class UnsupportedDrawing(ValueError):
    """The figure uses a feature the page cannot replay exactly (the message names it)."""


def _num(v: float) -> float | int:
    """A coordinate rounded to 0.1 px (an int when whole): the page cannot show finer."""
    v = round(float(v), 1)
    return int(v) if v.is_integer() else v


def _coordinates(values: np.ndarray) -> list[str]:
    """``str(_num(v))`` for each of ``values``, written faster: '%.1f' rounds as ``round(v, 1)``
    does (both correctly, from the exact binary value), then a whole number drops its '.0'."""
    out = []
    for v in values.tolist():
        text = "%.1f" % v
        if text[-2:] == ".0":
            text = text[:-2]
            if text == "-0":
                text = "0"
        out.append(text)
    return out


def _colour(rgba) -> str | None:
    """'#rrggbbaa' from RGB(A) floats in [0, 1]; None when fully transparent."""
    r, g, b, *a = (float(c) for c in rgba)
    alpha = a[0] if a else 1.0
    if alpha <= 0:
        return None
    return "#" + "".join(f"{round(255 * min(max(c, 0.0), 1.0)):02x}" for c in (r, g, b, alpha))


def _css_weight(weight: str | int) -> int:
    """A font weight as CSS takes it, 1 to 1000: matplotlib's names ("semibold") are not CSS."""
    return min(max(int(weight_dict.get(weight, weight)), 1), 1000)


DEFAULT_FAMILY = "DejaVu Sans"  # the face view.js asks for when a text op names none


def _family(prop) -> str | None:
    """The family name of the font file matplotlib draws ``prop`` with (serif and monospace
    resolve to DejaVu Serif and DejaVu Sans Mono unless rcParams say otherwise), or None for
    the default face, DejaVu Sans."""
    return _family_of(prop.copy(), _metrics_rc(False))


@functools.lru_cache(maxsize=1024)
def _family_of(prop, rc: tuple) -> str | None:
    family = get_font(findfont(prop)).family_name
    return None if family == DEFAULT_FAMILY else family


def _plain(text: Text) -> str:
    """A text as a reader reads it: one line; mathtext without its $, braces and backslashes."""
    s, ismath = text._preprocess_math(text.get_text())
    if ismath:
        # \alpha^2 → alpha^2, \sqrt{d} → sqrt d, \cdot k → cdot k
        s = re.sub(r"\\([A-Za-z]+)\s*(?=(.?))",
                   lambda m: m[1] + (" " if m[2].isalnum() or m[2] == "{" else ""), s)
        s = re.sub(r"[{}]", "", s).replace("$", " ")
    return " ".join(s.split())


def titles(fig: Figure) -> list[tuple[Text, int]]:
    """Every title of ``fig`` with its rank: each figure's and subfigure's suptitle (0), and
    each Axes' three titles, centre, left and right (1), inset Axes' too."""
    out: list[tuple[Text, int]] = []

    def visit(container) -> None:
        if isinstance(container, (Figure, SubFigure)) and container._suptitle is not None:
            out.append((container._suptitle, 0))
        if isinstance(container, Axes):
            out.extend((t, 1) for t in (container.title, container._left_title,
                                        container._right_title))
        for child in container.get_children():
            if isinstance(child, (SubFigure, Axes)):
                visit(child)

    visit(fig)
    return out


def _cells_op(rgba: np.ndarray, x: float, y: float, w: float, h: float, clip) -> Op:
    """An image op of ``rgba`` (rows, cols, 4) bytes, row 0 at the top, over the box x, y, w, h
    (figure pixels, y down): a palette and each cell's index in it, little-endian."""
    rows, cols = rgba.shape[:2]
    packed = np.ascontiguousarray(rgba, dtype=np.uint8).view(np.uint32).reshape(rows, cols)
    palette, cells = np.unique(packed, return_inverse=True)
    cells = cells.reshape(-1)
    if len(palette) <= 256:  # 1 byte a cell, 2 little-endian, or 3 beyond 65,536 colours
        cells = cells.astype(np.uint8)
    elif len(palette) <= 65536:
        cells = cells.astype("<u2")
    else:
        cells = cells.astype("<u4").view(np.uint8).reshape(-1, 4)[:, :3]
    colours = ["#" + bytes(c).hex() for c in palette.view(np.uint8).reshape(-1, 4)]
    return ["i", _num(x), _num(y), _num(w), _num(h), cols, rows, colours,
            base64.b64encode(cells.tobytes()).decode("ascii"), clip]


GRID_TOL = 0.01  # px: how far a mesh's edges may stray from a grid, and its cells from equal


def _grid_axis(edges: np.ndarray, snap: bool):
    """Where the cells of a mesh lie along one axis, from its edges there (canvas pixels,
    ascending or descending): (start, size, the mesh cell of each image cell, ascending), or
    None when the edges are not strictly monotone or the mesh covers no pixel.

    Agg fills the cells without antialiasing: a pixel is a cell's when its centre is inside,
    with each edge first snapped to a pixel centre unless ``snap`` is off (``pcolormesh.snap``
    is on by default). So the image spans those pixels exactly: the mesh's own cells when they
    are equal (to ``GRID_TOL``), else one image cell a pixel, each the cell Agg fills there."""
    steps = np.diff(edges)
    if not (np.all(steps > 0) or np.all(steps < 0)):
        return None
    order = np.arange(len(steps)) if steps[0] > 0 else np.arange(len(steps))[::-1]
    e = np.sort(edges)
    # the first pixel each cell fills, and where the mesh ends
    first = np.floor(e + 0.5) if snap else np.ceil(e - 0.5)
    k0, k1 = int(first[0]), int(first[-1])
    if k1 <= k0:
        return None
    if np.abs(np.diff(e) - (e[-1] - e[0]) / len(steps)).max() <= GRID_TOL:
        return k0, k1 - k0, order
    return k0, k1 - k0, order[np.searchsorted(first, np.arange(k0, k1), side="right") - 1]


_METRICS_RC = ("text.hinting", "text.hinting_factor", "text.kerning_factor", "font.family",
               "font.sans-serif", "font.serif", "font.monospace", "font.cursive", "font.fantasy")
_MATH_RC = ("mathtext.fontset", "mathtext.default", "mathtext.fallback", "mathtext.rm",
            "mathtext.it", "mathtext.bf", "mathtext.bfit", "mathtext.sf", "mathtext.tt",
            "mathtext.cal")


def _metrics_rc(ismath: bool) -> tuple:
    """The rcParams that the font and its metrics depend on, as a hashable key (read as the
    dict holds them: ``rcParams[name]`` checks for deprecations, a cost on every text)."""
    names = _METRICS_RC + _MATH_RC if ismath else _METRICS_RC
    return tuple(tuple(v) if isinstance(v := _rc_get(rcParams, n), list) else v for n in names)


def _rc_get(params, name: str):
    return dict.get(params, name) if isinstance(params, dict) else params.get(name)


@functools.lru_cache(maxsize=16384)
def _text_metrics(s: str, prop, ismath, dpi: float, rc: tuple) -> tuple[float, float, float]:
    """Agg's (width, height, descent) of ``s`` in ``prop`` at ``dpi``, remembered: laying out
    a text in FreeType is most of what recording a tick label costs, and a view's states draw
    the same labels again and again. (Agg's metrics depend on the dpi only, not on the canvas.)"""
    return _agg_at(dpi).get_text_width_height_descent(s, prop, ismath)


@functools.lru_cache(maxsize=8)
def _agg_at(dpi: float) -> RendererAgg:
    return RendererAgg(1, 1, dpi)


class Recorder(RendererBase):
    """Records ``fig``'s drawing as ops; text metrics come from Agg, so the layout is Agg's."""

    def __init__(self, fig: Figure):
        super().__init__()
        self.width, self.height = fig.bbox.width, fig.bbox.height  # pixels at fig.dpi
        self.dpi = fig.dpi
        self.ops: list[Op] = []

    # What matplotlib asks of every renderer.
    def flipy(self) -> bool:
        return False  # texts arrive in display coordinates (y up), like paths; flipped below

    def get_canvas_width_height(self) -> tuple[float, float]:
        return self.width, self.height

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath == "TeX":  # laid out before it is drawn: refused here, TeX or not installed
            self.draw_tex(None, 0, 0, s, prop, 0)
        # A copy of prop: the key must not change when the caller's FontProperties does; the
        # rcParams that pick the font file and shape its glyphs are part of the key too.
        return _text_metrics(s, prop.copy(), ismath, self.dpi, _metrics_rc(bool(ismath)))

    def points_to_pixels(self, points):
        return points * self.dpi / 72

    def new_gc(self) -> GraphicsContextBase:
        return GraphicsContextBase()

    def option_image_nocomposite(self) -> bool:
        return True  # each image its own op

    def option_scale_image(self) -> bool:
        return True  # images arrive at their own resolution, with a transform

    def _path_data(self, path: Path, transform) -> str:
        """SVG path data (M/L/Z, curves flattened) of ``path`` in figure pixels, y down: the
        segments ``path.iter_segments`` gives, each coordinate as ``_num`` writes it."""
        cleaned = path.cleaned(transform=transform, remove_nans=True, simplify=False,
                               curves=False)
        codes, vertices = cleaned.codes, cleaned.vertices
        stop = np.flatnonzero(codes == Path.STOP)
        end = int(stop[0]) if len(stop) else len(codes)
        xs = _coordinates(vertices[:end, 0])
        ys = _coordinates(self.height - vertices[:end, 1])
        d = []
        for code, x, y in zip(codes[:end].tolist(), xs, ys):
            if code == Path.CLOSEPOLY:
                d.append("Z")
            elif code == Path.MOVETO or code == Path.LINETO:
                d.append(f"{'M' if code == Path.MOVETO else 'L'}{x} {y}")
        return "".join(d)

    def _clip(self, gc) -> list | None:
        """null, [x, y, w, h], or [x, y, w, h, path data] with a clip path (the rectangle then
        the whole figure if the gc has none)."""
        box = gc.get_clip_rectangle()
        path, transform = gc.get_clip_path()
        if box is None and path is None:
            return None
        clip = ([0, 0, _num(self.width), _num(self.height)] if box is None else
                [_num(box.x0), _num(self.height - box.y1), _num(box.width), _num(box.height)])
        if path is not None:
            clip.append(self._path_data(path, transform))
        return clip

    # What the page cannot replay: refused, never drawn otherwise.
    def draw_gouraud_triangles(self, gc, triangles_array, colors_array, transform) -> None:
        raise UnsupportedDrawing("Gouraud shading (shading='gouraud') cannot be replayed in "
                                 "the page")

    def draw_tex(self, gc, x, y, s, prop, angle, *, mtext=None) -> None:
        raise UnsupportedDrawing(f"usetex text ({s!r}) cannot be replayed in the page")

    def start_filter(self) -> None:
        raise UnsupportedDrawing("an agg_filter cannot be replayed in the page")

    # The three primitives.
    def draw_path(self, gc, path: Path, transform, rgbFace=None) -> None:
        if gc.get_hatch() is not None:
            raise UnsupportedDrawing(f"hatching ({str(gc.get_hatch())!r}) cannot be replayed "
                                     f"in the page")
        if gc.get_sketch_params() is not None:
            raise UnsupportedDrawing("sketch params (xkcd style) cannot be replayed in the page")
        d = self._path_data(path, transform)
        if not d:
            return
        fill = None
        if rgbFace is not None:
            rgba = list(rgbFace) + [1.0] * (4 - len(rgbFace))
            if gc.get_forced_alpha():
                rgba[3] = gc.get_alpha()
            fill = _colour(rgba)
        width = self.points_to_pixels(gc.get_linewidth())
        stroke = _colour(gc.get_rgb()) if width > 0 else None
        if fill is not None and stroke is None and not gc.get_antialiased():
            # Agg fills these (a colour bar's quads) without antialiasing, edge to edge; a
            # canvas always antialiases, leaving pale seams: a hairline of the fill closes them.
            stroke, width = fill, 0.5
        if fill is None and stroke is None:
            return
        offset, dashes = gc.get_dashes()
        dash = None if not dashes else [_num(self.points_to_pixels(v)) for v in dashes]
        op = ["p", d, fill, stroke, _num(width), dash, self._clip(gc)]
        if stroke is not None:  # cap and join: only a stroke has them
            op += [CAPS[gc.get_capstyle()], gc.get_joinstyle()]
            if dash and offset:
                op.append(_num(self.points_to_pixels(offset)))
        self.ops.append(op)

    def draw_image(self, gc, x, y, im, transform=None) -> None:
        rows, cols = im.shape[:2]
        unsampled = transform is not None
        if not unsampled:  # already resampled to screen pixels, lower-left at (x, y)
            transform = Affine2D().scale(cols, rows)
        # ``transform`` maps the unit square onto the image's place, relative to (x, y).
        whole = transform + Affine2D().translate(x, y)
        (a, c, _), (b, d, _), _ = whole.get_matrix()
        if abs(b) > 1e-9 * abs(a) or abs(c) > 1e-9 * abs(d):
            raise UnsupportedDrawing("an image rotated or skewed by its transform cannot be "
                                     "replayed in the page")
        (x0, y0), (x1, y1) = whole.transform([(0, 0), (1, 1)])  # row 0's corner, the far one
        im = np.asarray(im)[..., :4]
        # An image's own alpha scales its pixels' alpha; a resampled one (no transform) has it
        # in its pixels already, and Agg draws those as they are.
        if unsampled and gc.get_alpha() != 1.0:
            im = im.copy()
            im[..., 3] = np.round(im[..., 3] * gc.get_alpha()).astype(np.uint8)
        # Canvas rows run downwards: row 0 goes at the top edge of the two.
        if y0 < y1:
            im = im[::-1]
        if x0 > x1:
            im = im[:, ::-1]
        self.ops.append(_cells_op(im, min(x0, x1), self.height - max(y0, y1), abs(x1 - x0),
                                  abs(y1 - y0), self._clip(gc)))

    def draw_quad_mesh(self, gc, master_transform, meshWidth, meshHeight, coordinates,
                       offsets, offsetTrans, facecolors, antialiased, edgecolors) -> None:
        """A mesh whose cells tile an axis-aligned grid, filled without antialiasing and not
        stroked (a colour bar's solids, pcolormesh): one image op, cell by cell, or pixel by
        pixel where the cells are unequal. Else paths, cell by cell (matplotlib's fallback)."""
        cells = self._mesh_image(gc, master_transform, meshWidth, meshHeight, coordinates,
                                 offsets, offsetTrans, facecolors, antialiased, edgecolors)
        if cells is None:
            super().draw_quad_mesh(gc, master_transform, meshWidth, meshHeight, coordinates,
                                   offsets, offsetTrans, facecolors, antialiased, edgecolors)
        else:
            self.ops.append(cells)

    def _mesh_image(self, gc, master_transform, mesh_width, mesh_height, coordinates, offsets,
                    offset_trans, facecolors, antialiased, edgecolors) -> Op | None:
        """The image op of a quad mesh, or None when it is not one (see draw_quad_mesh)."""
        if (antialiased or gc.get_hatch() is not None or gc.get_sketch_params() is not None
                or gc.get_forced_alpha() or edgecolors is None):
            return None
        edges = np.asarray(edgecolors, float).reshape(-1, 4)
        if len(edges) and gc.get_linewidth() > 0 and (edges[:, 3] > 0).any():
            return None  # stroked cells
        faces = np.asarray(facecolors, float).reshape(-1, 4)
        n = mesh_width * mesh_height
        if len(faces) == 1:
            faces = np.repeat(faces, n, axis=0)
        offsets = np.asarray(offsets, float).reshape(-1, 2)
        shifts = offset_trans.transform(offsets) if len(offsets) else np.zeros((1, 2))
        if len(faces) != n or len(offsets) > n or np.ptp(shifts, axis=0).max() > 0:
            return None
        xy = np.ma.filled(np.ma.asarray(coordinates, float), np.nan).reshape(-1, 2)
        xy = (master_transform.transform(xy) + shifts[0]).reshape(mesh_height + 1,
                                                                   mesh_width + 1, 2)
        if not np.isfinite(xy).all():
            return None
        # In canvas pixels (y down), where Agg snaps and fills too.
        xs, ys, snap = xy[..., 0], self.height - xy[..., 1], gc.get_snap() is not False
        colours = np.round(np.clip(faces, 0, 1) * 255).astype(np.uint8).reshape(
            mesh_height, mesh_width, 4)
        if (np.abs(xs - xs[:1]).max() <= GRID_TOL and np.abs(ys - ys[:, :1]).max() <= GRID_TOL):
            across, down = _grid_axis(xs[0], snap), _grid_axis(ys[:, 0], snap)  # columns: x
        elif (np.abs(xs - xs[:, :1]).max() <= GRID_TOL
              and np.abs(ys - ys[:1]).max() <= GRID_TOL):
            across, down = _grid_axis(xs[:, 0], snap), _grid_axis(ys[0], snap)  # rows: x
            colours = colours.transpose(1, 0, 2)
        else:
            return None
        if across is None or down is None:
            return None
        (x0, w, cols), (y0, h, rows) = across, down
        return _cells_op(colours[rows][:, cols], x0, y0, w, h, self._clip(gc))

    def describe(self, text: Text, rank: int) -> None:
        """A "d" op: the title ``text`` (of ``rank``, see ``titles``) as a reader reads it, if
        matplotlib draws it (it draws nothing on the canvas)."""
        plain = _plain(text)
        if text.get_visible() and plain:
            self.ops.append(["d", plain, rank])

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None) -> None:
        if ismath == "TeX":
            self.draw_tex(gc, x, y, s, prop, angle, mtext=mtext)  # refused
        if ismath:  # mathtext: matplotlib's glyph outlines, as paths (through draw_path)
            extra = (mtext,) if _TEXT_AS_PATH_TAKES_MTEXT else ()  # matplotlib 3.11 and 3.10
            self._draw_text_as_path(gc, x, y, s, prop, angle, ismath, *extra)
            return
        if not s.strip():
            return
        width, _, _ = self.get_text_width_height_descent(s, prop, ismath)
        colour = _colour(gc.get_rgb())
        if colour is None:
            return
        op = ["t", _num(x), _num(self.height - y), s,
              _num(self.points_to_pixels(prop.get_size_in_points())), colour, _num(angle),
              _css_weight(prop.get_weight()), prop.get_style(), _num(width)]
        clip = self._clip(gc)
        family = _family(prop)
        if clip is not None or family is not None:  # clipped (clip_on=True) or not the default
            op.append(clip)  # face: rare, so the two are optional
        if family is not None:
            op.append(family)
        self.ops.append(op)


@contextmanager
def unsampled_images(images: list[AxesImage]):
    """Draw the nearest-neighbour ``images`` at their own resolution while recording (the
    same picture: "none" and "nearest" differ only in resampling), then restore them."""
    changed = [im for im in images if im.get_interpolation() == "nearest"]
    for im in changed:
        im.set_interpolation("none")
    try:
        yield
    finally:
        for im in changed:
            im.set_interpolation("nearest")


@contextmanager
def described_titles(fig: Figure, recorder: Recorder):
    """While ``fig`` draws into ``recorder``, each of its titles adds its "d" op
    (``Recorder.describe``) just before its own ops; drawn elsewhere, nothing changes."""
    wrapped = []
    for text, rank in titles(fig):
        real = text.draw  # the instance's own draw where page.py wrapped it: restored below

        def draw(renderer, *args, _real=real, _text=text, _rank=rank, **kwargs):
            if renderer is recorder:
                recorder.describe(_text, _rank)
            return _real(renderer, *args, **kwargs)

        wrapped.append((text, text.__dict__.get("draw")))
        text.draw = draw
    try:
        yield
    finally:
        for text, own in reversed(wrapped):
            if own is None:
                text.__dict__.pop("draw", None)
            else:
                text.draw = own


def record_figure(fig: Figure) -> list[Op]:
    """The ops of ``fig`` drawn whole, as it is now."""
    recorder = Recorder(fig)
    with unsampled_images(fig.findobj(AxesImage)), described_titles(fig, recorder):
        fig.draw(recorder)
    return recorder.ops
