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
    FULL, PARTIAL, SKIPPED, hbm_accesses, lengths_that_fit, online_softmax_result,
    online_softmax_start, online_softmax_update, peak_bytes, tile_flops, tile_kinds,
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


def band(Q: int, K: int, W: int, device="cpu") -> torch.Tensor:
    """Boolean (Q, K), True = takes part, written entry by entry: query i sits at position
    K − Q + i and sees key j iff 0 ≤ (K − Q + i) − j < W (sliding-window attention)."""
    return torch.tensor([[0 <= (K - Q + i) - j < W for j in range(K)] for i in range(Q)],
                        dtype=torch.bool, device=device).reshape(Q, K)


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
    with pytest.raises(ValueError, match=r"leading dims of queries, keys and values must broadcast, got shapes \(2, 5, 4\), \(3, 7, 4\) and \(3, 7, 3\)"):
        tiled_attention(q, torch.zeros(3, 7, 4), torch.zeros(3, 7, 3))
    with pytest.raises(ValueError, match=r"feature size D of queries and keys must be at least 1, got 0"):
        tiled_attention(q[..., :0], k[..., :0], v)  # was a raw ZeroDivisionError (1/√0)
    with pytest.raises(ValueError, match=r"keys must .* got .*meta"):
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
    with pytest.raises(ValueError, match="device must be the CPU or an accelerator present on this machine, got meta"):
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


# ------------------------------------------------------------------ traffic to and from HBM
def traffic_of_the_loops(Q, K, b, D, V, causal, window=None):
    """Numbers read and written by FlashAttention-2's loops, counted by running them: per query
    block, load Q_i once, load K_j and V_j for every key block it sees, store O_i once."""
    visible = band(Q, K, window) if window else lower_right(Q, K) if causal \
        else torch.ones(Q, K, dtype=torch.bool)
    moved = 0
    for q0 in range(0, Q, b):
        rows = min(b, Q - q0)
        moved += rows * D  # load Q_i
        for k0 in range(0, K, b):
            if visible[q0:q0 + b, k0:k0 + b].any():  # a tile with a visible key is computed
                moved += min(b, K - k0) * (D + V)  # load K_j, V_j
        moved += rows * V  # store O_i
    return moved


@pytest.mark.parametrize("Q, K, b", [(12, 12, 4), (100, 100, 16), (10, 30, 7), (30, 10, 7), (5, 5, 9)])
@pytest.mark.parametrize("causal", [False, True])
def test_hbm_accesses_count_what_the_loops_and_standard_attention_move(Q, K, b, causal):
    D, V = 8, 5
    standard, tiled = hbm_accesses(Q, K, b, D, V, causal=causal)
    # the paper's Algorithm 0: read Q, K; write S; read S; write P; read P and V; write O
    assert standard == Q * D + K * D + Q * K + Q * K + Q * K + Q * K + K * V + Q * V
    assert tiled == traffic_of_the_loops(Q, K, b, D, V, causal)
    assert all(isinstance(n, int) for n in (standard, tiled))


