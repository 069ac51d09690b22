"""Every public callable of ``helpers`` (found from the modules' ``__all__``) and every notebook's
exercise check has a spec in ``tests/fuzz/``, and every case generated from it comes out right:
bad inputs raise a clear ValueError (never another exception, never nothing, never a hang),
valid inputs work and give the right result. ``tools/fuzz_inputs.py`` prints the same tally."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest

from tests.fuzz import (
    CheckSpec, Spec, all_check_specs, all_specs, generate_cases, generate_check_cases,
    parameters, public_targets, run_all,
)
from tests.notebook_code import notebook_namespace

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SPECS: list[Spec] = all_specs()
CHECK_SPECS: list[CheckSpec] = all_check_specs()


def test_every_public_callable_has_a_spec():
    targets = public_targets()
    assert len(targets) >= 150, len(targets)  # the walk found the package (not an empty list)
    specced = {spec.target for spec in SPECS}
    missing = sorted(set(targets) - specced)
    assert not missing, f"{len(missing)} public callables have no spec in tests/fuzz: {missing}"
    unknown = sorted(specced - set(targets))
    assert not unknown, f"specs for names that are not public (renamed or removed?): {unknown}"


def test_every_parameter_is_fuzzed_or_explained():
    targets = public_targets()
    gaps = []
    for spec in SPECS:
        target = targets.get(spec.target)
        if target is None:
            continue
        needed = set(parameters(target))
        covered = set(spec.rules) | set(spec.unfuzzed)
        if needed - covered:
            gaps.append(f"{spec.target}: {sorted(needed - covered)}")
        if covered - needed:
            gaps.append(f"{spec.target}: no such parameter {sorted(covered - needed)}")
    assert not gaps, "parameters neither fuzzed (rules) nor explained (unfuzzed):\n" + "\n".join(gaps)


def _problems(results) -> list[str]:
    return [f"[{outcome}] {case.target} {case.id}: {detail}"
            for case, outcome, detail in results if outcome not in ("clear", "ok")]


@pytest.mark.parametrize("spec", SPECS, ids=[s.target for s in SPECS])
def test_generated_cases(spec: Spec):
    results = run_all(generate_cases(spec))
    problems = _problems(results)
    assert not problems, f"{len(problems)} of {len(results)} cases:\n" + "\n".join(problems)


def _check_names(notebook: str) -> set[str]:
    """The exercise checks ``check_<n>`` a notebook defines at top level, read from its source
    (not run: some of its other defs have defaults that need the notebook's data)."""
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    names = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            source = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            names |= {node.name for node in ast.parse(source).body
                      if isinstance(node, ast.FunctionDef) and re.fullmatch(r"check_\d+", node.name)}
    return names


def test_every_exercise_check_has_a_spec():
    specced = defaultdict(set)
    for spec in CHECK_SPECS:
        specced[spec.notebook].add(spec.name)
    missing, total = [], 0
    for name in NOTEBOOKS:
        checks = _check_names(name)
        total += len(checks)
        missing += [f"{name}:{c}" for c in sorted(checks - specced[name])]
    assert total >= 30, total  # the notebooks were found and read
    assert not missing, f"exercise checks without a spec in tests/fuzz/specs_notebooks.py: {missing}"


@pytest.mark.parametrize("spec", CHECK_SPECS, ids=[f"{s.notebook[:2]}:{s.name}" for s in CHECK_SPECS])
def test_exercise_check_cases(spec: CheckSpec):
    ns = notebook_namespace(spec.notebook, {spec.name, *spec.wanted}, spec.namespace())
    results = run_all(generate_check_cases(spec, ns))
    problems = _problems(results)
    assert not problems, f"{len(problems)} of {len(results)} answers:\n" + "\n".join(problems)


def test_spec_ids_are_unique():
    ids = [s.target for s in SPECS]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    for spec in SPECS:
        case_ids = [c.id for c in generate_cases(spec)]
        dupes = {i for i in case_ids if case_ids.count(i) > 1}
        assert not dupes, (spec.target, dupes)
        assert re.fullmatch(r"helpers(\.\w+)+", spec.target), spec.target
