"""MultiHeadAttention against torch.nn.MultiheadAttention with copied weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import MultiHeadAttention, transpose_output, transpose_qkv
from helpers.multihead import alibi_slopes, t5_buckets
from tests.conftest import FLOAT_DTYPES, TOL


def copy_into_torch(ours: MultiHeadAttention, bias: bool, kdim: int, vdim: int) -> nn.MultiheadAttention:
    N, H = ours.W_o.out_features, ours.num_heads
    ref = nn.MultiheadAttention(N, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True)
    with torch.no_grad():
        if ref._qkv_same_embed_dim:
            ref.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        else:
            ref.q_proj_weight.copy_(ours.W_q.weight)
            ref.k_proj_weight.copy_(ours.W_k.weight)
            ref.v_proj_weight.copy_(ours.W_v.weight)
        ref.out_proj.weight.copy_(ours.W_o.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
            ref.out_proj.bias.copy_(ours.W_o.bias)
    return ref.eval()


def torch_masks(lens: torch.Tensor | None, B: int, H: int, Q: int, K: int):
    """nn.MultiheadAttention's masks: True = *ignore* (the opposite of ours)."""
    if lens is None:
        return {}
    if lens.dim() == 1:
        return {"key_padding_mask": torch.arange(K)[None, :] >= lens[:, None]}  # (B, K)
    blocked = torch.arange(K)[None, None, :] >= lens[:, :, None]  # (B, Q, K)
    return {"attn_mask": blocked.repeat_interleave(H, dim=0)}  # (B·H, Q, K)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("sizes", [(12, 12), (5, 7)])  # (key_size, value_size)
@pytest.mark.parametrize("lens", [None, [3, 6], [[1, 2, 3, 6], [6, 5, 4, 2]]])
def test_equals_torch_multihead_attention(bias, sizes, lens):
    torch.manual_seed(3)
    B, Q, K, N, H = 2, 4, 6, 12, 3
    kdim, vdim = sizes
    ours = MultiHeadAttention(N, H, bias=bias, key_size=kdim, value_size=vdim).eval()
    ref = copy_into_torch(ours, bias, kdim, vdim)
    q, k, v = torch.randn(B, Q, N), torch.randn(B, K, kdim), torch.randn(B, K, vdim)
    valid = None if lens is None else torch.tensor(lens)
    expected, expected_w = ref(q, k, v, need_weights=True, average_attn_weights=False,
                               **torch_masks(valid, B, H, Q, K))
    out = ours(q, k, v, valid)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(ours.attention_weights, expected_w)
    assert ours.attention_weights.shape == (B, H, Q, K)
    torch.testing.assert_close(ours(q, k, v, valid, need_weights=False), expected)


def test_split_and_merge_heads_are_inverse_reshapes(device):
    X = torch.randn(2, 5, 12, device=device)
    heads = transpose_qkv(X, 4)
    assert heads.shape == (2, 4, 5, 3)
    torch.testing.assert_close(heads[:, 1], X[..., 3:6])  # head 1 holds features 3..5
    torch.testing.assert_close(transpose_output(heads), X)


def test_fully_masked_query_gives_bias_only_output_without_nan():
    mha = MultiHeadAttention(8, 2, bias=True).eval()
    x = torch.randn(1, 3, 8)
    for need_weights in (True, False):
        out = mha(x, x, x, torch.tensor([[0, 1, 3]]), need_weights=need_weights)
        assert torch.isfinite(out).all()
        # no key seen: every head's output is 0, so only W_o's bias is left (after W_v's bias too)
        torch.testing.assert_close(out[0, 0], mha.W_o.bias)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 5], [[0, 5, 1], [2, 2, 0]]])
def test_dtype_mask_matrix(device, dtype, lens):
    torch.manual_seed(4)
    ref_mha = MultiHeadAttention(8, 2, key_size=6, value_size=3).eval()
    mha = MultiHeadAttention(8, 2, key_size=6, value_size=3).eval()
    mha.load_state_dict(ref_mha.state_dict())
    mha = mha.to(device=device, dtype=dtype)
    ref_mha = ref_mha.double()
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 3)
    valid = None if lens is None else torch.tensor(lens)
    expected = ref_mha(q.double(), k.double(), v.double(), valid)
    inputs = [t.to(device=device, dtype=dtype) for t in (q, k, v)]
    copies = [t.clone() for t in inputs]
    for need_weights in (True, False):
        out = mha(*inputs, valid, need_weights=need_weights)
        assert out.dtype == dtype and torch.isfinite(out).all()
        tol = {key: max(t, 2e-2) for key, t in TOL[dtype].items()} if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
        torch.testing.assert_close(out.cpu().double(), expected, **tol)
    assert all(torch.equal(a, b) for a, b in zip(inputs, copies))


def test_parameter_count_does_not_depend_on_heads():
    counts = {H: sum(p.numel() for p in MultiHeadAttention(16, H).parameters()) for H in (1, 2, 4, 8)}
    assert set(counts.values()) == {4 * 16 * 16}


def test_gradcheck():
    mha = MultiHeadAttention(6, 2, bias=True).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: mha(t, t, t, torch.tensor([2, 3])), (x,))


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_hiddens=10, num_heads=4), r"divisible by num_heads: got num_hiddens=10, num_heads=4"),
    (dict(num_hiddens=0, num_heads=1), r"num_hiddens must be a positive int, got 0"),
    (dict(num_hiddens=8, num_heads=2, query_size=0), r"query_size must be a positive int, got 0"),
    (dict(num_hiddens=8, num_heads=2, key_size=-1), r"key_size must be a positive int, got -1"),
    (dict(num_hiddens=8, num_heads=2, value_size=2.0), r"value_size must be a positive int, got 2.0"),
])
def test_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_wrong_feature_size_named():
    mha = MultiHeadAttention(8, 2, key_size=5)
    with pytest.raises(ValueError, match=r"feature size of keys: expected 5, got 8"):
        mha(torch.randn(1, 2, 8), torch.randn(1, 3, 8), torch.randn(1, 3, 8))


