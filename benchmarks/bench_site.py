"""How fast the static site (``make site``) loads, served the way a static host serves it.

site/ is served from 127.0.0.1 by :func:`serve_static`: gzip for text (HTML, CSS, JavaScript,
JSON, SVG), ``Cache-Control: max-age=600`` (GitHub Pages' headers), HTTP/1.1 keep-alive.
For each page measured (the landing page, 02, 08, 11, 12):

* Lighthouse (npm, pinned in package-lock.json; ``node_modules/.bin/lighthouse``), one run per
  form factor: mobile (its default: a Moto G-class phone, simulated slow 4G and 4× CPU slowdown)
  and desktop (``--preset=desktop``). Performance score, LCP and TBT, and the accessibility,
  best-practices and SEO scores of the same run.
* A cold load in headless Chromium (a fresh context, so an empty cache; desktop 1440×900):
  bytes transferred (compressed, headers included: the Resource Timing ``transferSize`` of the
  page and of everything it loads until the network is idle), the number of requests, and the
  first-figure time: from navigation start to the first ``.ahv-view`` whose ``data-redraws``
  reaches 1, timed in the page. Median of 3 loads (1 with --quick).

Targets (issue 43): performance ≥ 90 mobile and desktop, first figure ≤ 1 s, a notebook page
≤ 1.5 MB cold. Measured and reported here, never asserted (tests/browser/test_site_quality.py
asserts the sizes and the accessibility, best-practices and SEO scores). Without site/index.html,
Node or node_modules the section prints one line and is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import io
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from .common import REPO, Col, Config, Table
from .bench_pages import CHROMIUM, CHROMIUM_ARGS, local_only, serve

__all__ = ["serve_static", "page_file", "lighthouse", "scores", "failing_audits", "cold_load",
           "tooling_problem", "run"]

SITE = REPO / "site"
LIGHTHOUSE = REPO / "node_modules" / ".bin" / "lighthouse"
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
REPORTS = REPO / "artifacts" / "bench"  # the Lighthouse reports of the last run (JSON)
PAGES = ("landing", "02", "08", "11", "12")
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
COLD_LOADS, QUICK_COLD_LOADS = 3, 1
LIGHTHOUSE_TIMEOUT_S = 240
LOAD_TIMEOUT_MS = 60_000
TARGET_PERFORMANCE = 90
TARGET_FIRST_FIGURE_S = 1.0
TARGET_PAGE_BYTES = 1_500_000
# Chromium for Lighthouse: headless, and nothing of its own fetched from the network (no
# component updates, no sync, no background requests); the page itself is on 127.0.0.1.
LIGHTHOUSE_CHROME_FLAGS = " ".join(["--headless=new", *CHROMIUM_ARGS])

# ------------------------------------------------------------------------------ the server
# What a static host compresses: text. Images and woff2 fonts are compressed already.
_COMPRESSIBLE = ("text/", "application/javascript", "application/json", "application/xml",
                 "image/svg+xml", "application/wasm", "font/ttf", "font/otf")


@functools.lru_cache(maxsize=1024)
def _gzipped(path: str, mtime_ns: int) -> bytes:
    # zlib's default level (6), as nginx's and most hosts' gzip; cached per file version.
    return gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)


class _StaticHost(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler plus what a static host adds: gzip and a cache lifetime."""

    protocol_version = "HTTP/1.1"  # keep-alive, as every host (http.server's default is 1.0)

    def log_message(self, *args) -> None:
        pass

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "max-age=600")
        super().end_headers()

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path) and self.path.split("?")[0].endswith("/"):
            path = os.path.join(path, "index.html")
        ctype = self.guess_type(path)
        accepts = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (os.path.isfile(path) and accepts and ctype.startswith(_COMPRESSIBLE)):
            return super().send_head()  # a directory listing, a 404, an image, a woff2
        body = _gzipped(path, os.stat(path).st_mtime_ns)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def serve_static(folder: Path) -> contextlib.AbstractContextManager[str]:
    """``folder`` on 127.0.0.1, a free port, gzip and cache headers; yields its URL."""
    return serve(folder, _StaticHost)


