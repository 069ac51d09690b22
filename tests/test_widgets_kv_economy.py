"""The views of notebook 11's KV cache economy draw the data they are given: the streaming
curves are running means over 8 positions (written out here), the titles' numbers are the means
past the training length and the cache ratios, the axes stay put for every state, and bad data
is refused by name."""

from __future__ import annotations

import io
import math

import matplotlib.image
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers.widgets import kv_economy as kv
from helpers.widgets import windows as ww
from helpers.widgets._common import figure_png
from helpers.widgets._record import record_figure
from helpers.widgets.page import PageView
from tests.conftest import control, shown_png
from tests.test_widgets_windows import assert_texts_readable

MODELS = ("softmax", "sink logit")
POLICIES = ("dense", "window", "sinks + window")
RECENT = (2, 4, 8, 16)
LATENT_SIZES = (4, 8, 12)
SHARED = ("mqa", "gqa", "mha")
T, L = 30, 12  # deliberately not the notebook's 72 and 48


# ---------------------------------------------------------------- hand-made data
def streaming_data(length: int = T) -> dict:
    """losses[model][policy][R]: (length,) float64, a level of each curve's own plus a
    deterministic wiggle, NaN at position 0 and at the last."""
    t = torch.arange(length, dtype=torch.float64)
    losses = {}
    for m, model in enumerate(MODELS):
        losses[model] = {}
        for p, policy in enumerate(POLICIES):
            losses[model][policy] = {}
            for r in RECENT:
                x = 0.5 + 0.3 * p + 0.2 * m + 0.01 * r + 0.1 * torch.sin(t * (1 + p) + r)
                x[0] = x[-1] = math.nan
                losses[model][policy][r] = x
    return losses


def latent_data(seeds: int = 3) -> tuple[dict, dict]:
    mean = torch.tensor([0.55, 0.85, 0.95], dtype=torch.float64)
    spread = torch.linspace(-0.03, 0.03, seeds, dtype=torch.float64)[:, None]
    mla = (mean + spread).clamp(0, 1)  # (S, P)
    accuracy = {"mla": mla,
                "mqa": torch.linspace(0.6, 0.8, seeds, dtype=torch.float64),  # (S,)
                "gqa": torch.linspace(0.9, 0.94, seeds, dtype=torch.float64),
                "mha": torch.linspace(0.97, 1.0, seeds, dtype=torch.float64)}
    return accuracy, {"mla": (8, 12, 16), "mqa": 8, "gqa": 16, "mha": 64}