@pytest.mark.parametrize("call, match", [
    (lambda: transpose_qkv(torch.zeros(2, 3, 12), 5), r"feature size N=12 must be divisible by num_heads=5"),
    (lambda: transpose_qkv(torch.zeros(3, 12), 4), r"X must have 3 dimensions \(B, T, N\), got 2 with shape \(3, 12\)"),
    (lambda: transpose_qkv(torch.zeros(2, 3, 12), 0), r"num_heads must be a positive int, got 0"),
    (lambda: transpose_output(torch.zeros(2, 3, 4)), r"X must have 4 dimensions \(B, H, T, N/H\), got 3"),
])
def test_split_and_merge_reject_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("need_weights", [True, False])
def test_nan_in_padded_positions_changes_nothing(need_weights):
    # Self-attention over a padded batch: whatever sits past the valid length (here NaN / inf)
    # must not reach the valid outputs, exactly as if the padding were zeros.
    torch.manual_seed(6)
    mha = MultiHeadAttention(8, 2, bias=True).eval()
    ref = copy_into_torch(mha, True, 8, 8)
    x = torch.randn(2, 5, 8)
    lens = torch.tensor([3, 5])
    dirty = x.clone()
    dirty[0, 3] = float("nan")
    dirty[0, 4] = float("inf")
    expected, _ = ref(x, x, x, key_padding_mask=torch.arange(5)[None, :] >= lens[:, None])
    out = mha(x, dirty, dirty, lens, need_weights=need_weights)  # queries clean: keys and values padded
    torch.testing.assert_close(out, expected)


def test_sizes_are_keyword_only_and_d2l_order_is_explained():
    import inspect

    params = inspect.signature(MultiHeadAttention).parameters
    assert [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == ["num_hiddens", "num_heads"]
    assert {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY} == {
        "dropout", "bias", "query_size", "key_size", "value_size", "rotary", "rotary_base",
        "rotary_scale", "position_bias", "window", "sink", "num_kv_heads", "gate"}
    # d2l-zh: MultiHeadAttention(key_size, query_size, value_size, num_hiddens, num_heads, dropout)
    with pytest.raises(ValueError, match=r"keyword-only.*d2l-zh's order.*write MultiHeadAttention"
                                         r"\(16, 4, dropout=0.5, query_size=12, key_size=10, value_size=14\)"):
        MultiHeadAttention(10, 12, 14, 16, 4, 0.5)
    with pytest.raises(ValueError, match=r"write MultiHeadAttention\(16, 4, dropout=0.5\)"):
        MultiHeadAttention(16, 4, 0.5)  # d2l-en passes dropout third
    mha = MultiHeadAttention(16, 4, dropout=0.5, query_size=12, key_size=10, value_size=14)
    assert (mha.W_q.in_features, mha.W_k.in_features, mha.W_v.in_features, mha.dropout) == (12, 10, 14, 0.5)


@pytest.mark.parametrize("kwargs, match", [
    (dict(dropout=1.5), r"dropout must be a probability in \[0, 1\), got 1.5"),
    (dict(dropout=-0.5), r"dropout must be a probability in \[0, 1\), got -0.5"),
    (dict(bias="yes"), r"bias must be True or False, got 'yes'"),
])
def test_bad_hyper_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(8, 2, **kwargs)


def test_numpy_sizes_are_accepted():
    import numpy as np

    mha = MultiHeadAttention(np.int64(8), np.int64(2), key_size=np.int64(5), dropout=np.float32(0.25))
    assert mha.W_k.in_features == 5 and mha.num_heads == 2 and mha.dropout == 0.25
    assert mha(torch.randn(1, 2, 8), torch.randn(1, 3, 5), torch.randn(1, 3, 8)).shape == (1, 2, 8)


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradcheck_with_lengths_on_both_paths(need_weights):
    """The rows no query may see are zeroed in place in the projections: autograd still holds."""
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2, bias=True).double()
    q, k, v = (torch.randn(2, n, 8, dtype=torch.double, requires_grad=True) for n in (3, 5, 5))
    lens = torch.tensor([2, 5])
    assert torch.autograd.gradcheck(
        lambda a, b, c: mha(a, b, c, lens, need_weights=need_weights), (q, k, v))


@pytest.mark.parametrize("need_weights", [True, False])
def test_unseen_rows_stay_harmless_with_a_cache(need_weights):
    """With a KV cache the projections are not cleaned in place (the cache holds earlier keys):
    the generic zeroing in attend must still keep NaN in padded rows out of the output."""
    from helpers import KVCache

    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 4, 8)
    dirty = x.clone()
    dirty[0, 3] = float("nan")  # the last key and value: past the valid length 3
    cache = KVCache()
    mha(x[:, :2], x[:, :2], x[:, :2], cache=cache)  # two tokens cached
    out = mha(x[:, 2:], dirty[:, 2:], dirty[:, 2:], torch.tensor([3]), cache=cache,
              need_weights=need_weights)
    expected = mha(x[:, 2:], x[:, :3], x[:, :3])  # the same queries over the three valid keys
    assert not out.isnan().any()
    torch.testing.assert_close(out, expected)


def rope_reference(mha: MultiHeadAttention, q_in, kv_in, q_positions, k_positions, causal):
    """MultiHeadAttention with RoPE written out: projections, heads, apply_rotary at the given
    positions, the lower-right causal mask, softmax, heads merged, W_o. All float64."""
    from helpers import apply_rotary

    H = mha.num_heads
    q = transpose_qkv(q_in.double() @ mha.W_q.weight.double().T, H)  # (B, H, Q, d)
    k = transpose_qkv(kv_in.double() @ mha.W_k.weight.double().T, H)  # (B, H, K, d)
    v = transpose_qkv(kv_in.double() @ mha.W_v.weight.double().T, H)
    if q_positions is not None:
        q = apply_rotary(q, torch.tensor(q_positions))
        k = apply_rotary(k, torch.tensor(k_positions))
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, Q, K)
    if causal:
        Q, K = scores.shape[-2:]
        seen = torch.arange(K)[None, :] <= torch.arange(Q)[:, None] + (K - Q)  # query i at K − Q + i
        scores = scores.masked_fill(~seen, float("-inf"))
    return transpose_output(scores.softmax(-1) @ v) @ mha.W_o.weight.double().T  # (B, Q, N)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("use_cache", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_last_queries_equal_the_last_rows_of_full_causal_self_attention(rotary, use_cache, need_weights):
    """Queries X[:, 3:] against all of X (or against a cache holding X[:, :3]) sit at positions
    3, 4 for the causal mask (lower-right) and for RoPE alike."""
    from helpers import KVCache

    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2, rotary=rotary).eval()
    X = torch.randn(2, 5, 8)
    full = mha(X, X, X, causal=True, need_weights=need_weights)  # (B, 5, N)
    if use_cache:
        cache = KVCache()
        mha(X[:, :3], X[:, :3], X[:, :3], causal=True, cache=cache)
        part = mha(X[:, 3:], X[:, 3:], X[:, 3:], causal=True, cache=cache, need_weights=need_weights)
    else:
        part = mha(X[:, 3:], X, X, causal=True, need_weights=need_weights)
    torch.testing.assert_close(part, full[:, 3:])
    expected = rope_reference(mha, X[:, 3:], X, [3, 4] if rotary else None, [0, 1, 2, 3, 4], True)
    torch.testing.assert_close(part.double(), expected, rtol=1e-5, atol=1e-6)


