"""FlashAttention's idea from scratch: the online softmax (在线softmax) and attention computed
tile by tile (分块), never holding the (Q, K) score matrix; and a meter for the bytes a call
allocates, to show it.

Legend: ... any leading (batch, head) dims, Q queries, K key-value pairs, D query/key size,
V value size, b block size. Mask convention: ``causal=True`` hides every key in a query's
future, aligned lower-right as ``causal_mask`` (query i sees keys j ≤ i + K − Q; True = takes
part). A query that sees no key at all gets an all-zero output, never NaN.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from .checks import (
    broadcast_shape, check_bool, check_floating, check_like, check_positive_int, check_qk_size,
    check_size,
)

__all__ = [
    "OnlineSoftmax", "online_softmax_start", "online_softmax_update", "online_softmax_result",
    "SKIPPED", "PARTIAL", "FULL", "tile_kinds", "tile_flops", "tiled_attention", "peak_bytes",
]

SKIPPED, PARTIAL, FULL = 0, 1, 2  # tile kinds: every key hidden / some hidden / none hidden
HALF = (torch.float16, torch.bfloat16)  # accumulated in float32


# ----------------------------------------------------------------------- the online softmax
class OnlineSoftmax(NamedTuple):
    """What a row of the online softmax carries from one block of keys to the next.

    ``max`` (..., 1): the largest score seen so far (−inf before any key); ``sum`` (..., 1):
    Σ exp(score − max) over the keys seen; ``out`` (..., V): Σ exp(score − max) · value, the
    output *not yet divided* by ``sum``. Both sums are always relative to the current ``max``.
    """

    max: torch.Tensor
    sum: torch.Tensor
    out: torch.Tensor


def online_softmax_start(
    rows: tuple[int, ...], value_size: int, *, dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> OnlineSoftmax:
    """The state before any key: max −inf, sum 0, out 0, for rows of shape ``rows`` (..., Q)."""
    return OnlineSoftmax(torch.full((*rows, 1), -math.inf, dtype=dtype, device=device),
                         torch.zeros((*rows, 1), dtype=dtype, device=device),
                         torch.zeros((*rows, value_size), dtype=dtype, device=device))


def online_softmax_update(
    state: OnlineSoftmax, scores: torch.Tensor, values: torch.Tensor,
) -> OnlineSoftmax:
    """Fold one block of keys into ``state``: ``scores`` (..., Q, n) of these n keys (−inf for
    a hidden key), ``values`` (..., n, V). Returns the new state; nothing is modified.

    m' = max(m, max scores); what was summed under m is rescaled by exp(m − m'):
    sum' = exp(m − m')·sum + Σ exp(s − m'),  out' = exp(m − m')·out + exp(s − m') @ values.
    """
    new_max = torch.maximum(state.max, scores.amax(dim=-1, keepdim=True))  # (..., Q, 1)
    # A row that has seen no visible key yet keeps max −inf; exp(−inf − (−inf)) would be NaN,
    # so such rows subtract 0 instead (their scores are −inf: exp gives exact zeros).
    shift = new_max.masked_fill(new_max == -math.inf, 0.0)  # (..., Q, 1)
    rescale = torch.exp(state.max - shift)  # (..., Q, 1): 0 for a row's first visible key
    p = torch.exp(scores - shift)  # (..., Q, n)
    return OnlineSoftmax(new_max,
                         rescale * state.sum + p.sum(dim=-1, keepdim=True),  # (..., Q, 1)
                         rescale * state.out + p @ values)  # (..., Q, V)


def online_softmax_result(state: OnlineSoftmax) -> torch.Tensor:
    """``out / sum`` (..., Q, V): the attention output over the keys seen so far; all zeros for
    a row that has seen no visible key (its sum is 0; any other row's sum is ≥ 1)."""
    return state.out / torch.where(state.sum > 0, state.sum, torch.ones_like(state.sum))


# ---------------------------------------------------------------------------------- tiles
def _block_bounds(n: int, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last index of each block of ``range(n)``: (⌈n/b⌉,) each (the last block may
    be shorter)."""
    first = torch.arange(0, n, block_size)
    return first, (first + block_size).clamp(max=n) - 1


def tile_kinds(
    num_queries: int, num_keys: int, block_size: int, *, causal: bool = False,
) -> torch.Tensor:
    """Which (query block, key block) tiles attention must compute: an int tensor
    (⌈Q/b⌉, ⌈K/b⌉) of ``FULL`` (every key of the tile visible to every query of it),
    ``PARTIAL`` (some hidden: computed, then masked) or ``SKIPPED`` (all hidden: never computed).
    Without ``causal`` every tile is FULL; with it, query i sees keys j ≤ i + K − Q."""
    for name, value in (("num_queries", num_queries), ("num_keys", num_keys),
                        ("block_size", block_size)):
        check_positive_int(name, value)
    q_first, q_last = _block_bounds(num_queries, block_size)
    k_first, k_last = _block_bounds(num_keys, block_size)
    if not causal:
        return torch.full((len(q_first), len(k_first)), FULL)
    offset = num_keys - num_queries
    full = k_last[None, :] <= q_first[:, None] + offset  # even the block's first query sees all
    skipped = k_first[None, :] > q_last[:, None] + offset  # even its last query sees none
    return torch.where(full, FULL, torch.where(skipped, SKIPPED, PARTIAL))  # (⌈Q/b⌉, ⌈K/b⌉)


def tile_flops(
    num_queries: int, num_keys: int, block_size: int, qk_size: int, value_size: int, *,
    causal: bool = False,
) -> tuple[int, int]:
    """(FLOPs of the tiles computed, FLOPs of all tiles): each tile of bq queries and bk keys
    costs 2·bq·bk·D for its scores Q Kᵀ and 2·bq·bk·V for P·V (one multiply and one add each).
    All tiles is what attention without tiling computes, causal or not."""
    check_positive_int("qk_size", qk_size)
    check_positive_int("value_size", value_size)
    kinds = tile_kinds(num_queries, num_keys, block_size, causal=causal)
    q_first, q_last = _block_bounds(num_queries, block_size)
    k_first, k_last = _block_bounds(num_keys, block_size)
    sizes = (q_last - q_first + 1)[:, None] * (k_last - k_first + 1)[None, :]  # (⌈Q/b⌉, ⌈K/b⌉)
    per_entry = 2 * (qk_size + value_size)
    return int(sizes[kinds != SKIPPED].sum()) * per_entry, int(sizes.sum()) * per_entry


def _tile_visible(q0: int, q1: int, k0: int, k1: int, offset: int,
                  device: torch.device) -> torch.Tensor:
    """Boolean (q1 − q0, k1 − k0), True = takes part: key j visible to query i iff
    j ≤ i + offset, for the queries q0 … q1 − 1 and keys k0 … k1 − 1 of one tile."""
    queries = torch.arange(q0, q1, device=device)[:, None]  # (bq, 1)
    keys = torch.arange(k0, k1, device=device)[None, :]  # (1, bk)
    return keys <= queries + offset  # (bq, bk)


# --------------------------------------------------------------------- tiled attention
def _check_inputs(queries: object, keys: object, values: object, block_size: object) -> None:
    for name, t, layout in (("queries", queries, "(..., Q, D)"), ("keys", keys, "(..., K, D)"),
                            ("values", values, "(..., K, V)")):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of at least 2 dimensions {layout}, got {got}")
        check_floating(name, t)
    if not queries.dtype == keys.dtype == values.dtype:
        raise ValueError(f"queries, keys and values must share one dtype, got {queries.dtype}, "
                         f"{keys.dtype} and {values.dtype}")
    check_like("keys", keys, "queries", queries)  # (the dtypes agree: this checks the device)
    check_like("values", values, "queries", queries)
    check_qk_size(queries, keys)
    check_size("number of values (K, one per key)", keys.shape[-2], values.shape[-2])
    if broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2]) is None:
        raise ValueError(
            f"leading dims must broadcast: queries {tuple(queries.shape)}, keys "
            f"{tuple(keys.shape)}, values {tuple(values.shape)}")
    check_positive_int("block_size", block_size)


def tiled_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
    block_size: int = 64, causal: bool = False,
) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) V, computed one (query block, key block) tile at a time with the
    online softmax, as FlashAttention does: no (Q, K) matrix is ever held, at most a
    (b, b) block of scores per leading index.

    ``queries`` (..., Q, D), ``keys`` (..., K, D), ``values`` (..., K, V), leading dims
    broadcastable → (..., Q, V) in the inputs' dtype. Any Q, K and ``block_size`` ≥ 1 (the
    last block of a row or column may be shorter). float16 / bfloat16 are accumulated in
    float32. ``causal``: lower-right aligned as ``causal_mask`` (True = takes part); tiles
    whose keys are all in the future are skipped, not computed; a query that sees no key
    (the first Q − K ones when Q > K) gets zeros. The inputs are never modified.
    """
    _check_inputs(queries, keys, values, block_size)
    block_size = int(block_size)
    check_bool("causal", causal)
    Q, K = queries.shape[-2], keys.shape[-2]
    work = torch.float32 if queries.dtype in HALF else queries.dtype  # accumulation dtype
    scale = 1.0 / math.sqrt(queries.shape[-1])
    lead = broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
    out = torch.zeros((*lead, Q, values.shape[-1]), dtype=queries.dtype, device=queries.device)
    if Q == 0 or K == 0:
        return out  # no queries, or nothing to see: zeros
    kinds = tile_kinds(Q, K, block_size, causal=causal).tolist()  # (⌈Q/b⌉, ⌈K/b⌉): tiny
    for i, q0 in enumerate(range(0, Q, block_size)):
        q1 = min(q0 + block_size, Q)
        q = queries[..., q0:q1, :].to(work) * scale  # (..., bq, D): scaled on the Q side
        state = online_softmax_start((*lead, q1 - q0), values.shape[-1], dtype=work,
                                     device=queries.device)
        for j, k0 in enumerate(range(0, K, block_size)):
            if kinds[i][j] == SKIPPED:
                continue  # every key of this tile is in every query's future
            k1 = min(k0 + block_size, K)
            scores = q @ keys[..., k0:k1, :].to(work).transpose(-2, -1)  # (..., bq, bk)
            if kinds[i][j] == PARTIAL:
                visible = _tile_visible(q0, q1, k0, k1, K - Q, queries.device)  # (bq, bk)
                scores = scores.masked_fill(~visible, -math.inf)
            state = online_softmax_update(state, scores, values[..., k0:k1, :].to(work))
        out[..., q0:q1, :] = online_softmax_result(state)  # (..., bq, V), cast to the dtype
    return out


# --------------------------------------------------------------------------- the meter
class _LiveBytes(TorchFunctionMode):
    """Counts the bytes of every new storage a PyTorch function returns while it is alive."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}  # storage address → bytes
        self.now = self.peak = 0

    def _freed(self, address: int) -> None:
        self.now -= self.live.pop(address, 0)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                 if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
                continue
            storage = t.untyped_storage()
            address, size = storage.data_ptr(), storage.nbytes()
            if size == 0 or address in given or address in self.live:
                continue  # a view of an input or of a tensor already counted
            self.live[address] = size
            self.now += size
            self.peak = max(self.peak, self.now)
            weakref.finalize(storage, self._freed, address)  # when its memory is released
        return out


def peak_bytes(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Peak bytes of memory that ``fn()`` allocates on ``device`` beyond what was already
    allocated (its result included, freed at the end).

    CUDA: the caching allocator's own counter (``torch.cuda.max_memory_allocated``), which sees
    everything, fused kernels' scratch included. CPU: PyTorch keeps no such counter, so every
    PyTorch function and tensor method called from Python is watched (a ``TorchFunctionMode``)
    and the bytes of each new tensor storage it returns are counted while that storage is
    alive. That is exact for code written as a sequence of such calls (the naive path,
    ``tiled_attention``); what one call allocates *inside* itself and frees before returning
    is not seen (e.g. the scratch blocks of SDPA's fused CPU kernel, a few per thread).
    Watching costs tens of µs per call.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return peak
    if device.type != "cpu":
        raise ValueError(f"peak_bytes measures on 'cpu' or 'cuda', got {device.type!r}")
    with _LiveBytes() as meter:
        result = fn()
        del result
    return meter.peak
