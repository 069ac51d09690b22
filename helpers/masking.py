"""Valid-length masks and the masked softmax (遮蔽 softmax).

Legend: B batch, Q queries, K keys (key-value pairs).
Mask convention: a valid length ``n`` keeps the first ``n`` keys of a row; in boolean masks
``True`` means *takes part* (as in ``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .checks import check_floating, check_rank

__all__ = ["valid_lens_to_mask", "sequence_mask", "masked_softmax", "softmax_with_mask"]

ValidLens = torch.Tensor | Sequence[int] | None


def _as_lens(valid_lens: torch.Tensor | Sequence[int], device: torch.device) -> torch.Tensor:
    if not isinstance(valid_lens, torch.Tensor):
        valid_lens = torch.as_tensor(valid_lens)
    if valid_lens.is_floating_point() or valid_lens.is_complex() or valid_lens.dtype == torch.bool:
        raise ValueError(f"valid_lens must hold integers, got dtype {valid_lens.dtype}")
    return valid_lens.to(device=device, dtype=torch.long)


def valid_lens_to_mask(
    valid_lens: torch.Tensor | Sequence[int], batch: int, queries: int, keys: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Boolean mask from valid lengths, ``True`` = takes part.

    ``valid_lens`` is (B,) (one length per batch row, shared by its queries) or (B, Q).
    Returns (B, 1, K) for (B,) and (B, Q, K) for (B, Q): it broadcasts against (B, Q, K).
    Raises ValueError for a wrong shape, a float dtype, or a length outside [0, K].
    """
    lens = _as_lens(valid_lens, torch.device(device))
    if lens.shape == (batch,):
        lens = lens[:, None]  # (B, 1)
    elif lens.shape != (batch, queries):
        raise ValueError(
            f"valid_lens must have shape (B,)=({batch},) or (B, Q)=({batch}, {queries}), "
            f"got {tuple(lens.shape)}"
        )
    if lens.numel():
        lo, hi = int(lens.min()), int(lens.max())
        if lo < 0 or hi > keys:
            raise ValueError(
                f"valid_lens must lie in [0, K] = [0, {keys}], got values from {lo} to {hi}"
            )
    positions = torch.arange(keys, device=lens.device)  # (K,)
    return positions < lens[..., None]  # (B, 1 or Q, K)


def sequence_mask(
    X: torch.Tensor, valid_len: torch.Tensor | Sequence[int], value: float = 0
) -> torch.Tensor:
    """Return a copy of ``X`` with every entry past its row's valid length set to ``value``.

    ``X`` is (B, T) with ``valid_len`` (B,), or (B, Q, K) with ``valid_len`` (B,) or (B, Q).
    The input is never modified (the textbook version writes into it).
    """
    if not isinstance(X, torch.Tensor) or X.dim() not in (2, 3):
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"X must have shape (B, T) or (B, Q, K), got {shape}")
    squeeze = X.dim() == 2
    X3 = X[:, None, :] if squeeze else X  # (B, Q, K), a view: nothing is written
    mask = valid_lens_to_mask(valid_len, X3.shape[0], X3.shape[1], X3.shape[2], X.device)
    out = X3.masked_fill(~mask, value)  # new tensor
    return out[:, 0, :] if squeeze else out


def softmax_with_mask(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis where only ``mask == True`` entries take part.

    ``scores`` has any shape (..., Q, K); ``mask`` is boolean and broadcasts against it.
    Masked entries get weight exactly 0, and a row with no entry taking part is all zeros.
    The fill value comes from the dtype (``finfo.min``), never a magic -1e6; half-precision
    inputs are normalised in float32 and returned in their own dtype.
    """
    acc = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype
    if mask is None:
        return F.softmax(scores, dim=-1, dtype=acc).to(scores.dtype)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(filled, dim=-1, dtype=acc)
    # A row where nothing takes part came out uniform; zeroing every masked entry fixes it too.
    return weights.masked_fill(~mask, 0.0).to(scores.dtype)


def masked_softmax(X: torch.Tensor, valid_lens: ValidLens = None) -> torch.Tensor:
    """Softmax over the last axis of ``X`` (B, Q, K), keeping only the first valid keys.

    ``valid_lens`` is None (no mask), (B,) or (B, Q), integer, each in [0, K].
    Returns new weights (B, Q, K) in X's dtype: masked entries are exactly 0, and a row whose
    valid length is 0 is all zeros (not uniform, not NaN). ``X`` is never modified.
    """
    check_rank("X", X, 3, "(B, Q, K)")
    check_floating("X", X)
    if valid_lens is None:
        return softmax_with_mask(X, None)
    B, Q, K = X.shape
    return softmax_with_mask(X, valid_lens_to_mask(valid_lens, B, Q, K, X.device))