def test_rotary_without_causal_uses_the_same_lower_right_positions():
    """Q ≠ K without causal: query i is rotated at position K − Q + i (the documented convention),
    so X[:, 3:] against X gives the last rows of the full self-attention."""
    torch.manual_seed(8)
    mha = MultiHeadAttention(8, 2, rotary=True).eval()
    X = torch.randn(1, 5, 8)
    torch.testing.assert_close(mha(X[:, 3:], X, X), mha(X, X, X)[:, 3:])
    expected = rope_reference(mha, X[:, 3:], X, [3, 4], [0, 1, 2, 3, 4], False)
    torch.testing.assert_close(mha(X[:, 3:], X, X).double(), expected, rtol=1e-5, atol=1e-6)
    # Q > K: the first queries sit at negative positions (K − Q + i), as the causal mask has them
    expected = rope_reference(mha, X, X[:, :2], [-3, -2, -1, 0, 1], [0, 1], False)
    torch.testing.assert_close(mha(X, X[:, :2], X[:, :2]).double(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_with_zero_keys_gives_zeros_like_without(need_weights):
    """No key at all: causal=True hides nothing more; the error once named num_keys, an
    argument the caller never passed."""
    mha = MultiHeadAttention(8, 2).eval()
    q, kv = torch.randn(1, 3, 8), torch.zeros(1, 0, 8)
    out = mha(q, kv, kv, causal=True, need_weights=need_weights)
    torch.testing.assert_close(out, mha(q, kv, kv, need_weights=need_weights))
    torch.testing.assert_close(out, torch.zeros(1, 3, 8))  # no bias: every head's output is 0


def test_rotary_keys_are_rotated_once_before_they_are_cached():
    """Token by token with a KVCache: the cache holds each key rotated at its own position (not
    raw keys, not keys rotated again at later steps), and every step's output is the full causal
    pass's row. Rotating the cached keys all at the current position instead loses the positions."""
    from helpers import KVCache, apply_rotary

    torch.manual_seed(9)
    mha = MultiHeadAttention(8, 2, rotary=True).double().eval()
    X = torch.randn(2, 6, 8, dtype=torch.float64)
    full = mha(X, X, X, causal=True)  # (B, T, N)
    cache = KVCache()
    steps = [mha(X[:, t:t + 1], X[:, t:t + 1], X[:, t:t + 1], causal=True, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    raw = transpose_qkv(X @ mha.W_k.weight.T, 2)  # (B, H, T, N/H): the keys before RoPE
    torch.testing.assert_close(cache.keys, apply_rotary(raw, torch.arange(6)))
    assert not torch.allclose(cache.keys, raw)
    # the wrong way, by hand: rotate every cached raw key at the last query's position 5
    q = apply_rotary(transpose_qkv(X[:, 5:] @ mha.W_q.weight.T, 2), torch.tensor([5]))  # (B, H, 1, N/H)
    v = transpose_qkv(X @ mha.W_v.weight.T, 2)
    wrong = ((q @ apply_rotary(raw, torch.full((6,), 5)).transpose(-2, -1) / 2.0).softmax(-1) @ v)
    wrong = transpose_output(wrong) @ mha.W_o.weight.T  # (B, 1, N)
    assert (wrong - full[:, 5:]).abs().max() > 1e-3


# ---------------------------------------------------------------- position biases (ALiBi, T5)
def t5_bucket_by_hand(distance: int, num_buckets: int = 32, max_distance: int = 128) -> int:
    """T5's ``_relative_position_bucket`` for a decoder (bidirectional=False), one distance
    m − n at a time: negative distances count as 0, 0 … E − 1 (E = num_buckets // 2) get a bucket
    each, then log-spaced buckets up to max_distance, and the last bucket from there on."""
    distance = max(distance, 0)
    exact = num_buckets // 2
    if distance < exact:
        return distance
    bucket = exact + int(math.log(distance / exact) / math.log(max_distance / exact)
                         * (num_buckets - exact))
    return min(bucket, num_buckets - 1)


def bias_by_hand(mha: MultiHeadAttention, Q: int, K: int) -> torch.Tensor:
    """(H, Q, K), float64: −s_h·(m − n) with s_h = 2^(−8h/H) (ALiBi), or the table's scalar for
    the bucket of m − n (T5); query i at m = K − Q + i, key j at n = j."""
    H = mha.num_heads
    distance = torch.arange(K - Q, K)[:, None] - torch.arange(K)[None, :]  # (Q, K)
    if mha.position_bias == "alibi":
        slopes = torch.tensor([2.0 ** (-8.0 * h / H) for h in range(1, H + 1)], dtype=torch.float64)
        return -slopes[:, None, None] * distance  # (H, Q, K)
    rows = torch.tensor([[t5_bucket_by_hand(int(d)) for d in row] for row in distance],
                        dtype=torch.long).reshape(Q, K)  # (Q, K)
    return mha.relative_bias.weight.detach().double()[rows].permute(2, 0, 1)  # (H, Q, K)


def biased_module(kind: str, seed: int = 11) -> MultiHeadAttention:
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2, bias=True, position_bias=kind).eval()
    if kind == "t5":  # the table starts at 0: give it values, so that a wrong bucket shows
        with torch.no_grad():
            mha.relative_bias.weight.normal_()
    return mha


@pytest.mark.parametrize("H, expected", [(8, [1 / 2 ** h for h in range(1, 9)]), (2, [1 / 16, 1 / 256]),
                                         (1, [1 / 256])])
def test_alibi_slopes_are_a_geometric_sequence(H, expected):
    slopes = alibi_slopes(H)
    assert slopes.dtype == torch.float64 and slopes.shape == (H,)
    torch.testing.assert_close(slopes, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=0)
    torch.testing.assert_close(alibi_slopes(12), torch.tensor([2.0 ** (-8 * h / 12) for h in range(1, 13)],
                                                              dtype=torch.float64))


@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 20), (2, 2), (5, 100)])
def test_t5_buckets_equal_t5s_formula(num_buckets, max_distance):
    distances = torch.arange(-5, 1000).reshape(5, -1)  # any shape, negative ones included
    got = t5_buckets(distances, num_buckets=num_buckets, max_distance=max_distance)
    assert got.dtype == torch.long and got.shape == distances.shape
    expected = [[t5_bucket_by_hand(int(d), num_buckets, max_distance) for d in row] for row in distances]
    assert got.tolist() == expected


