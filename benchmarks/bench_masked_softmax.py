"""``helpers.masked_softmax`` against the textbook version (seed note 002) across sizes.

Legend: B batch, Q queries, K keys. Target: the helper is never slower (ratio ≤ 1.00×).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from helpers import masked_softmax

from .common import Col, Config, Table, compare, verdict

__all__ = ["textbook_masked_softmax", "SoftmaxCase", "DEFAULT_CASES", "QUICK_CASES", "run"]

TARGET = 1.0


def _textbook_sequence_mask(X: torch.Tensor, valid_len: torch.Tensor, value: float = 0) -> torch.Tensor:
    """The seed note's ``sequence_mask``: writes ``value`` into ``X`` in place (its known defect)."""
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def textbook_masked_softmax(X: torch.Tensor, valid_lens: torch.Tensor | None) -> torch.Tensor:
    """The seed note's ``masked_softmax``, as written there: repeat_interleave, -1e6, in place.

    Kept only as the benchmark's reference. It modifies ``X`` (through a view), gives a uniform
    row for a valid length of 0, and its -1e6 is not "minus infinity" in every dtype.
    """
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = _textbook_sequence_mask(X.view(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.view(shape), dim=-1)


@dataclass(frozen=True)
class SoftmaxCase:
    B: int
    Q: int
    K: int
    lens: str  # "none", "(B,)" or "(B, Q)"

    @property
    def label(self) -> str:
        return f"{self.B}×{self.Q}×{self.K}"


_SIZES = ((2, 2, 4), (2, 10, 10), (64, 128, 128), (64, 512, 512), (64, 1024, 1024))
DEFAULT_CASES = tuple(SoftmaxCase(B, Q, K, lens) for B, Q, K in _SIZES
                      for lens in ("none", "(B,)", "(B, Q)"))
QUICK_CASES = tuple(SoftmaxCase(B, Q, K, lens) for B, Q, K in ((2, 2, 4), (4, 16, 32))
                    for lens in ("none", "(B,)", "(B, Q)"))


def _plan(case: SoftmaxCase, quick: bool) -> dict[str, float]:
    n = case.B * case.Q * case.K
    if quick:
        return dict(repeats=5, warmup=1, min_sample_s=0.0)
    if n <= 1e5:  # microseconds a call: one call a sample (a longer sample is more likely
        return dict(repeats=101, warmup=5, min_sample_s=0.0)  # to catch a stall), many samples
    if n <= 1e7:
        return dict(repeats=9, warmup=1, min_sample_s=0.01)
    return dict(repeats=5, warmup=1, min_sample_s=0.0)


def _inputs(case: SoftmaxCase, device: torch.device, dtype: torch.dtype):
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(case.B, case.Q, case.K, generator=gen).to(device, dtype)
    shape = {"none": None, "(B,)": (case.B,), "(B, Q)": (case.B, case.Q)}[case.lens]
    # Lengths from 1 to K: a 0 would make the textbook's row uniform and the two disagree.
    lens = None if shape is None else torch.randint(1, case.K + 1, shape, generator=gen).to(device)
    return X, lens


def bench_case(case: SoftmaxCase, cfg: Config, dtype: torch.dtype, table: Table) -> dict[str, object]:
    """Time one case, check the two versions agree, add and return the row."""
    X, lens = _inputs(case, cfg.device, dtype)
    X_textbook = X.clone()  # the textbook writes into its input: give it its own copy
    outputs: dict[str, torch.Tensor] = {}
    stats = compare(
        {"helper": lambda: masked_softmax(X, lens),
         "textbook": lambda: textbook_masked_softmax(X_textbook, lens)},
        sync=cfg.sync, outputs=outputs, **_plan(case, cfg.quick),
    )
    tol = 1e-5 if dtype in (torch.float32, torch.float64) else 1e-2  # bf16: 8-bit mantissa
    agree = torch.allclose(outputs["helper"].float(), outputs["textbook"].float(), atol=tol, rtol=tol)
    ratio = stats["helper"].median / stats["textbook"].median
    return table.add(size=case.label, lens=case.lens, helper=stats["helper"].median,
                     textbook=stats["textbook"].median, ratio=ratio,
                     agree="yes" if agree else "NO", status=verdict(ratio, TARGET))


def run(cfg: Config, cases: tuple[SoftmaxCase, ...] | None = None, *, echo: bool = True) -> list[Table]:
    cases = cases or (QUICK_CASES if cfg.quick else DEFAULT_CASES)
    tables = []
    for dtype in cfg.dtypes:
        table = Table(
            f"masked_softmax vs textbook ({cfg.device.type}, {str(dtype).removeprefix('torch.')})",
            [Col("size", "B×Q×K", width=14), Col("lens", "valid_lens", width=10),
             Col("helper", "helper", "time"), Col("textbook", "textbook", "time"),
             Col("ratio", "ratio", "ratio", width=6), Col("agree", "agree", width=5),
             Col("status", "target ≤1.00×", width=13)],
            short=f"masked_softmax ({cfg.device.type}, {str(dtype).removeprefix('torch.')})", echo=echo,
        )
        with torch.inference_mode():
            for case in cases:
                bench_case(case, cfg, dtype, table)
        table.note("ratio = helper ÷ textbook (median); textbook = repeat_interleave + in-place "
                   "index assignment of -1e6 (seed note 002), given its own copy of X.")
        table.note("valid_lens none: both run the same F.softmax, so at the large sizes their "
                   "ratio's distance from 1.00× is the measurement noise; at the tiny sizes it "
                   "is the helper's input checks (a few µs).")
        tables.append(table)
    return tables
