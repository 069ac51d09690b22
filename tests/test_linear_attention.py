"""linear_attention (its three forms), the feature maps, visible_prefix, recurrent_states and
delta_rule against formulas written out here (loops over b, i, j and over t, in float64), against
PyTorch's SDPA where a feature map makes the kernel exactly softmax's, and against autograd.

Sizes: B batch 2, Q queries, K keys, D query/key size, V value size; deliberately unequal
(Q < K, Q > K, D ≠ V, odd sizes).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import causal_mask, valid_lens_to_mask
from helpers.linear_attention import (
    FORMS, delta_rule, elu_feature_map, linear_attention, positive_random_features,
    random_projection, recurrent_states, visible_prefix,
)
from tests.conftest import FLOAT_DTYPES

# |helper − float64 formula| allowed: half precision computes in float32, so only the rounding
# of the result to its dtype (and of the float32 sums) remains
TOL = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
       torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def make(*shape: int, dtype=torch.float64, device="cpu", seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)


def qkv(B=2, Q=3, K=5, D=4, V=6, dtype=torch.float64, device="cpu", seed=0):
    return (make(B, Q, D, dtype=dtype, device=device, seed=seed),
            make(B, K, D, dtype=dtype, device=device, seed=seed + 1),
            make(B, K, V, dtype=dtype, device=device, seed=seed + 2))


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = x + 1 where x > 0, eˣ elsewhere (elu(x) + 1 written out)."""
    return torch.where(x > 0, x + 1, torch.exp(x))


def sees(b: int, i: int, j: int, Q: int, K: int, lens, causal: bool) -> bool:
    """Whether query i of row b sees key j: j below its valid length, and with ``causal`` j at
    or before the query's position K − Q + i (lower-right, as ``causal_mask``)."""
    if lens is not None:
        lens = torch.as_tensor(lens)
        n = int(lens[b]) if lens.dim() == 1 else int(lens[b, i])
        if j >= n:
            return False
    return not causal or j <= K - Q + i


def written_out(q, k, v, phi=elu_plus_one, lens=None, causal=False) -> torch.Tensor:
    """o_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j) over the keys j query i sees, one entry
    at a time in float64; 0 where it sees none (or the sum is 0)."""
    q, k, v = (t.detach().double().cpu() for t in (q, k, v))
    B, Q, _ = q.shape
    K, V = k.shape[1], v.shape[2]
    phi_q, phi_k = phi(q), phi(k)  # (B, Q, F), (B, K, F): φ as linear_attention calls it
    out = torch.zeros(B, Q, V, dtype=torch.float64)
    for b in range(B):
        for i in range(Q):
            numerator, normaliser = torch.zeros(V, dtype=torch.float64), 0.0
            for j in range(K):
                if sees(b, i, j, Q, K, lens, causal):
                    kappa = float(phi_q[b, i] @ phi_k[b, j])
                    numerator += kappa * v[b, j]
                    normaliser += kappa
            if normaliser > 0:
                out[b, i] = numerator / normaliser
    return out


def take_mask(B, Q, K, lens=None, causal=False) -> torch.Tensor:
    """(B, Q, K) True = takes part, built with ``sees``."""
    return torch.tensor([[[sees(b, i, j, Q, K, lens, causal) for j in range(K)] for i in range(Q)]
                         for b in range(B)], dtype=torch.bool).reshape(B, Q, K)


def vectorised(q, k, v, take, phi=elu_plus_one) -> torch.Tensor:
    """The same formula with matrices (differentiable, for gradients): weights φ(Q)φ(K)ᵀ kept
    where ``take``, rows normalised, a row with a zero sum all zero (divided by 1, not by 0).
    The keys and values no query sees are set to 0 first (they may hold NaN; their gradient is
    then 0, as a key that takes no part must get)."""
    seen = take.any(1)[..., None]  # (B, K, 1)
    k, v = torch.where(seen, k, 0.0), torch.where(seen, v, 0.0)
    w = (phi(q) @ phi(k).mT) * take  # (B, Q, K)
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, (w @ v) / torch.where(total > 0, total, 1.0), 0.0)


# (Q, K, lens) with rows that see nothing: a length 0, and with causal Q > K the first queries
SHAPES = [(3, 5), (7, 5), (5, 5), (1, 4), (4, 1)]


def lens_for(kind: str, Q: int, K: int):
    if kind == "none":
        return None
    if kind == "(B,)":
        return torch.tensor([K - 1 if K > 1 else 1, 0])
    g = torch.Generator().manual_seed(Q * 10 + K)
    lens = torch.randint(0, K + 1, (2, Q), generator=g)
    lens[1, 0] = 0
    return lens


# ------------------------------------------------------------------ the formula, entry by entry
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lens_kind", ["none", "(B,)", "(B,Q)"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"Q{q}K{k}" for q, k in SHAPES])
def test_each_form_equals_the_formula_written_out(form, causal, lens_kind, shape):
    Q, K = shape
    q, k, v = qkv(Q=Q, K=K, D=3, V=5)
    lens = lens_for(lens_kind, Q, K)
    out = linear_attention(q, k, v, lens, causal=causal, form=form)
    assert out.shape == (2, Q, 5) and out.dtype == torch.float64
    torch.testing.assert_close(out, written_out(q, k, v, lens=lens, causal=causal),
                               rtol=1e-12, atol=1e-12)
    blind = ~take_mask(2, Q, K, lens, causal).any(-1)  # (B, Q): rows that see no key
    assert (out[blind] == 0).all() and torch.isfinite(out).all()
    assert (out[~blind].abs().sum(-1) > 0).all()


@pytest.mark.parametrize("form", FORMS)
def test_lens_as_lists_and_queries_before_the_first_key(form):
    q, k, v = qkv(Q=6, K=2)
    out = linear_attention(q, k, v, [[0, 1, 2, 2, 1, 0], [2, 2, 2, 2, 2, 2]], causal=True, form=form)
    torch.testing.assert_close(out, written_out(q, k, v, lens=[[0, 1, 2, 2, 1, 0], [2] * 6],
                                                causal=True), rtol=1e-12, atol=1e-12)
    # causal, the first Q − K = 4 queries sit before the first key; row 0's last has length 0
    assert (out[:, :4] == 0).all() and (out[0, 5] == 0).all() and (out[1, 4:] != 0).all()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_autograd_of_the_formula_and_are_zero_where_nothing_is_seen(form, causal):
    Q, K = 7, 4
    lens = torch.tensor([[0, 4, 4, 2, 3, 1, 4], [4, 4, 0, 4, 4, 4, 4]])
    leaves = [t.requires_grad_() for t in qkv(Q=Q, K=K, D=3, V=5)]
    expected = [t.detach().clone().requires_grad_() for t in leaves]
    d_out = make(2, Q, 5, seed=9)
    torch.autograd.backward(linear_attention(*leaves, lens, causal=causal, form=form), d_out)
    torch.autograd.backward(vectorised(*expected, take_mask(2, Q, K, lens, causal)), d_out)
    for got, want in zip(leaves, expected):
        assert torch.isfinite(got.grad).all()
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-10, atol=1e-12)
    blind = ~take_mask(2, Q, K, lens, causal).any(-1)  # (B, Q)
    assert blind.sum() >= 2 and (leaves[0].grad[blind] == 0).all()