def test_t5_buckets_of_a_decoder():
    buckets = t5_buckets(torch.arange(0, 301)).tolist()
    assert buckets[:16] == list(range(16))  # 0 … 15 exact
    starts = [buckets.index(b) for b in range(16, 32)]
    assert starts == [16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113]
    assert set(buckets[113:]) == {31}
    assert t5_buckets(torch.tensor([-1, -100])).tolist() == [0, 0]  # keys after the query


@pytest.mark.parametrize("kind", ["alibi", "t5"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_position_bias_equals_sdpa_with_the_bias_as_a_float_mask(kind, need_weights):
    """softmax(q·k/√d + b) v with b written out, against F.scaled_dot_product_attention given the
    same bias as a float attn_mask (−inf in the future), in float64; Q < K (lower-right)."""
    mha = biased_module(kind).double()
    X = torch.randn(2, 6, 8, dtype=torch.float64)
    queries = X[:, 2:]  # (B, 4, N): positions 2 … 5
    out = mha(queries, X, X, causal=True, need_weights=need_weights)
    q = transpose_qkv(mha.W_q(queries), 2)  # (B, H, 4, 4)
    k, v = transpose_qkv(mha.W_k(X), 2), transpose_qkv(mha.W_v(X), 2)  # (B, H, 6, 4)
    bias = bias_by_hand(mha, 4, 6)  # (H, Q, K)
    future = torch.arange(6)[None, :] > torch.arange(2, 6)[:, None]  # (Q, K)
    mask = bias.masked_fill(future, float("-inf"))  # (H, Q, K)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, Q, d)
    expected = mha.W_o(transpose_output(expected))
    torch.testing.assert_close(out, expected)
    if need_weights:
        scores = q @ k.transpose(-2, -1) / 2.0 + bias  # (B, H, Q, K): √d = 2
        torch.testing.assert_close(mha.attention_weights, scores.masked_fill(future, float("-inf")).softmax(-1))
    else:
        assert mha.attention_weights is None


@pytest.mark.parametrize("kind", ["alibi", "t5"])
def test_score_bias_is_the_formula(kind):
    mha = biased_module(kind)
    for Q, K in [(5, 5), (1, 7), (3, 9), (0, 4), (0, 0)]:
        got = mha.score_bias(Q, K)
        assert got.shape == (2, Q, K) and got.dtype == torch.float32
        torch.testing.assert_close(got.double(), bias_by_hand(mha, Q, K))
    got = mha.score_bias(4, 3)  # Q > K: the first query sits at position −1
    torch.testing.assert_close(got.double(), bias_by_hand(mha, 4, 3))
    with pytest.raises(ValueError, match=r"position_bias must be 'alibi' or 't5' for score_bias, got None"):
        MultiHeadAttention(8, 2).score_bias(2, 2)


@pytest.mark.parametrize("kind", ["alibi", "t5"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_position_bias_continues_from_the_cache(kind, need_weights):
    """Token by token with a KVCache, the biases see the true distances: every step is the full
    causal pass's row."""
    from helpers import KVCache

    mha = biased_module(kind).double()
    X = torch.randn(2, 7, 8, dtype=torch.float64)
    full = mha(X, X, X, causal=True)
    cache = KVCache()
    parts = [mha(X[:, :3], X[:, :3], X[:, :3], causal=True, cache=cache, need_weights=need_weights)]
    parts += [mha(X[:, t:t + 1], X[:, t:t + 1], X[:, t:t + 1], causal=True, cache=cache,
                  need_weights=need_weights) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)


@pytest.mark.parametrize("kind", ["alibi", "t5"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 5], [[0, 5, 1, 2, 3], [2, 2, 0, 4, 5]]])
def test_position_bias_every_dtype_and_no_nan_for_an_empty_row(device, kind, dtype, lens):
    """float16 … float64 on every device, close to float64; a query with no key (valid length 0)
    gives zeros from the heads, never NaN, on both paths; padded keys holding NaN change nothing."""
    ref = biased_module(kind).double()
    mha = biased_module(kind).to(device=device, dtype=dtype)
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    valid = None if lens is None else torch.tensor(lens)
    expected = ref(X, X, X, valid, causal=True)
    dirty = X.clone()
    if lens is not None and not isinstance(lens[0], list):
        dirty[0, :] = float("nan")  # batch row 0 has valid length 0: no key may be seen
    for need_weights in (True, False):
        out = mha(X.to(device, dtype), dirty.to(device, dtype), dirty.to(device, dtype),
                  None if valid is None else valid.to(device), causal=True, need_weights=need_weights)
        assert out.dtype == dtype and torch.isfinite(out).all()
        tol = dict(rtol=2e-2, atol=2e-2) if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
        torch.testing.assert_close(out.cpu().double(), expected, **tol)


def test_position_bias_gradcheck():
    for kind in ("alibi", "t5"):
        mha = biased_module(kind).double()
        x = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: mha(t, t, t, torch.tensor([3, 4]), causal=True), (x,))
        assert torch.autograd.gradcheck(
            lambda t: mha(t, t, t, causal=True, need_weights=False), (x,))


def test_t5_table_learns_and_starts_at_zero():
    mha = MultiHeadAttention(8, 2, position_bias="t5")
    assert mha.relative_bias.weight.shape == (32, 2) and bool((mha.relative_bias.weight == 0).all())
    X = torch.randn(1, 20, 8)
    mha(X, X, X, causal=True).sum().backward()
    grad = mha.relative_bias.weight.grad
    assert grad[:16].abs().sum() > 0 and bool((grad[21:] == 0).all())  # distances 0 … 19 only
    assert not hasattr(MultiHeadAttention(8, 2, position_bias="alibi"), "relative_bias")


@pytest.mark.parametrize("kwargs, match", [
    (dict(position_bias="rope"), r"position_bias must be None or one of \('alibi', 't5'\), got 'rope'"),
    (dict(position_bias=True), r"position_bias must be None or one of \('alibi', 't5'\), got True"),
    (dict(rotary_scale=0.5), r"rotary_scale must be 1.0 without rotary \(it rescales RoPE's "
                             r"positions\), got rotary_scale=0.5 with rotary=False"),
    (dict(rotary=True, rotary_scale=0.0), r"rotary_scale must be a finite number > 0.0, got 0.0"),
    (dict(rotary=True, rotary_scale=float("inf")), r"rotary_scale must be a finite number > 0.0, got inf"),
])
def test_bad_position_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(8, 2, **kwargs)


def test_position_bias_refuses_attention_that_is_not_causal():
    mha = MultiHeadAttention(8, 2, position_bias="alibi")
    X = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match=r"causal must be True with position_bias='alibi' .* got causal=False"):
        mha(X, X, X)


@pytest.mark.parametrize("scale", [0.25, 0.5, 2.0])
def test_rotary_scale_rotates_at_the_scaled_positions(scale):
    """Position interpolation in the module: queries and keys turned at positions × scale, as
    apply_rotary's formula written out (rope_reference with fractional positions)."""
    from tests.test_rotary import rotate_by_hand

    torch.manual_seed(12)
    mha = MultiHeadAttention(8, 2, rotary=True, rotary_scale=scale).eval()
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    positions = [p * scale for p in range(5)]  # fractional: p · scale
    q = rotate_by_hand(transpose_qkv(X @ mha.W_q.weight.double().T, 2), positions, 10000.0, False)
    k = rotate_by_hand(transpose_qkv(X @ mha.W_k.weight.double().T, 2), positions, 10000.0, False)
    v = transpose_qkv(X @ mha.W_v.weight.double().T, 2)  # (B, H, T, d)
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)
    weights = (q @ k.transpose(-2, -1) / 2.0).masked_fill(future, float("-inf")).softmax(-1)  # √d = 2
    expected = transpose_output(weights @ v) @ mha.W_o.weight.double().T  # (B, T, N)
    mha = mha.double()
    torch.testing.assert_close(mha(X, X, X, causal=True), expected)
    plain = MultiHeadAttention(8, 2, rotary=True).double().eval()
    plain.load_state_dict(mha.state_dict())
    assert not torch.allclose(plain(X, X, X, causal=True), mha(X, X, X, causal=True))


