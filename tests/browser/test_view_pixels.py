"""Every page view of the series, as view.js draws it in Chromium, against matplotlib's own pixels.

For each view of ``VIEWS`` (tests/test_page_scenes.py: every view the notebooks show) and a
probe view built here, the view's real scene (``view.scene``: what the notebook ships) is drawn
by ``helpers/widgets/view.js`` on a harness page (a fake model, no Jupyter) at device pixel
ratio 1, in up to three states, set through the model's ``index``: the view's default, every
control at its far end (its last value, or its first when the default is the last), and every
control at its middle value. The canvas is read back with ``getImageData`` (exact) and compared
with the PNG the displayed view carries for that state (``figure_png(view._draw(**values))``:
matplotlib's Agg drawing, the same size in pixels).

The two are not equal, and should not be expected to be: Chromium lays DejaVu Sans out with its
own hinting and advances (texts start at the same pixel but run ~1.2 % shorter, a 414 px title
6 px; glyph rows sit 0-1 px lower), and it antialiases every path edge where Agg snaps straight
edges to whole pixels (a 1 px spine becomes two half-grey rows; adjacent bars meet in a pale
seam instead of Agg's occasional white pixel gap). So the comparison splits the figure by what
matplotlib says is where; levels are 0-255, "any channel" the largest of R, G, B:

* **Texts**: the box of each visible text (``Text.get_window_extent``, padded by ``TEXT_PAD``
  px). The mean colour of the box (ink and background together) may differ by ``TEXT_TOL``
  levels in any channel (measured: 5.1 at most): a text missing, moved out of its box, in
  another colour or much bolder fails; hinting does not.
* **Everything else**: ``BLOCK`` × ``BLOCK`` px blocks (a partial last block merged into the one
  before), leaving out every block that touches a text box. Each block's mean colour may differ
  by ``BLOCK_TOL`` levels (measured: 41.9 at most, a spine and a tick on block edges), and by
  ``SHIFTED_TOL`` at the best shift of matplotlib's image by up to 1 px (measured: 22.6;
  snapping moves edges by half a pixel, which moves ink across block edges): a wrong colour, a
  missing or displaced bar, line or image fails.
* **Image cells**: the centre pixel of every cell of ``CELL_MIN`` px or more (and its quarter
  points at ``CELL_QUARTERS`` px or more), inside its axes and outside the text boxes, where
  matplotlib shows the cell's own colour (its colour map colour and alpha over white) on that
  pixel and its 8 neighbours (nothing drawn within 1 px, where edges antialias differently),
  must be matplotlib's pixel within ``CELL_TOL`` levels (measured: 1).
* **The whole figure**: mean |page - matplotlib| over all pixels and channels at most
  ``MEAN_TOL`` (measured: 6.94, mostly text), and the signed mean of each channel at most
  ``SIGNED_TOL`` (measured: 0.40): a colour swapped or tinted over the figure shifts a channel's
  mean, antialiasing does not.

The probe view has what no view of the series draws in any state: an image of more than 256
colours (two bytes a cell in the scene) and an image at alpha 0.5.

A failure names the view, the state and where (the block's row and column and its pixels, or
the text and its box, in figure pixels from the top left), and saves the page's pixels,
matplotlib's and their difference (×4, the worst places outlined in red) to
``artifacts/browser/pixels-<view>-<state>-{page,matplotlib,diff}.png``. Every state's figures
are listed at the end of the run. Most of the run time is recording the scenes (as the
notebooks do). Chromium missing: skipped, or failed with CI set (conftest.py).
"""

from __future__ import annotations

import base64
import importlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pytest
from PIL import Image
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.text import Text

from helpers.widgets._common import figure_png, interactive_figure
from tests.browser import test_view_js as view_js
from tests.test_page_scenes import VIEWS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"  # as conftest.py's (git-ignored)