@pytest.mark.parametrize("form", FORMS)
def test_no_keys_and_no_queries(form):
    q, k, v = qkv(Q=3, K=0)
    out = linear_attention(q.requires_grad_(), k, v, causal=True, form=form)
    assert out.shape == (2, 3, 6) and (out == 0).all()
    out.sum().backward()
    assert (q.grad == 0).all()
    assert linear_attention(*qkv(Q=0, K=4), form=form).shape == (2, 0, 6)
    assert linear_attention(*qkv(B=0, Q=3, K=4), form=form).shape == (0, 3, 6)


@pytest.mark.parametrize("seed", range(3))
def test_the_three_forms_agree(seed):
    g = torch.Generator().manual_seed(seed)
    Q, K = (int(n) for n in torch.randint(1, 12, (2,), generator=g))
    q, k, v = qkv(B=3, Q=Q, K=K, D=5, V=2, seed=seed)
    for lens in (None, torch.randint(0, K + 1, (3,), generator=g),
                 torch.randint(0, K + 1, (3, Q), generator=g)):
        for causal in (False, True):
            outs = [linear_attention(q, k, v, lens, causal=causal, form=form) for form in FORMS]
            for out in outs[1:]:
                torch.testing.assert_close(out, outs[0], rtol=1e-12, atol=1e-12)


