"""The attention sink (注意力汇点) as a softmax with one extra logit per row ("softmax plus one"):
a query may put part of its weight on *nothing*. gpt-oss learns one such logit per head;
StreamingLLM (Xiao et al. 2023) found models making a sink of their first tokens instead.

Legend: Q queries, K keys, ... any leading dims (e.g. B batch, H heads).
Mask convention: boolean ``mask``, ``True`` = takes part (as ``F.scaled_dot_product_attention``).
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from .checks import broadcast_shape, check_floating, check_holds_data, check_mask

__all__ = ["sink_softmax"]


def sink_softmax(
    scores: torch.Tensor, sink: torch.Tensor | float, mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """w_j = exp(s_j) / (exp(sink) + Σ_i exp(s_i)), the sum over the visible keys i of a row.

    ``scores`` (..., Q, K) floating; ``sink`` a floating tensor that broadcasts to (..., Q, 1)
    (e.g. (H, 1, 1): one learnt logit per head) or a real number; ``mask`` None or boolean,
    broadcasting to (..., Q, K), ``True`` = takes part. Returns new weights (..., Q, K) in
    scores' dtype: a row sums to 1 − exp(sink)/denominator < 1 (the rest goes to nothing),
    masked entries are exactly 0, and a row with no visible key is all zeros, with finite
    gradients. sink = −inf gives the plain masked softmax. A NaN in a visible score of a row, or
    a NaN sink for it, makes that whole row NaN (a NaN hidden by ``mask`` changes nothing). Stable: the row's largest visible
    score or the sink, whichever is larger, is subtracted before ``exp``. float16 / bfloat16
    are computed in float32. The inputs are never modified.
    """
    if not isinstance(scores, torch.Tensor) or scores.dim() < 1:
        raise ValueError(f"scores must be a tensor of shape (..., Q, K), got {scores!r:.60}")
    check_floating("scores", scores)
    check_holds_data("scores", scores)
    work = torch.promote_types(scores.dtype, torch.float32)  # half precision: float32 inside
    rows = (*scores.shape[:-1], 1)  # (..., Q, 1)
    if isinstance(sink, torch.Tensor):
        if not sink.is_floating_point():
            raise ValueError(f"sink must be a floating-point tensor or a real number, "
                             f"got dtype {sink.dtype}")
        if sink.device != scores.device:
            raise ValueError(f"sink must be on the device of scores ({scores.device}), "
                             f"got {sink.device}")
        if broadcast_shape(sink.shape, rows) != rows:
            raise ValueError(f"sink must broadcast to scores' rows (..., Q, 1) = {rows} (one "
                             f"logit per head: (H, 1, 1)), got shape {tuple(sink.shape)}")
    elif not isinstance(sink, numbers.Real) or isinstance(sink, (bool, np.bool_)) or sink != sink:
        raise ValueError(f"sink must be a floating-point tensor or a real number (not NaN), "
                         f"got {sink!r:.60}")
    b = torch.as_tensor(sink, dtype=work, device=scores.device).expand(rows)  # (..., Q, 1)
    s = scores.to(work)  # (..., Q, K); scores itself when already work: never written into
    if mask is not None:
        check_mask("mask", mask, scores.shape, "scores' shape (..., Q, K)", scores.device)
        s = s.masked_fill(~mask, -torch.inf)  # new tensor; exp(−inf − m) = 0 exactly
    m = torch.cat([s, b], dim=-1).amax(dim=-1, keepdim=True).detach()  # (..., Q, 1): the shift
    m = torch.where(torch.isinf(m), 0.0, m)  # nothing visible and sink −inf: no shift (a NaN
    # visible score or sink stays NaN, so that the whole row is NaN)
    e = torch.exp(s - m)  # (..., Q, K)
    total = e.sum(dim=-1, keepdim=True) + torch.exp(b - m)  # (..., Q, 1): the denominator
    weights = e / torch.where(total == 0, 1.0, total)  # a row of zeros stays zeros, not NaN
    return weights.to(scores.dtype)  # (..., Q, K)
