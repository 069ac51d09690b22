"""The live views on the course site (``make site``): the reader's input computed in the page,
with no kernel and no other host, on a desktop and on a 390 px phone.

For each notebook page that holds a live view (helpers/widgets/live): typing a new valid input
(drawn at random by the view's Python module) redraws the canvas and says what changed in the
live region; a bad input says why, marks the box invalid and leaves the canvas as it was; the
controls of the live view redraw it too; the input box, its help and its message are labelled
and inside the page's width on a phone. The same on the Chinese edition's pages, on a phone.
"""

from __future__ import annotations

import importlib

import pytest
from conftest import LAID_OUT  # tests/browser/

from benchmarks.bench_pages import local_only  # 127.0.0.1 only
from helpers.widgets.live import KINDS

pytestmark = pytest.mark.browser

PAGES = {"nw": "02_attention_pooling", "dates": "05_bahdanau_attention",
         "induction": "08_causal_attention_and_the_transformer_block",
         "sinks": "11_windows_sinks_and_latent_attention", "memory": "12_linear_attention"}
SIZES = {"desktop": {"viewport": {"width": 1440, "height": 900}},
         "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True,
                   "has_touch": True}}
TIMEOUT_MS = 30_000
STATE = """(root) => ({
  redraws: Number(root.dataset.redraws || 0),
  pixels: root.querySelector("canvas.ahv-canvas").toDataURL(),
  message: root.querySelector(".ahv-message").textContent,
  summary: root.querySelector(".ahv-summary").textContent,
  invalid: root.querySelector(".ahv-live :is(input, textarea)").getAttribute("aria-invalid"),
})"""


def _live_kinds() -> list:
    # The Chinese edition (site/zh/) on a phone: the same views inside translated prose.
    return [pytest.param(kind, size, "", id=f"{kind}-{size}") for kind in KINDS for size in SIZES] \
        + [pytest.param(kind, "phone", "zh/", id=f"{kind}-phone-zh") for kind in KINDS]


@pytest.mark.parametrize("kind, size, edition", _live_kinds())
def test_a_live_view_computes_the_readers_input_in_the_page(kind, size, edition, browser,
                                                            base_url):
    module = importlib.import_module(f"helpers.widgets.live.{kind}")
    context = browser.new_context(**SIZES[size])
    remote: list[str] = []
    problems: list[str] = []
    local_only(context, base_url, remote)
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    try:
        page.goto(f"{base_url}{edition}{PAGES[kind]}.html", wait_until="load")
        page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
        field = page.locator(f".ahv-live [data-live={kind}]")
        field.wait_for(timeout=TIMEOUT_MS)
        assert field.count() == 1, f"{kind}: {field.count()} live inputs on {PAGES[kind]}"
        root = field.locator("xpath=ancestor::div[contains(@class, 'ahv-view')]")
        field.scroll_into_view_if_needed()
        page.wait_for_function("r => Number(r.dataset.redraws) >= 1", arg=root.element_handle(),
                               timeout=TIMEOUT_MS)
        # Labelled, described by its help and its message, inside the page on a phone.
        label = page.evaluate("f => f.labels[0]?.textContent", field.element_handle())
        assert label, f"{kind}: the input has no label"
        described = field.get_attribute("aria-describedby").split()
        assert page.locator(f"#{described[0]}").text_content() == module.ACCEPTED
        width = page.evaluate("() => document.documentElement.clientWidth")
        box = field.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, f"{kind}: {box}, {width}"
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1

        before = root.evaluate(STATE)
        text = module.random_texts(1, seed=23)[0]
        field.fill(text)
        after = root.evaluate(STATE)
        assert after["redraws"] > before["redraws"] and after["message"] == "", (kind, after)
        assert after["pixels"] != before["pixels"], f"{kind}: typing {text!r} left the canvas"
        assert after["summary"] and after["invalid"] is None

        bad = next(iter(module.BAD_INPUTS))
        field.fill(bad)
        refused = root.evaluate(STATE)
        assert refused["message"] and refused["invalid"] == "true", (kind, bad, refused)
        assert refused["pixels"] == after["pixels"], f"{kind}: a bad input changed the canvas"

        for c in range(root.locator("[data-control]").count()):  # the live view's controls
            control = root.locator("[data-control]").nth(c)
            field.fill(text)
            was = root.evaluate(STATE)
            if control.evaluate("el => el.tagName") == "SELECT":
                n = control.locator("option").count()
                control.select_option(index=(control.evaluate("s => s.selectedIndex") + 1) % n)
            else:
                control.click()
            now = root.evaluate(STATE)
            assert now["redraws"] > was["redraws"], f"{kind}: control {c} did not redraw"
        assert not remote, f"{kind}: requests to other hosts: {remote}"
        assert not problems, problems
    finally:
        context.close()
