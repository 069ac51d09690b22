"""helpers/widgets/view.js in headless Chromium, without Jupyter: a harness page renders two views
of one fake model (get/set/on/off, and a save_changes that throws, as with no kernel) over a scene
built here, and the test reads the canvas pixels back.

The page is served from a temporary directory on 127.0.0.1; a request to any other host is
aborted and fails the test. Chromium missing: skipped, or failed with CI set (conftest.py).
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import zlib
from pathlib import Path

import pytest
from benchmarks.bench_pages import local_only, serve  # 127.0.0.1 only, a free port
from matplotlib.font_manager import weight_dict

pytestmark = pytest.mark.browser

VIEW_JS = Path(__file__).resolve().parents[2] / "helpers" / "widgets" / "view.js"
DPR = 2  # a device pixel ratio above 1, so the test checks the canvas is scaled by it
W, H = 200, 120

# Image op: 4 × 2 cells of 20 px at (20, 20); its palette depends on "step" (3 values).
IMG_X, IMG_Y, CELL, COLS, ROWS = 20, 20, 20, 4, 2
IMG_DATA = [0, 1, 2, 3, 3, 2, 1, 0]  # row-major, row 0 at the top
PALETTES = [
    ["#1f77b4ff", "#ff7f0eff", "#2ca02cff", "#d62728ff"],
    ["#9467bdff", "#8c564bff", "#e377c2ff", "#7f7f7fff"],
    ["#bcbd22ff", "#17becfff", "#000000ff", "#00ff00ff"],
]
# Path op: a 30 × 40 box whose x depends on "step" and colour on "mask" (slot on both controls).
BOX_COLOURS = ["#3366ccff", "#cc3366ff"]
# Path op: a 20 × 20 square whose colour depends on "kernel" (a select).
KERNEL_COLOURS = ["#008080ff", "#808000ff"]


def box_x(step: int) -> int:
    return 110 + 10 * step


def make_scene(title: str = "test_view", n_steps: int = 3) -> dict:
    controls = [
        {"name": "step", "label": "step size", "kind": "range",
         "values": ["0.5", "1.0", "1.5"][:n_steps]},
        {"name": "mask", "label": "mask", "kind": "checkbox", "values": ["False", "True"]},
        {"name": "kernel", "label": "kernel", "kind": "select", "values": ["gaussian", "boxcar"]},
    ]

    def image(s):
        return ["i", IMG_X, IMG_Y, COLS * CELL, ROWS * CELL, COLS, ROWS, PALETTES[s],
                base64.b64encode(bytes(IMG_DATA)).decode(), None]

    def box(s, m):
        x = box_x(s)
        return ["p", f"M{x} 20L{x + 30} 20L{x + 30} 60L{x} 60Z", BOX_COLOURS[m], "#000000ff", 1.5,
                [3, 2], [0, 0, W, H]]

    def square(k):
        return ["p", "M20 80L40 80L40 100L20 100Z", KERNEL_COLOURS[k], None, 0, None, None]

    states = [[image(s)] for s in range(n_steps)]
    # Each box state has a title ("d" op: no ink), as the figure's description says.
    states += [[["d", f"box {s}, {m}", 1], box(s, m),
                ["t", box_x(s), 75, f"s={s} m={m}", 10, "#000000ff", 0, "bold", "normal", 40]]
               for s in range(n_steps) for m in range(2)]
    states += [[square(k)] for k in range(2)]
    frame = [
        ["p", f"M1 1L{W - 1} 1L{W - 1} {H - 1}L1 {H - 1}Z", None, "#000000ff", 1, None, None],
        {"slot": 0},
        ["t", 12, 110, "rotated", 9, "#333333ff", 90, "normal", "italic", 30],
        {"slot": 1},
        {"slot": 2},
        ["d", title, 0],  # a suptitle, drawn last: the description says it first
    ]
    slots = [
        {"deps": [0], "table": list(range(n_steps))},
        {"deps": [0, 1], "table": [n_steps + 2 * s + m for s in range(n_steps) for m in range(2)]},
        {"deps": [2], "table": [3 * n_steps, 3 * n_steps + 1]},
    ]
    return {"version": 1, "title": title, "width": W, "height": H, "controls": controls,
            "frame": frame, "slots": slots, "states": states}


def encode(scene: dict) -> str:
    """What Python puts in the ``scene`` trait: base64 of zlib-compressed JSON."""
    return base64.b64encode(zlib.compress(json.dumps(scene).encode())).decode()


# The widget's model as view.js uses it, in a harness page (test_view_pixels.py's too).
FAKE_MODEL = """\
// A Backbone-like model: change:<name> fires on a set that changes the value.
class FakeModel {
  constructor(state) { this.state = state; this.handlers = {}; this.saves = 0; }
  get(name) { return this.state[name]; }
  set(name, value) {
    const changed = JSON.stringify(this.state[name]) !== JSON.stringify(value);
    this.state[name] = value;
    if (changed) for (const f of [...(this.handlers["change:" + name] || [])]) f();
  }
  on(event, f) { (this.handlers[event] ||= []).push(f); }
  off(event, f) { this.handlers[event] = (this.handlers[event] || []).filter((g) => g !== f); }
  listeners() { return Object.values(this.handlers).reduce((n, fs) => n + fs.length, 0); }
  save_changes() { this.saves++; throw new Error("no kernel (as on the static site)"); }
}
"""

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>view.js</title></head>
<body style="font: 15px serif">
<div id="a"></div><div id="b"></div>
<script type="module">
import widget, * as view from "./view.js";

""" + FAKE_MODEL + """

const model = new FakeModel({ scene: SCENE, index: [0, 0, 0] });
const cleanups = [];
for (const id of ["a", "b"]) {
  cleanups.push(await widget.render({ model, el: document.getElementById(id) }));
}
window.harness = { model, cleanups, stateIndex: view.stateIndex, cssFont: view.cssFont,
                   fitScale: view.fitScale };
</script>
</body></html>
"""

