"""What the live views' browser tests share (helpers/widgets/live/CONTRACT.md).

``LiveHarness(browser, module)`` opens, on 127.0.0.1 with other hosts blocked, a page holding the
view's real ES module (``module_source(module.JS)``: view.js, runtime.js and the engine) and:

* ``forward(model_json, cases)``: the engine's parse + forward for each (text, controls) in
  Chromium (JSON results; ``{"error": message}`` for an input the parse refuses);
* ``show(view)``: the LiveView drawn on a fake model (no kernel), as a page shows it;
  ``type(text)``: the reader types (the input's value set, an input event);
  ``pixels()``, ``message()``, ``summary()``, ``redraws()``, ``last_ms()``.

``assert_close(name, page, python)``: every number of a result, nested lists included,
within ``RTOL``/``ATOL`` (the page computes in float64 from the float32 weights, PyTorch in
float32). ``pixel_verdict(view, text, page_rgba)``: the canvas against matplotlib's PNG of
``draw`` for that input (test_view_pixels.py's comparison and tolerances).
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np

from benchmarks.bench_pages import serve
from helpers.widgets._common import figure_png
from helpers.widgets.live import module_source
from tests.browser import test_view_js as view_js
from tests.browser import test_view_pixels as pixels_test

RTOL = 1e-5
ATOL = 1e-6
EXPOSE = ("\nglobalThis.__live = { engine: LIVE_ENGINE, tensors: liveTensors, "
           "colourIndex: liveColourIndex, LivePicture };\n")

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>live</title></head>
<body style="margin: 0; font: 15px serif">
<div id="v" style="width: 1200px"></div>
<script type="module">
import widget from "./live.js";
""" + view_js.FAKE_MODEL + """
const el = document.getElementById("v");
let model = null, cleanup = null;
const root = () => el.querySelector(".ahv-view");
function forward(modelJson, cases) {
  const { engine, tensors } = globalThis.__live;
  const weights = tensors(modelJson);
  return cases.map(([text, controls]) => {
    const parsed = engine.parse(text, weights, controls);
    if (!parsed.ok) return { error: parsed.message };
    return engine.forward(weights, parsed.input, controls);
  });
}
async function show(scene, text, index) {
  if (cleanup) await cleanup();
  model = new FakeModel({ scene, text, index });
  cleanup = await widget.render({ model, el });
  return state();
}
function state() {
  const c = el.querySelector(".ahv-canvas");
  return { error: el.querySelector(".ahv-error")?.textContent ?? null,
           message: el.querySelector(".ahv-message")?.textContent ?? null,
           summary: el.querySelector(".ahv-summary")?.textContent ?? null,
           invalid: el.querySelector(".ahv-live [aria-invalid]")?.getAttribute("aria-invalid") ?? null,
           redraws: Number(root()?.dataset.redraws ?? 0),
           lastMs: Number(root()?.dataset.lastRedrawMs ?? NaN),
           text: model?.get("text"), label: c?.getAttribute("aria-label") ?? null,
           size: c ? [c.width, c.height] : null };
}
function type(text) {
  const input = el.querySelector(".ahv-live :is(input, textarea)");
  input.value = text;
  input.dispatchEvent(new Event("input", { bubbles: true }));
  return state();
}
function move(index) { model.set("index", index); return state(); }
function pixels() {
  const c = el.querySelector(".ahv-canvas");
  const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let s = "";
  for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode.apply(null, data.subarray(i, i + 0x8000));
  return btoa(s);
}
window.harness = { forward, show, type, move, pixels, state };
</script>
</body></html>
"""


class LiveHarness(view_js.Harness):
    """The page of one live module at device pixel ratio 1."""

    def __init__(self, browser, base: str):
        super().__init__(browser, base, dpr=1, size=(1280, 1000))

    def forward(self, model_json: dict, cases: list[tuple[str, dict]]) -> list[dict]:
        return self.page.evaluate("([m, c]) => window.harness.forward(m, c)", [model_json, cases])

    def show(self, view) -> dict:
        return self.page.evaluate("([s, t, i]) => window.harness.show(s, t, i)",
                                  [view.scene, view.text, list(view.index)])

    def type(self, text: str) -> dict:
        return self.page.evaluate("t => window.harness.type(t)", text)

    def move(self, index: list[int]) -> dict:
        return self.page.evaluate("i => window.harness.move(i)", index)

    def state(self) -> dict:
        return self.page.evaluate("() => window.harness.state()")

    def pixels(self, size: list[int]) -> np.ndarray:
        w, h = size
        raw = base64.b64decode(self.page.evaluate("() => window.harness.pixels()"))
        return np.frombuffer(raw, np.uint8).reshape(h, w, 4)


