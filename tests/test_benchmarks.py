"""Smoke tests of ``benchmarks/``: every benchmark runs on tiny sizes and returns well-formed
tables. No timing is asserted — only that the numbers exist, are positive, and that the
comparisons compare equal things."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import ipywidgets as widgets
import nbformat
import pytest
import torch

# benchmarks/ is a folder of scripts at the repository root, not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import (  # noqa: E402
    bench_attention, bench_masked_softmax, bench_notebooks, bench_pages, bench_sliders,
)
from benchmarks.__main__ import main, make_config, parse_args  # noqa: E402
from benchmarks.common import Col, Config, Stats, Table, compare, fmt_time, verdict  # noqa: E402

QUICK = Config(quick=True)


def _positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


# ------------------------------------------------------------------------------ common
def test_stats_median_and_p90():
    s = Stats(tuple(float(i) for i in range(1, 11)))
    assert s.median == 5.5 and s.min == 1.0
    assert s.p90 == pytest.approx(9.1)
    assert Stats((2.0,)).p90 == 2.0


def test_compare_warms_up_interleaves_and_keeps_first_outputs():
    log = []
    fns = {"a": lambda: log.append("a") or "A", "b": lambda: log.append("b") or "B"}
    outputs = {}
    stats = compare(fns, repeats=3, warmup=2, outputs=outputs)
    assert log == ["a", "a", "b", "b"] + ["a", "b", "b", "a", "a", "b"]  # warm-ups, then
    # round-robin with the order rotated each round (no function always follows the same one)
    assert outputs == {"a": "A", "b": "B"}
    assert set(stats) == {"a", "b"} and all(len(s.samples) == 3 for s in stats.values())
    with pytest.raises(ValueError, match="repeats"):
        compare(fns, repeats=0)


def test_compare_batches_tiny_calls_into_longer_samples():
    stats = compare({"noop": lambda: None}, repeats=2, warmup=0, min_sample_s=0.001)
    assert stats["noop"].number > 1 and all(_positive(s) for s in stats["noop"].samples)


def test_verdict_and_formats():
    assert verdict(0.09, 0.1) == "ok" and verdict(0.1, 0.1) == "ok"
    assert verdict(0.123, 0.1) == "MISS +23%"
    assert verdict(None, 1.0) == "n/a" and verdict(float("nan"), 1.0) == "n/a"
    assert fmt_time(12e-6) == "12.0 µs" and fmt_time(0.0123) == "12.3 ms" and fmt_time(2.5) == "2.50 s"


def test_table_prints_each_row_and_renders_markdown(capsys):
    table = Table("T", [Col("name", "name"), Col("t", "time", "time"),
                        Col("status", "target")], short="tiny")
    table.add(name="fast", t=0.001, status=verdict(0.001, 0.01))
    table.add(name="slow|pipe", t=0.02, status=verdict(0.02, 0.01))
    printed = capsys.readouterr().out
    assert "## T" in printed and "1.0 ms" in printed and "MISS +100%" in printed
    md = table.markdown()
    assert md.startswith("### T") and "| slow\\|pipe | 20.0 ms | MISS +100% |" in md
    assert table.misses() == ["tiny: slow|pipe: target: MISS +100%"]
    with pytest.raises(KeyError):
        table.add(nope=1)


# --------------------------------------------------------------------------- the CLI
def test_cli_sections_quick_and_device():
    args = parse_args(["--only", "softmax,attention", "--quick"])
    assert args.only == ["attention", "softmax"] and args.quick  # canonical order
    assert parse_args(["--only", "nb,widgets"]).only == ["notebooks", "sliders"]
    # pages after sliders: its table shows the kernel-side time sliders measured
    assert parse_args(["--only", "pages,sliders"]).only == ["sliders", "pages"]
    assert parse_args([]).only == ["notebooks", "sliders", "pages", "speed", "attention", "softmax",
                                   "scale"]
    cfg = make_config(parse_args(["--device", "cpu"]))
    assert cfg.device.type == "cpu" and cfg.dtypes == (torch.float32,)
    # notebook times are medians of several runs, except in a smoke run or when asked
    assert cfg.notebook_repeats == 3
    assert make_config(parse_args(["--quick"])).notebook_repeats == 1
    assert make_config(parse_args(["--quick", "--notebook-repeats", "2"])).notebook_repeats == 2
    assert make_config(parse_args(["--baseline", "HEAD"])).baseline == "HEAD"
    assert make_config(parse_args([])).baseline is None
    with pytest.raises(SystemExit):
        parse_args(["--notebook-repeats", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--baseline", "no-such-revision"])
    with pytest.raises(SystemExit):
        parse_args(["--only", "everything"])
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            parse_args(["--device", "cuda"])


def test_main_writes_markdown_results(tmp_path, capsys):
    out = tmp_path / "RESULTS.md"
    assert main(["--only", "softmax", "--quick", "--write-results", str(out)]) == 0
    text = out.read_text()
    printed = capsys.readouterr().out
    assert "torch" in printed and "masked_softmax vs textbook" in printed
    assert text.startswith("# Benchmark results") and torch.__version__ in text
    assert "### masked_softmax vs textbook (cpu, float32)" in text and "Targets missed" in text


# ------------------------------------------------------------------------ masked softmax
def test_textbook_reference_is_the_seed_version():
    X = torch.randn(2, 3, 5)
    lens = torch.tensor([2, 4])
    keep = X.clone()
    expected = torch.softmax(X.masked_fill(torch.arange(5) >= lens[:, None, None], -1e6), dim=-1)
    got = bench_masked_softmax.textbook_masked_softmax(X, lens)
    torch.testing.assert_close(got, expected)
    assert not torch.equal(X, keep)  # the seed's defect, kept on purpose: it writes into X


def test_masked_softmax_bench_tiny():
    cases = (bench_masked_softmax.SoftmaxCase(2, 3, 5, "(B,)"),
             bench_masked_softmax.SoftmaxCase(2, 3, 5, "(B, Q)"),
             bench_masked_softmax.SoftmaxCase(1, 1, 4, "none"))
    (table,) = bench_masked_softmax.run(QUICK, cases, echo=False)
    assert [r["lens"] for r in table.rows] == ["(B,)", "(B, Q)", "none"]
    for row in table.rows:
        assert _positive(row["helper"]) and _positive(row["textbook"])
        assert row["ratio"] == pytest.approx(row["helper"] / row["textbook"])
        assert row["agree"] == "yes"  # the helper and the textbook version compute the same
        assert row["status"] == "ok" or row["status"].startswith("MISS "), row["status"]


# ------------------------------------------------------------------------------ attention
def test_attention_references_agree_with_each_other():
    q, k, v = (torch.randn(3, 1, 6, 4) for _ in range(3))
    mask = torch.arange(6) < torch.tensor([2, 6, 4])[:, None, None, None]  # (3, 1, 1, 6)
    with bench_attention.math_only():
        math_out = bench_attention.sdpa(q, k, v, mask)
    torch.testing.assert_close(math_out, bench_attention.explicit_attention(q, k, v, mask))
    chosen, accepted = bench_attention.sdpa_backends(q, k, v, mask)
    assert "math" in accepted and (chosen in accepted or chosen == "?")


@pytest.mark.parametrize("bench", [bench_attention.bench_dot_product, bench_attention.bench_multihead])
def test_attention_bench_tiny(bench):
    with torch.inference_mode():
        with_w, without = bench(QUICK, torch.float32, (bench_attention.Case(1, 2, 6, 4),), echo=False)
    assert len(with_w.rows) == len(without.rows) == 2  # without and with a valid-length mask
    assert [r["mask"] for r in with_w.rows] == ["none", "valid lens"]
    for row in with_w.rows:
        assert row["agree"] == "yes"  # the helper and its reference compute the same thing
        assert _positive(row["helper"]) and _positive(row["math"]) and _positive(row["explicit"])
        assert row["x_math"] == pytest.approx(row["helper"] / row["math"])
    for row in without.rows:
        assert row["agree"] == "yes" and _positive(row["helper"]) and "(of " in row["backend"]


# -------------------------------------------------------------------------------- sliders
FAKE_MODULE = '''
import ipywidgets as widgets
from matplotlib.figure import Figure

from helpers.widgets import interactive_figure


def demo_views():
    fig = Figure(figsize=(2, 1.5))  # one small line plot: cheap to draw, the test stays fast
    (line,) = fig.add_subplot().plot([0, 1, 2], [0, 0, 0])
    calls.clear()

    def draw(n, temp, cmap, unit, flag):
        calls.append((n, temp, cmap, unit, flag))
        line.set_ydata([0, n * temp, len(cmap) + len(unit) + flag])
        return fig

    view = interactive_figure(
        draw, n=widgets.IntSlider(value=4, min=1, max=4, description="valid"),
        temp=widgets.FloatLogSlider(value=1.0, min=-1, max=1, description="temp"),
        cmap=widgets.Dropdown(options=["Reds", "Blues"], value="Reds"),
        unit=widgets.SelectionSlider(options=["a", "b", "c"], value="a", description="unit"),
        flag=widgets.Checkbox(value=False, description="flag"))
    def fragile(n):
        if n == 2:
            raise ValueError("no drawing for 2")
        return fig

    return {"toy": widgets.VBox([widgets.HTML("boxed"), view]),
            "fails": interactive_figure(fragile, n=widgets.IntSlider(value=1, min=0, max=4))}


calls = []
'''


@pytest.fixture
def fake_widgets(tmp_path, monkeypatch):
    pkg = tmp_path / "fake_widgets_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "toy.py").write_text(textwrap.dedent(FAKE_MODULE))
    (pkg / "broken.py").write_text("raise ImportError('half written')\n")
    (pkg / "plain.py").write_text("X = 1\n")
    (pkg / "_private.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fake_widgets_pkg"


def test_change_plan_stays_in_range_and_always_moves():
    controls = [widgets.IntSlider(value=3, min=0, max=5), widgets.FloatSlider(value=0.5, min=0, max=1, step=0.1),
                widgets.FloatLogSlider(value=10, min=0, max=2, base=10),
                widgets.SelectionSlider(options=["x", "y", "z"], value="x"),
                widgets.ToggleButtons(options=[("one", 1), ("two", 2)]), widgets.Checkbox(value=True)]
    for control in controls:
        plan = bench_sliders.change_plan(control, 12)
        assert len(plan) == 12
        attr = plan[0][0]
        values = [getattr(control, attr)] + [v for _, v in plan]
        assert all(a != b for a, b in zip(values, values[1:])), (control, values)
        for _, v in plan:
            setattr(control, attr, v)  # a value outside the range would be clipped or rejected
            assert getattr(control, attr) == pytest.approx(v)
    assert bench_sliders.change_plan(widgets.Dropdown(options=["only"]), 3) == []


def test_slider_bench_times_every_control_of_a_fake_module(fake_widgets):
    import importlib

    modules, table = bench_sliders.run(QUICK, package=fake_widgets, changes=3, warmup=0, echo=False)
    by_module = {r["module"]: r for r in modules.rows}
    assert set(by_module) == {"broken", "plain", "toy"}  # _private is not a view module
    assert by_module["broken"]["note"].startswith("import failed: ImportError")
    assert by_module["plain"]["note"] == "no demo_views()"
    assert by_module["broken"]["status"] == by_module["plain"]["status"] == "error"
    assert by_module["toy"]["views"] == 2 and by_module["toy"]["controls"] == 6
    assert _positive(by_module["toy"]["build"]) and by_module["toy"]["status"] == "ok"
    *rows, fails = table.rows
    assert [r["control"] for r in rows] == ["valid (IntSlider)", "temp (FloatLogSlider)",
                                            "cmap (Dropdown)", "unit (SelectionSlider)",
                                            "flag (Checkbox)"]
    # interactive swallows a callback's exception: the benchmark must say so, not time it
    assert fails["view"] == "toy.fails" and fails.get("compute") is None
    assert fails["status"].startswith("error: callback raised ValueError: no drawing for 2")
    assert any("toy.fails" in m for m in table.misses())
    for row in rows:
        assert row["view"] == "toy.toy"
        # +png is the whole callback; compute is it less a PNG timed alone, so it may round to 0
        assert _positive(row["png"]) and row["compute"] >= 0
        assert row["draw"] >= row["compute"] and row["png"] >= row["compute"]
        assert row["draw_p90"] >= row["draw"] and row["png_p90"] >= row["png"]
        assert row["status"] == "ok" or row["status"].startswith("MISS "), row["status"]
    calls = importlib.import_module(f"{fake_widgets}.toy").calls
    # the first draw, then per control 3 timed changes and (unless already there) a move back
    assert 1 + 5 * 3 <= len(calls) <= 1 + 5 * 4
    assert all(a != b for a, b in zip(calls, calls[1:]))  # every callback followed a real change
    assert calls[-1] == calls[0]  # every control was put back where it started


# ------------------------------------------------------------------------------ notebooks
def test_notebook_bench_runs_a_fresh_kernel_and_reads_its_peak_memory(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 01 · tiny"),
        nbformat.v4.new_code_cell("block = bytearray(300 * 2**20)  # touched: resident\nlen(block)"),
        nbformat.v4.new_code_cell("raise ValueError('stops here')"),
        nbformat.v4.new_code_cell("never = True"),
    ])
    path = tmp_path / "01_tiny.ipynb"
    nbformat.write(nb, path)
    (tmp_path / "notes.ipynb").write_text("not a numbered notebook: not run")
    before = path.read_bytes()
    (table,) = bench_notebooks.run(QUICK, folder=tmp_path, echo=False, warm_up=False)
    row, series = table.rows
    assert row["notebook"] == "01_tiny.ipynb" and series["notebook"].startswith("series (1 notebook")
    assert row["peak"] >= 300 * 2**20
    assert _positive(row["start"]) and _positive(row["cells"]) and row["wall"] >= row["cells"]
    assert row["error"].startswith("cell 2") and "ValueError" in row["error"]
    assert series["wall"] == row["wall"]
    assert path.read_bytes() == before  # never written back


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_notebook_bench_against_a_baseline_runs_each_tree_with_its_own_helpers(tmp_path):
    """--baseline: each revision's notebooks import that revision's helpers (the notebook fails
    otherwise), both are timed, and the ratio is after ÷ before."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "helpers").mkdir()
    check = ("import pathlib, helpers\n"
             "assert pathlib.Path(helpers.__file__).parents[1] == pathlib.Path.cwd().parent, "
             "helpers.__file__\nprint(helpers.WHICH)")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(check)]),
                   repo / "notebooks" / "01_tiny.ipynb")
    (repo / "helpers" / "__init__.py").write_text("WHICH = 'old'\n")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "0")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "old")
    (repo / "helpers" / "__init__.py").write_text("WHICH = 'new'\n")
    nbformat.write(nbformat.v4.new_notebook(), repo / "notebooks" / "02_only_new.ipynb")
    with pytest.raises(ValueError, match=r"baseline must be a git revision of .*, got 'nope'"):
        with bench_notebooks.revision_tree("nope", repo=repo):
            pass
    with bench_notebooks.revision_tree("HEAD", repo=repo) as tree:
        assert (tree / "helpers" / "__init__.py").read_text() == "WHICH = 'old'\n"
        (table,) = bench_notebooks.run_against(QUICK, tree, current=repo, echo=False)
    assert not tree.exists()  # the worktree is removed
    row, series = table.rows
    assert row["notebook"] == "01_tiny.ipynb" and row["error"] is None, row["error"]
    assert _positive(row["before"]) and _positive(row["after"])
    assert row["ratio"] == pytest.approx(row["after"] / row["before"])
    assert series["before"] == row["before"] and series["after"] == row["after"]
    assert any("02_only_new.ipynb: only in this tree" in note for note in table.notes)


