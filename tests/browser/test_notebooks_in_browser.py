"""Every notebook, run in JupyterLab in headless Chromium, and every slider moved.

For each ``notebooks/NN_*.ipynb`` (a temporary copy, see conftest.py): open it, clear its stored
outputs, Run → Run All Cells, and check that

* every code cell ran (``[n]:`` prompts), no output went to stderr (tracebacks, warnings,
  anything: the stored notebooks have none), no output failed to render ("Javascript Error: ..."),
  no dialog (dead kernel, missing kernel) is open, and at least one figure is shown;
* every widget rendered (no "Loading widget...", "Error displaying widget", "model not found",
  and no plain-text fallback ``interactive(children=...`` that shows when the widget manager
  did not load);
* the page has as many sliders, and as many other controls of ``interactive`` views, as the
  notebook's stored widget state (``metadata.widgets``) says its widget outputs hold — so a page
  with no widgets at all cannot pass;
* every slider (``.widget-slider``), moved one step with the keyboard, changes the figure it
  drives (an ``img`` ``src`` in its ``interactive`` view, or in its output area); every dropdown,
  checkbox, toggle-button and radio-button of an ``interactive`` view does too;
* after the controls moved there is still no error output.

A screenshot per notebook (and one per slider view) goes to ``artifacts/browser/``.
The kernel is shut down after each notebook.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
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
# What an output area shows when a widget did not render. The last is the text/plain fallback
# of an interactive view: JupyterLab shows it when the widget manager did not load at all.
WIDGET_PROBLEMS = (
    "Loading widget...", "Error displaying widget", "model not found", "interactive(children=",
)
# JupyterLab's text when a renderer fails (the output area then marks the output as stderr).
RENDER_ERROR = "Javascript Error"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# Models the page shows as ``.widget-slider`` (not SliderStyleModel and the like).
SLIDER_MODELS = {
    "IntSliderModel", "FloatSliderModel", "FloatLogSliderModel", "SelectionSliderModel",
    "IntRangeSliderModel", "FloatRangeSliderModel", "SelectionRangeSliderModel",
}
# The controls _change_other_controls changes (inside an interactive view, when they can move).
OTHER_CONTROL_MODELS = {"DropdownModel", "CheckboxModel", "ToggleButtonsModel", "RadioButtonsModel"}


@dataclass(frozen=True)
class Controls:
    sliders: int
    others: int


def expected_controls(path: Path) -> Controls:
    """The sliders and other movable controls that the notebook's widget outputs hold, from
    its stored widget state: every model reachable from a displayed widget view (children,
    and widgets displayed inside Output widgets), counted once per place it is shown."""
    nb = json.loads(path.read_text())
    shown = [
        out["data"][WIDGET_VIEW]["model_id"]
        for cell in nb["cells"] if cell["cell_type"] == "code"
        for out in cell.get("outputs", []) if WIDGET_VIEW in out.get("data", {})
    ]
    if not shown:
        return Controls(0, 0)
    store = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE)
    assert store and store.get("state"), (
        f"{path.name}: displays widgets but stores no widget state "
        f"(metadata.widgets[{WIDGET_STATE!r}]): run `make notebooks`"
    )
    state = store["state"]
    counts = {"sliders": 0, "others": 0}

    def visit(model_id: str, in_interact: bool, depth: int = 0) -> None:
        assert depth < 50, f"{path.name}: widget state nests deeper than 50 (a cycle?)"
        model = state.get(model_id)
        assert model is not None, f"{path.name}: widget {model_id} is not in the stored state"
        name, st = model["model_name"], model["state"]
        if name in SLIDER_MODELS:
            counts["sliders"] += 1
        elif name in OTHER_CONTROL_MODELS and in_interact and not st.get("disabled"):
            if name == "CheckboxModel" or len(st.get("_options_labels", [])) >= 2:
                counts["others"] += 1
        in_interact = in_interact or "widget-interact" in st.get("_dom_classes", [])
        for child in st.get("children", []):
            visit(child.removeprefix("IPY_MODEL_"), in_interact, depth + 1)
        for out in st.get("outputs", []) if name == "OutputModel" else []:
            if WIDGET_VIEW in out.get("data", {}):
                visit(out["data"][WIDGET_VIEW]["model_id"], in_interact, depth + 1)

    for model_id in shown:
        visit(model_id, False)
    return Controls(**counts)


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
  // Every stderr output: tracebacks, warnings, any print to stderr, and outputs whose renderer
  // failed (JupyterLab then replaces the output's classes, jp-OutputArea-output included, and
  // marks it stderr).
  errors() {
    return [...document.querySelectorAll(
        '.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]')]
      .map(o => o.innerText);
  },
  outputText() {
    return [...document.querySelectorAll('.jp-Notebook .jp-OutputArea')]
      .map(o => o.innerText).join('\n');
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
    """No stderr output at all (the stored notebooks have none), no failed renderer."""
    bad = page.evaluate("() => window.__attn.errors()")
    assert not bad, f"{name}: stderr output {when}:\n" + "\n---\n".join(t[-3000:] for t in bad)
    text = page.evaluate("() => window.__attn.outputText()")
    if RENDER_ERROR in text:
        at = text.index(RENDER_ERROR)
        raise AssertionError(f"{name}: an output failed to render {when}: {text[at:at + 300]!r}")
    dialog = _open_dialog(page)
    assert dialog is None, f"{name}: a dialog is open {when}: {dialog}"


def _assert_widgets_rendered(page, name: str) -> None:
    try:
        page.wait_for_function(
            "() => !window.__attn.outputText().includes('Loading widget...')",
            timeout=UPDATE_TIMEOUT_MS,
        )
    except PlaywrightTimeoutError:
        pass  # reported just below
    text = page.evaluate("() => window.__attn.outputText()")
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
    """Wait until the figure driven by ``control`` differs from ``before`` (or an error shows),
    then check that it does: the wait also ends on any stderr output."""
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
    after = control.evaluate("el => window.__attn.figureOf(el)")
    assert after, f"{name}: {what} left no figure (no img in its view or output area)"
    changed = after != before  # (not in the assert: pytest would print both data: URIs)
    assert changed, f"{name}: {what} did not change its figure"


def _move_sliders(page, name: str, expected: int) -> int:
    sliders = page.locator(".jp-Notebook .widget-slider")
    found = sliders.count()
    assert found == expected, (
        f"{name}: {found} sliders in the page, but the notebook's stored widget state has "
        f"{expected}" + (" (did the widget manager load?)" if found == 0 else "")
    )
    moved = 0
    for i in range(found):
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
        moved += 1
    return moved


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
    # What the page must show, from the copy JupyterLab serves (parsed before it is opened).
    expected = expected_controls(jupyterlab.root / notebook)
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
        # Collapsed cells (the Solutions) show no [n]: prompt: expand them, so every cell counts.
        _menu(page, "View", "Expand All Code")
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

        n_sliders = _move_sliders(page, notebook, expected.sliders)
        assert n_sliders == expected.sliders, (
            f"{notebook}: moved {n_sliders} of {expected.sliders} sliders"
        )
        n_other = _change_other_controls(page, notebook)
        assert n_other == expected.others, (
            f"{notebook}: changed {n_other} other controls of interactive views, but the "
            f"notebook's stored widget state has {expected.others}"
        )
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
            f"{n_sliders} sliders and {n_other} other controls (as many as its stored widget "
            f"state has) each changed their figure; "
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
