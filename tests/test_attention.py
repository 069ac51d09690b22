"""The two scorers against PyTorch's SDPA and against their formulas written out here."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import AdditiveAttention, DotProductAttention
from tests.conftest import FLOAT_DTYPES, TOL


def qkv(device, B=2, Q=3, K=5, D=4, V=7, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    make = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype)
    return make(B, Q, D), make(B, K, D), make(B, K, V)


def sdpa_mask(lens: torch.Tensor, Q: int, K: int) -> torch.Tensor:
    """SDPA's boolean mask (True = takes part), built independently of helpers."""
    lens = lens if lens.dim() == 2 else lens[:, None].expand(-1, Q)
    return torch.arange(K)[None, None, :] < lens[:, :, None]


@pytest.mark.parametrize("lens", [None, [2, 5], [[1, 2, 3], [5, 4, 1]]])
@pytest.mark.parametrize("need_weights", [True, False])
def test_dot_product_equals_sdpa(device, lens, need_weights):
    q, k, v = qkv(device)
    valid = None if lens is None else torch.tensor(lens)
    mask = None if valid is None else sdpa_mask(valid, 3, 5).to(device)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out = DotProductAttention()(q, k, v, None if valid is None else valid.to(device),
                                need_weights=need_weights)
    torch.testing.assert_close(out, expected)


def test_dot_product_weights_match_formula(device):
    q, k, v = qkv(device, dtype=torch.float64)
    attn = DotProductAttention()
    out = attn(q, k, v, torch.tensor([3, 5]))
    w = torch.zeros(2, 3, 5, dtype=torch.float64)
    for b, n in enumerate([3, 5]):
        for i in range(3):
            s = [sum(q[b, i, d].item() * k[b, j, d].item() for d in range(4)) / math.sqrt(4) for j in range(n)]
            z = sum(math.exp(x) for x in s)
            for j in range(n):
                w[b, i, j] = math.exp(s[j]) / z
    torch.testing.assert_close(attn.attention_weights.cpu(), w)
    torch.testing.assert_close(out.cpu(), w @ v.cpu())


def test_fully_masked_query_outputs_zero_on_both_paths(device):
    q, k, v = qkv(device)
    lens = torch.tensor([[0, 2, 5], [5, 0, 0]])
    for need_weights in (True, False):
        out = DotProductAttention()(q, k, v, lens, need_weights=need_weights)
        assert torch.isfinite(out).all()
        assert out[0, 0].abs().max() == 0 and out[1, 1:].abs().max() == 0


def test_need_weights_false_keeps_no_weights():
    attn = DotProductAttention()
    attn(*qkv("cpu"), need_weights=False)
    assert attn.attention_weights is None


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 5], [[0, 1, 5], [2, 2, 0]]])
def test_dtype_mask_matrix(device, dtype, lens):
    q, k, v = qkv(device, dtype=dtype)
    inputs = [t.clone() for t in (q, k, v)]
    valid = None if lens is None else torch.tensor(lens)
    mask = None if valid is None else sdpa_mask(valid, 3, 5).to(device)
    ref = F.scaled_dot_product_attention(*(t.double() for t in (q, k, v)), attn_mask=mask)
    if mask is not None:
        ref = ref.masked_fill(~mask.any(-1, keepdim=True), 0)  # SDPA leaves such rows to chance
    for need_weights in (True, False):
        out = DotProductAttention()(q, k, v, valid, need_weights=need_weights)
        assert out.dtype == dtype and torch.isfinite(out).all()
        tol = {k_: max(t, 1e-2) for k_, t in TOL[dtype].items()} if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
        torch.testing.assert_close(out.double(), ref, **tol)
    for before, after in zip(inputs, (q, k, v)):
        assert torch.equal(before, after)


def additive_reference(q, k, v, W_q, W_k, w_v, lens):
    """w_vᵀ tanh(W_q q + W_k k) for every (query, key), masked softmax, weighted sum — by loops."""
    B, Q, K = q.shape[0], q.shape[1], k.shape[1]
    weights = torch.zeros(B, Q, K, dtype=torch.float64)
    for b in range(B):
        for i in range(Q):
            n = lens[b] if lens is not None else K
            scores = [float(w_v @ torch.tanh(W_q @ q[b, i] + W_k @ k[b, j])) for j in range(n)]
            if n:
                z = sum(math.exp(s) for s in scores)
                for j in range(n):
                    weights[b, i, j] = math.exp(scores[j]) / z
    return weights @ v, weights