def page_file(site: Path, key: str) -> str | None:
    """``"landing"`` → ``index.html``; ``"02"`` → ``02_….html``; None if the site lacks it."""
    if key == "landing":
        return "index.html" if (site / "index.html").is_file() else None
    found = sorted(site.glob(f"{key}_*.html"))
    return found[0].name if found else None


def tooling_problem(chromium: Path = CHROMIUM) -> str | None:
    """Why Lighthouse and axe cannot run here, or None."""
    if shutil.which("node") is None:
        return "no Node.js (node) on PATH"
    if not LIGHTHOUSE.is_file() or not AXE.is_file():
        return f"no {LIGHTHOUSE.relative_to(REPO)} or {AXE.relative_to(REPO)}: run npm ci"
    if not chromium.is_file():
        return f"no Chromium at {chromium} (ATTN_CHROMIUM=/path to use another)"
    return None


# ------------------------------------------------------------------------------ Lighthouse
def lighthouse(url: str, form_factor: str, categories: tuple[str, ...],
               chromium: Path = CHROMIUM, save: Path | None = None,
               pause_after_load_ms: int | None = None) -> dict:
    """One Lighthouse run of ``url`` (``form_factor`` "mobile" or "desktop"); its JSON report.
    ``save``: also keep the report there. ``pause_after_load_ms``: how long Lighthouse waits
    after the load event before it looks the page over (its default: 1000 ms)."""
    with tempfile.TemporaryDirectory(prefix="lighthouse-") as tmp:
        out = Path(tmp) / "report.json"
        cmd = [str(LIGHTHOUSE), url, f"--chrome-flags={LIGHTHOUSE_CHROME_FLAGS}",
               f"--only-categories={','.join(categories)}", "--output=json",
               f"--output-path={out}", "--quiet"]
        if form_factor == "desktop":
            cmd.append("--preset=desktop")
        if pause_after_load_ms is not None:
            cmd.append(f"--pause-after-load-ms={pause_after_load_ms}")
        # CHROME_PATH: chrome-launcher's way to name the browser; TMPDIR: its profile goes there.
        env = {**os.environ, "CHROME_PATH": str(chromium), "TMPDIR": tmp}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=LIGHTHOUSE_TIMEOUT_S)
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"lighthouse exited {done.returncode}: {done.stderr[-2000:]}")
        report = json.loads(out.read_text())
        if save is not None:
            save.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out, save)
    if report.get("runtimeError"):
        raise RuntimeError(f"lighthouse: {report['runtimeError']}")
    return report


def scores(report: dict) -> dict[str, float | None]:
    """Category scores, 0-100 (None where Lighthouse could not score one)."""
    return {k: (None if c["score"] is None else round(c["score"] * 100))
            for k, c in report["categories"].items()}


def failing_audits(report: dict, category: str, max_nodes: int = 5) -> list[str]:
    """The audits that cost ``category`` points (weight > 0, score < 1), each with up to
    ``max_nodes`` of the elements it names."""
    out = []
    for ref in report["categories"][category]["auditRefs"]:
        audit = report["audits"][ref["id"]]
        if ref["weight"] <= 0 or audit["score"] is None or audit["score"] >= 1:
            continue
        items = (audit.get("details") or {}).get("items") or []
        nodes = [i["node"].get("selector", "?") for i in items if isinstance(i.get("node"), dict)]
        where = f" at {', '.join(nodes[:max_nodes])}" + (" …" if len(nodes) > max_nodes else "") \
            if nodes else ""
        out.append(f"{ref['id']} (score {audit['score']:.2f}, weight {ref['weight']}): "
                   f"{audit['title']}{where}")
    return out


