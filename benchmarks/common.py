"""What every benchmark shares: the run configuration, an interleaved timer, tables that print
row by row and render to markdown, target verdicts, and the machine header.

Times are seconds internally and printed with a unit (µs, ms, s); ratios are helper ÷ reference,
so 1.00× means as fast and 2.00× twice as slow.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = [
    "REPO", "Config", "Stats", "Col", "Table", "compare", "verdict", "fmt_time", "fmt_ratio",
    "fmt_bytes", "machine_info", "noise_probe", "header_lines", "synchronizer",
]

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Config:
    """One run: where and in which dtypes the tensors live, and whether to keep it small.

    ``quick`` means tiny sizes and few repeats (for a smoke run or a test); it never changes
    what is compared, only how big and how often.
    """

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    quick: bool = False
    notebook_repeats: int = 1
    max_len: int | None = None  # attention: leave out cases with longer sequences
    baseline: str | None = None  # notebooks: a git revision to run in turn with this tree

    @property
    def sync(self) -> Callable[[], None]:
        return synchronizer(self.device)


def synchronizer(device: torch.device) -> Callable[[], None]:
    """A function that waits for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


# ---------------------------------------------------------------------------------- timing
@dataclass(frozen=True)
class Stats:
    """Seconds per call, one entry per timed sample (each sample averages ``number`` calls)."""

    samples: tuple[float, ...]
    number: int = 1

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        """90th percentile (linear interpolation between order statistics)."""
        s = sorted(self.samples)
        if len(s) == 1:
            return s[0]
        pos = 0.9 * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    @property
    def min(self) -> float:
        return min(self.samples)