@pytest.mark.parametrize("lens", [None, [2, 6], [0, 1]])
def test_additive_matches_formula_with_unequal_sizes(lens):
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 20, generator=g, dtype=torch.float64)  # query size 20
    k = torch.randn(2, 6, 2, generator=g, dtype=torch.float64)  # key size 2
    v = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    attn = AdditiveAttention(key_size=2, query_size=20, num_hiddens=8).double()
    out = attn(q, k, v, None if lens is None else torch.tensor(lens))
    ref_out, ref_w = additive_reference(q, k, v, attn.W_q.weight.detach(), attn.W_k.weight.detach(),
                                        attn.w_v.weight[0].detach(), lens)
    torch.testing.assert_close(attn.attention_weights, ref_w)
    torch.testing.assert_close(out, ref_out)
    assert attn.W_q.bias is None and attn.W_k.bias is None and attn.w_v.bias is None


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 6], [[0, 1, 6, 2], [3, 3, 0, 6]]])
def test_additive_dtypes_and_devices(device, dtype, lens):
    attn = AdditiveAttention(3, 5, 4).to(device=device, dtype=dtype)
    q = torch.randn(2, 4, 5, device=device, dtype=dtype)
    k = torch.randn(2, 6, 3, device=device, dtype=dtype)
    v = torch.randn(2, 6, 2, device=device, dtype=dtype)
    copies = [t.clone() for t in (q, k, v)]
    out = attn(q, k, v, None if lens is None else torch.tensor(lens))
    assert out.shape == (2, 4, 2) and out.dtype == dtype and torch.isfinite(out).all()
    w = attn.attention_weights
    assert w.shape == (2, 4, 6) and torch.isfinite(w).all()
    for t, c in zip((q, k, v), copies):
        assert torch.equal(t, c)
    if lens is not None:
        full = torch.tensor(lens).reshape(2, -1).expand(2, 4).to(device)  # (B, Q)
        keep = torch.arange(6, device=device) < full[..., None]  # (B, Q, K)
        assert (w[~keep] == 0).all()
        sums = w.float().sum(-1)
        torch.testing.assert_close(sums, (full > 0).float(), rtol=0, atol=1e-2)
        assert (out[full == 0] == 0).all()


def test_gradcheck_both_scorers():
    q, k, v = (t.requires_grad_() for t in qkv("cpu", dtype=torch.float64))
    lens = torch.tensor([[1, 3, 5], [2, 0, 4]])
    assert torch.autograd.gradcheck(lambda a, b, c: DotProductAttention()(a, b, c, lens), (q, k, v))
    add = AdditiveAttention(4, 4, 6).double()
    assert torch.autograd.gradcheck(lambda a, b, c: add(a, b, c, lens), (q, k, v))


@pytest.mark.parametrize("shapes, match", [
    (((2, 3), (2, 5, 4), (2, 5, 7)), r"queries must have 3 dimensions \(B, Q, D\), got 2 with shape \(2, 3\)"),
    (((2, 3, 4), (3, 5, 4), (2, 5, 7)), r"batch size of keys \(B\): expected 2, got 3"),
    (((2, 3, 4), (2, 5, 4), (2, 6, 7)), r"number of values \(K, one per key\): expected 5, got 6"),
    (((2, 3, 4), (2, 5, 3), (2, 5, 7)), r"feature size of keys \(D, same as queries\): expected 4, got 3"),
])
def test_dot_product_rejects_bad_shapes(shapes, match):
    with pytest.raises(ValueError, match=match):
        DotProductAttention()(*(torch.randn(*s) for s in shapes))


def test_additive_rejects_wrong_feature_size():
    with pytest.raises(ValueError, match=r"feature size of queries \(query_size\): expected 5, got 4"):
        AdditiveAttention(3, 5, 4)(torch.randn(1, 2, 4), torch.randn(1, 3, 3), torch.randn(1, 3, 1))