# (x, y) in CSS pixels of view `id`'s canvas → [r, g, b, a] of the device pixel there.
PIXEL_JS = """([id, x, y]) => {
  const c = document.querySelector(`#${id} .ahv-canvas`);
  const d = window.devicePixelRatio;
  const px = c.getContext("2d").getImageData(Math.floor(x * d), Math.floor(y * d), 1, 1);
  return Array.from(px.data);
}"""
CANVAS_JS = "id => document.querySelector(`#${id} .ahv-canvas`).toDataURL()"
REDRAWS_JS = "id => Number(document.querySelector(`#${id} .ahv-view`).dataset.redraws)"


def rgb(hex_colour: str) -> list[int]:
    return [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]


def assert_colour(page, view: str, x: float, y: float, hex_colour: str) -> None:
    got = page.evaluate(PIXEL_JS, [view, x, y])
    want = rgb(hex_colour)
    assert all(abs(g - w) <= 2 for g, w in zip(got[:3], want)) and got[3] == 255, (
        f"pixel ({x}, {y}) of view {view}: {got}, expected {want}"
    )


def assert_image(page, view: str, step: int) -> None:
    """Every cell of the image op, at its centre, has its palette colour for this step."""
    for r in range(ROWS):
        for c in range(COLS):
            colour = PALETTES[step][IMG_DATA[r * COLS + c]]
            assert_colour(page, view, IMG_X + (c + 0.5) * CELL, IMG_Y + (r + 0.5) * CELL, colour)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from serve_harness(tmp_path_factory.mktemp("view_js"),
                             HARNESS.replace("SCENE", json.dumps(encode(make_scene()))))