# ---------------------------------------------------------------- sliding window and attention sink
def band_by_hand(Q: int, K: int, window: int) -> torch.Tensor:
    """(Q, K) True = takes part: query i at position K − Q + i sees key j iff
    0 ≤ (K − Q + i) − j < window."""
    return torch.tensor([[0 <= (K - Q + i) - j < window for j in range(K)] for i in range(Q)])


def sink_reference(mha: MultiHeadAttention, q_in, kv_in, take: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out (B, Q, N), weights (B, H, Q, K)) in float64, by hand: scores q kᵀ/√d, −inf where
    ``take`` (broadcasting to (B, H, Q, K), True = takes part) is False, one more column holding
    each head's sink logit, softmax, that column dropped, times v, heads merged, W_o."""
    H = mha.num_heads
    q = transpose_qkv(q_in.double() @ mha.W_q.weight.double().T, H)  # (B, H, Q, d)
    k = transpose_qkv(kv_in.double() @ mha.W_k.weight.double().T, H)  # (B, H, K, d)
    v = transpose_qkv(kv_in.double() @ mha.W_v.weight.double().T, H)  # (B, H, K, d)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~take, -math.inf)
    sink = mha.sink_logits.detach().double()[None, :, None, None].expand(*scores.shape[:-1], 1)
    weights = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]  # (B, H, Q, K)
    return transpose_output(weights @ v) @ mha.W_o.weight.double().T, weights


def sink_module(seed: int = 13, **kwargs) -> MultiHeadAttention:
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2, sink=True, **kwargs).double().eval()
    with torch.no_grad():
        mha.sink_logits.copy_(torch.tensor([0.7, -1.3]))  # it starts at 0: make the heads differ
    return mha


@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("lens", [None, [6, 0], [[1, 6, 0, 3], [2, 2, 5, 6]]])
def test_sink_equals_softmax_with_one_more_column_and_sdpa_with_a_zero_key(window, lens):
    """In float64: the written-out softmax over [scores, sink] with the sink's column dropped;
    and F.scaled_dot_product_attention given one more key per head whose score is the sink
    logit (a zero key, the logit in a float attn_mask) and whose value is 0."""
    mha = sink_module(window=window)
    B, Q, K, H, d = 2, 4, 6, 2, 4
    X = torch.randn(B, K, 8, dtype=torch.float64)
    queries = X[:, K - Q:]  # the last Q positions
    take = torch.ones(B, 1, Q, K, dtype=torch.bool)
    if lens is not None:
        take = take & (torch.arange(K) < torch.tensor(lens).reshape(B, 1, -1, 1))
    take = take & band_by_hand(Q, K, K if window is None else window)  # causal (and the band)
    expected, expected_w = sink_reference(mha, queries, X, take)
    valid = None if lens is None else torch.tensor(lens)
    torch.testing.assert_close(mha(queries, X, X, valid, causal=True), expected)
    torch.testing.assert_close(mha.attention_weights, expected_w)
    assert bool((mha.attention_weights.sum(-1) < 1).all())
    torch.testing.assert_close(mha(queries, X, X, valid, causal=True, need_weights=False), expected)
    assert mha.attention_weights is None
    q = transpose_qkv(mha.W_q(queries), H)  # (B, H, Q, d)
    k, v = transpose_qkv(mha.W_k(X), H), transpose_qkv(mha.W_v(X), H)  # (B, H, K, d)
    zero = torch.zeros(B, H, 1, d, dtype=torch.float64)
    sink = mha.sink_logits.detach()[None, :, None, None].expand(B, H, Q, 1)
    mask = torch.cat([torch.zeros(B, H, Q, K, dtype=torch.float64).masked_fill(~take, -math.inf), sink], -1)
    sdpa = F.scaled_dot_product_attention(q, torch.cat([k, zero], 2), torch.cat([v, zero], 2), attn_mask=mask)
    torch.testing.assert_close(mha.W_o(transpose_output(sdpa)), expected)