def test_valid_lens_too_long_rejected():
    with pytest.raises(ValueError, match=r"\[0, K\] = \[0, 5\], got values from 2 to 6"):
        DotProductAttention()(*qkv("cpu"), torch.tensor([2, 6]))


def test_dropout_only_in_training():
    attn = DotProductAttention(dropout=0.5)
    q, k, v = qkv("cpu")
    attn.eval()
    torch.testing.assert_close(attn(q, k, v), attn(q, k, v))
    attn.train()
    assert not torch.allclose(attn(q, k, v), DotProductAttention()(q, k, v))


@pytest.mark.parametrize("module", ["dot", "multihead"])
def test_need_weights_false_calls_sdpa_with_4d_tensors(monkeypatch, module):
    # PyTorch's fused kernels (flash, memory-efficient) only take (B, H, T, size): a 3-D call
    # falls back to the math path. The helper must hand SDPA 4-D tensors.
    from helpers import MultiHeadAttention

    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        seen.append((q.dim(), k.dim(), v.dim(), None if kwargs.get("attn_mask") is None
                     else kwargs["attn_mask"].dim()))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    q, k, _ = qkv("cpu", D=8)
    v = torch.randn(2, 5, 8)
    attn = DotProductAttention() if module == "dot" else MultiHeadAttention(8, 2)
    attn(q, k, v, torch.tensor([2, 5]), need_weights=False)
    assert seen == [(4, 4, 4, 4)]
    attn(q, k, v, torch.tensor([2, 5]))  # with weights: the helper's own softmax, no SDPA
    assert len(seen) == 1


def test_need_weights_false_runs_the_fused_cpu_kernel():
    # Restricted to flash attention alone, SDPA raises if the inputs don't qualify for it.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, _ = qkv("cpu", D=8)
    v = torch.randn(2, 5, 8)
    attn = DotProductAttention()
    expected = attn(q, k, v, torch.tensor([3, 0]))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = attn(q, k, v, torch.tensor([3, 0]), need_weights=False)
    torch.testing.assert_close(out, expected, **TOL[torch.float32])
    assert (out[1] == 0).all()


@pytest.mark.parametrize("mask_shape", [(3, 5), (2, 3, 5), (2, 1, 5)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_scaled_dot_product_takes_any_broadcastable_mask(mask_shape, need_weights):
    from helpers import scaled_dot_product

    q, k, v = qkv("cpu")
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(*mask_shape, generator=g) > 0.4
    mask[..., 0, :] = False  # an empty row: zeros, not NaN
    copies = [t.clone() for t in (q, k, v, mask)]
    out, weights = scaled_dot_product(q, k, v, mask, need_weights=need_weights)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)
    torch.testing.assert_close(out, expected, **TOL[torch.float32])
    assert (out[:, 0] == 0).all() and (weights is None) != need_weights
    for t, c in zip((q, k, v, mask), copies):
        assert torch.equal(t, c)


@pytest.mark.parametrize("mask, match", [
    (torch.ones(3, 5), r"mask must be a boolean tensor \(True = takes part\), got torch.float32"),
    (torch.ones(4, 5, dtype=torch.bool), r"mask must broadcast to \(\.\.\., Q, K\) = \(2, 3, 5\), got \(4, 5\)"),
])
def test_scaled_dot_product_rejects_bad_masks(mask, match):
    from helpers import scaled_dot_product

    with pytest.raises(ValueError, match=match):
        scaled_dot_product(*qkv("cpu"), mask)


def test_scaled_dot_product_rejects_mismatched_sizes_and_integers():
    from helpers import scaled_dot_product

    q, k, v = qkv("cpu")
    with pytest.raises(ValueError, match=r"feature size of keys \(D, same as queries\): expected 4, got 3"):
        scaled_dot_product(q, k[..., :3], v)
    with pytest.raises(ValueError, match=r"number of values \(K, one per key\): expected 5, got 4"):
        scaled_dot_product(q, k, v[:, :4])
    with pytest.raises(ValueError, match="queries must be a floating-point tensor, got dtype torch.int64"):
        scaled_dot_product(q.long(), k, v)
    with pytest.raises(ValueError, match=r"keys must be a tensor of at least 2 dimensions .* got \(5,\)"):
        scaled_dot_product(q, torch.randn(5), v)


@pytest.mark.parametrize("kwargs", [dict(key_size=0), dict(query_size=2.5), dict(num_hiddens=-1)])
def test_additive_rejects_bad_sizes(kwargs):
    sizes = dict(key_size=3, query_size=5, num_hiddens=4) | kwargs
    name, value = next(iter(kwargs.items()))
    with pytest.raises(ValueError, match=rf"{name} must be a positive int, got {value}"):
        AdditiveAttention(**sizes)


def padded_formula(q, k, v, lens):
    """softmax(q kᵀ/√D) v over the first lens[b] keys only, in float64, by slicing: the padding
    is never read."""
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float64)
    for b, n in enumerate(lens):
        if n:
            s = q[b].double() @ k[b, :n].double().T / math.sqrt(q.shape[-1])  # (Q, n)
            out[b] = torch.softmax(s, -1) @ v[b, :n].double()
    return out


