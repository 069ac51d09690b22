"""MultiHeadLatentAttention against MHA written out (low-rank keys and values), the absorbed path
against the naive one, the LatentCache, and the cache-size arithmetic of real models."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.kv_cache import KVCache
from helpers.latent_attention import (
    MODEL_SHAPES, LatentCache, MultiHeadLatentAttention, kv_cache_bytes,
)
from tests.conftest import FLOAT_DTYPES, TOL

B, T, N, H, d_h, d_c, d_r = 2, 6, 12, 3, 5, 7, 4  # deliberately unequal


def make(rope_size: int = d_r, bias: bool = False, dtype: torch.dtype = torch.float64,
         seed: int = 0) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    m = MultiHeadLatentAttention(N, H, d_c, head_size=d_h, rope_size=rope_size, bias=bias)
    if bias:  # nn.Linear's biases start random already; make sure none is 0 by chance
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 1:
                    p.add_(0.1)
    return m.to(dtype).eval()


def linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """x Wᵀ + b in float64."""
    out = x.double() @ layer.weight.double().T
    return out if layer.bias is None else out + layer.bias.double()


def rope_by_hand(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Half-split RoPE written out: features i and i + D/2 of position p turned by p·base^(−2i/D)."""
    D = x.shape[-1]
    theta = base ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)  # (D/2,)
    angle = positions.double()[:, None] * theta[None, :]  # (T, D/2)
    a, b = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=-1)


def reference(m: MultiHeadLatentAttention, X: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """MLA *is* MHA with low-rank keys and values: build per head
    k = [W_uk c ; RoPE(W_kr x) (the same for every head)], q = [W_q x ; RoPE(W_qr x)], v = W_uv c
    with c = W_dkv x, then F.scaled_dot_product_attention with an explicit causal mask and
    scale 1/√(d_h + d_r), then W_o. Float64; (B, T, N)."""
    X = X.double()
    Bx, Tx, _ = X.shape
    Hm, dh, dr = m.num_heads, m.head_size, m.rope_size
    heads = lambda y, d: y.reshape(Bx, Tx, Hm, d).transpose(1, 2)  # noqa: E731  (B, H, T, d)
    c = linear(m.W_dkv, X)  # (B, T, d_c)
    k = heads(c @ m.W_uk.weight.double().T, dh)  # (B, H, T, d_h)
    v = heads(c @ m.W_uv.weight.double().T, dh)  # (B, H, T, d_h)
    q = heads(linear(m.W_q, X), dh)  # (B, H, T, d_h)
    if dr:
        pos = torch.arange(Tx)
        k_r = rope_by_hand(linear(m.W_kr, X), pos)  # (B, T, d_r): one for every head
        q_r = rope_by_hand(heads(linear(m.W_qr, X), dr), pos)  # (B, H, T, d_r)
        k = torch.cat([k, k_r[:, None].expand(Bx, Hm, Tx, dr)], dim=-1)  # (B, H, T, d_h + d_r)
        q = torch.cat([q, q_r], dim=-1)
    mask = None
    if causal:
        mask = torch.tensor([[j <= i for j in range(Tx)] for i in range(Tx)])  # (T, T): key j ≤ query i
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(dh + dr))
    return linear(m.W_o, out.transpose(1, 2).reshape(Bx, Tx, Hm * dh))  # (B, T, N)


# ------------------------------------------------------------------ MLA is MHA, low-rank
@pytest.mark.parametrize("rope_size", [d_r, 0])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("bias", [False, True])
def test_naive_forward_is_mha_with_low_rank_keys_and_values(rope_size, causal, bias):
    m = make(rope_size, bias)
    X = torch.randn(B, T, N, dtype=torch.float64)
    for need_weights in (True, False):
        out = m(X, causal=causal, need_weights=need_weights)
        assert out.shape == (B, T, N)
        torch.testing.assert_close(out, reference(m, X, causal), rtol=0, atol=1e-12)