@pytest.mark.parametrize("lens", [None, [3, 6], [[1, 2, 3, 6], [6, 5, 4, 2]]])
def test_sink_at_minus_infinity_equals_torch_multihead_attention(lens):
    torch.manual_seed(14)
    ours = MultiHeadAttention(12, 3, bias=True, key_size=5, value_size=7, sink=True).double().eval()
    ref = copy_into_torch(ours, True, 5, 7).double()
    q, k, v = (torch.randn(2, n, size, dtype=torch.float64) for n, size in ((4, 12), (6, 5), (6, 7)))
    valid = None if lens is None else torch.tensor(lens)
    expected, expected_w = ref(q, k, v, need_weights=True, average_attn_weights=False,
                               **torch_masks(valid, 2, 3, 4, 6))
    for logit in (-math.inf, -1e4):
        with torch.no_grad():
            ours.sink_logits.fill_(logit)
        for need_weights in (False, True):  # the weights kept are those of the last call
            torch.testing.assert_close(ours(q, k, v, valid, need_weights=need_weights), expected)
        torch.testing.assert_close(ours.attention_weights, expected_w)


def test_sink_is_a_learnt_logit_per_head_that_starts_at_zero():
    mha = MultiHeadAttention(8, 4, sink=True)
    assert isinstance(mha.sink_logits, nn.Parameter) and mha.sink_logits.shape == (4,)
    assert bool((mha.sink_logits == 0).all()) and "sink_logits" in mha.state_dict()
    assert MultiHeadAttention(8, 4).sink_logits is None and "sink_logits" not in MultiHeadAttention(8, 4).state_dict()
    X = torch.randn(2, 5, 8)
    for need_weights in (True, False):
        mha.zero_grad()
        mha(X, X, X, causal=True, need_weights=need_weights).square().sum().backward()
        assert mha.sink_logits.grad is not None and bool((mha.sink_logits.grad != 0).all())
    # every score 0 (W_q = 0) and the sink 10: a row keeps 5 / (5 + e^10) of its weight
    with torch.no_grad():
        mha.W_q.weight.mul_(0)
        mha.sink_logits.fill_(10.0)
    mha(X, X, X)
    torch.testing.assert_close(mha.attention_weights.sum(-1), torch.full((2, 4, 5), 5 / (5 + math.exp(10.0))))


def test_sink_gradcheck_with_lengths_window_and_cache_free_paths():
    mha = sink_module(window=2)
    x = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    for need_weights in (True, False):
        assert torch.autograd.gradcheck(
            lambda t: mha(t, t, t, torch.tensor([0, 3]), causal=True, need_weights=need_weights), (x,))
    assert torch.autograd.gradcheck(lambda s: _with_sink_logits(mha, s, x.detach()),
                                    (torch.tensor([0.2, -0.4], dtype=torch.float64, requires_grad=True),))


def _with_sink_logits(mha: MultiHeadAttention, logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The module's output as a function of its sink logits (for gradcheck)."""
    saved = mha.sink_logits
    try:
        del mha.sink_logits
        mha.sink_logits = logits  # a plain tensor in the parameter's place
        return mha(x, x, x, causal=True)
    finally:
        del mha.sink_logits
        mha.sink_logits = saved


@pytest.mark.parametrize("sizes", [(5, 5), (3, 8)])  # (Q, K)
@pytest.mark.parametrize("window", [1, 2, 4, 9])
@pytest.mark.parametrize("lens", [None, [8, 2]])
def test_window_equals_torch_multihead_attention_with_the_band(sizes, window, lens):
    """nn.MultiheadAttention's attn_mask means True = *ignore*: the band written out, inverted.
    A query that sees no key (the band and the lengths disjoint) is NaN there; ours gives the
    heads' zeros, so only W_o's bias is left."""
    torch.manual_seed(15)
    Q, K = sizes
    ours = MultiHeadAttention(12, 3, bias=True, window=window).eval()
    ref = copy_into_torch(ours, True, 12, 12)
    X = torch.randn(2, K, 12)
    q = X[:, K - Q:]
    valid = None if lens is None else torch.tensor(lens).clamp(max=K)
    ignore = ~band_by_hand(Q, K, window)  # (Q, K), True = ignore
    masks = {} if valid is None else {"key_padding_mask": torch.arange(K)[None, :] >= valid[:, None]}
    expected, expected_w = ref(q, X, X, attn_mask=ignore, need_weights=True, average_attn_weights=False, **masks)
    expected = torch.where(expected.isnan(), ref.out_proj.bias.detach(), expected)
    expected_w = expected_w.nan_to_num(0.0)
    for need_weights in (False, True):  # the weights kept are those of the last call
        torch.testing.assert_close(ours(q, X, X, valid, causal=True, need_weights=need_weights), expected)
    torch.testing.assert_close(ours.attention_weights, expected_w)
    assert bool((ours.attention_weights[..., ignore] == 0).all())


@pytest.mark.parametrize("config", [dict(), dict(rotary=True), dict(position_bias="alibi"),
                                    dict(position_bias="t5"), dict(sink=True),
                                    dict(rotary=True, sink=True)], ids=str)
@pytest.mark.parametrize("need_weights", [True, False])
def test_window_fed_one_token_at_a_time_through_a_cache_equals_the_full_forward(config, need_weights):
    from helpers import KVCache

    torch.manual_seed(16)
    mha = MultiHeadAttention(8, 2, window=3, **config).double().eval()
    with torch.no_grad():
        for name, p in mha.named_parameters():
            if name in ("relative_bias.weight", "sink_logits"):
                p.normal_()
    X = torch.randn(2, 7, 8, dtype=torch.float64)
    full = mha(X, X, X, causal=True)
    banded = mha.attention_weights
    assert bool((banded[..., ~band_by_hand(7, 7, 3)] == 0).all())
    plain = MultiHeadAttention(8, 2, **config).double().eval()
    plain.load_state_dict(mha.state_dict())
    assert not torch.allclose(plain(X, X, X, causal=True), full)  # the window matters
    cache = KVCache()
    parts = [mha(X[:, :2], X[:, :2], X[:, :2], causal=True, cache=cache, need_weights=need_weights)]
    parts += [mha(X[:, t:t + 1], X[:, t:t + 1], X[:, t:t + 1], causal=True, cache=cache,
                  need_weights=need_weights) for t in range(2, 7)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)


def test_window_needs_causal_and_a_positive_size():
    mha = MultiHeadAttention(8, 2, window=2)
    assert mha.window == 2 and MultiHeadAttention(8, 2).window is None
    X = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match=r"^causal must be True with window=2 \(a sliding window over "
                                         r"the past\), got causal=False"):
        mha(X, X, X)
    for bad in (0, -1, 2.0, True, "2"):
        with pytest.raises(ValueError, match=r"^window must be a positive int, got"):
            MultiHeadAttention(8, 2, window=bad)
    with pytest.raises(ValueError, match=r"^sink must be True or False, got 1"):
        MultiHeadAttention(8, 2, sink=1)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 5], [[0, 5, 1], [2, 2, 0]]])
