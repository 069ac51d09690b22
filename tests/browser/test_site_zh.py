"""The Chinese edition of the course site, site/zh/ (`make site`, issue 46), in headless Chromium.

The language switch leads from every page to the same page in the other edition and back, on a
desktop and on a 390 px phone; Chinese queries find the notebook that teaches the term; the
Chinese text is drawn with the shipped subset of Noto Sans SC (this machine and CI have no CJK
font); every zh notebook page renders with no error, its maths typeset, and every control of
every page view redraws its view (the live views: test_site_live.py); no page is wider than a
390 px phone; every local file a page names is there. Builds nothing: without site/zh/ every
test here is skipped on a learner's machine and FAILS in CI ("run make site").
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import LAID_OUT, _cannot_run, notebooks_dir  # tests/browser/
from test_site import MATHS, RENDERED, move_and_time, platform_fonts  # tests/browser/

from benchmarks.bench_pages import local_only, serve  # 127.0.0.1 only

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("ATTN_SITE_DIR") or ROOT / "site").resolve()
NOTEBOOKS = sorted(p.stem for p in notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
SIZES = {"desktop": {"viewport": {"width": 1280, "height": 900}},
         "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True,
                   "has_touch": True, "device_scale_factor": 2}}
TIMEOUT_MS = 30_000
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")


@pytest.fixture(scope="module")
def site(chromium_path) -> Path:
    if not (SITE / "zh" / "index.html").is_file():
        _cannot_run(f"no {SITE / 'zh' / 'index.html'}: run make site")
    return SITE


@pytest.fixture(scope="module")
def base_url(site):
    with serve(site) as url:
        yield url


@pytest.fixture
def open_page(browser, base_url):
    """open_page(path, size) → (page, problems): a fresh context; problems collects page and
    console errors, failed requests and requests to other hosts."""
    contexts = []

    def open_(path: str, size: str = "desktop"):
        context = browser.new_context(**SIZES[size])
        contexts.append(context)
        problems: list[str] = []
        local_only(context, base_url, problems)
        page = context.new_page()
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status} {r.url}"))
        page.goto(base_url + path, wait_until="load")
        return page, problems

    yield open_
    for context in contexts:
        context.close()


# ------------------------------------------------------------------------------ the switch


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", ["index", "02_attention_pooling", "11_windows_sinks_and_latent_attention",
                                  "glossary", "install"])
def test_the_language_switch_leads_to_the_same_page_in_the_other_edition_and_back(
        name, size, open_page, base_url):
    page, problems = open_page(f"{name}.html", size)
    assert page.evaluate("() => document.documentElement.lang") == "en"
    english_title = page.title()
    for lang, path, label in (("zh-CN", f"zh/{name}.html", "中文"),
                              ("en", f"{name}.html", "English")):
        switch = page.locator("a.ahv-lang")
        assert switch.count() == 1 and switch.inner_text().strip() == label, switch.count()
        box = switch.bounding_box()
        width = page.evaluate("() => document.documentElement.clientWidth")
        # On the screen, inside it, big enough to tap (24 px: WCAG 2.2's minimum target).
        assert box and box["y"] >= 0 and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        assert box["width"] >= 24 and box["height"] >= 24, box
        switch.click()
        page.wait_for_url(base_url + path)
        assert page.evaluate("() => document.documentElement.lang") == lang
        other = page.locator("a.ahv-lang")
        assert other.get_attribute("hreflang") == other.get_attribute("lang") == (
            "en" if lang == "zh-CN" else "zh-CN")
        if lang == "zh-CN":
            assert page.title() != english_title and CJK.search(page.title()), page.title()
            assert CJK.search(page.inner_text("article")), "the Chinese page's article has no Chinese"
    assert page.title() == english_title
    assert not problems, problems


def test_the_chinese_pages_speak_chinese_around_the_prose(open_page):
    page, problems = open_page("zh/03_masked_softmax.html")
    page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
    # The theme's and Sphinx's words (search box, previous/next) and the build's (the folded
    # solutions' buttons) are Chinese too.
    assert "搜索" in page.inner_text(".search-button-field")
    footer = page.inner_text(".prev-next-area")
    assert "上一页" in footer or "下一页" in footer, footer
    labels = page.eval_on_selector_all(".cell details summary", "s => s.map((e) => e.innerText)")
    assert labels and all(CJK.search(label) for label in labels), labels
    # The Colab button opens the Chinese notebook.
    colab = page.eval_on_selector_all('a[href*="colab.research.google.com"]',
                                      "a => a.map((e) => e.href)")
    assert colab and all("/notebooks/zh/03_masked_softmax.ipynb" in href for href in colab), colab
    assert not problems, problems


# ------------------------------------------------------------------------------ search


@pytest.mark.parametrize("query, notebook", [
    ("注意力汇聚", "02_attention_pooling"),
    # 掩码 (a mask) is in the title of one section, 08's causal mask (因果掩码); 03's title has
    # 掩蔽 (masking: 掩蔽 softmax 操作, the masked softmax).
    ("掩码", "08_causal_attention_and_the_transformer_block"),
    ("掩蔽", "03_masked_softmax"),
    ("键值缓存", "09_attention_at_scale"),
    ("缩放点积注意力", "04_scoring_functions"),
    ("旋转位置编码", "10_rotary_position_embedding"),
])
def test_a_chinese_query_lands_on_the_notebook_that_teaches_it(query, notebook, open_page):
    page, problems = open_page(f"zh/search.html?q={quote(query)}")
    page.wait_for_function("() => document.querySelector('#search-results .search-summary')"
                           "?.textContent.trim()", timeout=TIMEOUT_MS)  # (the search finished)
    hits = page.eval_on_selector_all("#search-results li a", "a => a.map((e) => e.getAttribute('href'))")
    assert hits[0].split("#")[0] == f"{notebook}.html", f"{query}: {hits[:5]}"
    summary = page.inner_text("#search-results .search-summary")
    assert CJK.search(summary), summary  # Sphinx's own words, in Chinese
    assert not problems, problems


# ------------------------------------------------------------------------------ font


def test_the_chinese_pages_are_drawn_with_the_shipped_font_and_it_covers_them(open_page, site,
                                                                               report):
    system_cjk = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
    page, problems = open_page("zh/02_attention_pooling.html")
    page.evaluate("() => document.fonts.ready")
    page.evaluate("""() => { document.querySelector("article p").id = "first-paragraph"; }""")
    fonts = platform_fonts(page, "#first-paragraph")
    cjk = [f for f in fonts if "Noto Sans SC" in f["familyName"]]
    assert cjk and all(f["isCustomFont"] for f in cjk), f"fonts used: {fonts}"
    assert not [f for f in fonts if f["familyName"] in ("", "Tofu")], fonts
    # Every CJK character of every Chinese page is in the subset's ranges.
    # (cjk.css is bundled into each page's one style sheet by the build)
    css = "".join(p.read_text(encoding="utf-8") for p in (site / "zh" / "_static").glob("styles.*.css"))
    faces = re.findall(r"@font-face\s*\{[^}]*Noto Sans SC subset[^}]*\}", css)
    assert faces, "no @font-face of the subset in the Chinese pages' style sheets"
    covered = set()
    for spec in re.findall(r"unicode-range:\s*([^;}]+)", "".join(faces)):
        for part in spec.split(","):
            lo, _, hi = part.strip().removeprefix("U+").partition("-")
            covered.update(range(int(lo, 16), int(hi or lo, 16) + 1))
    used = set()
    for html in (site / "zh").glob("*.html"):
        text = re.sub(r"<(script|style)\b.*?</\1>", "", html.read_text(encoding="utf-8"), flags=re.S)
        used.update(ord(c) for c in CJK.findall(re.sub(r"<[^>]+>", "", text)))
    missing = sorted(used - covered)
    assert not missing, f"{len(missing)} characters outside the subset: {''.join(map(chr, missing[:40]))}"
    files = sorted((site / "zh" / "_static" / "fonts").glob("*.woff2"))
    total = sum(f.stat().st_size for f in files)
    report(f"site zh CJK: {len(used)} characters on the Chinese pages, subset {total / 1e3:.0f} kB "
           f"in {len(files)} files ({'no system CJK font' if not system_cjk.strip() else 'a system CJK font exists too'})")
    assert not problems, problems


# ------------------------------------------------------------------------------ views, phones


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_chinese_notebook_page_renders_and_every_view_control_redraws(name, open_page):
    page, problems = open_page(f"zh/{name}.html")
    page.wait_for_function(RENDERED, timeout=TIMEOUT_MS)
    assert "Error displaying widget" not in page.inner_text("body")
    assert not page.query_selector_all(".ahv-error")
    maths = page.evaluate(MATHS)
    if maths["pieces"]:
        assert maths["typeset"] == maths["pieces"] and not maths["errors"] and not maths["raw"], maths
    views = page.locator(".ahv-view")
    assert views.count() >= 1
    moved = 0
    for v in range(views.count()):
        view = views.nth(v)
        if view.locator(".ahv-live").count():
            continue  # (typed into by test_site_live.py)
        for c in range(view.locator("[data-control]").count()):
            move_and_time(f"zh/{name}", view, view.locator("[data-control]").nth(c))
            moved += 1
    assert moved >= 1, f"zh/{name}: no control moved"
    assert not problems, problems


@pytest.mark.parametrize("name", ["index", "glossary", "references", *NOTEBOOKS])
def test_a_chinese_page_never_scrolls_sideways_on_a_phone(name, open_page):
    page, problems = open_page(f"zh/{name}.html", "phone")
    page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"zh/{name}: the page is {width} px wide at 390 px"
    assert not problems, problems


def test_every_local_file_a_chinese_page_names_is_there(site):
    missing = []
    for page in sorted((site / "zh").glob("*.html")):
        text = re.sub(r"<script\b[^>]*>.*?</script>", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r'\b(?:src|href)="([^"#?]+)', text):
            if not re.match(r"[a-z][\w+.-]*:|//", target) and not (page.parent / target).exists():
                missing.append(f"zh/{page.name}: {target}")
    assert not missing, f"{len(missing)} local targets missing, e.g. {missing[:5]}"
