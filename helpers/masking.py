"""Valid-length masks and the masked softmax (掩蔽softmax操作).

Legend: B batch, Q queries, K keys (key-value pairs).
Mask convention: a valid length ``n`` keeps the first ``n`` keys of a row; in boolean masks
``True`` means *takes part* (as in ``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .checks import (
    as_usable_device, check_floating, check_holds_data, check_int, check_mask, check_positive_int,
    check_rank,
)

__all__ = [
    "valid_lens_to_mask", "sequence_mask", "masked_softmax", "softmax_with_mask", "causal_mask",
]

ValidLens = torch.Tensor | Sequence[int] | None


def _as_lens(valid_lens: torch.Tensor | Sequence[int], device: torch.device,
             name: str = "valid_lens") -> torch.Tensor:
    """``valid_lens`` as a long tensor on ``device``; ``name``: the caller's parameter."""
    if not isinstance(valid_lens, torch.Tensor):
        try:
            valid_lens = torch.as_tensor(valid_lens)
        except (TypeError, ValueError, RuntimeError) as error:  # ragged, a string, too large
            raise ValueError(f"{name} must be a tensor or a (nested) list of ints, got "
                             f"{valid_lens!r:.60} ({error})") from None
    if valid_lens.numel() == 0:
        valid_lens = valid_lens.to(torch.long)  # `[]` (a batch of 0) arrives as float32
    elif valid_lens.is_floating_point() or valid_lens.is_complex() or valid_lens.dtype == torch.bool:
        raise ValueError(f"{name} must hold integers, got dtype {valid_lens.dtype}")
    if valid_lens.device.type == "meta" and device.type != "meta":
        raise ValueError(f"{name} must be on a device that holds data ({device}), got 'meta'")
    return valid_lens.to(device=device, dtype=torch.long)


def lens_hidden(
    valid_lens: torch.Tensor | Sequence[int], batch: int, queries: int, keys: int,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(hidden, empty)``: the *opposite* of ``valid_lens_to_mask`` (True = masked out, the
    form the fills need, built directly rather than inverted) and the rows with nothing to see.

    ``empty`` is a boolean (B, 1 or Q, 1), True where the valid length is 0, or None when no
    length is 0 (the common case: nothing to zero afterwards).
    """
    usable = as_usable_device("device", device)
    if usable is None:
        raise ValueError("device must be a torch.device or a name such as 'cpu', got None")
    lens = _as_lens(valid_lens, usable)
    if lens.shape == (batch,):
        lens = lens[:, None]  # (B, 1)
    elif lens.shape != (batch, queries):
        raise ValueError(
            f"valid_lens must have shape (B,)=({batch},) or (B, Q)=({batch}, {queries}), "
            f"got {tuple(lens.shape)}"
        )
    lo = 0
    if lens.numel():
        lo, hi = torch.aminmax(lens)
        lo, hi = int(lo), int(hi)
        if lo < 0 or hi > keys:
            raise ValueError(
                f"valid_lens must lie in [0, K] = [0, {keys}], got values from {lo} to {hi}"
            )
    positions = torch.arange(keys, device=lens.device)  # (K,)
    hidden = positions >= lens[..., None]  # (B, 1 or Q, K)
    return hidden, ((lens == 0)[..., None] if lo == 0 else None)  # (B, 1 or Q, 1)


def valid_lens_to_mask(
    valid_lens: torch.Tensor | Sequence[int], batch: int, queries: int, keys: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Boolean mask from valid lengths, ``True`` = takes part.

    ``valid_lens`` is (B,) (one length per batch row, shared by its queries) or (B, Q).
    Returns (B, 1, K) for (B,) and (B, Q, K) for (B, Q): it broadcasts against (B, Q, K).
    Raises ValueError for a wrong shape, a float dtype, or a length outside [0, K].
    """
    batch, queries, keys = (check_int(name, size) for name, size in (
        ("batch", batch), ("queries", queries), ("keys", keys)))
    return ~lens_hidden(valid_lens, batch, queries, keys, device)[0]


def _fits(value: complex, dtype: torch.dtype) -> bool:
    """Whether ``dtype`` holds ``value`` without overflow (±inf and NaN fit a float dtype)."""
    if dtype == torch.bool or dtype.is_complex:
        return True
    if dtype.is_floating_point:
        return not math.isfinite(value) or abs(value) <= torch.finfo(dtype).max
    return torch.iinfo(dtype).min <= value <= torch.iinfo(dtype).max


def sequence_mask(
    X: torch.Tensor, valid_len: torch.Tensor | Sequence[int], value: float = 0
) -> torch.Tensor:
    """Return a copy of ``X`` where every time step past its row's valid length is ``value``.

    As d2l's ``sequence_mask``: ``X`` is (B, T) or (B, T, ...), masked along axis 1 (time
    steps), with ``valid_len`` (B,): entries ``X[b, t, ...]`` with ``t >= valid_len[b]`` become
    ``value``. The input is never modified (the textbook version writes into it). For a mask
    over the keys of (B, Q, K) scores, use ``valid_lens_to_mask`` or ``masked_softmax``.
    """
    if not isinstance(X, torch.Tensor) or X.dim() < 2:
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"X must have shape (B, T) or (B, T, ...), got {shape}")
    if X.device.type == "meta":
        raise ValueError("X must hold numbers (a tensor on a real device), got a 'meta' tensor")
    kind = numbers.Complex if X.is_complex() else numbers.Real if X.is_floating_point() \
        else numbers.Integral
    if not isinstance(value, kind) or isinstance(value, bool) and X.dtype != torch.bool \
            or not _fits(value, X.dtype):
        raise ValueError(f"value must be a number that X's dtype {X.dtype} holds, got {value!r}")
    B, T = X.shape[:2]
    lens = _as_lens(valid_len, X.device, "valid_len")
    if lens.shape != (B,):
        raise ValueError(f"valid_len must have shape (B,)=({B},), one length per row of X, "
                         f"got {tuple(lens.shape)}")
    if lens.numel():
        lo, hi = (int(n) for n in torch.aminmax(lens))
        if lo < 0 or hi > T:
            raise ValueError(f"valid_len must lie in [0, T] = [0, {T}], got values from {lo} to {hi}")
    hidden = torch.arange(T, device=X.device) >= lens[:, None]  # (B, T), True = past the length
    return X.masked_fill(hidden.reshape(B, T, *[1] * (X.dim() - 2)), value)  # new tensor


