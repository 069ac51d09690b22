"""FlashAttention's idea from scratch: the online softmax (在线softmax) and attention computed
tile by tile (分块), forward and backward by recomputation (重计算), never holding the (Q, K)
score matrix; the traffic to and from a GPU's main memory (HBM) that tiling saves; a meter for
the bytes a call allocates, to show it; and a rule that sizes a GPU run to its free memory.

Legend: ... any leading (batch, head) dims, Q queries, K key-value pairs, D query/key size,
V value size, b block size, W window. Mask convention: ``causal=True`` hides every key in a
query's future, aligned lower-right as ``causal_mask`` (query i sees keys j ≤ i + K − Q; True =
takes part); ``window=W`` (only with ``causal``) also hides the keys W or more positions behind
it (sliding-window attention: keys i + K − Q − W < j ≤ i + K − Q). A query that sees no key at
all gets an all-zero output, never NaN.
"""

from __future__ import annotations

import math
import numbers
import weakref
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from .attention import check_window
from .checks import (
    as_device, as_usable_device, broadcast_shape, check_bool, check_floating, check_holds_data,
    check_int, check_like, check_positive_int, check_qk_size, check_real, check_size,
)

__all__ = [
    "OnlineSoftmax", "online_softmax_start", "online_softmax_update", "online_softmax_result",
    "SKIPPED", "PARTIAL", "FULL", "tile_kinds", "tile_flops", "hbm_accesses", "tiled_attention",
    "peak_bytes", "lengths_that_fit",
]

SKIPPED, PARTIAL, FULL = 0, 1, 2  # tile kinds: every key hidden / some hidden / none hidden
HALF = (torch.float16, torch.bfloat16)  # accumulated in float32


# ----------------------------------------------------------------------- the online softmax
class _Fields(NamedTuple):
    max: torch.Tensor
    sum: torch.Tensor
    out: torch.Tensor


class OnlineSoftmax(_Fields):
    """What a row of the online softmax carries from one block of keys to the next.

    ``max`` (..., 1): the largest score seen so far (−inf before any key); ``sum`` (..., 1):
    Σ exp(score − max) over the keys seen; ``out`` (..., V): Σ exp(score − max) · value, the
    output *not yet divided* by ``sum``. Both sums are always relative to the current ``max``.
    The three are floating tensors of one dtype and device; the shapes are checked when built.
    """

    __slots__ = ()

    def __new__(cls, max: torch.Tensor, sum: torch.Tensor, out: torch.Tensor) -> OnlineSoftmax:
        _check_state_fields(max, sum, out, "")
        return super().__new__(cls, max, sum, out)


def _check_state_fields(m: object, s: object, o: object, prefix: str) -> None:
    """Raise unless max (..., 1), sum (..., 1) and out (..., V) agree (names get ``prefix``)."""
    for name, t in (("max", m), ("sum", s), ("out", o)):
        check_floating(prefix + name, t)
    check_holds_data(prefix + "max", m)  # (the others: on max's device)
    check_like(prefix + "sum", s, prefix + "max", m)
    check_like(prefix + "out", o, prefix + "max", m)
    if m.dim() < 1 or m.shape[-1] != 1:
        raise ValueError(f"{prefix}max must be a tensor of shape (..., 1), got shape "
                         f"{tuple(m.shape)}")
    if s.shape != m.shape:
        raise ValueError(f"{prefix}sum must be a tensor of shape (..., 1) = {tuple(m.shape)} as "
                         f"{prefix}max, got shape {tuple(s.shape)}")
    if o.dim() != m.dim() or o.shape[:-1] != m.shape[:-1]:
        rows = ", ".join(str(n) for n in (*m.shape[:-1], "V"))
        raise ValueError(f"{prefix}out must be a tensor of shape (..., V) = ({rows}) as "
                         f"{prefix}max, got shape {tuple(o.shape)}")


