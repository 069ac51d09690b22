"""Sinusoidal positional encoding (位置编码).

Legend: B batch, T sequence length (positions), N num_hiddens (encoding size).
P[i, 2j] = sin(i / 10000^(2j/N)),  P[i, 2j+1] = cos(i / 10000^(2j/N)).
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_floating, check_positive_int, check_probability, check_rank, check_size

__all__ = ["PositionalEncoding", "sinusoidal_table"]


def sinusoidal_table(max_len: int, num_hiddens: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The table P (max_len, num_hiddens) in ``dtype`` (a floating-point dtype); an odd
    ``num_hiddens`` ends with a sine column."""
    max_len = check_positive_int("max_len", max_len)
    num_hiddens = check_positive_int("num_hiddens", num_hiddens)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    i = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    two_j = torch.arange(0, num_hiddens, 2, dtype=torch.float64)  # (ceil(N/2),)
    angles = i / torch.pow(10000.0, two_j / num_hiddens)  # (T, ceil(N/2))
    P = torch.empty(max_len, num_hiddens, dtype=torch.float64)
    P[:, 0::2] = torch.sin(angles)
    P[:, 1::2] = torch.cos(angles[:, : num_hiddens // 2])
    return P.to(dtype)


class PositionalEncoding(nn.Module):
    """Add the sinusoidal table to X (B, T, N), then dropout. ``P`` is (1, max_len, N).

    ``P`` is a non-persistent buffer: it follows ``.to(device)`` and is not saved in state_dict.
    """

    def __init__(self, num_hiddens: int, dropout: float = 0.0, max_len: int = 1000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.register_buffer("P", sinusoidal_table(max_len, num_hiddens)[None], persistent=False)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        check_rank("X", X, 3, "(B, T, N)")
        check_floating("X", X)  # an integer X + P would be cast back, truncating P
        if X.device != self.P.device:
            raise ValueError(f"X must be on the module's device ({self.P.device}), got {X.device}")
        check_size("feature size of X (num_hiddens)", self.P.shape[-1], X.shape[-1])
        if X.shape[1] > self.P.shape[1]:
            raise ValueError(f"sequence length T must be at most max_len={self.P.shape[1]}, got {X.shape[1]}")
        return self.dropout(X + self.P[:, : X.shape[1]].to(X.dtype))  # (B, T, N)
