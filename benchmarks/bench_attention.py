"""``DotProductAttention`` and ``MultiHeadAttention`` against PyTorch's attention.

Legend: B batch, H heads, L queries = keys (self-attention sizes), D size of one head,
N = H·D model width. ``DotProductAttention`` takes (B·H, L, D): the heads folded into the batch,
as in ``MultiHeadAttention``'s core. Masks come from valid lengths (a length per batch row).

Targets: with weights ≤ 1.30× SDPA's math path (which also forms the weights, internally);
without weights (``need_weights=False``) ≤ 1.05× SDPA — it should *be* SDPA.
Everything runs in ``torch.inference_mode()`` (forward only).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from helpers import DotProductAttention, MultiHeadAttention, transpose_output, transpose_qkv

from .common import Col, Config, Table, compare, verdict

__all__ = [
    "Case", "DEFAULT_CASES", "QUICK_CASES", "math_only", "sdpa", "explicit_attention",
    "sdpa_backends", "bench_dot_product", "bench_multihead", "run",
]

TARGET_WITH_WEIGHTS = 1.30
TARGET_WITHOUT_WEIGHTS = 1.05
HEAVY_SCORES_BYTES = 2**28  # from 256 MiB of scores: repeats 3, and only the target references


@dataclass(frozen=True)
class Case:
    B: int
    H: int
    L: int
    D: int

    @property
    def label(self) -> str:
        return f"B={self.B} H={self.H} L={self.L} D={self.D}"

    def scores_bytes(self, dtype: torch.dtype) -> int:
        return self.B * self.H * self.L * self.L * torch.empty((), dtype=dtype).element_size()


DEFAULT_CASES = (Case(2, 4, 10, 8), Case(8, 8, 512, 64), Case(8, 8, 2048, 64))
QUICK_CASES = (Case(2, 4, 10, 8), Case(2, 2, 64, 16))


def _plan(case: Case, dtype: torch.dtype, quick: bool) -> dict[str, float]:
    if quick:
        return dict(repeats=5, warmup=1, min_sample_s=0.0)
    size = case.scores_bytes(dtype)
    if size <= 2**20:  # microseconds a call: one call a sample (a longer sample is more likely
        return dict(repeats=101, warmup=5, min_sample_s=0.0)  # to catch a stall), many samples
    if size < HEAVY_SCORES_BYTES:
        return dict(repeats=7, warmup=1, min_sample_s=0.0)
    return dict(repeats=3, warmup=1, min_sample_s=0.0)


def _heavy(case: Case, dtype: torch.dtype, quick: bool) -> bool:
    return not quick and case.scores_bytes(dtype) >= HEAVY_SCORES_BYTES


# ------------------------------------------------------------------------------ references
@contextmanager
def math_only() -> Iterator[None]:
    """Restrict F.scaled_dot_product_attention to its math path (``SDPBackend.MATH``)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    with sdpa_kernel([SDPBackend.MATH]):
        yield


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """F.scaled_dot_product_attention with a boolean ``mask`` (True = takes part).

    Inside ``math_only()`` this is "SDPA's math path": the benchmark enters that context once
    around a whole comparison (the functions compared with it call no SDPA themselves), so the
    context manager's own cost does not count at tiny sizes.
    """
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) V written out, masked entries filled with -inf (mask True = take part)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., L, L)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (..., L, D)


_SHORT = {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient",
          "CUDNN_ATTENTION": "cudnn", "MATH": "math", "OVERRIDEABLE": "overrideable", "ERROR": "none"}


