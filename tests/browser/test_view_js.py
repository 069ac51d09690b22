"""helpers/widgets/view.js in headless Chromium, without Jupyter: a harness page renders two views
of one fake model (get/set/on/off, and a save_changes that throws, as with no kernel) over a scene
built here, and the test reads the canvas pixels back.

The page is served from a temporary directory on 127.0.0.1; a request to any other host is
aborted and fails the test. Chromium missing: skipped, or failed with CI set (conftest.py).
"""

from __future__ import annotations

import base64
import json
import shutil
import zlib
from pathlib import Path

import pytest
from benchmarks.bench_pages import local_only, serve  # 127.0.0.1 only, a free port

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
    states += [[box(s, m), ["t", box_x(s), 75, f"s={s} m={m}", 10, "#000000ff", 0, "bold",
                            "normal", 40]] for s in range(n_steps) for m in range(2)]
    states += [[square(k)] for k in range(2)]
    frame = [
        ["p", f"M1 1L{W - 1} 1L{W - 1} {H - 1}L1 {H - 1}Z", None, "#000000ff", 1, None, None],
        {"slot": 0},
        ["t", 12, 110, "rotated", 9, "#333333ff", 90, "normal", "italic", 30],
        {"slot": 1},
        {"slot": 2},
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


HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>view.js</title></head>
<body style="font: 15px serif">
<div id="a"></div><div id="b"></div>
<script type="module">
import widget, { stateIndex } from "./view.js";

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

const model = new FakeModel({ scene: SCENE, index: [0, 0, 0] });
const cleanups = [];
for (const id of ["a", "b"]) {
  cleanups.push(await widget.render({ model, el: document.getElementById(id) }));
}
window.harness = { model, cleanups, stateIndex };
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
    """A temp dir with view.js and the harness page, served on 127.0.0.1: yields the base URL."""
    root = tmp_path_factory.mktemp("view_js")
    shutil.copy(VIEW_JS, root / "view.js")
    (root / "index.html").write_text(HARNESS.replace("SCENE", json.dumps(encode(make_scene()))))
    with serve(root) as url:
        yield url


class Harness:
    """The harness page, and what went wrong on it: page and console errors, foreign requests."""

    def __init__(self, browser, base: str):
        self.context = browser.new_context(device_scale_factor=DPR,
                                           viewport={"width": 800, "height": 600})
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
    assert page.evaluate("() => window.harness.model.listeners()") == 4  # 2 per view
    left = page.evaluate("""async () => {
      for (const f of window.harness.cleanups) await f();
      const { model } = window.harness;
      model.set("index", [2, 1, 1]);
      return model.listeners();
    }""")
    assert left == 0
    assert page.evaluate(REDRAWS_JS, "a") == 1, "a view redrew after its cleanup"
    harness.assert_clean()
