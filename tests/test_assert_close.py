"""helpers/_assert_close.py: torch.testing.assert_close, as PyTorch defines it, without
importing torch.distributed.tensor (0.9 s) before any DTensor can exist.

Each case runs in a fresh interpreter: whether a module is imported is a per-process fact."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from helpers import _assert_close

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def fresh(code: str) -> dict:
    """Run ``code`` in a new Python (the repo on its path); it prints one JSON object."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_first_assert_close_imports_no_dtensor_module_with_helpers_and_does_without():
    probe = """
        import json, sys, torch
        {imports}
        torch.testing.assert_close(torch.ones(3), torch.ones(3))
        print(json.dumps("torch.distributed.tensor" in sys.modules))
    """
    assert fresh(probe.format(imports="import helpers")) is False
    # Without helpers, PyTorch 2.13 imports it: what this module exists to avoid.
    assert fresh(probe.format(imports="")) is True


def test_it_still_tells_tensors_apart_with_its_own_messages():
    a = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(a, a.clone())
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 3"):
        torch.testing.assert_close(a, torch.tensor([1.0, 2.0, 4.0]))
    with pytest.raises(AssertionError, match=r"dtype"):
        torch.testing.assert_close(a, a.double())


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_dtensors_are_checked_as_pytorch_checks_them():
    result = fresh("""
        import json, torch, helpers
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Replicate
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        mesh = init_device_mesh("cpu", (1,))
        dt = DTensor.from_local(torch.ones(3), mesh, [Replicate()])
        try:
            torch.testing.assert_close(dt, torch.ones(3))
            mixed = "no error"
        except TypeError as error:
            mixed = str(error)
        torch.testing.assert_close(dt, DTensor.from_local(torch.ones(3), mesh, [Replicate()]))
        try:
            torch.testing.assert_close(dt, DTensor.from_local(torch.zeros(3), mesh, [Replicate()]))
            differ = "no error"
        except AssertionError as error:
            differ = str(error)
        dist.destroy_process_group()
        print(json.dumps([mixed, differ]))
    """)
    mixed, differ = result
    assert mixed.startswith("Comparing a DTensor to a non-DTensor is ambiguous")
    assert "Mismatched elements: 3 / 3" in differ


def test_the_check_runs_once_the_dtensor_module_is_imported(monkeypatch):
    calls = []

    def check(actual, expected):
        calls.append((actual, expected))
        return "checked", expected

    wrapped = _assert_close.no_import_until_needed(check)
    monkeypatch.delitem(sys.modules, "torch.distributed.tensor", raising=False)
    assert wrapped(1, 2) == (1, 2) and calls == []
    monkeypatch.setitem(sys.modules, "torch.distributed.tensor", types.ModuleType("stand-in"))
    assert wrapped(1, 2) == ("checked", 2) and calls == [(1, 2)]


def test_install_wraps_pytorchs_check_once():
    from torch.testing import _comparison

    assert _assert_close.install() is True  # helpers installed it on import: still one wrapper
    wrapper = _comparison._unwrap_dtensor_for_comparison
    assert wrapper._no_import_until_needed
    assert wrapper.__wrapped__.__module__ == "torch.testing._comparison"
