"""In-page redraw time: every control of every page view of the static site (``make site``),
moved in headless Chromium.

site/ is served from 127.0.0.1 (http.server in a thread); a request to any other host is
aborted. For each notebook page, each ``.ahv-view`` and each of its ``[data-control]`` inputs,
a move sets the value and dispatches the event a reader's move fires ("input" for a range,
"change" otherwise) inside ``page.evaluate``: ``view.js`` redraws synchronously in its handler,
so ``performance.now()`` around the dispatch is the move's time. Chromium records canvas calls
and rasterises them later, at paint: *+pixels* also reads one pixel back, which forces the
raster. Targets (the issue): median ≤ 16 ms (one frame at 60 Hz), p90 ≤ 50 ms. Without
site/index.html the section prints one line and is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import statistics
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from .common import REPO, Col, Config, Stats, Table, verdict

__all__ = ["TARGET_MEDIAN_S", "TARGET_P90_S", "move_plan", "view_row", "run"]

SITE = REPO / "site"
CHROMIUM = Path(os.environ.get("ATTN_CHROMIUM") or "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 900}
LOAD_TIMEOUT_MS = 60_000
MOVES, QUICK_MOVES = 20, 5  # per control at most
TARGET_MEDIAN_S = 0.016
TARGET_P90_S = 0.050

PLACEHOLDERS = 'script[type="application/vnd.jupyter.widget-view+json"]'
# Every view placeholder of the page has its rendered area before it (the site's loader,
# pageviews.js, fetches the saved state and renders each view there), and every page view is
# drawn once or shows its error.
RENDERED = f"""() => [...document.querySelectorAll('{PLACEHOLDERS}')].every(
    (s) => s.previousElementSibling?.matches(".widget-subarea:not(:empty)"))
  && [...document.querySelectorAll(".ahv-view")].every(
    (v) => Number(v.dataset.redraws) >= 1 || v.querySelector(".ahv-error"))"""
# The views on the page and their controls: kind, number of values, current index.
VIEWS = """() => [...document.querySelectorAll(".ahv-view")].map((v) => ({
  view: v.dataset.view || "(untitled)",
  error: v.querySelector(".ahv-error")?.textContent || "",
  controls: [...v.querySelectorAll("[data-control]")].map((el) => el.tagName === "SELECT"
    ? { kind: "select", count: el.options.length, index: el.selectedIndex }
    : el.type === "range" ? { kind: "range", count: Number(el.max) + 1, index: Number(el.value) }
    : { kind: el.type, count: 2, index: Number(el.checked) }),
}))"""
# Move control c of view v to each index in `moves`; time the dispatch (view.js redraws in the
# handler), then the same plus a one-pixel read back (the raster Chromium otherwise defers).
MOVE = """([v, c, moves]) => {
  const root = document.querySelectorAll(".ahv-view")[v];
  const el = root.querySelectorAll("[data-control]")[c];
  const kind = el.tagName === "SELECT" ? "select" : el.type;
  const ctx = root.querySelector("canvas").getContext("2d");
  const out = [];
  for (const k of moves) {
    if (kind === "checkbox") el.checked = k === 1;
    else if (kind === "select") el.selectedIndex = k;
    else el.value = String(k);
    const before = Number(root.dataset.redraws);
    const t0 = performance.now();
    el.dispatchEvent(new Event(kind === "range" ? "input" : "change", { bubbles: true }));
    const t1 = performance.now();
    ctx.getImageData(0, 0, 1, 1);
    const t2 = performance.now();
    out.push({ ms: t1 - t0, pixels_ms: t2 - t0, redraw_ms: Number(root.dataset.lastRedrawMs),
               redrew: Number(root.dataset.redraws) > before });
  }
  return out;
}"""

# A live view's input (helpers/widgets/live): type the last `n` characters of its text again,
# one keystroke at a time (an input event each; the view parses, runs its model and redraws in
# the handler). Only keystrokes that leave a valid input are kept: an invalid one only says why.
TYPE = """([v, n]) => {
  const root = document.querySelectorAll(".ahv-view")[v];
  const el = root.querySelector(".ahv-live :is(input, textarea)");
  if (!el) return [];
  const ctx = root.querySelector("canvas").getContext("2d");
  const full = el.value;
  const out = [];
  for (let k = Math.max(0, full.length - n); k <= full.length; k++) {
    el.value = full.slice(0, k);
    const before = Number(root.dataset.redraws);
    const t0 = performance.now();
    el.dispatchEvent(new Event("input", { bubbles: true }));
    const t1 = performance.now();
    ctx.getImageData(0, 0, 1, 1);
    const t2 = performance.now();
    if (!root.querySelector(".ahv-message")?.textContent) {
      out.push({ ms: t1 - t0, pixels_ms: t2 - t0, redraw_ms: Number(root.dataset.lastRedrawMs),
                 redrew: Number(root.dataset.redraws) > before });
    }
  }
  return out;
}"""


def move_plan(kind: str, count: int, current: int, n: int) -> list[int]:
    """The value indices to move a control through: ``min(count, n)`` of them, each different
    from the one before. A range visits values spread over its whole range, in order; a select
    cycles through its options from the current one; a checkbox toggles."""
    if count < 2 or n < 1:
        return []
    moves = min(count, n)
    if kind == "range":
        spread = [round(j * (count - 1) / max(moves - 1, 1)) for j in range(moves)]
        return spread[1:] + spread[:1] if spread[0] == current else spread
    if kind == "select":
        return [(current + j) % count for j in range(1, moves + 1)]
    return [(current + j) % 2 for j in range(1, moves + 1)]  # checkbox


def view_row(view: str, notebook: str, moves: Sequence[dict],
             kernel: Sequence[float] | None = None) -> dict[str, object]:
    """One table row from a view's moves as the page timed them (``ms``, ``pixels_ms``,
    ``redraw_ms`` in milliseconds, ``redrew``) and the kernel-side +png samples (seconds) of
    the same view, if any. Times in the row are seconds, like every other table's."""
    row: dict[str, object] = {"view": view, "notebook": notebook, "moves": len(moves)}
    if not moves:
        return {**row, "status": "n/a", "status_p90": "n/a"}
    page = Stats(tuple(m["ms"] / 1e3 for m in moves))
    row.update(median=page.median, p90=page.p90, max=max(page.samples),
               redraw=statistics.median(m["redraw_ms"] / 1e3 for m in moves),
               pixels=statistics.median(m["pixels_ms"] / 1e3 for m in moves))
    if kernel:
        row["kernel"] = statistics.median(kernel)
        row["ratio"] = row["kernel"] / page.median if page.median > 0 else None
    stale = sum(not m["redrew"] for m in moves)
    if stale:
        return {**row, "status": f"error: {stale} of {len(moves)} moves did not redraw"}
    return {**row, "status": verdict(page.median, TARGET_MEDIAN_S),
            "status_p90": verdict(page.p90, TARGET_P90_S)}