def serve_harness(root: Path, page: str):
    """view.js and the harness ``page`` in ``root``, served on 127.0.0.1: yields the base URL."""
    shutil.copy(VIEW_JS, root / "view.js")
    (root / "index.html").write_text(page)
    with serve(root) as url:
        yield url


class Harness:
    """The harness page, and what went wrong on it: page and console errors, foreign requests."""

    def __init__(self, browser, base: str, dpr: float = DPR, size: tuple[int, int] = (800, 600),
                 mobile: bool = False):
        self.context = browser.new_context(device_scale_factor=dpr,
                                           viewport={"width": size[0], "height": size[1]},
                                           is_mobile=mobile, has_touch=mobile)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.foreign: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(
            f"console error: {m.text}"))

        local_only(self.page, base, self.foreign)
        self.page.goto(base + "index.html")
        self.page.wait_for_function("window.harness !== undefined", timeout=15_000)

    def assert_clean(self) -> None:
        assert not self.errors, self.errors
        assert not self.foreign, f"requests to other hosts: {self.foreign}"

    def problems(self) -> list[str]:
        """What went wrong since the last call (errors, foreign requests), then forget it."""
        found = self.errors + [f"request to another host: {u}" for u in self.foreign]
        self.errors.clear()
        self.foreign.clear()
        return found


@pytest.fixture
def harness(browser, site):
    h = Harness(browser, site)
    try:
        yield h
    finally:
        h.context.close()


def test_state_index_is_row_major(harness):
    cases = harness.page.evaluate("""() => {
      const f = window.harness.stateIndex;
      const controls = [{ values: [0, 1, 2] }, { values: [0, 1] }, { values: [0, 1, 2, 3] }];
      const both = { deps: [0, 2], table: [...Array(12).keys()] };
      return [
        f(both, controls, [0, 1, 0]), f(both, controls, [0, 0, 3]), f(both, controls, [2, 1, 1]),
        f(both, controls, [5, 0, -1]),                       // clamped to [2, ., 0]
        f({ deps: [], table: [7] }, controls, [2, 1, 3]),    // no deps: the one state
        f({ deps: [1], table: [4, 9] }, controls, [2, 1, 3]),
      ];
    }""")
    assert cases == [0, 3, 2 * 4 + 1, 2 * 4, 7, 9]
    harness.assert_clean()


def test_draws_the_scene(harness):
    page = harness.page
    for view in ("a", "b"):
        root = page.locator(f"#{view} .ahv-view")
        assert root.get_attribute("data-view") == "test_view"
        assert root.get_attribute("data-redraws") == "1"
        assert float(root.get_attribute("data-last-redraw-ms")) >= 0
        size = page.evaluate("""id => { const c = document.querySelector(`#${id} .ahv-canvas`);
          const r = c.getBoundingClientRect(); return [c.width, c.height, r.width, r.height]; }""",
                             view)
        assert size == [W * DPR, H * DPR, W, H]
        assert_image(page, view, 0)
        assert_colour(page, view, box_x(0) + 15, 40, BOX_COLOURS[0])
        assert_colour(page, view, 30, 90, KERNEL_COLOURS[0])
        assert_colour(page, view, 150, 110, "#ffffff")  # background
    # Text ops left ink: some non-white pixel in each run's box.
    ink = page.evaluate("""() => {
      const c = document.querySelector("#a .ahv-canvas"), d = devicePixelRatio;
      const dark = (x, y, w, h) => {
        const px = c.getContext("2d").getImageData(x * d, y * d, w * d, h * d).data;
        for (let i = 0; i < px.length; i += 4) if (px[i] < 128) return true;
        return false;
      };
      return [dark(110, 66, 40, 10), dark(3, 80, 10, 30)];
    }""")
    assert ink == [True, True]
    # Labels: <label for=...> tied to each control, the range's value shown in its <output>.
    labels = page.evaluate("""() => [...document.querySelectorAll("#a label")].map(l => [
      l.textContent, l.control?.dataset.control,
      l.control === document.getElementById(l.htmlFor)])""")
    assert labels == [
        ["step size", "step", True], ["mask", "mask", True], ["kernel", "kernel", True]]
    ids = page.evaluate("() => [...document.querySelectorAll('[data-control]')].map(e => e.id)")
    assert len(set(ids)) == 6, f"element ids must be unique across views: {ids}"
    rng = page.locator("#a [data-control=step]")
    assert (rng.get_attribute("min"), rng.get_attribute("max"), rng.get_attribute("step")) == (
        "0", "2", "1")
    assert rng.get_attribute("aria-valuetext") == "0.5"
    assert page.locator("#a output").first.text_content() == "0.5"
    assert page.locator("#a [data-control=kernel] option").all_text_contents() == [
        "gaussian", "boxcar"]
    assert not page.locator("#a [data-control=mask]").is_checked()
    harness.assert_clean()


