"""Kernel-side slider latency: every control of every view that ``helpers.widgets.*.demo_views()``
builds (each a ``PageView``).

Before page views, every move cost this round trip: the kernel recomputed the Figure and
rendered the PNG it sent to the browser. A page view now redraws in the page from recordings
(``bench_pages`` times that); the kernel only follows (*compute*). The columns keep their
meaning: *compute* = setting a control's ``.value`` (the view recomputes its Figure at once);
*+png* = compute + the PNG the old view sent (``helpers.widgets.figure_png``, the first render
after the change, as it was); *+draw* = compute + an Agg ``fig.canvas.draw()`` after it.
Target: median compute + draw ≤ 100 ms, and compute + PNG is judged against the same 100 ms.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: no window, and the PNG renderer

import ipywidgets as widgets  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers.widgets import figure_png  # noqa: E402
from helpers.widgets.page import PageView  # noqa: E402

from .common import Col, Config, Stats, Table, verdict  # noqa: E402

__all__ = ["TARGET_S", "discover", "find_views", "controls", "change_plan", "time_control", "run"]

TARGET_S = 0.100
BUILD_TARGET_S = 2.0
# Controls whose value a reader changes. Selection widgets are driven through ``.index``.
SLIDERS = (widgets.IntSlider, widgets.FloatSlider, widgets.FloatLogSlider, widgets.SelectionSlider)
CHOICES = (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons)
TOGGLES = (widgets.Checkbox, widgets.ToggleButton)
SUPPORT = frozenset({"page"})  # modules of helpers.widgets that hold no views: not listed


@dataclass
class Found:
    """One module of the widgets package and what came of importing it."""

    name: str
    module: object | None = None
    problem: str = ""  # empty when the module has a demo_views()
    views: dict[str, widgets.Widget] = field(default_factory=dict)
    build_s: float | None = None


def discover(package: str = "helpers.widgets") -> list[Found]:
    """Import every public module of ``package`` (pkgutil); note those that fail or lack
    ``demo_views``. Modules that do not exist yet are simply not found."""
    pkg = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or package == "helpers.widgets" and info.name in SUPPORT:
            continue
        item = Found(info.name)
        try:
            item.module = importlib.import_module(f"{package}.{info.name}")
        except Exception as exc:  # noqa: BLE001 — a module being written may not import yet
            item.problem = f"import failed: {type(exc).__name__}: {exc}"
        else:
            if not callable(getattr(item.module, "demo_views", None)):
                item.problem = "no demo_views()"
        found.append(item)
    return found


def find_views(widget: widgets.Widget) -> list[PageView]:
    """The page views in ``widget`` (itself, or inside boxes), in order."""
    if isinstance(widget, PageView):
        return [widget]
    out = []
    for child in getattr(widget, "children", ()):
        out += find_views(child)
    return out


def controls(view: PageView) -> list[widgets.Widget]:
    """The controls of ``view`` that a reader moves (sliders, choices, check boxes)."""
    return [w for w in view.children if isinstance(w, SLIDERS + CHOICES + TOGGLES)]


def control_label(control: widgets.Widget, name: str) -> str:
    """The control's description, else ``name`` (its keyword in the view), and its type."""
    label = (getattr(control, "description", "") or "").strip() or name
    return f"{label} ({type(control).__name__})"


