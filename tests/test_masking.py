"""masked_softmax and sequence_mask against formulas written out here, in every dtype."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import causal_mask, masked_softmax, sequence_mask, softmax_with_mask, valid_lens_to_mask
from tests.conftest import FLOAT_DTYPES, TOL


def reference_masked_softmax(X: torch.Tensor, lens: list[list[int]]) -> torch.Tensor:
    """exp(x_k) / Σ_{j<n} exp(x_j) for k < n, else 0 — one row at a time, in float64."""
    B, Q, K = X.shape
    out = torch.zeros(B, Q, K, dtype=torch.float64)
    for b in range(B):
        for q in range(Q):
            n = lens[b][q]
            row = [float(x) for x in X[b, q, :n]]
            if n:
                m = max(row)
                total = sum(math.exp(x - m) for x in row)
                for k in range(n):
                    out[b, q, k] = math.exp(row[k] - m) / total
    return out


def test_sequence_mask_2d_matches_loop_and_leaves_input(device):
    X = torch.arange(12.0, device=device).reshape(3, 4)
    before = X.clone()
    out = sequence_mask(X, torch.tensor([1, 4, 0]), value=-7)
    expected = before.clone()
    for b, n in enumerate([1, 4, 0]):
        expected[b, n:] = -7
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(X, before)  # the textbook version writes into X


def test_sequence_mask_3d_masks_time_steps_as_d2l_does(device):
    """d2l's own example: X (B, T, F) = ones(2, 3, 4), valid_len [1, 2], value=-1 masks whole
    time steps (axis 1), not the last axis."""
    X = torch.ones(2, 3, 4, device=device)
    out = sequence_mask(X, torch.tensor([1, 2], device=device), value=-1)
    expected = torch.tensor([[[1.0] * 4, [-1.0] * 4, [-1.0] * 4],
                             [[1.0] * 4, [1.0] * 4, [-1.0] * 4]], device=device)
    torch.testing.assert_close(out, expected)
    assert torch.equal(X, torch.ones(2, 3, 4, device=device))  # the input is untouched


def test_sequence_mask_any_trailing_dims_matches_loop():
    X = torch.randn(3, 4, 2, 5)
    lens = [0, 4, 2]
    out = sequence_mask(X, lens, value=7.5)
    for b, n in enumerate(lens):
        for t in range(4):
            assert torch.equal(out[b, t], X[b, t] if t < n else torch.full((2, 5), 7.5))


@pytest.mark.parametrize("lens, match", [
    ([[0, 2, 5], [1, 1, 3]], r"valid_len must have shape \(B,\)=\(2,\), one length per row of X, got \(2, 3\)"),
    ([1, 4], r"valid_len must lie in \[0, T\] = \[0, 3\], got values from 1 to 4"),
])
def test_sequence_mask_3d_rejects_per_query_or_too_long_lengths(lens, match):
    # (B, Q) lengths over the last axis was this helper's old meaning: now an error, not a silent
    # mask along another axis (valid_lens_to_mask / masked_softmax do per-query key masks)
    with pytest.raises(ValueError, match=match):
        sequence_mask(torch.ones(2, 3, 5), torch.tensor(lens))


@pytest.mark.parametrize("lens", [[2, 3], [[1, 3], [2, 4]], [[0, 4], [4, 0]], [0, 0]])
def test_masked_softmax_matches_formula(device, lens):
    X = torch.randn(2, 2, 4, device=device)
    per_query = [row if isinstance(row, list) else [row, row] for row in lens]
    out = masked_softmax(X, torch.tensor(lens, device=device))
    expected = reference_masked_softmax(X.cpu().double(), per_query).to(out)
    torch.testing.assert_close(out, expected)


def test_no_mask_is_plain_softmax(device):
    X = torch.randn(3, 2, 5, device=device, dtype=torch.float64)
    torch.testing.assert_close(masked_softmax(X), torch.exp(X) / torch.exp(X).sum(-1, keepdim=True))


def test_seeds_example_layout():
    """Seed 004's printout: valid lengths (2,) mask columns 2.. in batch 0 and 3.. in batch 1."""
    X = torch.rand(2, 2, 4)
    out = masked_softmax(X, torch.tensor([2, 3]))
    assert (out[0, :, 2:] == 0).all() and (out[1, :, 3:] == 0).all()
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 2))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("lens", [None, [0, 3], [[0, 1, 5], [5, 5, 2]]])
def test_dtype_mask_matrix(device, dtype, lens):
    X = (torch.randn(2, 3, 5, device=device) * 30).to(dtype)  # large scores: overflow-prone
    before = X.clone()
    valid = None if lens is None else torch.tensor(lens, device=device)
    out = masked_softmax(X, valid)
    assert out.dtype == dtype and out.device == X.device
    assert torch.isfinite(out).all()
    assert torch.equal(X, before)
    per_query = [[5] * 3] * 2 if lens is None else [
        row if isinstance(row, list) else [row] * 3 for row in lens]
    expected = reference_masked_softmax(X.cpu().double(), per_query)
    torch.testing.assert_close(out.cpu().double(), expected, **{
        k: max(v, 1e-3 if dtype in (torch.float16, torch.bfloat16) else v) for k, v in TOL[dtype].items()})


