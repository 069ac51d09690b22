"""Input checks shared by the helpers: each failure is a ValueError naming expected and actual.

Numbers: Python and NumPy ints and floats are accepted (``numbers.Integral`` / ``numbers.Real``),
a bool is never a number, and NaN or ±inf is rejected wherever a finite number is needed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "broadcast_shape",
    "check_rank", "check_size", "check_floating", "check_int", "check_positive_int", "check_seed",
    "check_real", "check_probability", "check_bool", "check_like", "check_qk_size", "check_mask",
    "as_device",
]


def check_rank(name: str, x: torch.Tensor, rank: int, layout: str) -> None:
    """Raise unless ``x`` is a tensor of ``rank`` dimensions laid out as ``layout``."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {layout}, got {type(x).__name__}")
    if x.dim() != rank:
        raise ValueError(
            f"{name} must have {rank} dimensions {layout}, got {x.dim()} with shape {tuple(x.shape)}"
        )


def check_size(what: str, expected: int, actual: int) -> None:
    """Raise unless two sizes agree; ``what`` says which sizes, e.g. 'batch size of keys'."""
    if expected != actual:
        raise ValueError(f"{what}: expected {expected}, got {actual}")


def check_floating(name: str, x: torch.Tensor) -> None:
    """Raise unless ``x`` is a tensor of floating-point numbers."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a floating-point torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_int(name: str, value: object, minimum: int = 0) -> int:
    """Return ``value`` as an int; raise unless it is an integer ≥ ``minimum`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return int(value)


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int; raise unless it is an integer ≥ 1 (a bool is not a size)."""
    return check_int(name, value, 1)


def check_seed(seed: object) -> int:
    """Return ``seed`` as an int; raise unless it is an integer in PyTorch's range for seeds."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not -(2**63) <= seed < 2**64:
        raise ValueError(f"seed must be an int in [-2**63, 2**64), got {seed!r}")
    return int(seed)


def check_real(name: str, value: object, *, above: float | None = None,
               at_least: float | None = None) -> float:
    """Return ``value`` as a float; raise unless it is a finite real number (not a bool),
    ``> above`` and ``>= at_least`` when those are given."""
    bound = "" if above is None else f" > {above}"
    bound += "" if at_least is None else f" >= {at_least}"
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (above is not None and not value > above) or (
            at_least is not None and not value >= at_least):
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return float(value)


def check_probability(name: str, p: object) -> float:
    """Return a dropout probability as a float; raise unless it is a number in [0, 1)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p < 1:  # NaN fails too
        raise ValueError(f"{name} must be a probability in [0, 1), got {p!r}")
    return float(p)


def check_bool(name: str, value: object) -> None:
    """Raise unless ``value`` is True or False (a flag, not any truthy object)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_like(name: str, x: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    """Raise unless ``x`` has the dtype and the device of ``ref`` (PyTorch would raise a raw
    error in a matmul, or, with a 'meta' tensor, compute on nothing)."""
    if x.dtype != ref.dtype or x.device != ref.device:
        raise ValueError(f"{name} must have the dtype and device of {ref_name} "
                         f"({ref.dtype} on {ref.device}), got {x.dtype} on {x.device}")


def check_qk_size(queries: torch.Tensor, keys: torch.Tensor) -> None:
    """Raise unless queries (..., Q, D) and keys (..., K, D) share one feature size D ≥ 1
    (the scores q·k/√D need it)."""
    check_size("feature size of keys (D, same as queries)", queries.shape[-1], keys.shape[-1])
    if queries.shape[-1] == 0:
        raise ValueError("feature size D of queries and keys must be at least 1, got 0")


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to, or None if they do not broadcast (the rules of
    ``torch.broadcast_shapes``, which imports sympy on its first call: about half a second)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for sizes in zip(*((1,) * (rank - len(s)) + tuple(s) for s in shapes)):
        other = {n for n in sizes if n != 1}
        if len(other) > 1:
            return None
        out.append(other.pop() if other else 1)
    return tuple(out)


def check_mask(name: str, mask: torch.Tensor, shape: Sequence[int], layout: str,
               device: torch.device | None = None) -> None:
    """Raise unless ``mask`` is a boolean tensor that broadcasts to ``shape`` (laid out
    ``layout``), on ``device`` when one is given."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"{name} must be a boolean tensor (True = takes part), got {got}")
    if broadcast_shape(mask.shape, shape) != tuple(shape):
        raise ValueError(f"{name} must broadcast to {layout} = {tuple(shape)}, got {tuple(mask.shape)}")
    if device is not None and mask.device != device:
        raise ValueError(f"{name} must be on the device of the scores ({device}), got {mask.device}")


def as_device(name: str, device: object) -> torch.device:
    """``device`` as a ``torch.device``; raise unless it names one (e.g. 'cpu', 'cuda:0')."""
    if isinstance(device, torch.device):
        return device
    try:
        return torch.device(device)  # type: ignore[arg-type]
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{name} must be a torch.device or a name such as 'cpu' or 'cuda', "
                         f"got {device!r}") from None
