"""The recording renderer (helpers/widgets/_record.py): each op says what matplotlib draws, in
figure pixels (y down), or the recording refuses with ``UnsupportedDrawing``.

Checked against matplotlib itself: a text's window extent, an image's ``to_rgba`` and the Agg
renderer's pixels, a patch's transform. (That view.js draws the ops: tests/browser/test_view_js.py.)
"""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import weight_dict
from matplotlib.patches import Circle, Rectangle
from matplotlib.transforms import Affine2D

from helpers.widgets import _record
from helpers.widgets._record import UnsupportedDrawing, record_figure

W, H, DPI = 400, 300, 100


def figure() -> Figure:
    """A 400 × 300 px figure with an Agg canvas (for window extents and pixels)."""
    fig = Figure(figsize=(W / DPI, H / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def points(d: str) -> np.ndarray:
    """The (x, y) points of svg path data."""
    return np.array([float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d)]).reshape(-1, 2)


def y_down(bbox) -> tuple[float, float, float, float]:
    """A display bbox (y up) as (x0, y0, x1, y1) in figure pixels, y down."""
    return bbox.x0, H - bbox.y1, bbox.x1, H - bbox.y0


def cells_rgba(op: list) -> np.ndarray:
    """An image op's cells through its palette, (rows, cols, 4) bytes, row 0 at the top."""
    _, x, y, w, h, cols, rows, palette, data, clip = op
    raw = np.frombuffer(base64.b64decode(data), np.uint8)
    n = 3 if len(palette) > 65536 else 2 if len(palette) > 256 else 1
    assert raw.size == n * cols * rows, f"{raw.size} bytes for {cols * rows} cells of {n}"
    index = raw.reshape(-1, n).astype(np.int64) @ (256 ** np.arange(n))  # little-endian
    table = np.frombuffer(bytes.fromhex("".join(c[1:] for c in palette)), np.uint8).reshape(-1, 4)
    return table[index].reshape(rows, cols, 4)


def agg_pixels(fig: Figure) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())


# Mathtext: glyph paths, where matplotlib lays the text out.

def test_mathtext_and_log_axes_record_as_glyph_paths_inside_the_text():
    fig = figure()
    ax = fig.subplots()
    ax.semilogy([1, 10, 100, 1000])  # tick labels $\mathdefault{10^{2}}$
    label = ax.set_xlabel(r"$\alpha^2$", color="#123456", fontsize=20)
    ops = record_figure(fig)
    assert not [op for op in ops if op[0] == "t" and "$" in op[3]]
    renderer = fig.canvas.get_renderer()

    def inside(op, box) -> bool:
        xy = points(op[1])
        return ((xy[:, 0] >= box[0] - 1) & (xy[:, 0] <= box[2] + 1)
                & (xy[:, 1] >= box[1] - 1) & (xy[:, 1] <= box[3] + 1)).all()

    # The label: glyphs in its colour, filled, not stroked, inside its extent and filling it.
    box = y_down(label.get_window_extent(renderer))
    glyphs = [op for op in ops if op[0] == "p" and op[2] == "#123456ff"]
    assert glyphs and all(op[3] is None and inside(op, box) for op in glyphs)
    xy = np.concatenate([points(op[1]) for op in glyphs])
    assert np.ptp(xy[:, 0]) > 0.8 * (box[2] - box[0]) and np.ptp(xy[:, 1]) > 0.6 * (box[3] - box[1])
    # Every log tick label drawn: glyph paths inside its extent.
    ticks = [t for t in ax.yaxis.get_ticklabels() if t.get_visible() and t.get_text()
             and ax.yaxis.get_view_interval()[0] <= t.get_position()[1]
             <= ax.yaxis.get_view_interval()[1]]
    assert len(ticks) >= 3 and all("$" in t.get_text() for t in ticks)
    for t in ticks:
        box = y_down(t.get_window_extent(renderer))
        assert any(op[0] == "p" and op[2] == "#000000ff" and inside(op, box) for op in ops), t


# Images: every cell exact, whatever the number of colours.