def test_hbm_accesses_match_the_io_bound_and_the_notebooks_numbers():
    L, d = 100, 64  # the tile map's attention in notebook 09
    for b in (4, 8, 12, 16, 24, 32, 48, 64):
        standard, tiled = hbm_accesses(L, L, b, d, d)
        assert standard == 4 * L * d + 4 * L * L
        assert tiled == 2 * L * d + math.ceil(L / b) * 2 * L * d
        assert (tiled < standard) == (b >= 32)  # "from blocks of 32 on ..."
        assert (hbm_accesses(L, L, b, d, d, causal=True)[1] < standard) == (b >= 24)  # "(24 causal)"
    standard, tiled = hbm_accesses(4096, 4096, 128, 128, 128, causal=True)
    assert tiled / standard == pytest.approx(0.27, abs=0.005)  # "about a quarter"
    # Theorem 2's Θ(L² d² / M): with M = 4·b·d numbers of SRAM, the K/V reads are 8 L² d² / M
    L, d, M = 4096, 64, 4 * 128 * 64
    assert hbm_accesses(L, L, M // (4 * d), d, d)[1] == 2 * L * d + 8 * L * L * d * d // M


# T4 (16 GB, of which Colab shows about 14.5 GiB free), H100 (80 GB), a small GPU (2 GiB)
@pytest.mark.parametrize("free_gib, fits", [(14.5, (1024, 2048, 4096)), (79.0, (1024, 2048, 4096, 8192)),
                                            (2.0, (1024,)), (0.1, ())])
def test_lengths_that_fit_size_notebook_09s_gpu_run(free_gib, fits):
    # notebook 09's GPU branch: B = 4, H = 16, d = 64, float16
    got = lengths_that_fit(int(free_gib * 2**30), [1024, 2048, 4096, 8192], batch=4, heads=16,
                           head_size=64, bytes_per_number=2)
    assert got == fits
    # the naive path alone needs two (B, H, L, L) float16 matrices: 16 GiB at L = 8192, more than
    # a T4 has; the estimate (four of them, and the (B, H, L, d) tensors) keeps L = 8192 off it
    assert 2 * 4 * 16 * 8192**2 * 2 == 16 * 2**30


def test_lengths_that_fit_is_the_estimate_written_out():
    B, H, d, nbytes = 2, 3, 16, 4
    peak = lambda L: (4 * B * H * L * L + 16 * B * H * L * d) * nbytes  # noqa: E731
    lengths = [10, 300, 50, 1000, 7]
    for free in (0, peak(50), peak(50) - 1, peak(300) / 0.8, 10**12):
        got = lengths_that_fit(int(free), lengths, batch=B, heads=H, head_size=d, bytes_per_number=nbytes)
        assert got == tuple(L for L in lengths if peak(L) <= 0.8 * int(free))  # in the given order
    assert lengths_that_fit(peak(300), (300,), batch=B, heads=H, head_size=d, bytes_per_number=nbytes,
                            share=1.0) == (300,)


@pytest.mark.parametrize("bad, message", [
    (dict(free_bytes=-1), r"free_bytes must be an int >= 0, got -1"),
    (dict(free_bytes=1.5e9), r"free_bytes must be an int >= 0, got 1500000000.0"),
    (dict(lengths=1024), r"lengths must be a list or tuple of positive ints, got 1024"),
    (dict(lengths=[1024, 0]), r"lengths must be a list or tuple of positive ints, got \[1024, 0\]"),
    (dict(batch=0), r"batch must be a positive int, got 0"),
    (dict(share=0.0), r"share must be a finite number > 0.0, got 0.0"),
    (dict(share=1.5), r"share must be a finite number in \(0, 1\], got 1.5"),
])
def test_lengths_that_fit_rejects_bad_input(bad, message):
    args = dict(free_bytes=2**30, lengths=[1024], batch=1, heads=1, head_size=64, bytes_per_number=2) | bad
    with pytest.raises(ValueError, match=message):
        lengths_that_fit(**args)


@pytest.mark.parametrize("bad", [dict(num_queries=0), dict(num_keys=-2), dict(block_size=0)])
def test_tile_kinds_rejects_bad_sizes(bad):
    args = dict(num_queries=4, num_keys=4, block_size=2) | bad
    with pytest.raises(ValueError, match=f"{next(iter(bad))} must be a positive int"):
        tile_kinds(**args)


# ------------------------------------------------------- flags, devices, callables: checked
@pytest.mark.parametrize("bad", ["no", 1, None, 0.0])
def test_causal_must_be_a_bool(bad):
    with pytest.raises(ValueError, match=rf"causal must be True or False, got {re.escape(repr(bad))}"):
        tile_kinds(4, 4, 2, causal=bad)  # "no" was taken as True
    with pytest.raises(ValueError, match=rf"causal must be True or False, got {re.escape(repr(bad))}"):
        tile_flops(4, 4, 2, 3, 3, causal=bad)


def test_peak_bytes_rejects_a_bad_device_and_a_non_callable():
    with pytest.raises(ValueError, match=r"device must be a torch.device or a name .* got 'gpu7'"):
        peak_bytes(lambda: None, "gpu7")  # was PyTorch's raw RuntimeError
    with pytest.raises(ValueError, match=r"fn must be callable \(a function of no arguments\), got Tensor"):
        peak_bytes(torch.zeros(3))  # was a raw TypeError ('Tensor' object is not callable)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device must be the CPU or an accelerator present on this machine, got cuda"):
            peak_bytes(lambda: None, "cuda")


# ------------------------------------------------------ the online softmax: checked inputs
def test_online_softmax_start_checks_its_arguments():
    with pytest.raises(ValueError, match=r"rows must be a tuple of non-negative ints \(\.\.\., Q\), got 3"):
        online_softmax_start(3, 2)
    with pytest.raises(ValueError, match=r"rows must be a tuple of non-negative ints \(\.\.\., Q\), got \(2, -1\)"):
        online_softmax_start((2, -1), 2)
    with pytest.raises(ValueError, match=r"value_size must be a positive int, got 0"):
        online_softmax_start((2,), 0)
    with pytest.raises(ValueError, match=r"dtype must be a floating torch.dtype, got torch.int64"):
        online_softmax_start((2,), 3, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"device must be a torch.device or a name .* got 'gpu7'"):
        online_softmax_start((2,), 3, device="gpu7")
    # what notebook 09 calls: no rows (one query), and a torch.Size
    state = online_softmax_start((), 6, dtype=torch.float64)
    assert [tuple(t.shape) for t in state] == [(1,), (1,), (6,)] and state.out.dtype == torch.float64
    state = online_softmax_start(torch.zeros(2, 4, 30).shape[:-1], 5, device=torch.device("cpu"))
    assert [tuple(t.shape) for t in state] == [(2, 4, 1), (2, 4, 1), (2, 4, 5)]


def test_online_softmax_update_checks_state_scores_and_values():
    state = online_softmax_start((3,), 2)
    scores, values = torch.randn(3, 4), torch.randn(4, 2)
    with pytest.raises(ValueError, match=r"state must be an OnlineSoftmax .* got tuple"):
        online_softmax_update(tuple(state), scores, values)
    with pytest.raises(ValueError, match=r"scores must be a tensor of shape \(\.\.\., Q, n\) = \(3, n\) .* got shape \(4, 4\)"):
        online_softmax_update(state, torch.randn(4, 4), values)
    with pytest.raises(ValueError, match=r"scores must be a floating-point tensor, got dtype torch.int64"):
        online_softmax_update(state, scores.long(), values)
    with pytest.raises(ValueError, match=r"scores must have the dtype and device of state.max "
                                         r"\(torch.float32 on cpu\), got torch.float64 on cpu"):
        online_softmax_update(state, scores.double(), values)
    with pytest.raises(ValueError, match=r"values must be a tensor of at least 2 dimensions \(\.\.\., n, V\), got shape \(4,\)"):
        online_softmax_update(state, scores, values[:, 0])
    with pytest.raises(ValueError, match=r"number of values \(n, one per score\): expected 4, got 5"):
        online_softmax_update(state, scores, torch.randn(5, 2))
    with pytest.raises(ValueError, match=r"value size \(V, as state.out\): expected 2, got 3"):
        online_softmax_update(state, scores, torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"values must have leading dims that broadcast to \(\) .* got shape \(2, 4, 2\)"):
        online_softmax_update(state, scores, torch.randn(2, 4, 2))  # would give (2, 3, 2) outputs
    with pytest.raises(ValueError, match=r"values must .* got .*meta"):
        online_softmax_update(state, scores, values.to("meta"))
    # the notebook's single row: state for rows (), scores (n,), values (n, V)
    row = online_softmax_update(online_softmax_start((), 2), scores[0], values)
    torch.testing.assert_close(online_softmax_result(row), torch.softmax(scores[0], 0) @ values)
    # values with leading dims that broadcast into the rows' own
    batched = online_softmax_start((2, 3), 2)
    out = online_softmax_update(batched, torch.randn(2, 3, 4), torch.randn(1, 4, 2))
    assert out.out.shape == (2, 3, 2)


def test_online_softmax_state_is_checked_when_built_and_when_used():
    m, s, o = torch.zeros(3, 1), torch.ones(3, 1), torch.zeros(3, 2)
    with pytest.raises(ValueError, match=r"max must be a tensor of shape \(\.\.\., 1\), got shape \(3, 2\)"):
        helpers.tiling.OnlineSoftmax(o, s, o)
    with pytest.raises(ValueError, match=r"sum must be a tensor of shape \(\.\.\., 1\) = \(3, 1\) as max, got shape \(2, 1\)"):
        helpers.tiling.OnlineSoftmax(m, s[:2], o)
    with pytest.raises(ValueError, match=r"out must be a tensor of shape \(\.\.\., V\) = \(3, V\) as max, got shape \(2\,\)"):
        helpers.tiling.OnlineSoftmax(m, s, o[0])
    with pytest.raises(ValueError, match=r"sum must have the dtype and device of max .* got torch.float64 on cpu"):
        helpers.tiling.OnlineSoftmax(m, s.double(), o)
    with pytest.raises(ValueError, match=r"out must be a floating-point .* got str"):
        helpers.tiling.OnlineSoftmax(m, s, "o")
    with pytest.raises(ValueError, match=r"max must .* got .*meta"):
        helpers.tiling.OnlineSoftmax(m.to("meta"), s.to("meta"), o.to("meta"))
    sneaked = helpers.tiling.OnlineSoftmax._make((m, s[:2], o))  # bypasses the constructor
    with pytest.raises(ValueError, match=r"state.sum must be a tensor of shape"):
        online_softmax_result(sneaked)
    with pytest.raises(ValueError, match=r"state must be an OnlineSoftmax .* got Tensor"):
        online_softmax_result(m)
    good = helpers.tiling.OnlineSoftmax(m, s, o)  # keyword and positional forms both work
    assert helpers.tiling.OnlineSoftmax(max=m, sum=s, out=o) == good and good.max is m


# -------------------------------------------------------------------------- the backward
def sdpa_grads(q, k, v, causal, dout):
    """Gradients of SDPA (lower-right causal mask when asked), inputs of their own shapes."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qq, kk, vv = (t.expand(*lead, *t.shape[-2:]) for t in leaves)
    mask = lower_right(q.shape[-2], k.shape[-2], q.device) if causal else None
    out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask)
    if causal:  # SDPA gives NaN rows where a query sees no key; ours are zeros
        out = out.nan_to_num(0.0)
    return out, torch.autograd.grad(out, leaves, dout)


def tiled_grads(q, k, v, causal, dout, block_size):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = tiled_attention(*leaves, block_size=block_size, causal=causal)
    return out, torch.autograd.grad(out, leaves, dout)


GRAD_SHAPES = [  # (leading dims of q, k, v), Q, K, block size
    (((2,), (2,), (2,)), 5, 7, 3),
    (((2, 1), (1, 3), (2, 3)), 6, 4, 4),  # broadcast leading dims
    (((), (2,), (2,)), 4, 9, 2),  # queries with no leading dim at all
    (((1,), (1,), (1,)), 9, 3, 2),  # Q > K: the first 6 queries see no key when causal
    (((1,), (1,), (1,)), 7, 7, 64),  # one tile, larger than the sequence
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES)
def test_gradcheck_in_float64(leads, Q, K, b, causal):
    g = torch.Generator().manual_seed(5)
    D, V = 3, 2
    q = torch.randn(*leads[0], Q, D, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(*leads[1], K, D, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(*leads[2], K, V, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=causal), (q, k, v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES)
def test_gradients_equal_sdpas(device, dtype, leads, Q, K, b, causal):
    g = torch.Generator().manual_seed(1)
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(device, dtype)
    q, k, v = make(*leads[0], Q, 8), make(*leads[1], K, 8), make(*leads[2], K, 5)
    lead = torch.broadcast_shapes(leads[0], leads[1], leads[2])
    dout = make(*lead, Q, 5)
    expected_out, expected = sdpa_grads(q, k, v, causal, dout)
    out, grads = tiled_grads(q, k, v, causal, dout, b)
    torch.testing.assert_close(out, expected_out, **SDPA_TOL[dtype])
    # a gradient sums over the K keys (dQ) or the Q queries (dK, dV): a little more rounding
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else SDPA_TOL[dtype]
    for name, got, want, x in zip("qkv", grads, expected, (q, k, v)):
        assert got.shape == x.shape and got.dtype == dtype, name  # each input's own shape
        torch.testing.assert_close(got, want, **tol, msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("block_size", [1, 2, 4, 64])
def test_queries_that_see_no_key_get_zero_gradient(block_size):
    q, k, v = qkv((2,), Q=10, K=4, D=4, V=3, dtype=torch.float64)
    dout = torch.randn(2, 10, 3, dtype=torch.float64)
    out, (dq, dk, dv) = tiled_grads(q, k, v, True, dout, block_size)
    assert all(torch.isfinite(t).all() for t in (out, dq, dk, dv))
    assert (dq[:, :6] == 0).all()
    assert (dq[:, 7:].abs().sum(-1) > 0).all()  # (query 6 sees one key: weight 1 whatever q is)
    # the keys and values get nothing from the blind queries: the same gradients as without them
    _, (_, dk_seen, dv_seen) = tiled_grads(q[:, 6:], k, v, True, dout[:, 6:], block_size)
    torch.testing.assert_close(dk, dk_seen, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dv, dv_seen, rtol=1e-12, atol=1e-12)


def test_no_keys_or_no_queries_give_zero_gradients():
    for Q, K in ((4, 0), (0, 5)):
        q, k, v = qkv((2,), Q=Q, K=K, dtype=torch.float64)
        out, grads = tiled_grads(q, k, v, False, torch.randn(2, Q, 3, dtype=torch.float64), 2)
        assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
        assert all((g == 0).all() for g in grads)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_gradients_are_accumulated_in_float32(device, dtype):
    q, k, v = qkv((2,), Q=37, K=45, D=16, V=8, dtype=dtype, device=device)
    dout = torch.randn(2, 37, 8, dtype=torch.float64).to(device, dtype)
    _, grads = tiled_grads(q, k, v, True, dout, 8)
    _, exact_grads = sdpa_grads(q.double(), k.double(), v.double(), True, dout.double())
    for got, want in zip(grads, exact_grads):
        assert got.dtype == dtype and torch.isfinite(got).all()
        # within a few roundings of the dtype: float32 accumulation, one rounding at the end
        torch.testing.assert_close(got.double(), want, **EXACT_TOL[dtype])


def test_backward_never_modifies_inputs_output_or_its_gradient():
    q, k, v = (t.requires_grad_() for t in qkv((2,), Q=13, K=11, dtype=torch.float32))
    before = [t.detach().clone() for t in (q, k, v)]
    out = tiled_attention(q, k, v, block_size=4, causal=True)
    out_before = out.detach().clone()
    dout = torch.randn_like(out)
    dout_before = dout.clone()
    torch.autograd.grad(out, (q, k, v), dout)
    assert all(torch.equal(t.detach(), b) for t, b in zip((q, k, v), before))
    assert torch.equal(out.detach(), out_before) and torch.equal(dout, dout_before)


def test_only_grad_when_needed_and_one_input_may_need_it():
    q, k, v = qkv((2,), Q=6, K=5, dtype=torch.float64)
    assert tiled_attention(q, k, v).grad_fn is None
    v.requires_grad_()
    with torch.no_grad():
        assert tiled_attention(q, k, v).grad_fn is None
    (dv,) = torch.autograd.grad(tiled_attention(q, k, v, block_size=2).sum(), (v,))
    _, (_, _, expected) = sdpa_grads(q, k, v, False, torch.ones(2, 6, 3, dtype=torch.float64))
    torch.testing.assert_close(dv, expected)


@pytest.mark.parametrize("causal", [False, True])
def test_nothing_of_q_by_k_entries_is_saved_or_built_in_backward(causal):
    B, Q, K, D, V, b = 2, 267, 1030, 16, 12, 64
    q, k, v = (t.requires_grad_() for t in qkv((B,), Q=Q, K=K, D=D, V=V))
    saved: list[torch.Tensor] = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = tiled_attention(q, k, v, block_size=b, causal=causal)
    # besides the inputs themselves: the output (B, Q, V) and one log-sum-exp per query row
    inputs = {t.data_ptr() for t in (q, k, v)}
    extra = sorted(tuple(t.shape) for t in saved if t.data_ptr() not in inputs)
    assert len(saved) == 5 and extra == [(B, Q, 1), (B, Q, V)], extra
    with OpRecorder() as rec:
        torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert rec.ops, "the recorder saw no backward op"
    sizes = [math.prod(s) for _, _, outs in rec.ops for s in outs]
    assert max(sizes) <= max(B * K * D, B * K * V, B * Q * D, B * b * b) < B * Q * K // 8
    # The same hooks do see the naive path save (Q, K) matrices:
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        naive(q, k, v)
    assert max(t.numel() for t in saved) >= B * Q * K


def test_tile_flops_are_python_ints_even_from_numpy_sizes():
    import numpy as np

    computed, total = tile_flops(4096, 4096, 64, np.int32(128), np.int32(128), causal=True)
    # np.int32 arithmetic would wrap around 2**31: 2·4096²·256 = 8.6e9
    assert type(computed) is int and type(total) is int and total == 2 * 4096 * 4096 * 256
    assert tile_flops(np.int64(10), 7, np.int64(3), 4, 5) == tile_flops(10, 7, 3, 4, 5)


# ------------------------------------------------- double backward and torch.func transforms
def naive_differentiable(q, k, v, causal=False, window=None):
    """softmax(QKᵀ/√D)V written out, lower-right causal when asked (the band of ``window`` when
    one is given), with a query that sees no key giving zeros *and* zero gradients of every
    order (softmax of its all −inf row would be NaN: it gets scores 0, then weights 0)."""
    Q, K = q.shape[-2], k.shape[-2]
    visible = band(Q, K, window, q.device) if window else lower_right(Q, K, q.device) if causal \
        else torch.ones(Q, K, dtype=torch.bool)
    sees = visible.any(dim=-1, keepdim=True)  # (Q, 1)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~visible, -math.inf)
    return torch.softmax(scores.masked_fill(~sees, 0.0), dim=-1) * sees @ v


def grad_leaves(leads, Q, K, seed=5, D=3, V=2):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*lead, n, size, generator=g, dtype=torch.float64, requires_grad=True)
            for lead, n, size in zip(leads, (Q, K, K), (D, D, V))]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES)
def test_gradgradcheck_in_float64(leads, Q, K, b, causal):
    assert torch.autograd.gradgradcheck(
        lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=causal),
        tuple(grad_leaves(leads, Q, K)))


def gradient_penalty_grads(attend, leaves, dout):
    """First gradients of ⟨attend(q, k, v), dout⟩ with a graph, then the gradients of the
    penalty Σ (dq² + dk² + dv²) with respect to q, k and v: the second-order terms."""
    first = torch.autograd.grad((attend(*leaves) * dout).sum(), leaves, create_graph=True)
    assert all(g.requires_grad for g in first)  # a graph came back, not constants
    penalty = sum(g.pow(2).sum() for g in first)
    return first, torch.autograd.grad(penalty, leaves)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES)
def test_second_order_gradients_equal_the_naive_paths(leads, Q, K, b, causal):
    leaves = grad_leaves(leads, Q, K, seed=7)
    lead = torch.broadcast_shapes(*leads)
    dout = torch.randn(*lead, Q, 2, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    first, second = gradient_penalty_grads(
        lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=causal), leaves, dout)
    want_first, want_second = gradient_penalty_grads(
        lambda q, k, v: naive_differentiable(q, k, v, causal), leaves, dout)
    for name, got, want in zip("qkvqkv", (*first, *second), (*want_first, *want_second)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10,
                                   msg=lambda m, name=name: f"d{name}: {m}")


def test_double_backward_in_float32_matches_float64():
    leaves = grad_leaves(((2,), (2,), (2,)), 9, 6, seed=9, D=8, V=4)
    dout = torch.randn(2, 9, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    attend = lambda q, k, v: tiled_attention(q, k, v, block_size=4, causal=True)
    _, want = gradient_penalty_grads(attend, leaves, dout)
    halves = [t.detach().float().requires_grad_() for t in leaves]
    _, got = gradient_penalty_grads(attend, halves, dout.float())
    for g, w in zip(got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-5)


TRANSFORM_SHAPES = [(((2,), (2,), (2,)), 5, 7, 3), (((2, 1), (1, 3), (2, 3)), 6, 4, 4),
                    (((1,), (1,), (1,)), 9, 3, 2)]  # equal, broadcast, Q > K (blind queries)


# (jacfwd: PyTorch's forward-mode AD loads its decompositions with torch.jit.script, which warns)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("leads, Q, K, b", TRANSFORM_SHAPES)
def test_torch_func_grad_jacrev_jacfwd_and_vmap_equal_the_naive_paths(leads, Q, K, b, causal):
    q, k, v = (t.detach() for t in grad_leaves(leads, Q, K, seed=11))
    tiled = lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=causal)
    naive_ = lambda q, k, v: naive_differentiable(q, k, v, causal)
    close = lambda got, want: torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    weight = torch.randn(torch.broadcast_shapes(*leads) + (Q, 2), dtype=torch.float64,
                         generator=torch.Generator().manual_seed(2))
    loss = lambda attend: lambda q, k, v: (attend(q, k, v) * weight).sum()
    for argnums in (0, 1, 2, (0, 1, 2)):
        close(torch.func.grad(loss(tiled), argnums=argnums)(q, k, v),
              torch.func.grad(loss(naive_), argnums=argnums)(q, k, v))
    close(torch.func.jacrev(tiled, argnums=(0, 1, 2))(q, k, v),
          torch.func.jacrev(naive_, argnums=(0, 1, 2))(q, k, v))
    close(torch.func.jacfwd(tiled, argnums=(0, 1, 2))(q, k, v),
          torch.func.jacrev(naive_, argnums=(0, 1, 2))(q, k, v))
    # grad of grad: the gradient penalty again, through torch.func
    penalty = lambda attend: lambda q: torch.func.grad(loss(attend))(q, k, v).pow(2).sum()
    close(torch.func.grad(penalty(tiled))(q), torch.func.grad(penalty(naive_))(q))
    # vmap over a new leading dim of the queries only, and of all three (in_dims 1: not first)
    many = torch.stack([q, 2 * q, -q])  # (3, ..., Q, D)
    close(torch.func.vmap(tiled, in_dims=(0, None, None))(many, k, v),
          naive_(many, k, v))
    stacked = [torch.stack([t, t.flip(-2), 0.5 * t], dim=1) for t in (q, k, v)]  # (·, 3, ...)
    if q.dim() > 2:  # (a query without leading dims has none to stack along dim 1)
        close(torch.func.vmap(tiled, in_dims=1)(*stacked),
              torch.func.vmap(naive_, in_dims=1)(*stacked))
    # vmap of a function of inputs that require grad: the backward is vmapped too
    leaf = many.clone().requires_grad_()
    out = torch.func.vmap(tiled, in_dims=(0, None, None))(leaf, k, v)
    (got,) = torch.autograd.grad(out.pow(2).sum(), leaf)
    leaf2 = many.clone().requires_grad_()
    (want,) = torch.autograd.grad(naive_(leaf2, k, v).pow(2).sum(), leaf2)
    close(got, want)


# ------------------------------------------------------------ the sliding window (causal band)
def sdpa_band(q, k, v, W):
    """SDPA with the band written out as its boolean attn_mask (True = takes part), leading dims
    broadcast first; a query that sees no key: zeros (SDPA leaves its row NaN)."""
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (t.expand(*lead, *t.shape[-2:]) for t in (q, k, v))
    take = band(q.shape[-2], k.shape[-2], W, q.device)  # (Q, K)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=take)
    return out.masked_fill(~take.any(-1, keepdim=True), 0.0)


WINDOW_SHAPES = [(5, 7), (7, 5), (6, 6), (1, 9), (9, 1), (20, 33)]


@pytest.mark.parametrize("block_size", [1, 3, 4, 64])
@pytest.mark.parametrize("Q, K", WINDOW_SHAPES)
@pytest.mark.parametrize("W", [1, 2, 5, 40])  # 40: wider than every K here (plain causal)
def test_window_equals_sdpa_with_the_band_written_out(block_size, Q, K, W):
    q, k, v = qkv((2, 3), Q=Q, K=K, D=4, V=6, dtype=torch.float64)
    inputs = [t.clone() for t in (q, k, v)]
    out = tiled_attention(q, k, v, block_size=block_size, causal=True, window=W)
    assert out.shape == (2, 3, Q, 6) and out.dtype == torch.float64
    torch.testing.assert_close(out, sdpa_band(q, k, v, W), rtol=1e-12, atol=1e-12)
    assert all(torch.equal(a, b) for a, b in zip(inputs, (q, k, v)))
    if W >= K:  # a window as wide as the keys hides nothing more than causal
        torch.testing.assert_close(out, tiled_attention(q, k, v, block_size=block_size,
                                                        causal=True), rtol=0, atol=0)


def test_window_with_broadcast_and_no_leading_dims():
    g = torch.Generator().manual_seed(4)
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    q, k, v = make(2, 1, 9, 4), make(1, 3, 12, 4), make(3, 12, 5)
    out = tiled_attention(q, k, v, block_size=4, causal=True, window=3)
    assert out.shape == (2, 3, 9, 5)
    torch.testing.assert_close(out, sdpa_band(q, k, v, 3), rtol=1e-12, atol=1e-12)
    out = tiled_attention(q[0, 0], k[0, 0], v[0], block_size=4, causal=True, window=3)
    torch.testing.assert_close(out, sdpa_band(q[0, 0], k[0, 0], v[0], 3), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_window_in_every_dtype(device, dtype):
    q, k, v = qkv((2, 2), Q=67, K=130, D=24, V=20, dtype=dtype, device=device)
    out = tiled_attention(q, k, v, block_size=16, causal=True, window=37)
    assert out.dtype == dtype and out.device.type == device.type and torch.isfinite(out).all()
    torch.testing.assert_close(out, sdpa_band(q, k, v, 37), **SDPA_TOL[dtype])  # same dtype
    torch.testing.assert_close(out.double(), sdpa_band(*(t.double() for t in (q, k, v)), 37),
                               **EXACT_TOL[dtype])


def band_grads(q, k, v, W, dout):
    """Gradients by autograd through SDPA with the band written out, each input's own shape."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = sdpa_band(*leaves, W)
    return out, torch.autograd.grad(out, leaves, dout)


def windowed_grads(q, k, v, W, dout, block_size):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = tiled_attention(*leaves, block_size=block_size, causal=True, window=W)
    return out, torch.autograd.grad(out, leaves, dout)


@pytest.mark.parametrize("W", [1, 3, 8])
@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES)
def test_window_gradients_equal_autograd_through_sdpa(leads, Q, K, b, W):
    g = torch.Generator().manual_seed(1)
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    q, k, v = make(*leads[0], Q, 8), make(*leads[1], K, 8), make(*leads[2], K, 5)
    dout = make(*torch.broadcast_shapes(*leads), Q, 5)
    expected_out, expected = band_grads(q, k, v, W, dout)
    out, grads = windowed_grads(q, k, v, W, dout, b)
    torch.testing.assert_close(out, expected_out, rtol=1e-12, atol=1e-12)
    for name, got, want, x in zip("qkv", grads, expected, (q, k, v)):
        assert got.shape == x.shape and got.dtype == x.dtype and torch.isfinite(got).all(), name
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12,
                                   msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_window_half_precision_gradients(device, dtype):
    q, k, v = qkv((2,), Q=33, K=40, D=16, V=8, dtype=dtype, device=device)
    dout = torch.randn(2, 33, 8, generator=torch.Generator().manual_seed(2)).to(device, dtype)
    out, grads = windowed_grads(q, k, v, 9, dout, 8)
    expected_out, expected = band_grads(*(t.double() for t in (q, k, v)), 9, dout.double())
    torch.testing.assert_close(out.double(), expected_out, **EXACT_TOL[dtype])
    for got, want in zip(grads, expected):
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), want, **SDPA_TOL[dtype])