def serve_live(root: Path, files: list[str]):
    """The module of ``files`` (plus a line exposing the engine to the harness) and the page,
    served on 127.0.0.1: yields the base URL."""
    (root / "live.js").write_text(module_source(files) + EXPOSE, encoding="utf-8")
    (root / "index.html").write_text(PAGE, encoding="utf-8")
    with serve(root) as url:
        yield url


def live_page(browser, tmp_path_factory, files: list[str]):
    """A module-scoped fixture's body: the harness page of ``files`` (a view's JS), closed
    after the module's tests."""
    for base in serve_live(tmp_path_factory.mktemp("live"), files):
        page = LiveHarness(browser, base)
        try:
            yield page
        finally:
            page.context.close()


def flat(value) -> list[float]:
    """Every number of a (nested) result, in order."""
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in flat(value[k])]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    if isinstance(value, np.ndarray):
        return [float(x) for x in value.reshape(-1)]
    if isinstance(value, (bool, str)) or value is None:
        return []
    return [float(value)]


def assert_close(name: str, page: object, python: object) -> float:
    """Every number of ``page`` (JSON from the engine) equals ``python``'s within RTOL/ATOL;
    the same keys, shapes and non-numbers (tokens, strings) too. Returns the largest
    |page - python| / (ATOL + RTOL |python|) seen (<= 1 passes)."""
    if isinstance(python, dict):
        assert isinstance(page, dict) and sorted(page) == sorted(python), (
            f"{name}: keys {sorted(page) if isinstance(page, dict) else page!r} != {sorted(python)}")
        return max([assert_close(f"{name}.{k}", page[k], python[k]) for k in python] or [0.0])
    if isinstance(python, np.ndarray):
        python = python.tolist()
    if isinstance(python, (list, tuple)):
        assert isinstance(page, list) and len(page) == len(python), (
            f"{name}: length {len(page) if isinstance(page, list) else page!r} != {len(python)}")
        return max([assert_close(f"{name}[{i}]", p, q) for i, (p, q) in
                    enumerate(zip(page, python))] or [0.0])
    if isinstance(python, (str, bool)) or python is None:
        assert page == python, f"{name}: page {page!r}, python {python!r}"
        return 0.0
    q = float(python)
    assert isinstance(page, (int, float)) and not isinstance(page, bool), f"{name}: {page!r}"
    if math.isnan(q) or math.isinf(q):
        assert page == q or (math.isnan(q) and page is None), f"{name}: page {page}, python {q}"
        return 0.0
    ratio = abs(page - q) / (ATOL + RTOL * abs(q))
    assert ratio <= 1, f"{name}: page {page!r}, python {q!r} (|Δ| {abs(page - q):.3g})"
    return ratio


def pixel_verdict(view, page_rgba: np.ndarray):
    """The canvas (RGBA) against matplotlib's drawing of the view's current input."""
    fig = view.result
    mpl = pixels_test.decode_png(figure_png(fig))
    page = page_rgba[..., :3]
    assert mpl.shape == page.shape, f"matplotlib {mpl.shape}, page {page.shape}"
    texts = pixels_test.text_boxes(fig, *mpl.shape[:2])
    return pixels_test.compare(page, mpl, texts, pixels_test.cell_points(fig, mpl, texts)), mpl


def save_failure(stem: str, page: np.ndarray, mpl: np.ndarray, verdict) -> list[Path]:
    pixels_test.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return pixels_test.save_images(pixels_test.ARTIFACTS, f"live-{stem}", page[..., :3], mpl,
                                   verdict.places())


def to_json(value):
    """A Python oracle's result as JSON-able lists (NumPy arrays and scalars)."""
    return json.loads(json.dumps(value, default=lambda a: np.asarray(a).tolist()))
