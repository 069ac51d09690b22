"""Generated bad-input and edge cases for **every public callable** of ``helpers`` (every name in
every module's ``__all__``, the widget modules included) and every notebook's exercise checks.

The list of what must be covered is not written by hand: ``public_targets()`` walks the package,
reads each module's ``__all__`` and lists each function, each class (its constructor) and each
public method a class defines (``forward`` for a module). ``tests/test_fuzz.py`` fails when one
of them has no ``Spec``, or when a spec leaves a parameter of the target's signature neither
fuzzed (``rules``) nor explained (``unfuzzed``). So a new function cannot be missed.

A ``Spec`` gives one *valid* call (``good``: a factory of fresh keyword arguments) and a rule for
each parameter. The cases are generated from it: each parameter in turn is replaced by every value
of a pool of odd values (NumPy scalars, NaN, ±inf, bools, None, strings, 0-d tensors, and for
tensors: wrong rank, integer / bool / complex dtype, a 'meta' tensor, a list, a string), and the
rule says whether the call must then work or must be refused. Hand-written ``bad`` and ``edge``
cases add what a pool cannot express (sizes that disagree, values out of a range only the spec
knows). Outcomes, as ``tools/fuzz_inputs.py`` reports them:

* a bad input is **clear** (a ValueError whose first line names the parameter and says
  ``must ... got`` / ``expected ... got``), **vague** (a ValueError that does not), **raw**
  (another exception: PyTorch's own, IndexError, TypeError...), **silent** (nothing raised) or a
  **hang** (over the time limit);
* a valid input **works** (returns, and ``check`` passes when the spec has one), is **rejected**
  (raises), gives a **wrong** result (``check`` fails) or **hangs**.

How to write a spec (see ``specs_*.py``)::

    Spec(
        "helpers.tiling.tiled_attention",           # module + name (+ ".method")
        call=h.tiled_attention,                     # called as call(**kwargs)
        good=lambda: dict(queries=rand(2, 3, 4), keys=rand(2, 5, 4), values=rand(2, 5, 6),
                          block_size=2, causal=False),
        rules={"queries": T(min_rank=2), "keys": T(min_rank=2), "values": T(min_rank=2),
               "block_size": "size", "causal": "flag"},
        check=lambda out, kw: torch.allclose(out, reference(**kw), atol=1e-5),
        bad=[Case("block_size=0-keys", lambda kw: kw.update(keys=rand(2, 5, 3)), r"feature size")],
    )

``call`` may be a lambda that builds an object first (``call=lambda **kw: KVCache().append(**kw)``)
or reads an object passed in ``good`` (a parameter such as ``self`` or ``fig``: list it in
``unfuzzed`` with the reason). ``valid(kw)`` says whether a call whose every argument follows its
own rule is valid as a whole (e.g. ``num_hiddens % num_heads == 0``).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import pkgutil
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

GENERIC = r"(must|expected)[^\n]*got"  # says what was expected and what came


# --------------------------------------------------------------------------------- rules
def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and math.isfinite(v)


RULES: dict[str, Callable[[Any], bool]] = {
    "size": lambda v: _is_int(v) and v >= 1,
    "count": lambda v: _is_int(v) and v >= 0,
    "size or None": lambda v: v is None or _is_int(v) and v >= 1,
    "count or None": lambda v: v is None or _is_int(v) and v >= 0,
    "int": _is_int,
    "probability": lambda v: _is_real(v) and 0 <= v < 1,
    "positive": lambda v: _is_real(v) and v > 0,
    "non-negative": lambda v: _is_real(v) and v >= 0,
    "finite": _is_real,
    "flag": lambda v: isinstance(v, (bool, np.bool_)),
    "above one": lambda v: _is_real(v) and v > 1,
    "seed": lambda v: _is_int(v) and -(2**63) <= v < 2**64,
    "seed or None": lambda v: v is None or _is_int(v) and -(2**63) <= v < 2**64,
}


@dataclass(frozen=True)
class Int:
    """An integer (Python or NumPy, not a bool) in [lo, hi]; None allowed with ``optional``."""
    lo: int | None = None
    hi: int | None = None
    optional: bool = False

    def __call__(self, v: Any) -> bool:
        if v is None:
            return self.optional
        return _is_int(v) and (self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)

    def extra_values(self) -> list[tuple[str, Any]]:
        out = []
        for bound in (self.lo, self.hi):
            if bound is not None:
                out += [(str(bound - 1), bound - 1), (str(bound), bound), (str(bound + 1), bound + 1)]
        return out


@dataclass(frozen=True)
class Real:
    """A finite real number (not a bool) in the interval given (open or closed ends)."""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    optional: bool = False

    def __call__(self, v: Any) -> bool:
        if v is None:
            return self.optional
        if not _is_real(v):
            return False
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return False
        return not (self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi))

    def extra_values(self) -> list[tuple[str, Any]]:
        out = []
        for bound in (self.lo, self.hi):
            if bound is not None:
                out += [(repr(bound), bound), (f"{bound}-1e-3", bound - 1e-3), (f"{bound}+1e-3", bound + 1e-3)]
        return out


@dataclass(frozen=True)
class OneOf:
    """One of the given values (compared with ==, and of the same type)."""
    choices: tuple

    def __call__(self, v: Any) -> bool:
        return any(type(v) is type(c) and v == c for c in self.choices)

    def extra_values(self) -> list[tuple[str, Any]]:
        return [(repr(c), c) for c in self.choices] + [("'bogus'", "bogus")]


@dataclass(frozen=True)
class T:
    """A tensor argument. ``rank``: exact number of dims, or ``min_rank``: at least. ``dtype``:
    "floating" (float16/bfloat16/float32/float64), "integer" (int8...int64, uint8), "long",
    "bool" or "any". ``optional``: None is valid. ``lists``: a plain (nested) list of the same
    numbers is valid too. The generated variants of the good tensor ``x``: a string, None, a list
    (of x's numbers), x with one more leading dim, x with one dim fewer, x as int64, bool,
    complex64 and float64 (each judged by ``dtype``; float64 only where ``dtype`` allows every
    floating dtype and ``same_dtype`` is off), and x on the 'meta' device (always bad: no
    helper computes on nothing)."""
    rank: int | None = None
    min_rank: int | None = None
    dtype: str = "floating"
    optional: bool = False
    lists: bool = False
    same_dtype: bool = True  # must share the dtype of the other tensors (float64 alone is bad)

    def variants(self, x: torch.Tensor) -> list[tuple[str, Any, bool]]:
        """(shown, value, valid) for each variant of the good tensor ``x``."""
        rank_ok = lambda r: (self.rank is None or r == self.rank) and (  # noqa: E731
            self.min_rank is None or r >= self.min_rank)
        out: list[tuple[str, Any, bool]] = [
            ("'x'", "x", False),
            ("None", None, self.optional),
            ("list", x.tolist(), self.lists),
            # one more leading dim: bad for an exact rank; else it depends on the other
            # arguments (it may broadcast), so it is not judged (None)
            ("unsqueeze(0)", x.unsqueeze(0), False if not rank_ok(x.dim() + 1) else None),
        ]
        if x.dim() >= 1 and x.shape[0] > 0:
            out.append(("x[0]", x[0], False if self.rank is not None or not rank_ok(x.dim() - 1) else None))
        for dtype in (torch.int64, torch.bool, torch.complex64, torch.float64):
            if dtype == x.dtype:
                continue
            valid = {"floating": dtype.is_floating_point and not self.same_dtype,
                     "integer": dtype == torch.int64, "long": dtype == torch.int64,
                     "bool": dtype == torch.bool, "any": not self.same_dtype}[self.dtype]
            out.append((str(dtype).replace("torch.", ""), x.to(dtype) if dtype != torch.complex64
                        else x.to(torch.float32).to(dtype), valid))
        out.append(("meta", torch.empty(x.shape, dtype=x.dtype, device="meta"), False))
        return out


Rule = str | Int | Real | OneOf | T | Callable[[Any], bool]

ODD_VALUES: list[tuple[str, Any]] = [
    ("0", 0), ("1", 1), ("2", 2), ("-1", -1), ("0.5", 0.5), ("2.5", 2.5), ("1.0", 1.0),
    ("np.int64(2)", np.int64(2)), ("np.int32(1)", np.int32(1)), ("np.float32(0.5)", np.float32(0.5)),
    ("np.float64(2.0)", np.float64(2.0)), ("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf),
    ("True", True), ("False", False), ("np.True_", np.True_), ("None", None), ("'2'", "2"),
    ("tensor(2)", torch.tensor(2)), ("tensor(0.5)", torch.tensor(0.5)), ("1e30", 1e30),
]
HUGE = 10**6  # integers above this are not tried as sizes (they would allocate too much)


# ----------------------------------------------------------------------------- the specs
@dataclass
class Case:
    """A hand-written case: ``change(kw)`` edits the good keyword arguments in place; for a bad
    case ``expect`` is the pattern its ValueError must match, for an edge case a check
    ``expect(result, kw) -> bool``."""
    id: str
    change: Callable[[dict], Any]
    expect: str | Callable[[Any, dict], bool] = GENERIC


@dataclass
class Spec:
    target: str  # "helpers.module.name" or "helpers.module.Class.method"
    call: Callable[..., Any]
    good: Callable[[], dict]
    rules: dict[str, Rule] = field(default_factory=dict)
    unfuzzed: dict[str, str] = field(default_factory=dict)  # parameter → why it is not fuzzed
    valid: Callable[[dict], bool] = lambda kw: True
    check: Callable[[Any, dict], bool] | None = None
    bad: list[Case] = field(default_factory=list)
    edge: list[Case] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # parameter → regex its message must contain
    limit: float = 10.0  # seconds per call before it counts as a hang


@dataclass
class CheckSpec:
    """A notebook's exercise check ``check_<n>(answer) -> str``: ``right`` answers get a verdict
    starting "correct", ``wrong`` ones "not quite"; every value of ``ODD_ANSWERS`` (and the
    spec's ``odd``) gets a string and never "correct"; None gets "not answered yet"."""
    notebook: str
    name: str
    right: Callable[[dict], list[Any]]  # from the notebook's namespace → right answers
    wrong: Callable[[dict], list[Any]]
    odd: Callable[[dict], list[Any]] = lambda ns: []
    namespace: Callable[[], dict] = dict  # names pre-set before the notebook's code runs
    wanted: frozenset[str] = frozenset()  # top-level names to run (besides imports and defs)


ODD_ANSWERS: list[Any] = [
    "a lot", "", 3.5j, object(), [None], {"x": 1}, [[1, 2], [3]], math.nan, math.inf, -1, 0, 10**9,
    True, np.int64(3), np.float32(0.5), torch.tensor([1, 2], dtype=torch.uint8),
    torch.tensor([1j, 2j]), torch.zeros(0), torch.tensor(math.nan), torch.ones(2, 3, 4),
    lambda *args, **kwargs: None, lambda *args, **kwargs: "x", lambda *args, **kwargs: 1 / 0,
]


# ------------------------------------------------------------------ what must be covered
def public_targets() -> dict[str, Callable[..., Any]]:
    """Every public callable of ``helpers``: "helpers.module.name" for each function and class
    in a module's ``__all__`` (classes: their constructor), "helpers.module.Class.method" for
    each public method a class defines itself (``forward`` of a module included). Names a
    module re-exports from another are listed under the module that defines them."""
    import helpers

    found: dict[str, Callable[..., Any]] = {}
    modules = [helpers] + [importlib.import_module(m.name)
                           for m in pkgutil.walk_packages(helpers.__path__, "helpers.")]
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not callable(obj) or getattr(obj, "__module__", None) != module.__name__:
                continue  # a constant, or defined in (and listed under) another module
            found[f"{module.__name__}.{name}"] = obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not inspect.isfunction(member):
                        continue
                    found[f"{module.__name__}.{name}.{attr}"] = member
    return found


def parameters(target: Callable[..., Any]) -> list[str]:
    """The parameter names a spec must account for (self, *args and **kwargs aside). A class:
    its constructor's; a NamedTuple or dataclass: its fields."""
    is_method = "." in getattr(target, "__qualname__", "")  # defined in a class body
    if inspect.isclass(target):
        is_method = True
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    names = [p.name for p in sig.parameters.values()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if is_method and names and names[0] in ("self", "cls"):
        names = names[1:]
    return names


def all_specs() -> list[Spec]:
    specs: list[Spec] = []
    for module in sorted(Path(__file__).parent.glob("specs_*.py")):
        if module.stem == "specs_notebooks":
            continue
        specs += importlib.import_module(f"tests.fuzz.{module.stem}").SPECS
    return specs


def all_check_specs() -> list[CheckSpec]:
    if not (Path(__file__).parent / "specs_notebooks.py").exists():
        return []
    return importlib.import_module("tests.fuzz.specs_notebooks").CHECK_SPECS


# ------------------------------------------------------------------------ generation
@dataclass
class Generated:
    target: str
    id: str
    call: Callable[[], Any]
    bad: bool
    match: str | None = None  # bad: the pattern the ValueError's message must match
    check: Callable[[Any], bool] | None = None  # valid: True when the result is right
    limit: float = 10.0


def _scalar_values(rule: Rule) -> list[tuple[str, Any]]:
    values = list(ODD_VALUES)
    extra = getattr(rule, "extra_values", None)
    if extra is not None:
        seen = {shown for shown, _ in values}
        values += [(s, v) for s, v in extra() if s not in seen]
    return values


def _judge(rule: Rule, value: Any) -> bool:
    if isinstance(rule, str):
        return RULES[rule](value)
    return bool(rule(value))


def generate_cases(spec: Spec) -> list[Generated]:
    """The generated and hand-written cases of one spec."""
    cases: list[Generated] = []
    base = spec.good()
    check = spec.check

    def add(case_id: str, change: Callable[[dict], Any], bad: bool, match: str | None,
            result_check: Callable[[Any, dict], bool] | None) -> None:
        def run(change=change):
            kw = spec.good()
            change(kw)
            run.kw = kw
            return spec.call(**kw)

        cases.append(Generated(
            spec.target, case_id, run, bad, match,
            None if bad else (lambda out, run=run, c=result_check: c is None or bool(c(out, run.kw))),
            spec.limit))

    add("good", lambda kw: None, False, None, check)
    for param, rule in spec.rules.items():
        named = spec.names.get(param, rf"\b{re.escape(param)}\b")
        named_match = rf"^(?=[^\n]*{named})[^\n]*{GENERIC}"
        if isinstance(rule, T):
            x = base[param]
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"{spec.target}: good()[{param!r}] must be a tensor for rule T")
            for shown, value, valid in rule.variants(x):
                if valid is None:  # a rank the rule allows, whose validity depends on the others
                    continue

                def change(kw, param=param, shown=shown, rule=rule):
                    kw[param] = dict((s, v) for s, v, _ in rule.variants(kw[param]))[shown]

                ok = bool(valid) and spec.valid({**base, param: value})
                add(f"{param}={shown}", change, not ok, GENERIC if valid else named_match,
                    check if ok else None)
            continue
        for shown, value in _scalar_values(rule):
            if _is_int(value) and abs(value) > HUGE and (
                    rule in ("size", "count", "size or None", "count or None", "int")
                    or isinstance(rule, Int) and rule.hi is None):
                continue
            follows = _judge(rule, value)
            ok = follows and spec.valid({**base, param: value})
            add(f"{param}={shown}", lambda kw, param=param, value=value: kw.__setitem__(param, value),
                not ok, named_match if not follows else GENERIC, check if ok else None)
    for case in spec.bad:
        if not isinstance(case.expect, str):
            raise TypeError(f"{spec.target}: bad case {case.id} needs a pattern")
        add(case.id, case.change, True, case.expect, None)
    for case in spec.edge:
        expect = None if isinstance(case.expect, str) else case.expect
        add(case.id, case.change, False, None, expect)
    return cases


def generate_check_cases(spec: CheckSpec, ns: dict) -> list[Generated]:
    """Right, wrong and oddly typed answers for one exercise check (``ns``: the notebook's
    namespace, from ``tests.notebook_code``)."""
    check = ns[spec.name]
    target = f"notebooks/{spec.notebook}:{spec.name}"
    cases = [Generated(target, "None", lambda: check(None), False,
                       check=lambda v: v == "not answered yet")]
    for i, answer in enumerate(spec.right(ns)):
        cases.append(Generated(target, f"right#{i}", lambda a=answer: check(a), False,
                               check=lambda v: isinstance(v, str) and v.startswith("correct")))
    for i, answer in enumerate(spec.wrong(ns)):
        cases.append(Generated(target, f"wrong#{i}", lambda a=answer: check(a), False,
                               check=lambda v: isinstance(v, str) and v.startswith("not quite")))
    for i, answer in enumerate(ODD_ANSWERS + spec.odd(ns)):
        cases.append(Generated(target, f"odd#{i} {type(answer).__name__}", lambda a=answer: check(a),
                               False, check=lambda v: isinstance(v, str) and not v.startswith("correct")))
    return cases


# ------------------------------------------------------------------------------ running
class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang()


def run_case(case: Generated) -> tuple[str, str]:
    """(outcome, detail): clear / vague / raw / silent / hang for a bad input; ok / rejected /
    wrong / hang for a valid one. Runs in the main thread (a SIGALRM timer counts hangs)."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, case.limit)
    start = time.perf_counter()
    try:
        result = case.call()
        signal.setitimer(signal.ITIMER_REAL, 0)
        if case.bad:
            return "silent", f"returned {_short(result)}"
        try:
            good = case.check is None or bool(case.check(result))
        except Exception as error:  # noqa: BLE001  the check itself failed on the result
            return "wrong", f"{_short(result)} (check raised {type(error).__name__}: {error})"
        return ("ok", "") if good else ("wrong", f"returned {_short(result)}")
    except Hang:
        return "hang", f"over {case.limit} s"
    except Exception as error:  # noqa: BLE001  classifying every exception is the point
        signal.setitimer(signal.ITIMER_REAL, 0)
        if time.perf_counter() - start > case.limit:
            return "hang", f"{time.perf_counter() - start:.1f} s, then {type(error).__name__}"
        text = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        where = traceback.extract_tb(error.__traceback__)[-1]
        text += f"  [{Path(where.filename).name}:{where.lineno}]"
        if not case.bad:
            return "rejected", text
        if not isinstance(error, ValueError):
            return "raw", text
        return ("clear", "") if re.search(case.match or GENERIC, str(error)) else ("vague", text)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if "matplotlib.pyplot" in sys.modules:  # a widget's draw function made a figure
            sys.modules["matplotlib.pyplot"].close("all")


def _short(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor {tuple(x.shape)} {x.dtype}"
    if isinstance(x, tuple):
        return "(" + ", ".join(_short(y) for y in x) + ")"
    if isinstance(x, str):
        return repr(x[:60])
    return f"{type(x).__name__}"


def run_all(cases: Iterable[Generated]) -> list[tuple[Generated, str, str]]:
    return [(case, *run_case(case)) for case in cases]