def test_an_image_of_more_than_65536_colours_keeps_every_cell():
    rgb = np.random.default_rng(0).random((300, 300, 3))
    fig = figure()
    im = fig.subplots().imshow(rgb, interpolation="nearest")
    (op,) = [op for op in record_figure(fig) if op[0] == "i"]
    assert len(op[7]) > 65536
    assert (cells_rgba(op) == im.to_rgba(rgb, bytes=True)).all()


def test_a_figure_image_is_the_agg_renderers_pixels():
    # figimage: one cell per pixel, so the recorded cells are exactly what Agg paints.
    rgb = np.random.default_rng(1).integers(0, 256, (250, 300, 3), dtype=np.uint8)
    fig = figure()
    fig.figimage(rgb, xo=40, yo=20)
    (op,) = [op for op in record_figure(fig) if op[0] == "i"]
    _, x, y, w, h, cols, rows, *_ = op
    assert (x, y, w, h, cols, rows) == (40, H - 20 - 250, 300, 250, 300, 250)
    assert (cells_rgba(op) == agg_pixels(fig)[y:y + rows, x:x + cols]).all()


def test_an_images_alpha_scales_its_cells_alpha():
    values = np.arange(12.0).reshape(3, 4)
    fig = figure()
    im = fig.subplots().imshow(values, alpha=0.5, interpolation="nearest")
    (op,) = [op for op in record_figure(fig) if op[0] == "i"]
    want = im.to_rgba(values, bytes=True, alpha=1.0)
    assert (cells_rgba(op)[..., :3] == want[..., :3]).all()
    assert (cells_rgba(op)[..., 3] == 128).all()  # 255 × 0.5, rounded


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
def test_a_translucent_image_over_white_is_the_agg_renderers_pixels(interpolation):
    # Recorded at its own cells (nearest) or resampled by matplotlib (bilinear: the alpha is
    # in the pixels already, and must not be applied twice).
    values = np.arange(12.0).reshape(3, 4)
    fig = figure()
    ax = fig.subplots()
    ax.set_axis_off()
    ax.imshow(values, alpha=0.5, interpolation=interpolation)
    (op,) = [op for op in record_figure(fig) if op[0] == "i"]
    _, x, y, w, h, cols, rows, *_ = op
    cells = cells_rgba(op).astype(float)
    over_white = cells[..., :3] * cells[..., 3:] / 255 + 255 * (1 - cells[..., 3:] / 255)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    pixels = agg_pixels(fig)[(y + (r + 0.5) * h / rows).astype(int),
                             (x + (c + 0.5) * w / cols).astype(int)]
    assert np.abs(over_white - pixels[..., :3]).max() <= 1.5


def test_an_image_rotated_by_its_transform_is_refused():
    fig = figure()
    ax = fig.subplots()
    im = ax.imshow(np.arange(6.0).reshape(2, 3), interpolation="none")
    im.set_transform(Affine2D().rotate_deg(30) + ax.transData)
    with pytest.raises(UnsupportedDrawing, match="rotated or skewed"):
        record_figure(fig)


# Colours, places, fonts.

def test_colours_are_recorded_as_given():
    fig = figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="#123456")
    ax.add_patch(Rectangle((0.2, 0.2), 0.3, 0.3, facecolor="#abcdef", edgecolor="none"))
    ops = record_figure(fig)
    assert any(op[0] == "p" and op[3] == "#123456ff" and op[2] is None for op in ops)
    assert any(op[0] == "p" and op[2] == "#abcdefff" and op[3] is None for op in ops)


def test_text_is_placed_at_its_baseline_with_y_down():
    fig = figure()
    fig.text(0.25, 0.75, "here")  # left, baseline: display (100, 225)
    (op,) = [op for op in record_figure(fig) if op[0] == "t"]
    assert op[1:4] == [100, H - 225, "here"]


