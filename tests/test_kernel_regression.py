"""Nadaraya-Watson kernel regression: the helpers against formulas written out here with loops."""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call

from helpers import (
    KERNELS, NWKernelRegression, RegressionData, make_regression_data, nadaraya_watson,
    target_function,
)

# K(u) written out per kernel, for plain Python floats.
KERNEL_FORMULAS = {
    "gaussian": lambda u: math.exp(-u * u / 2),
    "boxcar": lambda u: 1.0 if abs(u) <= 1 else 0.0,
    "constant": lambda u: 1.0,
    "epanechnikov": lambda u: max(1.0 - u * u, 0.0),
}


def loop_nw(x_train, y_train, x_query, kernel, bandwidth):
    """ŷ(x) = Σ_i K((x - x_i)/h) y_i / Σ_j K((x - x_j)/h), with Python loops; lists out."""
    K = KERNEL_FORMULAS[kernel]
    y_hat, weights = [], []
    for x in x_query.tolist():
        k = [K((x - xi) / bandwidth) for xi in x_train.tolist()]
        total = sum(k)
        row = [ki / total for ki in k]
        weights.append(row)
        y_hat.append(sum(r * yi for r, yi in zip(row, y_train.tolist())))
    return torch.tensor(y_hat, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)


def small_data(n_train=13, n_test=7, seed=3, dtype=torch.float64, device="cpu"):
    d = make_regression_data(n_train=n_train, n_test=n_test, seed=seed)
    return RegressionData(*(t.to(device=device, dtype=dtype) for t in
                            (d.x_train, d.y_train, d.x_test, d.y_truth)))


# ---------------------------------------------------------------- data
def test_target_function_matches_its_formula():
    for x in [0.0, 0.3, 1.7, 4.99]:
        expected = 2 * math.sin(x) + 0.4 * math.sin(3 * x) + 0.6 * math.sin(6 * x) + math.sqrt(x)
        assert target_function(torch.tensor(x, dtype=torch.float64)).item() == pytest.approx(expected)


def test_make_regression_data_is_deterministic_for_a_seed_and_differs_across_seeds():
    a, b, c = make_regression_data(seed=7), make_regression_data(seed=7), make_regression_data(seed=8)
    for name in ("x_train", "y_train", "x_test", "y_truth"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert not torch.equal(a.x_train, c.x_train)
    torch.manual_seed(123)  # the global generator plays no part
    assert torch.equal(make_regression_data(seed=7).y_train, a.y_train)


def test_make_regression_data_shapes_sorting_and_ranges():
    d = make_regression_data(n_train=31, n_test=17, width=3.0, noise=0.0, seed=1)
    assert d.x_train.shape == d.y_train.shape == (31,) and d.x_test.shape == d.y_truth.shape == (17,)
    assert torch.all(d.x_train[1:] >= d.x_train[:-1])
    assert d.x_train.min() >= 0 and d.x_train.max() < 3.0
    torch.testing.assert_close(d.x_test, torch.arange(17) * (3.0 / 17))
    torch.testing.assert_close(d.y_train, target_function(d.x_train))  # noise 0
    torch.testing.assert_close(d.y_truth, target_function(d.x_test))


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_train=0), "n_train must be a positive int, got 0"),
    (dict(n_test=0), "n_test must be a positive int, got 0"),
    (dict(n_train=2.5), "n_train must be a positive int, got 2.5"),
    (dict(width=0.0), "width must be a finite number > 0, got 0.0"),
    (dict(noise=-1.0), "noise must be a finite number >= 0, got -1.0"),
    (dict(width=float("nan")), "width must be a finite number > 0, got nan"),
    (dict(width=float("inf")), "width must be a finite number > 0, got inf"),
    (dict(noise=float("nan")), "noise must be a finite number >= 0, got nan"),
])
def test_make_regression_data_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_regression_data(**kwargs)


def test_target_function_rejects_negative_x():
    with pytest.raises(ValueError, match=r"x must be >= 0 \(sqrt\(x\) is part of f\), got a minimum of -1.0"):
        target_function(torch.tensor([0.5, -1.0]))


def test_regression_data_to_returns_a_moved_copy(device):
    d = make_regression_data(n_train=5, n_test=4)
    moved = d.to(device)
    assert isinstance(moved, RegressionData) and moved.x_train.device.type == device.type
    assert d.x_train.device.type == "cpu"
    torch.testing.assert_close(moved.y_train.cpu(), d.y_train)