def compare(
    fns: Mapping[str, Callable[[], object]], *, repeats: int, warmup: int = 1,
    sync: Callable[[], None] = lambda: None, min_sample_s: float = 0.0, max_number: int = 10_000,
    outputs: dict[str, object] | None = None,
) -> dict[str, Stats]:
    """Time several functions side by side and return their ``Stats`` by name.

    Each function first runs ``warmup`` times. With ``min_sample_s`` > 0 one more call measures
    it and sets how many calls make one sample (so that a 20 µs call is timed over ~10 ms,
    above timer noise). Then the ``repeats`` samples are taken round-robin, the order rotated
    each round — A, B, C, then B, C, A, then C, A, B — so that a noisy neighbour or a clock
    change hits every function alike, and no function always runs right after the same one
    (whose freed memory the allocator hands back, or not): the ratios stay fair. ``sync`` runs before and after each sample (``torch.cuda.synchronize``).
    ``outputs``, when given, receives each function's first result (for correctness checks
    without an extra call, which matters when one call takes seconds).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    numbers: dict[str, int] = {}
    for name, fn in fns.items():
        for i in range(warmup):
            result = fn()
            if i == 0 and outputs is not None:
                outputs[name] = result
            del result
        sync()
        numbers[name] = 1
        if min_sample_s > 0:
            t0 = time.perf_counter()
            result = fn()
            sync()
            one = time.perf_counter() - t0
            if outputs is not None and name not in outputs:
                outputs[name] = result
            del result
            numbers[name] = max(1, min(max_number, math.ceil(min_sample_s / max(one, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    for r in range(repeats):
        for name, fn in order[r % len(order):] + order[: r % len(order)]:  # rotated each round
            n = numbers[name]
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            samples[name].append((time.perf_counter() - t0) / n)
            if outputs is not None and name not in outputs:
                outputs[name] = fn()
    return {name: Stats(tuple(s), numbers[name]) for name, s in samples.items()}


# ------------------------------------------------------------------------------ formatting
def fmt_time(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms" if seconds < 0.1 else f"{seconds * 1e3:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None or math.isnan(ratio):
        return "—"
    return f"{ratio:.2f}×"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    return f"{n / 1e6:.0f} MB"


def verdict(value: float | None, target: float) -> str:
    """'ok' when ``value`` ≤ ``target`` (lower is better), else 'MISS +N%' (how far over)."""
    if value is None or math.isnan(value):
        return "n/a"
    if value <= target:
        return "ok"
    over = (value / target - 1) * 100
    return f"MISS +{over:.0f}%" if over >= 1 else f"MISS +{over:.1f}%"


_FORMATS: dict[str, Callable[[object], str]] = {
    "text": lambda v: "—" if v is None else str(v),
    "time": fmt_time,  # type: ignore[dict-item]
    "ratio": fmt_ratio,  # type: ignore[dict-item]
    "bytes": fmt_bytes,  # type: ignore[dict-item]
    "int": lambda v: "—" if v is None else f"{int(v)}",  # type: ignore[arg-type]
}


@dataclass(frozen=True)
class Col:
    """A column: ``key`` in each row dict, ``title`` printed, ``kind`` picks the format."""

    key: str
    title: str
    kind: str = "text"
    width: int = 9

    def __post_init__(self) -> None:
        if self.kind not in _FORMATS:
            raise ValueError(f"kind must be one of {sorted(_FORMATS)}, got {self.kind!r}")


class Table:
    """A table that prints its header at once and each row as it is added.

    ``rows`` keeps the raw values (seconds, ratios, bytes) for tests and for markdown;
    ``notes`` are printed under the table and kept in the markdown; ``short`` names the table
    in the list of missed targets.
    """

    def __init__(self, title: str, cols: Iterable[Col], *, echo: bool = True,
                 short: str | None = None) -> None:
        self.title = title
        self.short = short or title  # names the table in the list of misses
        self.cols = list(cols)
        self.rows: list[dict[str, object]] = []
        self.notes: list[str] = []
        self.echo = echo
        self._print("")
        self._print(f"## {title}")
        self._print(self._line([c.title for c in self.cols]))
        self._print(self._line(["-" * self._width(c) for c in self.cols]))

    def _width(self, col: Col) -> int:
        return max(col.width, len(col.title))

    def _line(self, cells: list[str]) -> str:
        parts = [cell.ljust(self._width(c)) if c.kind == "text" else cell.rjust(self._width(c))
                 for cell, c in zip(cells, self.cols)]
        return "  ".join(parts).rstrip()

    def _print(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def formatted(self, row: Mapping[str, object]) -> list[str]:
        return [_FORMATS[c.kind](row.get(c.key)) for c in self.cols]

    def add(self, **row: object) -> dict[str, object]:
        unknown = set(row) - {c.key for c in self.cols}
        if unknown:
            raise KeyError(f"no column for {sorted(unknown)} in table {self.title!r}")
        self.rows.append(row)
        self._print(self._line(self.formatted(row)))
        return row

    def note(self, text: str) -> None:
        self.notes.append(text)
        self._print(f"  {text}")

    def misses(self) -> list[str]:
        """One line per MISS (or error) in a status column (a key that starts with 'status')."""
        out = []
        for row in self.rows:
            for col in self.cols:
                status = str(row.get(col.key, ""))
                if col.key.startswith("status") and status.startswith(("MISS", "error")):
                    label = " · ".join(f"{row[c.key]}" for c in self.cols[:2]
                                       if c.kind == "text" and row.get(c.key) is not None)
                    out.append(f"{self.short}: {label}: {col.title}: {status}")
        return out

    def markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(c.title for c in self.cols) + " |")
        lines.append("|" + "|".join("---" if c.kind == "text" else "---:" for c in self.cols) + "|")
        for row in self.rows:
            cells = [cell.replace("|", "\\|") for cell in self.formatted(row)]
            lines.append("| " + " | ".join(cells) + " |")
        if self.notes:
            lines.append("")
            lines.extend(f"- {n}" for n in self.notes)
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- the machine
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev + ("+local changes" if dirty else "")) if rev else "unknown"


def machine_info(device: torch.device) -> dict[str, str]:
    """What the numbers depend on: processor or GPU, cores, threads, versions, load."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    info = {
        "date": _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": f"{_cpu_model()}, {usable} usable cores ({os.cpu_count()} logical)",
        "torch": f"{torch.__version__}, {torch.get_num_threads()} threads "
                 f"({torch.get_num_interop_threads()} inter-op)",
        "python": platform.python_version(),
        "device": str(device),
        "revision": _git_revision(),
    }
    try:
        import psutil  # noqa: PLC0415 — optional; ipykernel depends on it

        info["memory"] = fmt_bytes(psutil.virtual_memory().total) + " RAM"
    except ImportError:
        pass
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = (f"{props.name}, {props.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}, "
                       f"cuDNN {torch.backends.cudnn.version()}")
    if hasattr(os, "getloadavg"):
        one, five, _ = os.getloadavg()
        busy = " — the machine is busy: absolute times are inflated, ratios less so" \
            if one > 1.5 * max(usable, 1) else ""
        info["load"] = f"{one:.1f} (1 min), {five:.1f} (5 min){busy}"
    info["timer noise"] = noise_probe()
    try:
        import ipywidgets  # noqa: PLC0415
        import matplotlib  # noqa: PLC0415

        info["libraries"] = f"matplotlib {matplotlib.__version__}, ipywidgets {ipywidgets.__version__}"
    except ImportError:
        pass
    return info


def noise_probe(calls: int = 201) -> str:
    """How steady the clock is right now: one small, single-threaded op timed ``calls`` times.
    On a quiet machine its median is close to its minimum; on a shared one other processes'
    time slices show up as a median (and p90) far above the minimum."""
    a = torch.randn(48, 48)
    for _ in range(20):
        a @ a
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        a @ a
        samples.append(time.perf_counter() - t0)
    s = Stats(tuple(samples))
    return (f"a {fmt_time(s.min)} op: median {s.median / s.min:.1f}× its minimum, "
            f"p90 {s.p90 / s.min:.1f}×")


def header_lines(info: Mapping[str, str]) -> list[str]:
    width = max(len(k) for k in info)
    return [f"{k.ljust(width)} : {v}" for k, v in info.items()]

