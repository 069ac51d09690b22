"""The site's figures in headless Chromium: they fit, they scroll where they must, they read in
dark mode, and their controls are legible and large enough to touch.

On the built site (site/, or ``ATTN_SITE_DIR``; skipped without it, failed in CI as
test_site.py does), served from 127.0.0.1 with other hosts blocked, at a desktop's 1440 x 900
and a phone's 390 x 844 (device pixel ratio 2, touch), in the theme's light and dark modes (the
browser's colour scheme, which the theme follows: ``html[data-theme]`` is checked):

* every page view is either wholly visible (its canvas inside its box, its box inside the page
  and clear of the table of contents) or scrolls sideways in its own box, which is then
  keyboard-focusable (tabindex 0), a named region, with a visible cue under it; on the desktop
  no view scrolls; the page itself never scrolls sideways;
* every static figure (``.cell_output img``) lies within its column;
* each control's text (labels, selects, value readouts) has a contrast of at least 4.5:1 with
  the ground under it, and sliders and checkboxes a 4.5:1 accent colour, from computed styles;
  sliders, selects and checkboxes are at least 24 px tall (a touch target);
* in dark mode every view and every static figure sits on a white card (the figures' own
  ground), unfiltered;
* the theme's "Back to top" button, when shown (a 1024 x 768 tablet: the theme hides it from
  1200 px, the site below 768 px), covers no text nor control.

Geometry and colours only; nothing is timed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from conftest import notebooks_dir  # tests/browser/

from benchmarks.bench_pages import local_only  # 127.0.0.1 only

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("ATTN_SITE_DIR") or ROOT / "site").resolve()
NOTEBOOKS = sorted(p.stem for p in notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
SCREENS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
TABLET = {"width": 1024, "height": 768}  # the back-to-top button's widths: 768 to 1199 px
MODES = ["light", "dark"]
TIMEOUT_MS = 30_000
MIN_CONTRAST = 4.5
MIN_TARGET_PX = 24
# Pages whose views hold every kind of control: 02 a select, 04 a checkbox, both sliders.
CONTROL_PAGES = [n for n in NOTEBOOKS if n[:2] in ("02", "04")]

# Every view drawn at its fitted scale.
DRAWN = """() => { const v = [...document.querySelectorAll(".ahv-view")];
  return v.length > 0 && v.every((e) => Number(e.dataset.scale) > 0 && e.dataset.minWidth); }"""

# Each view's geometry: its canvas and box, what of the canvas shows, the column, the page.
VIEWS = """() => [...document.querySelectorAll(".ahv-view")].map((v) => {
  const box = v.querySelector(".ahv-figure"), canvas = box.querySelector("canvas");
  const r = (e) => { const b = e.getBoundingClientRect();
                     return { left: b.left, right: b.right, top: b.top, bottom: b.bottom,
                              width: b.width, height: b.height }; };
  const cue = v.querySelector(".ahv-cue");
  return { view: v.dataset.view, canvas: r(canvas), box: r(box), column: r(v.closest("section")),
           scrollWidth: box.scrollWidth, clientWidth: box.clientWidth,
           tabIndex: box.tabIndex, role: box.getAttribute("role"),
           name: box.getAttribute("aria-label"),
           cue: cue && cue.offsetHeight > 0 ? cue.textContent : "",
           page: document.documentElement.clientWidth,
           scrollPage: document.documentElement.scrollWidth };
})"""

# Contrast (WCAG 2) of each control's text, or accent for sliders and checkboxes, with the
# ground under it (the first opaque background up its ancestors, translucent ones composited),
# and its size.
CONTROLS = """() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (t, b) => [0, 1, 2].map((i) => t[i] * t[3] + b[i] * (1 - t[3])).concat(1);
  const ground = (el) => { const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let out = [255, 255, 255, 1]; for (const l of layers.reverse()) out = over(l, out); return out; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92
                                                       : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
                            return (x + 0.05) / (y + 0.05); };
  return [...document.querySelectorAll(".ahv-controls :is(label, select, output, input)")]
    .filter((el) => el.tagName !== "OUTPUT" || el.textContent.trim())
    .map((el) => {
      const s = getComputedStyle(el), kind = el.tagName === "INPUT" ? el.type : el.tagName;
      // A slider's or checkbox's colour is its accent; "auto" is the browser's own.
      const ink = el.tagName === "INPUT" ? s.accentColor : s.color;
      // A select paints its own ground; the others show their ancestors'.
      const g = el.tagName === "SELECT" ? over(parse(s.backgroundColor), ground(el.parentElement))
                                        : ground(el.parentElement);
      const c = parse(ink);
      const b = el.getBoundingClientRect();
      return { kind, ink, ratio: c ? ratio(over(c, g), g) : 0,
               width: b.width, height: b.height };
    });
}"""

# Dark mode: the card under each view and each static figure.
CARDS = """() => [...document.querySelectorAll(
    ".bd-content div.cell_output .widget-subarea:has(.ahv-view), .bd-content div.cell_output img")]
  .map((e) => { const s = getComputedStyle(e);
                return { tag: e.tagName, background: s.backgroundColor, filter: s.filter }; })"""

# Static figures: within their column and the page.
IMAGES = """() => [...document.querySelectorAll(".cell_output img")].map((i) => {
  const b = i.getBoundingClientRect(), col = i.closest("section").getBoundingClientRect();
  return { src: i.src.slice(-40), left: b.left, right: b.right, width: b.width,
           colLeft: col.left, colRight: col.right, page: document.documentElement.clientWidth,
           natural: i.naturalWidth };
})"""

# What the back-to-top button overlaps: the text and controls a reader would see at its place
# without it (the topmost element at points across its box: what scrolls under the sticky
# header is hidden by the header, not by the button).
COVERED = """() => {
  const btn = document.getElementById("pst-back-to-top");
  if (!btn || getComputedStyle(btn).display === "none") return null;
  const b = btn.getBoundingClientRect();
  const covered = new Set();
  btn.style.visibility = "hidden";
  for (let i = 0; i <= 4; i++) for (let j = 0; j <= 2; j++) {
    const e = document.elementFromPoint(b.left + (b.width - 1) * i / 4, b.top + (b.height - 1) * j / 2);
    if (!e || btn.contains(e) || e.contains(btn)) continue;
    const control = e.closest("a, button, input, select, canvas, img, svg, label");
    const text = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (control || text) covered.add(
      `${e.tagName}.${String(e.className).slice(0, 40)} "${e.textContent.trim().slice(0, 30)}"`);
  }
  btn.style.visibility = "";
  return { rect: [b.left, b.top, b.width, b.height], covered: [...covered] };
}"""


@pytest.fixture
def open_page(browser, base_url):
    contexts = []

    def open_(name: str, screen: str, mode: str = "light"):
        phone = screen == "phone"
        context = browser.new_context(viewport={**SCREENS, "tablet": TABLET}[screen],
                                      color_scheme=mode,
                                      device_scale_factor=2 if phone else 1,
                                      is_mobile=phone, has_touch=phone)
        contexts.append(context)
        remote: list[str] = []
        local_only(context, base_url, remote)
        page = context.new_page()
        page.goto(f"{base_url}{name}.html", wait_until="load")
        assert page.evaluate("document.documentElement.dataset.theme") == mode
        if name != "index":
            page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
            # site.js widens on the next frame; views rescale on their box's next resize.
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => "
                          "requestAnimationFrame(r)))")
        assert not remote, remote
        return page

    yield open_
    for context in contexts:
        context.close()


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_view_is_wholly_visible_or_scrolls_in_a_focusable_box_with_a_cue(
        name, screen, open_page):
    page = open_page(name, screen)
    views = page.evaluate(VIEWS)
    toc = page.evaluate("""() => { const t = document.querySelector("div.bd-sidebar-secondary");
        if (!t || !t.offsetWidth) return null; const b = t.getBoundingClientRect();
        return { left: b.left, bottom: b.bottom }; }""")
    for k, v in enumerate(views):
        where = f"{name} {screen} {v['view']}"
        assert v["scrollPage"] <= v["page"], f"{where}: the page scrolls sideways"
        assert v["box"]["right"] <= v["page"] + 0.5, f"{where}: its box passes the page's edge"
        if v["scrollWidth"] > v["clientWidth"]:
            assert screen == "phone", f"{where}: {v['canvas']['width']:.0f} px in a " \
                                      f"{v['clientWidth']} px box on the desktop"
            assert v["tabIndex"] == 0 and v["role"] == "region" and v["name"], (
                f"{where}: a scroll box that is not a focusable named region: {v}")
            assert "scroll" in v["cue"], f"{where}: no visible cue that the figure scrolls"
        else:
            assert v["canvas"]["right"] <= v["box"]["right"] + 0.5, f"{where}: canvas clipped"
            assert v["tabIndex"] == -1 and not v["cue"], f"{where}: a scroll cue with no scroll"
            # Wider than the column only on a desktop, into the margin, clear of the contents
            # (folded to its title strip while the view is in sight).
            if v["box"]["right"] > v["column"]["right"] + 0.5:
                assert screen == "desktop", f"{where}: past its column on a phone"
                if toc and toc["left"] < v["box"]["right"]:
                    page.evaluate("""i => document.querySelectorAll(".ahv-view")[i]
                        .scrollIntoView({ block: "center" })""", k)
                    clear = """i => document.querySelector("div.bd-sidebar-secondary")
                        .getBoundingClientRect().bottom <= document.querySelectorAll(".ahv-view")[i]
                        .querySelector("canvas").getBoundingClientRect().top"""
                    try:  # the IntersectionObserver's callback, then the theme's fold
                        page.wait_for_function(clear, arg=k, timeout=5_000)
                    except PlaywrightTimeout:
                        pytest.fail(f"{where}: the table of contents covers the figure (5 s)")


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_static_figures_fit_their_column(name, screen, open_page):
    page = open_page(name, screen)
    images = page.evaluate(IMAGES)
    for i in images:
        assert i["right"] <= i["colRight"] + 0.5 and i["left"] >= i["colLeft"] - 0.5, (
            f"{name} {screen}: an image past its column: {i}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("name", CONTROL_PAGES)
def test_controls_are_legible_and_big_enough_to_touch(name, screen, mode, open_page):
    controls = open_page(name, screen, mode).evaluate(CONTROLS)
    kinds = {c["kind"] for c in controls}
    assert {"LABEL", "range"} <= kinds, kinds
    for c in controls:
        assert c["ratio"] >= MIN_CONTRAST, f"{name} {screen} {mode}: {c}"
        if c["kind"] in ("range", "SELECT", "checkbox"):
            assert c["height"] >= MIN_TARGET_PX - 0.01, f"{name} {screen} {mode}: {c}"
        if c["kind"] == "checkbox":
            assert c["width"] >= MIN_TARGET_PX - 0.01, f"{name} {screen} {mode}: {c}"


@pytest.mark.parametrize("name", [n for n in NOTEBOOKS if n[:2] in ("02", "08")])
def test_dark_mode_figures_sit_on_a_white_card(name, open_page):
    cards = open_page(name, "desktop", "dark").evaluate(CARDS)
    assert {c["tag"] for c in cards} == {"DIV", "IMG"}, cards
    for c in cards:
        assert c["background"] == "rgb(255, 255, 255)" and c["filter"] == "none", c


@pytest.mark.parametrize("screen", [*SCREENS, "tablet"])
def test_back_to_top_covers_nothing(screen, open_page):
    page = open_page(NOTEBOOKS[7], screen)  # a long page
    # The theme shows it (style.display = "block") while the reader scrolls up below the page's
    # header; shown so here, halfway down the page, where it would be.
    page.evaluate("() => scrollTo(0, document.documentElement.scrollHeight / 2)")
    page.wait_for_timeout(500)  # the theme's scroll listener (which hides it: not scrolling up)
    page.evaluate("""() => { document.getElementById("pst-back-to-top").style.display = "block"; }""")
    found = page.evaluate(COVERED)
    if screen == "tablet":
        assert found is not None, "the back-to-top button is not shown"
    if found is None:
        return  # not shown (the theme hides it from 1200 px, the site below 768 px)
    assert not found["covered"], f"{screen}: the back-to-top button {found['rect']} covers " \
                                 f"{found['covered']}"