def test_window_and_sink_every_dtype_close_to_float64(device, dtype, lens):
    """float16 … float64 on every device, both paths: close to the float64 module, finite for a
    query with no key (zeros from the heads), the inputs unchanged."""
    ref = sink_module(window=2)
    mha = sink_module(window=2).to(device=device, dtype=dtype)
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    valid = None if lens is None else torch.tensor(lens)
    expected = ref(X[:, 2:], X, X, valid, causal=True)
    inputs = [t.to(device, dtype) for t in (X[:, 2:], X, X)]
    copies = [t.clone() for t in inputs]
    for need_weights in (True, False):
        out = mha(*inputs, None if valid is None else valid.to(device), causal=True, need_weights=need_weights)
        assert out.dtype == dtype and torch.isfinite(out).all()
        tol = dict(rtol=2e-2, atol=2e-2) if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
        torch.testing.assert_close(out.cpu().double(), expected, **tol)
    assert all(torch.equal(a, b) for a, b in zip(inputs, copies))


# ---------------------------------------------------------------- more queries than keys, with a bias
@pytest.mark.parametrize("kind", ["alibi", "t5"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_position_bias_with_more_queries_than_keys_gives_zeros_before_position_0(kind, need_weights):
    """Query i sits at K − Q + i "for the causal mask, RoPE and the biases alike": with Q > K the
    first Q − K queries see no key (zeros from the heads, as without a bias) and the others are
    the rows of the full causal pass. (It raised score_bias's refusal before.)"""
    mha = biased_module(kind).double()
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    out = mha(X, X[:, :3], X[:, :3], causal=True, need_weights=need_weights)  # Q = 5 > K = 3
    zero = mha.W_o(torch.zeros(8, dtype=torch.float64))  # the heads give 0, then W_o's bias
    torch.testing.assert_close(out[:, :2], zero.expand(2, 2, 8))  # queries at −2, −1
    expected = mha(X[:, 2:], X[:, :3], X[:, :3], causal=True)  # queries at 0, 1, 2
    torch.testing.assert_close(out[:, 2:], expected)
    plain = MultiHeadAttention(8, 2, bias=True).double()  # without a bias: the same zeros
    plain.load_state_dict({k: v for k, v in mha.state_dict().items() if k != "relative_bias.weight"})
    assert torch.equal(plain(X, X[:, :3], X[:, :3], causal=True)[:, :2], zero.expand(2, 2, 8))


# ---------------------------------------------------------------- an evicting cache and an empty chunk
@pytest.mark.parametrize("need_weights", [True, False])
def test_an_empty_chunk_through_an_evicting_cache_gives_b_0_n(need_weights):
    """Q = 0 with a cache that evicts returns (B, 0, N) as with a plain cache, and changes nothing
    (it raised "num_queries must be a positive int, got 0", a parameter no caller passed)."""
    from helpers import KVCache

    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 2, rotary=True).double().eval()
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    for cache in (KVCache(), KVCache(window=2), KVCache(window=2, sinks=1)):
        mha(X[:, :3], X[:, :3], X[:, :3], causal=True, cache=cache)
        held, seen = cache.keys.clone(), cache.seen
        out = mha(X[:, :0], X[:, :0], X[:, :0], causal=True, cache=cache, need_weights=need_weights)
        assert out.shape == (2, 0, 8)
        assert cache.seen == seen and torch.equal(cache.keys, held)


# ---------------------------------------------------------------- grouped-query attention
def gqa_as_mha(gqa: MultiHeadAttention) -> MultiHeadAttention:
    """The H-head module whose key and value projections repeat each of the G heads' rows H/G
    times (query head h reads key-value head h // (H/G)), every other weight copied."""
    H, G = gqa.num_heads, gqa.num_kv_heads
    d = gqa.W_q.out_features // H
    kwargs = dict(bias=gqa.W_q.bias is not None, query_size=gqa.W_q.in_features,
                  key_size=gqa.W_k.in_features, value_size=gqa.W_v.in_features, rotary=gqa.rotary,
                  position_bias=gqa.position_bias, window=gqa.window, sink=gqa.sink, gate=gqa.gate)
    mha = MultiHeadAttention(gqa.W_q.out_features, H, **kwargs).to(gqa.W_q.weight.dtype).eval()
    state = dict(gqa.state_dict())
    for name in ("W_k", "W_v"):
        for part in ("weight", "bias"):
            key = f"{name}.{part}"
            if key in state:
                t = state[key]
                state[key] = t.reshape(G, d, *t.shape[1:]).repeat_interleave(H // G, dim=0).reshape(
                    H * d, *t.shape[1:])
    mha.load_state_dict(state)
    return mha


def gqa_module(G: int, seed: int = 21, **kwargs) -> MultiHeadAttention:
    torch.manual_seed(seed)
    mha = MultiHeadAttention(12, 6, num_kv_heads=G, bias=True, **kwargs).double().eval()
    with torch.no_grad():
        for name, p in mha.named_parameters():
            if name in ("relative_bias.weight", "sink_logits"):
                p.normal_()
    return mha


@pytest.mark.parametrize("G", [1, 2, 3, 6])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_equals_sdpa_enable_gqa(G, causal):
    """Written out with PyTorch's own grouping: F.scaled_dot_product_attention(..., enable_gqa=True)
    on the projected queries (H heads) and keys and values (G heads), then W_o."""
    mha = gqa_module(G)
    q_in, kv_in = torch.randn(2, 4, 12, dtype=torch.float64), torch.randn(2, 6, 12, dtype=torch.float64)
    q = transpose_qkv(mha.W_q(q_in), 6)  # (B, H, Q, 2)
    k = transpose_qkv(mha.W_k(kv_in), G)  # (B, G, K, 2)
    v = transpose_qkv(mha.W_v(kv_in), G)
    assert k.shape == (2, G, 6, 2)
    mask = torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2) if causal else None  # lower-right
    expected = mha.W_o(transpose_output(F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                       enable_gqa=True)))
    for need_weights in (True, False):
        torch.testing.assert_close(mha(q_in, kv_in, kv_in, causal=causal, need_weights=need_weights),
                                   expected)
    assert mha.attention_weights is None or mha.attention_weights.shape == (2, 6, 4, 6)


