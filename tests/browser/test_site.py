"""The static edition, site/ (`make site`), in headless Chromium, served from 127.0.0.1.

Builds nothing: with no site/index.html every test here is skipped on a learner's machine and
FAILS in CI ("run make site"), as conftest.py treats a missing Chromium. A request to any other
host is aborted and fails the test. The index and every notebook's page open with no page error,
no console error and no failed request; every widget renders; where the notebook has $ maths,
every piece is typeset (by KaTeX, at build time), with its MathML and in KaTeX's fonts. Each notebook page has at least one page view (``.ahv-view``), and
every control of every view, moved, changes its canvas and redraws it. Each move is timed in
the page (set the value and dispatch the event: view.js redraws inside the handler); median,
p90 and max per page and overall go to the summary and artifacts/browser/site_redraw.json,
with no assertion on them. The pages expected are those of notebooks/ (conftest.py's
``ATTN_NOTEBOOKS_DIR`` too); ``ATTN_SITE_DIR=/some/dir`` (developers) serves another build.

What a reader pays for, as sizes and geometry (never timings): no script blocks rendering in any
page's <head>, no page loads the Jupyter widget renderer, require.js or the theme's icon script
(the views are drawn by _static/pageviews.js, only where there are views), each notebook page
weighs at most PAGE_BUDGET compressed when opened cold; display equations are centred in their
column; one viewport <meta>, a description, a favicon; a copy button per code cell that copies the
code only; printing opens the solutions; "sink" finds notebook 11 first, with clean snippets.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
import statistics
import subprocess
from pathlib import Path

import pytest
from conftest import ARTIFACTS, LAID_OUT, SUMMARIES, _cannot_run, notebooks_dir  # tests/browser/

from benchmarks.bench_pages import local_only, serve  # 127.0.0.1 only, a free port

from tests.test_notebooks_meta import widget_state  # tools/widget_state.py

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("ATTN_SITE_DIR") or ROOT / "site").resolve()
NOTEBOOKS = sorted(p.stem for p in notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
VIEWPORT = {"width": 1280, "height": 900}
RENDER_TIMEOUT_MS = 30_000
TIMED_MOVES = 10  # per range control; a select visits every option, a checkbox toggles 4 times
TIMES: dict[str, list[float]] = {}  # page → ms per move, written out after the last page

PAGE_BUDGET = 1_500_000  # bytes, gzip-compressed, of everything a notebook page loads cold
PLACEHOLDERS = 'script[type="application/vnd.jupyter.widget-view+json"]'
# Every widget placeholder replaced by a rendered widget, every page view drawn once.
RENDERED = f"""() => [...document.querySelectorAll('{PLACEHOLDERS}')].every(
    (s) => s.previousElementSibling?.matches(".widget-subarea:not(:empty)"))
  && [...document.querySelectorAll(".ahv-view")].every(
    (v) => v.querySelector("canvas") && Number(v.dataset.redraws) >= 1)"""
# The state of the widgets, for a failure message.
WIDGETS = f"""() => ({{
  placeholders: document.querySelectorAll('{PLACEHOLDERS}').length,
  rendered: document.querySelectorAll(".widget-subarea").length,
  views: [...document.querySelectorAll(".ahv-view")].map((v) => v.dataset.redraws),
  errors: [...document.querySelectorAll(".ahv-error")].map((e) => e.textContent),
}})"""
# The page's maths (typeset by KaTeX at build time): its pieces, those typeset (KaTeX's HTML with
# the MathML a screen reader reads, which keeps the TeX), KaTeX's error boxes, TeX delimiters
# left as text outside code, and whether KaTeX's main font is the one drawing them.
MATHS = r"""async () => {
  await document.fonts.ready;
  const pieces = [...document.querySelectorAll("article span.math, article div.math")];
  const prose = [...document.querySelectorAll("article p, article li, article td")]
    .filter((e) => !e.closest("pre, code, .cell_output, .output, .math"));
  return { pieces: pieces.length,
           typeset: pieces.filter((m) => m.querySelector(".katex .katex-html")
             && m.querySelector('.katex-mathml math annotation[encoding="application/x-tex"]')).length,
           errors: [...document.querySelectorAll(".katex-error")].map((e) => e.title || e.textContent),
           raw: prose.map((e) => e.textContent).filter((t) => /\\[(\[]|\$\\[A-Za-z]/.test(t)),
           font: document.fonts.check("16px KaTeX_Main") && [...document.fonts].some(
             (f) => f.family === "KaTeX_Main" && f.status === "loaded") };
}"""
# A control's kind ("range", "select", "checkbox"), its number of values and current index.
CONTROL = """(el) => el.tagName === "SELECT"
  ? { kind: "select", n: el.options.length, index: el.selectedIndex }
  : el.type === "range" ? { kind: "range", n: Number(el.max) + 1, index: Number(el.value) }
  : { kind: el.type, n: 2, index: Number(el.checked) }"""
# Time `moves` moves of one control in the page; which ones did not redraw.
TIMED = """(el, moves) => {
  const root = el.closest(".ahv-view"), kind = el.tagName === "SELECT" ? "select" : el.type;
  const ms = [], stale = [];
  for (const k of moves) {
    const before = Number(root.dataset.redraws);
    const t0 = performance.now();
    if (kind === "checkbox") el.checked = !el.checked;
    else el.value = kind === "select" ? el.options[k].value : String(k);
    el.dispatchEvent(new Event(kind === "range" ? "input" : "change", { bubbles: true }));
    const t1 = performance.now();
    ms.push(t1 - t0);
    if (!(Number(root.dataset.redraws) > before)) stale.push(k);
  }
  return { ms, stale };
}"""


@pytest.fixture(scope="module")
def site(chromium_path) -> Path:
    if not (SITE / "index.html").is_file():
        _cannot_run(f"no {SITE / 'index.html'}: run make site")
    return SITE


@pytest.fixture(scope="module")
def base_url(site):
    """site/ on 127.0.0.1, a free port, in a thread of this process."""
    with serve(site) as url:
        yield url
    write_times()


class Page:
    """A fresh browser context on one page, with what went wrong while it was open."""

    def __init__(self, browser, base_url: str):
        self.context = browser.new_context(viewport=VIEWPORT)
        self.remote: list[str] = []
        self.problems: list[str] = []
        local_only(self.context, base_url, self.remote)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(
            f"console error: {m.text}"))
        self.page.on("requestfailed", lambda r: r.url.startswith(base_url) and self.problems.append(
            f"request failed: {r.url} {r.failure}"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))
        self.loaded: list[str] = []  # every URL of the site the page fetched
        self.page.on("requestfinished", lambda r: r.url.startswith(base_url) and self.loaded.append(
            r.url[len(base_url):]))

    def check(self, when: str) -> None:
        assert not self.remote, f"{when}: requests to other hosts (aborted): {self.remote}"
        assert not self.problems, f"{when}:\n" + "\n".join(self.problems)


@pytest.fixture
def open_page(browser, base_url):
    pages = []

    def open_(name: str) -> Page:
        page = Page(browser, base_url)
        pages.append(page)
        page.page.goto(base_url + name, wait_until="load")
        return page

    yield open_
    for page in pages:
        page.context.close()


def test_landing_page_shows_and_links_every_notebook_in_order(open_page):
    p = open_page("index.html")
    page = p.page
    cards = page.eval_on_selector_all(
        "article h2 a.reference", "as => as.map((a) => a.getAttribute('href'))")
    assert cards == [f"{name}.html" for name in NOTEBOOKS], "one card per notebook, in order"
    pictures = page.locator("img.series-card")
    assert pictures.count() == len(NOTEBOOKS)
    for k in range(pictures.count()):
        pictures.nth(k).scroll_into_view_if_needed()
        pictures.nth(k).evaluate("(img) => img.decode()")
        assert pictures.nth(k).evaluate("(img) => img.naturalWidth") > 100
    sidebar = page.eval_on_selector_all(
        "nav.bd-docs-nav a.reference", "as => as.map((a) => a.getAttribute('href'))")
    assert [h for h in sidebar if h.endswith(".html") and h[:2].isdigit()] == cards
    p.check("index.html")


@pytest.mark.parametrize("k", range(len(NOTEBOOKS)), ids=NOTEBOOKS)
def test_every_page_links_the_index_its_neighbours_and_the_notebooks_it_names(k, open_page):
    name = NOTEBOOKS[k]
    page = open_page(f"{name}.html").page
    sidebar = page.eval_on_selector_all(
        "nav.bd-docs-nav a", "as => as.map((a) => a.getAttribute('href'))")
    assert "index.html" in sidebar, f"{name}: no link to the index in the sidebar"
    assert all(f"{n}.html" in sidebar for n in NOTEBOOKS if n != name), f"{name}: sidebar {sidebar}"
    prev = page.locator(".prev-next-area a.left-prev").get_attribute("href")
    assert prev == ("index.html" if k == 0 else f"{NOTEBOOKS[k - 1]}.html"), f"{name}: prev {prev}"
    following = page.locator(".prev-next-area a.right-next")
    if k + 1 < len(NOTEBOOKS):
        assert following.get_attribute("href") == f"{NOTEBOOKS[k + 1]}.html"
    else:  # after the last notebook: the sidebar's Reference and Documentation pages, no notebook
        assert following.count() == 0 or not following.get_attribute("href")[:2].isdigit()
    # Every "notebook NN" of the prose is a link to that notebook's page.
    bare = page.evaluate(r"""() => {
      const found = [], walker = document.createTreeWalker(
        document.querySelector("article"), NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (n.parentElement.closest("a, pre, code, .cell_output")) continue;
        for (const m of n.textContent.matchAll(/[Nn]otebooks? (\d\d)/g)) found.push(m[0]);
      }
      return found;
    }""")
    assert not bare, f"{name}: mentions that are not links: {bare}"
    for link in page.eval_on_selector_all(
            "article a", r"as => as.filter((a) => /^[Nn]otebook \d\d$|^\d\d$/.test(a.textContent))"
            ".map((a) => [a.textContent, a.getAttribute('href')])"):
        number = link[0][-2:]
        assert link[1].startswith(next(n for n in NOTEBOOKS if n.startswith(number))), link


def test_search_for_sink_lands_on_notebook_11_with_clean_snippets(open_page):
    # The landing page repeats every notebook's title and opening: it must not outrank the
    # notebook (search-scorer.js); snippets are the article's text, not the theme's buttons
    # ("Light Dark …") or TeX source.
    p = open_page("search.html?q=sink")
    page = p.page
    page.wait_for_selector("#search-results ul.search li p.context", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_function("""() => [...document.querySelectorAll("#search-results li")]
        .every((li) => li.querySelector("p.context"))""", timeout=RENDER_TIMEOUT_MS)
    hits = page.eval_on_selector_all("#search-results ul.search li", """lis => lis.map((li) =>
        [li.querySelector("a").getAttribute("href"), li.querySelector("p.context").textContent])""")
    pages = [h[0].split("#")[0].split("?")[0] for h in hits]
    assert pages[0] == "11_windows_sinks_and_latent_attention.html", pages
    # The landing page after every notebook that matches (it only repeats them).
    assert "index.html" not in pages or all(p == "index.html" for p in pages[pages.index("index.html"):]), pages
    for href, snippet in hits:
        # Theme text (the colour-mode menu, the contents' heading, the download buttons) or TeX.
        assert not re.search(r"\bDark\b|\bContents\b|\.ipynb|\.pdf|\\\(|\\\[|\\mathbf|Toggle",
                             snippet), (href, snippet)
    p.check("search sink")


def test_search_for_online_softmax_lands_on_notebook_09(open_page):
    p = open_page("search.html?q=online+softmax")
    page = p.page
    page.wait_for_selector("#search-results ul.search li a", timeout=RENDER_TIMEOUT_MS)
    first = page.locator("#search-results ul.search li a").first.get_attribute("href")
    assert first.startswith("09_attention_at_scale.html"), f"first result: {first}"
    p.check("search")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_solutions_and_check_code_stay_hidden_until_clicked(name, open_page):
    nb = json.loads((notebooks_dir() / f"{name}.ipynb").read_text())
    solutions = [c for c in nb["cells"] if c["cell_type"] == "code"
                 and c["metadata"].get("jupyter", {}).get("source_hidden")]
    page = open_page(f"{name}.html").page
    page.wait_for_function(LAID_OUT, timeout=RENDER_TIMEOUT_MS)
    # What a reader sees before clicking anything: no solution, no verdict, no check's code.
    verdicts = page.evaluate(r"""() => [...document.querySelectorAll(".cell_output")]
        .filter((o) => o.checkVisibility()).map((o) => o.innerText)
        .filter((t) => /exercise \d+: correct|^correct/m.test(t))""")
    assert not verdicts, f"{name}: verdicts visible before any click: {verdicts}"
    checks = page.locator("div.cell.tag_hide-input")
    assert checks.count() >= 1, f"{name}: no folded check cell"
    for k in range(checks.count()):
        assert not checks.nth(k).locator(".cell_input").is_visible(), f"{name}: check {k} shown"
        assert "not answered yet" in checks.nth(k).locator(".cell_output").inner_text()
    hidden = page.locator("div.cell.tag_hide-cell")
    assert hidden.count() == len(solutions) >= 3, f"{name}: {hidden.count()} folded solutions"
    for k in range(hidden.count()):
        cell = hidden.nth(k)
        code, output = cell.locator(".cell_input"), cell.locator(".cell_output")
        assert not code.is_visible() and not output.is_visible(), f"{name}: solution {k} shown"
        cell.locator("summary").first.click()
        assert code.is_visible(), f"{name}: solution {k} does not open on a click"
        assert "Solution to exercise" not in code.inner_text()  # Colab's #@title line is gone


@pytest.mark.parametrize("name", ["02_attention_pooling", "11_windows_sinks_and_latent_attention"])
def test_sections_are_skipped_while_loading_then_all_laid_out(name, open_page):
    # book.css: a section not yet shown is skipped by the browser when away from the screen
    # (content-visibility: auto), the first screen drawn sooner; book.js marks every section
    # shown (laid out) once the page has loaded; printed, none is skipped.
    page = open_page(f"{name}.html").page
    page.wait_for_function(LAID_OUT, timeout=RENDER_TIMEOUT_MS)
    styles = page.evaluate("""() => {
      const sections = [...document.querySelectorAll("article.bd-article section section")];
      const shown = sections.map((s) => getComputedStyle(s).contentVisibility);
      const last = sections.at(-1);
      last.removeAttribute("data-shown");
      const skipped = getComputedStyle(last).contentVisibility;
      last.dataset.shown = "";
      return { n: sections.length, shown: [...new Set(shown)], skipped };
    }""")
    assert styles["n"] >= 5 and styles["skipped"] == "auto", f"{name}: {styles}"
    assert set(styles["shown"]) <= {"visible"}, f"{name}: {styles}"
    page.emulate_media(media="print")
    printed = page.evaluate("""() => { const s = document.querySelector("article.bd-article section section");
      s.removeAttribute("data-shown"); return getComputedStyle(s).contentVisibility; }""")
    page.emulate_media(media="screen")
    assert printed == "visible", f"{name}: a section not yet shown is skipped in print"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_colab_cell_test_marker_or_prompt(name, open_page):
    page = open_page(f"{name}.html").page
    text = page.inner_text("body")
    for noise in ("google.colab", "NBVAL", "In [", "Out[", "#@title", "colab-badge.svg"):
        assert noise not in text, f"{name}: the page shows {noise!r}"
    assert not page.locator("img[src*='colab-badge']").count()  # the theme's own Colab icon is local


# The fonts Chromium drew an element's text with (DevTools protocol).
def platform_fonts(page, selector: str) -> list[dict]:
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    return cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


def test_chinese_terms_are_drawn_with_the_shipped_font(open_page, report):
    # Checked where Chromium has no CJK font of its own (this machine, CI): the glyphs can only
    # come from the site's subset of Noto Sans SC.
    system_cjk = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
    p = open_page("02_attention_pooling.html")
    page = p.page
    page.evaluate("() => document.fonts.ready")
    page.evaluate("""() => { const p = [...document.querySelectorAll("article p")]
        .find((e) => /[\u4e00-\u9fff]/.test(e.textContent)); p.id = "first-chinese"; }""")
    fonts = platform_fonts(page, "#first-chinese")
    cjk = [f for f in fonts if "Noto Sans SC" in f["familyName"]]
    assert cjk and all(f["isCustomFont"] for f in cjk), f"fonts used: {fonts}"
    assert not [f for f in fonts if f["familyName"] in ("", "Tofu")], fonts
    loaded = page.evaluate("""() => performance.getEntriesByType("resource")
        .map((r) => r.name).filter((n) => n.includes("/_static/fonts/"))""")
    assert loaded, "no font file of the subset was fetched"
    subset = sorted((SITE / "_static" / "fonts").glob("*.woff2"))
    total = sum(f.stat().st_size for f in subset)
    assert total < 300_000, f"the CJK subset weighs {total / 1e3:.0f} kB"
    report(f"site CJK: {len(cjk)} shipped faces drew the Chinese terms of 02 "
           f"({'no system CJK font' if not system_cjk.strip() else 'a system CJK font exists too'});"
           f" subset {total / 1e3:.0f} kB in {len(subset)} files")
    p.check("02 fonts")


PHONE = {"width": 390, "height": 844}


def smallest_texts(name: str) -> list[float]:
    """Per page view of the notebook, in page order: its smallest text size (figure px)."""
    from helpers.widgets.page import scene_json

    nb = widget_state.merged(notebooks_dir() / f"{name}.ipynb")
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    sizes = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            view = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                scene = scene_json(state[view["model_id"]]["state"]["scene"])
                sizes.append(min(op[4] for ops in [scene["frame"], *scene["states"]]
                                 for op in ops if isinstance(op, list) and op[0] == "t"))
    return sizes


@pytest.mark.parametrize("name", ["index", *NOTEBOOKS])
def test_phone_width_page_never_scrolls_sideways_and_view_text_stays_readable(
        name, browser, base_url, report):
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    try:
        page = context.new_page()
        remote: list[str] = []
        local_only(context, base_url, remote)
        page.goto(base_url + f"{name}.html", wait_until="load")
        if name != "index":
            page.wait_for_function(RENDERED, timeout=RENDER_TIMEOUT_MS)
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{name}: the page is {width} px wide at 390 px"
        assert not remote
        if name == "index":
            return
        page.wait_for_function("""() => [...document.querySelectorAll(".ahv-view")]
            .every((v) => Number(v.dataset.scale) > 0)""", timeout=RENDER_TIMEOUT_MS)
        scales = page.eval_on_selector_all(".ahv-view", "vs => vs.map((v) => Number(v.dataset.scale))")
        texts = smallest_texts(name)
        assert len(scales) == len(texts)
        shown = [round(s * t, 2) for s, t in zip(scales, texts)]
        assert min(shown) >= 9 - 1e-6, f"{name}: view text as small as {min(shown)} CSS px"
        report(f"site {name} at 390 px: view scales {[round(s, 3) for s in scales]}, "
               f"smallest view text {min(shown)} CSS px")
    finally:
        context.close()


def has_maths(notebook: Path) -> bool:
    nb = json.loads(notebook.read_text())
    return any("$" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def moves_of(kind: str, current: int, n: int) -> list[int]:
    """The values to visit, timed: spread over a range, every other option, 4 toggles."""
    if kind == "range":
        spread = {round(i * (n - 1) / (TIMED_MOVES - 1)) for i in range(TIMED_MOVES)}
        return sorted(spread - {current})
    if kind == "select":
        return [k for k in range(n) if k != current]
    return [0, 0, 0, 0]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_page_renders_and_every_view_control_redraws(name, open_page, save_screenshot, report):
    p = open_page(f"{name}.html")
    page = p.page
    try:
        page.wait_for_function(RENDERED, timeout=RENDER_TIMEOUT_MS)
    except Exception:
        pytest.fail(f"{name}: widgets not rendered after {RENDER_TIMEOUT_MS} ms: "
                    f"{page.evaluate(WIDGETS)}\n" + "\n".join(p.problems + p.remote))
    assert not page.evaluate(WIDGETS)["errors"], page.evaluate(WIDGETS)
    assert "Error displaying widget" not in page.inner_text("body")

    if has_maths(notebooks_dir() / f"{name}.ipynb"):
        maths = page.evaluate(MATHS)
        assert maths["pieces"] > 0 and maths["typeset"] == maths["pieces"], f"{name}: maths {maths}"
        assert not maths["errors"] and not maths["raw"], f"{name}: maths not typeset: {maths}"
        assert maths["font"], f"{name}: KaTeX's font KaTeX_Main not loaded"
        # Display equations centred in their column (the theme's MathJax 3 rule pushes a lone
        # equation to the right); one wider than the column scrolls in its own focusable box.
        # Each brought into view first: book.js marks a box once it is laid out, and a long page
        # lays out its sections as they come near the screen (content-visibility).
        page.evaluate(SHOW_EACH, "div.math")
        for eq in page.evaluate(DISPLAY_MATHS):
            if eq["overflows"]:
                assert eq["tabindex"] == "0" and eq["right"] <= eq["column_right"] + 1, f"{name}: {eq}"
            else:
                assert abs(eq["centre"] - eq["column_centre"]) <= 3, f"{name}: not centred: {eq}"
    p.check(f"{name}: on opening")

    # A copy button on every code cell's code, none on an output.
    copies = page.evaluate(COPY_BUTTONS)
    assert copies["cells"] > 0 and copies["buttons"] == copies["cells"], f"{name}: {copies}"
    assert copies["on_outputs"] == 0, f"{name}: {copies}"

    views = page.locator(".ahv-view")
    assert views.count() >= 1, (
        f"{name}: no page view (.ahv-view) on the page: its widgets are not PageViews "
        "(re-execute the notebook with page views, then make site)")
    times, controls = [], 0
    for v in range(views.count()):
        view = views.nth(v)
        for c in range(view.locator("[data-control]").count()):
            times += move_and_time(name, view, view.locator("[data-control]").nth(c))
            controls += 1
        save_screenshot(lambda path: view.screenshot(path=path), f"site_{name}_{v + 1}.png")
    p.check(f"{name}: after moving every control")
    # What the page cost, cold, compressed as a static host serves it (gzip for text).
    page.wait_for_load_state("networkidle")
    sizes = {url: compressed_size(url) for url in set(p.loaded)}
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total <= PAGE_BUDGET, f"{name}: {total / 1e6:.2f} MB compressed; biggest {biggest}"
    assert not [u for u in sizes if re.search(r"embed-amd|require\.js|fontawesome\.js|anywidget", u)]
    report(f"site {name}: {total / 1e6:.2f} MB compressed cold, {len(sizes)} files")
    TIMES[name] = times
    report(f"site {name}: {views.count()} views, {controls} controls, {len(times)} timed moves, "
           + stats_line(times))


# Scroll each element matching a selector into view in turn (two frames each), then back to
# the top.
SHOW_EACH = """async (selector) => {
  for (const el of document.querySelectorAll(selector)) {
    el.scrollIntoView({ block: "center" });
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  }
  scrollTo(0, 0);
}"""
# Each display equation: the centre of what is drawn and its column's; whether it overflows.
DISPLAY_MATHS = """() => [...document.querySelectorAll("div.math")].map((box) => {
  const eq = box.querySelector(".katex-html"), col = box.getBoundingClientRect();
  if (!eq || !box.checkVisibility()) return null;
  // What is drawn (KaTeX's display boxes are blocks as wide as the column): its glyphs' extent.
  const range = document.createRange();
  range.selectNodeContents(eq);
  const r = range.getBoundingClientRect();
  return { centre: r.left + r.width / 2, column_centre: col.left + col.width / 2,
           right: col.right, column_right: box.closest("article").getBoundingClientRect().right,
           overflows: box.scrollWidth > box.clientWidth + 1, tabindex: box.getAttribute("tabindex") };
}).filter(Boolean)"""
# Code cells with code, their copy buttons, and copy buttons on outputs (there must be none).
COPY_BUTTONS = """() => ({
  cells: [...document.querySelectorAll(".cell_input")].filter((c) => c.querySelector("div.highlight pre")).length,
  buttons: document.querySelectorAll(".cell_input button.copy-code").length,
  on_outputs: document.querySelectorAll(".cell_output button.copy-code, .output button.copy-code").length,
})"""
TEXT_TYPES = (".html", ".js", ".css", ".json", ".svg", ".ico", ".txt")


def compressed_size(url: str) -> int:
    """Bytes of a site file as a static host sends it: gzip (level 6) for text, as is otherwise."""
    path = SITE / url.split("?")[0].split("#")[0]
    if path.is_dir():
        path = path / "index.html"
    data = path.read_bytes()
    return len(gzip.compress(data, 6)) if path.suffix in TEXT_TYPES else len(data)


def move_and_time(name: str, view, control) -> list[float]:
    """Move the control as a reader does (keyboard for a slider, a pick, a click): the canvas
    must change and redraw; then time moves to other values; returns their times in ms."""
    where = (f"{name}: view {view.get_attribute('data-view')!r}, "
             f"control {control.get_attribute('data-control')!r}")
    canvas = view.locator("canvas").first

    def drawn():
        return canvas.evaluate("(c) => c.toDataURL()"), int(view.get_attribute("data-redraws"))

    c = control.evaluate(CONTROL)
    before = drawn()
    if c["kind"] == "range":
        control.focus()
        control.press("Home" if c["index"] == c["n"] - 1 else "End")
    elif c["kind"] == "select":
        control.select_option(index=(c["index"] + 1) % c["n"])
    else:
        control.click()
    after = drawn()
    assert after[1] > before[1], f"{where}: moved, no redraw (data-redraws {after[1]})"
    assert after[0] != before[0], f"{where}: moved, the canvas did not change"
    c = control.evaluate(CONTROL)
    timed = control.evaluate(TIMED, moves_of(c["kind"], c["index"], c["n"]))
    assert not timed["stale"], f"{where}: no redraw after moving to {timed['stale']}"
    return timed["ms"]


def stats(ms: list[float]) -> dict:
    ms = sorted(ms)
    if not ms:
        return {"moves": 0}
    return {"moves": len(ms), "median_ms": round(statistics.median(ms), 3),
            "p90_ms": round(ms[math.ceil(0.9 * len(ms)) - 1], 3),  # nearest rank
            "max_ms": round(ms[-1], 3)}


def stats_line(ms: list[float]) -> str:
    s = stats(ms)
    return ("redraw median {median_ms} / p90 {p90_ms} / max {max_ms} ms".format(**s)
            if ms else "no moves")


def write_times() -> None:
    """artifacts/browser/site_redraw.json and an overall summary line, if any page was timed."""
    if not TIMES:
        return
    every = [ms for page in TIMES.values() for ms in page]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "site_redraw.json").write_text(json.dumps(
        {"pages": {name: stats(ms) for name, ms in TIMES.items()}, "overall": stats(every)},
        indent=1) + "\n")
    SUMMARIES.append(f"site, all pages: {len(every)} timed moves, {stats_line(every)} "
                     f"(artifacts/browser/site_redraw.json)")


def _box(op: list) -> tuple[float, float, float, float] | None:
    """The bounding box (x0, y0, x1, y1) of a path op; None for other ops."""
    if op[0] != "p":
        return None
    xy = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", op[1])]
    xs, ys = xy[0::2], xy[1::2]
    return min(xs), min(ys), max(xs), max(ys)


# The canvas colour under a point of a view, in CSS pixels of its figure.
# (The view may be drawn smaller than its figure to fit the page's column: scale from the
# figure's width, not the canvas's CSS width.)
PIXELS = """(root, [points, width]) => {
  const canvas = root.querySelector("canvas"), ctx = canvas.getContext("2d");
  const scale = canvas.width / width;
  return points.map(([x, y]) => [...ctx.getImageData(Math.floor(x * scale),
                                                     Math.floor(y * scale), 1, 1).data]);
}"""


@pytest.mark.parametrize("name", ["01_queries_keys_values", "03_masked_softmax",
                                  "08_causal_attention_and_the_transformer_block"])
def test_canvas_heatmap_cells_have_the_colours_of_their_values(name, open_page):
    # The page's heatmap cells, sampled in the canvas, have the colours Python gave them: the
    # colour map of each value (masked cells grey), as test_page_scenes.py checks against
    # matplotlib. Checked in the stored state and after moving the first control to its end.
    import nbformat

    from helpers.widgets.page import scene_json
    from helpers.widgets.page import scene_ops as lookup

    nb = widget_state.merged(notebooks_dir() / f"{name}.ipynb")  # the state the site merges in
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    shown = [o.data["application/vnd.jupyter.widget-view+json"]["model_id"]
             for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    page = open_page(f"{name}.html")
    page.page.wait_for_function(RENDERED, timeout=RENDER_TIMEOUT_MS)
    roots = page.page.locator(".ahv-view")
    assert roots.count() == len(shown)
    checked = 0
    for k, model_id in enumerate(shown):
        model = state[model_id]["state"]
        scene, index = scene_json(model["scene"]), list(model["index"])
        if "live" in scene:  # computed in the page: test_live_page_*.py checks its pixels
            continue
        root = roots.nth(k)
        root.scroll_into_view_if_needed()
        first = root.locator("[data-control]").first
        for move in (None, "end"):
            if move == "end":  # the first control to its last value, as a reader would
                n = len(scene["controls"][0]["values"])
                first.evaluate("""(el, n) => { if (el.type === "checkbox") el.checked = true;
                    else if (el.tagName === "SELECT") el.selectedIndex = n - 1;
                    else el.value = String(n - 1);
                    el.dispatchEvent(new Event(el.type === "range" ? "input" : "change")); }""", n)
                index[0] = n - 1
            points, want = [], []
            ops = lookup(scene, index)
            for at, op in enumerate(ops):
                if op[0] != "i":
                    continue
                _, x, y, w, h, cols, rows, palette, data, _ = op
                if w / cols < 6 or h / rows < 6:
                    continue  # cells too small to sample away from their edges
                cells = base64.b64decode(data)
                # Marks drawn over the map later (the explorer's dots and rings, no bigger than
                # a few cells) hide its colour there: those points are not sampled.
                marks = [box for box in map(_box, ops[at + 1:])
                         if box and (box[2] - box[0]) * (box[3] - box[1]) < 4 * w * h / (rows * cols)]
                for r in range(rows):
                    for c in range(cols):
                        # a quarter into the cell: its centre may hold an annotation
                        px, py = x + (c + 0.25) * w / cols, y + (r + 0.25) * h / rows
                        if any(b[0] - 2 <= px <= b[2] + 2 and b[1] - 2 <= py <= b[3] + 2
                               for b in marks):
                            continue
                        points.append((px, py))
                        colour = palette[cells[r * cols + c]]
                        want.append([int(colour[i:i + 2], 16) for i in (1, 3, 5, 7)])
            got = root.evaluate(PIXELS, [points, scene["width"]])
            bad = [(p, g, e) for p, g, e in zip(points, got, want)
                   if max(abs(a - b) for a, b in zip(g, e)) > 3]
            assert not bad, f"{name} view {k} {move or 'stored'}: {len(bad)} of {len(points)} " \
                            f"cells off, e.g. {bad[:3]}"
            checked += len(points)
    assert checked > 0
    page.check(name)


# ------------------------------------------------------------------------------ what a reader pays


# Every page of the build (notebooks, landing, search, documentation, references), or the
# pages expected when there is no build yet (the test then skips or fails on `site`).
PAGES = sorted({p.stem for p in SITE.glob("*.html")} | {"index", "search", *NOTEBOOKS})


@pytest.mark.parametrize("name", PAGES)
def test_head_blocks_nothing_and_holds_one_viewport_a_description_and_a_favicon(name, site):
    # Read from the built file: what the browser meets before it can draw anything.
    text = (site / f"{name}.html").read_text(encoding="utf-8")
    head = text.split("</head>", 1)[0]
    blocking = [tag for tag in re.findall(r"<script\b[^>]*(?<![\w-])src=[^>]*>", head)
                if not re.search(r"\b(?:defer|async)\b|type=\"module\"", tag)]
    assert not blocking, f"{name}: scripts that block rendering: {blocking}"
    loads = " ".join(re.findall(r"<(?:script|link)\b[^>]*>", text))  # what the page fetches
    for gone in ("embed-amd", "require.js", "require-config", "_static/anywidget", "fontawesome.js"):
        assert gone not in loads, f"{name}: still loads {gone}"
    assert 'href="genindex.html"' not in text and "Toggle hidden content" not in text
    assert not re.search(r'<(?:i|span) class="[^"]*\bfa-', text), f"{name}: an icon left to a script"
    views = "application/vnd.jupyter.widget-view+json" in text
    module = [tag for tag in re.findall(r"<script\b[^>]*>", head)
              if "_static/pageviews.js" in tag and 'type="module"' in tag]
    assert len(module) == (1 if views else 0), f"{name}: pageviews.js {len(module)} times"
    # One style sheet (the build's bundle of the page's sheets), so one render-blocking request.
    sheets = re.findall(r'<link\b[^>]*rel="stylesheet"[^>]*>', head)
    assert len(sheets) == 1 and re.search(r'href="_static/styles\.[0-9a-f]{10}\.css"', sheets[0]), \
        f"{name}: style sheets {sheets}"
    # The views' saved state: in a file fetched by pageviews.js, not in <head> (but on the
    # landing page, whose view is in the first screen).
    state = re.findall(r'<script type="application/vnd\.jupyter\.widget-state\+json"([^>]*)>'
                       r'(.*?)</script>', head, re.S)
    if views:
        assert len(state) == 1, f"{name}: {len(state)} widget-state scripts"
        attributes, inline = state[0]
        if name == "index":
            assert json.loads(inline)["state"] and "data-src" not in attributes
        else:
            src = re.fullmatch(r' data-src="(_static/views/[\w.-]+\.json)"', attributes)
            assert src and not inline.strip(), f"{name}: state {attributes!r} {inline[:80]!r}"
            assert json.loads((site / src.group(1)).read_text(encoding="utf-8"))["state"]
    assert len(re.findall(r'<meta name="viewport"', text)) == 1
    description = re.findall(r'<meta name="description" content="([^"]*)"', head)
    assert len(description) == 1 and 60 <= len(description[0]) <= 160, f"{name}: {description}"
    assert "\\(" not in description[0] and "<" not in description[0]
    assert re.search(r'<link rel="icon" href="_static/favicon\.svg"', head)
    if name == "search":
        assert "searchindex.js" in head
    else:  # the theme's search-as-you-type is off: no index on every page
        assert "searchindex.js" not in head and "searchtools.js" not in head
    assert not (site / "genindex.html").exists()


def test_favicon_is_served_at_the_root_and_in_static(site, base_url, browser):
    context = browser.new_context()
    try:
        for path, kind in (("favicon.ico", "image/vnd.microsoft.icon"),
                           ("_static/favicon.svg", "image/svg+xml")):
            response = context.request.get(base_url + path)
            assert response.status == 200, path
            assert response.headers["content-type"] == kind
            assert len(response.body()) > 100
    finally:
        context.close()


def test_theme_buttons_show_their_icons_as_inline_svg(open_page):
    p = open_page("02_attention_pooling.html")
    icons = p.page.evaluate("""() => [...document.querySelectorAll(
        ".theme-switch-button, .search-button-field, .primary-toggle, .dropdown-toggle")]
      .filter((b) => b.checkVisibility()).map((b) => {
        const svg = [...b.querySelectorAll("svg.svg-inline--fa")].find((s) => s.checkVisibility());
        const r = svg?.getBoundingClientRect();
        return { button: b.getAttribute("aria-label") || b.textContent.trim(),
                 w: r?.width ?? 0, h: r?.height ?? 0, d: svg?.querySelector("path")?.getAttribute("d")?.length ?? 0 };
      })""")
    assert len(icons) >= 3, icons
    for icon in icons:
        assert icon["w"] >= 10 and icon["h"] >= 10 and icon["d"] > 20, icon
    # One search box on a desktop, named by what it shows ("Search Ctrl+K").
    boxes = p.page.evaluate("""() => [...document.querySelectorAll(".search-button-field, .search-button")]
        .filter((b) => b.checkVisibility()).map((b) => [b.getAttribute("aria-label"), b.innerText])""")
    assert len(boxes) == 1 and boxes[0][0] is None and "Search" in boxes[0][1], boxes
    p.check("02 icons")


def test_copy_button_copies_the_code_only(browser, base_url):
    context = browser.new_context(viewport=VIEWPORT)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    try:
        page = context.new_page()
        page.goto(base_url + "02_attention_pooling.html", wait_until="load")
        cell = page.locator(".cell_input").nth(1)
        code = cell.locator("pre").inner_text()
        cell.locator("button.copy-code").click()
        copied = page.evaluate("() => navigator.clipboard.readText()")
        assert copied == code.rstrip("\n") and "Copy" not in copied
        assert cell.locator("button.copy-code").inner_text() == "Copied"
    finally:
        context.close()


def test_printing_opens_the_solutions_and_leaves_out_the_chrome(open_page):
    p = open_page("08_causal_attention_and_the_transformer_block.html")
    page = p.page
    solutions = "div.cell.tag_hide-cell .cell_input"
    assert not any(page.eval_on_selector_all(solutions, "es => es.map((e) => e.checkVisibility())"))
    # As print preview shows it (CSS only: no beforeprint event) ...
    page.emulate_media(media="print")
    shown = page.eval_on_selector_all(solutions, "es => es.map((e) => e.checkVisibility())")
    assert len(shown) >= 3 and all(shown), shown
    checks = page.eval_on_selector_all("div.cell.tag_hide-input .cell_input",
                                       "es => es.map((e) => e.checkVisibility())")
    assert checks and not any(checks), "the check cells' code prints folded"
    chrome = page.eval_on_selector_all(
        ".bd-sidebar-primary, .bd-sidebar-secondary, .bd-header, .header-article, button.copy-code",
        "es => es.filter((e) => e.checkVisibility()).map((e) => e.className)")
    assert not chrome, chrome
    page.emulate_media(media="screen")
    # ... and as window.print() does (book.js opens them, then folds them again).
    page.evaluate("() => dispatchEvent(new Event('beforeprint'))")
    opened = page.eval_on_selector_all("div.cell.tag_hide-cell details", "ds => ds.map((d) => d.open)")
    assert opened and all(opened)
    page.evaluate("() => dispatchEvent(new Event('afterprint'))")
    assert not any(page.eval_on_selector_all("div.cell.tag_hide-cell details", "ds => ds.map((d) => d.open)"))
    p.check("08 print")


# The contrast of each token colour of a code cell on the cell's background (WCAG 2).
CODE_CONTRAST = """() => {
  const lum = (c) => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map((v) => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const worst = {};
  for (const pre of document.querySelectorAll(".cell_input div.highlight pre")) {
    const bg = getComputedStyle(pre.closest("div.highlight")).backgroundColor;
    for (const span of pre.querySelectorAll("span")) {
      if (!span.textContent.trim()) continue;
      const fg = getComputedStyle(span).color, r = ratio(fg, bg);
      if (!(fg in worst) || r < worst[fg][0]) worst[fg] = [Math.round(r * 100) / 100, span.className, bg];
    }
  }
  return worst;
}"""


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_code_colours_reach_4_5_to_1_in_both_modes(mode, browser, base_url):
    context = browser.new_context(viewport=VIEWPORT, color_scheme=mode)
    try:
        page = context.new_page()
        page.goto(base_url + "08_causal_attention_and_the_transformer_block.html", wait_until="load")
        assert page.evaluate("() => document.documentElement.dataset.theme") == mode
        worst = page.evaluate(CODE_CONTRAST)
        assert len(worst) >= 5, worst
        low = {fg: w for fg, w in worst.items() if w[0] < 4.5}
        assert not low, f"{mode}: token colours under 4.5:1: {low}"
    finally:
        context.close()


LOADER_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>loader</title>
<script type="application/vnd.jupyter.widget-state+json">{STATE}</script>
<link rel="icon" href="data:,"><script type="module" src="pageviews.js"></script></head><body>
<div class="out" id="a"><script type="application/vnd.jupyter.widget-view+json">{{"model_id": "slider"}}</script></div>
<div class="out" id="b"><script type="application/vnd.jupyter.widget-view+json">{{"model_id": "mover"}}</script></div>
<div class="out" id="c"><script type="application/vnd.jupyter.widget-view+json">{{"model_id": "mover"}}</script></div>
<div class="out" id="d"><script type="application/vnd.jupyter.widget-view+json">{{"model_id": "absent"}}</script></div>
</body></html>"""
# An anywidget module using what view.js uses of the model: get, set, on, save_changes.
LOADER_ESM = """export default { render({ model, el }) {
  const b = document.createElement("button");
  const show = () => { b.textContent = String(model.get("index")); };
  model.on("change:index", show); show();
  b.onclick = () => { model.set("index", model.get("index") + 1); model.save_changes(); };
  el.append(b);
} };"""


def test_loader_draws_anywidget_models_and_says_why_it_cannot_draw_others(browser, tmp_path):
    # _static/pageviews.js on a page of its own: an ipywidgets slider (needs a kernel) and a
    # missing model are said so in the page; two views of one anywidget model share its state.
    state = {"version_major": 2, "version_minor": 0, "state": {
        "slider": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
                   "state": {"value": 3}},
        "mover": {"model_name": "AnyModel", "model_module": "anywidget",
                  "state": {"_esm": LOADER_ESM, "index": 1}}}}
    (tmp_path / "pageviews.js").write_bytes((SITE / "_static" / "pageviews.js").read_bytes())
    (tmp_path / "index.html").write_text(
        LOADER_PAGE.replace("{{", "{").replace("}}", "}").replace("{STATE}", json.dumps(state)))
    context = browser.new_context()
    errors: list[str] = []
    try:
        with serve(tmp_path) as url:
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.goto(url + "index.html", wait_until="load")
            page.wait_for_function("() => document.querySelectorAll('.widget-subarea > *').length == 4")
            said = page.eval_on_selector_all(".widget-subarea", "es => es.map((e) => e.innerText)")
            assert "IntSliderModel" in said[0] and "kernel" in said[0], said
            assert said[1] == said[2] == "1", said
            assert "absent" in said[3], said
            page.locator("#b button").click()
            assert page.locator("#c button").inner_text() == "2"  # the shared model's event
            kinds = page.eval_on_selector_all(
                ".out", "os => os.map((o) => o.firstElementChild.className)")
            assert kinds == ["widget-subarea"] * 4  # where html-manager put its views
    finally:
        context.close()
    assert len(errors) == 1 and "absent" in errors[0], errors  # the missing model, loudly


def test_every_local_file_a_page_names_is_in_the_site(site):
    """Every src/href of every page that points into the site (not a #fragment, not another
    host) names a file that is there: the figures converted to WebP, the links around them."""
    missing = []
    for page in sorted(site.glob("*.html")):  # the pages (_static/ holds theme templates)
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"<script\b[^>]*>.*?</script>", "", text, flags=re.S)  # state, code
        for target in re.findall(r'\b(?:src|href)="([^"#?]+)', text):
            if re.match(r"[a-z][\w+.-]*:|//", target):
                continue
            if not (page.parent / target).exists():
                missing.append(f"{page.relative_to(site)}: {target}")
    assert not missing, f"{len(missing)} local targets missing, e.g. {missing[:5]}"
