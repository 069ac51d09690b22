"""Input checks shared by the helpers: each failure is a ValueError naming expected and actual."""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["check_rank", "check_size", "check_floating"]


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


def shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
