"""Session fixtures for the browser test: one JupyterLab server and one headless Chromium.

* No Chromium at ``/usr/bin/chromium`` (or Playwright missing): on a learner's machine every
  browser test is SKIPPED with the reason (``-rs`` prints it); in CI (``CI`` set, as CI services
  do, to anything but ``0``/``false``) it FAILS with that reason, so CI cannot pass without
  running it. Chromium present but JupyterLab will not start: FAILURE.
* JupyterLab serves a temporary COPY of ``notebooks/`` (the repository's notebooks are never
  opened, so never saved), with user settings copied from ``jupyter_settings/`` next to this
  file (no windowing, no autosave, no news or update checks), its own config, runtime and
  workspaces dirs, on 127.0.0.1, a free port and a random token.
* ``ATTN_NOTEBOOKS_DIR=/some/dir`` (developers only) serves that directory's notebooks instead.
* ``ATTN_CHROMIUM=/path/to/chromium`` uses another Chromium binary.
* Screenshots go to ``artifacts/browser/``; their paths are listed at the end of the run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The course site the site tests open (make site); developers may point them at another build.
SITE = Path(os.environ.get("ATTN_SITE_DIR") or ROOT / "site").resolve()
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "artifacts" / "browser"
# Debian's Chromium: the wrapper script, or the binary behind it. ATTN_CHROMIUM=/path overrides.
CHROMIUM_CANDIDATES = [Path("/usr/bin/chromium"), Path("/usr/lib/chromium/chromium")]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 90

# Listed by pytest_terminal_summary at the end of the run: one line per notebook, and the
# screenshot paths.
SUMMARIES: list[str] = []
SCREENSHOTS: list[Path] = []


def notebooks_dir() -> Path:
    return Path(os.environ.get("ATTN_NOTEBOOKS_DIR") or ROOT / "notebooks").resolve()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """A running JupyterLab: ``url``, ``token``, ``root`` (the served copy), REST helpers."""

    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, log: Path):
        self.root, self.port, self.token, self.proc, self.log = root, port, token, proc, log
        self.url = f"http://127.0.0.1:{port}"

    def api(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(
            self.url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"

    def shutdown_kernels(self) -> None:
        """Delete every session (which shuts its kernel down) and any kernel left over."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self.api("GET", "/api/kernels"):
            self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def in_ci() -> bool:
    """CI services set ``CI`` (GitHub Actions, GitLab, this project's CI: ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _cannot_run(reason: str):
    """Skip with the reason on a learner's machine; in CI, fail with it."""
    if in_ci():
        pytest.fail(f"browser test cannot run in CI (CI={os.environ['CI']}): {reason}",
                    pytrace=False)
    pytest.skip(f"browser test skipped: {reason}")


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    override = os.environ.get("ATTN_CHROMIUM")
    candidates = [Path(override)] if override else CHROMIUM_CANDIDATES
    chromium = next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)
    if chromium is None:
        _cannot_run(
            f"no Chromium at {' or '.join(map(str, candidates))} "
            "(Debian: apt-get install chromium, as root; do not use `playwright install`)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as e:
        _cannot_run(f"Python Playwright is not importable ({e})")
    return chromium


@pytest.fixture(scope="session")
def jupyterlab(chromium_path, tmp_path_factory) -> JupyterLab:
    """Start JupyterLab on a copy of the notebooks; a start-up failure FAILS the test."""
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "notebooks"
    shutil.copytree(notebooks_dir(), root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = base / "user-settings"
    shutil.copytree(HERE / "jupyter_settings", settings)
    config = base / "config"
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTER_DATA_DIR=str(base / "data"),  # no user kernelspecs: the venv's own python3
        IPYTHONDIR=str(base / "ipython"),
        PYTHONUNBUFFERED="1",
    )
    port, token = _free_port(), secrets.token_hex(24)
    cmd = [
        sys.executable, "-m", "jupyter", "lab",
        "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        # window.jupyterapp: the notebook test maps a page view to its widget model and asks
        # the kernel for that model's index.
        "--LabApp.expose_app_in_browser=True",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = base / "jupyterlab.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=logf, stderr=subprocess.STDOUT)
    lab = JupyterLab(root, port, token, proc, log)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"JupyterLab exited with code {proc.returncode} at start-up:\n{lab.log_tail()}",
                    pytrace=False,
                )
            try:
                lab.api("GET", "/api/status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"JupyterLab did not answer on {lab.url} within {SERVER_START_TIMEOUT_S} s:\n"
                    f"{lab.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.3)
        yield lab
    finally:
        try:
            lab.shutdown_kernels()
        except Exception:
            pass
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    """``artifacts/browser/``, emptied of the previous run's screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS


@pytest.fixture
def save_screenshot(screenshot_dir, record_property):
    """``save_screenshot(take, name)`` calls ``take(path)`` and records the path for the summary."""

    def save(take, name: str) -> Path:
        path = screenshot_dir / name
        take(path)
        SCREENSHOTS.append(path)
        record_property("screenshot", str(path))
        return path

    return save


@pytest.fixture
def report(record_property):
    """``report(line)``: a line for the end-of-run summary (and the JUnit XML properties)."""

    def add(line: str) -> None:
        SUMMARIES.append(line)
        record_property("browser_summary", line)

    return add


def pytest_terminal_summary(terminalreporter):
    if SUMMARIES:
        terminalreporter.write_sep("-", "browser test")
        for line in SUMMARIES:
            terminalreporter.write_line(line)
    if not SCREENSHOTS:
        return
    terminalreporter.write_sep("-", f"browser screenshots ({len(SCREENSHOTS)})")
    for path in SCREENSHOTS:
        try:
            shown = path.relative_to(ROOT)
        except ValueError:
            shown = path
        terminalreporter.write_line(str(shown))


# Every section of a site page laid out: book.css lets the browser skip the sections away from
# the screen while the page loads (content-visibility), and book.js lays them out once it has
# loaded (test_site.py, test_site_place.py).
LAID_OUT = """() => document.readyState === "complete" && !document.querySelector(
  "article.bd-article section section:not([data-shown]), article.bd-article .ahv-later")"""


@pytest.fixture(scope="module")
def base_url(chromium_path):
    """SITE on 127.0.0.1, a free port, in a thread of this process (test_site.py has its own,
    which also writes its timings out)."""
    from benchmarks.bench_pages import serve  # 127.0.0.1 only

    if not (SITE / "index.html").is_file():
        _cannot_run(f"no {SITE / 'index.html'}: run make site")
    with serve(SITE) as url:
        yield url
