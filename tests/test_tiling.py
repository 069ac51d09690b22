"""tiled_attention and the online softmax against PyTorch's SDPA and formulas written out here;
proof that no (Q, K) matrix is ever allocated; the tile plan against a brute-force count."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import helpers
from helpers import tiled_attention
from helpers.tiling import (
    FULL, PARTIAL, SKIPPED, online_softmax_result, online_softmax_start, online_softmax_update,
    peak_bytes, tile_flops, tile_kinds,
)
from tests.conftest import FLOAT_DTYPES

# |tiled − exact| allowed, per dtype: half precision is accumulated in float32, so only the
# final rounding to the dtype remains (and SDPA in that dtype is compared with its own slack).
EXACT_TOL = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
             torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-12, atol=1e-12)}
SDPA_TOL = {torch.float16: dict(rtol=5e-3, atol=5e-3), torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
            torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def qkv(lead=(2, 3), Q=5, K=7, D=4, V=3, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    return make(*lead, Q, D), make(*lead, K, D), make(*lead, K, V)


def lower_right(Q: int, K: int, device="cpu") -> torch.Tensor:
    """Boolean (Q, K), True = takes part: key j visible to query i iff j ≤ i + K − Q (written
    here, not taken from helpers)."""
    return torch.arange(K, device=device)[None, :] <= torch.arange(Q, device=device)[:, None] + (K - Q)


def exact(q, k, v, causal=False) -> torch.Tensor:
    """softmax(QKᵀ/√D)V in float64, fully masked rows zero."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~lower_right(q.shape[-2], k.shape[-2], q.device), -math.inf)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # rows with no key: 0, not NaN
    return weights @ v


# ------------------------------------------------------------------ against SDPA and exact
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_odd_lengths_equal_sdpa_in_every_dtype(device, dtype, causal):
    q, k, v = qkv((2, 2), Q=267, K=1030, D=24, V=20, dtype=dtype, device=device)
    out = tiled_attention(q, k, v, block_size=64, causal=causal)
    assert out.dtype == dtype and out.shape == (2, 2, 267, 20) and out.device.type == device.type
    mask = lower_right(267, 1030, device) if causal else None
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # in the same dtype
    torch.testing.assert_close(out, sdpa, **SDPA_TOL[dtype])
    torch.testing.assert_close(out.double(), exact(q, k, v, causal), **EXACT_TOL[dtype])


@pytest.mark.parametrize("block_size", [1, 2, 3, 5, 7, 8, 64])
@pytest.mark.parametrize("shape", [(5, 7), (7, 5), (1, 9), (9, 1), (6, 6)])
@pytest.mark.parametrize("causal", [False, True])
def test_any_block_size_and_lengths(block_size, shape, causal):
    Q, K = shape
    q, k, v = qkv((3,), Q=Q, K=K, D=4, V=6, dtype=torch.float64)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=block_size, causal=causal),
                               exact(q, k, v, causal), rtol=1e-12, atol=1e-12)


def test_causal_equals_sdpa_with_torchs_lower_right_bias():
    from torch.nn.attention.bias import causal_lower_right

    q, k, v = qkv((2,), Q=40, K=100, D=8, V=8)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(40, 100))
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=16, causal=True), expected)
    # Q = K: the usual triangle, what SDPA's is_causal means
    q, k, v = qkv((2,), Q=50, K=50, D=8, V=8)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=16, causal=True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_leading_dims_broadcast_and_none_are_fine():
    q, _, _ = qkv((2, 3), Q=6, K=4)
    _, k, v = qkv((1, 3), Q=6, K=9, seed=1)
    out = tiled_attention(q, k, v, block_size=4)
    assert out.shape == (2, 3, 6, 3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k.expand(2, 3, 9, 4),
                                                                   v.expand(2, 3, 9, 3)))
    q2, k2, v2 = qkv((), Q=6, K=9)  # (Q, D): no leading dims at all
    torch.testing.assert_close(tiled_attention(q2, k2, v2, block_size=4),
                               F.scaled_dot_product_attention(q2, k2, v2))