def poison(x: torch.Tensor, lens: list[int]) -> torch.Tensor:
    """A copy of x (B, K, size) with NaN, inf and -inf in the rows past each valid length."""
    x = x.clone()
    for b, n in enumerate(lens):
        x[b, n:] = torch.tensor([float("nan"), float("inf"), float("-inf")]).repeat(x.shape[-1])[: x.shape[-1]]
    return x


@pytest.mark.parametrize("need_weights", [True, False])
def test_nan_or_inf_in_padding_changes_nothing_dot_product(need_weights):
    # Notebook 03: "padding changes nothing". A weight of exactly 0 is not enough (0 · NaN = NaN):
    # rows that no query may see must not reach the output at all, on both paths.
    q, k, v = qkv("cpu")
    lens = [2, 0]
    expected = padded_formula(q, k, v, lens)
    out = DotProductAttention()(q, poison(k, lens), poison(v, lens), torch.tensor(lens),
                                need_weights=need_weights)
    torch.testing.assert_close(out.double(), expected, **TOL[torch.float32])


@pytest.mark.parametrize("mask_shape", [(5,), (2, 1, 5), (1, 5)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_nan_in_padding_changes_nothing_scaled_dot_product(mask_shape, need_weights):
    from helpers import scaled_dot_product

    q, k, v = qkv("cpu")
    lens = [3, 3] if len(mask_shape) < 3 else [3, 1]
    mask = (torch.arange(5) < torch.tensor(lens)[:, None, None])  # (B, 1, K)
    mask = mask.reshape(mask_shape) if len(mask_shape) == 3 else mask[0, 0].reshape(mask_shape)
    out, _ = scaled_dot_product(q, poison(k, lens), poison(v, lens), mask, need_weights=need_weights)
    torch.testing.assert_close(out.double(), padded_formula(q, k, v, lens), **TOL[torch.float32])


def test_nan_in_padding_changes_nothing_additive():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((2, 3, 4), (2, 6, 2), (2, 6, 3)))
    attn = AdditiveAttention(key_size=2, query_size=4, num_hiddens=5).double()
    lens = [4, 1]
    expected, _ = additive_reference(q, k, v, attn.W_q.weight.detach(), attn.W_k.weight.detach(),
                                     attn.w_v.weight[0].detach(), lens)
    out = attn(q, poison(k, lens), poison(v, lens), torch.tensor(lens))
    torch.testing.assert_close(out, expected)
    assert (attn.attention_weights[0, :, 4:] == 0).all() and (attn.attention_weights[1, :, 1:] == 0).all()


@pytest.mark.parametrize("need_weights", [True, False])
def test_only_rows_that_no_query_sees_are_cleared(need_weights):
    # Per-query lengths: key 4 of row 0 is seen by no query (cleared, NaN or not); key 3 is seen
    # by query 2, so a NaN there is data and shows in query 2's output.
    q, k, v = qkv("cpu")
    lens = torch.tensor([[1, 2, 4], [5, 5, 5]])
    unseen, seen = v.clone(), v.clone()
    unseen[0, 4], seen[0, 3] = float("nan"), float("nan")
    attn = DotProductAttention()
    torch.testing.assert_close(attn(q, k, unseen, lens, need_weights=need_weights),
                               attn(q, k, v, lens, need_weights=need_weights))
    out = attn(q, k, seen, lens, need_weights=need_weights)
    assert torch.isnan(out[0, 2]).all() and torch.isfinite(out[1]).all()


def test_scaled_dot_product_key_mask_on_both_paths_matches_formula():
    # A (K,) mask used to raise IndexError without weights (the fused path took it as (1, K)).
    from helpers import scaled_dot_product

    q, k, v = qkv("cpu", dtype=torch.float64)
    keep = torch.tensor([True, False, True, True, False])
    expected = torch.softmax((q @ k.transpose(1, 2) / 2).masked_fill(~keep, float("-inf")), -1) @ v
    for need_weights in (True, False):
        out, _ = scaled_dot_product(q, k, v, keep, need_weights=need_weights)
        torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("need_weights", [True, False])
def test_scaled_dot_product_checks_batch_sizes_and_dtypes_without_a_mask(need_weights):
    from helpers import scaled_dot_product

    q, k, v = qkv("cpu")
    with pytest.raises(ValueError, match=r"must broadcast together, got \(2,\), \(3,\) and \(2,\)"):
        scaled_dot_product(q, torch.randn(3, 5, 4), v, need_weights=need_weights)
    with pytest.raises(ValueError, match=r"keys must have the dtype and device of queries "
                                         r"\(torch.float32 on cpu\), got torch.float64 on cpu"):
        scaled_dot_product(q, k.double(), v, need_weights=need_weights)
    with pytest.raises(ValueError, match=r"dropout_p must be a probability in \[0, 1\), got -0.5"):
        scaled_dot_product(q, k, v, dropout_p=-0.5, need_weights=need_weights)
    # keys shared by the batch broadcast, as in torch.matmul
    out, _ = scaled_dot_product(q, k[:1], v[:1], need_weights=need_weights)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k[:1].expand(2, -1, -1),
                                                                   v[:1].expand(2, -1, -1)))


