"""``torch.testing.assert_close`` without the second it spends on its first call (PyTorch 2.13).

Since PyTorch 2.13 (pytorch/pytorch#176895), ``assert_close`` first asks whether its inputs
are DTensors (tensors sharded over processes), and to ask, it imports
``torch.distributed.tensor``: about 0.9 s, sympy included, on the first call of every session.
The notebooks check their from-scratch code with ``assert_close`` from the first page on.

A DTensor cannot exist before ``torch.distributed.tensor`` is imported, so until then the
answer is known: neither input is one. ``install()`` wraps PyTorch's check to give that answer
without the import; once the module is imported (by anyone), the check runs as PyTorch wrote
it. With a PyTorch that has no such check, it does nothing.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

# No __all__: a private module (helpers/__init__.py calls install() on import).

_DTENSOR_MODULE = "torch.distributed.tensor"


def no_import_until_needed(check: Callable) -> Callable:
    """``check(actual, expected)`` (PyTorch's DTensor check), called only once
    ``torch.distributed.tensor`` is imported; before that, the inputs come back as they are."""

    @functools.wraps(check)
    def unwrap(actual, expected):
        if _DTENSOR_MODULE not in sys.modules:  # no DTensor can exist yet
            return actual, expected
        return check(actual, expected)

    unwrap._no_import_until_needed = True
    return unwrap


def install() -> bool:
    """Wrap ``torch.testing._comparison._unwrap_dtensor_for_comparison`` with
    ``no_import_until_needed`` (once); True if it is wrapped now."""
    try:
        from torch.testing import _comparison  # noqa: PLC0415
    except ImportError:  # pragma: no cover (torch.testing has it on every release we pin)
        return False
    check = getattr(_comparison, "_unwrap_dtensor_for_comparison", None)
    if check is None:
        return False
    if not getattr(check, "_no_import_until_needed", False):
        _comparison._unwrap_dtensor_for_comparison = no_import_until_needed(check)
    return True