def test_moving_controls_redraws_and_syncs(harness):
    page = harness.page

    def index():
        return page.evaluate("() => window.harness.model.get('index')")

    def move(action, want_index, changed_view_a, step):
        before = {v: (page.evaluate(CANVAS_JS, v), page.evaluate(REDRAWS_JS, v)) for v in "ab"}
        action()
        assert index() == want_index
        for v in "ab":  # the other view of the same model follows through change:index
            assert page.evaluate(REDRAWS_JS, v) == before[v][1] + 1, f"view {v}: one redraw"
            assert page.evaluate(CANVAS_JS, v) != before[v][0], f"view {v}: canvas unchanged"
            assert_image(page, v, step)
        assert changed_view_a(), "view a's inputs do not show the new index"

    rng = page.locator("#a [data-control=step]")
    rng.focus()
    move(lambda: page.keyboard.press("ArrowRight"), [1, 0, 0],
         lambda: rng.input_value() == "1" and rng.get_attribute("aria-valuetext") == "1.0", 1)
    assert page.locator("#a output").first.text_content() == "1.0"
    assert page.locator("#b output").first.text_content() == "1.0"
    assert page.locator("#b [data-control=step]").input_value() == "1"
    assert_colour(page, "a", box_x(1) + 15, 40, BOX_COLOURS[0])
    # A keyboard-focused control shows a focus ring.
    assert page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle") == "solid"

    box = page.locator("#a [data-control=mask]")
    move(box.click, [1, 1, 0], box.is_checked, 1)
    assert page.locator("#b [data-control=mask]").is_checked()
    assert_colour(page, "b", box_x(1) + 15, 40, BOX_COLOURS[1])

    sel = page.locator("#b [data-control=kernel]")
    move(lambda: sel.select_option("boxcar"),
         [1, 1, 1], lambda: page.locator("#a [data-control=kernel]").input_value() == "boxcar", 1)
    assert_colour(page, "a", 30, 90, KERNEL_COLOURS[1])

    # One save per move; each threw (no kernel), and the views went on working.
    assert page.evaluate("() => window.harness.model.saves") == 3
    harness.assert_clean()


def test_python_moves_and_new_scene(harness):
    page = harness.page
    # Python moves the controls: both views follow, one redraw each.
    page.evaluate("() => window.harness.model.set('index', [2, 1, 0])")
    for v in "ab":
        assert page.evaluate(REDRAWS_JS, v) == 2
        assert page.locator(f"#{v} [data-control=step]").input_value() == "2"
        assert page.locator(f"#{v} output").first.text_content() == "1.5"
        assert page.locator(f"#{v} [data-control=mask]").is_checked()
        assert_image(page, v, 2)
        assert_colour(page, v, box_x(2) + 15, 40, BOX_COLOURS[1])
    # Python pushes new data (fewer steps): both views rebuild; the stale index is clamped.
    new = encode(make_scene(title="retrained", n_steps=2))
    page.evaluate("s => window.harness.model.set('scene', s)", new)
    for v in "ab":
        page.wait_for_function(
            "id => document.querySelector(`#${id} .ahv-view`).dataset.view === 'retrained'", arg=v)
        assert page.locator(f"#{v} [data-control=step]").get_attribute("max") == "1"
        assert page.locator(f"#{v} [data-control=step]").input_value() == "1"
        assert page.locator(f"#{v} [data-control=mask]").is_checked()
        assert page.locator(f"#{v} .ahv-canvas").count() == 1
        assert_image(page, v, 1)
    # The rebuilt controls still drive the view.
    rng = page.locator("#a [data-control=step]")
    rng.focus()
    page.keyboard.press("ArrowLeft")
    assert page.evaluate("() => window.harness.model.get('index')") == [0, 1, 0]
    assert_image(page, "b", 0)
    harness.assert_clean()