# ---------------------------------------------------------------- nadaraya_watson
@pytest.mark.parametrize("kernel", sorted(KERNEL_FORMULAS))
@pytest.mark.parametrize("bandwidth", [0.4, 1.0, 2.5])
def test_nadaraya_watson_matches_the_written_out_formula(kernel, bandwidth, device):
    d = small_data(device=device)
    y_hat, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test, kernel=kernel, bandwidth=bandwidth)
    exp_y, exp_w = loop_nw(d.x_train.cpu(), d.y_train.cpu(), d.x_test.cpu(), kernel, bandwidth)
    assert weights.shape == (7, 13) and y_hat.shape == (7,)  # (Q, N), Q != N
    assert weights.device.type == device.type
    torch.testing.assert_close(weights.cpu(), exp_w)
    torch.testing.assert_close(y_hat.cpu(), exp_y)


def test_kernels_registry_holds_the_four_kernels_as_log_kernels():
    assert sorted(KERNELS) == ["boxcar", "constant", "epanechnikov", "gaussian"]
    u = torch.tensor([-1.5, -1.0, -0.3, 0.0, 0.7, 2.0], dtype=torch.float64)
    for name, K in KERNEL_FORMULAS.items():
        expected = torch.tensor([K(v) for v in u.tolist()], dtype=torch.float64)
        torch.testing.assert_close(torch.exp(KERNELS[name](u)), expected)


def test_gaussian_weights_are_the_softmax_of_minus_half_squared_distance():
    d = small_data()
    _, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test)
    diff = d.x_test[:, None] - d.x_train[None, :]
    torch.testing.assert_close(weights, torch.softmax(-diff**2 / 2, dim=1))


@pytest.mark.parametrize("kernel", sorted(KERNEL_FORMULAS))
def test_rows_sum_to_one_and_weights_are_non_negative(kernel):
    d = small_data(n_train=40, n_test=25)
    for bandwidth in (0.05, 0.3, 3.0):
        _, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test, kernel, bandwidth)
        assert torch.all(weights >= 0)
        torch.testing.assert_close(weights.sum(1), torch.ones(25, dtype=torch.float64))


@pytest.mark.parametrize("kernel", ["boxcar", "epanechnikov"])
def test_a_query_out_of_reach_of_a_compact_kernel_gets_its_nearest_point_not_nan(kernel):
    x_train = torch.tensor([0.0, 1.0, 5.0])
    y_train = torch.tensor([10.0, 20.0, 30.0])
    x_query = torch.tensor([0.1, 3.4, 2.6, 9.0])  # 3.4, 2.6 and 9.0 are farther than 0.2 from every key
    y_hat, weights = nadaraya_watson(x_train, y_train, x_query, kernel, bandwidth=0.2)
    assert not torch.isnan(weights).any() and not torch.isnan(y_hat).any()
    torch.testing.assert_close(y_hat, torch.tensor([10.0, 30.0, 20.0, 30.0]))
    torch.testing.assert_close(weights[1], torch.tensor([0.0, 0.0, 1.0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_shrinking_gaussian_bandwidth_tends_to_nearest_neighbour(dtype):
    d = small_data(n_train=30, n_test=11, seed=5, dtype=dtype)
    nearest = (d.x_test[:, None] - d.x_train[None, :]).abs().argmin(1)
    for bandwidth in (1e-4, 1e-30):  # the second underflows every score: the fallback kicks in
        y_hat, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=bandwidth)
        torch.testing.assert_close(y_hat, d.y_train[nearest])
        assert torch.equal(weights.argmax(1), nearest)
    errors = [(nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=b)[0]
               - d.y_train[nearest]).abs().max().item() for b in (1.0, 0.3, 0.1, 0.03)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0]


def test_constant_kernel_is_average_pooling():
    d = small_data()
    for bandwidth in (0.01, 1.0, 100.0):
        y_hat, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test, "constant", bandwidth)
        torch.testing.assert_close(y_hat, d.y_train.mean().expand(7))
        torch.testing.assert_close(weights, torch.full((7, 13), 1 / 13, dtype=torch.float64))


def test_a_very_wide_gaussian_tends_to_average_pooling():
    d = small_data()
    y_hat, _ = nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=1e4)
    torch.testing.assert_close(y_hat, d.y_train.mean().expand(7), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nadaraya_watson_keeps_the_dtype(dtype, device):
    d = small_data(dtype=dtype, device=device)
    y_hat, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=0.5)
    assert y_hat.dtype == weights.dtype == dtype
    exp_y, exp_w = loop_nw(d.x_train.cpu(), d.y_train.cpu(), d.x_test.cpu(), "gaussian", 0.5)
    torch.testing.assert_close(y_hat.cpu().double(), exp_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights.cpu().double(), exp_w, rtol=1e-5, atol=1e-5)


