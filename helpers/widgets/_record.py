"""A matplotlib renderer that records what it is asked to draw, for the page views' ES module.

Matplotlib stays the drawing library: a figure is drawn as usual, and this renderer writes down
each path, image and run of text in figure pixels (origin top-left, y down) instead of painting
them. ``helpers/widgets/view.js`` replays the list on a canvas. Only three primitives are needed:
matplotlib's base renderer turns markers, collections and quad meshes into paths, and mathtext
into glyph paths. The op formats are listed in ``page.py``'s module docstring.
"""

from __future__ import annotations

import base64
import math
from contextlib import contextmanager

import numpy as np
from matplotlib.backend_bases import GraphicsContextBase, RendererBase
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.path import Path
from matplotlib.transforms import Affine2D

Op = list  # ["p", ...] | ["i", ...] | ["t", ...] | {"slot": k}


def _num(v: float) -> float | int:
    """A coordinate rounded to 0.1 px (an int when whole): the page cannot show finer."""
    v = round(float(v), 1)
    return int(v) if v.is_integer() else v


def _colour(rgba) -> str | None:
    """'#rrggbbaa' from RGB(A) floats in [0, 1]; None when fully transparent."""
    r, g, b, *a = (float(c) for c in rgba)
    alpha = a[0] if a else 1.0
    if alpha <= 0:
        return None
    return "#" + "".join(f"{round(255 * min(max(c, 0.0), 1.0)):02x}" for c in (r, g, b, alpha))


class Recorder(RendererBase):
    """Records ``fig``'s drawing as ops; text metrics come from Agg, so the layout is Agg's."""

    def __init__(self, fig: Figure):
        super().__init__()
        self.width, self.height = fig.bbox.width, fig.bbox.height  # pixels at fig.dpi
        self.dpi = fig.dpi
        self._agg = RendererAgg(int(math.ceil(self.width)), int(math.ceil(self.height)), self.dpi)
        self.ops: list[Op] = []

    # What matplotlib asks of every renderer.
    def flipy(self) -> bool:
        return False  # texts arrive in display coordinates (y up), like paths; flipped below

    def get_canvas_width_height(self) -> tuple[float, float]:
        return self.width, self.height

    def get_text_width_height_descent(self, s, prop, ismath):
        return self._agg.get_text_width_height_descent(s, prop, ismath)

    def points_to_pixels(self, points):
        return points * self.dpi / 72

    def new_gc(self) -> GraphicsContextBase:
        return GraphicsContextBase()

    def option_image_nocomposite(self) -> bool:
        return True  # each image its own op

    def option_scale_image(self) -> bool:
        return True  # images arrive at their own resolution, with a transform

    def _clip(self, gc) -> list | None:
        box = gc.get_clip_rectangle()
        if box is None:
            return None
        return [_num(box.x0), _num(self.height - box.y1), _num(box.width), _num(box.height)]

    # The three primitives.
    def draw_path(self, gc, path: Path, transform, rgbFace=None) -> None:
        d = []
        for (x, y), code in path.iter_segments(transform, remove_nans=True, simplify=False,
                                               curves=False):
            if code == Path.CLOSEPOLY:
                d.append("Z")
            elif code in (Path.MOVETO, Path.LINETO):
                d.append(f"{'M' if code == Path.MOVETO else 'L'}{_num(x)} {_num(self.height - y)}")
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
        _, dashes = gc.get_dashes()
        dash = None if not dashes else [_num(self.points_to_pixels(v)) for v in dashes]
        self.ops.append(["p", "".join(d), fill, stroke, _num(width), dash, self._clip(gc)])

    def draw_image(self, gc, x, y, im, transform=None) -> None:
        rows, cols = im.shape[:2]
        if transform is None:  # already resampled to screen pixels, lower-left at (x, y)
            transform = Affine2D().scale(cols, rows)
        # ``transform`` maps the unit square onto the image's place, relative to (x, y).
        whole = transform + Affine2D().translate(x, y)
        (x0, y0), (x1, y1) = whole.transform([(0, 0), (1, 1)])  # row 0's corner, the far one
        im = np.asarray(im)[..., :4]
        if gc.get_alpha() != 1.0:  # an image's own alpha scales its pixels' alpha
            im = im.copy()
            im[..., 3] = np.round(im[..., 3] * gc.get_alpha()).astype(np.uint8)
        # Canvas rows run downwards: row 0 goes at the top edge of the two.
        if y0 < y1:
            im = im[::-1]
        if x0 > x1:
            im = im[:, ::-1]
        packed = np.ascontiguousarray(im).view(np.uint32).reshape(rows, cols)
        palette, cells = np.unique(packed, return_inverse=True)
        cells = cells.reshape(-1).astype(np.uint8 if len(palette) <= 256 else "<u2")
        colours = ["#" + bytes(c).hex() for c in palette.view(np.uint8).reshape(-1, 4)]
        self.ops.append(["i", _num(min(x0, x1)), _num(self.height - max(y0, y1)),
                         _num(abs(x1 - x0)), _num(abs(y1 - y0)), cols, rows, colours,
                         base64.b64encode(cells.tobytes()).decode("ascii"), self._clip(gc)])

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None) -> None:
        if ismath or not s.strip():
            if ismath:  # mathtext: glyph outlines, as paths
                self._draw_text_as_path(gc, x, y, s, prop, angle, ismath)
            return
        width, _, _ = self.get_text_width_height_descent(s, prop, ismath)
        colour = _colour(gc.get_rgb())
        if colour is None:
            return
        self.ops.append(["t", _num(x), _num(self.height - y), s,
                         _num(self.points_to_pixels(prop.get_size_in_points())), colour,
                         _num(angle), str(prop.get_weight()), prop.get_style(), _num(width)])


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


def record_figure(fig: Figure) -> list[Op]:
    """The ops of ``fig`` drawn whole, as it is now."""
    recorder = Recorder(fig)
    with unsampled_images(fig.findobj(AxesImage)):
        fig.draw(recorder)
    return recorder.ops
