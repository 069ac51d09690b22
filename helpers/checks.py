"""Input checks shared by the helpers: each failure is a ValueError naming expected and actual."""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["check_rank", "check_size", "check_floating", "check_positive_int", "check_mask"]


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
    """Raise unless ``x`` holds floating-point numbers."""
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_positive_int(name: str, value: object) -> None:
    """Raise unless ``value`` is an int ≥ 1 (a bool is not a size)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_mask(name: str, mask: torch.Tensor, shape: Sequence[int], layout: str) -> None:
    """Raise unless ``mask`` is a boolean tensor that broadcasts to ``shape`` (laid out ``layout``)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"{name} must be a boolean tensor (True = takes part), got {got}")
    try:
        ok = torch.broadcast_shapes(mask.shape, shape) == tuple(shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must broadcast to {layout} = {tuple(shape)}, got {tuple(mask.shape)}")