# ----------------------------------------------------------------- defects pinned (fuzz)
@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_with_no_keys_gives_zeros_like_without_causal(device, need_weights):
    """K = 0 with causal=True used to fail naming ``num_keys``, an argument the caller never
    passed (attention_hidden → causal_mask(Q, 0)); no key takes part, so the output is zeros,
    as it is without causal."""
    q, k, v = qkv(device, K=0)
    attention = DotProductAttention()
    out = attention(q, k, v, causal=True, need_weights=need_weights)
    assert out.shape == (2, 3, 7) and bool((out == 0).all())
    assert torch.equal(out, attention(q, k, v, need_weights=need_weights))


def test_additive_get_scores_checks_its_inputs():
    """get_scores is public (the hook variants override) but used to hand anything to
    nn.Linear: raw TypeError / RuntimeError for a str, a float64 tensor or a wrong size."""
    attention = AdditiveAttention(key_size=3, query_size=4, num_hiddens=5)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 3)
    w_q, w_k, w_v = (m.weight.detach().double() for m in (attention.W_q, attention.W_k, attention.w_v))
    want = torch.tanh((q.double() @ w_q.T)[:, :, None] + (k.double() @ w_k.T)[:, None]) @ w_v[0]
    torch.testing.assert_close(attention.get_scores(q, k).double(), want, rtol=1e-5, atol=1e-6)
    for bad, match in [(dict(queries="x"), r"queries must be a torch.Tensor"),
                       (dict(keys=k.double()), r"keys must have the dtype and device of queries"),
                       (dict(queries=q.double()), r"queries must have the dtype .* module's parameters"),
                       (dict(keys=torch.randn(2, 5, 4)), r"feature size of keys \(key_size\): expected 3, got 4"),
                       (dict(keys=torch.randn(3, 5, 3)), r"batch size of keys \(B\): expected 2, got 3"),
                       (dict(queries=q[0]), r"queries must have 3 dimensions")]:
        with pytest.raises(ValueError, match=match):
            attention.get_scores(**{"queries": q, "keys": k, **bad})