def test_fully_masked_row_is_zero_not_uniform_or_nan():
    out = masked_softmax(torch.randn(1, 2, 6), torch.tensor([[0, 6]]))
    assert torch.equal(out[0, 0], torch.zeros(6))
    assert torch.isclose(out[0, 1].sum(), torch.tensor(1.0))


def test_masked_positions_are_exactly_zero_even_with_huge_scores():
    X = torch.full((1, 1, 4), 1e30)
    X[0, 0, 3] = 3e38
    out = masked_softmax(X, torch.tensor([2]))
    assert out[0, 0, 2:].tolist() == [0.0, 0.0]
    torch.testing.assert_close(out[0, 0, :2], torch.tensor([0.5, 0.5]))


def test_gradcheck_through_mask():
    X = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: masked_softmax(x, torch.tensor([[1, 0, 4], [2, 3, 4]])), (X,))


def test_masked_entries_get_no_gradient():
    X = torch.randn(1, 1, 5, dtype=torch.float64, requires_grad=True)
    (masked_softmax(X, torch.tensor([2])) * torch.arange(5.0)).sum().backward()
    assert X.grad[0, 0, 2:].abs().max() == 0


@pytest.mark.parametrize("bad, match", [
    (torch.tensor([1.0, 2.0]), "integers, got dtype torch.float32"),
    (torch.tensor([True, False]), "integers, got dtype torch.bool"),
    (torch.tensor([-1, 2]), r"\[0, K\] = \[0, 4\], got values from -1 to 2"),
    (torch.tensor([1, 5]), r"\[0, K\] = \[0, 4\], got values from 1 to 5"),
    (torch.tensor([1, 2, 3]), r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 3\), got \(3,\)"),
    (torch.tensor([[1, 2], [3, 4]]), r"\(B, Q\)=\(2, 3\), got \(2, 2\)"),
])
def test_bad_valid_lens_raise_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        masked_softmax(torch.randn(2, 3, 4), bad)


@pytest.mark.parametrize("X, match", [
    (torch.randn(3, 4), r"3 dimensions \(B, Q, K\), got 2 with shape \(3, 4\)"),
    (torch.randn(1, 2, 3, 4), r"got 4 with shape \(1, 2, 3, 4\)"),
    (torch.ones(2, 2, 2, dtype=torch.long), "floating-point tensor, got dtype torch.int64"),
])
def test_bad_scores_raise_value_error(X, match):
    with pytest.raises(ValueError, match=match):
        masked_softmax(X, None)


def test_sequence_mask_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"\(B, T\) or \(B, T, \.\.\.\), got \(5,\)"):
        sequence_mask(torch.ones(5), torch.tensor([1]))


def test_mask_broadcasts_per_row_and_per_query():
    assert valid_lens_to_mask(torch.tensor([1, 2]), 2, 3, 4).shape == (2, 1, 4)
    assert valid_lens_to_mask(torch.ones(2, 3, dtype=torch.int32), 2, 3, 4).shape == (2, 3, 4)


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 3), Q=st.integers(1, 4), K=st.integers(1, 6),
    data=st.data(), scale=st.floats(0.01, 100.0),
)
def test_property_valid_part_sums_to_one_masked_part_zero(B, Q, K, data, scale):
    lens = data.draw(st.lists(st.lists(st.integers(0, K), min_size=Q, max_size=Q), min_size=B, max_size=B))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    X = torch.randn(B, Q, K, generator=g) * scale
    out = masked_softmax(X, torch.tensor(lens))
    for b in range(B):
        for q in range(Q):
            n = lens[b][q]
            assert torch.all(out[b, q, n:] == 0)
            assert torch.all(out[b, q, :n] >= 0)
            if n:
                assert abs(out[b, q, :n].sum().item() - 1) < 1e-5


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 3), Q=st.integers(1, 4), K=st.integers(1, 6), data=st.data(),
       shift=st.floats(-50.0, 50.0), dtype=st.sampled_from(FLOAT_DTYPES))