def test_layer_shapes_and_no_bias_on_the_up_projections():
    m = MultiHeadLatentAttention(N, H, d_c, head_size=d_h, rope_size=d_r, bias=True)
    shapes = {name: tuple(p.shape) for name, p in m.named_parameters()}
    assert shapes == {
        "W_dkv.weight": (d_c, N), "W_dkv.bias": (d_c,),
        "W_uk.weight": (H * d_h, d_c), "W_uv.weight": (H * d_h, d_c),  # never a bias
        "W_q.weight": (H * d_h, N), "W_q.bias": (H * d_h,),
        "W_qr.weight": (H * d_r, N), "W_qr.bias": (H * d_r,),
        "W_kr.weight": (d_r, N), "W_kr.bias": (d_r,),  # one RoPE key shared by all heads
        "W_o.weight": (N, H * d_h), "W_o.bias": (N,),
    }
    plain = MultiHeadLatentAttention(N, H, d_c)  # head size N // H = 4, no RoPE
    assert plain.head_size == 4 and plain.W_qr is None and plain.W_kr is None
    assert plain.W_uk.out_features == 12 and plain.W_dkv.bias is None


def rms_by_hand(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    """RMSNorm written out, DeepSeek's eps: x / √(mean(x²) + 1e-6) · g, float64."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * gain.double()


def make_deepseek(bias: bool = False, seed: int = 0) -> MultiHeadLatentAttention:
    """DeepSeek-V2/V3's options: compressed queries (d_q = 9) and a normalised latent, the
    norms' gains moved away from 1 so that a missing gain would show."""
    torch.manual_seed(seed)
    m = MultiHeadLatentAttention(N, H, d_c, head_size=d_h, rope_size=d_r, bias=bias,
                                 query_latent_size=9, latent_norm=True).double().eval()
    with torch.no_grad():
        m.q_norm.weight.uniform_(0.5, 1.5)
        m.kv_norm.weight.uniform_(0.5, 1.5)
    return m


def deepseek_reference(m: MultiHeadLatentAttention, X: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V2's equations (9)–(19), in Hugging Face's order (DeepseekV3Attention):
    c_Q = RMSNorm(W_dq x), q_C = W_q c_Q, q_R = RoPE(W_qr c_Q); c_KV = RMSNorm(W_dkv x) (the
    latent, normalised before the up-projections), k_C = W_uk c_KV, v = W_uv c_KV,
    k_R = RoPE(W_kr x) from x itself, unnormalised; causal softmax at 1/√(d_h + d_r), W_o."""
    X = X.double()
    Bx, Tx, _ = X.shape
    heads = lambda y, d: y.reshape(Bx, Tx, H, d).transpose(1, 2)  # noqa: E731  (B, H, T, d)
    c_q = rms_by_hand(linear(m.W_dq, X), m.q_norm.weight)  # (B, T, d_q)
    c = rms_by_hand(linear(m.W_dkv, X), m.kv_norm.weight)  # (B, T, d_c)
    pos = torch.arange(Tx)
    q = torch.cat([heads(linear(m.W_q, c_q), d_h),
                   rope_by_hand(heads(linear(m.W_qr, c_q), d_r), pos)], dim=-1)  # (B, H, T, d_h + d_r)
    k_r = rope_by_hand(linear(m.W_kr, X), pos)  # (B, T, d_r)
    k = torch.cat([heads(c @ m.W_uk.weight.double().T, d_h),
                   k_r[:, None].expand(Bx, H, Tx, d_r)], dim=-1)
    v = heads(c @ m.W_uv.weight.double().T, d_h)  # (B, H, T, d_h)
    mask = torch.tensor([[j <= i for j in range(Tx)] for i in range(Tx)])  # (T, T)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(d_h + d_r))
    return linear(m.W_o, out.transpose(1, 2).reshape(Bx, Tx, H * d_h))  # (B, T, N)


@pytest.mark.parametrize("bias", [False, True])
def test_query_compression_and_latent_norm_follow_deepseek(bias):
    m = make_deepseek(bias)
    X = torch.randn(B, T, N, dtype=torch.float64)
    want = deepseek_reference(m, X)
    for absorbed in (False, True):  # the norm sits before the cache: absorption still holds
        torch.testing.assert_close(m(X, absorbed=absorbed), want, rtol=0, atol=1e-12)
        cache, pieces = LatentCache(), []
        for t0, t1 in [(0, 2), (2, 3), (3, T)]:
            pieces.append(m(X[:, t0:t1], cache=cache, absorbed=absorbed))
        torch.testing.assert_close(torch.cat(pieces, dim=1), want, rtol=0, atol=1e-12)
        # what is cached is the normalised latent, d_c + d_r numbers a token as before
        torch.testing.assert_close(cache.latents, rms_by_hand(linear(m.W_dkv, X), m.kv_norm.weight),
                                   rtol=0, atol=1e-12)
    assert m.kv_numbers_per_token() == d_c + d_r
    shapes = {name: tuple(p.shape) for name, p in m.named_parameters() if "bias" not in name}
    assert shapes["W_dq.weight"] == (9, N) and shapes["q_norm.weight"] == (9,)
    assert shapes["W_q.weight"] == (H * d_h, 9) and shapes["W_qr.weight"] == (H * d_r, 9)
    assert shapes["kv_norm.weight"] == (d_c,) and shapes["W_kr.weight"] == (d_r, N)
    assert (m.W_dq.bias is not None) == bias
    plain = make()  # the defaults: no query compression, no norm, as before
    assert plain.W_dq is None and plain.q_norm is None and plain.kv_norm is None


def test_the_latent_norm_makes_the_output_blind_to_the_latent_scale():
    """RMSNorm(a·z) = RMSNorm(z) for a > 0, up to eps = 1e-6 against mean(z²) ≈ 0.1 (a relative
    1e-5): scaling W_dkv changes the output by about that, where without the norm it would
    change it completely."""
    m = make_deepseek()
    X = torch.randn(B, T, N, dtype=torch.float64)
    before = m(X)
    with torch.no_grad():
        m.W_dkv.weight.mul_(1000.0)
    torch.testing.assert_close(m(X), before, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_deepseek_options_in_low_precision_follow_float64(dtype):
    m = make_deepseek()
    X = torch.randn(B, T, N, dtype=torch.float64)
    want = m(X)
    low = make_deepseek().to(dtype)
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1, torch.float32: 1e-5}[dtype]
    for absorbed in (False, True):
        out = low(X.to(dtype), absorbed=absorbed)
        assert out.dtype == dtype
        torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)


# ------------------------------------------------------------------ absorbed == naive
@pytest.mark.parametrize("rope_size", [d_r, 0])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("bias", [False, True])
def test_absorbed_equals_naive_in_float64(rope_size, causal, bias):
    m = make(rope_size, bias)
    X = torch.randn(B, T, N, dtype=torch.float64)
    naive = m(X, causal=causal)
    w_naive = m.attention_weights
    absorbed = m(X, causal=causal, absorbed=True)
    w_absorbed = m.attention_weights
    assert w_absorbed.shape == (B, H, T, T)
    torch.testing.assert_close(absorbed, naive, rtol=0, atol=1e-12)
    torch.testing.assert_close(w_absorbed, w_naive, rtol=0, atol=1e-12)
    if causal:  # lower triangle only: key j > query i has weight exactly 0
        assert bool((w_absorbed.triu(1) == 0).all())
    torch.testing.assert_close(m(X, causal=causal, absorbed=True, need_weights=False), naive,
                               rtol=0, atol=1e-12)
    assert m.attention_weights is None


def test_absorbed_equals_naive_in_float32():
    m = make(dtype=torch.float32)
    X = torch.randn(B, T, N)
    naive = m(X)
    w = m.attention_weights
    torch.testing.assert_close(m(X, absorbed=True), naive, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m.attention_weights, w, rtol=1e-5, atol=1e-6)


def test_absorbed_queries_score_the_latents_directly():
    """q_C,h · k_C,h,j = (W_uk,hᵀ q_C,h) · c_j: the scores without RoPE, by hand."""
    m = make(rope_size=0)
    X = torch.randn(B, T, N, dtype=torch.float64)
    m(X, causal=False, absorbed=True)
    c = X @ m.W_dkv.weight.T  # (B, T, d_c)
    q = (X @ m.W_q.weight.T).reshape(B, T, H, d_h).transpose(1, 2)  # (B, H, T, d_h)
    q_tilde = q @ m.W_uk.weight.reshape(H, d_h, d_c)  # (B, H, T, d_c)
    scores = q_tilde @ c[:, None].transpose(-2, -1) / math.sqrt(d_h)  # (B, H, T, T)
    torch.testing.assert_close(m.attention_weights, scores.softmax(-1), rtol=0, atol=1e-12)


# ------------------------------------------------------------------ the cache
@pytest.mark.parametrize("absorbed", [False, True])
@pytest.mark.parametrize("rope_size", [d_r, 0])
@pytest.mark.parametrize("need_weights", [True, False])
def test_prompt_then_one_token_at_a_time_equals_the_full_forward(absorbed, rope_size, need_weights):
    m = make(rope_size)
    X = torch.randn(B, T, N, dtype=torch.float64)
    full = m(X)  # (B, T, N), causal
    cache = LatentCache()
    steps = [m(X[:, :3], cache=cache, absorbed=absorbed, need_weights=need_weights)]
    for t in range(3, T):  # query t sits at position t (lower-right: K − 1)
        steps.append(m(X[:, t:t + 1], cache=cache, absorbed=absorbed, need_weights=need_weights))
        if need_weights:
            assert m.attention_weights.shape == (B, H, 1, t + 1)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-12)
    assert cache.length == T
    # what is held: the latents W_dkv x and the RoPE keys rotated once, at their own positions
    torch.testing.assert_close(cache.latents, X @ m.W_dkv.weight.T, rtol=0, atol=1e-12)
    if rope_size:
        torch.testing.assert_close(cache.rope_keys, rope_by_hand(X @ m.W_kr.weight.T, torch.arange(T)),
                                   rtol=0, atol=1e-12)
    assert cache.rope_keys.shape == (B, T, rope_size)


@pytest.mark.parametrize("absorbed", [False, True])
def test_a_chunk_against_the_cache_uses_lower_right_positions(absorbed):
    """Three new queries after three cached tokens sit at positions 3, 4, 5: causal or not they
    give the last rows of the full pass."""
    m = make()
    X = torch.randn(B, T, N, dtype=torch.float64)
    for causal in (True, False):
        cache = LatentCache()
        m(X[:, :3], cache=cache, causal=causal)
        part = m(X[:, 3:], cache=cache, causal=causal, absorbed=absorbed)
        torch.testing.assert_close(part, reference(m, X, causal)[:, 3:], rtol=0, atol=1e-12)


def test_cache_holds_d_c_plus_d_r_numbers_per_token():
    m = make(dtype=torch.float32)
    X = torch.randn(B, T, N)
    cache = LatentCache()
    m(X, cache=cache)
    assert m.kv_numbers_per_token() == d_c + d_r == 11
    assert (cache.latents.shape, cache.rope_keys.shape) == ((B, T, d_c), (B, T, d_r))
    assert cache.nbytes() == B * T * (d_c + d_r) * 4  # float32: 4 bytes a number
    # MultiHeadAttention would cache keys and values of (B, H, T, d_h) each
    mha = KVCache()
    mha.append(torch.zeros(B, H, T, d_h), torch.zeros(B, H, T, d_h))
    assert mha.nbytes() == 2 * B * H * T * d_h * 4 == 1440
    assert cache.nbytes() == 528 and cache.nbytes() / mha.nbytes() == 11 / 30


def test_latent_cache_holds_copies_and_refuses_what_does_not_fit():
    cache = LatentCache()
    assert (cache.length, cache.nbytes()) == (0, 0)
    c, k = torch.randn(B, 3, d_c), torch.randn(B, 3, d_r)
    held_c, held_k = cache.append(c, k)
    c.zero_()
    k.zero_()  # the caller reuses its buffers: what is cached does not change
    assert held_c.abs().sum() > 0 and held_k.abs().sum() > 0
    before = cache.latents.clone()
    for latents, rope_keys, match in [
        (torch.randn(1, 1, d_c), torch.randn(1, 1, d_r),
         r"new latents must have shape \(B, T_new, size\) = \(2, T_new, 7\), got \(1, 1, 7\)"),
        (torch.randn(B, 1, 6), torch.randn(B, 1, d_r), r"new latents must .* got \(2, 1, 6\)"),
        (torch.randn(B, 1, d_c), torch.randn(B, 1, 2), r"new rope_keys must .* got \(2, 1, 2\)"),
        (torch.randn(B, 1, d_c, dtype=torch.float64), torch.randn(B, 1, d_r, dtype=torch.float64),
         r"latents must have the dtype and device of the cached latents"),
        (torch.randn(B, 2, d_c), torch.randn(B, 1, d_r),
         r"rope_keys must have the shape \(B, T_new\) of latents = \(2, 2\), got \(2, 1\)"),
        (torch.randn(B, 1, d_c), torch.randn(B, 1, d_r, dtype=torch.float64), r"rope_keys must have the dtype"),
        (torch.randn(B, d_c), torch.randn(B, 1, d_r), r"latents must have 3 dimensions \(B, T_new, d_c\), got 2"),
        (torch.ones(B, 1, d_c, dtype=torch.long), torch.randn(B, 1, d_r),
         r"latents must be a floating-point tensor, got dtype torch.int64"),
    ]:
        with pytest.raises(ValueError, match=match):
            cache.append(latents, rope_keys)
        assert cache.length == 3 and torch.equal(cache.latents, before)  # left as it was
    cache.append(torch.randn(B, 2, d_c), torch.randn(B, 2, d_r))
    assert cache.length == 5 and cache.nbytes() == B * 5 * (d_c + d_r) * 4
    empty_rope = LatentCache()
    empty_rope.append(torch.randn(B, 3, d_c), torch.randn(B, 3, 0))  # d_r = 0
    assert empty_rope.nbytes() == B * 3 * d_c * 4


def test_no_new_token_changes_nothing():
    m = make()
    cache = LatentCache()
    m(torch.randn(B, 3, N, dtype=torch.float64), cache=cache)
    for absorbed in (False, True):
        for need_weights in (True, False):
            out = m(torch.zeros(B, 0, N, dtype=torch.float64), cache=cache, absorbed=absorbed,
                    need_weights=need_weights)
            assert out.shape == (B, 0, N) and cache.length == 3


# ------------------------------------------------------------------ dtypes, devices, gradients
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("absorbed", [False, True])
def test_every_float_dtype_on_every_device(device, dtype, absorbed):
    ref = make(bias=True)
    m = make(bias=True, dtype=dtype).to(device)
    X = torch.randn(B, T, N, dtype=torch.float64)
    expected = reference(ref, X)
    Xd = X.to(device=device, dtype=dtype)
    copy = Xd.clone()
    tol = {key: max(t, 2e-2) for key, t in TOL[dtype].items()} if dtype in (torch.float16, torch.bfloat16) \
        else TOL[dtype] if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    for need_weights in (True, False):
        cache = LatentCache()
        out = torch.cat([m(Xd[:, :4], absorbed=absorbed, need_weights=need_weights, cache=cache),
                         m(Xd[:, 4:], absorbed=absorbed, need_weights=need_weights, cache=cache)], dim=1)
        assert out.dtype == dtype and out.device.type == device.type and torch.isfinite(out).all()
        torch.testing.assert_close(out.cpu().double(), expected, **tol)
        assert cache.latents.dtype == dtype and cache.latents.device.type == device.type
    assert torch.equal(Xd, copy)  # the input is never modified


@pytest.mark.parametrize("absorbed", [False, True])
def test_gradient_reaches_every_parameter(absorbed):
    m = make(bias=True).train()
    X = torch.randn(B, T, N, dtype=torch.float64, requires_grad=True)
    m(X, absorbed=absorbed).square().sum().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert X.grad is not None and X.grad.abs().sum() > 0


def test_gradcheck_absorbed_with_a_cache():
    m = make(bias=True)
    X = torch.randn(1, 4, N, dtype=torch.float64, requires_grad=True)

    def run(x):
        cache = LatentCache()
        return torch.cat([m(x[:, :2], cache=cache, absorbed=True),
                          m(x[:, 2:], cache=cache, absorbed=True)], dim=1)

    assert torch.autograd.gradcheck(run, (X,))


# ------------------------------------------------------------------ cache-size arithmetic
def test_kv_cache_bytes_for_each_kind():
    L, Hh, G, dh, dc, dr, b = 3, 8, 2, 16, 24, 6, 2
    assert kv_cache_bytes("mha", num_layers=L, num_heads=Hh, head_size=dh) == 2 * L * Hh * dh * b
    assert kv_cache_bytes("gqa", num_layers=L, num_heads=Hh, num_kv_heads=G, head_size=dh) \
        == 2 * L * G * dh * b
    assert kv_cache_bytes("mqa", num_layers=L, head_size=dh, bytes_per_number=4) == 2 * L * 1 * dh * 4
    assert kv_cache_bytes("mla", num_layers=L, latent_size=dc, rope_size=dr) == L * (dc + dr) * b
    assert kv_cache_bytes("mla", num_layers=L, latent_size=dc) == L * dc * b
    # GQA with G = H is MHA, with G = 1 is MQA
    assert kv_cache_bytes("gqa", num_layers=L, num_kv_heads=Hh, head_size=dh) \
        == kv_cache_bytes("mha", num_layers=L, num_heads=Hh, head_size=dh)
    assert kv_cache_bytes("gqa", num_layers=L, num_kv_heads=1, head_size=dh) \
        == kv_cache_bytes("mqa", num_layers=L, head_size=dh)


def test_model_shapes_give_the_known_cache_sizes():
    per_token = {name: kv_cache_bytes(**shape["cache"]) for name, shape in MODEL_SHAPES.items()}
    assert per_token == {
        "Llama-2-7B": 2 * 32 * 32 * 128 * 2,  # 524,288 bytes = 512 KiB in bf16
        "Llama-3-8B": 2 * 32 * 8 * 128 * 2,  # 131,072 = 128 KiB
        "Falcon-7B": 2 * 32 * 1 * 64 * 2,  # 8,192 = 8 KiB: one key-value head
        "Mistral-7B-v0.1": 2 * 32 * 8 * 128 * 2,
        "DeepSeek-V2": 60 * (512 + 64) * 2,  # 69,120
        "DeepSeek-V3": 61 * (512 + 64) * 2,  # 70,272
    }
    assert per_token["Llama-2-7B"] == 512 * 1024 and per_token["DeepSeek-V3"] == 70_272
    for shape in MODEL_SHAPES.values():
        assert shape["source"].startswith("https://huggingface.co/")
        assert shape["source"].endswith("/config.json")
    assert MODEL_SHAPES["Mistral-7B-v0.1"]["sliding_window"] == 4096
    # DeepSeek-V3 as MHA over its 128 heads of keys 128 + 64 and values 128 would cache
    mha = 61 * 128 * (128 + 64 + 128) * 2
    assert mha / per_token["DeepSeek-V3"] == pytest.approx(71.1, abs=0.05)


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="MHA", num_layers=2, num_heads=2, head_size=4), r"kind must be one of .* got 'MHA'"),
    (dict(kind="mha", num_layers=0, num_heads=2, head_size=4), r"num_layers must be a positive int, got 0"),
    (dict(kind="mha", num_layers=2, head_size=4), r"num_heads must be given for kind='mha' .* got None"),
    (dict(kind="gqa", num_layers=2, num_heads=8, head_size=4), r"num_kv_heads must be given .* got None"),
    (dict(kind="gqa", num_layers=2, num_heads=8, num_kv_heads=3, head_size=4),
     r"num_kv_heads must divide num_heads=8 .* got 3"),
    (dict(kind="mha", num_layers=2, num_heads=8, num_kv_heads=2, head_size=4),
     r"num_kv_heads must be None or num_heads=8 .* got 2"),
    (dict(kind="mqa", num_layers=2, num_kv_heads=2, head_size=4), r"num_kv_heads must be None or 1 .* got 2"),
    (dict(kind="mla", num_layers=2, rope_size=64), r"latent_size must be given for kind='mla' .* got None"),
    (dict(kind="mla", num_layers=2, latent_size=8, rope_size=3), r"rope_size must be an even int >= 0, got 3"),
    (dict(kind="mha", num_layers=2, num_heads=2, head_size=4, latent_size=8),
     r"latent_size and rope_size must be None and 0 .* got latent_size=8"),
    (dict(kind="mha", num_layers=2, num_heads=2, head_size=4, bytes_per_number=0.5),
     r"bytes_per_number must be a positive int, got 0.5"),
])
def test_kv_cache_bytes_refuses_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kv_cache_bytes(**kwargs)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("kwargs, match", [
    (dict(num_hiddens=12, num_heads=3, latent_size=0), r"latent_size must be a positive int, got 0"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, rope_size=3), r"rope_size must be an even int >= 0 .* got 3"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, rope_size=-2), r"rope_size must be an int >= 0, got -2"),
    (dict(num_hiddens=2, num_heads=3, latent_size=7), r"num_hiddens must be at least num_heads .* got num_hiddens=2"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, head_size=0), r"head_size must be a positive int, got 0"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, rotary_base=1.0), r"rotary_base must be a finite number > 1.0, got 1.0"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, bias=1), r"bias must be True or False, got 1"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, query_latent_size=0), r"query_latent_size must be a positive int, got 0"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, query_latent_size=4.0), r"query_latent_size must be a positive int, got 4.0"),
    (dict(num_hiddens=12, num_heads=3, latent_size=7, latent_norm=None), r"latent_norm must be True or False, got None"),
])
def test_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadLatentAttention(**kwargs)


def test_bad_forward_input_is_named():
    m = make(dtype=torch.float32)
    X = torch.randn(B, T, N)
    other_batch = LatentCache()
    m(torch.randn(1, 3, N), cache=other_batch)
    for call, match in [
        (lambda: m(torch.randn(T, N)), r"X must have 3 dimensions \(B, T, N\), got 2"),
        (lambda: m(torch.randn(B, T, 10)), r"feature size of X \(N\): expected 12, got 10"),
        (lambda: m(X.double()), r"X must have the dtype and device of the module's parameters"),
        (lambda: m(X, cache=KVCache()), r"cache must be a LatentCache or None, got KVCache"),
        (lambda: m(X, cache=other_batch), r"cache must hold latents \(B, T, d_c\) = \(2, T, 7\) .* got \(1, 3, 7\)"),
        (lambda: m(X, causal=None), r"causal must be True or False, got None"),
        (lambda: m(X, absorbed="yes"), r"absorbed must be True or False, got 'yes'"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    assert other_batch.length == 3  # a refused call leaves the cache as it was