# -------------------------------------------- feature maps whose kernel is known in closed form
def taylor_features(x: torch.Tensor, terms: int = 40) -> torch.Tensor:
    """Features of the exponential kernel for x ≥ 0: per dimension ψ(x)_n = xⁿ/√n!, n < terms,
    so ψ(q)·ψ(k) = Σ_n (qk)ⁿ/n! = e^{qk} (the rest of the series, below 4⁴⁰/40! < 1e-22 for
    qk ≤ 4, is lost); the product over dimensions, (B, T, D) → (B, T, terms^D), gives
    Π_d e^{q_d k_d} = e^{q·k}. Every feature ≥ 0."""
    n = torch.arange(terms, dtype=x.dtype, device=x.device)
    psi = x[..., None] ** n / torch.exp(torch.lgamma(n + 1) / 2)  # (B, T, D, terms)
    phi = psi[..., 0, :]
    for d in range(1, x.shape[-1]):
        phi = (phi[..., :, None] * psi[..., d, None, :]).flatten(-2)
    return phi


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("causal", [False, True])
def test_exponential_kernel_features_make_it_softmax_attention_as_sdpa(form, causal):
    """With φ the (truncated Taylor) features of e^{q·k} applied to x / D^¼, the kernel is
    exp(q·k/√D): linear attention is then softmax attention, SDPA with the same boolean mask
    (True = takes part)."""
    Q, K, D = 6, 9, 2
    q, k, v = qkv(Q=Q, K=K, D=D, V=3)
    q, k = q.abs(), k.abs()  # the features are ≥ 0 only for x ≥ 0
    lens = torch.tensor([[9, 8, 7, 6, 5, 4], [3, 9, 1, 9, 2, 9]])
    take = take_mask(2, Q, K, lens, causal)
    assert take.any(-1).all()  # SDPA gives NaN on a row with no key: none here
    phi = lambda x: taylor_features(x / D ** 0.25)  # noqa: E731
    out = linear_attention(q, k, v, lens, feature_map=phi, causal=causal, form=form)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=take)
    torch.testing.assert_close(out, sdpa, rtol=1e-12, atol=1e-12)
    # unscaled features: SDPA with scale 1; valid_lens (B,) as SDPA's (B, 1, K) mask
    lens = torch.tensor([4, 9])
    torch.testing.assert_close(
        linear_attention(q, k, v, lens, feature_map=taylor_features, form=form),
        F.scaled_dot_product_attention(q, k, v, attn_mask=valid_lens_to_mask(lens, 2, Q, K),
                                       scale=1.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", FORMS)
def test_elementwise_exp_features_ignore_the_query(form):
    """A trap: φ(x) = eˣ with D = 1 gives φ(q)φ(k) = e^{q+k}, not e^{qk}: the weights
    e^{k_j} / Σ e^{k_j} do not depend on q, i.e. SDPA with every query replaced by 1."""
    q, k, v = qkv(Q=4, K=7, D=1, V=3, dtype=torch.float32)
    out = linear_attention(q, k, v, feature_map=torch.exp, causal=True, form=form)
    ones = torch.ones_like(q)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(
        ones, k, v, attn_mask=causal_mask(4, 7), scale=1.0), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(out, F.scaled_dot_product_attention(
        q, k, v, attn_mask=causal_mask(4, 7), scale=1.0), atol=1e-2)


@pytest.mark.parametrize("form", FORMS)
def test_polynomial_features_give_the_squared_dot_product_kernel(form):
    """φ(x) = x ⊗ x (D² features, ≥ 0 for x ≥ 0): φ(q)·φ(k) = (q·k)², the degree-2 polynomial
    kernel, so the weights are (q·k)² / Σ_j (q·k_j)² (computed here from the scores directly)."""
    q, k, v = (t.abs() for t in qkv(Q=4, K=7, D=3, V=2))
    outer = lambda x: (x[..., :, None] * x[..., None, :]).flatten(-2)  # noqa: E731  (B, T, D²)
    w = (q @ k.mT) ** 2 * causal_mask(4, 7)  # (B, Q, K)
    expected = w / w.sum(-1, keepdim=True) @ v
    torch.testing.assert_close(linear_attention(q, k, v, feature_map=outer, causal=True, form=form),
                               expected, rtol=1e-12, atol=1e-12)


def test_elu_feature_map_is_elu_plus_one_and_positive(device):
    x = make(2, 3, 5, device=device) * 4
    x[0, 0, :4] = torch.tensor([0.0, -80.0, 1e-9, 1000.0])
    phi = elu_feature_map(x)
    torch.testing.assert_close(phi, elu_plus_one(x), rtol=1e-15, atol=0)  # eˣ to the last bit
    torch.testing.assert_close(phi, F.elu(x) + 1, rtol=1e-15, atol=1e-15)  # PyTorch's elu
    assert (phi > 0).all() and phi.shape == x.shape and phi.device.type == device.type
    x.requires_grad_()
    elu_feature_map(x).sum().backward()  # d/dx: 1 where x > 0, eˣ where x ≤ 0
    torch.testing.assert_close(x.grad, torch.where(x > 0, 1.0, torch.exp(x)).detach(), rtol=1e-15, atol=0)
    for dtype in FLOAT_DTYPES:
        y = torch.tensor([-20.0, -8.0, 0.0, 3.0], dtype=dtype, device=device)
        phi = elu_feature_map(y)
        assert phi.dtype == dtype
        # float16 cannot hold e⁻²⁰; F.elu(y) + 1 = (eʸ − 1) + 1 gives 0 in bfloat16 for y = −8
        assert (phi[1:] > 0).all() and (dtype == torch.float16 or phi[0] > 0)
        torch.testing.assert_close(phi.double(), elu_plus_one(y.double()), **TOL[dtype])


# ----------------------------------------------------------------------------- visible_prefix
@pytest.mark.parametrize("shape", SHAPES + [(2, 9)], ids=[f"Q{q}K{k}" for q, k in SHAPES + [(2, 9)]])
@pytest.mark.parametrize("lens_kind", ["none", "(B,)", "(B,Q)"])
def test_visible_prefix_counts_what_causal_mask_and_valid_lens_to_mask_keep(shape, lens_kind):
    Q, K = shape
    lens = lens_for(lens_kind, Q, K)
    for causal in (False, True):
        n = visible_prefix(lens, 2, Q, K, causal=causal)
        assert n.dtype == torch.long and n.shape == (2, Q)
        keep = torch.ones(2, Q, K, dtype=torch.bool)
        if lens is not None:
            keep &= valid_lens_to_mask(lens, 2, Q, K)
        if causal:
            keep &= causal_mask(Q, K)
        assert torch.equal(n, keep.sum(-1))
        # what is kept is a prefix: exactly the first n keys
        assert torch.equal(keep, torch.arange(K) < n[..., None])
        assert torch.equal(keep, take_mask(2, Q, K, lens, causal))


def test_visible_prefix_zero_sizes_and_device(device):
    assert visible_prefix(None, 0, 3, 4).shape == (0, 3)
    assert torch.equal(visible_prefix(None, 1, 3, 0, causal=True), torch.zeros(1, 3, dtype=torch.long))
    out = visible_prefix([2, 0], 2, 3, 4, device, causal=True)
    assert out.device.type == device.type
    assert out.cpu().tolist() == [[2, 2, 2], [0, 0, 0]]


# ------------------------------------------------------------------ positive random features
def test_positive_random_features_formula_and_positivity():
    x = make(2, 3, 4) * 3  # large enough that W x − |x|²/2 is very negative somewhere
    W = random_projection(11, 4, generator=torch.Generator().manual_seed(1))
    phi = positive_random_features(x, W)
    assert phi.shape == (2, 3, 11) and (phi > 0).all()
    for b in range(2):
        for t in range(3):
            for f in range(11):
                expected = math.exp(float(W[f] @ x[b, t]) - float(x[b, t] @ x[b, t]) / 2) / math.sqrt(11)
                assert math.isclose(float(phi[b, t, f]), expected, rel_tol=1e-12)


def test_positive_random_features_are_unbiased_for_the_exponential_kernel():
    """E[φ(q)·φ(k)] = exp(q·k). One draw's φ(q)·φ(k) is the mean over its F features of
    X = exp(w·(q + k) − |q|²/2 − |k|²/2) with w ~ N(0, I), and E[exp(w·s)] = exp(|s|²/2) gives
    E[X] = exp(q·k), Var X = exp(2|q + k|² − |q|² − |k|²) − exp(2 q·k). The mean over N draws of
    F features is a mean of N·F independent X: its standard deviation is √(Var X / (N·F)), and
    the test allows 5 of them (a normal variable lies outside ±5σ with probability 6e-7; the
    draws are seeded, so the test is deterministic anyway)."""
    q = torch.tensor([[0.3, -0.2, 0.4], [0.5, 0.1, -0.3], [0.0, 0.0, 0.0], [-0.6, 0.2, 0.1]],
                     dtype=torch.float64)
    k = torch.tensor([[-0.1, 0.5, 0.2], [0.4, 0.3, -0.2], [0.2, -0.1, 0.1], [0.5, -0.1, 0.3]],
                     dtype=torch.float64)
    N, Fn = 1000, 64
    g = torch.Generator().manual_seed(0)
    total = torch.zeros(4, dtype=torch.float64)
    for _ in range(N):
        W = random_projection(Fn, 3, generator=g)
        total += (positive_random_features(q, W) * positive_random_features(k, W)).sum(-1)
    mean = total / N
    exact = torch.exp((q * k).sum(-1))
    var = torch.exp(2 * ((q + k) ** 2).sum(-1) - (q ** 2).sum(-1) - (k ** 2).sum(-1)) - exact ** 2
    tolerance = 5 * torch.sqrt(var / (N * Fn))
    assert (tolerance < 0.05 * exact).all()  # the bound is tight enough to mean something
    assert ((mean - exact).abs() < tolerance).all(), (mean, exact, tolerance)


def test_random_features_approach_sdpa_as_the_number_of_features_grows():
    """With x = q / D^¼, φ(q)·φ(k) estimates exp(q·k/√D): linear attention with these features
    estimates softmax attention, with an error ∝ 1/√F. Averaged over 8 seeds (here 0.070, 0.029,
    0.0072 for F = 16, 256, 4096): each ×16 in F must cut the error by 1.7 (4 is expected once F
    is large), both together by 6, and F = 4096 be within 0.01 of SDPA."""
    D, Q, K = 8, 10, 13
    errors, weight_errors = [], []
    for Fn in (16, 256, 4096):
        e = w_e = 0.0
        for seed in range(8):
            g = torch.Generator().manual_seed(seed)
            q, k, v = qkv(B=1, Q=Q, K=K, D=D, V=3, seed=10 * seed)
            q, k = q / 2, k / 2  # |x|² ≈ 0.7: the estimator's variance stays moderate
            W = random_projection(Fn, D, generator=g)
            phi = lambda x: positive_random_features(x / D ** 0.25, W)  # noqa: E731
            out = linear_attention(q, k, v, feature_map=phi)
            e += (out - F.scaled_dot_product_attention(q, k, v)).abs().mean().item() / 8
            w = phi(q) @ phi(k).mT
            w_e += (w / w.sum(-1, keepdim=True) - torch.softmax(q @ k.mT / math.sqrt(D), -1)
                    ).abs().mean().item() / 8
        errors.append(e)
        weight_errors.append(w_e)
    for errs in (errors, weight_errors):
        assert errs[1] < errs[0] / 1.7 and errs[2] < errs[1] / 1.7 and errs[2] < errs[0] / 6, errs
    assert errors[2] < 0.01, errors


def test_random_projection_shape_dtype_seed_and_statistics(device):
    W = random_projection(4000, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float32,
                          device=device)
    assert W.shape == (4000, 5) and W.dtype == torch.float32 and W.device.type == device.type
    again = random_projection(4000, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float32,
                              device=device)
    assert torch.equal(W, again)
    # standard normal entries: mean 0 (std of the mean 1/√20000 ≈ 0.007), variance 1 (std of
    # the sample variance √(2/20000) = 0.01): 5 standard deviations allowed
    assert abs(W.mean().item()) < 0.035 and abs(W.var().item() - 1) < 0.05
    assert random_projection(3, 2).dtype == torch.float64


# ------------------------------------------------------------ recurrent states and delta rule
def test_additive_states_are_cumulative_sums_of_outer_products(device):
    k, v = make(2, 7, 3, device=device), make(2, 7, 5, device=device, seed=1)
    S = recurrent_states(k, v)
    assert S.shape == (2, 7, 3, 5)
    torch.testing.assert_close(S, torch.einsum("btd,btv->btdv", k, v).cumsum(dim=1),
                               rtol=1e-12, atol=1e-12)


def written_out_delta(k, v, beta, decay=None) -> torch.Tensor:
    """S_t = α_t S_{t−1} + β_t k_t (v_t − α_t S_{t−1}ᵀ k_t)ᵀ from S_0 = 0, one token at a time
    (``beta`` None: S_t = α_t S_{t−1} + k_t v_tᵀ; ``decay`` None: α_t = 1)."""
    k, v = k.double().cpu(), v.double().cpu()
    B, T, D = k.shape
    states = torch.zeros(B, T, D, v.shape[-1], dtype=torch.float64)
    for b in range(B):
        S = torch.zeros(D, v.shape[-1], dtype=torch.float64)
        for t in range(T):
            if decay is not None:
                S = float(decay[b, t]) * S
            if beta is None:
                S = S + torch.outer(k[b, t], v[b, t])
            else:
                retrieved = S.T @ k[b, t]  # (V,)
                S = S + float(beta[b, t]) * torch.outer(k[b, t], v[b, t] - retrieved)
            states[b, t] = S
    return states


@pytest.mark.parametrize("beta", [0.5, 1, "tensor"])
def test_delta_rule_states_equal_the_rule_written_out(device, beta):
    k, v = make(2, 6, 4, device=device), make(2, 6, 3, device=device, seed=1)
    if beta == "tensor":
        beta = torch.rand(2, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(device)
    S = recurrent_states(k, v, beta)
    full = beta if isinstance(beta, torch.Tensor) else torch.full((2, 6), float(beta))
    assert S.shape == (2, 6, 4, 3) and S.device.type == device.type
    torch.testing.assert_close(S.cpu(), written_out_delta(k, v, full), rtol=1e-12, atol=1e-12)


def test_delta_rule_is_a_gradient_step_on_the_retrieval_error():
    """S_t = S_{t−1} − β ∇_S ½|Sᵀk_t − v_t|² at S_{t−1} (autograd computes the gradient)."""
    k, v = make(1, 5, 4), make(1, 5, 3, seed=1)
    beta = 0.3
    states = recurrent_states(k, v, beta)
    S = torch.zeros(4, 3, dtype=torch.float64)
    for t in range(5):
        S = S.detach().requires_grad_()
        (0.5 * ((S.T @ k[0, t] - v[0, t]) ** 2).sum()).backward()
        S = S - beta * S.grad
        torch.testing.assert_close(states[0, t], S.detach(), rtol=1e-12, atol=1e-12)


def test_unit_keys_with_beta_one_retrieve_the_value_just_written():
    """r = S_{t−1}ᵀk, S_t = S_{t−1} + k (v − r)ᵀ ⇒ S_tᵀk = r + |k|²(v − r) = v for |k| = 1."""
    k = F.normalize(make(2, 9, 4), dim=-1)  # T > D: the keys cannot all be orthogonal
    v = make(2, 9, 3, seed=1)
    S = recurrent_states(k, v, 1.0)
    torch.testing.assert_close(torch.einsum("btdv,btd->btv", S, k), v, rtol=1e-12, atol=1e-12)


def test_orthonormal_keys_retrieve_every_stored_value():
    D, T = 6, 4
    basis, _ = torch.linalg.qr(make(D, D))  # orthonormal columns
    k = basis[:, :T].T[None]  # (1, T, D): orthonormal keys
    v = make(1, T, 5, seed=1)
    for beta in (1.0, None):  # the delta rule, and (orthogonal keys) the additive update too
        last = recurrent_states(k, v, beta)[0, -1]  # (D, V)
        torch.testing.assert_close(k[0] @ last, v[0], rtol=1e-12, atol=1e-12)


def test_a_repeated_key_is_replaced_by_the_delta_rule_and_summed_by_the_additive_update():
    basis, _ = torch.linalg.qr(make(3, 3))
    k1, k2 = basis[:, 0], basis[:, 1]
    k = torch.stack([k1, k2, k1])[None]  # (1, 3, D): k1 written twice
    v = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [10.0, 20.0]]], dtype=torch.float64)
    delta = recurrent_states(k, v, 1.0)[0, -1]
    additive = recurrent_states(k, v)[0, -1]
    torch.testing.assert_close(delta.T @ k1, v[0, 2], rtol=1e-12, atol=1e-12)  # replaced
    torch.testing.assert_close(additive.T @ k1, v[0, 0] + v[0, 2], rtol=1e-12, atol=1e-12)  # summed
    for S in (delta, additive):
        torch.testing.assert_close(S.T @ k2, v[0, 1], rtol=1e-12, atol=1e-12)
    # β = ½ moves the retrieval half way from the old value to the new one
    half = recurrent_states(k, v, torch.tensor([[1.0, 1.0, 0.5]], dtype=torch.float64))[0, -1]
    torch.testing.assert_close(half.T @ k1, (v[0, 0] + v[0, 2]) / 2, rtol=1e-12, atol=1e-12)