def test_cleanup_removes_listeners(harness):
    page = harness.page
    # 3 per view: change:index, change:scene and change:text (a live view's input)
    assert page.evaluate("() => window.harness.model.listeners()") == 6
    left = page.evaluate("""async () => {
      for (const f of window.harness.cleanups) await f();
      const { model } = window.harness;
      model.set("index", [2, 1, 1]);
      return model.listeners();
    }""")
    assert left == 0
    assert page.evaluate(REDRAWS_JS, "a") == 1, "a view redrew after its cleanup"
    harness.assert_clean()


# Single scenes (no controls) pushed into the harness's model, for what the op format can say.

def show(harness, title: str, ops: list) -> None:
    """Both views draw a scene of ``ops`` alone (no controls), or the test fails."""
    scene = {"version": 1, "title": title, "width": W, "height": H, "controls": [],
             "frame": ops, "slots": [], "states": []}
    page = harness.page
    page.evaluate("s => window.harness.model.set('scene', s)", encode(scene))
    for v in "ab":  # drawn, or an error shown instead
        page.wait_for_function("""([id, title]) => document.querySelector(`#${id} .ahv-error`)
          || document.querySelector(`#${id} .ahv-view`)?.dataset.view === title""",
                               arg=[v, title], timeout=15_000)
    errors = page.locator(".ahv-error").all_text_contents()
    assert not errors, errors


def palette_image(size: int, cells: list[int], colours: list[str]) -> list:
    """An image op of 1 row of 20-px cells at (20, 20), a palette of ``size`` colours (black
    but ``colours[k]`` at index ``cells[k]``), each cell its index in as many bytes as the
    format says, little-endian."""
    palette = ["#000000ff"] * size
    for k, c in zip(cells, colours):
        palette[k] = c
    n = 3 if size > 65536 else 2 if size > 256 else 1
    data = b"".join(k.to_bytes(n, "little") for k in cells)
    return ["i", IMG_X, IMG_Y, CELL * len(cells), CELL, len(cells), 1, palette,
            base64.b64encode(data).decode(), None]


@pytest.mark.parametrize("size, cells", [(257, [256, 1, 0]), (65537, [65536, 1, 256, 0])],
                         ids=["2-byte", "3-byte"])
def test_image_cells_are_little_endian_indices(harness, size, cells):
    # Read big-endian, the first two cells would swap colours: 256 (00 01) and 1 (01 00);
    # 65,536 (00 00 01) and 1 (01 00 00).
    colours = ["#ff0000ff", "#00ff00ff", "#0000ffff", "#ffff00ff"][:len(cells)]
    show(harness, f"cells-{size}", [palette_image(size, cells, colours)])
    for k, colour in enumerate(colours):
        assert_colour(harness.page, "a", IMG_X + (k + 0.5) * CELL, IMG_Y + CELL / 2, colour)
    harness.assert_clean()


