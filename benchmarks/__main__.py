"""``python -m benchmarks [--only notebooks,sliders,pages,speed,attention,softmax,scale] [--quick]
[--device cuda] [--baseline REV] [--write-results [PATH]]``: run the benchmarks, print their
tables as they go.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from .common import REPO, Config, Table, fmt_time, header_lines, machine_info

# sliders before pages: the pages table shows the kernel-side time of the same views.
SECTIONS = ("notebooks", "sliders", "pages", "speed", "attention", "softmax", "scale")
ALIASES = {"nb": "notebooks", "notebook": "notebooks", "slider": "sliders", "widgets": "sliders",
           "page": "pages", "site": "pages", "browser": "pages",
           "lighthouse": "speed", "site-speed": "speed", "load": "speed",
           "attn": "attention", "masked_softmax": "softmax", "masking": "softmax",
           "tiling": "scale", "kv_cache": "scale"}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}
DEFAULT_RESULTS = REPO / "benchmarks" / "RESULTS.md"
# Runs per notebook by default: a median of 3 fresh kernels, not one run. The notebooks take
# about 54 s a round (RESULTS.md), so this adds about 2 × 54 s ≈ 110 s to a full run.
NOTEBOOK_REPEATS = 3


def _sections(text: str) -> list[str]:
    chosen = []
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        name = ALIASES.get(part, part)
        if name not in SECTIONS:
            raise argparse.ArgumentTypeError(
                f"unknown section {part!r}: choose from {', '.join(SECTIONS)}")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise argparse.ArgumentTypeError("--only needs at least one section")
    return [s for s in SECTIONS if s in chosen]  # always in the canonical order


def _dtypes(text: str) -> tuple[torch.dtype, ...]:
    try:
        return tuple(DTYPES[p.strip()] for p in text.split(",") if p.strip())
    except KeyError as exc:
        raise argparse.ArgumentTypeError(f"unknown dtype {exc}: choose from {', '.join(DTYPES)}") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Notebook run time, slider latency (kernel side and in the page), the "
                    "site's load (Lighthouse, bytes, first figure), and the attention helpers "
                    "against PyTorch's fused attention. Prints tables; MISS marks a missed target.")
    parser.add_argument("--only", type=_sections, default=list(SECTIONS), metavar="SECTIONS",
                        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and few repeats: a smoke run, not numbers to quote")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the attention and softmax tensors live (auto: cuda if available)")
    parser.add_argument("--dtype", type=_dtypes, default=None, metavar="DTYPES",
                        help="comma-separated, e.g. float16,bfloat16 (default: float32 on the CPU, "
                             "float16,bfloat16 on CUDA)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads (default: PyTorch's choice)")
    parser.add_argument("--max-len", type=int, default=None, metavar="L",
                        help="attention: skip the cases longer than L (e.g. 512 leaves out the "
                             "heavy L=2048 case, most of the default run's time)")
    parser.add_argument("--notebook-repeats", type=int, default=None, metavar="N",
                        help=f"runs per notebook, each in a fresh kernel after the warm-up "
                             f"kernel; the median is reported (default {NOTEBOOK_REPEATS}, "
                             f"1 with --quick)")
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="notebooks: also run the notebooks of git revision REV (a temporary "
                             "worktree), in turn with this tree's, and print both and their ratio "
                             "instead of this tree's table")
    parser.add_argument("--write-results", nargs="?", const=DEFAULT_RESULTS, default=None,
                        type=Path, metavar="PATH",
                        help=f"also write the tables as markdown (default path: "
                             f"{DEFAULT_RESULTS.relative_to(REPO)})")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.notebook_repeats is not None and args.notebook_repeats < 1:
        parser.error("--notebook-repeats must be >= 1")
    if args.baseline is not None:
        from .bench_notebooks import resolve_revision  # noqa: PLC0415 (nbclient: only when asked)

        try:
            resolve_revision(args.baseline)
        except ValueError:
            parser.error(f"--baseline {args.baseline!r}: not a git revision of {REPO}")
    return args


def make_config(args: argparse.Namespace) -> Config:
    name = args.device
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    dtypes = args.dtype or ((torch.float16, torch.bfloat16) if device.type == "cuda" else (torch.float32,))
    repeats = args.notebook_repeats or (1 if args.quick else NOTEBOOK_REPEATS)
    return Config(device=device, dtypes=dtypes, quick=args.quick,
                  notebook_repeats=repeats, max_len=args.max_len,
                  baseline=args.baseline)


def run_sections(cfg: Config, sections: list[str]) -> tuple[list[Table], dict[str, str]]:
    """Run the chosen sections in order; return their tables and what was found (for the
    results file: which notebooks and widget modules were present)."""
    from . import (  # noqa: PLC0415
        bench_attention, bench_masked_softmax, bench_notebooks, bench_pages, bench_scale,
        bench_site, bench_sliders,
    )

    tables: list[Table] = []
    present: dict[str, str] = {}
    kernel: dict[str, list[float]] = {}  # sliders' +png samples by view title, for pages
    for section in sections:
        if section == "notebooks":
            names = [p.name for p in bench_notebooks.notebook_paths()]
            present["notebooks"] = ", ".join(names) or "none"
            if cfg.baseline is None:
                tables += bench_notebooks.run(cfg)
            else:
                with bench_notebooks.revision_tree(cfg.baseline) as tree:
                    tables += bench_notebooks.run_against(cfg, tree, label=cfg.baseline)
        elif section == "sliders":
            def remember(found):
                present["widget modules"] = ", ".join(
                    f.name + (f" ({f.problem})" if f.problem else "") for f in found) or "none"
            tables += bench_sliders.run(cfg, on_found=remember, per_view=kernel)
        elif section == "pages":
            present["site pages"] = ", ".join(
                p.stem for p in bench_pages.notebook_pages()) or "none (run make site)"
            tables += bench_pages.run(cfg, kernel=kernel)
        elif section == "speed":
            tables += bench_site.run(cfg)
        elif section == "attention":
            tables += bench_attention.run(cfg)
        elif section == "softmax":
            tables += bench_masked_softmax.run(cfg)
        elif section == "scale":
            tables += bench_scale.run(cfg)
    return tables, present


def results_markdown(info: dict[str, str], tables: list[Table], present: dict[str, str],
                     command: str, seconds: float) -> str:
    lines = ["# Benchmark results", "",
             f"Written by `{command}` (the full run took {fmt_time(seconds)}). "
             "Ratios are helper ÷ reference (medians); MISS marks a missed target and by how much.",
             "", "```", *header_lines(info), "```", ""]
    for what, names in present.items():
        lines.append(f"- {what} present: {names}")
    lines.append("")
    misses = [m for t in tables for m in t.misses()]
    lines.append(f"**Targets missed: {len(misses)}**")
    lines.extend(f"- {m}" for m in misses)
    lines.append("")
    for table in tables:
        lines.append(table.markdown())
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = make_config(args)
    info = machine_info(cfg.device)
    info["run"] = (f"sections {','.join(args.only)}; {'quick' if cfg.quick else 'full'}; "
                   f"dtypes {', '.join(str(d).removeprefix('torch.') for d in cfg.dtypes)}")
    print("# Benchmarks", flush=True)
    for line in header_lines(info):
        print(line, flush=True)
    t0 = time.perf_counter()
    tables, present = run_sections(cfg, args.only)
    seconds = time.perf_counter() - t0
    misses = [m for t in tables for m in t.misses()]
    print(f"\n# Done in {fmt_time(seconds)}. Targets missed: {len(misses)}"
          + (" (quick run: tiny sizes, few repeats — indicative only)" if cfg.quick else ""), flush=True)
    for m in misses:
        print(f"  {m}", flush=True)
    if args.write_results is not None:
        command = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
        path = Path(args.write_results)
        path.write_text(results_markdown(info, tables, present, command.strip(), seconds))
        print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