def test_font_weights_are_css_numbers():
    fig = figure()
    names = sorted(weight_dict)
    for k, name in enumerate(names):
        fig.text(0.1, k / len(names), name, weight=name)
    fig.text(0.6, 0.5, "550", weight=550)
    weights = {op[3]: op[7] for op in record_figure(fig) if op[0] == "t"}
    assert weights == {**weight_dict, "550": 550}
    assert all(type(w) is int and 100 <= w <= 1000 for w in weights.values())


# Line styles and clips.

def test_paths_carry_cap_join_and_dash_offset():
    fig = figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="#123456", linewidth=4)  # projecting caps, round joins
    ax.plot([0, 1], [1, 0], color="#654321", linestyle=(5, (10, 10)))  # a dash offset
    ax.add_patch(Rectangle((0.2, 0.2), 0.3, 0.3, edgecolor="#abcdef", facecolor="none"))
    ops = [op for op in record_figure(fig) if op[0] == "p"]
    (line,) = [op for op in ops if op[3] == "#123456ff"]
    (dashed,) = [op for op in ops if op[3] == "#654321ff"]
    (patch,) = [op for op in ops if op[3] == "#abcdefff"]
    assert line[7:] == ["square", "round"]
    px = DPI / 72  # pixels a point; the dashes are scaled by the 1.5 pt line width
    assert dashed[5] == [round(15 * px, 1)] * 2
    assert dashed[7:] == ["butt", "round", round(7.5 * px, 1)]
    assert patch[7:] == ["butt", "miter"]
    filled = [op for op in ops if op[3] is None]  # no stroke: no cap, no join
    assert filled and all(len(op) == 7 for op in filled)


def test_a_clip_path_clips_the_op():
    fig = figure()
    ax = fig.subplots()
    square = ax.add_patch(Rectangle((0.2, 0.2), 0.6, 0.6, facecolor="#ff0000"))
    circle = Circle((0.5, 0.5), 0.3, transform=ax.transData)
    square.set_clip_path(circle)
    (op,) = [op for op in record_figure(fig) if op[0] == "p" and op[2] == "#ff0000ff"]
    clip = op[6]
    assert len(clip) == 5 and clip[:4] == y_down_list(ax.bbox)
    # The clip path's points are on the circle, in figure pixels, y down.
    centre = ax.transData.transform((0.5, 0.5))
    radius = ax.transData.transform((0.8, 0.5))[0] - centre[0]
    ry = ax.transData.transform((0.5, 0.8))[1] - centre[1]
    xy = points(clip[4])
    dist = np.hypot((xy[:, 0] - centre[0]) / radius, (xy[:, 1] - (H - centre[1])) / ry)
    assert len(xy) > 16 and np.abs(dist - 1).max() < 0.01


def test_a_clip_path_without_a_clip_box_clips_to_the_whole_figure_and_the_path():
    fig = figure()
    square = fig.add_artist(Rectangle((0.1, 0.1), 0.5, 0.5, facecolor="#00ff00",
                                      transform=fig.transFigure))
    square.set_clip_path(Circle((0.35, 0.35), 0.2, transform=fig.transFigure))
    (op,) = [op for op in record_figure(fig) if op[0] == "p" and op[2] == "#00ff00ff"]
    assert op[6][:4] == [0, 0, W, H] and points(op[6][4]).size > 0


def test_a_clipped_text_carries_its_clip():
    fig = figure()
    ax = fig.subplots()
    ax.text(0.5, 0.5, "clipped", clip_on=True)
    ax.text(0.5, 0.2, "free")
    texts = {op[3]: op for op in record_figure(fig) if op[0] == "t"}
    assert texts["clipped"][10] == y_down_list(ax.bbox)
    assert len(texts["free"]) == 10  # no clip: the op as before


def y_down_list(bbox) -> list:
    return [round(v, 1) for v in (bbox.x0, H - bbox.y1, bbox.width, bbox.height)]


# What the page cannot replay: refused, naming the feature.

def _hatched(fig):
    fig.subplots().bar([1, 2], [3, 4], hatch="//")


def _gouraud_mesh(fig):
    fig.subplots().pcolormesh(np.arange(9.0).reshape(3, 3), shading="gouraud")