def test_a_clip_path_clips_after_the_clip_rectangle(harness):
    # A red square 20..80 clipped to a circle (centre 50, 50, radius 30) and to x < 65.
    circle = "".join(f"{'L' if k else 'M'}{50 + 30 * math.cos(k * math.pi / 32):.2f} "
                     f"{50 + 30 * math.sin(k * math.pi / 32):.2f}" for k in range(64)) + "Z"
    square = ["p", "M20 20L80 20L80 80L20 80Z", "#ff0000ff", None, 0, None,
              [0, 0, 65, H, circle]]
    show(harness, "clip-path", [square])
    page = harness.page
    assert_colour(page, "a", 50, 50, "#ff0000")
    assert_colour(page, "a", 50, 23, "#ff0000")  # inside the circle, near its top
    assert_colour(page, "a", 23, 23, "#ffffff")  # inside the square, outside the circle
    assert_colour(page, "a", 70, 50, "#ffffff")  # inside the circle, outside the rectangle
    harness.assert_clean()


def test_caps_and_joins_are_drawn_as_recorded_and_default_as_before(harness):
    def line(y, *style):  # 10 px wide, from x = 60 to 120
        return ["p", f"M60 {y}L120 {y}", None, "#000000ff", 10, None, None, *style]

    corner = ["p", "M150 90L180 90L180 115", None, "#000000ff", 10, None, None, "butt", "miter"]
    show(harness, "caps", [line(20, "square", "round"), line(45, "round", "round"), line(70),
                           corner])
    page = harness.page
    assert_colour(page, "a", 57, 20, "#000000")  # square cap: 5 px past the end
    assert_colour(page, "a", 57, 45, "#000000")  # round cap, on the axis
    assert_colour(page, "a", 56, 49, "#ffffff")  # ... but not in the corner of the square
    assert_colour(page, "a", 57, 70, "#ffffff")  # no cap in the op (older scenes): butt
    # A miter join (Agg's limit: the line width, 10) fills the outer corner; round would not.
    assert_colour(page, "a", 184, 86, "#000000")
    harness.assert_clean()


def test_the_fonts_the_recorder_emits_are_accepted(harness):
    # Weights as numbers (the recorder's: matplotlib's names through weight_dict, or numbers)
    # and CSS keywords (older scenes): the browser takes the font, size included.
    weights = sorted(set(weight_dict.values())) + [550, "bold", "normal"]
    fonts = harness.page.evaluate("""(weights) => weights.map((w) => {
      const ctx = document.createElement("canvas").getContext("2d");
      ctx.font = window.harness.cssFont(13, w, "italic");
      return ctx.font;
    })""", weights)
    for w, font in zip(weights, fonts):
        assert font.startswith("italic") and "13px" in font and "DejaVu Sans" in font, (w, font)
    # A weight that is not CSS ("semibold") would draw 10px sans-serif: refused instead.
    error = harness.page.evaluate("""() => {
      try { window.harness.cssFont(13, "semibold", "normal"); } catch (e) { return e.message; }
    }""")
    assert error and "rejects the font" in error
    # A text op with a numeric weight draws.
    show(harness, "weights", [["t", 20, 60, "Semibold", 20, "#000000ff", 0, 600, "normal", 90]])
    ink = harness.page.evaluate("""() => {
      const c = document.querySelector("#a .ahv-canvas"), d = devicePixelRatio;
      const px = c.getContext("2d").getImageData(20 * d, 44 * d, 90 * d, 20 * d).data;
      let dark = 0;
      for (let i = 0; i < px.length; i += 4) dark += px[i] < 128;
      return dark;
    }""")
    assert ink > 50
    harness.assert_clean()


def test_a_family_other_than_dejavu_sans_is_asked_for_first(harness):
    font = harness.page.evaluate("""() => {
      const ctx = document.createElement("canvas").getContext("2d");
      ctx.font = window.harness.cssFont(12, 400, "normal", "DejaVu Sans Mono");
      return ctx.font;
    }""")
    assert '"DejaVu Sans Mono", "DejaVu Sans"' in font and "12px" in font
    show(harness, "mono", [["t", 20, 60, "mono", 12, "#000000ff", 0, 400, "normal", 30, None,
                            "DejaVu Sans Mono"]])
    harness.assert_clean()