# ------------------------------------------------------------ the sliding window (causal band)
def band(Q: int, K: int, W: int) -> torch.Tensor:
    """(Q, K) boolean, True = takes part, written entry by entry: query i sits at position
    K − Q + i and sees key j iff 0 ≤ (K − Q + i) − j < W (its W most recent positions)."""
    return torch.tensor([[0 <= (K - Q + i) - j < W for j in range(K)] for i in range(Q)],
                        dtype=torch.bool)


def lens_for(kind: str | None, B: int, Q: int, K: int) -> torch.Tensor | None:
    """valid_lens of shape (B,) or (B, Q) with a 0 among them, or None."""
    if kind is None:
        return None
    if kind == "B":
        return torch.tensor([K, K // 2])[:B]
    g = torch.Generator().manual_seed(7)
    lens = torch.randint(0, K + 1, (B, Q), generator=g)
    lens[0, 0] = 0
    return lens


def band_and_lens(Q: int, K: int, W: int, lens: torch.Tensor | None, B: int) -> torch.Tensor:
    """(B, Q, K) boolean, True = takes part: in the band and within the valid length."""
    take = band(Q, K, W).expand(B, Q, K).clone()
    if lens is not None:
        for b in range(B):
            for i in range(Q):
                n = int(lens[b]) if lens.dim() == 1 else int(lens[b, i])
                take[b, i, n:] = False
    return take


def sdpa_out_and_weights(q, k, v, take):
    """SDPA's output and weights with the boolean ``take`` (True = takes part) as its attn_mask;
    the weights are SDPA's output for identity values. A row where no key takes part: zeros."""
    B, K = k.shape[0], k.shape[1]
    eye = torch.eye(K, dtype=q.dtype, device=q.device).expand(B, K, K)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=take)
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=take)
    empty = ~take.any(-1, keepdim=True)  # (B, Q, 1): SDPA leaves such rows NaN (or to chance)
    return out.masked_fill(empty, 0.0), weights.masked_fill(empty, 0.0)


WINDOW_SHAPES = [(5, 5), (2, 7), (7, 3)]


@pytest.mark.parametrize("Q, K", WINDOW_SHAPES)
@pytest.mark.parametrize("W", [1, 2, 3, "K+2"])
@pytest.mark.parametrize("lens_kind", [None, "B", "BQ"])
def test_window_equals_sdpa_with_the_band_written_out(device, Q, K, W, lens_kind):
    W = K + 2 if W == "K+2" else W  # wider than the keys: plain causal
    B = 2
    q, k, v = qkv(device, B=B, Q=Q, K=K, dtype=torch.float64)
    inputs = [t.clone() for t in (q, k, v)]
    lens = lens_for(lens_kind, B, Q, K)
    take = band_and_lens(Q, K, W, lens, B).to(device)
    want_out, want_w = sdpa_out_and_weights(q, k, v, take)
    attention = DotProductAttention()
    valid = None if lens is None else lens.to(device)
    out = attention(q, k, v, valid, causal=True, window=W)
    weights = attention.attention_weights
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights, want_w, rtol=1e-12, atol=1e-12)
    fast = attention(q, k, v, valid, causal=True, window=W, need_weights=False)
    assert attention.attention_weights is None
    torch.testing.assert_close(fast, out, rtol=1e-12, atol=1e-12)
    # every row sums to 1, or is all zeros where no key takes part; never NaN
    assert torch.isfinite(weights).all() and torch.isfinite(fast).all()
    sums = weights.sum(-1)
    empty = ~take.any(-1)
    torch.testing.assert_close(sums, torch.where(empty, 0.0, 1.0).to(sums), rtol=0, atol=1e-12)
    assert bool((weights[~take] == 0).all())  # outside the band or the length: exactly 0
    assert bool((out[empty] == 0).all() and (fast[empty] == 0).all())
    for before, after in zip(inputs, (q, k, v)):
        assert torch.equal(before, after)


