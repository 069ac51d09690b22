"""sink_softmax against its formula written out, and against torch.softmax over the scores with
one more column holding the sink (then dropped)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from helpers import sink_softmax, softmax_with_mask
from tests.conftest import FLOAT_DTYPES, TOL


def by_formula(scores: torch.Tensor, sink, mask=None) -> torch.Tensor:
    """w_j = exp(s_j) / (exp(sink) + Σ_{i visible} exp(s_i)), one row at a time, float64, with
    Python's math.exp (rows small enough not to overflow)."""
    s = scores.double()
    b = torch.as_tensor(sink, dtype=torch.float64).expand(*s.shape[:-1], 1)  # (..., Q, 1)
    take = torch.ones(s.shape, dtype=torch.bool) if mask is None else mask.expand(s.shape)
    out = torch.zeros_like(s)
    for index in itertools.product(*(range(n) for n in s.shape[:-1])):
        visible = [j for j in range(s.shape[-1]) if take[index][j]]
        denominator = math.exp(b[index][0]) + sum(math.exp(s[index][j]) for j in visible)
        for j in visible:
            out[index][j] = math.exp(s[index][j]) / denominator
    return out


def by_extra_column(scores: torch.Tensor, sink, mask=None) -> torch.Tensor:
    """torch.softmax over [scores, sink] (masked entries −inf), the sink's column dropped."""
    s = scores.double()
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    b = torch.as_tensor(sink, dtype=torch.float64).expand(*s.shape[:-1], 1)  # (..., Q, 1)
    return torch.softmax(torch.cat([s, b], dim=-1), dim=-1)[..., :-1]  # (..., Q, K)


def test_equals_the_formula_and_the_extra_column():
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 4, 5, dtype=torch.float64)  # (B, H, Q, K)
    sink = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)[:, None, None]  # (H, 1, 1)
    mask = torch.rand(2, 1, 4, 5) > 0.3  # (B, 1, Q, K)
    mask[0, 0, 1] = False  # a row with nothing visible
    for m in (None, mask):
        got = sink_softmax(scores, sink, m)
        torch.testing.assert_close(got, by_formula(scores, sink, m))
        torch.testing.assert_close(got, by_extra_column(scores, sink, m))
    sums = sink_softmax(scores, sink).sum(-1)  # (B, H, Q)
    expected = 1 - torch.exp(sink[..., 0]) / (torch.exp(sink[..., 0]) + scores.exp().sum(-1))
    torch.testing.assert_close(sums, expected)
    assert bool((sums < 1).all())


@pytest.mark.parametrize("sink", [0.0, 3, -2.5, torch.tensor(1.5)])
def test_a_number_or_a_0_d_tensor_is_one_sink_for_every_row(sink):
    scores = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(sink_softmax(scores, sink), by_formula(scores, float(sink)))


def test_large_scores_stay_finite():
    """Subtracting the larger of the row's maximum and the sink keeps exp from overflowing."""
    scores = torch.tensor([[1000.0, 999.0, -1000.0], [0.0, 1.0, 2.0]])
    for sink in (torch.tensor([[1001.0], [-1000.0]]), torch.tensor([[0.0], [800.0]])):
        got = sink_softmax(scores, sink)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, by_extra_column(scores, sink).float())


def test_minus_infinite_sink_is_the_masked_softmax():
    torch.manual_seed(1)
    scores = torch.randn(2, 4, 6)
    mask = torch.rand(4, 6) > 0.4
    mask[2] = False  # an empty row: zeros in both
    for m in (None, mask):
        torch.testing.assert_close(sink_softmax(scores, -math.inf, m), softmax_with_mask(scores, m))
        torch.testing.assert_close(sink_softmax(scores, torch.tensor(-1e4), m), softmax_with_mask(scores, m))


def test_masked_entries_are_exactly_zero_and_an_empty_row_is_zero_with_finite_gradients():
    scores = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    sink = torch.tensor([[0.3], [-0.7], [1.1]], dtype=torch.float64, requires_grad=True)  # (Q, 1)
    mask = torch.tensor([[True, False, True, False], [False] * 4, [True] * 4])  # (Q, K)
    for s in (sink, -math.inf):
        w = sink_softmax(scores, s, mask)
        assert bool((w[:, ~mask] == 0).all()) and bool((w[:, 1] == 0).all())
        assert not w.isnan().any()
    w = sink_softmax(scores, sink, mask)
    (w * torch.randn_like(w)).sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.isfinite(sink.grad).all()
    assert bool((scores.grad[:, ~mask] == 0).all())
    assert sink.grad[1] == 0  # nothing visible: the sink takes everything whatever its value
    assert torch.autograd.gradcheck(lambda a, b: sink_softmax(a, b, mask), (scores, sink))
    minus_inf = lambda a: sink_softmax(a, -math.inf, mask)  # noqa: E731  empty row and no sink
    assert torch.autograd.gradcheck(minus_inf, (scores,))
    scores.grad = None
    minus_inf(scores).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_sink_gradient_is_the_formula():
    """∂(Σ_j w_j)/∂sink = −(1 − Σ_j w_j) · Σ_j w_j: the weight that goes to nothing grows."""
    scores = torch.randn(1, 5, dtype=torch.float64)
    sink = torch.tensor([[0.4]], dtype=torch.float64, requires_grad=True)
    total = sink_softmax(scores, sink).sum()
    total.backward()
    torch.testing.assert_close(sink.grad[0, 0], -(1 - total.detach()) * total.detach())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_every_dtype_every_device(device, dtype):
    torch.manual_seed(2)
    scores = (torch.randn(2, 3, 5) * 3).to(device=device, dtype=dtype)
    sink = torch.tensor([0.5, -1.0, 2.0])[:, None].to(device=device, dtype=dtype)  # (Q, 1)
    mask = (torch.rand(3, 5) > 0.3).to(device)
    before, sink_before, mask_before = scores.clone(), sink.clone(), mask.clone()
    got = sink_softmax(scores, sink, mask)
    assert got.dtype == dtype and got.device == scores.device
    tol = dict(rtol=2e-2, atol=2e-3) if dtype in (torch.float16, torch.bfloat16) else TOL[dtype]
    torch.testing.assert_close(got.cpu().double(), by_formula(scores.cpu(), sink.cpu(), mask.cpu()), **tol)
    assert torch.equal(scores, before) and torch.equal(sink, sink_before) and torch.equal(mask, mask_before)


