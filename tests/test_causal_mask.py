"""causal_mask (lower-right) and the causal=True option of the attention helpers, against
formulas written out here, F.scaled_dot_product_attention and nn.MultiheadAttention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import DotProductAttention, MultiHeadAttention, causal_mask
from tests.conftest import FLOAT_DTYPES, TOL
from tests.test_multihead import copy_into_torch


@pytest.mark.parametrize("Q, K", [(1, 1), (4, 4), (3, 7), (1, 5), (6, 4)])
def test_causal_mask_is_lower_right(device, Q, K):
    mask = causal_mask(Q, K, device=device)
    assert mask.dtype == torch.bool and mask.shape == (Q, K) and mask.device.type == device.type
    for i in range(Q):
        for j in range(K):
            assert bool(mask[i, j]) == (j <= K - Q + i), (i, j)


@pytest.mark.parametrize("Q, K", [(2, 5), (3, 7), (1, 5), (4, 4)])
def test_causal_mask_equals_pytorchs_causal_lower_right(Q, K):
    """Notebook 08 checks the formula tril(diagonal=K − Q) instead of importing
    torch.nn.attention.bias (its import loads torch._dynamo); this is the check against it."""
    from torch.nn.attention.bias import causal_lower_right

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 1, Q, 8), torch.randn(1, 1, K, 8), torch.randn(1, 1, K, 3)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(Q, K)),
        F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(Q, K)))
    assert torch.equal(causal_mask(Q, K), torch.ones(Q, K, dtype=torch.bool).tril(diagonal=K - Q))


def test_square_mask_is_the_lower_triangle():
    assert torch.equal(causal_mask(5, 5), torch.ones(5, 5, dtype=torch.bool).tril())


def test_sdpa_is_causal_aligns_top_left_when_q_differs_from_k():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 5)
    top_left = torch.ones(3, 7, dtype=torch.bool).tril()  # query i sees keys j ≤ i
    sdpa_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(sdpa_causal, F.scaled_dot_product_attention(q, k, v, attn_mask=top_left))
    lower_right = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(3, 7))
    assert not torch.allclose(sdpa_causal, lower_right)  # the difference the docstring states
    q2 = torch.randn(2, 7, 8)  # Q = K: both alignments agree
    torch.testing.assert_close(F.scaled_dot_product_attention(q2, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q2, k, v, attn_mask=causal_mask(7, 7)))


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_causal_mask_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="num_queries must be a positive int"):
        causal_mask(bad, 3)
    with pytest.raises(ValueError, match="num_keys must be a positive int"):
        causal_mask(3, bad)


def reference(q, k, v, lens, causal):
    """softmax(QKᵀ/√D)V with the combined mask written out; an empty row gives zeros."""
    B, Q, D = q.shape
    K = k.shape[1]
    take = torch.ones(B, Q, K, dtype=torch.bool)
    for b in range(B):
        for i in range(Q):
            n = K if lens is None else (int(lens[b]) if lens.dim() == 1 else int(lens[b, i]))
            for j in range(K):
                take[b, i, j] = j < n and (not causal or j <= K - Q + i)
    scores = (q.double() @ k.double().transpose(1, 2)) / D**0.5
    w = torch.where(take, scores.exp(), torch.zeros((), dtype=torch.float64))
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)  # empty rows: 0 / tiny = 0
    return (w @ v.double()), w


@pytest.mark.parametrize("Q, K", [(5, 5), (2, 6), (6, 3)])
@pytest.mark.parametrize("lens", [None, [4, 1, 0], "per-query"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_dot_product_causal_and_valid_lens(Q, K, lens, need_weights):
    torch.manual_seed(1)
    B, D, V = 3, 8, 5
    q, k, v = torch.randn(B, Q, D), torch.randn(B, K, D), torch.randn(B, K, V)
    valid = None if lens is None else (
        torch.randint(0, K + 1, (B, Q)) if lens == "per-query" else torch.tensor(lens).clamp_max(K))
    expected, w = reference(q, k, v, valid, causal=True)
    att = DotProductAttention().eval()
    out = att(q, k, v, valid, causal=True, need_weights=need_weights)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)
    assert not out.isnan().any()
    if need_weights:
        torch.testing.assert_close(att.attention_weights.double(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_causal_sdpa_path_matches_weights_path_in_every_dtype(device, dtype):
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 6, 8, device=device, dtype=dtype) for _ in range(3))
    att = DotProductAttention()
    with_w = att(q, k, v, causal=True)
    fused = att(q, k, v, causal=True, need_weights=False)  # Q = K, no lens: SDPA's is_causal
    assert fused.dtype == dtype
    tol = {**TOL[dtype], "atol": 1e-2} if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
    torch.testing.assert_close(fused, with_w, **tol)
    assert not torch.allclose(att(q, k, v, causal=False), with_w, **tol)  # the mask did something


def test_causal_uses_sdpa_is_causal_only_when_q_equals_k(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append((kwargs.get("is_causal"), kwargs.get("attn_mask") is None))
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    att = DotProductAttention()
    x = torch.randn(1, 4, 8)
    att(x, x, x, causal=True, need_weights=False)
    att(x[:, :2], x, x, causal=True, need_weights=False)  # Q < K: lower-right needs a mask
    att(x[:, :1], x, x, causal=True, need_weights=False)  # one query at the end sees everything
    assert calls == [(True, True), (False, False), (False, True)]


@pytest.mark.parametrize("lens", [None, [5, 2]])
def test_multihead_causal_equals_torch_with_copied_weights(lens):
    torch.manual_seed(3)
    B, T, N, H = 2, 5, 12, 3
    ours = MultiHeadAttention(N, H, bias=True).eval()
    ref = copy_into_torch(ours, True, N, N)
    x = torch.randn(B, T, N)
    future = ~causal_mask(T, T)  # nn.MultiheadAttention: True = ignore
    kwargs = {} if lens is None else {
        "key_padding_mask": torch.arange(T)[None, :] >= torch.tensor(lens)[:, None]}
    expected, expected_w = ref(x, x, x, attn_mask=future, average_attn_weights=False, **kwargs)
    valid = None if lens is None else torch.tensor(lens)
    out = ours(x, x, x, valid, causal=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(ours.attention_weights, expected_w)
    torch.testing.assert_close(ours(x, x, x, valid, causal=True, need_weights=False), expected)


def test_causal_inputs_are_not_modified():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 2)
    before = [t.clone() for t in (q, k, v)]
    DotProductAttention()(q, k, v, torch.tensor([2]), causal=True)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v)))


@pytest.mark.parametrize("Q, K", [(1, 1), (4, 4), (3, 7), (1, 5), (6, 4)])
@pytest.mark.parametrize("window", [1, 2, 3, 100])
def test_windowed_causal_mask_is_a_lower_right_band(device, Q, K, window):
    """Query i sits at position K − Q + i and sees the W positions up to its own, written out."""
    mask = causal_mask(Q, K, device, window=window)
    want = torch.tensor([[0 <= (K - Q + i) - j < window for j in range(K)] for i in range(Q)])
    assert mask.device.type == device.type
    assert torch.equal(mask.cpu(), want)
    assert torch.equal(mask.cpu(), mask.cpu() & causal_mask(Q, K))  # never more than causal


def test_window_as_wide_as_the_keys_is_plain_causal():
    assert torch.equal(causal_mask(5, 9, window=9), causal_mask(5, 9))
    assert int(causal_mask(6, 6, window=2).sum(dim=-1).max()) == 2  # at most W keys a query


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "2"])
def test_causal_mask_rejects_a_bad_window(bad):
    with pytest.raises(ValueError, match="window"):
        causal_mask(3, 3, window=bad)


@pytest.mark.parametrize("Q, K", [(4, 4), (3, 7), (6, 4)])
@pytest.mark.parametrize("window", [1, 2, 5])
def test_the_window_means_the_same_band_in_every_helper_that_takes_it(device, Q, K, window):
    """DotProductAttention (both paths) and tiled_attention with ``window`` equal attention under
    causal_mask(Q, K, window=W) handed to scaled_dot_product as an explicit boolean mask."""
    from helpers import scaled_dot_product, tiled_attention

    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, n, size, generator=g, dtype=torch.float64).to(device)
               for n, size in ((Q, 8), (K, 8), (K, 5)))
    want, want_w = scaled_dot_product(q, k, v, causal_mask(Q, K, device, window=window))
    attention = DotProductAttention()
    for need_weights in (True, False):
        out = attention(q, k, v, causal=True, window=window, need_weights=need_weights)
        torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=2, causal=True, window=window),
                               want, rtol=1e-12, atol=1e-12)
    attention(q, k, v, causal=True, window=window)
    torch.testing.assert_close(attention.attention_weights, want_w, rtol=1e-12, atol=1e-12)