def test_window_weights_match_the_formula_by_loops():
    """Q = 4 queries at the end of K = 6 positions, W = 2: query i sees keys i + 1 and i + 2."""
    q, k, v = qkv("cpu", B=1, Q=4, K=6, dtype=torch.float64)
    attention = DotProductAttention()
    out = attention(q, k, v, causal=True, window=2)
    w = torch.zeros(1, 4, 6, dtype=torch.float64)
    for i in range(4):
        seen = [i + 1, i + 2]
        s = {j: sum(q[0, i, d].item() * k[0, j, d].item() for d in range(4)) / math.sqrt(4)
             for j in seen}
        z = sum(math.exp(x) for x in s.values())
        for j in seen:
            w[0, i, j] = math.exp(s[j]) / z
    torch.testing.assert_close(attention.attention_weights, w, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, w @ v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 5], [[0, 1, 5], [2, 2, 0]]])
def test_window_in_every_dtype(device, dtype, lens):
    Q, K, W = 3, 5, 2
    q, k, v = qkv(device, dtype=dtype)
    inputs = [t.clone() for t in (q, k, v)]
    valid = None if lens is None else torch.tensor(lens)
    take = band_and_lens(Q, K, W, valid, 2).to(device)
    ref, _ = sdpa_out_and_weights(*(t.double() for t in (q, k, v)), take)
    tol = {k_: max(t, 1e-2) for k_, t in TOL[dtype].items()} if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
    for need_weights in (True, False):
        out = DotProductAttention()(q, k, v, valid, need_weights=need_weights, causal=True,
                                    window=W)
        assert out.dtype == dtype and torch.isfinite(out).all()
        torch.testing.assert_close(out.double(), ref, **tol)
    for before, after in zip(inputs, (q, k, v)):
        assert torch.equal(before, after)


@pytest.mark.parametrize("need_weights", [True, False])
def test_nan_in_keys_no_query_sees_through_the_window_changes_nothing(need_weights):
    """Q = 2 queries at the end of K = 7 positions, W = 2: keys 0 … 3 lie beyond every query's
    window, so NaN or inf there must not reach the output (0 · NaN would be NaN)."""
    q, k, v = qkv("cpu", Q=2, K=7)
    poisoned_k, poisoned_v = k.clone(), v.clone()
    poisoned_k[:, :4] = float("nan")
    poisoned_v[:, :4] = float("inf")
    attention = DotProductAttention()
    out = attention(q, poisoned_k, poisoned_v, causal=True, window=2, need_weights=need_weights)
    want, _ = sdpa_out_and_weights(q, k[:, 4:], v[:, 4:], band(2, 3, 2).expand(2, 2, 3))
    torch.testing.assert_close(out, want)


def test_window_that_hides_keys_never_takes_sdpas_is_causal_path(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append((kwargs.get("is_causal"), kwargs.get("attn_mask") is None))
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    x = torch.randn(1, 4, 8)
    banded = DotProductAttention()(x, x, x, causal=True, window=2, need_weights=False)
    wide = DotProductAttention()(x, x, x, causal=True, window=4, need_weights=False)  # W = K
    assert calls == [(False, False), (True, True)]  # a band mask; then the plain causal flag
    take = band(4, 4, 2)[None]
    torch.testing.assert_close(banded, real(x, x, x, attn_mask=take))
    torch.testing.assert_close(wide, real(x, x, x, attn_mask=band(4, 4, 4)[None]))


def test_window_gradcheck():
    q, k, v = (t.requires_grad_() for t in qkv("cpu", Q=4, K=6, dtype=torch.float64))
    lens = torch.tensor([[1, 3, 5, 6], [2, 0, 4, 6]])
    assert torch.autograd.gradcheck(
        lambda a, b, c: DotProductAttention()(a, b, c, lens, causal=True, window=2), (q, k, v))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", torch.tensor(2)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_window_must_be_a_positive_int(bad, need_weights):
    with pytest.raises(ValueError, match=r"^window must be a positive int, got"):
        DotProductAttention()(*qkv("cpu"), causal=True, window=bad, need_weights=need_weights)


def test_window_needs_causal():
    with pytest.raises(ValueError, match=r"^window must .*needs causal=True.*got causal=False"):
        DotProductAttention()(*qkv("cpu"), window=3)
    with pytest.raises(ValueError, match=r"^causal must"):  # causal is checked first
        DotProductAttention()(*qkv("cpu"), causal="yes", window=3)