# ------------------------------------------------------------- empty rows, inputs, errors
@pytest.mark.parametrize("block_size", [1, 3, 4, 64])
def test_queries_that_see_no_key_get_zeros_never_nan(device, block_size):
    q, k, v = qkv((2,), Q=10, K=4, dtype=torch.float32, device=device)  # Q > K, causal
    out = tiled_attention(q, k, v, block_size=block_size, causal=True)
    assert torch.isfinite(out).all()
    assert (out[:, :6] == 0).all()  # the first Q − K = 6 queries see nothing
    assert (out[:, 6:].abs().sum(-1) > 0).all()
    torch.testing.assert_close(out.double(), exact(q, k, v, causal=True))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_half_precision_fully_masked_rows_and_no_keys(dtype):
    q, k, v = qkv((1,), Q=9, K=3, dtype=dtype)
    out = tiled_attention(q, k, v, block_size=2, causal=True)
    assert out.dtype == dtype and torch.isfinite(out).all() and (out[:, :6] == 0).all()
    q, k, v = qkv((1,), Q=4, K=0, dtype=dtype)  # no keys at all: nothing to see
    empty = tiled_attention(q, k, v)
    assert empty.shape == (1, 4, 3) and (empty == 0).all()
    assert tiled_attention(*qkv((1,), Q=0, K=5, dtype=dtype)).shape == (1, 0, 3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_inputs_are_never_modified(dtype):
    q, k, v = qkv((2,), Q=13, K=11, dtype=dtype)
    before = [t.clone() for t in (q, k, v)]
    tiled_attention(q, k, v, block_size=4, causal=True)
    for t, b in zip((q, k, v), before):
        assert torch.equal(t, b)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "8", None])
def test_block_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=rf"block_size must be a positive int, got {re.escape(repr(bad))}"):
        tiled_attention(*qkv(), block_size=bad)


def test_bad_inputs_name_expected_and_actual():
    q, k, v = qkv((2,), Q=5, K=7, D=4, V=3)
    with pytest.raises(ValueError, match=r"queries must be a tensor of at least 2 dimensions \(\.\.\., Q, D\), got shape \(4,\)"):
        tiled_attention(torch.zeros(4), k, v)
    with pytest.raises(ValueError, match=r"values must be a tensor .* got list"):
        tiled_attention(q, k, [1.0])
    with pytest.raises(ValueError, match=r"feature size of keys \(D, same as queries\): expected 4, got 5"):
        tiled_attention(q, torch.zeros(2, 7, 5), v)
    with pytest.raises(ValueError, match=r"number of values \(K, one per key\): expected 7, got 6"):
        tiled_attention(q, k, torch.zeros(2, 6, 3))
    with pytest.raises(ValueError, match=r"keys must be a floating-point tensor, got dtype torch.int64"):
        tiled_attention(q, k.long(), v)
    with pytest.raises(ValueError, match=r"share one dtype, got torch.float32, torch.float64 and torch.float32"):
        tiled_attention(q, k.double(), v)
    with pytest.raises(ValueError, match=r"leading dims must broadcast: queries \(2, 5, 4\), keys \(3, 7, 4\)"):
        tiled_attention(q, torch.zeros(3, 7, 4), torch.zeros(3, 7, 3))
    with pytest.raises(ValueError, match=r"feature size D of queries and keys must be at least 1, got 0"):
        tiled_attention(q[..., :0], k[..., :0], v)  # was a raw ZeroDivisionError (1/√0)
    with pytest.raises(ValueError, match=r"keys must have the dtype and device of queries "
                                         r"\(torch.float32 on cpu\), got torch.float32 on meta"):
        tiled_attention(q, k.to("meta"), v)  # was PyTorch's raw RuntimeError


def test_exported_from_helpers():
    assert helpers.tiled_attention is tiled_attention and "tiled_attention" in helpers.__all__