def _check_state(state: object) -> None:
    if not isinstance(state, OnlineSoftmax):
        raise ValueError("state must be an OnlineSoftmax (from online_softmax_start or "
                         f"online_softmax_update), got {type(state).__name__}")
    _check_state_fields(*state, "state.")


def online_softmax_start(
    rows: tuple[int, ...], value_size: int, *, dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> OnlineSoftmax:
    """The state before any key: max −inf, sum 0, out 0, for rows of shape ``rows`` (..., Q):
    a tuple of sizes, ``()`` for a single row. ``dtype``: a floating dtype."""
    if not isinstance(rows, tuple) or not all(
            isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 0 for n in rows):
        raise ValueError(f"rows must be a tuple of non-negative ints (..., Q), got {rows!r}")
    rows = tuple(int(n) for n in rows)
    check_positive_int("value_size", value_size)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    device = as_usable_device("device", device)  # None: PyTorch's default
    return OnlineSoftmax(torch.full((*rows, 1), -math.inf, dtype=dtype, device=device),
                         torch.zeros((*rows, 1), dtype=dtype, device=device),
                         torch.zeros((*rows, int(value_size)), dtype=dtype, device=device))


def _check_block(state: OnlineSoftmax, scores: object, values: object) -> None:
    """Raise unless ``scores`` (..., Q, n) and ``values`` (..., n, V) fit ``state``."""
    _check_state(state)
    rows = tuple(state.max.shape[:-1])  # (..., Q)
    check_floating("scores", scores)
    if scores.dim() != len(rows) + 1 or tuple(scores.shape[:-1]) != rows:
        layout = ", ".join(str(n) for n in (*rows, "n"))
        raise ValueError(f"scores must be a tensor of shape (..., Q, n) = ({layout}) as the "
                         f"state's rows, got shape {tuple(scores.shape)}")
    check_like("scores", scores, "state.max", state.max)
    check_floating("values", values)
    if values.dim() < 2:
        raise ValueError("values must be a tensor of at least 2 dimensions (..., n, V), got "
                         f"shape {tuple(values.shape)}")
    check_like("values", values, "state.max", state.max)
    check_size("number of values (n, one per score)", scores.shape[-1], values.shape[-2])
    check_size("value size (V, as state.out)", state.out.shape[-1], values.shape[-1])
    if broadcast_shape(values.shape[:-2], rows[:-1]) != rows[:-1]:
        raise ValueError(f"values must have leading dims that broadcast to {rows[:-1]} (the "
                         f"state's, without Q), got shape {tuple(values.shape)}")


def online_softmax_update(
    state: OnlineSoftmax, scores: torch.Tensor, values: torch.Tensor,
) -> OnlineSoftmax:
    """Fold one block of keys into ``state``: ``scores`` (..., Q, n) of these n keys (−inf for
    a hidden key; (n,) for a state of rows ``()``), ``values`` (..., n, V) whose leading dims
    broadcast to the state's. Returns the new state; nothing is modified.

    m' = max(m, max scores); what was summed under m is rescaled by exp(m − m'):
    sum' = exp(m − m')·sum + Σ exp(s − m'),  out' = exp(m − m')·out + exp(s − m') @ values.
    """
    _check_block(state, scores, values)
    return _online_softmax_update(state, scores, values)


def _online_softmax_update(
    state: OnlineSoftmax, scores: torch.Tensor, values: torch.Tensor,
) -> OnlineSoftmax:
    """``online_softmax_update`` without the checks (tiled_attention's inner loop, whose inputs
    are checked once)."""
    if scores.shape[-1] == 0:
        return state  # an empty block: nothing to fold in
    new_max = torch.maximum(state.max, scores.amax(dim=-1, keepdim=True))  # (..., Q, 1)
    # A row that has seen no visible key yet keeps max −inf; exp(−inf − (−inf)) would be NaN,
    # so such rows subtract 0 instead (their scores are −inf: exp gives exact zeros).
    shift = new_max.masked_fill(new_max == -math.inf, 0.0)  # (..., Q, 1)
    rescale = torch.exp(state.max - shift)  # (..., Q, 1): 0 for a row's first visible key
    p = torch.exp(scores - shift)  # (..., Q, n)
    return OnlineSoftmax._make((new_max,  # (_make: the fields are right by construction)
                                rescale * state.sum + p.sum(dim=-1, keepdim=True),  # (..., Q, 1)
                                rescale * state.out + p @ values))  # (..., Q, V)


def online_softmax_result(state: OnlineSoftmax) -> torch.Tensor:
    """``out / sum`` (..., Q, V): the attention output over the keys seen so far; all zeros for
    a row that has seen no visible key (its sum is 0; any other row's sum is ≥ 1)."""
    _check_state(state)
    return state.out / torch.where(state.sum > 0, state.sum, torch.ones_like(state.sum))


# ---------------------------------------------------------------------------------- tiles
def _block_bounds(n: int, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last index of each block of ``range(n)``: (⌈n/b⌉,) each (the last block may
    be shorter)."""
    first = torch.arange(0, n, block_size)
    return first, (first + block_size).clamp(max=n) - 1


def tile_kinds(
    num_queries: int, num_keys: int, block_size: int, *, causal: bool = False,
    window: int | None = None,
) -> torch.Tensor:
    """Which (query block, key block) tiles attention must compute: an int tensor
    (⌈Q/b⌉, ⌈K/b⌉) of ``FULL`` (every key of the tile visible to every query of it),
    ``PARTIAL`` (some hidden: computed, then masked) or ``SKIPPED`` (all hidden: never computed).
    Without ``causal`` every tile is FULL; with it, query i sees keys j ≤ i + K − Q, and with
    ``window=W`` (an int ≥ 1, only with ``causal``) only those with j > i + K − Q − W: the tiles
    of a band, about ⌈W/b⌉ + 1 per query block, however long the sequence."""
    for name, value in (("num_queries", num_queries), ("num_keys", num_keys),
                        ("block_size", block_size)):
        check_positive_int(name, value)
    check_bool("causal", causal)
    window = check_window(window, causal)
    q_first, q_last = _block_bounds(num_queries, block_size)
    k_first, k_last = _block_bounds(num_keys, block_size)
    if not causal:
        return torch.full((len(q_first), len(k_first)), FULL)
    offset = num_keys - num_queries
    # how far key j lies behind query i, i + offset − j, ranges over one tile from `nearest`
    # (its last key behind its first query) to `farthest` (its first key behind its last query)
    nearest = q_first[:, None] + offset - k_last[None, :]  # (⌈Q/b⌉, ⌈K/b⌉)
    farthest = q_last[:, None] + offset - k_first[None, :]  # (⌈Q/b⌉, ⌈K/b⌉)
    full = nearest >= 0  # even the block's first query sees the tile's last key
    skipped = farthest < 0  # even its last query sees none: all in the future
    if window is not None:
        full &= farthest < window  # even its last query still sees the tile's first key
        skipped |= nearest >= window  # even its first query sees none: all too far behind
    return torch.where(full, FULL, torch.where(skipped, SKIPPED, PARTIAL))  # (⌈Q/b⌉, ⌈K/b⌉)


def tile_flops(
    num_queries: int, num_keys: int, block_size: int, qk_size: int, value_size: int, *,
    causal: bool = False, window: int | None = None,
) -> tuple[int, int]:
    """(FLOPs of the tiles computed, FLOPs of all tiles): each tile of bq queries and bk keys
    costs 2·bq·bk·D for its scores Q Kᵀ and 2·bq·bk·V for P·V (one multiply and one add each).
    All tiles is what attention without tiling computes, causal or not. ``causal`` and
    ``window`` as in ``tile_kinds``: with a fixed window the tiles computed grow linearly with
    the length, all tiles quadratically."""
    qk_size = check_positive_int("qk_size", qk_size)
    value_size = check_positive_int("value_size", value_size)
    kinds = tile_kinds(num_queries, num_keys, block_size, causal=causal, window=window)
    q_first, q_last = _block_bounds(num_queries, block_size)
    k_first, k_last = _block_bounds(num_keys, block_size)
    sizes = (q_last - q_first + 1)[:, None] * (k_last - k_first + 1)[None, :]  # (⌈Q/b⌉, ⌈K/b⌉)
    per_entry = 2 * (qk_size + value_size)
    return int(sizes[kinds != SKIPPED].sum()) * per_entry, int(sizes.sum()) * per_entry


def hbm_accesses(
    num_queries: int, num_keys: int, block_size: int, qk_size: int, value_size: int, *,
    causal: bool = False, window: int | None = None,
) -> tuple[int, int]:
    """(standard, tiled): how many numbers attention reads from or writes to a GPU's main
    memory (HBM), the quantity FlashAttention's tiling reduces (Dao et al. 2022, Theorem 2).

    standard (the paper's Algorithm 0): read Q and K, write the scores S, read S back, write
    the weights P, read P back and V, write O: Q·D + K·D + 4·Q·K + K·V + Q·V, Θ(Ld + L²) for
    Q = K = L (causal or not: the mask is applied while S is read for the softmax).
    tiled (FlashAttention-2's loop order, a query block held on chip): read each query block
    once and write its output once, and read the key and value block of every tile computed
    (skipped tiles read nothing): Q·D + Q·V + Σ over computed tiles bk·(D + V). With M numbers
    of on-chip memory, blocks of b ≈ M / (4·D) rows and Q = K = L this is Θ(L²·D² / M).
    The log-sum-exp a training forward also writes (one number per query) is not counted.
    ``causal`` and ``window`` as in ``tile_kinds`` (the standard count is the same with them)."""
    qk_size = check_positive_int("qk_size", qk_size)
    value_size = check_positive_int("value_size", value_size)
    kinds = tile_kinds(num_queries, num_keys, block_size, causal=causal,
                       window=window)  # (⌈Q/b⌉, ⌈K/b⌉)
    Q, K = int(num_queries), int(num_keys)
    standard = Q * qk_size + K * qk_size + 4 * Q * K + K * value_size + Q * value_size
    k_first, k_last = _block_bounds(K, int(block_size))
    widths = (k_last - k_first + 1)[None, :].expand(kinds.shape)  # (⌈Q/b⌉, ⌈K/b⌉): bk
    tiled = Q * (qk_size + value_size) + int(widths[kinds != SKIPPED].sum()) * (qk_size + value_size)
    return standard, tiled


def _tile_visible(q0: int, q1: int, k0: int, k1: int, offset: int, window: int | None,
                  device: torch.device) -> torch.Tensor:
    """Boolean (q1 − q0, k1 − k0), True = takes part: key j visible to query i iff
    0 ≤ i + offset − j (< ``window`` when one is given), for the queries q0 … q1 − 1 and keys
    k0 … k1 − 1 of one tile."""
    queries = torch.arange(q0, q1, device=device)[:, None]  # (bq, 1)
    keys = torch.arange(k0, k1, device=device)[None, :]  # (1, bk)
    behind = queries + offset - keys  # (bq, bk): how far key j lies behind query i
    return (behind >= 0) if window is None else (behind >= 0) & (behind < window)  # (bq, bk)


# --------------------------------------------------------------------- tiled attention
def _check_inputs(queries: object, keys: object, values: object, block_size: object) -> None:
    for name, t, layout in (("queries", queries, "(..., Q, D)"), ("keys", keys, "(..., K, D)"),
                            ("values", values, "(..., K, V)")):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of at least 2 dimensions {layout}, got {got}")
        check_floating(name, t)
    check_holds_data("queries", queries)  # (keys and values: on the queries' device)
    if not queries.dtype == keys.dtype == values.dtype:
        raise ValueError(f"queries, keys and values must share one dtype, got {queries.dtype}, "
                         f"{keys.dtype} and {values.dtype}")
    check_like("keys", keys, "queries", queries)  # (the dtypes agree: this checks the device)
    check_like("values", values, "queries", queries)
    check_qk_size(queries, keys)
    check_size("number of values (K, one per key)", keys.shape[-2], values.shape[-2])
    if broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2]) is None:
        raise ValueError(
            f"leading dims of queries, keys and values must broadcast, got shapes "
            f"{tuple(queries.shape)}, {tuple(keys.shape)} and {tuple(values.shape)}")
    check_positive_int("block_size", block_size)


def tiled_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
    block_size: int = 64, causal: bool = False, window: int | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) V, computed one (query block, key block) tile at a time with the
    online softmax, as FlashAttention does: no (Q, K) matrix is ever held, at most a
    (b, b) block of scores per leading index, forward and backward.

    ``queries`` (..., Q, D), ``keys`` (..., K, D), ``values`` (..., K, V), leading dims
    broadcastable → (..., Q, V) in the inputs' dtype. Any Q, K and ``block_size`` ≥ 1 (the
    last block of a row or column may be shorter). float16 / bfloat16 are accumulated in
    float32. ``causal``: lower-right aligned as ``causal_mask`` (True = takes part); tiles
    whose keys are all in the future are skipped, not computed. ``window=W`` (an int ≥ 1, only
    with ``causal``): sliding-window attention, query i sees only the keys
    i + K − Q − W < j ≤ i + K − Q, and tiles whose keys are all too far behind are skipped
    too, forward and backward: about ⌈W/b⌉ + 1 tiles per query block, a cost linear in the
    length. A query that sees no key (the first Q − K ones when Q > K) gets zeros, and a zero
    gradient. The inputs are never modified. When an input requires grad, autograd keeps only
    the inputs, the output and one log-sum-exp per query (not every tile): the backward
    recomputes the tiles (``_tiled_backward``, FlashAttention's). That backward is itself made
    of differentiable ops, so double backward (``create_graph=True``, e.g. a gradient penalty)
    and ``torch.func`` (``grad``, ``jacrev``, ``vmap``) work; the graph such a first gradient
    builds holds its tiles.
    Forward mode (``jvp``, ``jacfwd``) differentiates the plain loop when no input requires grad;
    it has no rule of its own, so ``torch.func.hessian`` raises PyTorch's NotImplementedError.
    """
    _check_inputs(queries, keys, values, block_size)
    check_bool("causal", causal)
    window = check_window(window, causal)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (queries, keys, values)):
        return _TiledAttention.apply(queries, keys, values, int(block_size), bool(causal),
                                     window)[0]
    return _tiled_forward(queries, keys, values, int(block_size), bool(causal), window)[0]


def _tiled_forward(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, block_size: int,
    causal: bool, window: int | None = None, *, keep_lse: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The tiled loop: the output (..., Q, V) in the inputs' dtype and, with ``keep_lse`` (for
    the backward), each query's log-sum-exp of its scores, m + log ℓ (..., Q, 1) in the
    accumulation dtype (+inf for a query that sees no key: the backward's exp(s − lse) is then
    0); else None. Each query block's rows are written into the output in place (joining the
    blocks with ``torch.cat`` would hold the output twice at the end)."""
    Q, K = queries.shape[-2], keys.shape[-2]
    work = torch.float32 if queries.dtype in HALF else queries.dtype  # accumulation dtype
    scale = 1.0 / math.sqrt(queries.shape[-1])
    lead = broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
    if Q == 0 or K == 0:  # no queries, or nothing to see: zeros
        out = torch.zeros((*lead, Q, values.shape[-1]), dtype=queries.dtype, device=queries.device)
        lse = (torch.full((*lead, Q, 1), math.inf, dtype=work, device=queries.device)
               if keep_lse else None)  # (..., Q, 1)
        return out, lse
    kinds = tile_kinds(Q, K, block_size, causal=causal,
                       window=window).tolist()  # (⌈Q/b⌉, ⌈K/b⌉): tiny
    out = _buffer(queries, keys, values, values.shape[-1], 0.0, queries.dtype)  # (..., Q, V)
    lse = _buffer(queries, keys, values, 1, math.inf, work) if keep_lse else None  # (..., Q, 1)
    for i, q0 in enumerate(range(0, Q, block_size)):
        q1 = min(q0 + block_size, Q)
        q = queries[..., q0:q1, :].to(work) * scale  # (..., bq, D): scaled on the Q side
        state = online_softmax_start((*lead, q1 - q0), values.shape[-1], dtype=work,
                                     device=queries.device)
        for j, k0 in enumerate(range(0, K, block_size)):
            if kinds[i][j] == SKIPPED:
                continue  # every key of this tile is in every query's future, or too far behind
            k1 = min(k0 + block_size, K)
            scores = q @ keys[..., k0:k1, :].to(work).transpose(-2, -1)  # (..., bq, bk)
            if kinds[i][j] == PARTIAL:
                visible = _tile_visible(q0, q1, k0, k1, K - Q, window,
                                        queries.device)  # (bq, bk)
                scores = scores.masked_fill(~visible, -math.inf)
            state = _online_softmax_update(state, scores, values[..., k0:k1, :].to(work))
        out[..., q0:q1, :] = online_softmax_result(state)  # (..., bq, V), cast to the dtype
        if keep_lse:
            seen = state.sum > 0  # (..., bq, 1): False for a query that saw no key
            lse[..., q0:q1, :] = torch.where(seen, state.max + torch.log(state.sum), math.inf)
    return out, lse


def _buffer(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, size: int,
            fill: float, dtype: torch.dtype) -> torch.Tensor:
    """A (..., Q, size) tensor of ``fill`` over the inputs' broadcast leading dims, made from
    the inputs (``zeros_like`` reads no values) rather than with ``torch.full``: under
    ``torch.func.vmap`` it is then batched whenever an input is, and the tiled loop can write
    its rows in place (vmap refuses a batched write into an unbatched buffer)."""
    seed = sum(torch.zeros_like(t[..., :1, :1], dtype=dtype) for t in (queries, keys, values))
    shape = (*seed.shape[:-2], queries.shape[-2], size)  # (..., Q, size)
    return (seed + fill).expand(shape).clone(memory_format=torch.contiguous_format)


class _TiledAttention(torch.autograd.Function):
    """tiled_attention under autograd: the forward saves the inputs (which exist anyway), the
    output and the log-sum-exp per query, O(Q + K) memory; the backward recomputes the tiles.

    The log-sum-exp is a second output (tiled_attention drops it) so that it is differentiable:
    a double backward differentiates the backward, which uses it. ``forward`` without ``ctx``
    plus ``setup_context`` and ``generate_vmap_rule``: what ``torch.func`` needs."""

    generate_vmap_rule = True  # vmap runs forward and backward on batched tensors as they are

    @staticmethod
    def forward(queries, keys, values, block_size, causal, window):  # runs without grad
        return _tiled_forward(queries, keys, values, block_size, causal, window, keep_lse=True)

    @staticmethod
    def setup_context(ctx, inputs, output):
        queries, keys, values, block_size, causal, window = inputs
        ctx.save_for_backward(queries, keys, values, *output)  # q, k, v, out, lse
        ctx.block_size, ctx.causal, ctx.window = block_size, causal, window

    @staticmethod
    def backward(ctx, grad_out, grad_lse):  # differentiable ops only: double backward works
        grads = _tiled_backward(*ctx.saved_tensors, grad_out, ctx.block_size, ctx.causal,
                                ctx.window, grad_lse=grad_lse)
        return (*(g if needed else None for g, needed in zip(grads, ctx.needs_input_grad)),
                None, None, None)  # nothing for block_size, causal and window


def _plus(total: torch.Tensor | None, term: torch.Tensor) -> torch.Tensor:
    """``total + term`` (``term`` when ``total`` is None), out of place: what autograd and
    vmap see."""
    return term if total is None else total + term


def _tiled_backward(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, out: torch.Tensor,
    lse: torch.Tensor, grad_out: torch.Tensor, block_size: int, causal: bool,
    window: int | None = None, *, grad_lse: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention's backward (Dao et al. 2022, Algorithm 2, in FlashAttention-2's form):
    no (Q, K) matrix either. Each tile's weights are recomputed from the saved log-sum-exp,
    P = exp(S − lse), and with dO = ``grad_out`` (..., Q, V):

        D = rowsum(dO ∘ O) − dlse          (..., Q, 1), = Σ_k P dP − dlse, once
        dV_k += Pᵀ dO_q,   dP = dO_q V_kᵀ,   dS = P ∘ (dP − D_q)
        dQ_q += dS K_k · scale,   dK_k += dSᵀ Q_q · scale

    where dlse = ``grad_lse`` (..., Q, 1), the gradient reaching the log-sum-exp (only in a
    double backward; ∂lse/∂S = P, so it joins D). Key blocks outside, query blocks inside
    (FlashAttention-2's order: a GPU kernel keeps dK_k and dV_k on chip). SKIPPED tiles (in
    the future, or beyond the ``window``) are skipped, PARTIAL ones masked (P = 0 there). A
    query that sees no key has lse = +inf, so P = 0 and zero gradients. Sums are built out of
    place (no buffer written in place, nothing detached), so that this function is itself
    differentiable and vmappable. Returns dQ, dK, dV, each summed over the leading dims its
    input was broadcast along, in the inputs' dtype.
    """
    Q, K = queries.shape[-2], keys.shape[-2]
    work = torch.float32 if queries.dtype in HALF else queries.dtype  # accumulation dtype
    scale = 1.0 / math.sqrt(queries.shape[-1])
    lead = broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
    zeros = lambda n, x: torch.zeros((*lead, n, x.shape[-1]), dtype=work, device=x.device)
    if Q == 0 or K == 0:
        d_q, d_k, d_v = zeros(Q, queries), zeros(K, keys), zeros(K, values)
    else:
        kinds = tile_kinds(Q, K, block_size, causal=causal,
                           window=window).tolist()  # (⌈Q/b⌉, ⌈K/b⌉)
        d_o = grad_out.to(work)  # (..., Q, V)
        delta = (d_o * out.to(work)).sum(dim=-1, keepdim=True)  # (..., Q, 1): D
        if grad_lse is not None:
            delta = delta - grad_lse.to(work)
        scaled = queries.to(work) * scale  # (..., Q, D)
        q_starts = range(0, Q, block_size)
        d_q_blocks: list[torch.Tensor | None] = [None] * len(q_starts)  # (..., bq, D) each
        d_k_blocks, d_v_blocks = [], []  # (..., bk, D) and (..., bk, V) per key block
        for j, k0 in enumerate(range(0, K, block_size)):
            k1 = min(k0 + block_size, K)
            k, v = keys[..., k0:k1, :].to(work), values[..., k0:k1, :].to(work)  # (..., bk, ·)
            d_k_j = d_v_j = None
            for i, q0 in enumerate(q_starts):
                if kinds[i][j] == SKIPPED:
                    continue
                q1 = min(q0 + block_size, Q)
                q, do = scaled[..., q0:q1, :], d_o[..., q0:q1, :]  # (..., bq, D), (..., bq, V)
                s = q @ k.transpose(-2, -1)  # (..., bq, bk): the forward's scores again
                if kinds[i][j] == PARTIAL:
                    visible = _tile_visible(q0, q1, k0, k1, K - Q, window,
                                            queries.device)  # (bq, bk)
                    s = s.masked_fill(~visible, -math.inf)
                p = torch.exp(s - lse[..., q0:q1, :])  # (..., bq, bk): the forward's weights
                d_v_j = _plus(d_v_j, p.transpose(-2, -1) @ do)  # (..., bk, V)
                d_s = p * (do @ v.transpose(-2, -1) - delta[..., q0:q1, :])  # (..., bq, bk)
                d_q_blocks[i] = _plus(d_q_blocks[i], d_s @ k)  # (..., bq, D), scaled below
                d_k_j = _plus(d_k_j, d_s.transpose(-2, -1) @ q)  # (..., bk, D): q has the scale
            d_k_blocks.append(zeros(k1 - k0, keys) if d_k_j is None else d_k_j)
            d_v_blocks.append(zeros(k1 - k0, values) if d_v_j is None else d_v_j)
        d_q = torch.cat([zeros(min(q0 + block_size, Q) - q0, queries) if d is None else d
                         for q0, d in zip(q_starts, d_q_blocks)], dim=-2) * scale  # (..., Q, D)
        d_k, d_v = torch.cat(d_k_blocks, dim=-2), torch.cat(d_v_blocks, dim=-2)  # (..., K, ·)
    return tuple(g.sum_to_size(x.shape).to(x.dtype)  # (sum over broadcast leading dims)
                 for g, x in ((d_q, queries), (d_k, keys), (d_v, values)))


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
    Under autograd: what the graph saves for backward is seen when it is a tensor such a call
    returned (the naive path's scores and weights), not when a call keeps it to itself (SDPA's
    log-sum-exp); a backward (``torch.autograd.grad``, ``.backward()``) is one call, so only
    the gradients it returns are seen, nothing it allocates inside. Watching costs tens of µs
    per call. ``fn``: a function of no arguments; ``device``: 'cpu' or a CUDA device present.
    """
    if not callable(fn):
        raise ValueError("fn must be callable (a function of no arguments), got "
                         f"{type(fn).__name__}")
    device = as_usable_device("device", as_device("device", device))  # (None is not one)
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda' for peak_bytes, got {device}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return peak
    with _LiveBytes() as meter:
        result = fn()
        del result
    return meter.peak


# ------------------------------------------------------------ sizing a run to a GPU's memory
def lengths_that_fit(
    free_bytes: int, lengths: Sequence[int], *, batch: int, heads: int, head_size: int,
    bytes_per_number: int, share: float = 0.8,
) -> tuple[int, ...]:
    """The lengths L of ``lengths`` (in their order) at which attention that builds (L, L)
    matrices fits in ``share`` of ``free_bytes`` (e.g. the first number of
    ``torch.cuda.mem_get_info()``): estimated peak ≤ share · free_bytes, with

        peak = 4 · B·H·L²·bytes  +  16 · B·H·L·d·bytes

    four (B, H, L, L) matrices (the naive path holds the scores and the weights at once; SDPA's
    math backend the scores, the weights, a mask of fully masked rows and the weights again)
    and sixteen (B, H, L, d) tensors' worth (q, k, v, and up to five outputs kept in float32 for
    comparison). A pure function of the
    figures given: no GPU needed. ``lengths``: a list or tuple of positive ints; ``share`` in
    (0, 1]. An estimate, not a guarantee: run what remains under ``torch.cuda.OutOfMemoryError``.
    """
    free_bytes = check_int("free_bytes", free_bytes, 0)
    if not isinstance(lengths, (list, tuple)) or not all(
            isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1 for n in lengths):
        raise ValueError(f"lengths must be a list or tuple of positive ints, got {lengths!r}")
    batch, heads = check_positive_int("batch", batch), check_positive_int("heads", heads)
    head_size = check_positive_int("head_size", head_size)
    bytes_per_number = check_positive_int("bytes_per_number", bytes_per_number)
    share = check_real("share", share, above=0.0)
    if share > 1:
        raise ValueError(f"share must be a finite number in (0, 1], got {share!r}")
    rows = batch * heads  # (B, H)
    return tuple(int(L) for L in lengths
                 if (4 * rows * int(L) ** 2 + 16 * rows * int(L) * head_size) * bytes_per_number
                 <= share * free_bytes)