def test_nadaraya_watson_leaves_its_inputs_unchanged():
    d = small_data()
    copies = [t.clone() for t in (d.x_train, d.y_train, d.x_test)]
    for kernel in KERNELS:
        nadaraya_watson(d.x_train, d.y_train, d.x_test, kernel, 0.1)
    for before, after in zip(copies, (d.x_train, d.y_train, d.x_test)):
        assert torch.equal(before, after)


@pytest.mark.parametrize("args, kwargs, match", [
    ((torch.zeros(3, 1), torch.zeros(3), torch.zeros(2)), {}, "x_train must have 1 dimensions"),
    ((torch.zeros(3), torch.zeros(3, 1), torch.zeros(2)), {}, "y_train must have 1 dimensions"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(())), {}, "x_query must have 1 dimensions"),
    ((torch.zeros(3), torch.zeros(4), torch.zeros(2)), {}, "expected 3, got 4"),
    ((torch.zeros(0), torch.zeros(0), torch.zeros(2)), {}, "at least one point"),
    ((torch.arange(3), torch.zeros(3), torch.zeros(2)), {}, "floating-point"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(2)), dict(kernel="triangle"), "kernel must be one of"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(2)), dict(bandwidth=0.0), "bandwidth must be > 0"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(2)), dict(bandwidth=-1.0), "bandwidth must be > 0"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(2)), dict(bandwidth=float("nan")), "bandwidth"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(2)), dict(bandwidth="1"),
     r"bandwidth must be a positive number, got '1' \(str\)"),
    ([[0.0, 1.0], torch.zeros(2), torch.zeros(2)], {}, "must be a torch.Tensor"),
])
def test_nadaraya_watson_rejects_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        nadaraya_watson(*args, **kwargs)


# ---------------------------------------------------------------- NWKernelRegression
def loop_parametric(x_train, y_train, x_query, w, leave_one_out=False):
    """softmax_i(-((x - x_i) w_i)² / 2) · y with loops; ``w`` is a list of 1 or N floats."""
    out = []
    for q, x in enumerate(x_query.tolist()):
        scores = []
        for i, xi in enumerate(x_train.tolist()):
            wi = w[i] if len(w) > 1 else w[0]
            scores.append(None if (leave_one_out and i == q) else -((x - xi) * wi) ** 2 / 2)
        top = max(s for s in scores if s is not None)
        e = [0.0 if s is None else math.exp(s - top) for s in scores]
        out.append(sum(ei * yi for ei, yi in zip(e, y_train.tolist())) / sum(e))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("per_key", [False, True])
def test_parametric_forward_matches_the_written_out_formula(per_key, device):
    d = small_data(device=device)
    model = NWKernelRegression(d.x_train, d.y_train, per_key=per_key, init=1.0)
    with torch.no_grad():  # distinct w_i so that a per-key mix-up would show
        model.w.copy_(torch.linspace(0.5, 3.0, model.w.numel(), dtype=torch.float64))
    y_hat = model(d.x_test)
    expected = loop_parametric(d.x_train.cpu(), d.y_train.cpu(), d.x_test.cpu(), model.w.tolist())
    torch.testing.assert_close(y_hat.detach().cpu(), expected)
    assert model.attention_weights.shape == (7, 13)
    torch.testing.assert_close(model.attention_weights.sum(1).detach().cpu(),
                               torch.ones(7, dtype=torch.float64))


def test_scalar_w_equals_the_nonparametric_gaussian_with_bandwidth_one_over_w():
    d = small_data()
    model = NWKernelRegression(d.x_train, d.y_train, init=2.5)
    expected, weights = nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=1 / 2.5)
    torch.testing.assert_close(model(d.x_test).detach(), expected)
    torch.testing.assert_close(model.attention_weights.detach(), weights)


def test_w_shapes_scalar_vs_per_key():
    d = small_data()
    assert NWKernelRegression(d.x_train, d.y_train).w.shape == (1,)
    assert NWKernelRegression(d.x_train, d.y_train, per_key=True).w.shape == (13,)
    assert [n for n, _ in NWKernelRegression(d.x_train, d.y_train).named_parameters()] == ["w"]
    assert {n for n, _ in NWKernelRegression(d.x_train, d.y_train).named_buffers()} == {
        "x_train", "y_train"}