def empty_rows(mask: torch.Tensor) -> torch.Tensor | None:
    """Rows of a boolean mask (..., Q, K) where no key takes part, as (..., Q, 1); None if none."""
    empty = ~mask.any(dim=-1, keepdim=True)
    return empty if bool(empty.any()) else None


def softmax_owned(
    scores: torch.Tensor, hidden: torch.Tensor | None, empty: torch.Tensor | None
) -> torch.Tensor:
    """The masked softmax over the last axis, computed *in* ``scores`` when no gradient is needed.

    Only for tensors the caller made itself (a fresh ``Q Kᵀ``): it may be overwritten.
    ``hidden`` (True = masked *out*) broadcasts against ``scores``; ``empty`` marks rows where
    nothing takes part (see ``lens_hidden`` / ``empty_rows``), or None when there are none.
    Filled with ``finfo.min``, a masked entry comes out of the softmax as exactly 0 whenever its
    row has an entry taking part with a score above ``finfo.min`` (so not if every such score
    has overflowed to -inf), and only the ``empty`` rows need zeroing afterwards. ``-inf``
    would not do: an empty row would be NaN, and so would its gradient.
    Half-precision softmax accumulates in float32 inside PyTorch's kernels.
    """
    grad = scores.requires_grad
    if hidden is not None:
        scores = scores.masked_fill_(hidden, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1) if grad else torch.softmax(scores, dim=-1, out=scores)
    if empty is not None:  # out of place under autograd: softmax's backward needs its output
        weights = weights.masked_fill(empty, 0.0) if grad else weights.masked_fill_(empty, 0.0)
    return weights


