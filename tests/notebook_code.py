"""Run chosen top-level definitions of a stored notebook without a kernel (for testing its
exercise checks): its imports, and the functions and assignments that define the names asked
for, in notebook order. Nothing else runs (no training, no figures)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def _assigned(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def notebook_namespace(name: str, wanted: set[str], namespace: dict | None = None) -> dict:
    """Execute, from ``notebooks/<name>``, every top-level import and every top-level ``def``,
    class or assignment that binds a name in ``wanted``, in order; return the namespace.

    IPython magics (``%...`` lines) are dropped. ``namespace`` pre-sets names (e.g. data the
    notebook would compute by training). Raises if a wanted name is never defined.
    """
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    ns: dict = {"__name__": "notebook_under_test"} | (namespace or {})
    found: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith("%"))
        for node in ast.parse(source).body:
            bound = _assigned(node)
            if isinstance(node, (ast.Import, ast.ImportFrom)) or bound & wanted:
                exec(compile(ast.Module([node], type_ignores=[]), name, "exec"), ns)
                found |= bound & wanted
    missing = wanted - found
    assert not missing, f"{name} defines no top-level {sorted(missing)}"
    return ns


def notebook_functions(name: str, namespace: dict | None = None) -> dict:
    """Execute every top-level import and ``def`` of ``notebooks/<name>`` (the exercise checks
    and the helper functions they call), except the Solutions' ``solution_*``; nothing else
    runs. ``namespace`` pre-sets names the functions read (e.g. ``h``, ``device``)."""
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    ns: dict = {"__name__": "notebook_under_test"} | (namespace or {})
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        keep = [node for node in ast.parse(source).body
                if isinstance(node, (ast.Import, ast.ImportFrom))
                or isinstance(node, ast.FunctionDef) and not node.name.startswith("solution_")]
        exec(compile(ast.Module(body=keep, type_ignores=[]), name, "exec"), ns)
    return ns


def checked_exercises(ns: dict) -> set[str]:
    """The names of the exercise checks (``check_<n>``) in a notebook's namespace."""
    return {n for n in ns if re.fullmatch(r"check_\d+", n)}


def assert_check_refuses(check: Callable[[object], str], wrong_answers: Iterable[object],
                         wrong_type: object) -> None:
    """An exercise check's side of the contract for wrong answers: None is "not answered
    yet"; every wrong answer gets a verdict starting "not quite" (never an exception, whatever
    the reader typed); an answer of a wrong type is told what was expected."""
    assert check(None) == "not answered yet"
    for answer in wrong_answers:
        verdict = check(answer)  # must not raise
        assert isinstance(verdict, str) and verdict.startswith("not quite"), (answer, verdict)
    verdict = check(wrong_type)
    assert "expected" in verdict, verdict


def assert_check_accepts(check: Callable[[object], str], right_answers: Iterable[object]) -> None:
    """Every right answer gets a verdict starting "correct"."""
    for answer in right_answers:
        assert check(answer).startswith("correct"), answer