def sdpa_backends(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  mask: torch.Tensor | None) -> tuple[str, list[str]]:
    """(the backend SDPA's default dispatch picks, every backend that accepts these inputs).

    Each backend is tried alone with ``sdpa_kernel([backend])`` on the first batch entry only:
    what a backend accepts depends on device, dtype, rank, head size, lengths and mask, not on
    the batch size.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    q1, k1, v1 = q[:1], k[:1], v[:1]
    m1 = None if mask is None else mask[:1]
    try:
        chosen = _SHORT.get(SDPBackend(torch._fused_sdp_choice(q1, k1, v1, m1, 0.0, False)).name, "?")
    except (AttributeError, RuntimeError, TypeError, ValueError):
        chosen = "?"
    accepted = []
    candidates = ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"]
    if q.device.type == "cpu":
        candidates = ["FLASH_ATTENTION", "MATH"]  # the only CPU kernels
    for name in candidates:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with warnings.catch_warnings(), sdpa_kernel([backend]):
                warnings.simplefilter("ignore")
                F.scaled_dot_product_attention(q1, k1, v1, attn_mask=m1)
            accepted.append(_SHORT[name])
        except RuntimeError:
            pass
    return chosen, accepted


def _backend_text(q, k, v, mask) -> str:
    chosen, accepted = sdpa_backends(q, k, v, mask)
    return f"{chosen} (of {', '.join(accepted) or 'none'})"


def _tol(dtype: torch.dtype) -> float:
    return 1e-4 if dtype in (torch.float32, torch.float64) else 2e-2


def _agree(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> str:
    ok = torch.allclose(a.float(), b.float(), atol=_tol(dtype), rtol=_tol(dtype))
    return "yes" if ok else "NO"


def _data(case: Case, cfg: Config, dtype: torch.dtype, masked: bool, *, fold_heads: bool):
    """Seeded inputs on the device: (B·H, L, D) ×3 when ``fold_heads`` else x (B, L, H·D);
    valid lengths in [L/2, L] per batch row (or None)."""
    gen = torch.Generator().manual_seed(0)
    lens = torch.randint(max(1, case.L // 2), case.L + 1, (case.B,), generator=gen) if masked else None
    if fold_heads:
        qkv = [torch.randn(case.B * case.H, case.L, case.D, generator=gen).to(cfg.device, dtype)
               for _ in range(3)]
        if lens is not None:
            lens = lens.repeat_interleave(case.H)  # (B·H,): every head of a row shares its length
        return qkv, (None if lens is None else lens.to(cfg.device))
    x = torch.randn(case.B, case.L, case.H * case.D, generator=gen).to(cfg.device, dtype)
    return x, (None if lens is None else lens.to(cfg.device))


def _key_mask(lens: torch.Tensor | None, L: int, dims: int = 2) -> torch.Tensor | None:
    """Boolean key mask from valid lengths (N,), True = takes part: (N, L) for ``dims=2``,
    (N, 1, L) for 3, (N, 1, 1, L) for 4. The references build it inside the timed call, as the
    helper builds its own from the same valid lengths."""
    if lens is None:
        return None
    mask = torch.arange(L, device=lens.device) < lens[:, None]  # (N, L)
    return mask.reshape(mask.shape[0], *([1] * (dims - 2)), L)


def _pad(lens: torch.Tensor | None, L: int) -> torch.Tensor | None:
    """nn.MultiheadAttention's key_padding_mask (B, L), True = *ignore*."""
    return None if lens is None else ~_key_mask(lens, L)


def _row(table: Table, case: Case, masked: bool, **values) -> dict[str, object]:
    return table.add(case=case.label, mask="valid lens" if masked else "none", **values)


def _stats(fns: dict[str, Callable[[], object]], case: Case, cfg: Config, dtype: torch.dtype):
    outputs: dict[str, object] = {}
    stats = compare(fns, sync=cfg.sync, outputs=outputs, **_plan(case, dtype, cfg.quick))
    return {k: s.median for k, s in stats.items()}, outputs


def _ratio(t: dict[str, float], a: str, b: str) -> float | None:
    return t[a] / t[b] if a in t and b in t else None


