"""The reader's place on the course site (site/, `make site`), in headless Chromium, other hosts
blocked. A long page skips laying out the sections away from the screen while it loads
(book.css: content-visibility) and lays them out once it has loaded (book.js): their heights
change from an estimate to their own. What the reader looks at must not move:

* a place the reader jumped to at once (as the find bar does, 50 ms after load) stays on the
  screen while the sections above it are laid out;
* a link to a term deep in another page (the glossary's) shows its target below the sticky
  header once everything is laid out;
* a reload, and Back from another page, bring the reader back to the section they were reading
  (the browser's own restoring used the estimated heights: 5,000-15,000 px off).

And on a phone the menu and outline buttons the reader sees open their drawers (the theme wired
only its hidden copies; site.js).
Builds nothing: with no site/index.html it is skipped (a failure in CI), as test_site.py.
"""

from __future__ import annotations

import pytest
from conftest import LAID_OUT  # tests/browser/

from benchmarks.bench_pages import local_only  # 127.0.0.1 only

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1440, "height": 900}}
WIDTHS = {"phone": PHONE, "desktop": DESKTOP}
TIMEOUT_MS = 30_000
TOP = "(el) => el.getBoundingClientRect().top"
HEADER = "() => document.querySelector('.bd-header').getBoundingClientRect().bottom"


@pytest.fixture
def open_context(browser, base_url):
    contexts, remote = [], []

    def open_(width: str):
        context = browser.new_context(**WIDTHS[width])
        local_only(context, base_url, remote)
        contexts.append(context)
        return context.new_page()

    yield open_
    for context in contexts:
        context.close()
    assert not remote, f"requests to other hosts (aborted): {remote}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name, target", [("12_linear_attention", "#exercises"),
                                          ("11_windows_sinks_and_latent_attention", "#exercises")])
def test_a_place_jumped_to_at_once_stays_while_sections_are_laid_out(
        open_context, base_url, width, name, target):
    page = open_context(width)
    page.goto(base_url + f"{name}.html", wait_until="load")
    page.wait_for_timeout(50)
    heading = page.locator(f"{target} > h2, {target} > h3").first
    heading.evaluate("(h) => h.scrollIntoView({ block: 'center', behavior: 'instant' })")
    before = heading.evaluate(TOP)
    page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
    page.wait_for_timeout(200)
    after = heading.evaluate(TOP)
    assert abs(after - before) <= 2, f"{name} {target}: moved from {before:.0f} to {after:.0f} px"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_glossary_link_shows_its_target_below_the_header(open_context, base_url, width):
    page = open_context(width)
    page.goto(base_url + "glossary.html", wait_until="load")
    link = page.locator('a[href^="11_windows_sinks_and_latent_attention.html#gl-"]').last
    href = link.get_attribute("href")
    link.click()
    page.wait_for_url("**/11_*")
    page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
    page.wait_for_timeout(200)
    target = page.locator("#" + href.split("#", 1)[1])
    top, header = target.evaluate(TOP), page.evaluate(HEADER)
    height = page.evaluate("() => innerHeight")
    assert header <= top <= height - 20, f"{href}: at {top:.0f} px (header ends at {header:.0f})"


@pytest.mark.parametrize("width", WIDTHS)
def test_reload_and_back_return_to_the_section_being_read(open_context, base_url, width):
    name = "11_windows_sinks_and_latent_attention"
    page = open_context(width)
    page.goto(base_url + f"{name}.html", wait_until="load")
    page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
    sections = page.locator("article.bd-article section section[id]")
    section = sections.nth(sections.count() * 2 // 3)
    section.evaluate("""(s) => { s.scrollIntoView({ behavior: "instant" });
                                 scrollBy({ top: -100, behavior: "instant" }); }""")
    page.wait_for_timeout(300)
    before = section.evaluate(TOP)
    for how in ("reload", "back"):
        if how == "reload":
            page.reload(wait_until="load")
        else:
            page.goto(base_url + "12_linear_attention.html", wait_until="load")
            page.go_back(wait_until="load")
        page.wait_for_function(LAID_OUT, timeout=TIMEOUT_MS)
        page.wait_for_timeout(300)
        after = section.evaluate(TOP)
        assert abs(after - before) <= 2, f"{how}: the section at {before:.0f} px is at {after:.0f}"


@pytest.mark.parametrize("kind, dialog", [("primary", "#pst-primary-sidebar-modal"),
                                          ("secondary", "#pst-secondary-sidebar-modal")])
def test_the_phones_menu_and_outline_buttons_open_their_drawers(open_context, base_url, kind,
                                                                dialog):
    page = open_context("phone")
    page.goto(base_url + "02_attention_pooling.html", wait_until="load")
    buttons = page.locator(f"button.{kind}-toggle")
    visible = [k for k in range(buttons.count()) if buttons.nth(k).is_visible()]
    assert visible, f"no {kind} button on the phone"
    buttons.nth(visible[0]).click()
    page.wait_for_function(f"() => document.querySelector('{dialog}')?.open", timeout=5_000)
    links = page.locator(f"{dialog} a")
    assert links.count() >= 5 and links.first.is_visible(), f"{dialog}: {links.count()} links"
    page.keyboard.press("Escape")
    page.wait_for_function(f"() => !document.querySelector('{dialog}').open", timeout=5_000)