def notebook_pages(site: Path = SITE) -> list[Path]:
    return sorted(site.glob("[0-9][0-9]_*.html"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a page closed mid-download (a font it no longer needs): not worth a traceback


def local_only(target, base_url: str, foreign: list[str]) -> None:
    """Let ``target`` (a Playwright page or context) load from ``base_url``'s host only: any
    other request is aborted and its URL added to ``foreign`` (a failure for the tests)."""
    host = urlsplit(base_url).netloc

    def route(r) -> None:
        if urlsplit(r.request.url).netloc == host:
            r.continue_()
        else:
            foreign.append(r.request.url)
            r.abort()

    target.route("**/*", route)


@contextlib.contextmanager
def serve(folder: Path, handler: type = _Quiet) -> Iterator[str]:
    """``folder`` on 127.0.0.1, a free port, in a thread of this process; yields its URL.
    ``handler``: a SimpleHTTPRequestHandler (bench_site's adds a static host's gzip)."""
    server = _Server(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


def time_page(browser, base: str, name: str, n: int) -> tuple[list[dict], list[str], list[str]]:
    """Open ``name`` in a fresh context and move every control of every view ``n`` times at
    most. Returns the views (name, error, moves), what went wrong on the page, and the requests
    to other hosts that were aborted."""
    context = browser.new_context(viewport=VIEWPORT)
    problems, remote = [], []
    local_only(context, base, remote)
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    try:
        page.goto(base + name, wait_until="load")
        try:
            page.wait_for_function(RENDERED, timeout=LOAD_TIMEOUT_MS)
        except Exception:  # noqa: BLE001 — a page that never finishes is reported, not fatal
            problems.append(f"widgets not drawn after {LOAD_TIMEOUT_MS / 1e3:.0f} s")
            return [], problems, remote
        views = page.evaluate(VIEWS)
        for v, view in enumerate(views):
            view["moves"] = []
            for c, control in enumerate(view["controls"]):
                plan = move_plan(control["kind"], control["count"], control["index"], n)
                if plan:
                    view["moves"] += page.evaluate(MOVE, [v, c, plan])
            view["keys"] = page.evaluate(TYPE, [v, n])
        return views, problems, remote
    finally:
        context.close()


def run(cfg: Config, *, site: Path = SITE, kernel: dict[str, list[float]] | None = None,
        echo: bool = True) -> list[Table]:
    """One table, a row per view of each notebook page; ``kernel``: +png samples by view title
    from ``bench_sliders`` in the same run (else the kernel columns show —)."""
    if not (site / "index.html").is_file():
        print("pages: skipped, run make site", flush=True)
        return []
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415
    except ImportError:
        print("pages: skipped, Playwright is not installed", flush=True)
        return []
    if not CHROMIUM.is_file():
        print(f"pages: skipped, no Chromium at {CHROMIUM} (ATTN_CHROMIUM=/path to use another)",
              flush=True)
        return []
    n = QUICK_MOVES if cfg.quick else MOVES
    pages = notebook_pages(site)
    table = Table(
        f"In-page redraw (headless Chromium), up to {n} moves per control",
        [Col("view", "view", width=22),
         Col("notebook", "notebook", width=max((len(p.stem) for p in pages), default=8)),
         Col("moves", "moves", "int", width=5), Col("median", "median", "time"),
         Col("p90", "p90", "time"), Col("max", "max", "time"),
         Col("redraw", "redraw", "time"), Col("pixels", "+pixels", "time"),
         Col("kernel", "kernel", "time"), Col("ratio", "kernel/page", "ratio", width=11),
         Col("status", "median ≤16 ms", width=13), Col("status_p90", "p90 ≤50 ms", width=12)],
        short="pages", echo=echo)
    blocked: list[str] = []
    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                    headless=True)
        try:
            for path in pages:
                views, problems, remote = time_page(browser, base, path.name, n)
                blocked += remote
                seen: dict[str, int] = {}
                for view in views:
                    seen[view["view"]] = seen.get(view["view"], 0) + 1
                    label = view["view"] + (f" #{seen[view['view']]}" if seen[view["view"]] > 1
                                            else "")
                    if view["error"]:
                        table.add(view=label, notebook=path.stem,
                                  status=f"error: {view['error']}"[:120])
                        continue
                    table.add(**view_row(label, path.stem, view["moves"],
                                         (kernel or {}).get(view["view"])))
                    if view.get("keys"):  # a live view: the reader's keystrokes
                        table.add(**view_row(f"{label} (typing)", path.stem, view["keys"]))
                if not views and not problems:
                    table.add(view="(no page view)", notebook=path.stem, status="n/a")
                if problems:
                    table.add(view="(page)", notebook=path.stem,
                              status=f"error: {'; '.join(problems)}"[:120])
        finally:
            browser.close()
    table.note("median, p90, max: a move (set the value, dispatch the event; view.js redraws in "
               "its handler) timed with performance.now() in the page, whose resolution there "
               "is 0.1 ms; redraw: view.js's own time for the redraw (data-last-redraw-ms); "
               "+pixels: the move plus a one-pixel read back, which makes Chromium rasterise "
               "what the move drew; kernel: the median kernel-side round trip of the same view "
               "before page views (sliders section, +png), when it ran in this invocation. "
               "(typing): a live view's input typed again one character at a time, the "
               "keystrokes that leave a valid input (parse, the model's forward pass in the "
               "page, the picture).")
    if blocked:
        table.note(f"{len(blocked)} requests to other hosts were aborted, e.g. {blocked[0]}")
    return [table]