# ------------------------------------------------------------------- DotProductAttention
def bench_dot_product(cfg: Config, dtype: torch.dtype, cases: tuple[Case, ...], *,
                      echo: bool = True) -> list[Table]:
    """Two tables: with weights (vs SDPA math, explicit) and without (vs SDPA)."""
    dev = f"{cfg.device.type}, {str(dtype).removeprefix('torch.')}"
    common = [Col("case", "case", width=22), Col("mask", "mask", width=10),
              Col("helper", "helper", "time")]
    with_w = Table(
        f"DotProductAttention (B·H, L, D), need_weights=True ({dev})",
        common + [Col("math", "SDPA math", "time"), Col("x_math", "×math", "ratio", width=6),
                  Col("explicit", "explicit", "time"), Col("x_explicit", "×explicit", "ratio", width=6),
                  Col("agree", "agree", width=5),
                  Col("status", f"target ≤{TARGET_WITH_WEIGHTS:.2f}× math", width=13)],
        short=f"DotProductAttention with weights ({dev})", echo=echo)
    attn = DotProductAttention().to(cfg.device).eval()
    for case in cases:
        for masked in (False, True):
            (q, k, v), lens = _data(case, cfg, dtype, masked, fold_heads=True)
            L = case.L
            fns = {"helper": lambda: attn(q, k, v, lens),
                   "math": lambda: sdpa(q, k, v, _key_mask(lens, L, 3))}  # (B·H, 1, L)
            if not _heavy(case, dtype, cfg.quick):
                fns["explicit"] = lambda: explicit_attention(q, k, v, _key_mask(lens, L, 3))
            with math_only():  # the helper and explicit call no SDPA: only "math" is affected
                t, out = _stats(fns, case, cfg, dtype)
            _row(with_w, case, masked, helper=t["helper"], math=t["math"],
                 x_math=_ratio(t, "helper", "math"), explicit=t.get("explicit"),
                 x_explicit=_ratio(t, "helper", "explicit"),
                 agree=_agree(out["helper"], out["math"], dtype),
                 status=verdict(_ratio(t, "helper", "math"), TARGET_WITH_WEIGHTS))
            del q, k, v, out
            attn.attention_weights = None
    with_w.note("SDPA math = F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.MATH); "
                "explicit = softmax(QKᵀ/√D masked with -inf) V in three lines.")
    heavy = [c.label for c in cases if _heavy(c, dtype, cfg.quick)]
    if heavy:
        with_w.note(f"{', '.join(heavy)}: 3 repeats after 1 warm-up, explicit not timed (—).")

    without = Table(
        f"DotProductAttention (B·H, L, D), need_weights=False ({dev})",
        common + [Col("sdpa4", "SDPA 4-D", "time"), Col("x_sdpa4", "×4-D", "ratio", width=6),
                  Col("sdpa3", "SDPA 3-D", "time"), Col("x_sdpa3", "×3-D", "ratio", width=6),
                  Col("backend", "backend: 3-D | 4-D = the helper's call", width=40),
                  Col("agree", "agree", width=5),
                  Col("status", f"target ≤{TARGET_WITHOUT_WEIGHTS:.2f}× 4-D", width=13)],
        short=f"DotProductAttention without weights ({dev})", echo=echo)
    for case in cases:
        for masked in (False, True):
            (q, k, v), lens = _data(case, cfg, dtype, masked, fold_heads=True)
            L = case.L
            m3, m4 = _key_mask(lens, L, 3), _key_mask(lens, L, 4)  # for the backend probe
            q4, k4, v4 = q[:, None], k[:, None], v[:, None]  # (B·H, 1, L, D): views
            fns = {
                "helper": lambda: attn(q, k, v, lens, need_weights=False),
                "sdpa4": lambda: F.scaled_dot_product_attention(
                    q4, k4, v4, attn_mask=_key_mask(lens, L, 4))[:, 0],
            }
            if not _heavy(case, dtype, cfg.quick):
                fns["sdpa3"] = lambda: F.scaled_dot_product_attention(
                    q, k, v, attn_mask=_key_mask(lens, L, 3))
            backend = _backend_text(q, k, v, m3) + " | " + _backend_text(q4, k4, v4, m4)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "fused kernels require 4 dimensions": the point
                t, out = _stats(fns, case, cfg, dtype)
            _row(without, case, masked, helper=t["helper"], sdpa4=t["sdpa4"],
                 x_sdpa4=_ratio(t, "helper", "sdpa4"), sdpa3=t.get("sdpa3"),
                 x_sdpa3=_ratio(t, "helper", "sdpa3"), backend=backend,
                 agree=_agree(out["helper"], out["sdpa4"], dtype),
                 status=verdict(_ratio(t, "helper", "sdpa4"), TARGET_WITHOUT_WEIGHTS))
            del q, k, v, q4, k4, v4, out
    without.note("SDPA 4-D = F.scaled_dot_product_attention on (B·H, 1, L, D) views of the same "
                 "tensors, which is what the helper calls; SDPA 3-D = SDPA on the (B·H, L, D) "
                 "tensors as given. PyTorch's fused kernels need 4-D inputs: on 3-D ones SDPA "
                 "falls back to its math path. The references "
                 "build their masks from the valid lengths inside the timed call, as the helper does.")
    if heavy:
        without.note(f"{', '.join(heavy)}: 3 repeats after 1 warm-up, SDPA 3-D not timed (—).")
    return [with_w, without]