@pytest.mark.parametrize("per_key", [False, True])
def test_leave_one_out_has_a_zero_diagonal_and_matches_the_loop(per_key, device):
    d = small_data(device=device)
    model = NWKernelRegression(d.x_train, d.y_train, per_key=per_key, init=0.7)
    y_hat = model(d.x_train, leave_one_out=True)
    weights = model.attention_weights.detach().cpu()
    assert weights.shape == (13, 13)
    assert torch.all(torch.diagonal(weights) == 0)
    torch.testing.assert_close(weights.sum(1), torch.ones(13, dtype=torch.float64))
    expected = loop_parametric(d.x_train.cpu(), d.y_train.cpu(), d.x_train.cpu(), model.w.tolist(),
                               leave_one_out=True)
    torch.testing.assert_close(y_hat.detach().cpu(), expected)


def test_without_leave_one_out_a_large_w_copies_the_labels():
    d = small_data()
    model = NWKernelRegression(d.x_train, d.y_train, init=1e4)
    torch.testing.assert_close(model(d.x_train).detach(), d.y_train)  # the memorising solution
    loo = model(d.x_train, leave_one_out=True).detach()
    assert (loo - d.y_train).abs().max() > 0.1


@pytest.mark.parametrize("per_key", [False, True])
def test_gradient_flows_to_w_and_matches_finite_differences(per_key, device):
    d = small_data(device=device)
    model = NWKernelRegression(d.x_train, d.y_train, per_key=per_key, init=1.3)
    loss = ((model(d.x_train, leave_one_out=True) - d.y_train) ** 2).mean()
    loss.backward()
    assert model.w.grad is not None and model.w.grad.shape == model.w.shape
    assert torch.isfinite(model.w.grad).all() and model.w.grad.abs().sum() > 0

    def loo_loss(w):  # the model's own forward, with w as an input that gradcheck can vary
        y_hat = functional_call(model, {"w": w}, (d.x_train,), {"leave_one_out": True})
        return ((y_hat - d.y_train) ** 2).mean()

    w = model.w.detach().clone().requires_grad_()
    torch.testing.assert_close(torch.autograd.grad(loo_loss(w), w)[0], model.w.grad)
    assert torch.autograd.gradcheck(loo_loss, (w,))
    assert model.x_train.grad is None and not model.x_train.requires_grad


