"""Every notebook run in JupyterLab in headless Chromium; every control of every page view moved.

For each ``notebooks/NN_*.ipynb`` (a temporary copy, see conftest.py): open it, clear its stored
outputs, Run → Run All Cells, and check that

* every code cell ran (``[n]:`` prompts), no output went to stderr (tracebacks, warnings,
  anything: the stored notebooks have none), no output failed to render ("Javascript Error: ..."),
  no dialog (dead kernel, missing kernel) is open, and at least one figure is shown;
* every widget rendered (no "Loading widget...", "Error displaying widget", "model not found",
  no view that "could not be drawn", and no plain-text fallback such as ``PageView(`` that shows
  when the widget manager did not load);
* the page shows as many page views (``.ahv-view``, helpers/widgets/view.js) as the notebook's
  stored widget state (``notebooks/widget_state/NN_name.json``) holds PageView models, at least one; every displayed
  widget is a page view (a notebook that displays another widget fails: this test would not
  move it);
* every control of every page view, moved the way a reader moves it (range: ArrowRight, or
  ArrowLeft at the top; select: the next option; checkbox: a click), redraws the view in the page
  (``dataset.redraws`` grows, the canvas pixels change), and the kernel follows: the PageView's
  ``index`` equals the page's, and its controls' values changed (``text_summary()``);
* after the controls moved there is still no error output.

And one notebook, opened untrusted with no cell run, shows each page view's ``image/png``
fallback and no page view (JupyterLab renders only safe MIME types for untrusted outputs).

Each move's in-page redraw time (``dataset.lastRedrawMs``) goes to the end-of-run summary.
A screenshot per notebook (and one per page view) goes to ``artifacts/browser/``.
The kernel is shut down after each notebook.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import shutil
import statistics
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
UNTRUSTED_NOTEBOOK = "03_masked_softmax.ipynb"

VIEWPORT = {"width": 1280, "height": 900}
LOAD_TIMEOUT_MS = 90_000
RUN_TIMEOUT_MS = 240_000  # one notebook, Run All Cells (≤ 35 s under nbconvert)
UPDATE_TIMEOUT_MS = 20_000  # views drawn after the run; the kernel following a move
REDRAW_TIMEOUT_MS = 5_000  # a move → a redraw (synchronous in view.js: this is generous)
# What an output area shows when a widget did not render. The last three are text/plain
# fallbacks (a page view's repr; an old interactive view's): shown when the widget manager did
# not load at all.
WIDGET_PROBLEMS = (
    "Loading widget...", "Error displaying widget", "model not found",
    "This view could not be drawn", "PageView(", "interactive(children=",
)
# JupyterLab's text when a renderer fails (the output area then marks the output as stderr).
RENDER_ERROR = "Javascript Error"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# Asked of the kernel (an execute request's user expression, nothing printed): every PageView's
# index and text summary by model id, as base64 of JSON (a repr of JSON text would escape it).
KERNEL_QUERY = (
    "__import__('base64').b64encode(__import__('json').dumps({"
    "k: [list(w.index), w.text_summary()] "
    "for k, w in list(__import__('ipywidgets').widgets.widget._instances.items()) "
    "if any(c.__name__ in ('PageView', 'LiveView') for c in type(w).__mro__)}).encode()).decode()"
)


def _is_page_view(model: dict) -> bool:
    """A PageView's model: anywidget's AnyModel with a ``scene`` trait."""
    return model["model_name"] == "AnyModel" and "scene" in model["state"]


@dataclass(frozen=True)
class StoredViews:
    """What the stored notebook says its widget outputs are."""

    models: int  # PageView models in the stored widget state
    cells: dict[int, int]  # cell index → its outputs that are page views
    others: list[str]  # displayed widgets that are not page views: "cell 4: DropdownModel"


def stored_views(path: Path) -> StoredViews:
    nb = json.loads(path.read_text())
    state_file = path.parent / "widget_state" / f"{path.stem}.json"  # tools/widget_state.py
    widgets = json.loads(state_file.read_text()) if state_file.is_file() else {}
    state = widgets.get(WIDGET_STATE, {}).get("state") or {}
    cells: dict[int, int] = {}
    others = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if WIDGET_VIEW not in out.get("data", {}):
                continue
            model = state.get(out["data"][WIDGET_VIEW]["model_id"])
            assert model is not None, (
                f"{path.name}: cell {i} displays a widget that the stored widget state "
                f"({state_file}) lacks: run `make notebooks`"
            )
            if _is_page_view(model):
                cells[i] = cells.get(i, 0) + 1
            else:
                others.append(f"cell {i}: {model['model_name']}")
    models = sum(_is_page_view(m) for m in state.values())
    return StoredViews(models, cells, others)


# Page-side helpers, installed before JupyterLab loads.
INIT_SCRIPT = r"""
window.__attn = {
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
  views() { return [...document.querySelectorAll('.jp-Notebook .ahv-view')]; },
  // A page view as the reader sees it: its redraw counter and time, canvas pixels, and the
  // value index and value string each control shows.
  viewState(root) {
    const controls = [...root.querySelectorAll('[data-control]')];
    return {
      redraws: Number(root.dataset.redraws || 0),
      ms: Number(root.dataset.lastRedrawMs),
      pixels: root.querySelector('canvas.ahv-canvas').toDataURL(),
      index: controls.map(c => c.tagName === 'SELECT' ? c.selectedIndex
                             : c.type === 'checkbox' ? Number(c.checked) : Number(c.value)),
      shown: controls.map(c => ({
        label: (root.querySelector(`label[for="${c.id}"]`) || {}).textContent || '',
        kind: c.tagName === 'SELECT' ? 'select' : c.type,
        value: c.tagName === 'SELECT' ? c.selectedOptions[0].text
             : c.type === 'range' ? c.getAttribute('aria-valuetext') : null,
      })),
    };
  },
  // The widget model id of the output that holds `el` (window.jupyterapp: conftest.py).
  modelIdOf(el) {
    const nb = window.jupyterapp.shell.currentWidget.content;
    const cell = nb.widgets.find(c => c.node.contains(el));
    const area = cell && cell.outputArea;
    const j = area ? area.widgets.findIndex(w => w.node.contains(el)) : -1;
    if (j < 0) return null;
    const view = area.model.get(j).data['application/vnd.jupyter.widget-view+json'];
    return view ? view.model_id : null;
  },
  // The kernel's PageViews: {model_id: [index, text_summary]}, or {error}.
  async kernelViews(query) {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel;
    if (!kernel) return {error: 'no kernel'};
    const reply = await kernel.requestExecute({
      code: '', silent: true, store_history: false, user_expressions: {views: query},
    }).done;
    const r = reply.content.user_expressions.views;
    if (!r || r.status !== 'ok') return {error: JSON.stringify(r || reply.content)};
    const b64 = r.data['text/plain'].slice(1, -1);  // the repr of a str: '...'
    const bytes = Uint8Array.from(atob(b64), ch => ch.charCodeAt(0));
    return {views: JSON.parse(new TextDecoder().decode(bytes))};
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


def _wait_views_drawn(page, expected: int) -> None:
    """Until the page shows ``expected`` page views, each drawn once (a view decodes its scene
    asynchronously); the caller asserts the count."""
    try:
        page.wait_for_function(
            """n => { const v = window.__attn.views();
                      return v.length >= n && v.every(e => Number(e.dataset.redraws) >= 1); }""",
            arg=expected, timeout=UPDATE_TIMEOUT_MS,
        )
    except PlaywrightTimeoutError:
        pass  # the count, or the undrawn view, is reported by the caller


def _move(control) -> str:
    """Move ``control`` one step the way a reader does; returns what was done."""
    kind = control.evaluate("el => el.tagName === 'SELECT' ? 'select' : el.type")
    control.scroll_into_view_if_needed()
    if kind == "range":
        value, top = int(control.input_value()), int(control.get_attribute("max"))
        key = "ArrowLeft" if value >= top else "ArrowRight"
        control.press(key)
        return f"range {key} from {value}"
    if kind == "select":
        n = control.locator("option").count()
        before = control.evaluate("s => s.selectedIndex")
        control.select_option(index=(before + 1) % n)
        return f"select option {before} → {(before + 1) % n}"
    if kind == "checkbox":
        was = control.is_checked()
        control.click()
        return f"checkbox click (was {'on' if was else 'off'})"
    raise AssertionError(f"control of unknown kind {kind!r}")


def _kernel_views(page, name: str) -> dict:
    got = page.evaluate("q => window.__attn.kernelViews(q)", KERNEL_QUERY)
    assert "error" not in got, f"{name}: the kernel did not list its PageViews: {got['error']}"
    return got["views"]


def _wait_kernel_follows(page, name: str, what: str, model_id: str, index: list[int],
                         summary_before: str | None) -> str:
    """Poll the kernel until the PageView ``model_id`` has the page's ``index`` and its summary
    (the kernel-side controls' values) changed; returns that summary."""
    deadline = time.monotonic() + UPDATE_TIMEOUT_MS / 1000
    while True:
        views = _kernel_views(page, name)
        assert model_id in views, f"{name}: the kernel has no PageView {model_id} ({what})"
        kernel_index, summary = views[model_id]
        if kernel_index == index and summary != summary_before:
            return summary
        _assert_no_errors(page, name, f"after {what}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{name}: the kernel did not follow {what} within {UPDATE_TIMEOUT_MS / 1000:.0f} "
                f"s: kernel index {kernel_index}, page index {index}; kernel summary {summary!r}"
            )
        time.sleep(0.1)


def _move_every_control(page, name: str, moves: list[dict]) -> int:
    """Move each control of each page view once; append each move's timings to ``moves``.
    Returns the number of controls moved."""
    views = page.locator(".jp-Notebook .ahv-view")
    moved = 0
    for v in range(views.count()):
        view = views.nth(v)
        title = view.get_attribute("data-view") or "(untitled)"
        model_id = view.evaluate("el => window.__attn.modelIdOf(el)")
        assert model_id, f"{name}: page view {v + 1} {title!r} is not in a widget output"
        summary = _kernel_views(page, name).get(model_id, [None, None])[1]
        controls = view.locator("[data-control]")
        for c in range(controls.count()):
            control = controls.nth(c)
            what = f"view {v + 1} {title!r}, control {control.get_attribute('data-control')!r}"
            before = view.evaluate("el => window.__attn.viewState(el)")
            how = _move(control)
            what = f"{what} ({how})"
            try:
                page.wait_for_function(
                    "([el, n]) => Number(el.dataset.redraws) > n",
                    arg=[view.element_handle(), before["redraws"]], timeout=REDRAW_TIMEOUT_MS,
                )
            except PlaywrightTimeoutError:
                # Where the key went: JupyterLab's command-mode shortcuts (ArrowLeft/Right
                # move between headings) take keys from a focused control that lacks
                # data-lm-suppress-shortcuts, and the focus moves to a cell.
                focus = page.evaluate("() => { const a = document.activeElement; return a ? "
                                      "`${a.tagName.toLowerCase()}.${a.className}` : 'none'; }")
                raise AssertionError(
                    f"{name}: {what} did not redraw the view (control value now "
                    f"{control.input_value()!r}; focus on {focus[:120]})"
                ) from None
            after = view.evaluate("el => window.__attn.viewState(el)")
            assert after["index"][c] != before["index"][c], (
                f"{name}: {what} did not move the control (index {before['index']})"
            )
            changed = after["pixels"] != before["pixels"]  # (not in the assert: data: URIs)
            assert changed, f"{name}: {what} redrew the view, but its canvas pixels are the same"
            t0 = time.monotonic()
            summary = _wait_kernel_follows(page, name, what, model_id, after["index"], summary)
            for shown in after["shown"]:  # the kernel's values are the ones the page shows
                if shown["value"] is not None:
                    assert f"{shown['label']} = {shown['value']}" in summary, (
                        f"{name}: after {what} the kernel's view says {summary!r}, the page "
                        f"shows {shown['label']} = {shown['value']}"
                    )
            moves.append({"redraw_ms": after["ms"], "sync_ms": (time.monotonic() - t0) * 1000})
            moved += 1
    return moved


def _type_in_every_live_view(page, name: str, moves: list[dict]) -> int:
    """In each live view (helpers/widgets/live), type a new valid input (the view's module
    draws one at random) and then a bad one: the first redraws the canvas in the page, with no
    kernel round trip, and the kernel's view then holds it; the second says why in the page
    and leaves the canvas as it was. Returns the number of live views."""
    views = page.locator(".jp-Notebook .ahv-view:has(.ahv-live)")
    for v in range(views.count()):
        view = views.nth(v)
        field = view.locator(".ahv-live :is(input, textarea)")
        kind = field.get_attribute("data-live")
        text = importlib.import_module(f"helpers.widgets.live.{kind}").random_texts(1, seed=11)[0]
        model_id = view.evaluate("el => window.__attn.modelIdOf(el)")
        before = view.evaluate("el => window.__attn.viewState(el)")
        t0 = time.monotonic()
        field.fill(text)
        page.wait_for_function("([el, n]) => Number(el.dataset.redraws) > n",
                               arg=[view.element_handle(), before["redraws"]],
                               timeout=REDRAW_TIMEOUT_MS)
        after = view.evaluate("el => window.__attn.viewState(el)")
        assert after["pixels"] != before["pixels"], f"{name}: typing in the {kind} view left its canvas"
        assert view.locator(".ahv-message").text_content() == "", (
            f"{name}: the {kind} view refused {text!r}: {view.locator('.ahv-message').text_content()}")
        deadline = time.monotonic() + UPDATE_TIMEOUT_MS / 1000
        while repr(text) not in _kernel_views(page, name)[model_id][1]:
            assert time.monotonic() < deadline, f"{name}: the kernel's {kind} view did not get {text!r}"
            time.sleep(0.1)
        moves.append({"redraw_ms": after["ms"], "sync_ms": (time.monotonic() - t0) * 1000})
        field.fill("\u2603")  # a snowman: no live view takes it
        page.wait_for_function("el => el.querySelector('.ahv-message').textContent !== ''",
                               arg=view.element_handle(), timeout=REDRAW_TIMEOUT_MS)
        assert view.evaluate("el => window.__attn.viewState(el)")["pixels"] == after["pixels"], (
            f"{name}: a bad input changed the {kind} view's canvas")
        assert field.get_attribute("aria-invalid") == "true"
    return views.count()


def _percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


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


def _open(page, jupyterlab, notebook: str) -> None:
    """Open ``notebook`` and wait for its cells and an idle kernel; collapse the left sidebar
    (click its open tab) for more room."""
    page.goto(jupyterlab.notebook_url(notebook))
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=LOAD_TIMEOUT_MS)
    _wait_kernel_idle(page, LOAD_TIMEOUT_MS)
    open_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if open_tab.count():
        open_tab.first.click()


@contextlib.contextmanager
def _closed_after(page, jupyterlab, save_screenshot, stem: str):
    """Close ``page`` and shut its kernels down afterwards; on a failure, first keep a
    screenshot of what the page looked like (``<stem>.FAILED.png``)."""
    try:
        yield
    except Exception:
        with contextlib.suppress(Exception):
            save_screenshot(lambda p: page.screenshot(path=p), f"{stem}.FAILED.png")
        raise
    finally:
        page.close()
        jupyterlab.shutdown_kernels()


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_and_every_control_moves_its_view(
    notebook, jupyterlab, context, save_screenshot, report
):
    stem = Path(notebook).stem
    # What the page must show, from the copy JupyterLab serves (parsed before it is opened).
    stored = stored_views(jupyterlab.root / notebook)
    assert stored.models >= 1, (
        f"{notebook}: no PageView in its stored widget state (notebooks/widget_state/): re-execute it "
        f"with page views (`make notebooks`)"
    )
    assert not stored.others, (
        f"{notebook}: displays widgets that are not page views, which this test does not "
        f"move: {stored.others}"
    )
    start = time.monotonic()
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    with _closed_after(page, jupyterlab, save_screenshot, stem):
        _open(page, jupyterlab, notebook)
        load_s = time.monotonic() - start
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
        assert page.locator(".jp-Notebook .jp-OutputArea-output :is(img, canvas.ahv-canvas)"
                            ).count(), f"{notebook}: no figure (img or canvas) among the outputs"

        _wait_views_drawn(page, stored.models)
        found = page.locator(".jp-Notebook .ahv-view").count()
        assert found == stored.models, (
            f"{notebook}: {found} page views (.ahv-view) in the page, but the notebook's stored "
            f"widget state has {stored.models} PageView models"
            + (" (did the widget manager or anywidget load?)" if found == 0 else "")
        )
        undrawn = page.evaluate(
            "() => window.__attn.views().filter(e => !(Number(e.dataset.redraws) >= 1))"
            ".map(e => e.dataset.view || '(untitled)')"
        )
        assert not undrawn, f"{notebook}: page views never drawn: {undrawn}"

        moves: list[dict] = []
        n_controls = _move_every_control(page, notebook, moves)
        assert n_controls >= 1, f"{notebook}: its page views have no controls to move"
        n_live = _type_in_every_live_view(page, notebook, moves)
        _wait_kernel_idle(page, UPDATE_TIMEOUT_MS)
        _assert_no_errors(page, notebook, "after moving the controls")
        _assert_widgets_rendered(page, notebook)

        views = page.locator(".jp-Notebook .ahv-view")
        views.first.evaluate(
            "el => (el.closest('.jp-Cell') || el).scrollIntoView({block: 'start'})"
        )
        page.wait_for_timeout(300)
        save_screenshot(lambda p: page.screenshot(path=p), f"{stem}.png")
        for k in range(views.count()):
            save_screenshot(lambda p: views.nth(k).screenshot(path=p), f"{stem}.view{k + 1}.png")

        assert not page_errors, f"{notebook}: JavaScript errors in the page: {page_errors}"
        redraw = [m["redraw_ms"] for m in moves]
        sync = [m["sync_ms"] for m in moves]
        report(
            f"{notebook}: opened in {load_s:.1f} s, {n_code} code cells ran in {run_s:.1f} s; "
            f"{found} page views, {n_controls} controls each redrew their view and the kernel "
            f"followed; {n_live} live views took typed input; redraw median {statistics.median(redraw):.2f} ms, "
            f"p90 {_percentile(redraw, 90):.2f} ms, max {max(redraw):.2f} ms; kernel sync "
            f"median {statistics.median(sync):.0f} ms; {time.monotonic() - start:.1f} s in all"
        )


def test_untrusted_notebook_shows_the_png_fallback(jupyterlab, context, save_screenshot, report):
    """A notebook opened as it is stored, not trusted and no cell run: JupyterLab renders only
    safe MIME types (the widget view is registered unsafe), so each page view shows its
    ``image/png`` fallback, not the view and not a repr."""
    # A fresh copy under a new name: no earlier page of this session has opened it.
    name = f"untrusted_{UNTRUSTED_NOTEBOOK}"
    source = jupyterlab.root / UNTRUSTED_NOTEBOOK
    if not source.exists():
        pytest.skip(f"{UNTRUSTED_NOTEBOOK} is not among the served notebooks")
    shutil.copyfile(source, jupyterlab.root / name)
    stored = stored_views(source)
    n_views = sum(stored.cells.values())
    assert n_views >= 1, f"{UNTRUSTED_NOTEBOOK}: no page view among its stored outputs"
    nb = json.loads(source.read_text())
    lacking = [i for i in stored.cells if not any(
        "image/png" in out.get("data", {}) and WIDGET_VIEW in out.get("data", {})
        for out in nb["cells"][i]["outputs"])]
    assert not lacking, (
        f"{UNTRUSTED_NOTEBOOK}: page-view outputs with no image/png: cells {lacking}"
    )

    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    with _closed_after(page, jupyterlab, save_screenshot, Path(name).stem):
        _open(page, jupyterlab, name)
        # Every image loaded (or failed: naturalWidth 0, reported below).
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output img')]"
            ".every(i => i.complete)", timeout=UPDATE_TIMEOUT_MS,
        )
        cells = page.locator(".jp-Notebook .jp-Cell")
        assert cells.count() == len(nb["cells"]), (
            f"{name}: {cells.count()} cells in the page, {len(nb['cells'])} in the file"
        )
        pngs = page.locator('.jp-Notebook .jp-OutputArea-output[data-mime-type="image/png"] img')
        assert pngs.count() >= n_views, (
            f"{name}: {pngs.count()} image/png outputs shown, fewer than its {n_views} "
            f"page-view outputs"
        )
        for i, count in stored.cells.items():
            widths = cells.nth(i).locator(
                '.jp-OutputArea-output[data-mime-type="image/png"] img'
            ).evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
            assert len(widths) >= count and all(w > 0 for w in widths), (
                f"{name}: cell {i} holds {count} page-view outputs; its image/png fallbacks "
                f"shown have natural widths {widths}"
            )
        assert page.locator(".ahv-view").count() == 0, (
            f"{name}: a page view rendered in an untrusted notebook"
        )
        text = page.evaluate("() => window.__attn.outputText()")
        shown = [p for p in WIDGET_PROBLEMS if p in text]
        assert not shown, f"{name}: the outputs show {shown}, not the image fallback"
        assert not page_errors, f"{name}: JavaScript errors in the page: {page_errors}"
        cells.nth(next(iter(stored.cells))).scroll_into_view_if_needed()
        save_screenshot(lambda p: page.screenshot(path=p), f"{Path(name).stem}.png")
        report(f"{name} (untrusted, not run): {n_views} page-view outputs, each shown as its "
               f"image/png fallback ({pngs.count()} image/png outputs in all), no page view")