def test_notebook_bench_against_a_baseline_alternates_which_side_runs_first(tmp_path, monkeypatch):
    """A kernel started while the last one still exits is slower: neither side may always go
    second. The order alternates by notebook and by repeat; the medians stay per side."""
    for side in ("old", "new"):
        (tmp_path / side / "notebooks").mkdir(parents=True)
        for name in ("01_a.ipynb", "02_b.ipynb"):
            nbformat.write(nbformat.v4.new_notebook(), tmp_path / side / "notebooks" / name)
    runs = []

    def fake_run(path, *, kernel_name):
        runs.append((path.parents[1].name, path.name))
        return bench_notebooks.NotebookRun(path.name, wall=2.0 if path.parents[1].name == "new" else 4.0,
                                           start=0.0, cells=0.0, peak_rss=None)

    monkeypatch.setattr(bench_notebooks, "run_notebook", fake_run)
    monkeypatch.setattr(bench_notebooks, "_warm_up", lambda kernel_name: 0.0)
    cfg = Config(notebook_repeats=2)
    (table,) = bench_notebooks.run_against(cfg, tmp_path / "old", current=tmp_path / "new", echo=False)
    assert runs == [("old", "01_a.ipynb"), ("new", "01_a.ipynb"), ("new", "01_a.ipynb"), ("old", "01_a.ipynb"),
                    ("new", "02_b.ipynb"), ("old", "02_b.ipynb"), ("old", "02_b.ipynb"), ("new", "02_b.ipynb")]
    assert [row["ratio"] for row in table.rows] == [0.5, 0.5, 0.5]