# ------------------------------------------------------------------------------ cold load
# Before any page script: a bigger Resource Timing buffer (the default keeps 250 entries), and
# the time the first page view is drawn (view.js counts its redraws in data-redraws).
COLD_INIT = """(() => {
  performance.setResourceTimingBufferSize(2000);
  const drawn = () => [...document.querySelectorAll(".ahv-view")]
    .some((v) => Number(v.dataset.redraws) >= 1);
  new MutationObserver((records, observer) => {
    if (window.__firstFigureMs === undefined && drawn()) {
      window.__firstFigureMs = performance.now();
      observer.disconnect();
    }
  }).observe(document, { subtree: true, childList: true, attributes: true,
                         attributeFilter: ["data-redraws"] });
})();"""
# Every view on the page drawn (or showing its error), and as many views as placeholders
# rendered: a page with widget placeholders and no view yet is not done.
SETTLED = """() => {
  const views = [...document.querySelectorAll(".ahv-view")];
  const placeholders = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]').length;
  // book.js marks the page whole once its skipped sections are laid out (every page the
  // build writes loads it; a page without it has nothing skipped).
  const whole = !document.querySelector('script[src*="book.js"]')
    || document.documentElement.dataset.laidOut !== undefined;
  return whole && views.length >= Math.min(placeholders, 1) && views.every(
    (v) => Number(v.dataset.redraws) >= 1 || v.querySelector(".ahv-error"));
}"""
TRANSFERS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const res = performance.getEntriesByType("resource");
  return { first_figure_ms: window.__firstFigureMs ?? null,
           entries: [{ url: nav.name, type: "document", bytes: nav.transferSize }].concat(
             res.map((r) => ({ url: r.name, type: r.initiatorType, bytes: r.transferSize }))) };
}"""


def settle(page) -> None:
    """Wait until the page is done: views drawn, the network idle, fonts loaded (the maths is
    typeset at build time: nothing to wait for there)."""
    page.wait_for_function(SETTLED, timeout=LOAD_TIMEOUT_MS)
    page.wait_for_load_state("networkidle", timeout=LOAD_TIMEOUT_MS)
    page.evaluate("() => document.fonts.ready.then(() => true)")
    page.wait_for_load_state("networkidle", timeout=LOAD_TIMEOUT_MS)


def cold_load(browser, base: str, name: str, viewport: dict = DESKTOP) -> dict:
    """Open ``name`` with an empty cache; return bytes (compressed, as transferred), requests,
    first-figure time (ms, None without a view), the five biggest transfers, and what went
    wrong on the page (console errors, page errors, HTTP errors, requests to other hosts)."""
    context = browser.new_context(viewport=viewport)
    problems: list[str] = []
    remote: list[str] = []
    local_only(context, base, remote)
    context.add_init_script(COLD_INIT)
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    try:
        page.goto(base + name, wait_until="load", timeout=LOAD_TIMEOUT_MS)
        settle(page)
        found = page.evaluate(TRANSFERS)
    finally:
        context.close()
    entries = found["entries"]
    biggest = sorted(entries, key=lambda e: -e["bytes"])[:5]
    return {"bytes": sum(e["bytes"] for e in entries), "requests": len(entries),
            "first_figure_ms": found["first_figure_ms"],
            "biggest": [(e["url"].removeprefix(base), e["bytes"]) for e in biggest],
            "problems": problems + [f"request to another host: {u}" for u in remote]}


# ------------------------------------------------------------------------------ the section
def _mb(n: float | None) -> str:
    return "—" if n is None else f"{n / 1e6:.2f} MB"


def _at_least(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "ok" if value >= target else f"MISS -{target - value:.0f}"


def _at_most(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "ok" if value <= target else f"MISS +{(value / target - 1) * 100:.0f}%"


def run(cfg: Config, *, site: Path = SITE, echo: bool = True) -> list[Table]:
    """Two tables: Lighthouse per page and form factor; the cold load per page."""
    if not (site / "index.html").is_file():
        print("site speed: skipped, run make site", flush=True)
        return []
    problem = tooling_problem()
    if problem:
        print(f"site speed: skipped, {problem}", flush=True)
        return []
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415
    except ImportError:
        print("site speed: skipped, Playwright is not installed", flush=True)
        return []
    pages = [(key, page_file(site, key)) for key in PAGES]
    pages = [(key, name) for key, name in pages if name]
    version = json.loads((REPO / "node_modules" / "lighthouse" / "package.json").read_text())
    lh = Table(
        f"Lighthouse {version['version']} (one run per page and form factor), served compressed",
        [Col("page", "page", width=7), Col("form", "form", width=7),
         Col("performance", "perf", "int", width=4), Col("lcp", "LCP", "time"),
         Col("tbt", "TBT", "time"), Col("fcp", "FCP", "time"),
         Col("accessibility", "a11y", "int", width=4),
         Col("best_practices", "BP", "int", width=4), Col("seo", "SEO", "int", width=4),
         Col("status", "perf ≥90", width=9)],
        short="site speed", echo=echo)
    bench_index: list[float] = []  # Lighthouse's measure of the machine's speed, per run
    with serve_static(site) as base:
        for key, name in pages:
            for form in ("mobile", "desktop"):
                try:
                    report = lighthouse(base + name, form,
                                        ("performance", "accessibility", "best-practices", "seo"),
                                        save=REPORTS / f"lighthouse-{key}-{form}.json")
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    lh.add(page=key, form=form, status=f"error: {e}"[:120])
                    continue
                s, audits = scores(report), report["audits"]
                bench_index.append(report["environment"].get("benchmarkIndex"))
                ms = lambda audit: audits[audit].get("numericValue")  # noqa: E731
                lh.add(page=key, form=form, performance=s.get("performance"),
                       lcp=ms("largest-contentful-paint") / 1e3,
                       tbt=ms("total-blocking-time") / 1e3,
                       fcp=ms("first-contentful-paint") / 1e3,
                       accessibility=s.get("accessibility"),
                       best_practices=s.get("best-practices"), seo=s.get("seo"),
                       status=_at_least(s.get("performance"), TARGET_PERFORMANCE))
        loads = COLD_LOADS if not cfg.quick else QUICK_COLD_LOADS
        cold = Table(
            f"Cold load, desktop {DESKTOP['width']}×{DESKTOP['height']}, empty cache, "
            f"median of {loads}",
            [Col("page", "page", width=7), Col("kb", "kB cold", "int", width=7),
             Col("requests", "requests", "int", width=8), Col("first_figure", "first figure", "time",
                                                              width=12),
             Col("biggest", "biggest transfer", width=40),
             Col("status_bytes", "≤1.5 MB", width=9), Col("status_figure", "figure ≤1 s", width=11)],
            short="site speed", echo=echo)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                        headless=True)
            try:
                for key, name in pages:
                    runs = []
                    for _ in range(loads):
                        try:
                            runs.append(cold_load(browser, base, name))
                        except Exception as e:  # noqa: BLE001 — reported in the table
                            cold.add(page=key, status_bytes=f"error: {e}"[:120])
                            break
                    if not runs:
                        continue
                    figures = [r["first_figure_ms"] for r in runs
                               if r["first_figure_ms"] is not None]
                    figure = statistics.median(figures) / 1e3 if figures else None
                    top = runs[0]["biggest"][0]
                    cold.add(page=key, kb=statistics.median(r["bytes"] for r in runs) / 1e3,
                             requests=runs[0]["requests"], first_figure=figure,
                             biggest=f"{top[0].split('?')[0][-28:]} {_mb(top[1])}",
                             status_bytes=_at_most(statistics.median(r["bytes"] for r in runs),
                                                   TARGET_PAGE_BYTES),
                             status_figure=_at_most(figure, TARGET_FIRST_FIGURE_S)
                             if key != "landing" or figure is not None else "n/a")
                    if runs[0]["problems"]:
                        cold.note(f"{key}: {'; '.join(runs[0]['problems'])}"[:300])
            finally:
                browser.close()
    lh.note(f"Reports: {REPORTS.relative_to(REPO)}/lighthouse-PAGE-FORM.json. "
            "mobile: Lighthouse's default (simulated slow 4G, 4× CPU slowdown, Moto G Power "
            "screen); desktop: --preset=desktop. LCP, TBT, FCP: Lighthouse's (simulated) values. "
            f"Chromium: {CHROMIUM}, flags {LIGHTHOUSE_CHROME_FLAGS}. Lighthouse's "
            f"benchmarkIndex (its probe of this CPU's speed at the time, higher is faster): "
            f"{', '.join(f'{b:.0f}' for b in bench_index if b)}.")
    cold.note("bytes: Resource Timing transferSize summed over the page and everything it loads "
              "until the network is idle (compressed bodies plus headers), served with gzip; "
              "first figure: navigation start to the first .ahv-view with data-redraws ≥ 1, "
              "timed in the page (no throttling).")
    return [lh, cold]
