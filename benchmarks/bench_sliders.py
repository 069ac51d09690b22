"""Slider latency: every control of every view that ``helpers.widgets.*.demo_views()`` builds.

For each change of a control, setting ``.value`` runs the view's callback synchronously: it
recomputes, redraws into its Figure and renders the PNG sent to the browser
(``helpers.widgets.figure_png``). *+png* = that whole callback, what a reader of the notebook
waits for kernel-side; *compute* = the callback less a PNG render timed on its own right after;
*+draw* = compute + an Agg ``fig.canvas.draw()``. Target: median compute + draw ≤ 100 ms, and
the whole callback is judged against the same 100 ms.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
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

from .common import Col, Config, Stats, Table, verdict  # noqa: E402

__all__ = ["TARGET_S", "discover", "find_views", "controls", "change_plan", "time_control", "run"]

TARGET_S = 0.100
BUILD_TARGET_S = 2.0
# Controls whose value a reader changes. Selection widgets are driven through ``.index``.
SLIDERS = (widgets.IntSlider, widgets.FloatSlider, widgets.FloatLogSlider, widgets.SelectionSlider)
CHOICES = (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons)
TOGGLES = (widgets.Checkbox, widgets.ToggleButton)


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
        if info.name.startswith("_"):
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


def find_views(widget: widgets.Widget) -> list[widgets.interactive]:
    """The ``interactive`` widgets in ``widget`` (itself, or inside boxes), in order."""
    if isinstance(widget, widgets.interactive):
        return [widget]
    out = []
    for child in getattr(widget, "children", ()):
        out += find_views(child)
    return out


def controls(view: widgets.interactive) -> list[widgets.Widget]:
    """The controls of ``view`` that a reader moves (sliders, choices, check boxes)."""
    kids = getattr(view, "kwargs_widgets", None) or list(view.children)
    return [w for w in kids if isinstance(w, SLIDERS + CHOICES + TOGGLES)]


def control_label(control: widgets.Widget, index: int) -> str:
    name = (getattr(control, "description", "") or "").strip() or f"#{index}"
    return f"{name} ({type(control).__name__})"


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


class _Records(logging.Handler):
    """Keeps the warnings ``interactive`` logs when a callback raises."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def first(self) -> str:
        exc = self.records[0].exc_info[1] if self.records[0].exc_info else None
        return f"{type(exc).__name__}: {exc}" if exc is not None else self.records[0].getMessage()


@dataclass
class ControlTiming:
    compute: Stats | None  # None when the control could not be timed: see ``problem``
    draw: Stats | None  # compute + draw
    png: Stats | None  # the whole callback: compute + draw + PNG
    problem: str = ""


def time_control(view: widgets.interactive, control: widgets.Widget, *, changes: int,
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
    # Outside a kernel ``interactive`` swallows a callback's exception (it logs it to a logger
    # with a NullHandler) and keeps the old Figure: catch the record, or a failing callback
    # would be timed as a fast one.
    raised = _Records()
    view.log.addHandler(raised)
    try:
        for i, (attr, value) in enumerate(plan):
            t0 = time.perf_counter()
            setattr(control, attr, value)  # runs the callback: redraw, then the view's PNG
            t1 = time.perf_counter()
            if raised.records:
                problem = f"error: callback raised {raised.first()} at {attr}={value!r}"
                break
            fig = view.result
            if not isinstance(fig, Figure):
                problem = f"error: view.result is {type(fig).__name__}, not a Figure"
                break
            _agg(fig).draw()
            t2 = time.perf_counter()
            figure_png(fig)  # the PNG the view sends, timed alone
            t3 = time.perf_counter()
            if i >= warmup:
                work = max((t1 - t0) - (t3 - t2), 0.0)  # the callback less its PNG
                compute.append(work)
                draw.append(work + (t2 - t1))
                png.append(t1 - t0)
        setattr(control, start_attr, start)
    finally:
        view.log.removeHandler(raised)
    if problem or not compute:
        return ControlTiming(None, None, None, problem or "error: nothing timed")
    return ControlTiming(Stats(tuple(compute)), Stats(tuple(draw)), Stats(tuple(png)))


def _quiet() -> contextlib.AbstractContextManager:
    """Outside a kernel, ``interactive`` prints what it would display (and clear_output's
    escape codes) to stdout: keep that out of the tables."""
    return contextlib.redirect_stdout(io.StringIO())


def run(cfg: Config, *, package: str = "helpers.widgets", echo: bool = True,
        changes: int | None = None, warmup: int | None = None,
        on_found: Callable[[list[Found]], None] | None = None) -> list[Table]:
    """Two tables: the modules found (with demo_views' build time), then one row per control."""
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
                table.add(view=label, control="(no interactive inside)", status="n/a")
                continue
            for view in views:
                ctrls = controls(view)
                if not ctrls:
                    table.add(view=label, control="(no controls)", status="n/a")
                for i, control in enumerate(ctrls):
                    try:
                        with _quiet():
                            timing = time_control(view, control, changes=changes, warmup=warmup)
                    except Exception as exc:  # noqa: BLE001
                        table.add(view=label, control=control_label(control, i),
                                  status=f"error: {type(exc).__name__}: {exc}"[:120])
                        continue
                    if timing is None:
                        table.add(view=label, control=control_label(control, i), status="cannot move")
                        continue
                    if timing.problem:
                        table.add(view=label, control=control_label(control, i),
                                  status=timing.problem[:120])
                        continue
                    table.add(view=label, control=control_label(control, i),
                              compute=timing.compute.median, draw=timing.draw.median,
                              draw_p90=timing.draw.p90, png=timing.png.median,
                              png_p90=timing.png.p90,
                              status=verdict(timing.draw.median, TARGET_S),
                              status_png=verdict(timing.png.median, TARGET_S))
    table.note("+png = setting the control: the whole callback (recompute, redraw, and the PNG "
               "the view sends, helpers.widgets.figure_png, drawn once); compute = that less a "
               "PNG render timed on its own; +draw = compute + an Agg canvas.draw() (a Figure made "
               "without pyplot has a FigureCanvasBase, whose draw() renders nothing). Medians and "
               "90th percentiles.")
    return [modules, table]