def test_beta_zero_writes_nothing():
    k, v = make(2, 4, 3), make(2, 4, 2, seed=1)
    assert (recurrent_states(k, v, 0.0) == 0).all()
    assert (delta_rule(make(2, 4, 3, seed=5), k, v, 0) == 0).all()


def test_delta_rule_outputs_read_the_state_after_their_own_write(device):
    q, k, v = make(2, 6, 4, device=device, seed=3), make(2, 6, 4, device=device), make(
        2, 6, 3, device=device, seed=1)
    beta = torch.rand(2, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(device)
    out = delta_rule(q, k, v, beta)
    states = written_out_delta(k, v, beta)
    expected = torch.tensor([[(states[b, t].T @ q[b, t].cpu()).tolist() for t in range(6)]
                             for b in range(2)], dtype=torch.float64)
    assert out.shape == (2, 6, 3) and out.device.type == device.type
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(delta_rule(q, k, v), torch.einsum(
        "btdv,btd->btv", recurrent_states(k, v, 1.0), q), rtol=1e-12, atol=1e-12)


def test_recurrent_states_no_tokens():
    k, v = make(2, 0, 3), make(2, 0, 4)
    assert recurrent_states(k, v).shape == (2, 0, 3, 4)
    assert recurrent_states(k, v, torch.zeros(2, 0, dtype=torch.float64)).shape == (2, 0, 3, 4)
    assert delta_rule(make(2, 0, 3), k, v).shape == (2, 0, 4)


# -------------------------------------------------------------------- dtypes, devices, inputs
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("form", FORMS)
def test_every_dtype_and_device(device, dtype, form):
    q, k, v = qkv(Q=7, K=5, D=3, V=4, dtype=dtype, device=device)
    lens = torch.tensor([[5, 4, 0, 2, 5, 3, 1], [1, 5, 5, 5, 5, 5, 5]], device=device)
    out = linear_attention(q, k, v, lens, causal=True, form=form)
    assert out.dtype == dtype and out.device.type == device.type
    torch.testing.assert_close(out.cpu().double(), written_out(q, k, v, lens=lens, causal=True),
                               **TOL[dtype])
    if dtype in (torch.float16, torch.bfloat16):  # computed in float32, then rounded
        as_float = linear_attention(q.float(), k.float(), v.float(), lens, causal=True, form=form)
        torch.testing.assert_close(out, as_float.to(dtype), rtol=0, atol=0)
    W = random_projection(6, 3, dtype=dtype, device=device)
    phi = positive_random_features(q, W)
    assert phi.dtype == dtype and phi.device.type == device.type and (phi > 0).all()
    S = recurrent_states(k, v, 0.5)
    assert S.dtype == dtype and S.device.type == device.type
    torch.testing.assert_close(S.cpu().double(), written_out_delta(k, v, torch.full((2, 5), 0.5)),
                               **TOL[dtype])
    o = delta_rule(q[:, :5], k, v, 0.5)
    assert o.dtype == dtype and o.device.type == device.type
    expected = torch.einsum("btdv,btd->btv", written_out_delta(k, v, torch.full((2, 5), 0.5)),
                            q[:, :5].cpu().double())
    torch.testing.assert_close(o.cpu().double(), expected, **TOL[dtype])


@pytest.mark.parametrize("form", FORMS)
def test_float16_sums_that_would_overflow_float16_stay_finite(form):
    """2000 keys with φ(k) = 4 per feature: Σ_j φ(q)·φ(k_j) = 4·4·4·2000 = 128000 > 65504, the
    largest float16; computed in float32 the output is the mean of the values."""
    K = 2000
    q = torch.full((1, 2, 4), 3.0, dtype=torch.float16)
    k = torch.full((1, K, 4), 3.0, dtype=torch.float16)
    v = make(1, K, 2, dtype=torch.float16)
    out = linear_attention(q, k, v, form=form)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), v.double().mean(1, keepdim=True).expand(1, 2, 2),
                               rtol=2e-3, atol=2e-3)