# -------------------------------------------------------------------- MultiHeadAttention
def _twins(case: Case, device: torch.device, dtype: torch.dtype):
    """The helper's MultiHeadAttention and nn.MultiheadAttention with the same weights."""
    N = case.H * case.D
    torch.manual_seed(0)
    ours = MultiHeadAttention(N, case.H).to(device, dtype).eval()  # no biases
    ref = nn.MultiheadAttention(N, case.H, bias=False, batch_first=True).to(device, dtype).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        ref.out_proj.weight.copy_(ours.W_o.weight)
    return ours, ref


def _torch_mha_path(ref: nn.MultiheadAttention, x: torch.Tensor, pad: torch.Tensor | None,
                    need_weights: bool) -> str:
    """'fast path' when nn.MultiheadAttention takes its fused ``_native_multi_head_attention``,
    else 'python path' (found by wrapping that function for one call on the first batch row)."""
    native = getattr(torch, "_native_multi_head_attention", None)
    if native is None:
        return "?"
    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return native(*args, **kwargs)

    torch._native_multi_head_attention = spy
    try:
        ref(x[:1], x[:1], x[:1], key_padding_mask=None if pad is None else pad[:1],
            need_weights=need_weights, average_attn_weights=False)
    finally:
        torch._native_multi_head_attention = native
    return "fast path" if calls else "python path"


def bench_multihead(cfg: Config, dtype: torch.dtype, cases: tuple[Case, ...], *,
                    echo: bool = True) -> list[Table]:
    """Two tables: with weights (vs projections + SDPA math) and without (vs projections + SDPA);
    nn.MultiheadAttention with the same weights beside them."""
    dev = f"{cfg.device.type}, {str(dtype).removeprefix('torch.')}"
    common = [Col("case", "case", width=22), Col("mask", "mask", width=10),
              Col("helper", "helper", "time")]
    tables = []
    for need_weights in (True, False):
        if need_weights:
            table = Table(
                f"MultiHeadAttention (B, L, H·D), need_weights=True ({dev})",
                common + [Col("math", "proj+SDPA math", "time"),
                          Col("x_math", "×math", "ratio", width=6),
                          Col("explicit", "proj+explicit", "time"),
                          Col("x_explicit", "×explicit", "ratio", width=6),
                          Col("torch", "nn.MHA", "time"), Col("x_torch", "×nn.MHA", "ratio", width=7),
                          Col("agree", "agree", width=5),
                          Col("status", f"target ≤{TARGET_WITH_WEIGHTS:.2f}× math", width=13)],
                short=f"MultiHeadAttention with weights ({dev})", echo=echo)
        else:
            table = Table(
                f"MultiHeadAttention (B, L, H·D), need_weights=False ({dev})",
                common + [Col("sdpa", "proj+SDPA", "time"), Col("x_sdpa", "×SDPA", "ratio", width=6),
                          Col("torch", "nn.MHA", "time"), Col("x_torch", "×nn.MHA", "ratio", width=7),
                          Col("backend", "SDPA backend", width=22), Col("agree", "agree", width=5),
                          Col("status", f"target ≤{TARGET_WITHOUT_WEIGHTS:.2f}× SDPA", width=13)],
                short=f"MultiHeadAttention without weights ({dev})", echo=echo)
        paths: dict[bool, str] = {}
        for case in cases:
            ours, ref = _twins(case, cfg.device, dtype)
            for masked in (False, True):
                x, lens = _data(case, cfg, dtype, masked, fold_heads=False)
                m4 = _key_mask(lens, case.L, 4)  # (B, 1, 1, L), for the backend probe
                pad = _pad(lens, case.L)  # for the path probe
                paths.setdefault(masked, _torch_mha_path(ref, x, pad, need_weights))
                row = _bench_mha_row(cfg, dtype, case, ours, ref, x, lens, m4, pad, need_weights)
                _row(table, case, masked, **row)
                ours.attention_weights = None
                del x
            del ours, ref
        ref_name = "nn.MultiheadAttention(bias=False, batch_first=True) with the same weights"
        if need_weights:
            table.note("proj+SDPA math = the helper's own W_q, W_k, W_v, W_o around SDPA's math path; "
                       f"nn.MHA = {ref_name}, average_attn_weights=False (weights per head); "
                       f"it took its {paths.get(False, '?')} without mask, "
                       f"{paths.get(True, '?')} with a key_padding_mask.")
            heavy = [c.label for c in cases if _heavy(c, dtype, cfg.quick)]
            if heavy:
                table.note(f"{', '.join(heavy)}: 3 repeats after 1 warm-up, proj+explicit not "
                           "timed (—).")
        else:
            table.note("proj+SDPA = the helper's own projections around F.scaled_dot_product_"
                       f"attention on (B, H, L, D); nn.MHA = {ref_name}; it took its "
                       f"{paths.get(False, '?')} without mask, {paths.get(True, '?')} with a "
                       "key_padding_mask (self-attention, inference mode).")
        tables.append(table)
    return tables