def _gouraud_triangles(fig):
    fig.subplots().tripcolor([0, 1, 0, 1], [0, 0, 1, 1], [0, 1, 2, 3], shading="gouraud")


def _usetex(fig):
    fig.text(0.5, 0.5, "x", usetex=True)


def _sketch(fig):
    (line,) = fig.subplots().plot([0, 1], [0, 1])
    line.set_sketch_params(scale=1, length=100, randomness=2)  # what plt.xkcd() sets


def _agg_filter(fig):
    (line,) = fig.subplots().plot([0, 1], [0, 1])
    line.set_agg_filter(lambda image, dpi: (image, 0, 0))


@pytest.mark.parametrize("build, feature", [
    (_hatched, r"hatching \('//'\)"), (_gouraud_mesh, "Gouraud"), (_gouraud_triangles, "Gouraud"),
    (_usetex, "usetex text"), (_sketch, "sketch"), (_agg_filter, "agg_filter")],
    ids=["hatch", "pcolormesh-gouraud", "tripcolor-gouraud", "usetex", "sketch", "agg-filter"])
def test_what_the_page_cannot_replay_is_refused(build, feature):
    fig = figure()
    build(fig)
    with pytest.raises(UnsupportedDrawing, match=feature + ".* cannot be replayed in the page"):
        record_figure(fig)


def test_unsupported_drawing_is_a_value_error_and_exported():
    from helpers.widgets import page

    assert issubclass(UnsupportedDrawing, ValueError)
    assert page.UnsupportedDrawing is UnsupportedDrawing  # what readers import and catch


@pytest.mark.parametrize("family, face", [("sans-serif", None), ("serif", "DejaVu Serif"),
                                          ("monospace", "DejaVu Sans Mono")])
def test_a_text_op_names_the_face_matplotlib_drew_when_not_the_default(family, face):
    fig = Figure(figsize=(2, 1))
    fig.text(0.1, 0.5, "face", family=family)
    (op,) = [op for op in record_figure(fig) if op[0] == "t"]
    if face is None:
        assert len(op) == 10  # no clip, no family: the format of every default text
    else:
        assert op[10] is None and op[11] == face


# Quad meshes: one image where the cells tile an axis-aligned grid (a colour bar's solids),
# which a canvas draws without seams; else paths, cell by cell.

def canvas_sampled(op: list) -> tuple[np.ndarray, np.ndarray]:
    """Where an image op covers the figure's pixel centres, and the cell each one shows there
    (as a canvas draws it, nearest-neighbour): ((H, W) bool, (H, W, 4) bytes)."""
    _, x, y, w, h, cols, rows, *_ = op
    ys, xs = np.mgrid[0:H, 0:W] + 0.5
    inside = (xs >= x) & (xs < x + w) & (ys >= y) & (ys < y + h)
    r = np.clip(((ys - y) * rows / h).astype(int), 0, rows - 1)
    c = np.clip(((xs - x) * cols / w).astype(int), 0, cols - 1)
    return inside, cells_rgba(op)[r, c]


def shrunk(mask: np.ndarray, px: int) -> np.ndarray:
    """``mask`` less ``px`` pixels at each edge (a colour bar's outline is drawn over it)."""
    for _ in range(px):
        mask = mask & np.roll(mask, 1, 0) & np.roll(mask, -1, 0) & np.roll(mask, 1, 1) \
            & np.roll(mask, -1, 1)
    return mask