def test_inputs_are_never_modified():
    q, k, v = qkv(Q=4, K=6, dtype=torch.float16)
    lens = torch.tensor([[6, 2, 0, 4], [1, 1, 1, 1]])
    beta = torch.full((2, 6), 0.5, dtype=torch.float16)
    W = random_projection(5, 4, dtype=torch.float16)
    before = [t.clone() for t in (q, k, v, lens, beta, W)]
    for form in FORMS:
        linear_attention(q, k, v, lens, causal=True, form=form)
    elu_feature_map(q)
    positive_random_features(q, W)
    recurrent_states(k, v, beta)
    delta_rule(q[:, :4], k[:, :4], v[:, :4], beta[:, :4])
    visible_prefix(lens, 2, 4, 6, causal=True)
    for t, b in zip((q, k, v, lens, beta, W), before):
        assert torch.equal(t, b)


@pytest.mark.parametrize("form", FORMS)
def test_keys_and_values_no_query_sees_change_nothing_even_nan_or_inf(form):
    q, k, v = qkv(Q=4, K=8, D=3, V=2)
    lens = torch.tensor([[2, 5, 0, 3], [6, 6, 6, 6]])  # row 0 reads keys 0…4, row 1 keys 0…5
    clean = [t.clone().requires_grad_() for t in (q, k, v)]
    dirty_k, dirty_v = k.clone(), v.clone()
    dirty_k[0, 5:], dirty_v[0, 5:] = math.nan, math.inf
    dirty_k[1, 6:], dirty_v[1, 6:] = -math.inf, math.nan
    dirty = [t.requires_grad_() for t in (q.clone(), dirty_k, dirty_v)]
    d_out = make(2, 4, 2, seed=7)
    a = linear_attention(*clean, lens, form=form)
    b = linear_attention(*dirty, lens, form=form)
    assert torch.isfinite(b).all() and torch.equal(a, b)
    torch.autograd.backward(a, d_out)
    torch.autograd.backward(b, d_out)
    for x, y in zip(clean, dirty):
        assert torch.isfinite(y.grad).all() and torch.equal(x.grad, y.grad)
    assert (dirty[1].grad[0, 5:] == 0).all() and (dirty[2].grad[1, 6:] == 0).all()


# -------------------------------------------------------------------------------- bad input
def _q(*s):
    return make(*s, dtype=torch.float32)


Q_, K_, V_ = _q(2, 3, 4), _q(2, 5, 4), _q(2, 5, 6)
BAD = [
    ("queries-rank", lambda: linear_attention(_q(3, 4), K_, V_),
     r"queries must have 3 dimensions \(B, Q, D\), got 2 with shape \(3, 4\)"),
    ("keys-D", lambda: linear_attention(Q_, _q(2, 5, 3), V_),
     r"feature size of keys \(D, same as queries\): expected 4, got 3"),
    ("values-K", lambda: linear_attention(Q_, K_, _q(2, 4, 6)),
     r"number of values \(K, one per key\): expected 5, got 4"),
    ("keys-B", lambda: linear_attention(Q_, _q(3, 5, 4), V_), r"batch size of keys \(B\): expected 2, got 3"),
    ("lens-negative", lambda: linear_attention(Q_, K_, V_, [3, -1]),
     r"valid_lens must lie in \[0, K\] = \[0, 5\], got values from -1 to 3"),
    ("lens-too-long", lambda: linear_attention(Q_, K_, V_, torch.tensor([[6, 1, 1], [0, 0, 0]])),
     r"valid_lens must lie in \[0, K\] = \[0, 5\], got values from 0 to 6"),
    ("lens-shape", lambda: linear_attention(Q_, K_, V_, [[1, 2], [3, 4]]),
     r"valid_lens must have shape \(B,\)=\(2,\) or \(B, Q\)=\(2, 3\), got \(2, 2\)"),
    ("lens-float", lambda: linear_attention(Q_, K_, V_, torch.tensor([1.0, 2.0])),
     r"valid_lens must hold integers, got dtype torch.float32"),
    ("map-negative", lambda: linear_attention(Q_, K_, V_, feature_map=lambda x: x - 10),
     r"feature_map must return features >= 0 .* got a minimum of -\d"),
    ("map-rank", lambda: linear_attention(Q_, K_, V_, feature_map=lambda x: x.exp()[..., 0]),
     r"feature_map must return a tensor \(B, T, F\) of queries's \(B, T\) = \(2, 3\), got \(2, 3\)$"),
    ("map-leading", lambda: linear_attention(Q_, K_, V_, feature_map=lambda x: x.exp()[:1]),
     r"feature_map must return a tensor \(B, T, F\) of queries's \(B, T\) = \(2, 3\), got \(1, 3, 4\)"),
    ("map-not-a-tensor", lambda: linear_attention(Q_, K_, V_, feature_map=lambda x: x.tolist()),
     r"feature_map must return a tensor .* got list"),
    ("map-no-features", lambda: linear_attention(Q_, K_, V_, feature_map=lambda x: x.exp()[..., :0]),
     r"feature_map must return at least one feature \(F >= 1\), got 0"),
    ("map-int", lambda: linear_attention(Q_, K_, V_, feature_map=lambda x: x.exp().long()),
     r"feature_map\(queries\) must be a floating-point tensor, got dtype torch.int64"),
    ("map-F-differs", lambda: linear_attention(
        Q_, K_, V_, feature_map=lambda x: x.exp().repeat(1, 1, 1 + (x.shape[1] == 5))),
     r"number of features of keys \(F, same as queries\): expected 4, got 8"),
    ("map-not-callable", lambda: linear_attention(Q_, K_, V_, feature_map="elu"),
     r"feature_map must be a function \(B, T, D\) -> \(B, T, F\), got str"),
    ("form", lambda: linear_attention(Q_, K_, V_, form="softmax"),
     r"form must be one of \('quadratic', 'linear', 'recurrent'\), got 'softmax'"),
    ("causal", lambda: linear_attention(Q_, K_, V_, causal=1), r"causal must be True or False, got 1"),
    ("x-0-d", lambda: elu_feature_map(torch.tensor(1.0)), r"x must be a tensor of shape \(\.\.\., D\)"),
    ("x-int", lambda: elu_feature_map(torch.ones(3, dtype=torch.long)),
     r"x must be a floating-point tensor, got dtype torch.int64"),
    ("projection-D", lambda: positive_random_features(Q_, _q(7, 5)),
     r"feature size of projection \(D, same as x\): expected 4, got 5"),
    ("projection-rank", lambda: positive_random_features(Q_, _q(7)),
     r"projection must have 2 dimensions \(F, D\), got 1 with shape \(7,\)"),
    ("projection-empty", lambda: positive_random_features(Q_, _q(0, 4)),
     r"projection must have at least one row \(F >= 1\), got 0"),
    ("projection-device", lambda: positive_random_features(Q_, torch.empty(7, 4, device="meta")),
     r"projection must be on the device of x \(cpu\), got meta"),
    ("projection-int", lambda: positive_random_features(Q_, torch.ones(7, 4, dtype=torch.long)),
     r"projection must be a floating-point tensor, got dtype torch.int64"),
    ("num_features", lambda: random_projection(0, 4), r"num_features must be a positive int, got 0"),
    ("size", lambda: random_projection(3, 2.0), r"size must be a positive int, got 2.0"),
    ("dtype", lambda: random_projection(3, 2, dtype=torch.int64),
     r"dtype must be a floating-point torch.dtype, got torch.int64"),
    ("generator", lambda: random_projection(3, 2, generator=3), r"generator must be None or a torch.Generator"),
    ("device", lambda: random_projection(3, 2, device="meta"), r"device must be the CPU or an accelerator"),
    ("batch", lambda: visible_prefix(None, -1, 3, 4), r"batch must be an int >= 0, got -1"),
    ("queries", lambda: visible_prefix(None, 2, True, 4), r"queries must be an int >= 0, got True"),
    ("prefix-lens", lambda: visible_prefix([5, 1], 2, 3, 4),
     r"valid_lens must lie in \[0, K\] = \[0, 4\], got values from 1 to 5"),
    ("states-keys-rank", lambda: recurrent_states(_q(5, 4), V_),
     r"keys must have 3 dimensions \(B, T, D\), got 2 with shape \(5, 4\)"),
    ("states-T", lambda: recurrent_states(K_, _q(2, 4, 6)),
     r"number of values \(T, one per key\): expected 5, got 4"),
    ("states-B", lambda: recurrent_states(K_, _q(1, 5, 6)), r"batch size of values \(B\): expected 2, got 1"),
    ("beta-shape", lambda: recurrent_states(K_, V_, _q(2, 4)),
     r"beta must be a number or a tensor \(B, T\) = \(2, 5\), got shape \(2, 4\)"),
    ("beta-0-d", lambda: recurrent_states(K_, V_, torch.tensor(0.5)),
     r"beta must be a number or a tensor \(B, T\) = \(2, 5\), got shape \(\)"),
    ("beta-nan", lambda: recurrent_states(K_, V_, math.nan),
     r"beta must be a finite number or a tensor \(B, T\), got nan"),
    ("beta-nan-tensor", lambda: recurrent_states(K_, V_, torch.full((2, 5), math.nan)),
     r"beta must hold finite numbers, got NaN or inf"),
    ("beta-bool", lambda: recurrent_states(K_, V_, True), r"beta must be a finite number .* got True"),
    ("beta-dtype", lambda: recurrent_states(K_, V_, make(2, 5)),
     r"beta must have the dtype and device of keys \(torch.float32 on cpu\), got torch.float64"),
    ("delta-beta-None", lambda: delta_rule(_q(2, 5, 4), K_, V_, None),
     r"beta must be a finite number or a tensor \(B, T\), got None"),
    ("delta-T", lambda: delta_rule(Q_, K_, V_),
     r"queries must have the \(B, T\) of keys \(2, 5\) \(one query per token\), got \(2, 3\)"),
    ("delta-D", lambda: delta_rule(_q(2, 5, 3), K_, V_),
     r"feature size of queries \(D, same as keys\): expected 4, got 3"),
]