def test_a_few_adam_steps_lower_the_leave_one_out_loss():
    d = make_regression_data(n_train=60, seed=2)
    for per_key in (False, True):
        model = NWKernelRegression(d.x_train, d.y_train, per_key=per_key)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = ((model(d.x_train, leave_one_out=True) - d.y_train) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < 0.8 * losses[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_parametric_model_works_in_float32_and_float64(dtype, device):
    d = small_data(dtype=dtype, device=device)
    model = NWKernelRegression(d.x_train, d.y_train.double(), per_key=True)  # y cast to x's dtype
    assert model.w.dtype == model.y_train.dtype == dtype and model.w.device.type == device.type
    y_hat = model(d.x_test)
    assert y_hat.dtype == dtype and y_hat.device.type == device.type
    expected = loop_parametric(d.x_train.cpu(), d.y_train.cpu(), d.x_test.cpu(), model.w.tolist())
    torch.testing.assert_close(y_hat.detach().cpu().double(), expected, rtol=1e-5, atol=1e-5)


def test_parametric_model_copies_its_training_data_and_leaves_inputs_unchanged():
    d = small_data()
    x, y, q = d.x_train.clone(), d.y_train.clone(), d.x_test.clone()
    model = NWKernelRegression(d.x_train, d.y_train, per_key=True)
    model(d.x_test).sum().backward()
    assert torch.equal(x, d.x_train) and torch.equal(y, d.y_train) and torch.equal(q, d.x_test)
    d.x_train.add_(1.0)  # changing the caller's tensor afterwards does not reach the model
    assert torch.equal(model.x_train, x)


@pytest.mark.parametrize("make, match", [
    (lambda: NWKernelRegression(torch.zeros(3, 1), torch.zeros(3)), "x_train must have 1"),
    (lambda: NWKernelRegression(torch.zeros(3), torch.zeros(2)), "expected 3, got 2"),
    (lambda: NWKernelRegression(torch.arange(3), torch.zeros(3)), "floating-point"),
    (lambda: NWKernelRegression(torch.zeros(0), torch.zeros(0)), "at least one point"),
    (lambda: NWKernelRegression(torch.zeros(3), torch.zeros(3))(torch.zeros(2, 1)), "queries must have 1"),
    (lambda: NWKernelRegression(torch.zeros(3), torch.zeros(3))(torch.zeros(2), leave_one_out=True),
     "Q = N"),
    (lambda: NWKernelRegression(torch.zeros(1), torch.zeros(1))(torch.zeros(1), leave_one_out=True),
     "at least 2"),
])
def test_parametric_model_rejects_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("init", [float("nan"), float("inf"), float("-inf")])
def test_parametric_model_rejects_non_finite_init(init):
    d = small_data()
    with pytest.raises(ValueError, match=rf"init must be a finite number, got {init}"):
        NWKernelRegression(d.x_train, d.y_train, init=init)


def test_numpy_scalars_are_accepted_as_numbers():
    import numpy as np

    d = small_data()
    for bandwidth in (np.float32(0.5), np.float64(0.5)):
        torch.testing.assert_close(nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=bandwidth),
                                   nadaraya_watson(d.x_train, d.y_train, d.x_test, bandwidth=0.5))
    e = make_regression_data(n_train=np.int64(9), n_test=np.int64(4), width=np.float32(3.0),
                             noise=np.float64(0.0), seed=np.int64(1))
    f = make_regression_data(n_train=9, n_test=4, width=3.0, noise=0.0, seed=1)
    assert all(torch.equal(getattr(e, n), getattr(f, n)) for n in ("x_train", "y_train", "x_test"))
    model = NWKernelRegression(d.x_train, d.y_train, init=np.float32(2.5))
    assert model.w.item() == 2.5


# ----------------------------------------------------------------- defects pinned (fuzz)
@pytest.mark.parametrize("field", ["x_train", "y_train", "x_test", "y_truth"])
@pytest.mark.parametrize("bad, match", [
    (torch.arange(3), r"must be a floating-point tensor, got dtype torch.int64"),
    (torch.ones(3, dtype=torch.complex64), r"must be a floating-point tensor, got dtype torch.complex64"),
    (torch.ones(3, device="meta"), r"must (be on a device that holds data|be on x_train's device)"),
])
def test_regression_data_refuses_tensors_that_are_not_real_numbers(field, bad, match):
    """RegressionData used to hold integer, complex or 'meta' tensors silently."""
    fields = dict(x_train=torch.rand(3), y_train=torch.rand(3), x_test=torch.rand(3), y_truth=torch.rand(3))
    with pytest.raises(ValueError, match=rf"^{field} {match}"):
        RegressionData(**{**fields, field: bad})


@pytest.mark.parametrize("device", ["meta"] + ([] if torch.cuda.is_available() else ["cuda"]))
def test_regression_data_to_refuses_a_device_that_cannot_hold_it(device):
    """.to('meta') used to return empty shells, .to('cuda') without CUDA a raw AssertionError."""
    with pytest.raises(ValueError, match=r"^device must be the CPU or an accelerator present"):
        make_regression_data(5, 4).to(device)


@pytest.mark.parametrize("y_train", [torch.arange(4), torch.ones(4, dtype=torch.bool),
                                     torch.ones(4, dtype=torch.complex64)])
def test_labels_must_be_floating_point(y_train):
    """nadaraya_watson and NWKernelRegression used to cast any y_train, dropping the imaginary
    part of a complex one with a mere warning."""
    with pytest.raises(ValueError, match=r"^y_train must be a floating-point tensor, got dtype"):
        nadaraya_watson(torch.rand(4), y_train, torch.rand(2))
    with pytest.raises(ValueError, match=r"^y_train must be a floating-point tensor, got dtype"):
        NWKernelRegression(torch.rand(4), y_train)


def test_parametric_model_refuses_meta_training_data():
    """Used to build a model whose buffers and w live on 'meta' (it computes nothing)."""
    with pytest.raises(ValueError, match=r"^x_train must be on a device that holds data, got meta"):
        NWKernelRegression(torch.rand(4, device="meta"), torch.rand(4, device="meta"))
    with pytest.raises(ValueError, match=r"^y_train must be on x_train's device \(cpu\), got meta"):
        NWKernelRegression(torch.rand(4), torch.rand(4, device="meta"))
    with pytest.raises(ValueError, match=r"^x must be on a device that holds data, got meta"):
        target_function(torch.rand(4, device="meta"))