# ---------------------------------------------------------------------------------- pages
def test_page_move_plan_spreads_ranges_cycles_options_and_always_moves():
    assert bench_pages.move_plan("range", 61, 40, 5) == [0, 15, 30, 45, 60]
    assert bench_pages.move_plan("range", 61, 0, 5) == [15, 30, 45, 60, 0]  # not 0 → 0
    assert bench_pages.move_plan("range", 3, 1, 20) == [0, 1, 2]  # min(count, n) moves
    assert bench_pages.move_plan("select", 4, 2, 20) == [3, 0, 1, 2]
    assert bench_pages.move_plan("checkbox", 2, 1, 20) == [0, 1]
    assert bench_pages.move_plan("select", 1, 0, 20) == []
    for kind, count, current in [("range", 201, 10), ("range", 2, 1), ("select", 2, 1)]:
        values = [current] + bench_pages.move_plan(kind, count, current, 20)
        assert all(a != b for a, b in zip(values, values[1:])) and max(values) < count


def test_page_view_row_summarises_fake_timings():
    moves = [{"ms": float(ms), "pixels_ms": ms + 1.0, "redraw_ms": ms / 2, "redrew": True}
             for ms in range(1, 11)]  # 1..10 ms
    row = bench_pages.view_row("pooling.nw", "02_x", moves, kernel=[0.05, 0.07, 0.06])
    assert row["moves"] == 10 and row["median"] == pytest.approx(0.0055)
    assert row["p90"] == pytest.approx(0.0091) and row["max"] == pytest.approx(0.010)
    assert row["redraw"] == pytest.approx(0.00275) and row["pixels"] == pytest.approx(0.0065)
    assert row["kernel"] == pytest.approx(0.06) and row["ratio"] == pytest.approx(0.06 / 0.0055)
    assert row["status"] == "ok" and row["status_p90"] == "ok"  # ≤ 16 ms, ≤ 50 ms
    slow = bench_pages.view_row("v", "n", [dict(m, ms=m["ms"] * 4) for m in moves])
    assert slow["status"] == "MISS +38%" and slow["status_p90"] == "ok"
    assert "kernel" not in slow  # no sliders run in this invocation: the table shows —
    stale = bench_pages.view_row("v", "n", moves[:2] + [dict(moves[2], redrew=False)])
    assert stale["status"] == "error: 1 of 3 moves did not redraw"
    assert bench_pages.view_row("v", "n", [])["status"] == "n/a"


def test_pages_section_without_a_site_prints_one_line(tmp_path, capsys):
    assert bench_pages.run(QUICK, site=tmp_path) == []
    assert capsys.readouterr().out == "pages: skipped, run make site\n"