def _bench_mha_row(cfg: Config, dtype: torch.dtype, case: Case, ours: MultiHeadAttention,
                   ref: nn.MultiheadAttention, x: torch.Tensor, lens: torch.Tensor | None,
                   m4: torch.Tensor | None, pad: torch.Tensor | None, need_weights: bool) -> dict:
    H, L = case.H, case.L

    def project(x):
        return (transpose_qkv(ours.W_q(x), H), transpose_qkv(ours.W_k(x), H),
                transpose_qkv(ours.W_v(x), H))  # (B, H, L, D) each

    if need_weights:
        fns = {
            "helper": lambda: ours(x, x, x, lens),
            "math": lambda: ours.W_o(transpose_output(sdpa(*project(x), _key_mask(lens, L, 4)))),
            "torch": lambda: ref(x, x, x, key_padding_mask=_pad(lens, L), need_weights=True,
                                 average_attn_weights=False)[0],
        }
        if not _heavy(case, dtype, cfg.quick):
            fns["explicit"] = lambda: ours.W_o(transpose_output(
                explicit_attention(*project(x), _key_mask(lens, L, 4))))
        with math_only():  # with need_weights=True neither MHA calls SDPA: only "math" is affected
            t, out = _stats(fns, case, cfg, dtype)
        return dict(helper=t["helper"], math=t["math"], x_math=_ratio(t, "helper", "math"),
                    explicit=t.get("explicit"), x_explicit=_ratio(t, "helper", "explicit"),
                    torch=t["torch"], x_torch=_ratio(t, "helper", "torch"),
                    agree=_agree(out["helper"], out["torch"], dtype),
                    status=verdict(_ratio(t, "helper", "math"), TARGET_WITH_WEIGHTS))
    fns = {
        "helper": lambda: ours(x, x, x, lens, need_weights=False),
        "sdpa": lambda: ours.W_o(transpose_output(
            F.scaled_dot_product_attention(*project(x), attn_mask=_key_mask(lens, L, 4)))),
        "torch": lambda: ref(x, x, x, key_padding_mask=_pad(lens, L), need_weights=False)[0],
    }
    t, out = _stats(fns, case, cfg, dtype)
    q1, k1, v1 = project(x[:1])
    return dict(helper=t["helper"], sdpa=t["sdpa"], x_sdpa=_ratio(t, "helper", "sdpa"),
                torch=t["torch"], x_torch=_ratio(t, "helper", "torch"),
                backend=_backend_text(q1, k1, v1, None if m4 is None else m4[:1]),
                agree=_agree(out["helper"], out["torch"], dtype),
                status=verdict(_ratio(t, "helper", "sdpa"), TARGET_WITHOUT_WEIGHTS))


def run(cfg: Config, cases: tuple[Case, ...] | None = None, *, echo: bool = True) -> list[Table]:
    cases = cases or (QUICK_CASES if cfg.quick else DEFAULT_CASES)
    if cfg.max_len is not None:
        cases = tuple(c for c in cases if c.L <= cfg.max_len)
    tables: list[Table] = []
    with torch.inference_mode():
        for dtype in cfg.dtypes:
            tables += bench_dot_product(cfg, dtype, cases, echo=echo)
            tables += bench_multihead(cfg, dtype, cases, echo=echo)
    return tables
