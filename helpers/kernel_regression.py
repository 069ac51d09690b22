"""Nadaraya-Watson kernel regression (Nadaraya-Watson 核回归): attention pooling with a kernel.

Legend: N training pairs (keys x_i, values y_i), Q queries. Weights are laid out (Q, N), like
every attention map in this series, and each row sums to 1.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    as_usable_device, check_bool, check_floating, check_holds_data, check_positive_int, check_rank,
    check_real, check_seed, check_size,
)

__all__ = [
    "KERNELS", "RegressionData", "target_function", "make_regression_data",
    "nadaraya_watson", "NWKernelRegression",
]


def target_function(x: torch.Tensor) -> torch.Tensor:
    """f(x) = 2 sin x + 0.4 sin 3x + 0.6 sin 6x + sqrt(x), for x >= 0."""
    check_floating("x", x)
    check_holds_data("x", x)
    if x.numel() and float(x.min()) < 0:
        raise ValueError(f"x must be >= 0 (sqrt(x) is part of f), got a minimum of {float(x.min())}")
    return 2 * torch.sin(x) + 0.4 * torch.sin(3 * x) + 0.6 * torch.sin(6 * x) + x.sqrt()


@dataclass(frozen=True)
class RegressionData:
    """Sorted noisy training pairs and a noiseless test grid: 1-D floating-point tensors on
    one device."""

    x_train: torch.Tensor  # (N,)
    y_train: torch.Tensor  # (N,)
    x_test: torch.Tensor  # (Q,)
    y_truth: torch.Tensor  # (Q,)

    def __post_init__(self) -> None:
        for name in ("x_train", "y_train", "x_test", "y_truth"):
            check_rank(name, getattr(self, name), 1, "(N,)" if "train" in name else "(Q,)")
            check_floating(name, getattr(self, name))
            check_holds_data(name, getattr(self, name))
            if getattr(self, name).device != self.x_train.device:
                raise ValueError(f"{name} must be on x_train's device ({self.x_train.device}), "
                                 f"got {getattr(self, name).device}")
        check_size("number of training values y_train (N)", self.x_train.shape[0], self.y_train.shape[0])
        check_size("number of true values y_truth (Q)", self.x_test.shape[0], self.y_truth.shape[0])

    def to(self, device: torch.device | str) -> RegressionData:
        """The same data with every tensor on ``device`` (a new object; this one is unchanged)."""
        device = as_usable_device("device", device)
        if device is None:
            raise ValueError("device must be a torch.device or a name such as 'cpu', got None")
        return RegressionData(*(t.to(device) for t in (self.x_train, self.y_train,
                                                        self.x_test, self.y_truth)))


def make_regression_data(
    n_train: int = 50, n_test: int = 50, width: float = 5.0, noise: float = 0.5, seed: int = 0,
) -> RegressionData:
    """x_train ~ U(0, width) sorted, y = f(x) + N(0, noise²); x_test evenly spaced on [0, width).

    Uses its own generator seeded with ``seed``: the same arguments give the same data.
    ``width`` > 0 and ``noise`` >= 0 are finite numbers.
    """
    n_train = check_positive_int("n_train", n_train)
    n_test = check_positive_int("n_test", n_test)
    width = check_real("width", width, above=0)
    noise = check_real("noise", noise, at_least=0)
    seed = check_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x_train = torch.sort(torch.rand(n_train, generator=g) * width).values
    y_train = target_function(x_train) + noise * torch.randn(n_train, generator=g)
    x_test = torch.arange(n_test) * (width / n_test)
    return RegressionData(x_train, y_train, x_test, target_function(x_test))


def _gaussian(u: torch.Tensor) -> torch.Tensor:
    return -(u**2) / 2  # a log-kernel: softmax turns it into exp(-u²/2) / Σ


def _log(kernel: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda u: torch.log(kernel(u))


# Each entry maps u = (x_query - x_i) / bandwidth to log K(u), so that a softmax over the keys
# gives K(u_i) / Σ_j K(u_j) without underflow for the Gaussian.
KERNELS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gaussian": _gaussian,
    "boxcar": _log(lambda u: (u.abs() <= 1).to(u.dtype)),
    "constant": _log(lambda u: torch.ones_like(u)),
    "epanechnikov": _log(lambda u: (1 - u**2).clamp(min=0)),
}


def nadaraya_watson(
    x_train: torch.Tensor, y_train: torch.Tensor, x_query: torch.Tensor,
    kernel: str = "gaussian", bandwidth: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ŷ(x) = Σ_i K((x - x_i)/h) y_i / Σ_j K((x - x_j)/h).

    x_train (N,), y_train (N,), x_query (Q,) → (y_hat (Q,), weights (Q, N)), rows summing to 1.
    Kernels: see ``KERNELS``. A query that a compact kernel reaches no training point from gets
    all its weight on its nearest training point (the limit of a shrinking Gaussian), not NaN.
    """
    check_rank("x_train", x_train, 1, "(N,)")
    check_rank("y_train", y_train, 1, "(N,)")
    check_rank("x_query", x_query, 1, "(Q,)")
    check_floating("x_train", x_train)
    check_floating("y_train", y_train)
    check_floating("x_query", x_query)
    for name, t in (("y_train", y_train), ("x_query", x_query)):
        if t.device != x_train.device:
            raise ValueError(f"{name} must be on x_train's device ({x_train.device}), got {t.device}")
    check_size("number of training values y_train (N)", x_train.shape[0], y_train.shape[0])
    if x_train.shape[0] == 0:
        raise ValueError("x_train must hold at least one point, got shape (0,)")
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    number = isinstance(bandwidth, numbers.Real) and not isinstance(bandwidth, bool)
    scalar = isinstance(bandwidth, torch.Tensor) and bandwidth.dim() == 0 and not (
        bandwidth.dtype == torch.bool or bandwidth.is_complex())
    if not (number or scalar):
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r} "
                         f"({type(bandwidth).__name__})")
    if not (bandwidth > 0 and math.isfinite(bandwidth)):  # NaN fails the first test
        raise ValueError(f"bandwidth must be > 0 and finite, got {bandwidth}")
    diff = x_query[:, None] - x_train[None, :]  # (Q, N)
    log_k = KERNELS[kernel](diff / bandwidth)  # (Q, N)
    unreached = torch.isinf(log_k).all(dim=1, keepdim=True)  # (Q, 1): no key inside the kernel
    nearest = F.one_hot(diff.abs().argmin(dim=1), x_train.shape[0]).bool()  # (Q, N)
    log_nearest = torch.zeros_like(log_k).masked_fill(~nearest, float("-inf"))
    scores = torch.where(unreached, log_nearest, log_k)
    weights = F.softmax(scores, dim=1)  # (Q, N)
    return weights @ y_train.to(weights.dtype), weights


