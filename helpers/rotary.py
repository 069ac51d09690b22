"""Rotary position embedding (旋转位置编码, RoPE): rotate queries and keys by their positions.

Legend: T positions, D feature size (even), D/2 pairs of features, each pair a 2-D plane.
Pair i turns by the angle p·θ_i at position p, with θ_i = base^(−2i/D): after rotating q at
position m and k at position n, q·k depends on the offset m − n only (相对位置).
Two layouts pair the features differently: half-split (i, i + D/2), as in the GPT-NeoX and
LLaMA code, and interleaved (2i, 2i + 1), as in the RoFormer paper.
``decay_bound`` is RoFormer's long-term decay (长程衰减) of the bound on a score with the distance.
"""

from __future__ import annotations

import numbers

import torch

from .checks import check_bool, check_floating, check_holds_data, check_real

__all__ = ["apply_rotary", "rotary_angles", "decay_bound"]


def _check_real_vector(name: str, x: object) -> None:
    """Raise ValueError unless ``x`` is a 1-D tensor of real numbers holding data."""
    if not isinstance(x, torch.Tensor) or x.dim() != 1:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a tensor of shape (T,), got {got}")
    if x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"{name} must hold real numbers, got dtype {x.dtype}")
    check_holds_data(name, x)


def rotary_angles(
    positions: torch.Tensor, size: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The angles p·θ_i, (T, D/2), for ``positions`` (T,) (integers, or real numbers to draw
    smooth curves) and an even feature ``size`` D ≥ 2, computed in the floating ``dtype``
    (float64 by default; float32 where the device has no float64). ``base`` > 1."""
    _check_real_vector("positions", positions)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 2 or size % 2:
        raise ValueError(f"size must be an even int >= 2, got {size!r}")
    base = check_real("base", base, above=1.0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    size = int(size)
    i = torch.arange(size // 2, device=positions.device, dtype=dtype)  # (D/2,)
    theta = torch.pow(torch.tensor(base, dtype=dtype, device=positions.device), -2.0 * i / size)
    return positions.to(dtype)[:, None] * theta[None, :]  # (T, D/2)


def apply_rotary(
    x: torch.Tensor, positions: torch.Tensor | None = None, *, base: float = 10000.0,
    interleaved: bool = False, scale: float = 1.0,
) -> torch.Tensor:
    """Rotate every pair of features of ``x`` (..., T, D) by its position's angle.

    ``positions``: integer (T,), default ``arange(T)``. ``interleaved=False`` pairs feature i
    with i + D/2 (half-split), ``True`` pairs 2i with 2i + 1. ``scale`` > 0 multiplies every
    position first, pair i at p turning by (p·scale)·θ_i: 1 is plain RoPE, train_length /
    test_length is position interpolation (位置插值, Chen et al. 2023), which squeezes a longer
    sequence into the positions seen in training. Returns a new tensor in x's dtype (the angles
    and the rotation are computed in float64 for float64 input, else float32 — never in half
    precision); ``x`` is not modified. Raises ValueError for an odd D, a non-floating ``x``,
    positions of the wrong shape or dtype, a base ≤ 1 or a scale ≤ 0.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a tensor of shape (..., T, D), got {got}")
    check_floating("x", x)
    check_holds_data("x", x)
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"the feature size D must be even (pairs of features rotate), got D={D}")
    base = check_real("base", base, above=1.0)
    check_bool("interleaved", interleaved)
    scale = check_real("scale", scale, above=0.0)
    if positions is None:
        positions = torch.arange(T, device=x.device)
    elif not isinstance(positions, torch.Tensor) or positions.shape != (T,):
        got = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise ValueError(f"positions must have shape (T,) = ({T},), got {got}")
    elif positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(f"positions must hold integers, got dtype {positions.dtype}")
    else:
        check_holds_data("positions", positions)
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    exact = torch.float32 if x.device.type == "mps" else torch.float64
    angles = rotary_angles(positions.to(device=x.device, dtype=exact) * scale, D, base=base,
                           dtype=exact)  # (T, D/2): (p·scale)·θ_i
    cos, sin = angles.cos().to(work), angles.sin().to(work)  # (T, D/2)
    xw = x.to(work)  # a copy only when the dtype changes; nothing below writes into it
    if interleaved:
        x1, x2 = xw[..., 0::2], xw[..., 1::2]  # (..., T, D/2) each: the pairs (2i, 2i + 1)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    else:
        x1, x2 = xw[..., : D // 2], xw[..., D // 2:]  # the pairs (i, i + D/2)
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, D)
    return out.to(x.dtype)


def decay_bound(
    distances: torch.Tensor, size: int, *, base: float = 10000.0,
) -> torch.Tensor:
    """RoFormer's long-term decay (Su et al. 2021, section 3.4.3): (1/(D/2)) Σ_j |S_j| for each
    relative distance δ = m − n of ``distances`` (T,) (real numbers), (T,) float64.

    In complex form a RoPE score is Re Σ_i h_i e^(iδθ_i), with h_i the product of pair i of the
    query and the conjugate of pair i of the key. With S_j = Σ_(k<j) e^(iδθ_k) (partial sums,
    j = 1 … D/2) and h_(D/2) = 0, summation by parts bounds its modulus by
    (max_i |h_(i+1) − h_i|) · Σ_j |S_j|; this returns the content-free factor divided by D/2.
    At δ = 0 every |S_j| = j, so it is (D/2 + 1)/2; it shrinks, with ripples, as |δ| grows. ``size`` D even ≥ 2, ``base`` > 1.
    """
    _check_real_vector("distances", distances)
    angles = rotary_angles(distances, size, base=base)  # (T, D/2): δ·θ_k
    S_re, S_im = angles.cos().cumsum(dim=-1), angles.sin().cumsum(dim=-1)  # (T, D/2): S_1 … S_(D/2)
    return torch.hypot(S_re, S_im).mean(dim=-1)  # (T,)
