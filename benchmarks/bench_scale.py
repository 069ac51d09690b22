"""Attention at scale (notebook 09): ``tiled_attention`` against PyTorch's SDPA (its default
dispatch and each backend alone) and the naive three lines, time and peak memory; and the KV
cache's speed-up in ``generate``.

Legend: B batch, H heads, L queries = keys (self-attention), D head size, b block size.

Targets: ``tiled_attention``'s peak memory ≤ 1/4 of the naive path's once L ≥ 4·b (it should
hold a few tiles and the output, never a (L, L) matrix), without grad and, with inputs that
require grad, for the forward whose graph is kept for backward; generating with the cache takes
≤ 1.00× the time without it. Speed against SDPA is reported, not targeted: the tiles run as many
small PyTorch calls from Python, which a fused kernel does not pay.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from helpers import DecoderLM, generate, tiled_attention
from helpers.tiling import lengths_that_fit, peak_bytes

from .bench_attention import _SHORT, Case, _agree  # shared with the attention benchmark
from .common import Col, Config, Table, compare, verdict

__all__ = ["Case", "GenCase", "DEFAULT_CASES", "QUICK_CASES", "CUDA_CASES", "GRAD_LENGTHS",
           "QUICK_GRAD_LENGTHS", "naive_attention", "cases_that_fit", "bench_tiled",
           "bench_grad_memory", "bench_kv_cache", "run"]

BLOCK = 128  # tiled_attention's block size here
TARGET_MEMORY = 0.25  # tiled peak ÷ naive peak, once L ≥ 4·b
TARGET_CACHE = 1.00  # time with the cache ÷ time without
BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


@dataclass(frozen=True)
class GenCase:
    """``generate`` of ``new`` tokens after a prompt of ``prompt`` tokens, batch ``B``, for a
    ``DecoderLM`` of ``layers`` layers, width ``N`` and ``H`` heads (random weights)."""

    B: int
    prompt: int
    new: int
    layers: int = 4
    N: int = 128
    H: int = 4

    @property
    def label(self) -> str:
        return f"B={self.B} prompt {self.prompt} + {self.new} new"


DEFAULT_CASES = (Case(1, 8, 512, 64), Case(1, 8, 2048, 64))
CUDA_CASES = (Case(4, 16, 1024, 64), Case(4, 16, 4096, 64), Case(4, 16, 8192, 64))
QUICK_CASES = (Case(1, 2, 64, 16), Case(1, 2, 200, 16))
GRAD_LENGTHS = (1024, 2048, 4096, 8192)  # L for the memory with grad (B = H = 1, D = 64)
QUICK_GRAD_LENGTHS = (64, 160)
DEFAULT_GEN = (GenCase(1, 16, 64), GenCase(1, 16, 256), GenCase(4, 16, 64))
QUICK_GEN = (GenCase(1, 4, 6, layers=1, N=16, H=2),)


# ------------------------------------------------------------------------------ the paths
def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(Q Kᵀ / √D) V in three lines, the future masked with -inf when ``causal``."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., L, L)
    if causal:
        L = q.shape[-2]
        future = torch.ones(L, L, dtype=torch.bool, device=q.device).triu(1)  # True = hidden
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (..., L, D)


def _sdpa(backend: str | None) -> Callable[..., torch.Tensor]:
    """F.scaled_dot_product_attention, restricted to one backend unless ``backend`` is None."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    if backend is None:
        return lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def run(q, k, v, causal):
        with sdpa_kernel([getattr(SDPBackend, backend)]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _backends(device: torch.device) -> tuple[str, ...]:
    """The SDPA backends worth trying: the CPU has a flash kernel and the math path only."""
    return ("FLASH_ATTENTION", "MATH") if device.type == "cpu" else BACKENDS


def _accepts(fn: Callable[..., torch.Tensor], q, k, v, causal: bool) -> bool:
    """Whether a backend runs on these inputs (tried on the first batch entry and head)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(q[:1, :1], k[:1, :1], v[:1, :1], causal)
        return True
    except RuntimeError:
        return False


def _plan(cfg: Config) -> dict[str, float]:
    return dict(repeats=3, warmup=1) if cfg.quick else dict(repeats=5, warmup=1)


def cases_that_fit(cases: tuple[Case, ...], free_bytes: int,
                   dtypes: tuple[torch.dtype, ...]) -> tuple[tuple[Case, ...], tuple[Case, ...]]:
    """(kept, dropped): the cases whose naive path and SDPA math backend, which hold (B, H, L, L)
    matrices, fit in a GPU's ``free_bytes`` in the widest of ``dtypes``, by
    ``helpers.tiling.lengths_that_fit``'s estimate (CUDA_CASES' L = 8192 needs 16 GiB for the
    naive path alone in float16: more than a 16 GB T4 has)."""
    width = max(torch.empty((), dtype=d).element_size() for d in dtypes)
    kept = tuple(c for c in cases if lengths_that_fit(free_bytes, [c.L], batch=c.B, heads=c.H,
                                                      head_size=c.D, bytes_per_number=width))
    return kept, tuple(c for c in cases if c not in kept)


# ---------------------------------------------------------------------- tiled attention
def bench_tiled(cfg: Config, dtype: torch.dtype, cases: tuple[Case, ...], *,
                echo: bool = True) -> Table:
    """One row per case and mask: time per call and peak memory of each path."""
    dev = f"{cfg.device.type}, {str(dtype).removeprefix('torch.')}"
    backends = _backends(cfg.device)
    cols = [Col("case", "case", width=24), Col("mask", "mask", width=6),
            Col("naive", "naive", "time"), Col("tiled", f"tiled b={BLOCK}", "time"),
            Col("sdpa", "SDPA", "time"), Col("x_sdpa", "tiled ×SDPA", "ratio", width=7)]
    cols += [Col(f"t_{_SHORT[b]}", f"SDPA {_SHORT[b]}", "time") for b in backends]
    cols += [Col("mem_naive", "peak naive", "bytes"), Col("mem_tiled", "peak tiled", "bytes"),
             Col("mem_sdpa", "peak SDPA", "bytes"), Col("agree", "agree", width=5),
             Col("status", f"target tiled ≤{TARGET_MEMORY:.2f}× naive memory", width=14)]
    table = Table(f"tiled_attention vs SDPA vs naive, (B, H, L, D) ({dev})", cols,
                  short=f"tiled_attention ({dev})", echo=echo)
    sdpa = _sdpa(None)  # SDPA's own choice of backend
    for case in cases:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(case.B, case.H, case.L, case.D, generator=gen).to(cfg.device, dtype)
                   for _ in range(3))
        for causal in (False, True):
            fns: dict[str, Callable[[], torch.Tensor]] = {
                "naive": lambda: naive_attention(q, k, v, causal),
                "tiled": lambda: tiled_attention(q, k, v, block_size=BLOCK, causal=causal),
                "sdpa": lambda: sdpa(q, k, v, causal),
            }
            for b in backends:
                fn = _sdpa(b)
                if _accepts(fn, q, k, v, causal):
                    fns[f"t_{_SHORT[b]}"] = lambda fn=fn: fn(q, k, v, causal)
            outputs: dict[str, object] = {}
            stats = compare(fns, sync=cfg.sync, outputs=outputs, **_plan(cfg))
            t = {name: s.median for name, s in stats.items()}
            agree = all(_agree(out, outputs["naive"], dtype) == "yes" for out in outputs.values())
            del outputs
            mem = {name: peak_bytes(fns[name], cfg.device) for name in ("naive", "tiled", "sdpa")}
            ratio = mem["tiled"] / mem["naive"] if mem["naive"] else None
            status = (verdict(ratio, TARGET_MEMORY) if case.L >= 4 * BLOCK
                      else f"n/a (L < {4 * BLOCK})")
            table.add(case=case.label, mask="causal" if causal else "none", naive=t["naive"],
                      tiled=t["tiled"], sdpa=t["sdpa"], x_sdpa=t["tiled"] / t["sdpa"],
                      **{k_: t.get(k_) for k_ in (f"t_{_SHORT[b]}" for b in backends)},
                      mem_naive=mem["naive"], mem_tiled=mem["tiled"], mem_sdpa=mem["sdpa"],
                      agree="yes" if agree else "NO", status=status)
        del q, k, v
    table.note(f"naive = softmax(QKᵀ/√D) V in three lines (causal: the future filled with -inf); "
               f"tiled = helpers.tiled_attention(block_size={BLOCK}); SDPA = "
               "F.scaled_dot_product_attention's own choice (is_causal for the mask), then each "
               "backend alone under sdpa_kernel (— where it refuses the inputs). agree: every "
               "path equals the naive one.")
    if cfg.device.type == "cuda":
        table.note("peak = torch.cuda.max_memory_allocated during one call, beyond what was "
                   "allocated before: everything, fused kernels' scratch included.")
    else:
        table.note("peak = helpers.tiling.peak_bytes: the bytes of the tensors that PyTorch calls "
                   "made from Python return, while alive. Exact for the naive path and "
                   "tiled_attention; for SDPA only its output shows (its fused kernel's scratch, "
                   "allocated and freed inside the one call, does not).")
    return table


# -------------------------------------------------------------------- memory with grad
def bench_grad_memory(cfg: Config, lengths: tuple[int, ...], *, echo: bool = True) -> Table:
    """Peak memory of each path when the inputs require grad: the forward with its graph kept
    (what autograd saves for backward, alive until measured), and forward + backward."""
    paths: dict[str, Callable[..., torch.Tensor]] = {
        "naive": naive_attention,
        "sdpa": _sdpa(None),
        "tiled": lambda q, k, v, causal: tiled_attention(q, k, v, block_size=BLOCK, causal=causal),
    }
    titles = {"naive": "naive", "sdpa": "SDPA", "tiled": f"tiled b={BLOCK}"}
    cols = [Col("L", "L", "int", width=5), Col("mask", "mask", width=6),
            Col("scores", "one (L, L)", "bytes")]
    cols += [Col(f"fwd_{p}", f"{titles[p]} fwd", "bytes") for p in paths]
    cols += [Col(f"both_{p}", f"{titles[p]} fwd+bwd", "bytes") for p in paths]
    cols += [Col("x_naive", "tiled ÷ naive fwd", "ratio", width=7),
             Col("agree", "same grads", width=5),
             Col("status", f"target tiled fwd ≤{TARGET_MEMORY:.2f}× naive", width=14)]
    dev = f"{cfg.device.type}, float32"
    table = Table(f"peak memory with grad, (B, H, L, D) = (1, 1, L, 64) ({dev})", cols,
                  short=f"memory with grad ({dev})", echo=echo)
    for L in lengths:
        gen = torch.Generator().manual_seed(0)
        q, k, v, d_out = (torch.randn(1, 1, L, 64, generator=gen).to(cfg.device)
                          for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_()
        for causal in (False, True):
            row: dict[str, object] = {}
            grads: dict[str, tuple[torch.Tensor, ...]] = {}
            for name, path in paths.items():
                row[f"fwd_{name}"] = peak_bytes(lambda: path(q, k, v, causal), cfg.device)

                def both(name=name, path=path):
                    grads[name] = torch.autograd.grad(path(q, k, v, causal), (q, k, v), d_out)

                row[f"both_{name}"] = peak_bytes(both, cfg.device)
            agree = all(torch.allclose(a, b, rtol=1e-4, atol=1e-4)
                        for name in ("sdpa", "tiled") for a, b in zip(grads[name], grads["naive"]))
            del grads
            ratio = row["fwd_tiled"] / row["fwd_naive"] if row["fwd_naive"] else None
            status = (verdict(ratio, TARGET_MEMORY) if L >= 4 * BLOCK
                      else f"n/a (L < {4 * BLOCK})")
            table.add(L=L, mask="causal" if causal else "none", scores=L * L * 4, **row,
                      x_naive=ratio, agree="yes" if agree else "NO", status=status)
        del q, k, v, d_out
    table.note("Inputs (1, 1, L, 64) float32 that require grad. fwd = one call, its result and "
               "so the graph autograd saves for backward kept alive until measured; fwd+bwd = "
               "torch.autograd.grad(out, (q, k, v), dO), its three gradients included. same "
               f"grads: SDPA's and tiled_attention(block_size={BLOCK})'s equal the naive "
               "path's. one (L, L) = one float32 score matrix, for scale.")
    if cfg.device.type == "cuda":
        table.note("peak = torch.cuda.max_memory_allocated during the call, beyond what was "
                   "allocated before: everything, the saved graph and the backward's work "
                   "included.")
    else:
        table.note("peak = helpers.tiling.peak_bytes, which on the CPU counts the tensors that "
                   "PyTorch calls made from Python return, while alive. It sees what the graph "
                   "saves when that is such a tensor (the naive path's (L, L) weights; "
                   "tiled_attention's output and log-sum-exp per query) but not what one call "
                   "keeps to itself (SDPA's log-sum-exp, L floats). The backward is one call, "
                   "torch.autograd.grad: only the gradients it returns are seen, none of the "
                   "work inside it (the naive path's (L, L) gradients of the weights and "
                   "scores, the tiles tiled_attention's backward recomputes): on the CPU "
                   "fwd+bwd is a lower bound, the forward's graph and the three gradients. "
                   "Run with --device cuda for the whole of it.")
    return table


# ------------------------------------------------------------------------------ KV cache
def bench_kv_cache(cfg: Config, cases: tuple[GenCase, ...], *, echo: bool = True) -> Table:
    """Greedy generation with and without the KV cache: time, tokens/s, same tokens."""
    table = Table(
        f"generate with and without the KV cache ({cfg.device.type}, float32)",
        [Col("case", "case", width=26), Col("model", "model", width=16),
         Col("t_with", "with cache", "time"), Col("t_without", "without", "time"),
         Col("rate_with", "tokens/s with", "int", width=8),
         Col("rate_without", "tokens/s without", "int", width=8),
         Col("speedup", "speed-up", "ratio", width=7), Col("same", "same tokens", width=5),
         Col("status", f"target with ≤{TARGET_CACHE:.2f}× without", width=14)],
        short=f"KV cache ({cfg.device.type})", echo=echo)
    for case in cases:
        torch.manual_seed(0)
        model = DecoderLM(256, case.N, case.H, case.layers, max_len=case.prompt + case.new,
                          positional="rope").to(cfg.device).eval()
        prompt = torch.randint(0, 256, (case.B, case.prompt),
                               generator=torch.Generator().manual_seed(1)).to(cfg.device)
        outputs: dict[str, object] = {}
        stats = compare({"with": lambda: generate(model, prompt, case.new, use_cache=True),
                         "without": lambda: generate(model, prompt, case.new, use_cache=False)},
                        sync=cfg.sync, outputs=outputs,
                        repeats=1 if cfg.quick else 2, warmup=0 if cfg.quick else 1)
        t = {name: s.median for name, s in stats.items()}
        tokens = case.B * case.new
        table.add(case=case.label, model=f"L={case.layers} N={case.N} H={case.H}",
                  t_with=t["with"], t_without=t["without"],
                  rate_with=tokens / t["with"], rate_without=tokens / t["without"],
                  speedup=t["without"] / t["with"],
                  same="yes" if torch.equal(outputs["with"], outputs["without"]) else "NO",
                  status=verdict(t["with"] / t["without"], TARGET_CACHE))
        del model, prompt, outputs
    table.note("helpers.generate (greedy) on a DecoderLM with random weights and RoPE; tokens/s "
               "counts the new tokens of every sequence; speed-up = time without ÷ time with.")
    return table


def run(cfg: Config, cases: tuple[Case, ...] | None = None,
        gen_cases: tuple[GenCase, ...] | None = None, *, echo: bool = True) -> list[Table]:
    """The tiled-attention table per dtype, the memory with grad (float32), the KV cache."""
    if cases is None:
        cases = QUICK_CASES if cfg.quick else CUDA_CASES if cfg.device.type == "cuda" else DEFAULT_CASES
    if cfg.max_len is not None:
        cases = tuple(c for c in cases if c.L <= cfg.max_len)
    dropped: tuple[Case, ...] = ()
    if cfg.device.type == "cuda":
        cases, dropped = cases_that_fit(cases, torch.cuda.mem_get_info(cfg.device)[0], cfg.dtypes)
    gen_cases = gen_cases or (QUICK_GEN if cfg.quick else DEFAULT_GEN)
    lengths = QUICK_GRAD_LENGTHS if cfg.quick else GRAD_LENGTHS
    if cfg.max_len is not None:
        lengths = tuple(L for L in lengths if L <= cfg.max_len)
    tables: list[Table] = []
    with torch.inference_mode():
        for dtype in cfg.dtypes:
            tables.append(bench_tiled(cfg, dtype, cases, echo=echo))
            if dropped:
                tables[-1].note("Not run, too large for this GPU's free memory (the naive path's "
                                "(B, H, L, L) matrices): " + ", ".join(c.label for c in dropped) + ".")
    tables.append(bench_grad_memory(cfg, lengths, echo=echo))  # needs grad: not inference mode
    with torch.inference_mode():
        tables.append(bench_kv_cache(cfg, gen_cases, echo=echo))
    return tables
