"""Sinusoidal positional encoding against its formula, odd widths included."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import PositionalEncoding, sinusoidal_table


@pytest.mark.parametrize("d", [1, 2, 7, 8, 33])
def test_table_matches_formula(d):
    P = sinusoidal_table(20, d, dtype=torch.float64)
    for i in range(20):
        for col in range(d):
            j2 = col - col % 2  # 2j
            angle = i / 10000 ** (j2 / d)
            expected = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert abs(P[i, col].item() - expected) < 1e-12


def test_forward_adds_first_rows_and_leaves_input(device):
    pe = PositionalEncoding(9, max_len=50).to(device).eval()
    X = torch.randn(3, 11, 9, device=device)
    before = X.clone()
    out = pe(X)
    torch.testing.assert_close(out - X, sinusoidal_table(50, 9).to(device)[None, :11].expand(3, -1, -1))
    assert torch.equal(X, before)


def test_buffer_is_not_persistent_and_follows_device(device):
    pe = PositionalEncoding(4, max_len=10)
    assert pe.P.shape == (1, 10, 4)
    assert "P" not in pe.state_dict()
    assert pe.to(device).P.device.type == torch.device(device).type


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtype_of_input_is_kept(dtype):
    out = PositionalEncoding(6)(torch.zeros(1, 4, 6, dtype=dtype))
    assert out.dtype == dtype and torch.isfinite(out).all()


def test_relative_position_is_a_rotation():
    """P[i+δ] = M(δ) P[i] for each pair of columns, M(δ) = [[cos δω, sin δω], [-sin δω, cos δω]]."""
    d, delta = 8, 5
    P = sinusoidal_table(60, d, dtype=torch.float64)
    for j in range(d // 2):
        w = 1 / 10000 ** (2 * j / d)
        M = torch.tensor([[math.cos(delta * w), math.sin(delta * w)],
                          [-math.sin(delta * w), math.cos(delta * w)]], dtype=torch.float64)
        pairs = P[:, 2 * j: 2 * j + 2]  # (T, 2): (p_{i,2j}, p_{i,2j+1}) per row
        torch.testing.assert_close(pairs[:-delta] @ M.T, pairs[delta:])  # rows: (M p_i)ᵀ = p_iᵀ Mᵀ


@pytest.mark.parametrize("shape, match", [
    ((4, 6), r"3 dimensions \(B, T, N\), got 2"),
    ((1, 4, 5), r"feature size of X \(num_hiddens\): expected 6, got 5"),
    ((1, 11, 6), r"at most max_len=10, got 11"),
])
def test_bad_input(shape, match):
    with pytest.raises(ValueError, match=match):
        PositionalEncoding(6, max_len=10)(torch.zeros(*shape))


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_hiddens=4.5), "num_hiddens must be a positive int, got 4.5"),
    (dict(num_hiddens=0), "num_hiddens must be a positive int, got 0"),
    (dict(num_hiddens=4, max_len=0), "max_len must be a positive int, got 0"),
])
def test_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PositionalEncoding(**kwargs)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_or_bool_input_is_rejected_not_truncated(dtype):
    # X + P.to(X.dtype) used to cast P to integers: sin/cos in (-1, 1) became zeros, silently.
    with pytest.raises(ValueError, match=rf"X must be a floating-point tensor, got dtype {dtype}"):
        PositionalEncoding(6)(torch.zeros(1, 4, 6, dtype=dtype))


@pytest.mark.parametrize("dropout", [1.5, -0.5, 1.0, float("nan")])
def test_dropout_outside_0_1_is_rejected(dropout):
    with pytest.raises(ValueError, match=rf"dropout must be a probability in \[0, 1\), got {dropout}"):
        PositionalEncoding(6, dropout=dropout)


def test_numpy_sizes_are_accepted():
    import numpy as np

    pe = PositionalEncoding(np.int64(6), max_len=np.int64(12))
    torch.testing.assert_close(pe(torch.zeros(1, 12, 6))[0], sinusoidal_table(12, 6))