# Tolerances, in levels of 0-255 (see the module docstring); measured today, see the report.
TEXT_PAD = 3  # px around each text box
TEXT_TOL = 12.0  # mean colour of a text box, any channel
BLOCK = 8  # px
BLOCK_TOL = 56.0  # mean colour of a block outside the text boxes, any channel
SHIFTED_TOL = 32.0  # the same, at the best shift of the page by up to 1 px (Agg's snapping)
CELL_MIN = 3  # px: smaller cells are not sampled (nearest-neighbour rounding at their edges)
CELL_QUARTERS = 12  # px: cells this large are sampled at their quarter points too
CELL_TOL = 2  # levels at a cell's sampled pixel, any channel
MEAN_TOL = 10.0  # mean |page - matplotlib| over the figure
SIGNED_TOL = 1.5  # |mean(page - matplotlib)| of each channel over the figure

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>pixels</title></head>
<body style="margin: 0; font: 15px serif">
<div id="v"></div>
<script type="module">
import widget from "./view.js";

""" + view_js.FAKE_MODEL + """
const el = document.getElementById("v");
let model = null, cleanup = null;
function state() {
  const c = el.querySelector(".ahv-canvas");
  return { error: el.querySelector(".ahv-error")?.textContent ?? null,
           redraws: Number(el.querySelector(".ahv-view")?.dataset.redraws ?? 0),
           size: c ? [c.width, c.height] : null, dpr: devicePixelRatio };
}
// One view at a time: the previous one is cleaned up and replaced.
async function show(scene, index) {
  if (cleanup) await cleanup();
  model = new FakeModel({ scene, index });
  cleanup = await widget.render({ model, el });
  return state();
}
function move(index) { model.set("index", index); return state(); }
// The canvas's RGBA bytes (getImageData: its backing store, exactly), base64.
function pixels() {
  const c = el.querySelector(".ahv-canvas");
  const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let s = "";
  for (let i = 0; i < data.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, data.subarray(i, i + 0x8000));
  }
  return btoa(s);
}
window.harness = { show, move, pixels };
</script>
</body></html>
"""


# ------------------------------------------------------------------------------ the probe view

def probe_view():
    """A view with what the series lacks: an RGB image of 24 × 24 = 576 colours (a palette
    above 256: two bytes a cell) and a colour-mapped image at alpha 0.5, beside a red line."""
    fig = Figure(figsize=(6.4, 2.6), dpi=100)
    fig.set_label("probe")
    yy, xx = np.mgrid[0:24, 0:24] / 23

    def draw(step: int) -> Figure:
        fig.clear()
        left, right = fig.subplots(1, 2)
        left.imshow(np.stack([xx, yy, np.full_like(xx, 0.2 + 0.6 * step)], -1),
                    interpolation="nearest")
        left.set_title(f"576 colours, step {step}")
        values = np.sin(3 * xx[:10, :10] + 2 * yy[:10, :10] + step)
        right.imshow(values, cmap="viridis", alpha=0.5, interpolation="nearest")
        right.plot([0, 9], [9, 0], color="tab:red", lw=2)
        right.set_title("alpha 0.5")
        return fig

    return interactive_figure(draw, step=widgets.IntSlider(value=0, min=0, max=1))


# ------------------------------------------------------------------------------ fixtures

def _view_params():
    params = [pytest.param(m, k, id=f"{m}.{k}") for m, keys in VIEWS.items() for k in keys]
    return params + [pytest.param("probe", "probe", id="probe")]


_BUILT: dict[str, dict] = {}  # each module's demo_views(), built once a session


def series_view(module: str, key: str):
    """The view ``key`` of ``helpers.widgets.<module>``'s ``demo_views()``, built (and its
    scene recorded, when asked) once in a test session: test_view_series.py shares them."""
    if module not in _BUILT:
        _BUILT[module] = importlib.import_module(f"helpers.widgets.{module}").demo_views()
        assert sorted(_BUILT[module]) == sorted(VIEWS[module])  # no view left unchecked
    return _BUILT[module][key]


@pytest.fixture(scope="module")
def built_views():
    """``get(module, key)``: the view (``series_view``), or the probe view."""
    return lambda module, key: probe_view() if module == "probe" else series_view(module, key)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from view_js.serve_harness(tmp_path_factory.mktemp("view_pixels"), HARNESS)


class Harness(view_js.Harness):
    """The harness page at device pixel ratio 1 (``test_view_js``'s, with this page's calls)."""

    def __init__(self, browser, base: str):
        super().__init__(browser, base, dpr=1, size=(1280, 900))

    def show(self, scene: str, index: list[int]) -> dict:
        return self.page.evaluate("([s, i]) => window.harness.show(s, i)", [scene, index])

    def move(self, index: list[int]) -> dict:
        return self.page.evaluate("i => window.harness.move(i)", index)

    def pixels(self, size: list[int]) -> np.ndarray:
        """The canvas as (height, width, 4) bytes."""
        w, h = size
        raw = base64.b64decode(self.page.evaluate("() => window.harness.pixels()"))
        return np.frombuffer(raw, np.uint8).reshape(h, w, 4)


@pytest.fixture(scope="module")
def harness(browser, site):
    h = Harness(browser, site)
    try:
        yield h
    finally:
        h.context.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """``artifacts/browser/``, emptied of this test's images from a previous run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("pixels-*.png"):
        old.unlink()
    return ARTIFACTS


