"""Run time and peak memory of every notebook, each executed in a fresh kernel.

Each ``notebooks/[0-9][0-9]_*.ipynb`` runs with nbclient (the notebook file is read, never
written back). Wall time counts from starting the kernel to its shutdown, as ``nbconvert
--execute`` or nbval would; peak memory is the kernel process's high-water mark (VmHWM in
/proc, read just before shutdown; psutil polling where there is no /proc).
Targets: ≤ 20 s each, ≤ 10 s a notebook on average for the series (what CI spends running
them, twice under nbval), ≤ 1.5 GB per kernel.

``--baseline REV`` runs every notebook of the git revision REV (a temporary worktree, its own
``helpers`` on the kernel's path) and of the working tree in turn, REV first, repeat by repeat,
and prints both medians and their ratio side by side: on a machine whose speed drifts by more
than a change saves, that ratio still shows the change.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

from .common import REPO, Col, Config, Table, fmt_time, verdict

__all__ = ["NotebookRun", "notebook_paths", "run_notebook", "peak_rss", "run", "run_against",
           "resolve_revision", "revision_tree", "helpers_from"]

TARGET_EACH_S = 20.0
TARGET_MEAN_S = 10.0  # the series: at most this much a notebook on average
TARGET_PEAK_BYTES = 1.5e9
PATTERN = "[0-9][0-9]_*.ipynb"


@dataclass
class NotebookRun:
    name: str
    wall: float  # kernel start → shutdown = start + cells + shutdown
    start: float  # kernel start (until it answers)
    cells: float  # executing the cells
    peak_rss: float | None  # bytes
    error: str = ""


def notebook_paths(folder: Path | None = None) -> list[Path]:
    return sorted((folder or REPO / "notebooks").glob(PATTERN))


def _vmhwm(pid: int) -> float | None:
    """The process's peak resident set size in bytes, from /proc/<pid>/status (Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


class _RssPoller:
    """Where /proc is missing: poll the process's RSS with psutil every 50 ms, keep the max."""

    def __init__(self, pid: int) -> None:
        self.peak: float | None = None
        self._stop = threading.Event()
        try:
            import psutil  # noqa: PLC0415

            self._proc = psutil.Process(pid)
        except Exception:  # noqa: BLE001 — no psutil, or the process is gone: no number
            self._proc = None
            return
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                rss = float(self._proc.memory_info().rss)
            except Exception:  # noqa: BLE001
                return
            self.peak = rss if self.peak is None else max(self.peak, rss)
            self._stop.wait(0.05)

    def stop(self) -> float | None:
        self._stop.set()
        if self._proc is not None:
            self._thread.join(timeout=1)
        return self.peak


def peak_rss(pid: int) -> float | None:
    return _vmhwm(pid)


def _kernel_pid(client: NotebookClient) -> int | None:
    provisioner = getattr(client.km, "provisioner", None)
    pid = getattr(provisioner, "pid", None)
    if pid is None:
        process = getattr(provisioner, "process", None) or getattr(client.km, "kernel", None)
        pid = getattr(process, "pid", None)
    return pid


def run_notebook(path: Path, *, timeout: int = 300, kernel_name: str = "python3") -> NotebookRun:
    """Execute ``path`` in a fresh kernel (working directory: the notebook's folder)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(path.parent)}})
    error, peak = "", None
    t0 = time.perf_counter()
    # The kernel's own stderr (ipykernel's start-up warnings) would break the printed table.
    with client.setup_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        t_ready = time.perf_counter()
        pid = _kernel_pid(client)
        poller = _RssPoller(pid) if pid is not None and _vmhwm(pid) is None else None
        try:
            for index, cell in enumerate(client.nb.cells):
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
        except CellExecutionError as exc:
            error = f"cell {index}: {exc.ename}: {exc.evalue}"[:80]
        except CellTimeoutError:
            error = f"cell {index}: timed out after {timeout} s"
        t_done = time.perf_counter()
        if pid is not None:
            peak = _vmhwm(pid)
        if poller is not None:
            peak = poller.stop()
    t_end = time.perf_counter()
    return NotebookRun(path.name, t_end - t0, t_ready - t0, t_done - t_ready, peak, error)


def _warm_up(kernel_name: str) -> float:
    """Start one kernel and import what every notebook imports, so that the first notebook
    does not pay for a cold disk cache. Returns its wall time."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "%matplotlib inline\nimport torch, ipywidgets, matplotlib.pyplot\nimport helpers")])
    client = NotebookClient(nb, timeout=120, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(REPO)}})
    t0 = time.perf_counter()
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except CellExecutionError:
        pass
    return time.perf_counter() - t0


