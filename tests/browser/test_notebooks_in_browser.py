"""Every notebook, run in JupyterLab in headless Chromium, and every slider moved.

For each ``notebooks/NN_*.ipynb`` (a temporary copy, see conftest.py): open it, clear its stored
outputs, Run → Run All Cells, and check that

* every code cell ran (``[n]:`` prompts), no output is a traceback or an error, no dialog
  (dead kernel, missing kernel) is open, and at least one figure is shown;
* every widget rendered (no "Loading widget...", "Error displaying widget", "model not found");
* every slider (``.widget-slider``), moved one step with the keyboard, changes the figure it
  drives (an ``img`` ``src`` in its ``interactive`` view, or in its output area); every dropdown,
  checkbox, toggle-button and radio-button of an ``interactive`` view does too;
* after the controls moved there is still no error output.

A screenshot per notebook (and one per slider view) goes to ``artifacts/browser/``.
The kernel is shut down after each notebook.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
except ImportError:  # no Playwright: the session fixtures skip every test
    PlaywrightTimeoutError = TimeoutError

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = Path(os.environ.get("ATTN_NOTEBOOKS_DIR") or ROOT / "notebooks").resolve()
NOTEBOOKS = sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))

VIEWPORT = {"width": 1280, "height": 900}
LOAD_TIMEOUT_MS = 90_000
RUN_TIMEOUT_MS = 240_000  # one notebook, Run All Cells (≤ 20 s under nbconvert)
UPDATE_TIMEOUT_MS = 20_000  # one control change → new figure
WIDGET_PROBLEMS = ("Loading widget...", "Error displaying widget", "model not found")
ERROR_PATTERN = re.compile(r"Traceback|^\s*\w*(Error|Exception)\b", re.M)

# Page-side helpers, installed before JupyterLab loads.
INIT_SCRIPT = r"""
window.__attn = {
  // The images of the figure a control drives: its interactive view, else its output area.
  figureOf(el) {
    const box = el.closest('.widget-interact') || el.closest('.jp-OutputArea-output');
    return box ? [...box.querySelectorAll('img')].map(i => i.src).join('\n') : '';
  },
  codeCells() { return [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]; },
  prompts() {
    return this.codeCells()
      .map(c => (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '');
  },
  kernelStatus() {
    const items = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
      .map(e => e.textContent.trim());
    return items.find(t => / \| \w+$/.test(t)) || '';
  },
  errors() {
    return [...document.querySelectorAll(
        '.jp-Notebook .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map(o => o.innerText);
  },
};
"""


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


def _wait_kernel_idle(page, timeout_ms: int) -> None:
    page.wait_for_function(
        """() => { const s = window.__attn.kernelStatus();
                   return s.endsWith('| Idle') && !s.startsWith('No Kernel'); }""",
        timeout=timeout_ms,
    )


def _open_dialog(page) -> str | None:
    dialog = page.locator(".jp-Dialog")
    return dialog.first.inner_text() if dialog.count() else None


def _assert_no_errors(page, name: str, when: str) -> None:
    bad = [t for t in page.evaluate("() => window.__attn.errors()") if ERROR_PATTERN.search(t)]
    assert not bad, f"{name}: error output {when}:\n" + "\n---\n".join(t[-3000:] for t in bad)
    dialog = _open_dialog(page)
    assert dialog is None, f"{name}: a dialog is open {when}: {dialog}"


def _assert_widgets_rendered(page, name: str) -> None:
    outputs = (
        "[...document.querySelectorAll('.jp-Notebook .jp-OutputArea')]"
        ".map(o => o.innerText).join('\\n')"
    )
    try:
        page.wait_for_function(
            f"() => !{outputs}.includes('Loading widget...')", timeout=UPDATE_TIMEOUT_MS
        )
    except PlaywrightTimeoutError:
        pass  # reported just below
    text = page.evaluate(f"() => {outputs}")
    problems = [p for p in WIDGET_PROBLEMS if p in text]
    assert not problems, f"{name}: widgets did not render: {problems}"


def _wait_run_all(page, name: str, n_code: int) -> None:
    """Wait until every code cell has run; stop early on an error, a dialog or a stalled run."""
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    stalled = 0
    while True:
        state = page.evaluate(
            "() => ({prompts: window.__attn.prompts(), kernel: window.__attn.kernelStatus()})"
        )
        prompts = [p.strip() for p in state["prompts"]]
        done = len(prompts) == n_code and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
        idle = state["kernel"].endswith("| Idle") and not state["kernel"].startswith("No Kernel")
        if done and idle:
            return
        _assert_no_errors(page, name, "while running all cells")
        # Idle kernel, nothing queued, yet cells not run: the run stopped (seen for 2 s, so
        # that a run just being queued is not mistaken for one that stopped).
        stalled = stalled + 1 if idle and not any("*" in p for p in prompts) else 0
        if stalled >= 4 or time.monotonic() > deadline:
            raise AssertionError(
                f"{name}: Run All Cells did not run every cell "
                f"({'stopped' if stalled >= 4 else f'timeout {RUN_TIMEOUT_MS / 1000:.0f} s'}); "
                f"prompts: {prompts}; kernel: {state['kernel']!r}"
            )
        time.sleep(0.5)


def _describe(control) -> str:
    label = control.locator(".widget-label")
    text = label.first.inner_text().strip() if label.count() else ""
    return repr(text) if text else "(no description)"


def _expect_new_figure(page, control, before: str, name: str, what: str) -> None:
    """Wait until the figure driven by ``control`` differs from ``before`` (or an error shows)."""
    try:
        page.wait_for_function(
            """([el, before]) => {
                 const s = window.__attn.figureOf(el);
                 return (s !== '' && s !== before) || window.__attn.errors().length > 0;
               }""",
            arg=[control.element_handle(), before],
            timeout=UPDATE_TIMEOUT_MS,
        )
        timed_out = False
    except PlaywrightTimeoutError:
        timed_out = True
    _assert_no_errors(page, name, f"after moving {what}")
    assert not timed_out, (
        f"{name}: {what} did not change its figure within {UPDATE_TIMEOUT_MS / 1000:.0f} s"
    )


def _move_sliders(page, name: str) -> int:
    sliders = page.locator(".jp-Notebook .widget-slider")
    for i in range(sliders.count()):
        slider = sliders.nth(i)
        slider.scroll_into_view_if_needed()
        what = f"slider {i + 1} {_describe(slider)}"
        handle = slider.locator(".noUi-handle").first  # ipywidgets 8 (7 uses .ui-slider-handle)
        assert handle.count(), f"{name}: {what} has no .noUi-handle"
        before = slider.evaluate("el => window.__attn.figureOf(el)")
        assert before, f"{name}: {what} drives no figure (no img in its view or output area)"
        now, top = (handle.get_attribute(a) for a in ("aria-valuenow", "aria-valuemax"))
        at_top = now is not None and top is not None and float(now) >= float(top)
        vertical = "widget-vslider" in (slider.get_attribute("class") or "")
        key = {(False, False): "ArrowRight", (False, True): "ArrowLeft",
               (True, False): "ArrowUp", (True, True): "ArrowDown"}[vertical, at_top]
        handle.focus()
        handle.press(key)
        try:
            page.wait_for_function(
                "([h, v]) => h.getAttribute('aria-valuenow') !== v",
                arg=[handle.element_handle(), now], timeout=5_000,
            )
        except PlaywrightTimeoutError:
            raise AssertionError(f"{name}: {what} did not move on {key} (value {now})") from None
        _expect_new_figure(page, slider, before, name, f"{what} ({now} → {key})")
    return sliders.count()


def _change_other_controls(page, name: str) -> int:
    """Dropdowns, checkboxes, toggle buttons and radio buttons inside interactive views."""
    changed = 0
    selects = page.locator(".jp-Notebook .widget-interact .widget-dropdown")
    for i in range(selects.count()):
        box = selects.nth(i)
        select = box.locator("select")
        n = select.locator("option").count()
        if n < 2 or select.is_disabled():
            continue
        box.scroll_into_view_if_needed()
        before = box.evaluate("el => window.__attn.figureOf(el)")
        index = select.evaluate("s => s.selectedIndex")
        select.select_option(index=(index + 1) % n)
        _expect_new_figure(page, box, before, name, f"dropdown {_describe(box)}")
        changed += 1
    for kind, box_selector, target_selector in (
        ("checkbox", ".widget-checkbox", "input[type=checkbox]"),
        ("toggle buttons", ".widget-toggle-buttons", "button:not(.mod-active)"),
        ("radio buttons", ".widget-radio-box", "input[type=radio]:not(:checked)"),
    ):
        boxes = page.locator(f".jp-Notebook .widget-interact {box_selector}")
        for i in range(boxes.count()):
            box = boxes.nth(i)
            target = box.locator(target_selector).first
            if not target.count() or target.is_disabled():
                continue
            before = box.evaluate("el => window.__attn.figureOf(el)")
            target.scroll_into_view_if_needed()
            target.click()
            _expect_new_figure(page, box, before, name, f"{kind} {_describe(box)}")
            changed += 1
    return changed


@pytest.fixture(scope="module")
def context(browser):
    """One browser context (one HTTP cache) for every notebook; a new page per notebook."""
    context = browser.new_context(viewport=VIEWPORT)
    # Offline and deterministic: only the JupyterLab server may be reached (the Colab badge
    # image, for one, is not fetched).
    context.route(re.compile(r"^(?!https?://127\.0\.0\.1[:/]).*"), lambda route: route.abort())
    context.add_init_script(INIT_SCRIPT)
    yield context
    context.close()


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_and_every_slider_moves_its_figure(
    notebook, jupyterlab, context, save_screenshot, report
):
    stem = Path(notebook).stem
    start = time.monotonic()
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    try:
        page.goto(jupyterlab.notebook_url(notebook))
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=LOAD_TIMEOUT_MS)
        _wait_kernel_idle(page, LOAD_TIMEOUT_MS)
        load_s = time.monotonic() - start
        # Collapse the left sidebar (click its open tab): more room for the notebook.
        open_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if open_tab.count():
            open_tab.first.click()
        n_code = len(page.evaluate("() => window.__attn.prompts()"))
        assert n_code, f"{notebook}: no code cells on the page"

        # Drop the stored outputs, so that every prompt and output below is from this run.
        _menu(page, "Edit", "Clear Outputs of All Cells")
        page.wait_for_function(
            "() => window.__attn.prompts().every(p => !/\\d/.test(p))", timeout=10_000
        )
        _menu(page, "Run", "Run All Cells")
        _wait_run_all(page, notebook, n_code)
        run_s = time.monotonic() - start - load_s
        _assert_no_errors(page, notebook, "after Run All Cells")
        _assert_widgets_rendered(page, notebook)
        assert page.locator(".jp-Notebook .jp-OutputArea-output img").count(), (
            f"{notebook}: no figure (img) among the outputs"
        )

        n_sliders = _move_sliders(page, notebook)
        n_other = _change_other_controls(page, notebook)
        _wait_kernel_idle(page, UPDATE_TIMEOUT_MS)
        _assert_no_errors(page, notebook, "after moving the controls")
        _assert_widgets_rendered(page, notebook)

        views = page.locator(".jp-Notebook .widget-interact")
        figures = page.locator(".jp-Notebook .jp-OutputArea-output img")
        first = views.first if views.count() else figures.first
        first.evaluate("el => (el.closest('.jp-Cell') || el).scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        save_screenshot(lambda p: page.screenshot(path=p), f"{stem}.png")
        for k in range(views.count()):
            save_screenshot(lambda p: views.nth(k).screenshot(path=p), f"{stem}.view{k + 1}.png")

        assert not page_errors, f"{notebook}: JavaScript errors in the page: {page_errors}"
        summary = (
            f"{notebook}: opened in {load_s:.1f} s, {n_code} code cells ran in {run_s:.1f} s; "
            f"{n_sliders} sliders and {n_other} other controls each changed their figure; "
            f"{time.monotonic() - start:.1f} s in all"
        )
        report(summary)
    except Exception:
        try:  # what the page looked like when it failed
            save_screenshot(lambda p: page.screenshot(path=p), f"{stem}.FAILED.png")
        except Exception:
            pass
        raise
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