def test_property_shift_invariant_input_kept_dtype_kept(B, Q, K, data, shift, dtype):
    lens = torch.tensor(data.draw(st.lists(st.integers(0, K), min_size=B, max_size=B)))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    X = torch.randn(B, Q, K, generator=g).to(dtype)
    before = X.clone()
    out = masked_softmax(X, lens)
    assert out.dtype == dtype and torch.equal(X, before)
    # Adding the same constant to every score of a row changes nothing (softmax is shift-invariant).
    shifted = masked_softmax((X.double() + shift), lens)
    torch.testing.assert_close(masked_softmax(X.double(), lens), shifted, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mask, match", [
    (torch.ones(2, 3, 4), r"mask must be a boolean tensor \(True = takes part\), got torch.float32"),
    (torch.ones(3, 3, 4, dtype=torch.bool), r"mask must broadcast to scores' shape \(\.\.\., Q, K\) = \(2, 3, 4\), got \(3, 3, 4\)"),
])
def test_softmax_with_mask_rejects_bad_masks(mask, match):
    with pytest.raises(ValueError, match=match):
        softmax_with_mask(torch.randn(2, 3, 4), mask)


def test_softmax_with_mask_empty_rows_and_input_kept():
    X = torch.randn(2, 3, 4)
    mask = torch.tensor([[True, False, True, False], [False] * 4, [True] * 4])  # (Q, K)
    before = X.clone()
    out = softmax_with_mask(X, mask)
    assert torch.equal(X, before)
    assert (out[:, 1] == 0).all() and (out[:, :, 1][:, 0] == 0).all()
    expected = torch.exp(X[:, 0, [0, 2]]) / torch.exp(X[:, 0, [0, 2]]).sum(-1, keepdim=True)
    torch.testing.assert_close(out[:, 0, [0, 2]], expected)
    torch.testing.assert_close(out[:, 2], F.softmax(X[:, 2], -1))


def test_weights_are_fresh_tensors_under_inference_mode():
    # The helper may compute in buffers it made itself; never in the caller's tensor.
    X = torch.randn(2, 3, 4)
    before = X.clone()
    with torch.inference_mode():
        out = masked_softmax(X, torch.tensor([0, 3]))
    assert torch.equal(X, before) and out.data_ptr() != X.data_ptr()


# ----------------------------------------------------------------- defects pinned (fuzz)
def test_sequence_mask_errors_name_its_own_parameter_valid_len():
    """sequence_mask's parameter is ``valid_len``; its errors used to name ``valid_lens``."""
    for bad in ("x", None, torch.tensor([1.0, 2.0]), torch.tensor([True, False])):
        with pytest.raises(ValueError, match=r"^valid_len must"):
            sequence_mask(torch.ones(2, 3), bad)


@pytest.mark.parametrize("X, value", [(torch.ones(2, 3, dtype=torch.float16), 1e30),
                                      (torch.ones(2, 3, dtype=torch.int8), 300)])
def test_sequence_mask_refuses_a_value_its_dtype_cannot_hold(X, value):
    """Used to be PyTorch's raw 'value cannot be converted ... without overflow'."""
    with pytest.raises(ValueError, match=rf"value must be a number that X's dtype .* holds, got {re.escape(repr(value))}"):
        sequence_mask(X, [1, 2], value)
    assert torch.equal(sequence_mask(torch.zeros(2, 3), [1, 2], float("-inf")),
                       torch.tensor([[0.0, -math.inf, -math.inf], [0.0, 0.0, -math.inf]]))


@pytest.mark.parametrize("call", [
    lambda: sequence_mask(torch.ones(2, 3, device="meta"), [1, 2]),
    lambda: masked_softmax(torch.ones(2, 3, 4, device="meta"), [1, 2]),
    lambda: softmax_with_mask(torch.ones(3, 4, device="meta"), None),
    lambda: softmax_with_mask(torch.ones(3, 4), torch.ones(3, 4, dtype=torch.bool, device="meta")),
])
def test_meta_tensors_are_refused_clearly(call):
    """A 'meta' tensor holds no numbers: these used to raise PyTorch's raw RuntimeError."""
    with pytest.raises(ValueError, match=r"(must (hold numbers|be on a device that holds data|be on the device of the scores)).*got"):
        call()


@pytest.mark.parametrize("device", ["meta", torch.device("meta")] + (
    [] if torch.cuda.is_available() else ["cuda", "cuda:0"]))
def test_masks_refuse_a_device_that_cannot_hold_them(device):
    """valid_lens_to_mask and causal_mask used to return a 'meta' mask (or crash in
    Tensor.item()) and to raise a raw AssertionError for an absent CUDA device."""
    with pytest.raises(ValueError, match=r"^device must be the CPU or an accelerator present"):
        valid_lens_to_mask([1, 2], 2, 3, 4, device=device)
    with pytest.raises(ValueError, match=r"^device must be the CPU or an accelerator present"):
        causal_mask(3, 4, device=device)