@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES[:4])
def test_window_gradcheck_and_gradgradcheck(leads, Q, K, b):
    leaves = tuple(grad_leaves(leads, Q, K))
    attend = lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=True, window=2)
    assert torch.autograd.gradcheck(attend, leaves)
    assert torch.autograd.gradgradcheck(attend, leaves)


@pytest.mark.parametrize("leads, Q, K, b", GRAD_SHAPES)
def test_window_second_order_gradients_equal_the_naive_paths(leads, Q, K, b):
    leaves = grad_leaves(leads, Q, K, seed=7)
    dout = torch.randn(*torch.broadcast_shapes(*leads), Q, 2,
                       generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    first, second = gradient_penalty_grads(
        lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=True, window=3), leaves, dout)
    want_first, want_second = gradient_penalty_grads(
        lambda q, k, v: naive_differentiable(q, k, v, True, window=3), leaves, dout)
    for got, want in zip((*first, *second), (*want_first, *want_second)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("leads, Q, K, b", TRANSFORM_SHAPES)
def test_window_under_torch_func_grad_and_vmap(leads, Q, K, b):
    q, k, v = (t.detach() for t in grad_leaves(leads, Q, K, seed=11))
    tiled = lambda q, k, v: tiled_attention(q, k, v, block_size=b, causal=True, window=2)
    naive_ = lambda q, k, v: naive_differentiable(q, k, v, True, window=2)
    close = lambda got, want: torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    weight = torch.randn(torch.broadcast_shapes(*leads) + (Q, 2), dtype=torch.float64,
                         generator=torch.Generator().manual_seed(2))
    loss = lambda attend: lambda q, k, v: (attend(q, k, v) * weight).sum()
    close(torch.func.grad(loss(tiled), argnums=(0, 1, 2))(q, k, v),
          torch.func.grad(loss(naive_), argnums=(0, 1, 2))(q, k, v))
    many = torch.stack([q, 2 * q, -q])  # (3, ..., Q, D)
    close(torch.func.vmap(tiled, in_dims=(0, None, None))(many, k, v), naive_(many, k, v))


@pytest.mark.parametrize("block_size", [1, 2, 4, 64])
def test_window_queries_that_see_no_key_get_zeros_and_zero_gradient(block_size):
    """Q = 10 > K = 4: queries 0 … 5 sit before every key and see none, with a window too."""
    q, k, v = qkv((2,), Q=10, K=4, D=4, V=3, dtype=torch.float64)
    dout = torch.randn(2, 10, 3, dtype=torch.float64)
    out, (dq, dk, dv) = windowed_grads(q, k, v, 2, dout, block_size)
    assert all(torch.isfinite(t).all() for t in (out, dq, dk, dv))
    assert (out[:, :6] == 0).all() and (dq[:, :6] == 0).all()
    assert (out[:, 6:].abs().sum(-1) > 0).all()


# ------------------------------------------------------------------- the band's tile plan
def brute_force_band_kinds(Q, K, b, W):
    """Each tile classified from the band written out: all visible → FULL, none → SKIPPED,
    else PARTIAL."""
    visible = band(Q, K, W)
    return torch.tensor([[FULL if t.all() else SKIPPED if not t.any() else PARTIAL
                          for t in (visible[q0:q0 + b, k0:k0 + b] for k0 in range(0, K, b))]
                         for q0 in range(0, Q, b)])


@pytest.mark.parametrize("Q, K", [(12, 12), (10, 4), (4, 10), (1, 17), (17, 1), (33, 50), (50, 33)])
@pytest.mark.parametrize("b", [1, 3, 4, 5, 16, 64])
@pytest.mark.parametrize("W", [1, 2, 5, 17, 100])
def test_tile_kinds_with_a_window_match_a_count_of_the_visible_entries(Q, K, b, W):
    kinds = tile_kinds(Q, K, b, causal=True, window=W)
    assert torch.equal(kinds, brute_force_band_kinds(Q, K, b, W))


@pytest.mark.parametrize("Q, K, b, W", [(12, 12, 4, 3), (100, 100, 16, 20), (10, 30, 7, 5),
                                        (30, 10, 7, 9), (5, 5, 9, 2)])
def test_hbm_accesses_and_tile_flops_with_a_window_count_what_the_loops_do(Q, K, b, W):
    D, V = 8, 5
    standard, tiled = hbm_accesses(Q, K, b, D, V, causal=True, window=W)
    assert standard == hbm_accesses(Q, K, b, D, V)[0]  # the mask does not change Algorithm 0
    assert tiled == traffic_of_the_loops(Q, K, b, D, V, True, window=W)
    visible = band(Q, K, W)
    computed = sum(min(b, Q - q0) * min(b, K - k0) * 2 * (D + V)
                   for q0 in range(0, Q, b) for k0 in range(0, K, b)
                   if visible[q0:q0 + b, k0:k0 + b].any())
    assert tile_flops(Q, K, b, D, V, causal=True, window=W) == (computed, 2 * Q * K * (D + V))


def test_a_fixed_window_computes_a_number_of_tiles_linear_in_the_length():
    b, W, D = 16, 32, 64
    for L in (256, 512, 1024):
        computed_per_row = (tile_kinds(L, L, b, causal=True, window=W) != SKIPPED).sum(dim=1)
        assert int(computed_per_row.max()) <= math.ceil(W / b) + 1  # 3, whatever L
    banded = [tile_flops(L, L, b, D, D, causal=True, window=W)[0] for L in (256, 512, 1024)]
    causal = [tile_flops(L, L, b, D, D, causal=True)[0] for L in (256, 512, 1024)]
    for short, long in zip(banded, banded[1:]):
        assert long / short == pytest.approx(2, rel=0.05)  # linear: 2× per doubling
    for short, long in zip(causal, causal[1:]):
        assert long / short == pytest.approx(4, rel=0.05)  # quadratic: 4× per doubling


def products_per_tile(window, backward):
    """Matrix products (aten mm / bmm) that tiled_attention runs forward, or backward, on
    (2, 40, 40) inputs with b = 8, and the number of tiles it must compute."""
    q, k, v = (t.requires_grad_(backward) for t in qkv((2,), Q=40, K=40, D=4, V=3))
    computed = int((tile_kinds(40, 40, 8, causal=True, window=window) != SKIPPED).sum())
    with OpRecorder() as forward_ops:
        out = tiled_attention(q, k, v, block_size=8, causal=True, window=window)
    ops = forward_ops
    if backward:
        with OpRecorder() as backward_ops:
            torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        ops = backward_ops
    products = [name for name, _, _ in ops.ops if name.split(".")[1] in ("mm", "bmm")]
    return len(products), computed


@pytest.mark.parametrize("backward", [False, True])
def test_tiles_beyond_the_window_are_never_computed(backward):
    """Every computed tile costs the same products (2 forward: Q Kᵀ and P V; 5 backward: S,
    Pᵀ dO, dO Vᵀ, dS K, dSᵀ Q); the count of products is that times the tiles not SKIPPED, so
    the tiles beyond the window cost nothing, forward and backward."""
    per_tile = 5 if backward else 2
    for window in (None, 3, 8, 17):
        products, computed = products_per_tile(window, backward)
        assert products == per_tile * computed, (window, products, computed)
    assert products_per_tile(3, backward)[1] < products_per_tile(None, backward)[1]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", torch.tensor(2)])
def test_window_must_be_a_positive_int(bad):
    q, k, v = qkv((2,), Q=5, K=7)
    calls = [lambda: tiled_attention(q, k, v, causal=True, window=bad),
             lambda: tile_kinds(5, 7, 2, causal=True, window=bad),
             lambda: tile_flops(5, 7, 2, 4, 3, causal=True, window=bad),
             lambda: hbm_accesses(5, 7, 2, 4, 3, causal=True, window=bad)]
    for call in calls:
        with pytest.raises(ValueError, match=r"^window must be a positive int, got"):
            call()


def test_window_needs_causal():
    q, k, v = qkv((2,), Q=5, K=7)
    calls = [lambda: tiled_attention(q, k, v, window=3),
             lambda: tile_kinds(5, 7, 2, window=3),
             lambda: tile_flops(5, 7, 2, 4, 3, window=3),
             lambda: hbm_accesses(5, 7, 2, 4, 3, causal=False, window=3)]
    for call in calls:
        with pytest.raises(ValueError, match=r"^window must .*needs causal=True.*got causal=False"):
            call()