# ---------------------------------------------------------------- written out
def running_mean_by_hand(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each t: the mean of the finite values among x[t − 7 … t] (fewer at the start);
    positions with none are left out."""
    ts, ys = [], []
    for t in range(len(x)):
        window = [v for v in x[max(0, t - 7):t + 1] if np.isfinite(v)]
        if window:
            ts.append(t)
            ys.append(sum(window) / len(window))
    return np.array(ts, dtype=float), np.array(ys)


def streaming_title_by_hand(recent: int, losses: dict, train_length: int) -> str:
    length = len(losses["softmax"]["dense"][recent])
    names = {"dense": "dense", "window": "window only", "sinks + window": "sinks + window"}
    out = [f"R = {recent}: mean cross-entropy over positions {train_length} … {length - 1}, "
           f"past the training length {train_length}"]
    for model in MODELS:
        parts = []
        for policy in POLICIES:
            tail = [v for v in losses[model][policy][recent][train_length:].tolist()
                    if not math.isnan(v)]
            parts.append(f"{names[policy]} {sum(tail) / len(tail):.2f}")
        out.append(f"{model} — " + ", ".join(parts))
    return "\n".join(out)


def pixels(fig: Figure) -> np.ndarray:
    return matplotlib.image.imread(io.BytesIO(figure_png(fig)))


def gid_lines(ax) -> dict:
    return {line.get_gid(): line for line in ax.lines}


# ---------------------------------------------------------------- the streaming view
def test_streaming_view_draws_the_running_means_in_every_state():
    losses = streaming_data()
    view = kv.streaming_view(losses, L)
    slider = control(view, "cache window R")
    assert slider.value == 4 and not slider.continuous_update
    assert view._controls[0].values == kv.RECENT == RECENT  # 4 states
    for r in RECENT:
        slider.value = r
        fig = view.result
        assert [ax.get_title() for ax in fig.axes] == list(MODELS)
        for ax, model in zip(fig.axes, MODELS):
            lines = gid_lines(ax)
            for policy in POLICIES:
                x, y = running_mean_by_hand(losses[model][policy][r].numpy())
                np.testing.assert_array_equal(lines[policy].get_xdata(), x)
                np.testing.assert_allclose(lines[policy].get_ydata(), y, rtol=1e-12)
                assert lines[policy].get_color() == kv.POLICY_COLORS[policy]
            assert list(lines["train"].get_xdata()) == [L, L]
            assert list(lines["evicted"].get_xdata()) == [r, r]  # moves with R
            assert lines["dense"].get_linewidth() < lines["window"].get_linewidth()  # a reference
        assert fig._suptitle.get_text() == streaming_title_by_hand(r, losses, L)


def test_running_mean_skips_nan_and_leaves_out_positions_with_none():
    x = torch.tensor([math.nan, math.nan, 1.0, 3.0] + [2.0] * 10 + [math.nan] * 9,
                     dtype=torch.float64)
    losses = {m: {p: {r: x.clone() for r in RECENT} for p in POLICIES} for m in MODELS}
    fig = kv.draw_streaming(2, losses, 4)
    line = gid_lines(fig.axes[0])["dense"]
    want_t, want_y = running_mean_by_hand(x.numpy())
    assert want_t[0] == 2 and want_t[-1] == 14 + 7 - 1  # the last 8 NaNs' windows reach a 2.0
    np.testing.assert_array_equal(line.get_xdata(), want_t)
    np.testing.assert_allclose(line.get_ydata(), want_y)
    assert line.get_ydata()[:3].tolist() == [1.0, 2.0, 2.0]


@pytest.mark.parametrize("recent, want", [
    (4, "R = 4: mean cross-entropy over positions 48 … 95, past the training length 48\n"
        "softmax — dense 1.00, window only 1.57, sinks + window 0.96\n"
        "sink logit — dense 1.00, window only 0.97, sinks + window 0.95"),
    (16, "R = 16: mean cross-entropy over positions 48 … 95, past the training length 48\n"
         "softmax — dense 1.00, window only 2.25, sinks + window 1.12\n"
         "sink logit — dense 1.00, window only 0.50, sinks + window 0.25"),
    (2, "R = 2: mean cross-entropy over positions 48 … 95, past the training length 48\n"
        "softmax — dense 1.00, window only 0.10, sinks + window 0.00\n"
        "sink logit — dense 1.00, window only 3.00, sinks + window 1.00"),
])
def test_streaming_suptitle_states_the_means_past_the_training_length(recent, want):
    # before 48 the curves are 9.0 (left out of the means), past it constant but for a NaN
    values = {("softmax", "window", 4): 1.57, ("softmax", "sinks + window", 4): 0.96,
              ("sink logit", "window", 4): 0.97, ("sink logit", "sinks + window", 4): 0.95,
              ("softmax", "window", 16): 2.25, ("softmax", "sinks + window", 16): 1.125,
              ("sink logit", "window", 16): 0.5, ("sink logit", "sinks + window", 16): 0.25,
              ("softmax", "window", 2): 0.1, ("softmax", "sinks + window", 2): 0.0,
              ("sink logit", "window", 2): 3.0, ("sink logit", "sinks + window", 2): 1.0}
    losses = {}
    for model in MODELS:
        losses[model] = {}
        for policy in POLICIES:
            losses[model][policy] = {}
            for r in RECENT:
                x = torch.full((96,), 9.0, dtype=torch.float64)
                x[48:] = values.get((model, policy, r), 1.0)
                x[-1] = math.nan
                losses[model][policy][r] = x
    fig = kv.draw_streaming(recent, losses, 48)
    # 1.125 rounds to 1.12 (half to even, as format does): the title says what format says
    assert fig._suptitle.get_text() == want


def test_streaming_axes_are_fixed_over_every_state_and_cover_every_curve():
    losses = streaming_data()
    fig = kv.draw_streaming(2, losses, L)
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in fig.axes]
    assert limits[0] == limits[1]
    (x0, x1), (y0, y1) = limits[0]
    assert (x0, x1) == (0.0, T - 1) and y0 == 0.0
    highest = max(running_mean_by_hand(losses[m][p][r].numpy())[1].max()
                  for m in MODELS for p in ("window", "sinks + window") for r in RECENT)
    tall = streaming_data()  # a dense curve far above the others leaves the range as it was:
    for m in MODELS:  # the range is made for the curves that R moves, dense is a reference
        for r in RECENT:
            tall[m]["dense"][r] = tall[m]["dense"][r] + 10.0
    assert kv.draw_streaming(2, tall, L).axes[0].get_ylim() == (y0, y1)
    assert highest < y1 <= highest * 1.1 + 0.1
    for r in RECENT:
        assert kv.draw_streaming(r, losses, L, fig=fig) is fig
        assert [(ax.get_xlim(), ax.get_ylim()) for ax in fig.axes] == limits
    view = kv.streaming_view(losses, L)
    for r in RECENT:
        control(view, "cache window R").value = r
        assert [(ax.get_xlim(), ax.get_ylim()) for ax in view.result.axes] == limits


def test_streaming_view_copies_its_data():
    losses = streaming_data()
    view = kv.streaming_view(losses, L, recent=np.int64(8))
    want = running_mean_by_hand(losses["softmax"]["window"][8].numpy())[1]
    losses["softmax"]["window"][8].fill_(5.0)
    control(view, "cache window R").value = 2
    control(view, "cache window R").value = 8
    np.testing.assert_allclose(gid_lines(view.result.axes[0])["window"].get_ydata(), want)


# ---------------------------------------------------------------- the latent view
def latent_title_by_hand(d: int, accuracy: dict, numbers: dict) -> str:
    i = LATENT_SIZES.index(d)
    a = accuracy["mla"][:, i].tolist()
    n, full = numbers["mla"][i], numbers["mha"]
    seeds = f"seeds {min(a):.2f}–{max(a):.2f}" if len(a) > 1 else "one seed"
    ratio = f"{full / n:.1f}".removesuffix(".0")
    others = ", ".join(f"{arch.upper()} {accuracy[arch].mean().item():.2f} at {numbers[arch]}"
                       for arch in SHARED)
    return (f"MLA, d_c = {d}: accuracy {sum(a) / len(a):.2f} ({seeds}), caching {n} numbers a "
            f"token and layer ({ratio}× less than MHA)\n"
            f"the others (mean accuracy at numbers cached): {others}")


def test_latent_view_draws_the_seeds_the_means_and_the_cache_in_every_state():
    accuracy, numbers = latent_data()
    view = kv.latent_view(accuracy, numbers)
    slider = control(view, "latent size d_c")
    assert slider.value == 4 and not slider.continuous_update
    assert view._controls[0].values == kv.LATENT_SIZES == LATENT_SIZES  # 3 states
    mla = accuracy["mla"].numpy()
    for i, d in enumerate(LATENT_SIZES):
        slider.value = d
        fig = view.result
        left, bars = fig.axes
        lines = gid_lines(left)
        for s in range(3):  # x: the numbers each MLA model caches
            np.testing.assert_array_equal(lines[f"seed {s}"].get_xdata(), numbers["mla"])
            np.testing.assert_array_equal(lines[f"seed {s}"].get_ydata(), mla[s])
        np.testing.assert_allclose(lines["mla mean"].get_ydata(), mla.mean(0), rtol=1e-12)
        for arch in SHARED:
            a = accuracy[arch].numpy()
            assert list(lines[f"{arch} mean"].get_xdata()) == [numbers[arch]]
            assert lines[f"{arch} mean"].get_ydata()[0] == pytest.approx(a.mean(), rel=1e-12)
            assert list(lines[f"{arch} range"].get_xdata()) == [numbers[arch]] * 2
            np.testing.assert_allclose(lines[f"{arch} range"].get_ydata(), [a.min(), a.max()])
        n = numbers["mla"][i]
        assert list(lines["shown"].get_xdata()) == [n, n]
        assert list(lines["current"].get_xdata()) == [n]
        assert lines["current"].get_ydata()[0] == pytest.approx(mla[:, i].mean())
        assert [p.get_width() for p in bars.patches] == [64, 16, 8, n]
        ratio = f"{64 / n:.1f}".removesuffix(".0")
        assert sorted(t.get_text() for t in bars.texts) == sorted(
            [" 64", " 16", " 8", f" {n}  ({ratio}× less)"])
        assert bars.get_title() == f"MLA with d_c = {d} caches {ratio}× less than MHA"
        assert fig._suptitle.get_text() == latent_title_by_hand(d, accuracy, numbers)
        legend = [t.get_text() for t in left.get_legend().get_texts()]
        assert legend == ["MLA, each seed", "MLA (d_c = 4, 8, 12), mean over seeds",
                          "MQA", "GQA", "MHA"]
        assert left.get_legend().get_title().get_text() == "MQA, GQA, MHA: mean, bar min–max over seeds"


@pytest.mark.parametrize("d, want", [
    (4, "MLA, d_c = 4: accuracy 0.55 (seeds 0.52–0.58), caching 8 numbers a token and layer "
        "(8× less than MHA)"),
    (8, "MLA, d_c = 8: accuracy 0.85 (seeds 0.82–0.88), caching 12 numbers a token and layer "
        "(5.3× less than MHA)"),
    (12, "MLA, d_c = 12: accuracy 0.95 (seeds 0.92–0.98), caching 16 numbers a token and layer "
         "(4× less than MHA)"),
])
def test_latent_suptitle_states_the_numbers(d, want):
    title = kv.draw_latent(d, *latent_data())._suptitle.get_text()
    assert title == want + ("\nthe others (mean accuracy at numbers cached): MQA 0.70 at 8, "
                            "GQA 0.92 at 16, MHA 0.98 at 64")


def test_latent_with_one_seed_draws_no_seed_lines_no_bars_and_says_more():
    accuracy, numbers = latent_data(seeds=1)
    fig = kv.draw_latent(12, accuracy, {**numbers, "mha": 8})
    assert fig._suptitle.get_text().startswith(
        "MLA, d_c = 12: accuracy 0.92 (one seed), caching 16 numbers a token and layer (2× more "
        "than MHA)")
    left = fig.axes[0]
    assert not any(g.startswith("seed") or g.endswith("range") for g in gid_lines(left))
    assert [t.get_text() for t in left.get_legend().get_texts()] == [
        "MLA (d_c = 4, 8, 12)", "MQA", "GQA", "MHA"]  # only what is drawn
    assert left.get_legend().get_title().get_text() == ""


def test_latent_axes_are_fixed_over_every_state():
    accuracy, numbers = latent_data()
    fig = kv.draw_latent(4, accuracy, numbers)
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in fig.axes]
    assert limits[0][1] == (0.0, 1.02) and fig.axes[0].get_xscale() == "log"
    assert limits[0][0][0] < 8 and 64 < limits[0][0][1]  # every cache size inside
    assert list(fig.axes[0].get_xticks()) == [8, 12, 16, 64]
    assert limits[1][0][1] > 64
    for d in LATENT_SIZES:
        assert kv.draw_latent(d, accuracy, numbers, fig=fig) is fig
        assert [(ax.get_xlim(), ax.get_ylim()) for ax in fig.axes] == limits


def test_latent_redraws_other_seed_counts_and_copies_its_data():
    accuracy, numbers = latent_data()
    fig = kv.draw_latent(4, accuracy, numbers)
    one, _ = latent_data(seeds=1)
    assert kv.draw_latent(4, one, numbers, fig=fig) is fig  # rebuilt: no seed lines
    assert not [g for g in gid_lines(fig.axes[0]) if g.startswith("seed")]
    assert record_figure(fig) == record_figure(kv.draw_latent(4, one, numbers))
    two, _ = latent_data(seeds=2)
    assert kv.draw_latent(4, two, numbers, fig=fig) is fig  # rebuilt: two seed lines
    assert sorted(g for g in gid_lines(fig.axes[0]) if g.startswith("seed")) == ["seed 0", "seed 1"]
    other = {**numbers, "gqa": 32}  # another cache size: rebuilt with its tick
    assert 32 in kv.draw_latent(4, two, other, fig=fig).axes[0].get_xticks()
    view = kv.latent_view(accuracy, numbers, latent_size=np.int64(8))
    want = accuracy["mla"].mean(0).numpy().copy()
    accuracy["mla"].fill_(0.0)
    control(view, "latent size d_c").value = 4
    np.testing.assert_allclose(gid_lines(view.result.axes[0])["mla mean"].get_ydata(), want)


# ---------------------------------------------------------------- both views
def views():
    losses = streaming_data()
    accuracy, numbers = latent_data()
    return {"streaming": (kv.streaming_view(losses, L), "cache window R", RECENT,
                          lambda v, fig=None: kv.draw_streaming(v, losses, L, fig=fig)),
            "latent": (kv.latent_view(accuracy, numbers), "latent size d_c", LATENT_SIZES,
                       lambda v, fig=None: kv.draw_latent(v, accuracy, numbers, fig=fig))}


@pytest.mark.parametrize("name", ["streaming", "latent"])
def test_every_state_changes_the_picture_and_the_png_fallback_is_drawn(name):
    view, label, values, _ = views()[name]
    slider = control(view, label)
    start = slider.value
    seen = []
    for v in values:
        slider.value = v
        seen.append(pixels(view.result))
    for i, a in enumerate(seen):
        assert not any(np.array_equal(a, b) for b in seen[i + 1:])
    slider.value = start
    assert np.array_equal(pixels(view.result), seen[values.index(start)])
    assert np.array_equal(matplotlib.image.imread(io.BytesIO(shown_png(view))),
                          seen[values.index(start)])
    assert [c["label"] for c in view.scene_data()["controls"]] == [label]


@pytest.mark.parametrize("name", ["streaming", "latent"])
def test_redrawing_in_place_is_a_fresh_drawing(name):
    _, _, values, draw = views()[name]
    fig = draw(values[-1])
    artists = [list(ax.lines) for ax in fig.axes]
    for v in (values[0], values[2], values[1], values[-1]):
        assert draw(v, fig=fig) is fig
        assert [list(ax.lines) for ax in fig.axes] == artists  # updated in place
        assert record_figure(fig) == record_figure(draw(v))
    assert np.array_equal(pixels(fig), pixels(draw(values[-1])))
    foreign = ww.draw_reach(3, 2)  # another view's figure: cleared and redrawn
    assert draw(values[1], fig=foreign) is foreign
    assert foreign.get_label() == fig.get_label() and len(foreign.axes) == 2
    same_size = Figure(figsize=fig.get_size_inches())  # a foreign figure of the view's size
    same_size.subplots(2, 2)
    assert record_figure(draw(values[1], fig=same_size)) == record_figure(draw(values[1]))


@pytest.mark.parametrize("name, value", [("streaming", 2), ("streaming", 16), ("latent", 4),
                                         ("latent", 12)])
def test_texts_are_no_smaller_than_x_small_inside_the_figure_and_apart(name, value):
    assert_texts_readable(views()[name][3](value), 15)


def test_demo_views():
    out = kv.demo_views()
    assert list(out) == ["streaming", "latent"]
    for name, view in out.items():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
        assert view.result.get_label() == f"kv_economy.{name}"
    assert control(out["streaming"], "cache window R").value == 4
    assert control(out["latent"], "latent size d_c").value == 4


# ---------------------------------------------------------------- bad data
def _bad_streaming(change, train_length=L):
    losses = streaming_data()
    change(losses)
    return lambda: kv.draw_streaming(4, losses, train_length)


def _bad_latent(change):
    accuracy, numbers = latent_data()
    change(accuracy, numbers)
    return lambda: kv.draw_latent(4, accuracy, numbers)


@pytest.mark.parametrize("call, match", [
    (lambda: kv.draw_streaming(3, streaming_data(), L), r"^recent must be one of RECENT \(2, 4, 8, 16\), got 3"),
    (lambda: kv.draw_streaming(4.0, streaming_data(), L), r"^recent must be one of RECENT .* got 4.0"),
    (lambda: kv.streaming_view(streaming_data(), L, recent=True), r"^recent must be one of RECENT .* got True"),
    (lambda: kv.draw_streaming(4, [], L), r"^losses must be a dict keyed by MODELS \('softmax', 'sink logit'\), got list"),
    (_bad_streaming(lambda d: d.pop("sink logit")), r"^losses must have exactly the keys MODELS"),
    (_bad_streaming(lambda d: d["softmax"].pop("dense")), r"^losses\['softmax'\] must have exactly the keys POLICIES"),
    (_bad_streaming(lambda d: d["softmax"]["window"].update({32: d["softmax"]["window"][2]})), r"^losses\['softmax'\]\['window'\] must have exactly the keys RECENT"),
    (_bad_streaming(lambda d: d["sink logit"]["dense"].update({8: d["sink logit"]["dense"][8].numpy()})), r"^losses\['sink logit'\]\['dense'\]\[8\] must be a torch.Tensor .* got ndarray"),
    (_bad_streaming(lambda d: d["softmax"]["dense"].update({2: torch.ones(T, dtype=torch.long)})), r"^losses\['softmax'\]\['dense'\]\[2\] must be a floating tensor .* got dtype torch.int64"),
    (_bad_streaming(lambda d: d["softmax"]["dense"].update({2: torch.ones(T, device="meta")})), r"^losses\['softmax'\]\['dense'\]\[2\] must be on a device that holds data, got meta"),
    (_bad_streaming(lambda d: d["softmax"]["dense"].update({4: torch.ones(T + 1)})), r"^losses\['softmax'\]\['dense'\]\[4\] must have shape \(T,\) = \(30,\) as the others, got \(31,\)"),
    (_bad_streaming(lambda d: d["softmax"]["dense"].update({2: torch.ones(2, T)})), r"^losses\['softmax'\]\['dense'\]\[2\] must have shape \(T,\) with T >= 2, got \(2, 30\)"),
    (_bad_streaming(lambda d: d["softmax"]["window"][4].__setitem__(3, math.inf)), r"^losses\['softmax'\]\['window'\]\[4\] must hold cross-entropies >= 0 .* got inf at position 3"),
    (_bad_streaming(lambda d: d["softmax"]["window"][4].__setitem__(5, -0.5)), r"^losses\['softmax'\]\['window'\]\[4\] must hold cross-entropies >= 0 .* got -0.5 at position 5"),
    (_bad_streaming(lambda d: d["sink logit"]["window"][16][L:].fill_(math.nan)), r"^losses\['sink logit'\]\['window'\]\[16\] must have a value at some position in train_length … T − 1 = 12 … 29, got NaN"),
    (_bad_streaming(lambda d: None, train_length=T), r"^train_length must be an int in \[1, T − 1\] = \[1, 29\] \(T = 30 positions\), got 30"),
    (_bad_streaming(lambda d: None, train_length=0), r"^train_length must be an int in \[1, T − 1\] .* got 0"),
    (_bad_streaming(lambda d: None, train_length=12.0), r"^train_length must be an int .* got 12.0"),
    (lambda: kv.streaming_view(streaming_data(), None), r"^train_length must be an int .* got None"),
    (lambda: kv.draw_streaming(4, streaming_data(), L, fig="fig"), r"^fig must be a matplotlib Figure or None, got str"),
    (lambda: kv.draw_latent(3, *latent_data()), r"^latent_size must be one of LATENT_SIZES \(4, 8, 12\), got 3"),
    (lambda: kv.latent_view(*latent_data(), latent_size=np.float64(4)), r"^latent_size must be one of LATENT_SIZES .* got"),
    (lambda: kv.draw_latent(4, (), latent_data()[1]), r"^accuracy must be a dict keyed by the architectures \('mla', 'mqa', 'gqa', 'mha'\), got tuple"),
    (_bad_latent(lambda a, n: a.pop("gqa")), r"^accuracy must have exactly the keys the architectures \('mla', 'mqa', 'gqa', 'mha'\), got \['mha', 'mla', 'mqa'\]"),
    (_bad_latent(lambda a, n: a.update(mla=a["mla"][:, 1:])), r"^accuracy\['mla'\] must have shape \(seeds, len\(LATENT_SIZES\)\) = \(S, 3\) with S >= 1, got \(3, 2\)"),
    (_bad_latent(lambda a, n: a.update(mla=a["mla"][:0])), r"^accuracy\['mla'\] must have shape .* got \(0, 3\)"),
    (_bad_latent(lambda a, n: a.update(mla=a["mla"] > 0.5)), r"^accuracy\['mla'\] must be a floating tensor .* got dtype torch.bool"),
    (_bad_latent(lambda a, n: a.update(mha=a["mha"][:2])), r"^accuracy\['mha'\] must have shape \(seeds,\) = \(3,\), as accuracy\['mla'\] has 3 seeds, got \(2,\)"),
    (_bad_latent(lambda a, n: a.update(mqa=a["mqa"].numpy())), r"^accuracy\['mqa'\] must be a torch.Tensor \(seeds,\), got ndarray"),
    (_bad_latent(lambda a, n: a["mla"].__setitem__((0, 0), 1.5)), r"^accuracy\['mla'\] must hold accuracies in \[0, 1\], got 1.5"),
    (_bad_latent(lambda a, n: a["mha"].__setitem__(1, math.nan)), r"^accuracy\['mha'\] must hold accuracies in \[0, 1\], got nan"),
    (_bad_latent(lambda a, n: a["gqa"].__setitem__(0, -0.1)), r"^accuracy\['gqa'\] must hold accuracies in \[0, 1\], got -0.1"),
    (lambda: kv.draw_latent(4, latent_data()[0], None), r"^numbers must be a dict keyed by the architectures .* got NoneType"),
    (_bad_latent(lambda a, n: n.update(gqa4=32)), r"^numbers must have exactly the keys the architectures"),
    (_bad_latent(lambda a, n: n.update(mha=0)), r"^numbers\['mha'\] must be an int >= 1 \(numbers cached per token and layer\), got 0"),
    (_bad_latent(lambda a, n: n.update(mqa=8.0)), r"^numbers\['mqa'\] must be an int >= 1 .* got 8.0"),
    (_bad_latent(lambda a, n: n.update(mla=(8, 12))), r"^numbers\['mla'\] must be a tuple of 3 ints, one per d_c of LATENT_SIZES \(4, 8, 12\), got length 2"),
    (_bad_latent(lambda a, n: n.update(mla=torch.arange(3))), r"^numbers\['mla'\] must be a tuple of 3 ints, .* got Tensor"),
    (_bad_latent(lambda a, n: n.update(mla=(8, 12, True))), r"^numbers\['mla'\]\[2\] must be an int >= 1 .* got True"),
    (lambda: kv.draw_latent(4, *latent_data(), fig=[]), r"^fig must be a matplotlib Figure or None, got list"),
])
def test_bad_data_is_refused_naming_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()
