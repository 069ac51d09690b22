"""Every page view of the series in Chromium as a reader meets it: on a phone, through a screen
reader, and its colour bars at every device pixel ratio.

Each view of ``VIEWS`` (tests/test_page_scenes.py) is drawn by ``helpers/widgets/view.js`` from
its real scene on a harness page (a fake model, no Jupyter; test_view_js.py's), set to a state
through the model's ``index``:

* **Phone**: a 390 × 844 px mobile viewport (device pixel ratio 3) and a page of 16 px sans-serif
  text with 16 px margins. The figure shrinks to fit the page, but its smallest text (the
  smallest font size of the scene's text ops, in any state) never below 9 CSS px; a figure left
  wider than the page scrolls sideways in its own box (then focusable, a named region, with a
  cue under it), never the page
  (``document.documentElement.scrollWidth`` <= 390); the controls wrap inside the page.
* **Screen reader**: the canvas is an image named by the figure's titles as matplotlib draws
  them in that state (suptitles, Axes' titles) and every control's "label = value"; moved, the
  name follows.
* **Colour bars**: at device pixel ratios 1, 2 and 3, a column of device pixels down each colour
  bar (its outline left out) has no light stripe: no pixel lighter than both its neighbours by
  more than ``STRIPE_TOL`` levels of luminance. Measured: none at all (the bar is one image);
  its 256 cells drawn as paths, one by one, left seams up to 16 levels lighter at ratio 1 and
  4 at ratio 2, hundreds of them in pooling.nw, transformer.explorer and rotary.shift.

Each view's scale and smallest text on the phone go to the summary. Chromium missing: skipped,
or failed with CI set (conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from helpers.widgets._common import figure_png
from tests.browser import test_view_js as view_js
from tests.browser.test_view_pixels import series_view
from tests.test_page_scenes import VIEWS

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
MIN_TEXT_PX = 9.0  # CSS px: view.js's floor for the smallest text of a shrunk figure
STRIPE_TOL = 1.5  # levels of luminance (0-255) a pixel may rise above both its neighbours
BAR_INSET = 3  # figure px left out at each end of a colour bar (its outline)
NAMED = {"pooling.nw", "transformer.explorer", "rotary.shift"}  # seen striped at ratio 1

HARNESS = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>series</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
</head>
<body style="margin: 0; font: 16px/1.5 system-ui, sans-serif">
<main id="page" style="padding: 0 16px">
<p>A page of text as wide as the screen, with a view in it.</p>
<div id="v"></div>
<p>Text after the view.</p>
</main>
<script type="module">
import widget, * as view from "./view.js";

""" + view_js.FAKE_MODEL + """
const el = document.getElementById("v");
let model = null, cleanup = null;
async function show(scene, index) {
  if (cleanup) await cleanup();
  model = new FakeModel({ scene, index });
  cleanup = await widget.render({ model, el });
  return measure();
}
function move(index) { model.set("index", index); return measure(); }
// What a reader gets: sizes in CSS px, the canvas's name, how wide the page is.
function measure() {
  const c = el.querySelector("canvas"), box = el.querySelector(".ahv-figure");
  const main = document.getElementById("page").getBoundingClientRect();
  const controls = [...el.querySelectorAll(".ahv-controls :is(label, input, select, output)")];
  return {
    error: el.querySelector(".ahv-error")?.textContent ?? null,
    cssWidth: c.getBoundingClientRect().width, backing: [c.width, c.height],
    scale: Number(el.querySelector(".ahv-view").dataset.scale),
    boxWidth: box.clientWidth, boxScroll: box.scrollWidth,
    boxOverflow: getComputedStyle(box).overflowX,
    boxTab: box.tabIndex, boxRole: box.getAttribute("role"), boxName: box.getAttribute("aria-label"),
    cue: el.querySelector(".ahv-cue").offsetHeight > 0,
    role: c.getAttribute("role"), name: c.getAttribute("aria-label"),
    pageRight: main.right - 16, pageWidth: document.documentElement.scrollWidth,
    controlsRight: Math.max(...controls.map((e) => e.getBoundingClientRect().right)),
    dpr: devicePixelRatio,
  };
}
// Luminance (0-255) of the device pixels of a column x from y0 to y1 (device px), or of a
// row y from x0 to x1 when `across`.
function line(x, y0, y1, across) {
  const c = el.querySelector("canvas"), ctx = c.getContext("2d");
  const n = y1 - y0;
  const d = (across ? ctx.getImageData(y0, x, n, 1) : ctx.getImageData(x, y0, 1, n)).data;
  const out = [];
  for (let i = 0; i < d.length; i += 4) {
    out.push(0.2126 * d[i] + 0.7152 * d[i + 1] + 0.0722 * d[i + 2]);
  }
  return out;
}
window.harness = { show, move, line, smallestText: view.smallestText };
</script>
</body></html>
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from view_js.serve_harness(tmp_path_factory.mktemp("view_series"), HARNESS)


class Page(view_js.Harness):
    """The harness page in a context of its own (a phone, or a desktop at some ratio)."""

    def __init__(self, browser, base: str, dpr: float, size: dict, mobile: bool = False):
        super().__init__(browser, base, dpr, (size["width"], size["height"]), mobile)

    def show(self, view, index: list[int]) -> dict:
        got = self.page.evaluate("([s, i]) => window.harness.show(s, i)", [view.scene, index])
        assert got["error"] is None, got["error"]
        return got


def _views():
    return [pytest.param(m, k, id=f"{m}.{k}") for m, keys in VIEWS.items() for k in keys]


def titles(fig: Figure) -> list[str]:
    """The titles matplotlib draws, as one line each (the page's description has them so)."""
    texts = [fig._suptitle] if fig._suptitle is not None else []
    texts += [t for ax in fig.axes if ax.get_visible()
              for t in (ax.title, ax._left_title, ax._right_title)]
    return [" ".join(t.get_text().split()) for t in texts
            if t.get_visible() and t.get_text().strip() and "$" not in t.get_text()]


def far_state(view) -> list[int]:
    """Every control at its last value, or its first when the default is the last."""
    return [len(c.values) - 1 if i != len(c.values) - 1 else 0
            for c, i in zip(view._controls, view.index)]


# ------------------------------------------------------------------------------ the phone

@pytest.fixture(scope="module")
def phone(browser, site):
    p = Page(browser, site, dpr=3, size=PHONE, mobile=True)
    try:
        yield p
    finally:
        p.context.close()


@pytest.mark.parametrize("module, key", _views())
def test_on_a_phone_text_stays_readable_and_the_page_does_not_scroll_sideways(
        module, key, phone, report):
    view = series_view(module, key)
    scene = view.scene_data()
    name = scene["title"]
    smallest = phone.page.evaluate("s => window.harness.smallestText(s)", scene)
    texts = [op[4] for ops in [scene["frame"], *scene["states"]] for op in ops
             if isinstance(op, list) and op[0] == "t"]
    assert smallest == min(texts)
    try:
        for n, index in enumerate([list(view.index), far_state(view)]):
            got = phone.page.evaluate("([s, i]) => window.harness.show(s, i)",
                                      [view.scene, index]) if n == 0 else \
                phone.page.evaluate("i => window.harness.move(i)", index)
            assert got["error"] is None, f"{name}: {got['error']}"
            scale, fit = got["scale"], got["boxWidth"] / scene["width"]
            assert abs(got["cssWidth"] - scene["width"] * scale) <= 0.5, (got, scale)
            if n == 0:
                report(f"phone {name}: scale {scale:.3f} (fitting the page: {fit:.3f}), smallest "
                       f"text {smallest * scale:.1f} CSS px (drawn at {smallest} px)")
            assert smallest * scale >= MIN_TEXT_PX - 0.01, f"{name}: text of {smallest * scale} px"
            assert scale <= 1 and scale >= min(1.0, fit) - 1e-6, f"{name}: scale {scale}"
            # Drawn at the device's resolution for its size (crisp, not a scaled-down bitmap).
            want = (scene["width"] * scale * 3, scene["height"] * scale * 3)
            assert all(abs(b - w) <= 0.5 + 1e-6 for b, w in zip(got["backing"], want)), (
                got["backing"], want)
            assert got["pageWidth"] <= PHONE["width"], f"{name}: the page scrolls sideways"
            assert got["controlsRight"] <= got["pageRight"] + 0.5, f"{name}: controls overflow"
            if got["boxScroll"] > got["boxWidth"]:  # wider than the page: its box scrolls,
                # takes keyboard focus as a named region, and says so under the figure
                assert got["boxOverflow"] == "auto"
                assert got["boxTab"] == 0 and got["boxRole"] == "region", got
                assert got["boxName"].startswith(name) and got["cue"], got
            else:
                assert got["boxTab"] == -1 and not got["cue"], got
            # The canvas is an image named by the state's titles and the controls' values.
            fig = view._draw(**{c.name: c.values[i] for c, i in zip(view._controls, index)})
            assert got["role"] == "img"
            missing = [t for t in titles(fig) if t not in got["name"]]
            assert not missing, f"{name} {index}: {missing} not in {got['name']!r}"
            values = ", ".join(f"{c.label} = {c.labels[i]}" for c, i in zip(view._controls, index))
            assert got["name"].endswith(values), (got["name"], values)
    finally:
        view.update()  # the figure back in the controls' state
    assert not phone.problems()


# ------------------------------------------------------------------------------ colour bars

def colour_bars(fig: Figure, height: int) -> list[tuple[float, float, float, float, bool]]:
    """(x0, y0, x1, y1, vertical) of each colour bar's Axes, figure px from the top left."""
    figure_png(fig)  # laid out as the PNG (and the scene) draws it
    out = []
    for ax in fig.axes:
        bar = getattr(ax, "_colorbar", None)
        if bar is None or not ax.get_visible():
            continue
        b = ax.get_window_extent()
        out.append((b.x0, height - b.y1, b.x1, height - b.y0, bar.orientation == "vertical"))
    return out


def stripes(lum: list[float]) -> list[tuple[int, float]]:
    """(where, by how much) each pixel is lighter than both neighbours by over STRIPE_TOL."""
    a = np.asarray(lum)
    rise = a[1:-1] - np.maximum(a[:-2], a[2:])
    return [(int(i) + 1, float(rise[i])) for i in np.nonzero(rise > STRIPE_TOL)[0]]


@pytest.mark.parametrize("dpr", [1, 2, 3])
def test_colour_bars_have_no_light_stripes(dpr, browser, site, report):
    desk = Page(browser, site, dpr=dpr, size={"width": 1280, "height": 900})
    checked, found = set(), []
    try:
        for module, keys in VIEWS.items():
            for key in keys:
                view = series_view(module, key)
                scene = view.scene_data()
                bars = colour_bars(view.update(), scene["height"])
                if not bars:
                    continue
                got = desk.show(view, list(view.index))
                assert got["cssWidth"] == scene["width"]  # a desktop page: the figure's size
                for x0, y0, x1, y1, vertical in bars:
                    if not vertical:
                        x0, y0, x1, y1 = y0, x0, y1, x1
                    for f in (0.3, 0.5, 0.7):  # columns (rows) across the bar
                        at = int((x0 + f * (x1 - x0)) * dpr)
                        lum = desk.page.evaluate("a => window.harness.line(...a)", [
                            at, int(np.ceil((y0 + BAR_INSET) * dpr)),
                            int((y1 - BAR_INSET) * dpr), not vertical])
                        assert len(lum) > 50
                        found += [f"{scene['title']} x {at} px: {s}" for s in stripes(lum)[:3]]
                checked.add(scene["title"])
    finally:
        desk.context.close()
    report(f"colour bars at device pixel ratio {dpr}: {len(checked)} views, "
           f"{len(found)} stripes")
    assert NAMED <= checked, f"colour bars not found in {NAMED - checked}"
    assert not found, f"light stripes at device pixel ratio {dpr}: {found[:10]}"
    assert not desk.problems()