@pytest.mark.parametrize("G", [1, 2, 6])
@pytest.mark.parametrize("config", [dict(), dict(rotary=True), dict(rotary=True, sink=True),
                                    dict(rotary=True, window=3), dict(sink=True, window=2),
                                    dict(position_bias="alibi"), dict(position_bias="t5"),
                                    dict(rotary=True, gate=True)], ids=str)
@pytest.mark.parametrize("need_weights", [True, False])
def test_gqa_equals_mha_with_repeated_key_value_heads_with_and_without_a_cache(G, config, need_weights):
    """The H-head module whose W_k and W_v repeat each group's rows (repeat_interleave written
    out) gives the same outputs and weights, in one pass and token by token through a KVCache,
    which then holds G heads only."""
    from helpers import KVCache

    gqa = gqa_module(G, **config)
    mha = gqa_as_mha(gqa)
    X = torch.randn(2, 7, 12, dtype=torch.float64)
    expected = mha(X, X, X, causal=True)
    torch.testing.assert_close(gqa(X, X, X, causal=True), expected)
    torch.testing.assert_close(gqa.attention_weights, mha.attention_weights)
    cache = KVCache()
    parts = [gqa(X[:, :3], X[:, :3], X[:, :3], causal=True, cache=cache, need_weights=need_weights)]
    parts += [gqa(X[:, t:t + 1], X[:, t:t + 1], X[:, t:t + 1], causal=True, cache=cache,
                  need_weights=need_weights) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(parts, dim=1), expected)
    assert cache.keys.shape == (2, G, 7, 2) and cache.values.shape == (2, G, 7, 2)


@pytest.mark.parametrize("G", [1, 3])
@pytest.mark.parametrize("sinks", [0, 1])
def test_gqa_through_an_evicting_cache_equals_mha_through_one(G, sinks):
    from helpers import KVCache

    gqa = gqa_module(G, rotary=True, sink=True)
    mha = gqa_as_mha(gqa)
    X = torch.randn(2, 8, 12, dtype=torch.float64)
    outs = []
    for m in (gqa, mha):
        cache = KVCache(window=3, sinks=sinks)
        outs.append(torch.cat([m(X[:, t:t + 1], X[:, t:t + 1], X[:, t:t + 1], causal=True, cache=cache)
                               for t in range(8)], dim=1))
        assert cache.keys.shape[1] == m.num_kv_heads and cache.length == sinks + 2
    torch.testing.assert_close(outs[0], outs[1])


def test_gqa_sizes_and_refusals():
    mha = MultiHeadAttention(12, 6, num_kv_heads=2, key_size=5)
    assert (mha.num_kv_heads, mha.W_k.out_features, mha.W_v.out_features, mha.W_q.out_features) == (2, 4, 4, 12)
    assert MultiHeadAttention(12, 6).num_kv_heads == 6
    with pytest.raises(ValueError, match=r"^num_kv_heads must divide num_heads=6 .*got num_kv_heads=4"):
        MultiHeadAttention(12, 6, num_kv_heads=4)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=r"^num_kv_heads must be a positive int, got"):
            MultiHeadAttention(12, 6, num_kv_heads=bad)
    with pytest.raises(ValueError, match=r"^gate must be True or False, got 1"):
        MultiHeadAttention(12, 6, gate=1)


# ---------------------------------------------------------------- gated attention
@pytest.mark.parametrize("config", [dict(), dict(rotary=True, sink=True), dict(num_kv_heads=2),
                                    dict(window=2, position_bias="alibi")], ids=str)
@pytest.mark.parametrize("need_weights", [True, False])
def test_gate_is_sigmoid_of_w_g_times_the_heads_output_before_w_o(config, need_weights):
    """Written out: the ungated module's heads output (what enters W_o) times sigmoid(W_g x_query),
    elementwise, then W_o (Qiu et al. 2025's G1 elementwise head-specific gate)."""
    torch.manual_seed(8)
    gated = MultiHeadAttention(8, 4, gate=True, bias=True, query_size=6, **config).double().eval()
    plain = MultiHeadAttention(8, 4, bias=True, query_size=6, **config).double().eval()
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("W_g")})
    assert gated.W_g.in_features == 6 and gated.W_g.out_features == 8
    q_in, kv_in = torch.randn(2, 5, 6, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64)
    heads = []
    hook = plain.W_o.register_forward_hook(lambda mod, args, out: heads.append(args[0]))
    plain(q_in, kv_in, kv_in, causal=True)
    hook.remove()
    expected = plain.W_o(heads[0] * torch.sigmoid(q_in @ gated.W_g.weight.T + gated.W_g.bias))
    got = gated(q_in, kv_in, kv_in, causal=True, need_weights=need_weights)
    torch.testing.assert_close(got, expected)
    assert not torch.allclose(got, plain(q_in, kv_in, kv_in, causal=True))