def change_plan(control: widgets.Widget, n: int) -> list[tuple[str, object]]:
    """``n`` changes for ``control`` as (attribute, value), each different from the one before.

    Sliders visit spread-out positions of their range (snapped to the step); choices cycle
    through their options by index; check boxes toggle.
    """
    fractions = [0.25, 0.75, 0.5, 1.0, 0.0, 0.6, 0.1, 0.9, 0.4, 0.8, 0.2, 0.65]
    plan: list[tuple[str, object]] = []
    if isinstance(control, widgets.SelectionSlider) or isinstance(control, CHOICES):
        count = len(control.options)
        if count < 2:
            return []
        index = control.index if control.index is not None else 0
        for i in range(n):
            nxt = round(fractions[i % len(fractions)] * (count - 1))
            if nxt == index:
                nxt = (index + 1) % count
            plan.append(("index", nxt))
            index = nxt
        return plan
    if isinstance(control, TOGGLES):
        value = bool(control.value)
        for _ in range(n):
            value = not value
            plan.append(("value", value))
        return plan
    lo, hi = control.min, control.max
    if hi <= lo:
        return []
    value = control.value
    for i in range(n):
        x = lo + fractions[i % len(fractions)] * (hi - lo)  # exponent for FloatLogSlider
        step = control.step or 0
        if step:
            x = lo + round((x - lo) / step) * step
        x = min(max(x, lo), hi)
        nxt = (int(round(x)) if isinstance(control, widgets.IntSlider) else
               control.base ** x if isinstance(control, widgets.FloatLogSlider) else float(x))
        if nxt == value:  # collides with the current value: take a neighbouring step instead
            delta = step or (hi - lo) / 10
            x = x + delta if x + delta <= hi else x - delta
            nxt = (int(round(x)) if isinstance(control, widgets.IntSlider) else
                   control.base ** x if isinstance(control, widgets.FloatLogSlider) else float(x))
        plan.append(("value", nxt))
        value = nxt
    return plan