# ------------------------------------------------------------------------------ comparison

def states_of(view) -> list[list[int]]:
    """The default index, every control at its far end (the last value, or the first when the
    default is the last), and every control at its middle value; without repeats."""
    default = list(view.index)
    sizes = [len(c.values) for c in view._controls]
    far = [n - 1 if d != n - 1 else 0 for d, n in zip(default, sizes)]
    middle = [(n - 1) // 2 for n in sizes]
    out: list[list[int]] = []
    for s in (default, far, middle):
        if s not in out:
            out.append(s)
    return out


def decode_png(png: bytes) -> np.ndarray:
    """matplotlib's PNG as (height, width, 3) bytes, over white."""
    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(np.float64)
    rgb = im[..., :3] * (im[..., 3:] / 255) + 255 * (1 - im[..., 3:] / 255)
    return np.round(rgb).astype(np.uint8)


def text_boxes(fig: Figure, height: int, width: int) -> list[tuple[str, tuple[int, int, int, int]]]:
    """(text, (x0, y0, x1, y1)) of each visible, non-blank text of the drawn ``fig``, in figure
    pixels (origin top-left, y down), padded by ``TEXT_PAD`` and clipped to the figure."""
    renderer = fig.canvas.get_renderer()
    boxes = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        if t.axes is not None and not t.axes.get_visible():
            continue
        bb = t.get_window_extent(renderer)
        x0, x1 = int(np.floor(bb.x0)) - TEXT_PAD, int(np.ceil(bb.x1)) + TEXT_PAD
        y0, y1 = int(np.floor(height - bb.y1)) - TEXT_PAD, int(np.ceil(height - bb.y0)) + TEXT_PAD
        x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
        if x1 > x0 and y1 > y0:
            boxes.append((t.get_text(), (x0, y0, x1, y1)))
    return boxes


def cell_points(fig: Figure, mpl: np.ndarray, texts) -> list[tuple[int, int]]:
    """(x, y) figure pixels where an image cell's own colour must show: the centre of every
    cell of at least ``CELL_MIN`` px (and its four quarter points when it is ``CELL_QUARTERS`` px
    or more), inside its axes and outside the text boxes, where matplotlib's pixel and its 8
    neighbours are the cell's colour (its colour map colour with its alpha, over white)."""
    height, width = mpl.shape[:2]
    free = np.ones((height, width), bool)
    for _, (x0, y0, x1, y1) in texts:
        free[y0:y1, x0:x1] = False
    out = []
    for im in fig.findobj(AxesImage):
        ax = im.axes
        if not im.get_visible() or ax is None or not ax.get_visible():
            continue
        arr = np.ma.masked_invalid(im.get_array())
        rows, cols = arr.shape[:2]
        rgba = im.to_rgba(arr, bytes=True).astype(np.float64)
        alpha = rgba[..., 3:] / 255 * (1.0 if im.get_alpha() is None else im.get_alpha())
        want = rgba[..., :3] * alpha + 255 * (1 - alpha)  # over white
        x0, x1, y0, y1 = im.get_extent()
        corner = ax.transData.transform([(x0, y0), (x1, y1)])
        cell = min(abs(corner[1] - corner[0]) / (cols, rows))  # px
        if cell < CELL_MIN:
            continue
        fractions = [(0.5, 0.5)]
        if cell >= CELL_QUARTERS:
            fractions += [(0.25, 0.25), (0.25, 0.75), (0.75, 0.25), (0.75, 0.75)]
        clip = ax.bbox
        for fx, fy in fractions:
            r, c = np.mgrid[0:rows, 0:cols]
            xs = x0 + (c + fx) * (x1 - x0) / cols
            ys = (y1 + (r + fy) * (y0 - y1) / rows if im.origin == "upper"
                  else y0 + (r + fy) * (y1 - y0) / rows)
            pts = ax.transData.transform(np.column_stack([xs.ravel(), ys.ravel()]))
            for (px, py), colour in zip(pts, want.reshape(-1, 3)):
                if not (clip.x0 + 1 < px < clip.x1 - 1 and clip.y0 + 1 < py < clip.y1 - 1):
                    continue
                x, y = int(px), int(height - py)
                if not (1 <= y < height - 1 and 1 <= x < width - 1 and free[y, x]):
                    continue
                # matplotlib shows the cell's colour around it too: no edge of the cell, of a
                # line or of a marker within 1 px, where the two antialias differently.
                if np.abs(mpl[y - 1:y + 2, x - 1:x + 2] - colour).max() <= CELL_TOL + 0.5:
                    out.append((x, y))
    return out


def _edges(n: int) -> np.ndarray:
    """Where the blocks along a side of ``n`` px start: every ``BLOCK`` px, a last partial
    block merged into the one before (so no block is narrower than ``BLOCK``)."""
    starts = np.arange(0, n, BLOCK)
    return starts[:-1] if len(starts) > 1 and n - starts[-1] < BLOCK else starts


def block_means(img: np.ndarray) -> np.ndarray:
    """Mean colour of each block: (rows of blocks, columns of blocks, channels)."""
    h, w = img.shape[:2]
    ys, xs = _edges(h), _edges(w)
    sums = np.add.reduceat(np.add.reduceat(img.astype(np.float64), ys, axis=0), xs, axis=1)
    counts = np.outer(np.diff(np.append(ys, h)), np.diff(np.append(xs, w)))
    return sums / counts[..., None]


def block_box(by: int, bx: int, h: int, w: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) in figure pixels of block (row by, column bx)."""
    ys, xs = np.append(_edges(h), h), np.append(_edges(w), w)
    return int(xs[bx]), int(ys[by]), int(xs[bx + 1]), int(ys[by + 1])


def _shifted(img: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """``img`` moved by (dx, dy) px, its edge pixels repeated into the gap."""
    h, w = img.shape[:2]
    padded = np.pad(img, ((1, 1), (1, 1), (0, 0)), mode="edge")
    return padded[1 - dy:1 - dy + h, 1 - dx:1 - dx + w]


@dataclass
class Worst:
    """The largest difference of one kind, and where (x0, y0, x1, y1 in figure pixels)."""

    value: float = 0.0
    box: tuple = (0, 0, 0, 0)
    what: str = ""


@dataclass
class Verdict:
    """The figures of one state, and what failed (naming where)."""

    mean_abs: float = 0.0
    signed: tuple = (0.0, 0.0, 0.0)
    block: Worst = field(default_factory=Worst)
    shifted: Worst = field(default_factory=Worst)
    text: Worst = field(default_factory=Worst)
    cell: Worst = field(default_factory=Worst)
    cells: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        s = ", ".join(f"{v:+.2f}" for v in self.signed)
        return (f"mean |Δ| {self.mean_abs:.2f}, signed ({s}); worst block {self.block.value:.1f} "
                f"at x,y {self.block.box[:2]}, shifted ±1 px {self.shifted.value:.1f} at x,y "
                f"{self.shifted.box[:2]}; worst text {self.text.value:.1f} "
                f"({self.text.what[:30]!r}); "
                f"{self.cells} cell points, worst {self.cell.value:.0f}")

    def places(self) -> list[tuple]:
        return [w.box for w in (self.block, self.shifted, self.text, self.cell) if w.value > 0]


def compare(page: np.ndarray, mpl: np.ndarray, texts, cells) -> Verdict:
    """The page (h, w, 3) against matplotlib (h, w, 3), given the text boxes and cell points."""
    v = Verdict()
    p, m = page.astype(np.float64), mpl.astype(np.float64)
    h, w = m.shape[:2]
    diff = p - m
    v.mean_abs = float(np.abs(diff).mean())
    v.signed = tuple(float(x) for x in diff.reshape(-1, 3).mean(axis=0))
    if v.mean_abs > MEAN_TOL:
        v.failures.append(f"mean |Δ| over the figure {v.mean_abs:.2f} > {MEAN_TOL}")
    for name, s in zip("RGB", v.signed):
        if abs(s) > SIGNED_TOL:
            v.failures.append(f"mean {name} shifted by {s:+.2f} over the figure (> ±{SIGNED_TOL})")

    def region(what: str, worst: Worst, tol: float) -> None:
        if worst.value > tol:
            x0, y0, x1, y1 = worst.box
            v.failures.append(
                f"{what} x {x0}-{x1}, y {y0}-{y1}: mean colour differs by {worst.value:.1f} > "
                f"{tol} (page {_rgb(p[y0:y1, x0:x1])}, matplotlib {_rgb(m[y0:y1, x0:x1])})")

    # Texts: each box's mean colour.
    for text, (x0, y0, x1, y1) in texts:
        d = float(np.abs(p[y0:y1, x0:x1].reshape(-1, 3).mean(0)
                         - m[y0:y1, x0:x1].reshape(-1, 3).mean(0)).max())
        if d > v.text.value:
            v.text = Worst(d, (x0, y0, x1, y1), text)
    region(f"text {v.text.what!r}, box", v.text, TEXT_TOL)
    # Blocks that touch no text box: as they are, and allowing the page a shift of 1 px.
    in_text = np.zeros((h, w, 1))
    for _, (x0, y0, x1, y1) in texts:
        in_text[y0:y1, x0:x1] = 1
    near_text = block_means(in_text)[..., 0] > 0
    page_blocks = block_means(p)
    for attr, tol, shifts, what in (
            ("block", BLOCK_TOL, [(0, 0)], "block"),
            ("shifted", SHIFTED_TOL, [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)],
             "block (at its best shift of up to 1 px)")):
        blocks = np.min([np.abs(page_blocks - block_means(_shifted(m, dx, dy))).max(axis=-1)
                         for dx, dy in shifts], axis=0)
        blocks[near_text] = 0
        by, bx = np.unravel_index(int(blocks.argmax()), blocks.shape)
        worst = Worst(float(blocks[by, bx]), block_box(by, bx, h, w), f"row {by}, col {bx}")
        setattr(v, attr, worst)
        over = int((blocks > tol).sum())
        region(f"{what} (row {by}, col {bx}; {over} of {blocks.size} blocks over):", worst, tol)
    # Image cells: their own colour at their centres (and quarter points).
    v.cells = len(cells)
    if cells:
        xs, ys = np.array(cells).T
        d = np.abs(p[ys, xs] - m[ys, xs]).max(axis=-1)
        k = int(d.argmax())
        x, y = int(xs[k]), int(ys[k])
        v.cell = Worst(float(d[k]), (x, y, x + 1, y + 1))
        if v.cell.value > CELL_TOL:
            v.failures.append(
                f"{int((d > CELL_TOL).sum())} of {len(cells)} image cell points differ by more "
                f"than {CELL_TOL}; worst at x {x}, y {y}: page {_rgb(p[y, x])}, matplotlib "
                f"{_rgb(m[y, x])}")
    return v


def _rgb(a: np.ndarray) -> str:
    r, g, b = np.asarray(a, np.float64).reshape(-1, 3).mean(axis=0)
    return f"({r:.0f}, {g:.0f}, {b:.0f})"


def save_images(folder: Path, stem: str, page: np.ndarray, mpl: np.ndarray,
                where: list[tuple]) -> list[Path]:
    """The page's pixels, matplotlib's and their difference (white: equal; darker: more
    different, ×4; the places in ``where`` outlined in red) as PNGs."""
    diff = np.abs(page.astype(np.int16) - mpl.astype(np.int16)).max(axis=-1)
    grey = (255 - np.clip(diff * 4, 0, 255)).astype(np.uint8)
    out = np.repeat(grey[..., None], 3, axis=-1)
    for x0, y0, x1, y1 in where:
        x1, y1 = max(x1 - 1, x0), max(y1 - 1, y0)
        out[y0:y1 + 1, [x0, x1]] = out[[y0, y1], x0:x1 + 1] = (255, 0, 0)
    paths = []
    for kind, img in (("page", page), ("matplotlib", mpl), ("diff", out)):
        path = folder / f"pixels-{stem}-{kind}.png"
        Image.fromarray(img).save(path)
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------ the test

@pytest.mark.parametrize("module, key", _view_params())
def test_the_canvas_shows_matplotlibs_pixels(module, key, built_views, harness, artifacts,
                                             report):
    view = built_views(module, key)
    scene = view.scene_data()
    name = scene["title"] or f"{module}.{key}"
    states = states_of(view)
    problems = []
    got = harness.show(view.scene, states[0])
    assert got["error"] is None, f"{name}: view.js could not draw the scene: {got['error']}"
    assert got["dpr"] == 1
    assert got["size"] == [scene["width"], scene["height"]], f"{name}: canvas {got['size']}"
    try:
        for n, index in enumerate(states):
            if n:
                got = harness.move(index)
                assert got["error"] is None, f"{name} {index}: {got['error']}"
                assert got["redraws"] == n + 1, f"{name} {index}: no redraw"
            rgba = harness.pixels(got["size"])
            assert (rgba[..., 3] == 255).all(), f"{name} {index}: transparent canvas pixels"
            page = rgba[..., :3]
            values = {c.name: c.values[i] for c, i in zip(view._controls, index)}
            fig = view._draw(**values)
            mpl = decode_png(figure_png(fig))
            assert mpl.shape == page.shape, (
                f"{name} {index}: matplotlib's PNG is {mpl.shape[1]} × {mpl.shape[0]} px, the "
                f"canvas {page.shape[1]} × {page.shape[0]}")
            texts = text_boxes(fig, *mpl.shape[:2])
            v = compare(page, mpl, texts, cell_points(fig, mpl, texts))
            shown = ", ".join(f"{c.name}={c.labels[i]}" for c, i in zip(view._controls, index))
            report(f"pixels {name} {index}: {v.line()}")
            if v.failures:
                stem = f"{name}-{'_'.join(map(str, index))}".replace("/", "_")
                saved = save_images(artifacts, stem, page, mpl, v.places())
                problems.append(f"{name}, state {index} ({shown}):\n    "
                                + "\n    ".join(v.failures)
                                + "\n    images: " + ", ".join(str(s) for s in saved))
    finally:
        view.update()  # the figure back in the controls' state
    problems += harness.problems()
    assert not problems, "the page differs from matplotlib's pixels:\n" + "\n".join(problems)
