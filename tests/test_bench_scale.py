"""Smoke tests of ``benchmarks/bench_scale.py``: the scale section runs on tiny sizes, registers
under ``--only scale``, and compares equal things. No timing is asserted."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

# benchmarks/ is a folder of scripts at the repository root, not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_scale  # noqa: E402
from benchmarks.__main__ import main, parse_args  # noqa: E402
from benchmarks.common import Config  # noqa: E402

QUICK = Config(quick=True)


def _positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


@pytest.mark.parametrize("causal", [False, True])
def test_naive_reference_is_attention(causal):
    q, k, v = (torch.randn(2, 3, 7, 5, dtype=torch.float64) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(bench_scale.naive_attention(q, k, v, causal), expected)


def test_tiled_table_tiny():
    cases = (bench_scale.Case(1, 2, 40, 8), bench_scale.Case(1, 1, 600, 8))
    with torch.inference_mode():
        table = bench_scale.bench_tiled(QUICK, torch.float32, cases, echo=False)
    assert [(r["case"], r["mask"]) for r in table.rows] == [
        ("B=1 H=2 L=40 D=8", "none"), ("B=1 H=2 L=40 D=8", "causal"),
        ("B=1 H=1 L=600 D=8", "none"), ("B=1 H=1 L=600 D=8", "causal")]
    for row in table.rows:
        assert row["agree"] == "yes"  # every path computes the same attention
        for key in ("naive", "tiled", "sdpa", "t_flash", "t_math"):  # the CPU's two backends
            assert _positive(row[key]), (key, row)
        assert row["x_sdpa"] == pytest.approx(row["tiled"] / row["sdpa"])
        assert row["mem_naive"] > 0 and row["mem_tiled"] > 0 and row["mem_sdpa"] > 0
    small, _, large, large_causal = table.rows
    assert small["status"] == "n/a (L < 512)"
    # L = 600 ≥ 4·128: the memory target applies, and tiles beat two (600, 600) float32 matrices
    for row in (large, large_causal):
        assert row["mem_naive"] >= 2 * 600 * 600 * 4
        assert row["mem_tiled"] < row["mem_naive"] / 4
        assert row["status"] == "ok"


def test_grad_memory_table_quick():
    lengths = bench_scale.QUICK_GRAD_LENGTHS
    assert max(lengths) <= 256  # --quick stays tiny
    table = bench_scale.bench_grad_memory(QUICK, lengths, echo=False)
    assert [(r["L"], r["mask"]) for r in table.rows] == [
        (L, mask) for L in lengths for mask in ("none", "causal")]
    for row in table.rows:
        L = row["L"]
        assert row["agree"] == "yes"  # SDPA's and tiled's gradients equal the naive path's
        assert row["scores"] == L * L * 4
        for path in ("naive", "sdpa", "tiled"):
            fwd, both = row[f"fwd_{path}"], row[f"both_{path}"]
            assert type(fwd) is int and type(both) is int, (path, row)
            # what each figure must at least contain: the output (L, 64); with the backward,
            # the three gradients it returns (L, 64) each (sanity of the meter, not a target)
            assert fwd >= L * 64 * 4 and both >= 3 * L * 64 * 4, (path, row)
        assert row["x_naive"] == pytest.approx(row["fwd_tiled"] / row["fwd_naive"])
        assert row["status"] == f"n/a (L < {4 * bench_scale.BLOCK})"
    assert any("autograd.grad" in note for note in table.notes)  # says what the CPU meter sees


def test_kv_cache_table_tiny():
    case = bench_scale.GenCase(2, 3, 5, layers=1, N=16, H=2)
    with torch.inference_mode():
        table = bench_scale.bench_kv_cache(QUICK, (case,), echo=False)
    (row,) = table.rows
    assert row["same"] == "yes"  # identical tokens with and without the cache
    assert _positive(row["t_with"]) and _positive(row["t_without"])
    assert row["rate_with"] == pytest.approx(2 * 5 / row["t_with"])
    assert row["speedup"] == pytest.approx(row["t_without"] / row["t_with"])
    assert row["status"] == "ok" or row["status"].startswith("MISS "), row["status"]


def test_scale_section_is_registered_and_runs_quick(capsys):
    assert "scale" in parse_args(["--only", "scale"]).only
    assert parse_args(["--only", "tiling,kv_cache"]).only == ["scale"]
    assert main(["--only", "scale", "--quick"]) == 0
    printed = capsys.readouterr().out
    assert "## tiled_attention vs SDPA vs naive" in printed
    assert "## peak memory with grad" in printed
    assert "## generate with and without the KV cache" in printed


def test_cuda_cases_are_sized_to_the_gpus_free_memory():
    # CUDA_CASES' L = 8192 (B = 4, H = 16) needs 16 GiB for the naive path alone in float16
    t4, h100, tiny = int(14.5 * 2**30), 79 * 2**30, 2**30
    kept, dropped = bench_scale.cases_that_fit(bench_scale.CUDA_CASES, t4, (torch.float16,))
    assert [c.L for c in kept] == [1024, 4096] and [c.L for c in dropped] == [8192]
    assert bench_scale.cases_that_fit(bench_scale.CUDA_CASES, h100, (torch.float16,))[1] == ()
    # float32 is twice as wide: on a T4 only L = 1024 stays
    kept, _ = bench_scale.cases_that_fit(bench_scale.CUDA_CASES, t4, (torch.float16, torch.float32))
    assert [c.L for c in kept] == [1024]
    assert bench_scale.cases_that_fit(bench_scale.CUDA_CASES, tiny, (torch.float16,))[0] == (
        bench_scale.Case(4, 16, 1024, 64),)