def softmax_with_mask(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis where only ``mask == True`` entries take part.

    ``scores`` has any shape (..., Q, K) and is not modified; ``mask`` is boolean and
    broadcasts against it. Masked entries get weight exactly 0, and a row with no entry taking
    part is all zeros. The fill value comes from the dtype (``finfo.min``), never a magic -1e6.
    """
    if not isinstance(scores, torch.Tensor) or scores.dim() < 1:
        raise ValueError(f"scores must be a tensor of shape (..., K), got {scores!r:.60}")
    check_floating("scores", scores)
    check_holds_data("scores", scores)
    if mask is None:
        return F.softmax(scores, dim=-1)
    check_mask("mask", mask, scores.shape, "scores' shape (..., Q, K)", scores.device)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # new tensor
    return softmax_owned(filled, None, empty_rows(mask))


def masked_softmax(X: torch.Tensor, valid_lens: ValidLens = None) -> torch.Tensor:
    """Softmax over the last axis of ``X`` (B, Q, K), keeping only the first valid keys.

    ``valid_lens`` is None (no mask), (B,) or (B, Q), integer, each in [0, K].
    Returns new weights (B, Q, K) in X's dtype: masked entries are exactly 0, and a row whose
    valid length is 0 is all zeros (not uniform, not NaN). ``X`` is never modified.
    """
    check_rank("X", X, 3, "(B, Q, K)")
    check_floating("X", X)
    check_holds_data("X", X)
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    B, Q, K = X.shape
    hidden, empty = lens_hidden(valid_lens, B, Q, K, X.device)
    return softmax_owned(X.masked_fill(hidden, torch.finfo(X.dtype).min), None, empty)


def causal_mask(
    num_queries: int, num_keys: int, device: torch.device | str | None = None, *,
    window: int | None = None,
) -> torch.Tensor:
    """Boolean (Q, K) mask of causal attention (因果掩码), ``True`` = takes part, aligned
    **lower-right**: the Q queries are the *last* Q of the K positions, so query i sits at
    position K − Q + i and sees the keys j ≤ K − Q + i. With Q = K that is the usual lower
    triangle; with Q < K (new tokens against a KV cache) each new query sees every cached key;
    with Q > K the first Q − K queries see nothing (the helpers give them all-zero weights).

    ``F.scaled_dot_product_attention(is_causal=True)`` aligns the triangle **top-left**
    instead (query i sees keys j ≤ i): the same when Q = K, different when Q ≠ K
    (``torch.nn.attention.bias.causal_lower_right`` is PyTorch's lower-right variant).

    ``window=W`` (an int ≥ 1; None: no window) is sliding-window attention (滑动窗口注意力): query
    i also sees only the W most recent positions, itself included, the keys
    K − Q + i − W < j ≤ K − Q + i: a band of width W below the diagonal (Mistral's
    ``sliding_window``). W ≥ K hides nothing more than the plain causal mask.
    """
    num_queries = check_positive_int("num_queries", num_queries)
    num_keys = check_positive_int("num_keys", num_keys)
    if window is not None:
        window = check_positive_int("window", window)
    device = as_usable_device("device", device)
    queries = torch.arange(num_queries, device=device)[:, None]  # (Q, 1)
    keys = torch.arange(num_keys, device=device)[None, :]  # (1, K)
    if window is None:
        return keys <= queries + (num_keys - num_queries)  # (Q, K)
    back = queries + (num_keys - num_queries) - keys  # (Q, K): how far key j lies behind query i
    return (back >= 0) & (back < window)  # (Q, K)


def attention_hidden(
    valid_lens: ValidLens, batch: int, queries: int, keys: int, device: torch.device,
    *, causal: bool = False, window: int | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(hidden, empty)`` for valid lengths and/or the causal mask together: a key is hidden
    (True = masked *out*) when it lies past the valid length **or** in the query's future
    (**or**, with ``window``, W or more positions behind it: ``causal_mask``'s band; only with
    ``causal``). ``hidden`` is (B, 1 or Q, K), (Q, K) or None (nothing hidden); ``empty`` as in
    ``lens_hidden``: (..., Q, 1) rows where every key is hidden, or None when there are none."""
    hidden = empty = None
    if valid_lens is not None:
        hidden, empty = lens_hidden(valid_lens, batch, queries, keys, device)
    banded = window is not None and window < keys
    if causal and (queries > 1 or banded and queries) and keys > 0:  # one query (the last) sees
        # every key unless a window hides the oldest; with K = 0 there is nothing to hide:
        # every row is empty, its output all zeros
        future = ~causal_mask(queries, keys, device, window=window if banded else None)  # (Q, K)
        hidden = future if hidden is None else hidden | future  # (B, Q, K) or (Q, K)
        empty = hidden.all(dim=-1, keepdim=True)  # (..., Q, 1)
        empty = empty if bool(empty.any()) else None
    return hidden, empty