def test_a_refused_scene_says_why_and_shows_its_still(harness):
    # page.py's scene for a figure the page cannot replay: the reason and a PNG of the state.
    pixel = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
             "rkJggg==")
    scene = {"version": 1, "title": "refused", "width": W, "height": H, "controls": [],
             "frame": [], "slots": [], "states": [],
             "error": "refused: Rectangle in an Axes: hatching ('//') cannot be replayed",
             "png": pixel}
    page = harness.page
    page.evaluate("s => window.harness.model.set('scene', s)", encode(scene))
    for v in "ab":
        alert = page.locator(f"#{v} .ahv-error[role=alert]")
        alert.wait_for(timeout=15_000)
        assert "hatching" in alert.text_content()
        still = page.locator(f"#{v} img")
        assert still.get_attribute("alt") == "refused"
        assert still.get_attribute("src") == f"data:image/png;base64,{pixel}"
        assert page.locator(f"#{v} canvas").count() == 0
    # No recordings yet (a view never displayed nor finished in a kernel): said so, plainly.
    page.evaluate("() => window.harness.model.set('scene', '')")
    for v in "ab":
        page.wait_for_function("id => document.querySelector(`#${id} .ahv-error`)?.textContent"
                               ".includes('no recordings yet')", arg=v, timeout=15_000)


def test_the_canvas_is_named_by_its_titles_and_the_controls_values(harness):
    # An image to a screen reader, named by the titles drawn (suptitles first) and each
    # control's "label = value", renamed on every move; each control named by its label.
    page = harness.page

    def names():
        return [page.locator(f"#{v} canvas").get_attribute("aria-label") for v in "ab"]

    assert page.locator("#a canvas").get_attribute("role") == "img"
    assert names() == ["test_view; box 0, 0. step size = 0.5, mask = False, kernel = gaussian"] * 2
    for role, name in (("slider", "step size"), ("checkbox", "mask"), ("combobox", "kernel")):
        assert page.get_by_role(role, name=name, exact=True).count() == 2, (role, name)
    page.locator("#a [data-control=step]").focus()
    page.keyboard.press("ArrowRight")
    page.locator("#b [data-control=mask]").click()
    assert names() == ["test_view; box 1, 1. step size = 1.0, mask = True, kernel = gaussian"] * 2
    page.locator("#a [data-control=kernel]").select_option("boxcar")
    assert names()[0].endswith("kernel = boxcar")
    assert page.get_by_role("img", name="test_view; box 1, 1", exact=False).count() == 2
    harness.assert_clean()


def test_the_controls_take_the_pages_font_and_size(harness):
    # Labels, range, checkbox, select and value readouts: the page's font, not the browser's
    # control font (13.33 px system-ui) nor its default serif, whatever the page sets.
    page = harness.page
    for font in ("17px Verdana, sans-serif", "12px monospace"):
        page.evaluate("f => { document.body.style.font = f; }", font)
        fonts = page.evaluate("""() => {
          const f = (e) => { const s = getComputedStyle(e); return [s.fontFamily, s.fontSize]; };
          return { page: f(document.body), controls: [...document.querySelectorAll(
            "#a .ahv-controls :is(label, input, select, output)")].map((e) => [e.tagName, f(e)]) };
        }""")
        assert len(fonts["controls"]) == 9
        wrong = [c for c in fonts["controls"] if c[1] != fonts["page"]]
        assert not wrong, f"page font {fonts['page']}: {wrong}"
    harness.assert_clean()


def test_fit_scale_never_shrinks_the_smallest_text_below_9_px(harness):
    cases = harness.page.evaluate("""() => {
      const f = window.harness.fitScale;
      return [f(900, 1200, 12), f(900, 450, 18), f(900, 300, 12), f(900, 300, 6), f(900, 0, 12),
              f(900, 300, 0)];
    }""")
    assert cases == [1, 0.5, 0.75, 1, 1, 300 / 900]
    harness.assert_clean()