@pytest.mark.parametrize("call, match", [(c, m) for _, c, m in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input_is_a_value_error_naming_expected_and_actual(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_numpy_scalars_are_numbers():
    import numpy as np

    k, v = make(2, 4, 3), make(2, 4, 2, seed=1)
    torch.testing.assert_close(recurrent_states(k, v, np.float32(0.5)), recurrent_states(k, v, 0.5))
    torch.testing.assert_close(recurrent_states(k, v, np.int64(1)), recurrent_states(k, v, 1.0))
    assert torch.equal(visible_prefix(None, np.int64(2), np.int32(3), 4), torch.full((2, 3), 4))


# ------------------------------------------- NaN in what is seen, feature maps that vanish or fail
def nan_at(x: torch.Tensor, index: tuple) -> torch.Tensor:
    x = x.clone()
    x[index] = math.nan
    return x


# row 0 causal with per-query lengths: query 1 sits after key 2's position, query 3 is cut to 2 keys
NAN_LENS = torch.tensor([[6, 6, 6, 2, 6, 0], [6, 6, 6, 6, 6, 6]])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("where", ["key", "value", "query"])
def test_nan_reaches_exactly_the_outputs_that_see_it(form, where):
    """A NaN in key 2 or value 2 of row 0 (one entry) makes NaN every output of a query that
    sees key 2 (a value: only that value's column) and nothing else; a NaN query makes its own
    output NaN, except a query that sees no key (0). Softmax attention's weights (the same
    mask) are NaN in the same rows for a NaN key or query. Before: 0 where NaN was due."""
    q, k, v = qkv(Q=6, K=6, D=3, V=4)
    take = take_mask(2, 6, 6, NAN_LENS, True)  # (B, Q, K)
    clean = linear_attention(q, k, v, NAN_LENS, causal=True, form=form)
    if where == "key":
        k = nan_at(k, (0, 2, 1))
        expected = take[..., 2, None].expand(2, 6, 4) & (torch.arange(2) == 0)[:, None, None]
    elif where == "value":
        v = nan_at(v, (0, 2, 1))
        expected = (take[..., 2] & (torch.arange(2) == 0)[:, None])[..., None] & (torch.arange(4) == 1)
    else:  # query 4 sees keys; query 5 sees none (length 0)
        q = nan_at(nan_at(q, (0, 4, 0)), (0, 5, 2))
        expected = torch.zeros(2, 6, 4, dtype=torch.bool)
        expected[0, 4] = True
    out = linear_attention(q, k, v, NAN_LENS, causal=True, form=form)
    assert expected.any() and not expected.all()
    assert torch.equal(torch.isnan(out), expected)
    torch.testing.assert_close(out[~expected], clean[~expected], rtol=1e-12, atol=1e-12)
    assert (out[0, 5] == 0).all()  # sees no key: 0 even with a NaN query
    if where != "value":  # softmax's weights: NaN in the same rows (0 · NaN in a product
        # weights @ values would reach other rows; SDPA's math path even adds the mask to NaN)
        scores = (q[:, :5] @ k.mT).masked_fill(~take[:, :5], -math.inf)
        assert torch.equal(torch.isnan(torch.softmax(scores, -1)).all(-1), expected[:, :5].all(-1))


@pytest.mark.parametrize("form", FORMS)
def test_nan_query_that_sees_nothing_has_zero_output_and_gradient(form):
    q, k, v = qkv(Q=3, K=4)
    q = nan_at(q, (1, 0, 0)).requires_grad_()
    out = linear_attention(q, k, v, torch.tensor([[4, 4, 4], [0, 3, 3]]), form=form)
    assert (out[1, 0] == 0).all() and torch.isfinite(out).all()
    out.sum().backward()
    assert (q.grad[1, 0] == 0).all() and torch.isfinite(q.grad).all()


@pytest.mark.parametrize("form", FORMS)
def test_a_feature_map_giving_nan_for_finite_inputs_is_refused(form):
    """torch.sqrt of normal numbers: NaN for every negative entry. Before: passed the 'features
    ≥ 0' check (NaN < 0 is False) and returned 0 for every query."""
    q, k, v = qkv(Q=4, K=5)
    with pytest.raises(ValueError, match=r"^feature_map must return finite features for finite "
                                         r"queries, got NaN or inf for \d+ of them"):
        linear_attention(q, k, v, feature_map=torch.sqrt, form=form)
    # keys the map breaks: refused too, unless no query sees them
    phi = lambda x: torch.sqrt(x.abs()) + torch.where(x[..., :1] > 50, math.nan, 0.0)  # noqa: E731
    k = k.clone()
    k[0, 4] = 60.0
    with pytest.raises(ValueError, match=r"^feature_map must return finite features for finite keys"):
        linear_attention(q, k, v, feature_map=phi, form=form)
    torch.testing.assert_close(
        linear_attention(q, k, v, torch.tensor([4, 5]), feature_map=phi, form=form),
        written_out(q, k, v, lambda x: torch.sqrt(x.abs()), torch.tensor([4, 5])),
        rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", FORMS)
def test_a_zero_normaliser_where_keys_are_seen_is_refused(form):
    """ReLU features: φ(q) = (1, 0) and φ(k) = (0, 1) for the first two keys, so query 1 (causal,
    it sees keys 0 and 1) has φ(q)·Σφ(k) = 0: the weights are 0/0. Before: its output was 0,
    as for a query that sees nothing."""
    q = torch.tensor([[[1.0, -1.0], [1.0, -1.0], [1.0, 1.0]]], dtype=torch.float64)
    k = torch.tensor([[[-1.0, 1.0], [-2.0, 3.0], [1.0, 1.0]]], dtype=torch.float64)
    v = make(1, 3, 2)
    with pytest.raises(ValueError, match=r"^feature_map must give a normaliser φ\(q\)·Σφ\(k\) > 0 "
                                         r"for a query that sees keys, got 0 for 2 queries "
                                         r"\(the first: batch 0, query 0\)"):
        linear_attention(q, k, v, feature_map=torch.relu, causal=True, form=form)
    # the same queries reading nothing (length 0) are fine: 0
    out = linear_attention(q, k, v, torch.tensor([[0, 0, 3]]), feature_map=torch.relu, causal=True,
                           form=form)
    assert (out[0, :2] == 0).all() and torch.isfinite(out).all()
    # elu + 1 never gives 0, but in float32 e⁻⁶⁰ · e⁻⁶⁰ underflows: refused, not 0
    far = torch.full((1, 2, 2), -60.0)
    with pytest.raises(ValueError, match=r"^feature_map must give a normaliser"):
        linear_attention(far, far, torch.ones(1, 2, 3), form=form)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("form", FORMS)
def test_a_feature_map_that_writes_into_its_input_changes_no_caller_tensor(dtype, form):
    """φ(x) = relu(x) + 1 written in place. Before: the caller's float32 and float64 queries
    and keys were changed (half precision was safe: it is copied to float32 first)."""
    def in_place(x):
        return x.clamp_(min=0).add_(1)

    q, k, v = qkv(Q=4, K=5, dtype=dtype)
    before = [t.clone() for t in (q, k, v)]
    out = linear_attention(q, k, v, feature_map=in_place, causal=True, form=form)
    for t, b in zip((q, k, v), before):
        assert torch.equal(t, b)
    expected = linear_attention(q, k, v, feature_map=lambda x: torch.relu(x) + 1, causal=True, form=form)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_elu_feature_map_never_returns_zero(dtype):
    """eˣ rounds to 0 below x ≈ −17 (float16, past its subnormals), −104 (float32, bfloat16)
    and −745 (float64); each feature is kept at least the dtype's smallest normal number,
    eˣ itself where that is larger. Before: exactly 0 (and 'every feature > 0' was false)."""
    tiny = torch.finfo(dtype).tiny
    cut = math.log(tiny)  # below it eˣ < tiny
    x = torch.tensor([-1e4, cut * 1.5, cut - 1, cut + 1, -5.0, 0.0, 2.0], dtype=dtype)
    phi = elu_feature_map(x)
    assert phi.dtype == dtype and (phi > 0).all()
    assert (phi[:3] == tiny).all()
    torch.testing.assert_close(phi[3:].double(), elu_plus_one(x[3:].double()), **TOL[dtype])
    assert torch.isnan(elu_feature_map(torch.tensor([math.nan], dtype=dtype))).all()


def test_positive_random_features_stay_positive_where_exp_underflows():
    x = torch.full((1, 4), 12.0)  # |x|²/2 = 288: exp(W x − 288) underflows in float32
    W = random_projection(16, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    phi = positive_random_features(x, W)
    assert (phi > 0).all() and (phi == torch.finfo(torch.float32).tiny).any()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("form", FORMS)
def test_half_precision_inputs_and_projection_through_random_features(dtype, form):
    """float16 inputs and a float16 projection: linear_attention hands the feature map float32
    copies, and positive_random_features computes with the projection in float32. Before:
    refused, 'projection must have the dtype and device of x (torch.float32 ...)', naming the
    helper's internal copy."""
    q, k, v = qkv(Q=4, K=5, dtype=dtype)
    W = random_projection(32, 4, generator=torch.Generator().manual_seed(0), dtype=dtype)
    out = linear_attention(q, k, v, feature_map=lambda x: positive_random_features(x, W),
                           causal=True, form=form)
    assert out.dtype == dtype
    expected = written_out(q, k, v, lambda x: positive_random_features(x, W.double()), causal=True)
    torch.testing.assert_close(out.double(), expected, **TOL[dtype])
    # a wider projection: computed in it, returned in x's dtype
    phi = positive_random_features(q, W.double())
    assert phi.dtype == dtype
    torch.testing.assert_close(phi.double(), positive_random_features(q.double(), W.double()), **TOL[dtype])


# ---------------------------------------------------------------- orthogonal random features
def test_orthogonal_projection_blocks_of_orthogonal_gaussian_length_rows():
    W = random_projection(10, 4, generator=torch.Generator().manual_seed(0), orthogonal=True)
    assert W.shape == (10, 4) and W.dtype == torch.float64
    for block in (W[:4], W[4:8], W[8:]):  # D = 4 rows, then the 2 rows left
        gram = block @ block.T
        off = gram - torch.diag(gram.diagonal())
        assert off.abs().max() < 1e-12 * gram.diagonal().max()
    assert (W[:4] @ W[4:8].T).abs().max() > 0.1  # different blocks: independent, not orthogonal
    again = random_projection(10, 4, generator=torch.Generator().manual_seed(0), orthogonal=True)
    assert torch.equal(W, again)
    # every row a standard normal vector: entries of mean 0 and variance 1, |w|² of mean D = 4
    # and variance 2D = 8 (chi-squared); 40,000 rows, 5 standard deviations of each estimate
    W = random_projection(40_000, 4, generator=torch.Generator().manual_seed(1), orthogonal=True)
    n = W.numel()
    assert abs(W.mean().item()) < 5 / math.sqrt(n) and abs(W.var().item() - 1) < 5 * math.sqrt(2 / n)
    sq = (W * W).sum(-1)
    assert abs(sq.mean().item() - 4) < 5 * math.sqrt(8 / 40_000)
    # the sample variance of n χ²₄ numbers: variance (μ₄ − σ⁴)/n, μ₄ = 12·4·(4 + 4) = 384, σ⁴ = 64
    assert abs(sq.var().item() - 8) < 5 * math.sqrt((384 - 64) / 40_000)


# q, k with |q + k| small: the estimate's tails are light, so its sample variance over 50,000 draws
# is within about 1 % of the true one (seeded, deterministic)
PAIRS = [(torch.tensor([0.3, -0.2, 0.4, 0.1]), torch.tensor([0.5, 0.1, -0.3, 0.2])),
         (torch.tensor([0.6, -0.3, 0.4, 0.2]), torch.tensor([0.4, -0.2, 0.5, 0.3]))]


def estimates(q, k, W, Fn):
    """φ(q)·φ(k) for each of the N = rows / F draws of F rows of W (consecutive, so each draw of
    an orthogonal W is one block of D = F orthogonal rows): (N,)."""
    rows = W.shape[0]
    return (positive_random_features(q.double(), W) * positive_random_features(k.double(), W)
            * rows).view(rows // Fn, Fn).mean(-1)


@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_orthogonal_random_features_are_unbiased(pair):
    """E[φ(q)·φ(k)] = exp(q·k) with orthogonal rows too (each row is still N(0, I)). The mean of
    N = 50,000 independent draws (F = D = 4) lies within 5 of its standard errors (sample std /
    √N; the central limit theorem, the draws being independent) of exp(q·k)."""
    q, k = PAIRS[pair]
    N, Fn = 50_000, 4
    W = random_projection(N * Fn, 4, generator=torch.Generator().manual_seed(0), orthogonal=True)
    e = estimates(q, k, W, Fn)
    exact = math.exp(float(q.double() @ k.double()))
    assert abs(e.mean().item() - exact) < 5 * e.std().item() / math.sqrt(N)
    assert e.std().item() / math.sqrt(N) < 0.01 * exact  # the bound is tight enough to mean something


def test_orthogonal_random_features_have_a_lower_variance_than_iid_ones():
    """At F = D = 4 on the first pair: the iid estimate's variance is known in closed form,
    (exp(2|q + k|² − |q|² − |k|²) − exp(2 q·k)) / F; the sample variance of 50,000 iid draws
    matches it within 3 %, and that of 50,000 orthogonal draws lies below 0.95 of it (measured:
    0.89–0.90 over seeds 0, 1, 2; Choromanski et al. 2021 prove a lower mean squared error for
    these positive features)."""
    q, k = (t.double() for t in PAIRS[0])
    N, Fn = 50_000, 4
    exact_var = (math.exp(2 * float((q + k) @ (q + k)) - float(q @ q) - float(k @ k))
                 - math.exp(2 * float(q @ k))) / Fn
    for seed in range(3):
        for orthogonal in (False, True):
            W = random_projection(N * Fn, 4, generator=torch.Generator().manual_seed(seed),
                                  orthogonal=orthogonal)
            ratio = estimates(q, k, W, Fn).var().item() / exact_var
            assert (0.97 < ratio < 1.03) if not orthogonal else ratio < 0.95, (seed, orthogonal, ratio)


# --------------------------------------------------------------------------- decay (forget gate)
@pytest.mark.parametrize("beta", [None, 0.5, "tensor"])
@pytest.mark.parametrize("decay", [0.9, "tensor", "with-zero"])
def test_decayed_states_equal_the_rule_written_out(device, beta, decay):
    g = torch.Generator().manual_seed(4)
    k, v = make(2, 7, 3, device=device), make(2, 7, 4, device=device, seed=1)
    if beta == "tensor":
        beta = torch.rand(2, 7, dtype=torch.float64, generator=g).to(device)
    if decay != 0.9:
        kind, decay = decay, torch.rand(2, 7, dtype=torch.float64, generator=g).to(device)
        if kind == "with-zero":
            decay[0, 3] = 0.0
    full = lambda x: x if isinstance(x, torch.Tensor) or x is None else torch.full(  # noqa: E731
        (2, 7), x, dtype=torch.float64)
    S = recurrent_states(k, v, beta, decay)
    torch.testing.assert_close(S.cpu(), written_out_delta(k, v, full(beta), full(decay)),
                               rtol=1e-12, atol=1e-12)
    if beta is not None:
        q = make(2, 7, 3, device=device, seed=5)
        torch.testing.assert_close(delta_rule(q, k, v, beta, decay), torch.einsum(
            "btdv,btd->btv", S, q), rtol=1e-12, atol=1e-12)


def test_decay_one_changes_nothing_and_decay_zero_forgets_everything():
    k, v = make(2, 5, 3), make(2, 5, 2, seed=1)
    for beta in (None, 0.7):
        assert torch.equal(recurrent_states(k, v, beta, 1.0), recurrent_states(k, v, beta))
        forgot = recurrent_states(k, v, beta, 0)  # S_t = β_t k_t v_tᵀ: only the last write
        scale = 1.0 if beta is None else beta
        torch.testing.assert_close(forgot, scale * torch.einsum("btd,btv->btdv", k, v),
                                   rtol=1e-12, atol=1e-12)


def test_a_constant_decay_weights_each_write_by_a_power():
    """RetNet: with α constant, S_T = Σ_t α^{T−t} k_t v_tᵀ (the additive update)."""
    k, v = make(1, 6, 3), make(1, 6, 2, seed=1)
    alpha = 0.8
    powers = alpha ** torch.arange(5, -1, -1, dtype=torch.float64)  # α^{T−t}
    torch.testing.assert_close(recurrent_states(k, v, decay=alpha)[0, -1],
                               torch.einsum("t,td,tv->dv", powers, k[0], v[0]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_delta_rule_in_half_precision_reads_float32_states(dtype):
    """The outputs are S_tᵀ q_t with S_t kept in float32, then rounded once (before: the states
    were rounded to half precision first, then multiplied)."""
    q, k, v = (make(2, 6, 4, dtype=dtype, seed=s) for s in (1, 2, 3))
    expected = delta_rule(q.float(), k.float(), v.float(), 0.5, 0.9)
    assert torch.equal(delta_rule(q, k, v, 0.5, 0.9), expected.to(dtype))


DECAY_BAD = [
    ("decay-above-one", lambda: recurrent_states(K_, V_, decay=1.5),
     r"^decay must be a number in \[0, 1\] or a tensor \(B, T\), got 1.5"),
    ("decay-negative", lambda: delta_rule(_q(2, 5, 4), K_, V_, 0.5, -0.1),
     r"^decay must be a number in \[0, 1\] .* got -0.1"),
    ("decay-nan", lambda: recurrent_states(K_, V_, decay=math.nan), r"^decay must be a number .* got nan"),
    ("decay-bool", lambda: recurrent_states(K_, V_, decay=True), r"^decay must be a number .* got True"),
    ("decay-shape", lambda: recurrent_states(K_, V_, decay=_q(2, 4)),
     r"^decay must be a number in \[0, 1\] or a tensor \(B, T\) = \(2, 5\), got shape \(2, 4\)"),
    ("decay-entry", lambda: recurrent_states(K_, V_, decay=torch.full((2, 5), 1.25)),
     r"^decay must hold numbers in \[0, 1\], got 1.25"),
    ("decay-nan-entry", lambda: recurrent_states(K_, V_, decay=torch.full((2, 5), math.nan)),
     r"^decay must hold numbers in \[0, 1\], got nan"),
    ("decay-dtype", lambda: recurrent_states(K_, V_, decay=make(2, 5).abs()),
     r"^decay must have the dtype and device of keys \(torch.float32 on cpu\), got torch.float64"),
    ("orthogonal", lambda: random_projection(3, 2, orthogonal=1), r"^orthogonal must be True or False, got 1"),
]


@pytest.mark.parametrize("call, match", [(c, m) for _, c, m in DECAY_BAD], ids=[i for i, _, _ in DECAY_BAD])
def test_bad_decay_and_orthogonal_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