def _agg(fig: Figure) -> FigureCanvasAgg:
    """An Agg canvas for ``fig``: a Figure made without pyplot has a FigureCanvasBase, whose
    ``draw()`` does nothing at all, so timing it would measure nothing."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    return fig.canvas


@dataclass
class ControlTiming:
    compute: Stats | None  # None when the control could not be timed: see ``problem``
    draw: Stats | None  # compute + draw
    png: Stats | None  # compute + PNG: the old view's whole round trip
    problem: str = ""


def time_control(view: PageView, control: widgets.Widget, *, changes: int,
                 warmup: int) -> ControlTiming | None:
    """Move ``control`` ``warmup`` + ``changes`` times; time the last ``changes``.

    The control is put back to its first value afterwards (not timed). Returns None when the
    control cannot move (a one-option choice, an empty range).
    """
    plan = change_plan(control, warmup + changes)
    if not plan:
        return None
    start_attr = "index" if plan[0][0] == "index" else "value"
    start = getattr(control, start_attr)
    compute, draw, png = [], [], []
    problem = ""
    for i, (attr, value) in enumerate(plan):
        t0 = time.perf_counter()
        try:
            setattr(control, attr, value)  # the view redraws its Figure in an observer, at once
        except Exception as exc:  # noqa: BLE001 — a failing draw is reported, not timed
            problem = f"error: callback raised {type(exc).__name__}: {exc} at {attr}={value!r}"
            break
        t1 = time.perf_counter()
        fig = view.result
        if not isinstance(fig, Figure):
            problem = f"error: view.result is {type(fig).__name__}, not a Figure"
            break
        figure_png(fig)  # the PNG the view sent per move before page views (it draws once)
        t2 = time.perf_counter()
        _agg(fig).draw()
        t3 = time.perf_counter()
        if i >= warmup:
            compute.append(t1 - t0)
            png.append(t2 - t0)
            draw.append((t1 - t0) + (t3 - t2))
    setattr(control, start_attr, start)
    if problem or not compute:
        return ControlTiming(None, None, None, problem or "error: nothing timed")
    return ControlTiming(Stats(tuple(compute)), Stats(tuple(draw)), Stats(tuple(png)))


def _quiet() -> contextlib.AbstractContextManager:
    """Keep whatever a view module prints while it builds out of the tables."""
    return contextlib.redirect_stdout(io.StringIO())


def run(cfg: Config, *, package: str = "helpers.widgets", echo: bool = True,
        changes: int | None = None, warmup: int | None = None,
        on_found: Callable[[list[Found]], None] | None = None,
        per_view: dict[str, list[float]] | None = None) -> list[Table]:
    """Two tables: the modules found (with demo_views' build time), then one row per control.

    ``per_view``, when given, receives every timed +png sample (seconds) by the view's title,
    the Figure label a page shows as ``data-view`` (for ``bench_pages``' kernel column)."""
    changes = changes or (3 if cfg.quick else 8)
    warmup = warmup if warmup is not None else 1
    found = discover(package)
    modules = Table(
        f"Widget modules in {package} (demo_views build time)",
        [Col("module", "module", width=14), Col("views", "views", "int", width=5),
         Col("controls", "controls", "int", width=8), Col("build", "build", "time"),
         Col("status", f"target ≤{BUILD_TARGET_S:.0f} s", width=12),
         Col("note", "note", width=4)],
        short="widget modules", echo=echo)
    for item in found:
        if item.problem:
            modules.add(module=item.name, status="error", note=item.problem)
            continue
        t0 = time.perf_counter()
        try:
            with _quiet():
                item.views = dict(item.module.demo_views())
        except Exception as exc:  # noqa: BLE001 — report, keep going with the other modules
            last = traceback.extract_tb(exc.__traceback__)[-1]
            item.problem = f"demo_views() raised {type(exc).__name__}: {exc} ({last.name}:{last.lineno})"
            modules.add(module=item.name, status="error", note=item.problem)
            continue
        item.build_s = time.perf_counter() - t0
        n_controls = sum(len(controls(v)) for w in item.views.values() for v in find_views(w))
        modules.add(module=item.name, views=len(item.views), controls=n_controls,
                    build=item.build_s, status=verdict(item.build_s, BUILD_TARGET_S))
    if not found:
        modules.note(f"no public module in {package} yet")
    if on_found is not None:
        on_found(found)

    table = Table(
        f"Slider latency, {changes} changes per control after {warmup} warm-up",
        [Col("view", "module.view", width=28), Col("control", "control", width=26),
         Col("compute", "compute", "time"), Col("draw", "+draw", "time"),
         Col("draw_p90", "+draw p90", "time"), Col("png", "+png", "time"),
         Col("png_p90", "+png p90", "time"),
         Col("status", "draw ≤100 ms", width=12), Col("status_png", "png ≤100 ms", width=12)],
        short="sliders", echo=echo)
    for item in found:
        for view_name, widget in item.views.items():
            label = f"{item.name}.{view_name}"
            views = find_views(widget)
            if not views:
                table.add(view=label, control="(no page view inside)", status="n/a")
                continue
            for view in views:
                ctrls = controls(view)
                names = {id(w): name for name, w in zip(view.kwargs, view.children)}
                if not ctrls:
                    table.add(view=label, control="(no controls)", status="n/a")
                for control in ctrls:
                    what = control_label(control, names[id(control)])
                    try:
                        with _quiet():
                            timing = time_control(view, control, changes=changes, warmup=warmup)
                    except Exception as exc:  # noqa: BLE001
                        table.add(view=label, control=what,
                                  status=f"error: {type(exc).__name__}: {exc}"[:120])
                        continue
                    if timing is None:
                        table.add(view=label, control=what, status="cannot move")
                        continue
                    if timing.problem:
                        table.add(view=label, control=what, status=timing.problem[:120])
                        continue
                    if per_view is not None:
                        per_view.setdefault(view.title, []).extend(timing.png.samples)
                    table.add(view=label, control=what,
                              compute=timing.compute.median, draw=timing.draw.median,
                              draw_p90=timing.draw.p90, png=timing.png.median,
                              png_p90=timing.png.p90,
                              status=verdict(timing.draw.median, TARGET_S),
                              status_png=verdict(timing.png.median, TARGET_S))
    table.note("Kernel side: before page views, every move cost this round trip. compute = "
               "setting the control (the view recomputes its Figure); +png = compute + the PNG "
               "the old view sent per move (helpers.widgets.figure_png, drawn once); +draw = "
               "compute + an Agg canvas.draw() after it (a Figure made without pyplot has a "
               "FigureCanvasBase, whose draw() renders nothing). Medians and 90th percentiles.")
    return [modules, table]