OVERFLOW = """id => {
  const root = document.querySelector(`#${id} .ahv-view`), box = root.querySelector(".ahv-figure");
  return { overflow: "overflow" in root.dataset, tabIndex: box.tabIndex,
           role: box.getAttribute("role"), name: box.getAttribute("aria-label"),
           cue: root.querySelector(".ahv-cue").offsetHeight > 0,
           scrolls: box.scrollWidth > box.clientWidth,
           width: Number(root.dataset.width), minWidth: Number(root.dataset.minWidth) };
}"""


def test_a_figure_wider_than_its_box_scrolls_in_a_focusable_named_region_with_a_cue(harness):
    # The scene's smallest text is 9 px: the figure cannot shrink (its least width, W, is
    # written on the view for a page to lay it out); in a 60 px box it scrolls sideways, and
    # the box takes focus, is a region named for the figure, and shows a cue under it.
    page = harness.page
    fits = {"overflow": False, "tabIndex": -1, "role": None, "name": None, "cue": False,
            "scrolls": False, "width": W, "minWidth": W}
    assert page.evaluate(OVERFLOW, "a") == fits
    page.evaluate("() => { document.getElementById('a').style.width = '60px'; }")
    page.wait_for_function("() => 'overflow' in document.querySelector('#a .ahv-view').dataset",
                           timeout=15_000)
    assert page.evaluate(OVERFLOW, "a") == {
        **fits, "overflow": True, "tabIndex": 0, "role": "region", "cue": True, "scrolls": True,
        "name": "test_view: wider than the page, scrolls sideways"}
    assert page.evaluate(OVERFLOW, "b") == fits  # the other view, in its wide box
    page.locator("#a .ahv-figure").focus()
    page.keyboard.press("ArrowRight")  # the focused box scrolls with the keyboard
    page.wait_for_function("() => document.querySelector('#a .ahv-figure').scrollLeft > 0",
                           timeout=15_000)
    page.evaluate("() => { document.getElementById('a').style.width = ''; }")
    page.wait_for_function("() => !('overflow' in document.querySelector('#a .ahv-view').dataset)",
                           timeout=15_000)
    assert page.evaluate(OVERFLOW, "a") == fits
    harness.assert_clean()


def test_controls_are_touch_targets_and_a_select_reads_in_a_dark_scheme(harness):
    # Sliders, selects and checkboxes at least 24 px tall (a checkbox 24 px wide too). A select
    # in a dark colour scheme on a page whose text is dark (the site's light figure card in dark
    # mode, or a page that sets only its text colour) takes the field colours together: its text
    # inherited alone was 2.77:1 on the browser's dark field.
    page = harness.page
    page.evaluate("""() => { document.documentElement.style.colorScheme = "dark";
                             document.body.style.color = "#222832"; }""")
    found = page.evaluate("""() => {
      const lum = (c) => { const [r, g, b] = c.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map((v) => {
        v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
      const sel = document.querySelector("#a select"), s = getComputedStyle(sel);
      const [x, y] = [lum(s.color), lum(s.backgroundColor)].sort((p, q) => q - p);
      return { contrast: (x + 0.05) / (y + 0.05),
               sizes: [...document.querySelectorAll("#a .ahv-controls :is(input, select)")]
                 .map((e) => [e.type, e.getBoundingClientRect().width,
                              e.getBoundingClientRect().height]) };
    }""")
    assert found["contrast"] >= 4.5, found
    assert {t for t, _, _ in found["sizes"]} == {"range", "checkbox", "select-one"}
    for kind, width, height in found["sizes"]:
        assert height >= 24 and (kind != "checkbox" or width >= 24), found["sizes"]
    harness.assert_clean()