@pytest.mark.parametrize("orientation", ["vertical", "horizontal"])
def test_a_colour_bars_solids_are_one_image_showing_agg_pixels(orientation):
    fig = figure()
    ax = fig.subplots()
    im = ax.imshow(np.random.default_rng(2).random((4, 5)), cmap="viridis",
                   interpolation="nearest")
    bar = fig.colorbar(im, orientation=orientation)
    ops = record_figure(fig)
    heatmap, solids = [op for op in ops if op[0] == "i"]
    # One cell a colour of the map, the lowest value at the bottom (at the left).
    want = bar.solids.get_facecolor()
    want = np.round(want * 255).astype(np.uint8)
    if orientation == "vertical":
        assert solids[5:7] == [1, 256]
        assert (cells_rgba(solids)[::-1, 0] == want).all()
    else:
        assert solids[5:7] == [256, 1]
        assert (cells_rgba(solids)[0] == want).all()
    # No path is filled with one of its colours (as cells, they would leave seams between).
    palette = set(solids[7])
    assert not [op for op in ops if op[0] == "p" and op[2] in palette]
    # Sampled at each pixel's centre, as a canvas draws it, it is Agg's picture of the bar.
    inside, shown = canvas_sampled(solids)
    core = shrunk(inside, 2)
    assert inside.sum() > 1000 and core.sum() > 0.5 * inside.sum()
    diff = np.abs(agg_pixels(fig)[core].astype(int) - shown[core].astype(int))
    assert diff.max() <= 2, diff.max()


def test_a_pcolormesh_of_unequal_cells_is_one_image_of_agg_pixels_exactly():
    # Cells of unequal widths: one image cell a pixel, each the cell Agg fills there (its
    # centre inside the cell, the edges snapped to pixel centres: 251.5 px goes left).
    fig = figure()
    ax = fig.subplots()
    ax.set_axis_off()
    values = np.random.default_rng(3).random((3, 5))
    mesh = ax.pcolormesh([0, 1, 3, 6, 6.5, 10], [0, 1, 2, 4], values)
    ops = record_figure(fig)
    (op,) = [op for op in ops if op[0] == "i"]
    assert not [op for op in ops if op[0] == "p" and op[2] != "#ffffffff"]  # but the background
    inside, shown = canvas_sampled(op)
    pixels = agg_pixels(fig)
    assert (pixels[inside] == shown[inside]).all()
    assert (pixels[~inside] == 255).all()  # and nothing outside it
    assert len(set(op[7])) == len(np.unique(mesh.get_facecolor(), axis=0))


@pytest.mark.parametrize("style", [dict(antialiased=True), dict(edgecolors="k", linewidth=1)],
                         ids=["antialiased", "stroked"])
def test_an_antialiased_or_stroked_mesh_is_paths_cell_by_cell(style):
    # Agg draws these cell by cell too (an antialiased mesh has its own seams): paths.
    fig = figure()
    fig.subplots().pcolormesh(np.arange(6.0).reshape(2, 3), **style)
    ops = record_figure(fig)
    assert not [op for op in ops if op[0] == "i"]
    assert len([op for op in ops if op[0] == "p" and op[2] is not None]) >= 6


def test_a_mesh_that_is_not_an_axis_aligned_grid_is_paths():
    fig = figure()
    x, y = np.meshgrid(np.arange(4.0), np.arange(3.0))
    fig.subplots().pcolormesh(x + 0.3 * y, y, np.arange(6.0).reshape(2, 3))  # sheared
    ops = record_figure(fig)
    assert not [op for op in ops if op[0] == "i"]


# Titles: a "d" op each, which draws nothing: the page's description of the figure.

def test_each_title_drawn_is_described_just_before_its_text():
    fig = figure()
    left, right = fig.subplots(1, 2)
    left.set_title("centre")
    left.set_title("on the left", loc="left")
    right.set_title("two\nlines $\\alpha^2$")
    right.set_title("hidden", loc="right").set_visible(False)
    fig.suptitle("the figure")
    left.set_xlabel("not a title")
    ops = record_figure(fig)
    described = [op for op in ops if op[0] == "d"]
    assert sorted(map(tuple, described)) == [
        ("d", "centre", 1), ("d", "on the left", 1), ("d", "the figure", 0),
        ("d", "two lines alpha^2", 1)]
    for text in ("centre", "on the left", "the figure", "two"):
        at = next(k for k, op in enumerate(ops) if op[0] == "t" and op[3] == text)
        assert ops[at - 1][0] == "d" and ops[at - 1][1].startswith(text)
    # Recording leaves the titles as they were: no wrapper left on them.
    assert all("draw" not in vars(t) for t in (left.title, right.title, fig._suptitle))