class NWKernelRegression(nn.Module):
    """Trainable Gaussian Nadaraya-Watson: weights softmax(-((x - x_i) w)² / 2).

    ``per_key=False``: one scalar ``w`` (the textbook); ``per_key=True``: one ``w_i`` per
    training key (the variant of the study notes). The training pairs are buffers (y_train is
    stored in x_train's dtype); ``w`` is created on x_train's device.
    ``forward(queries (Q,), leave_one_out=False)`` → ŷ (Q,); the weights of the last call are
    kept in ``attention_weights`` (Q, N). ``leave_one_out`` (queries are the training inputs,
    Q = N) hides each point from itself, so training cannot win by copying its own label.
    """

    def __init__(self, x_train: torch.Tensor, y_train: torch.Tensor, per_key: bool = False,
                 init: float = 1.0) -> None:
        super().__init__()
        check_rank("x_train", x_train, 1, "(N,)")
        check_rank("y_train", y_train, 1, "(N,)")
        check_floating("x_train", x_train)
        check_holds_data("x_train", x_train)
        check_floating("y_train", y_train)
        if y_train.device != x_train.device:
            raise ValueError(f"y_train must be on x_train's device ({x_train.device}), "
                             f"got {y_train.device}")
        check_size("number of training values y_train (N)", x_train.shape[0], y_train.shape[0])
        if x_train.shape[0] == 0:
            raise ValueError("x_train must hold at least one point, got shape (0,)")
        check_bool("per_key", per_key)
        init = check_real("init", init)
        self.register_buffer("x_train", x_train.detach().clone())
        self.register_buffer("y_train", y_train.detach().to(x_train.dtype).clone())
        shape = (x_train.shape[0],) if per_key else (1,)
        self.w = nn.Parameter(
            torch.full(shape, float(init), dtype=x_train.dtype, device=x_train.device))
        self.attention_weights: torch.Tensor | None = None

    def forward(self, queries: torch.Tensor, leave_one_out: bool = False) -> torch.Tensor:
        check_rank("queries", queries, 1, "(Q,)")
        check_floating("queries", queries)
        if queries.device != self.x_train.device:
            raise ValueError(f"queries must be on the model's device ({self.x_train.device}), "
                             f"got {queries.device}")
        check_bool("leave_one_out", leave_one_out)
        diff = queries[:, None] - self.x_train[None, :]  # (Q, N)
        scores = -((diff * self.w) ** 2) / 2  # (Q, N); w broadcasts over keys
        if leave_one_out:
            check_size("leave_one_out needs one query per training point (Q = N)",
                       self.x_train.shape[0], queries.shape[0])
            if queries.shape[0] < 2:
                raise ValueError("leave_one_out needs at least 2 training points, got 1")
            eye = torch.eye(queries.shape[0], dtype=torch.bool, device=queries.device)
            scores = scores.masked_fill(eye, torch.finfo(scores.dtype).min)
        self.attention_weights = F.softmax(scores, dim=1)  # (Q, N)
        return self.attention_weights @ self.y_train.to(self.attention_weights.dtype)  # (Q,)
