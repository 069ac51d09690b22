"""apply_rotary against the rotation written out pair by pair, in both layouts and every dtype."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import apply_rotary
from tests.conftest import FLOAT_DTYPES


def rotate_by_hand(x: torch.Tensor, positions, base: float, interleaved: bool) -> torch.Tensor:
    """Each pair (a, b) of features turned by p·θ_i, θ_i = base^(−2i/D), in float64."""
    x = x.double()
    out = x.clone()
    D = x.shape[-1]
    for t, p in enumerate(positions):
        for i in range(D // 2):
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + D // 2)
            angle = p * base ** (-2 * i / D)
            c, s = math.cos(angle), math.sin(angle)
            out[..., t, a] = x[..., t, a] * c - x[..., t, b] * s
            out[..., t, b] = x[..., t, a] * s + x[..., t, b] * c
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("positions", [None, [3, 0, 7, 100, 5]])
def test_matches_the_pairwise_rotation(interleaved, positions):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)  # (B, H, T, D)
    pos = list(range(5)) if positions is None else positions
    got = apply_rotary(x, None if positions is None else torch.tensor(positions),
                       base=500.0, interleaved=interleaved)
    torch.testing.assert_close(got, rotate_by_hand(x, pos, 500.0, interleaved))


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("scale", [0.125, 16 / 40, 1.0, 3.0])
def test_scale_rotates_by_the_scaled_positions(interleaved, scale):
    """Position interpolation: positions p become p·scale (fractional), pair i turns by
    (p·scale)·θ_i, written out pair by pair."""
    torch.manual_seed(2)
    x = torch.randn(2, 5, 8, dtype=torch.float64)  # (B, T, D)
    positions = [3, 0, 7, 100, 5]
    got = apply_rotary(x, torch.tensor(positions), base=500.0, interleaved=interleaved, scale=scale)
    torch.testing.assert_close(got, rotate_by_hand(x, [p * scale for p in positions], 500.0, interleaved))


def test_scale_one_is_plain_rope_bit_for_bit(device):
    x = torch.randn(3, 11, 8, device=device)
    positions = torch.arange(20, 31, device=device)
    assert torch.equal(apply_rotary(x, positions, scale=1.0), apply_rotary(x, positions))


def test_interpolated_scores_depend_on_the_scaled_offset_only():
    """With scale s, the score of positions m, n equals plain RoPE's at offset s·(m − n): at
    s = 1/2, offset 6 scores as offset 3 did (what position interpolation does to a model)."""
    torch.manual_seed(3)
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)

    def score(m, n, scale=1.0):
        return float(apply_rotary(q, torch.tensor([m]), scale=scale)
                     @ apply_rotary(k, torch.tensor([n]), scale=scale).T)

    assert math.isclose(score(20, 14, scale=0.5), score(3, 0), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(score(40, 8, scale=0.125), score(4, 0), rel_tol=1e-9, abs_tol=1e-12)


def test_position_zero_is_the_identity_and_norms_are_kept():
    x = torch.randn(4, 6, 16, dtype=torch.float64)
    y = apply_rotary(x)
    torch.testing.assert_close(y[:, 0], x[:, 0])
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))


@pytest.mark.parametrize("interleaved", [False, True])
def test_scores_depend_on_the_offset_only(interleaved):
    torch.manual_seed(1)
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)

    def score(m, n):
        qm = apply_rotary(q.expand(1, 16), torch.tensor([m]), interleaved=interleaved)
        kn = apply_rotary(k.expand(1, 16), torch.tensor([n]), interleaved=interleaved)
        return float(qm @ kn.T)

    for m, n in [(0, 0), (5, 2), (2, 5), (40, 13)]:
        for shift in (1, 7, 1000):
            assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-9, abs_tol=1e-9)
    assert not math.isclose(score(5, 2), score(5, 3), rel_tol=1e-3)  # the offset does matter


def test_the_two_layouts_differ_by_a_permutation_of_features():
    x = torch.randn(3, 7, 12, dtype=torch.float64)
    D = 12
    to_interleaved = torch.stack([torch.arange(D // 2), torch.arange(D // 2) + D // 2], -1).flatten()
    # feature order (0, 6, 1, 7, ...): half-split pairs (i, i + D/2) become neighbours
    half = apply_rotary(x, interleaved=False)
    inter = apply_rotary(x[..., to_interleaved], interleaved=True)
    torch.testing.assert_close(inter, half[..., to_interleaved])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_every_dtype_keeps_its_dtype_and_is_close_to_float64(device, dtype):
    x = torch.randn(2, 9, 8, device=device).to(dtype)
    before = x.clone()
    y = apply_rotary(x, torch.arange(100, 109, device=device))
    assert y.dtype == dtype and y.device.type == device.type
    assert torch.equal(x, before)  # input not modified
    exact = rotate_by_hand(x.cpu(), range(100, 109), 10000.0, False)
    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(dtype, 1e-6)
    torch.testing.assert_close(y.cpu().double(), exact, rtol=tol, atol=tol)


@pytest.mark.parametrize("kwargs, match", [
    (dict(x=torch.randn(3, 5)), r"feature size D must be even .* got D=5"),
    (dict(x=torch.randn(6)), r"x must be a tensor of shape \(\.\.\., T, D\), got \(6,\)"),
    (dict(x=torch.ones(2, 4, dtype=torch.long)), r"x must be a floating-point tensor"),
    (dict(x=torch.randn(3, 4), positions=torch.arange(2)), r"positions must have shape \(T,\) = \(3,\), got \(2,\)"),
    (dict(x=torch.randn(3, 4), positions=torch.zeros(3)), r"positions must hold integers, got dtype torch.float32"),
    (dict(x=torch.randn(3, 4), base=1.0), r"base must be a finite number > 1.0, got 1.0"),
    (dict(x=torch.randn(3, 4), base=float("inf")), r"base must be a finite number > 1.0, got inf"),
    (dict(x=[[1.0, 2.0]]), r"x must be a tensor of shape \(\.\.\., T, D\), got list"),
    (dict(x=torch.randn(3, 4), scale=0.0), r"scale must be a finite number > 0.0, got 0.0"),
    (dict(x=torch.randn(3, 4), scale=-0.5), r"scale must be a finite number > 0.0, got -0.5"),
    (dict(x=torch.randn(3, 4), scale=float("nan")), r"scale must be a finite number > 0.0, got nan"),
    (dict(x=torch.randn(3, 4), scale=True), r"scale must be a finite number > 0.0, got True"),
    (dict(x=torch.randn(3, 4), scale="0.5"), r"scale must be a finite number > 0.0, got '0.5'"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        apply_rotary(**kwargs)


def test_rotary_angles_are_position_times_theta():
    from helpers.rotary import rotary_angles

    positions = torch.tensor([0, 3, 10])
    got = rotary_angles(positions, 6, base=100.0)
    expected = torch.tensor([[p * 100.0 ** (-2 * i / 6) for i in range(3)] for p in (0, 3, 10)],
                            dtype=torch.float64)
    assert got.dtype == torch.float64 and got.shape == (3, 3)
    torch.testing.assert_close(got, expected)
    half = rotary_angles(torch.tensor([0.5, 1.5]), 4, dtype=torch.float32)  # fractional positions
    torch.testing.assert_close(half, torch.tensor([[0.5, 0.005], [1.5, 0.015]]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(positions=torch.arange(3), size=5), r"size must be an even int >= 2, got 5"),
    (dict(positions=torch.arange(3), size=0), r"size must be an even int >= 2, got 0"),
    (dict(positions=torch.arange(3), size=True), r"size must be an even int >= 2, got True"),
    (dict(positions=torch.arange(3), size=4, base=1.0), r"base must be a finite number > 1.0, got 1.0"),
    (dict(positions=torch.arange(3), size=4, dtype=torch.long), r"dtype must be a floating torch.dtype, got torch.int64"),
    (dict(positions=torch.arange(3), size=4, dtype="float32"), r"dtype must be a floating torch.dtype, got 'float32'"),
    (dict(positions=torch.zeros(2, 3), size=4), r"positions must be a tensor of shape \(T,\), got \(2, 3\)"),
    (dict(positions=[0, 1], size=4), r"positions must be a tensor of shape \(T,\), got list"),
    (dict(positions=torch.ones(3, dtype=torch.bool), size=4), r"positions must hold real numbers, got dtype torch.bool"),
])
def test_rotary_angles_bad_input(kwargs, match):
    from helpers.rotary import rotary_angles

    with pytest.raises(ValueError, match=match):
        rotary_angles(**kwargs)


# ---------------------------------------------------------------- RoFormer's long-term decay
def decay_by_hand(delta: float, D: int, base: float) -> float:
    """(1/(D/2)) Σ_(j=1…D/2) |S_j|, S_j = Σ_(k<j) e^(iδθ_k), with Python's complex numbers."""
    S, total = 0j, 0.0
    for k in range(D // 2):
        S += complex(math.cos(delta * base ** (-2 * k / D)), math.sin(delta * base ** (-2 * k / D)))
        total += abs(S)
    return total / (D // 2)


@pytest.mark.parametrize("D, base", [(2, 10000.0), (8, 10000.0), (128, 10000.0), (128, 5e5), (6, 10.0)])
def test_decay_bound_is_the_mean_modulus_of_the_partial_sums(D, base):
    from helpers.rotary import decay_bound

    distances = torch.tensor([0.0, 1.0, 2.5, 17.0, 300.0, 4096.0, -17.0])
    got = decay_bound(distances, D, base=base)
    assert got.dtype == torch.float64 and got.shape == (7,)
    torch.testing.assert_close(got, torch.tensor([decay_by_hand(d, D, base) for d in distances.tolist()],
                                                 dtype=torch.float64))
    assert got[0].item() == pytest.approx((D // 2 + 1) / 2)  # |S_j| = j at δ = 0
    assert got[3].item() == pytest.approx(got[6].item())  # e^(−iδθ) is the conjugate: same moduli


def test_decay_bound_bounds_every_rope_score_and_decays():
    """|q̃_mᵀ k̃_n| ≤ (max_i |h_(i+1) − h_i|) · Σ_j |S_j| for random q, k, with h_(D/2) = 0 and
    h_i = (q_2i + i q_2i+1) · conj(k_2i + i k_2i+1) (interleaved pairs as complex numbers)."""
    from helpers.rotary import decay_bound

    g = torch.Generator().manual_seed(0)
    D = 16
    distances = torch.arange(0, 200)
    bound = decay_bound(distances.double(), D) * (D // 2)  # (T,): Σ_j |S_j|
    for _ in range(20):
        q, k = torch.randn(D, dtype=torch.float64, generator=g), torch.randn(D, dtype=torch.float64, generator=g)
        hq, hk = torch.complex(q[0::2], q[1::2]), torch.complex(k[0::2], k[1::2])
        h = torch.cat([hq * hk.conj(), torch.zeros(1, dtype=torch.complex128)])  # (D/2 + 1,)
        largest_step = (h[1:] - h[:-1]).abs().max()
        for delta in (0, 1, 5, 60, 199):  # query at m = delta, key at n = 0
            score = apply_rotary(q[None], torch.tensor([delta]), interleaved=True)[0] @ k
            assert abs(score) <= largest_step * bound[delta] + 1e-12
    D = 128  # RoFormer's figure 2: d = 128, base 10 000; the bound shrinks with the distance
    far = decay_bound(torch.tensor([0.0, 10.0, 100.0, 1000.0]), D)
    assert far[0] > far[1] > far[2] > far[3]
    slow = decay_bound(torch.tensor([1000.0]), D, base=5e5)  # a larger base: it shrinks more slowly
    assert slow > far[3]


@pytest.mark.parametrize("kwargs, match", [
    (dict(distances=torch.arange(3.0), size=5), r"size must be an even int >= 2, got 5"),
    (dict(distances=torch.arange(3.0), size=4, base=0.5), r"base must be a finite number > 1.0"),
    (dict(distances=[0.0, 1.0], size=4), r"distances must be a tensor of shape \(T,\), got list"),
    (dict(distances=torch.zeros(2, 3), size=4), r"distances must be a tensor of shape \(T,\), got \(2, 3\)"),
    (dict(distances=torch.ones(3, dtype=torch.bool), size=4), r"distances must hold real numbers"),
    (dict(distances=torch.ones(3, device="meta"), size=4), r"distances"),
])
def test_decay_bound_bad_input(kwargs, match):
    from helpers.rotary import decay_bound

    with pytest.raises(ValueError, match=match):
        decay_bound(**kwargs)