def run(cfg: Config, *, folder: Path | None = None, kernel_name: str = "python3",
        echo: bool = True, warm_up: bool = True) -> list[Table]:
    paths = notebook_paths(folder)
    repeats = max(1, cfg.notebook_repeats)
    target_total = TARGET_MEAN_S * len(paths)
    title = "Notebooks, each in a fresh kernel" + (f" (median of {repeats} runs)" if repeats > 1 else "")
    table = Table(
        title,
        [Col("notebook", "notebook", width=48), Col("wall", "wall", "time"),
         Col("start", "kernel start", "time", width=12), Col("cells", "cells", "time"),
         Col("shutdown", "shutdown", "time"), Col("peak", "peak RSS", "bytes"),
         Col("status", f"≤{TARGET_EACH_S:.0f} s, all ≤{target_total:.0f} s", width=10),
         Col("status_mem", "≤1.5 GB", width=10), Col("error", "error", width=5)],
        short="notebooks", echo=echo)
    if not paths:
        table.note(f"no notebook matches {PATTERN} in {folder or REPO / 'notebooks'}")
        return [table]
    if warm_up and not cfg.quick:
        table.note(f"warm-up kernel (imports torch, helpers): {fmt_time(_warm_up(kernel_name))}, "
                   "not counted")
    total, peak = 0.0, 0.0
    errors = 0
    for path in paths:
        runs = [run_notebook(path, kernel_name=kernel_name) for _ in range(repeats)]
        wall = statistics.median(r.wall for r in runs)
        mem = max((r.peak_rss for r in runs if r.peak_rss is not None), default=None)
        error = next((r.error for r in runs if r.error), "")
        errors += bool(error)
        total += wall
        peak = max(peak, mem or 0.0)
        start = statistics.median(r.start for r in runs)
        cells = statistics.median(r.cells for r in runs)
        table.add(notebook=path.name, wall=wall, start=start, cells=cells,
                  shutdown=statistics.median(r.wall - r.start - r.cells for r in runs), peak=mem,
                  status=verdict(wall, TARGET_EACH_S),
                  status_mem=verdict(mem, TARGET_PEAK_BYTES), error=error or None)
    table.add(notebook=f"series ({len(paths)} notebooks)", wall=total, peak=peak or None,
              status=verdict(total, target_total), status_mem=verdict(peak or None, TARGET_PEAK_BYTES))
    table.note(f"series target ≤{TARGET_MEAN_S:.0f} s a notebook on average, ≤{target_total:.0f} s in all "
               "(sum of walls); peak RSS = the kernel "
               "process's high-water mark (VmHWM). The notebooks are not written back.")
    if errors:
        table.note(f"{errors} notebook(s) stopped at an error: their times cover the cells up to it.")
    return [table]


# ------------------------------------------------------------------- against a baseline revision
def resolve_revision(rev: str, repo: Path = REPO) -> str:
    """The commit hash of git revision ``rev`` in ``repo``; ValueError if git does not know it
    as a commit."""
    found = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet",
                            f"{rev}^{{commit}}"], capture_output=True, text=True)
    if found.returncode != 0:
        raise ValueError(f"baseline must be a git revision of {repo}, got {rev!r}")
    return found.stdout.strip()


@contextlib.contextmanager
def revision_tree(rev: str, repo: Path = REPO) -> Iterator[Path]:
    """A temporary detached git worktree of ``rev`` (removed afterwards). ValueError if git does
    not know ``rev`` as a commit."""
    commit = resolve_revision(rev, repo)
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    tree = folder / "tree"
    try:
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(tree),
                        commit], check=True, capture_output=True, text=True)
        yield tree
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def helpers_from(root: Path) -> Iterator[None]:
    """Kernels started inside import ``helpers`` from ``root`` (first on their PYTHONPATH)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), before]))
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def run_against(cfg: Config, baseline: Path, *, current: Path = REPO, kernel_name: str = "python3",
                echo: bool = True, label: str = "baseline") -> list[Table]:
    """Each notebook present in both ``baseline`` and ``current`` (repository roots), run in
    fresh kernels in turn, ``cfg.notebook_repeats`` times; the medians and current ÷ baseline,
    per notebook and for the series. Which side goes first alternates from one notebook and one
    repeat to the next: a kernel started while the previous one is still exiting runs slower
    (unchanged notebooks read 1.12–1.16× when the baseline always went first)."""
    ours = {p.name: p for p in notebook_paths(current / "notebooks")}
    theirs = {p.name: p for p in notebook_paths(baseline / "notebooks")}
    repeats = max(1, cfg.notebook_repeats)
    table = Table(
        f"Notebooks against {label}, in turn" + (f" (medians of {repeats})" if repeats > 1 else ""),
        [Col("notebook", "notebook", width=48), Col("before", label, "time", width=12),
         Col("after", "this tree", "time", width=12), Col("ratio", "ratio", "ratio"),
         Col("status", "≤20 s", width=10), Col("error", "error", width=5)],
        short="notebooks vs baseline", echo=echo)
    both = sorted(set(ours) & set(theirs))
    if both and not cfg.quick:
        table.note(f"warm-up kernel (imports torch, helpers): {fmt_time(_warm_up(kernel_name))}, "
                   "not counted")
    for name in sorted(set(ours) ^ set(theirs)):
        table.note(f"{name}: only in {'this tree' if name in ours else label}, not run")
    totals = [0.0, 0.0]
    for i, name in enumerate(both):
        walls: dict[str, list[float]] = {"before": [], "after": []}
        error = ""
        for r in range(repeats):
            sides = [("before", baseline, theirs[name]), ("after", current, ours[name])]
            for key, root, path in (sides if (i + r) % 2 == 0 else sides[::-1]):
                with helpers_from(root):
                    result = run_notebook(path, kernel_name=kernel_name)
                walls[key].append(result.wall)
                error = error or (f"{key}: {result.error}" if result.error else "")
        before, after = statistics.median(walls["before"]), statistics.median(walls["after"])
        totals[0] += before
        totals[1] += after
        table.add(notebook=name, before=before, after=after, ratio=after / before,
                  status=verdict(after, TARGET_EACH_S), error=error or None)
    if both:
        table.add(notebook=f"series ({len(both)} notebooks)", before=totals[0], after=totals[1],
                  ratio=totals[1] / totals[0],
                  status=verdict(totals[1], TARGET_MEAN_S * len(both)))
    table.note("ratio = this tree ÷ baseline (below 1: faster). The two run in turn, each first "
               "every other time, so a drift in the machine's speed reaches both alike.")
    return [table]