# ------------------------------------------------------------------ no (Q, K) matrix, ever
class OpRecorder(TorchDispatchMode):
    """Every aten operator that runs (composite ones decomposed), with its inputs' and outputs'
    shapes: what the code really allocates, whatever Python calls it is written with."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, list[tuple[int, ...]], list[tuple[int, ...]]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat = lambda x: [t for t in (x if isinstance(x, (list, tuple)) else [x])
                          if isinstance(t, torch.Tensor)]
        self.ops.append((str(func), [tuple(t.shape) for t in flat(args)],
                         [tuple(t.shape) for t in flat(out)]))
        return out


def naive(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_no_tensor_ever_has_q_by_k_entries(causal):
    B, Q, K, D, V, b = 2, 267, 1030, 16, 12, 64
    q, k, v = qkv((B,), Q=Q, K=K, D=D, V=V)
    with OpRecorder() as rec:
        tiled_attention(q, k, v, block_size=b, causal=causal)
    sizes = [math.prod(s) for _, _, outs in rec.ops for s in outs]
    # Nothing bigger than the output (B, Q, V) or one tile of scores (B, b, b):
    assert max(sizes) <= max(B * Q * V, B * b * b) < B * Q * K // 20
    # every matrix product is one tile: at most b keys wide, at most b queries tall
    products = [(ins, outs) for name, ins, outs in rec.ops if name.split(".")[1] in ("mm", "bmm", "matmul")]
    assert products, f"no matrix product recorded: {sorted({n for n, _, _ in rec.ops})}"
    for ins, outs in products:
        assert outs[0][-2] <= b and outs[0][-1] <= max(b, V), (ins, outs)
    # The recorder does see a (Q, K) matrix where there is one:
    with OpRecorder() as rec:
        naive(q, k, v)
    assert max(math.prod(s) for _, _, outs in rec.ops for s in outs) >= B * Q * K


def test_peak_memory_stays_far_below_the_score_matrix(device):
    B, Q, K, D = 1, 1024, 1024, 32
    q, k, v = qkv((B,), Q=Q, K=K, D=D, V=D, device=device)
    scores_bytes = B * Q * K * 4
    tiled = peak_bytes(lambda: tiled_attention(q, k, v, block_size=64), device)
    assert tiled < scores_bytes / 8
    assert peak_bytes(lambda: naive(q, k, v), device) >= 2 * scores_bytes  # scores and weights


def test_peak_bytes_counts_live_storages_once():
    assert peak_bytes(lambda: torch.empty(1000)) == 4000

    def two_then_one():
        a = torch.ones(250, dtype=torch.float64)  # 2000 bytes
        b = a * 2  # 2000 more: 4000 live
        view = b[10:]  # a view: no new memory
        del a, b
        return view + 1  # 1920 bytes while `view` keeps b alive: 3920

    assert peak_bytes(two_then_one) == 4000
    x = torch.zeros(100)
    assert peak_bytes(lambda: x[:50]) == 0  # a view of an input allocates nothing
    assert peak_bytes(lambda: x.clone()) == 400
    with pytest.raises(ValueError, match="peak_bytes measures on 'cpu' or 'cuda', got 'meta'"):
        peak_bytes(lambda: None, "meta")


# --------------------------------------------------------------------- the online softmax
def test_online_softmax_block_by_block_equals_softmax_and_its_running_values():
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 23, generator=g, dtype=torch.float64) * 3  # 4 rows, 23 keys
    values = torch.randn(23, 5, generator=g, dtype=torch.float64)
    state = online_softmax_start((4,), 5, dtype=torch.float64)
    assert (state.max == -math.inf).all() and (state.sum == 0).all() and (state.out == 0).all()
    for start in range(0, 23, 6):
        seen = scores[:, :start + 6]
        state = online_softmax_update(state, scores[:, start:start + 6], values[start:start + 6])
        m = seen.max(dim=1, keepdim=True).values  # the running max, written out
        torch.testing.assert_close(state.max, m)
        torch.testing.assert_close(state.sum, torch.exp(seen - m).sum(1, keepdim=True))
        torch.testing.assert_close(state.out, torch.exp(seen - m) @ values[:start + 6])
    torch.testing.assert_close(online_softmax_result(state), torch.softmax(scores, 1) @ values)


def test_online_softmax_with_hidden_keys_and_rows_that_see_nothing_yet():
    scores = torch.tensor([[-math.inf, -math.inf, 1.0, 2.0],
                           [-math.inf, -math.inf, -math.inf, -math.inf]])
    values = torch.eye(4)
    state = online_softmax_start((2,), 4)
    state = online_softmax_update(state, scores[:, :2], values[:2])  # nothing visible yet
    assert torch.isfinite(state.sum).all() and (state.sum == 0).all()
    assert (online_softmax_result(state) == 0).all()
    state = online_softmax_update(state, scores[:, 2:], values[2:])
    result = online_softmax_result(state)
    torch.testing.assert_close(result[0], torch.tensor([0, 0, 1 / (1 + math.e), math.e / (1 + math.e)]))
    assert (result[1] == 0).all() and torch.isfinite(result).all()


def test_online_softmax_update_does_not_modify_its_inputs():
    state = online_softmax_start((3,), 2)
    state = online_softmax_update(state, torch.randn(3, 4), torch.randn(4, 2))
    copies = [t.clone() for t in state]
    scores, values = torch.randn(3, 4), torch.randn(4, 2)
    s0, v0 = scores.clone(), values.clone()
    online_softmax_update(state, scores, values)
    assert all(torch.equal(a, b) for a, b in zip(state, copies))
    assert torch.equal(scores, s0) and torch.equal(values, v0)


# ------------------------------------------------------------------------------ the tiles
def brute_force_kinds(Q, K, b, causal):
    visible = lower_right(Q, K) if causal else torch.ones(Q, K, dtype=torch.bool)
    rows = []
    for q0 in range(0, Q, b):
        row = []
        for k0 in range(0, K, b):
            tile = visible[q0:q0 + b, k0:k0 + b]
            row.append(FULL if tile.all() else SKIPPED if not tile.any() else PARTIAL)
        rows.append(row)
    return torch.tensor(rows)


@pytest.mark.parametrize("Q, K", [(12, 12), (10, 4), (4, 10), (1, 17), (17, 1), (33, 50)])
@pytest.mark.parametrize("b", [1, 3, 4, 5, 16, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_tile_kinds_match_a_count_of_the_visible_entries(Q, K, b, causal):
    kinds = tile_kinds(Q, K, b, causal=causal)
    assert kinds.shape == (math.ceil(Q / b), math.ceil(K / b))
    assert torch.equal(kinds, brute_force_kinds(Q, K, b, causal))


@pytest.mark.parametrize("Q, K, b", [(12, 12, 4), (100, 100, 16), (10, 30, 7), (30, 10, 7)])
def test_tile_flops_by_brute_force(Q, K, b):
    D, V = 8, 5
    computed, total = tile_flops(Q, K, b, D, V, causal=True)
    assert total == 2 * Q * K * (D + V) == tile_flops(Q, K, b, D, V)[0]
    kinds = brute_force_kinds(Q, K, b, True)
    expected = sum(min(b, Q - q0) * min(b, K - k0) * 2 * (D + V)
                   for i, q0 in enumerate(range(0, Q, b)) for j, k0 in enumerate(range(0, K, b))
                   if kinds[i, j] != SKIPPED)
    assert computed == expected < total


def test_square_causal_tiles_skip_almost_half_the_work():
    computed, total = tile_flops(4096, 4096, 64, 64, 64, causal=True)
    blocks = 4096 // 64
    assert computed / total == pytest.approx((blocks * (blocks + 1) / 2) / blocks**2)


@pytest.mark.parametrize("bad", [dict(num_queries=0), dict(num_keys=-2), dict(block_size=0)])
def test_tile_kinds_rejects_bad_sizes(bad):
    args = dict(num_queries=4, num_keys=4, block_size=2) | bad
    with pytest.raises(ValueError, match=f"{next(iter(bad))} must be a positive int"):
        tile_kinds(**args)