def test_shapes_broadcast_and_empty_sizes_work():
    scores = torch.randn(2, 3, 4, 5)  # (B, H, Q, K)
    assert sink_softmax(scores, torch.zeros(3, 1, 1)).shape == (2, 3, 4, 5)
    assert sink_softmax(scores, torch.zeros(2, 3, 4, 1)).shape == (2, 3, 4, 5)
    assert sink_softmax(torch.randn(5), 0.0).shape == (5,)  # one row
    assert sink_softmax(torch.randn(2, 3, 0), 0.0).shape == (2, 3, 0)  # no key
    assert sink_softmax(torch.randn(0, 3, 4), torch.zeros(3, 1)).shape == (0, 3, 4)


@pytest.mark.parametrize("kwargs, match", [
    (dict(scores=torch.zeros(2, 3, dtype=torch.long)), r"^scores must be a floating-point tensor, got dtype torch.int64"),
    (dict(scores=torch.tensor(1.0)), r"^scores must be a tensor of shape \(..., Q, K\)"),
    (dict(scores=[[1.0, 2.0]]), r"^scores must be a tensor of shape \(..., Q, K\)"),
    (dict(scores=torch.zeros(2, 3, device="meta")), r"^scores must be on a device that holds data"),
    (dict(sink=torch.zeros(3)), r"^sink must broadcast to scores' rows \(..., Q, 1\) = \(2, 1\) .* got shape \(3,\)"),
    (dict(sink=torch.zeros(2, 3)), r"^sink must broadcast to scores' rows"),
    (dict(sink=torch.zeros(1, dtype=torch.long)), r"^sink must be a floating-point tensor or a real number, got dtype torch.int64"),
    (dict(sink=True), r"^sink must be a floating-point tensor or a real number \(not NaN\), got True"),
    (dict(sink=math.nan), r"^sink must be .* got nan"),
    (dict(sink="0"), r"^sink must be .* got '0'"),
    (dict(sink=None), r"^sink must be .* got None"),
    (dict(sink=torch.zeros(1, device="meta")), r"^sink must be on the device of scores \(cpu\), got meta"),
    (dict(mask=torch.ones(2, 3)), r"^mask must be a boolean tensor \(True = takes part\), got torch.float32"),
    (dict(mask=torch.ones(2, 4, dtype=torch.bool)), r"^mask must broadcast to scores' shape"),
    (dict(mask=[[True, False, True]]), r"^mask must be a boolean tensor"),
])
def test_bad_input_is_named(kwargs, match):
    call = dict(scores=torch.randn(2, 3), sink=0.0, mask=None) | kwargs
    with pytest.raises(ValueError, match=match):
        sink_softmax(**call)


@pytest.mark.parametrize("need", ["sink-tensor", "sink-per-row", "visible-score"])
def test_nan_propagates_to_its_row(need):
    """A NaN sink (the tensor, or one row's entry of per-row logits) or a NaN in a visible score
    makes that whole row NaN, as torch.softmax over [scores, sink] does; the other rows stay
    the formula; a NaN hidden by the mask changes nothing. (Before, the shift m = NaN was reset to
    0 and the zero-row guard swapped the NaN denominator for 1: the row came out as exp(scores).)"""
    g = torch.Generator().manual_seed(4)
    scores = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    sink = torch.zeros(3, 1, dtype=torch.float64)
    bad_rows = torch.zeros(2, 3, dtype=torch.bool)
    if need == "sink-tensor":
        sink = torch.tensor(math.nan, dtype=torch.float64)
        bad_rows[:] = True
    elif need == "sink-per-row":
        sink[1] = math.nan
        bad_rows[:, 1] = True
    else:
        scores[0, 2, 1] = math.nan
        bad_rows[0, 2] = True
    for mask in (None, torch.tensor([True, True, False, True])):
        w = sink_softmax(scores, sink, mask)
        assert bool(w[bad_rows].isnan().all())
        torch.testing.assert_close(w[~bad_rows], by_extra_column(scores, sink, mask)[~bad_rows])
    clean = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    hidden = clean.clone()
    hidden[:, :, 2] = math.nan  # hidden by the mask: nothing changes
    mask = torch.tensor([True, True, False, True])
    torch.testing.assert_close(sink_softmax(hidden, 0.0, mask), by_extra_column(clean, 0.0, mask))
