"""The views of notebook 12 draw what the formulas say: the state of linear attention written
by the additive update and by the delta rule, with each pair's retrieval error, and softmax's
weights beside their random-feature estimate and its error against the number of features."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from helpers import recall
from helpers.linear_attention import recurrent_states
from helpers.widgets import linear as lw
from helpers.widgets.page import PageView
from tests.conftest import control, shown_png

T, D, V = 8, 4, 4


# ---------------------------------------------------------------- formulas written out
def states_by_hand(step: int) -> tuple[np.ndarray, np.ndarray]:
    """S_t of the additive update (S += k vᵀ) and of the delta rule with β = 1
    (S += k (v − Sᵀk)ᵀ) after ``step`` writes of the example, in NumPy."""
    keys, values = (t.numpy() for t in lw.memory_example())
    additive, delta = np.zeros((D, V)), np.zeros((D, V))
    for k, v in zip(keys[:step], values[:step]):
        additive += np.outer(k, v)
        delta += np.outer(k, v - delta.T @ k)
    return additive, delta


def errors_by_hand(step: int) -> np.ndarray:
    """|S_tᵀ k_j − v_j| for each write j made and not followed by a write of the same key."""
    keys, values = (t.numpy() for t in lw.memory_example())
    out = np.full((2, T), np.nan)
    for r, S in enumerate(states_by_hand(step)):
        for j in range(step):
            if lw.KEY_NAMES[j] not in lw.KEY_NAMES[j + 1:step]:
                out[r, j] = np.linalg.norm(S.T @ keys[j] - values[j])
    return out


def softmax_by_hand() -> np.ndarray:
    q, k, _ = (t.numpy() for t in lw.softmax_example())
    s = q @ k.T / math.sqrt(q.shape[1])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rf_weights_by_hand(num_features: int, seed: int) -> np.ndarray:
    """φ(x) = exp(W x − |x|²/2)/√F with x = q/D^¼ (and k/D^¼), W (F, D) standard normal drawn
    as random_projection draws it; weights φ(q_i)·φ(k_j) normalised over j."""
    q, k, _ = (t.numpy() for t in lw.softmax_example())
    d = q.shape[1]
    W = torch.randn(num_features, d, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64).numpy()

    def phi(x):
        x = x / d ** 0.25
        return np.exp(x @ W.T - (x * x).sum(axis=1, keepdims=True) / 2) / math.sqrt(num_features)

    kernel = phi(q) @ phi(k).T
    return kernel / kernel.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------- the example of writes
def test_memory_example_is_unit_keys_with_one_key_written_twice_and_overlaps():
    keys, values = lw.memory_example()
    assert keys.shape == (T, D) and values.shape == (T, V)
    assert keys.dtype == values.dtype == torch.float64
    torch.testing.assert_close(keys.norm(dim=1), torch.ones(T, dtype=torch.float64))
    assert lw.KEY_NAMES.count("a") == 2 and len(set(lw.KEY_NAMES)) == T - 1
    first, again = [j for j, n in enumerate(lw.KEY_NAMES) if n == "a"]
    assert torch.equal(keys[first], keys[again]) and not torch.equal(values[first], values[again])
    cosines = keys @ keys.T  # (T, T)
    overlapping = [(i, j) for i in range(T) for j in range(i) if 1e-12 < abs(cosines[i, j]) < 1 - 1e-12]
    assert len(overlapping) >= 4  # keys that interfere, not only orthogonal or equal ones
    assert torch.equal(values, (values * 10).round() / 10)  # one decimal, to read
    keys[0] = 7.0  # a fresh copy: the view's data do not change
    assert lw.memory_example()[0][0, 0] == 1.0


@pytest.mark.parametrize("step", range(T + 1))
def test_retrieval_errors_match_the_formulas(step):
    got = lw.retrieval_errors(step)
    assert got.shape == (2, T) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), errors_by_hand(step), atol=1e-12)


def test_the_delta_rule_replaces_where_the_additive_update_sums():
    keys, values = lw.memory_example()
    again = lw.KEY_NAMES.index("a", 1) + 1  # the step that writes a a second time (5)
    errors = lw.retrieval_errors(again)
    # additive: a retrieves v_old + v_new (no other key overlaps a yet): the error is |v_old|
    assert errors[0, again - 1].item() == pytest.approx(values[0].norm().item(), abs=1e-12)
    assert errors[1, again - 1].item() == pytest.approx(0.0, abs=1e-12)  # delta: replaced
    assert math.isnan(errors[0, 0]) and math.isnan(errors[1, 0])  # the old pair: superseded
    for step in range(1, T + 1):  # the delta rule is exact for the write just made
        assert lw.retrieval_errors(step)[1, step - 1].item() == pytest.approx(0.0, abs=1e-12)
    # overlapping keys interfere: c overlaps b, and after c the additive update misses both
    c = lw.KEY_NAMES.index("c") + 1
    assert (lw.retrieval_errors(c)[0, 1:c] > 1.0).all()
    assert (lw.retrieval_errors(c - 1)[:, :c - 1] < 1e-12).all()  # orthogonal so far: exact


def test_retrieval_errors_are_nan_for_writes_not_made():
    assert torch.isnan(lw.retrieval_errors(0)).all()
    errors = lw.retrieval_errors(3)
    assert torch.isnan(errors[:, 3:]).all() and not torch.isnan(errors[:, :3]).any()


# ---------------------------------------------------------------- the states view
def heatmaps(fig: Figure) -> list[np.ndarray]:
    return [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]


def bars(fig: Figure) -> np.ndarray:
    """The bar heights (2, T): additive, delta rule."""
    ax = fig.axes[-1]
    return np.array([p.get_height() for p in ax.patches if p.get_gid() != "current"]).reshape(2, T)


def texts(fig: Figure) -> dict[str, str]:
    return {t.get_gid(): t.get_text() for t in fig.axes[-1].texts}


def test_states_view_draws_both_states_and_the_errors_at_every_step():
    view = lw.states_view()
    slider = control(view, "writes made t")
    assert (slider.min, slider.max, slider.step, slider.value) == (0, T, 1, 0)
    assert view._controls[0].values == tuple(range(T + 1))  # 9 states
    keys, values = lw.memory_example()
    additive = recurrent_states(keys[None], values[None])[0]  # (T, D, V)
    delta = recurrent_states(keys[None], values[None], beta=1.0)[0]
    for step in range(T + 1):
        slider.value = step
        fig = view.result
        got = heatmaps(fig)
        assert len(got) == 2 and got[0].shape == (D, V)
        want = (np.zeros((D, V)), np.zeros((D, V))) if step == 0 else (
            additive[step - 1].numpy(), delta[step - 1].numpy())
        np.testing.assert_allclose(got[0], want[0], atol=1e-12)
        np.testing.assert_allclose(got[1], want[1], atol=1e-12)
        np.testing.assert_allclose(got, states_by_hand(step), atol=1e-12)
        for ax, S in zip([ax for ax in fig.axes if ax.images], want):  # each cell's number
            cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
                     for t in ax.texts}
            assert len(cells) == D * V
            assert all(cells[i, j] == format(S[i, j] + 0.0, ".1f") for i in range(D) for j in range(V))
        errors = errors_by_hand(step)
        np.testing.assert_allclose(bars(fig), np.nan_to_num(errors), atol=1e-12)
        labels = texts(fig)
        for r in range(2):
            for j in range(T):
                want_label = "" if np.isnan(errors[r, j]) else f"{errors[r, j]:.2f}"
                assert labels[f"error {r} {j}"] == want_label
        assert labels["replaced 0"] == ("replaced\nat 5" if step >= 5 else "")
        title = fig._suptitle.get_text()
        if step == 0:
            assert title == "step t = 0: nothing written yet, S₀ = 0"
        else:
            v = ", ".join(f"{x:.1f}" for x in values[step - 1].tolist())
            again = " again" if step == 5 else ""
            assert title == f"step t = {step}: wrote key {lw.KEY_NAMES[step - 1]}{again} with value ({v})"
        (shade,) = [p for p in fig.axes[-1].patches if p.get_gid() == "current"]
        assert shade.get_visible() == (step > 0)
        if step:
            assert shade.get_x() == pytest.approx(step - 1.5)  # behind write `step`, at x = step − 1


def test_states_colour_scale_and_error_axis_are_fixed_and_cover_every_step():
    fig = lw.draw_states(0)
    limits = {ax.images[0].get_clim() for ax in fig.axes if ax.images}
    (low, high), = limits
    assert low == -high
    _, _, states = lw._memory()
    assert states.abs().max().item() <= high < states.abs().max().item() + 0.5  # nothing saturates
    top = fig.axes[-1].get_ylim()
    worst = max(np.nanmax(np.nan_to_num(errors_by_hand(t))) for t in range(T + 1))
    assert top[0] == 0 and worst <= top[1] < worst + 1
    for step in range(1, T + 1):
        lw.draw_states(step, fig=fig)
        assert {ax.images[0].get_clim() for ax in fig.axes if ax.images} == {(low, high)}
        assert fig.axes[-1].get_ylim() == top


def test_draw_states_reuses_its_figure_and_redraws_a_foreign_one():
    fig = lw.draw_states(2)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    place = [ax.get_position().bounds for ax in fig.axes]
    assert lw.draw_states(6, fig=fig) is fig
    assert [ax.images[0] for ax in fig.axes if ax.images] == images  # updated in place
    assert [ax.get_position().bounds for ax in fig.axes] == place  # laid out once, kept
    foreign = Figure()
    foreign.add_subplot().plot([0, 1])
    out = lw.draw_states(6, fig=foreign)
    assert out is foreign
    np.testing.assert_allclose(heatmaps(out), states_by_hand(6), atol=1e-12)
    np.testing.assert_allclose(bars(out), np.nan_to_num(errors_by_hand(6)), atol=1e-12)


# ---------------------------------------------------------------- random features
def test_softmax_example_matches_the_formula_and_is_fresh():
    q, k, w = lw.softmax_example()
    assert q.shape == (8, 4) and k.shape == (8, 4) and w.shape == (8, 8)
    assert q.dtype == k.dtype == w.dtype == torch.float64
    np.testing.assert_allclose(w.numpy(), softmax_by_hand(), atol=1e-12)
    w[0, 0] = 5.0
    assert lw.softmax_example()[2][0, 0] < 1


@pytest.mark.parametrize("num_features, seed", [(1, 0), (3, 7), (16, 0), (1024, 19), (100, 2**40)])
def test_random_feature_weights_match_the_formula(num_features, seed):
    got = lw.random_feature_weights(num_features, seed)
    assert got.shape == (8, 8) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), rf_weights_by_hand(num_features, seed), rtol=1e-10)
    torch.testing.assert_close(got.sum(dim=1), torch.ones(8, dtype=torch.float64))
    assert (got > 0).all()


def test_one_feature_gives_every_query_the_same_weights():
    """φ(q)·φ(k) = φ(q) φ(k) with F = 1: normalised over k, the query cancels out."""
    w = lw.random_feature_weights(1, 5)
    torch.testing.assert_close(w, w[:1].expand(8, 8))


def test_random_feature_errors_are_the_weights_errors_and_shrink_with_f():
    errors = lw.random_feature_errors()
    assert errors.shape == (len(lw.FEATURE_COUNTS), lw.NUM_SEEDS) == (11, 20)
    exact = softmax_by_hand()
    for i, n in enumerate(lw.FEATURE_COUNTS):
        for s in (0, 13):
            want = np.abs(rf_weights_by_hand(n, s) - exact).mean()
            assert errors[i, s].item() == pytest.approx(want, rel=1e-10)
    median = errors.median(dim=1).values
    assert median[-1] < median[4] < median[0]  # F = 1024 < F = 16 < F = 1
    assert median[-1] < median[0] / 3
    uniform = np.abs(exact - 1 / 8).mean()  # weights that ignore the keys
    assert median[0] > uniform > median[-1]  # one feature is worse than that; 1024 better
    errors[0, 0] = -1.0  # a fresh copy
    assert lw.random_feature_errors()[0, 0] > 0


# ---------------------------------------------------------------- the features view
def curve_parts(fig: Figure):
    ax = fig.axes[-1]
    (band,) = ax.collections
    lines = {line.get_label(): line for line in ax.lines}
    return ax, band, lines


def test_features_view_draws_softmax_the_estimate_and_the_error_curve():
    view = lw.features_view()
    slider = control(view, "random features F")
    assert slider.value == 16
    assert view._controls[0].values == lw.FEATURE_COUNTS == tuple(2**i for i in range(11))
    errors = lw.random_feature_errors().numpy()
    exact = softmax_by_hand()
    for n in lw.FEATURE_COUNTS:
        slider.value = n
        fig = view.result
        got = heatmaps(fig)
        assert len(got) == 2
        np.testing.assert_allclose(got[0], exact, atol=1e-12)
        np.testing.assert_allclose(got[1], rf_weights_by_hand(n, 0), rtol=1e-10)
        assert {ax.images[0].get_clim() for ax in fig.axes if ax.images} == {(0.0, 1.0)}
        ax, band, lines = curve_parts(fig)
        np.testing.assert_allclose(lines["median"].get_xdata(), lw.FEATURE_COUNTS)
        np.testing.assert_allclose(lines["median"].get_ydata(), np.median(errors, axis=1))
        dot = lines["seed 0 (shown)"]
        error = np.abs(rf_weights_by_hand(n, 0) - exact).mean()
        assert list(dot.get_xdata()) == [n]
        assert dot.get_ydata()[0] == pytest.approx(error, rel=1e-10)
        assert dot.get_ydata()[0] == pytest.approx(errors[lw.FEATURE_COUNTS.index(n), 0], rel=1e-12)
        assert lines["uniform weights 1/K"].get_ydata()[0] == pytest.approx(np.abs(exact - 1 / 8).mean())
        assert ax.get_title() == f"F = {n}: mean |error| {error:.3f}"
        titles = [a.get_title() for a in fig.axes if a.images]
        assert titles == ["softmax(q·k/√D)", f"random features, F = {n}"]


def test_the_error_band_spans_the_seeds_and_the_axes_are_fixed():
    fig = lw.draw_features(1)
    ax, band, _ = curve_parts(fig)
    errors = lw.random_feature_errors().numpy()
    outline = band.get_paths()[0].vertices  # along the bottom edge, back along the top
    for x, low, high in zip(lw.FEATURE_COUNTS, errors.min(axis=1), errors.max(axis=1)):
        ys = outline[np.isclose(outline[:, 0], x), 1]
        assert np.isclose(ys.min(), low) and np.isclose(ys.max(), high)
    limits = (ax.get_xlim(), ax.get_ylim(), ax.get_xscale(), ax.get_yscale())
    assert limits[2:] == ("log", "log")
    assert limits[1][0] < errors.min() and errors.max() < limits[1][1]  # every seed inside
    for n in (2, 64, 1024):
        lw.draw_features(n, fig=fig)
        assert (ax.get_xlim(), ax.get_ylim(), ax.get_xscale(), ax.get_yscale()) == limits


def test_draw_features_takes_any_f_up_to_1024_and_reuses_its_figure():
    fig = lw.draw_features(16)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert lw.draw_features(100, fig=fig) is fig  # not a slider value: drawn all the same
    assert [ax.images[0] for ax in fig.axes if ax.images] == images
    np.testing.assert_allclose(heatmaps(fig)[1], rf_weights_by_hand(100, 0), rtol=1e-10)
    foreign = lw.draw_states(3)  # another view's figure: cleared and redrawn
    out = lw.draw_features(np.int64(8), fig=foreign)
    assert out is foreign and len(heatmaps(out)) == 2 and heatmaps(out)[0].shape == (8, 8)


# ---------------------------------------------------------------- the recall view
KINDS = recall.KINDS
P = len(lw.PAIR_COUNTS)


def recall_data(seeds: int = 3) -> tuple[dict, dict]:
    """Hand-made data (no training): accuracy (seeds, P) per kind, falling with N at a rate of
    each kind's own, seeds spread around it; by_position[kind][i] (N,) a ramp per kind."""
    N = torch.tensor(lw.PAIR_COUNTS, dtype=torch.float64)
    accuracy, by_position = {}, {}
    for r, kind in enumerate(KINDS):
        mean = (1.0 - r * 0.1 * N / 64).clamp(0, 1)  # (P,)
        spread = torch.linspace(-0.05, 0.05, seeds, dtype=torch.float64)[:, None] * (r > 0)
        accuracy[kind] = (mean + spread).clamp(0, 1)  # (seeds, P)
        by_position[kind] = [torch.linspace(0.2 * r / 3, 1.0 - 0.1 * r, n, dtype=torch.float64)
                             for n in lw.PAIR_COUNTS]
    return accuracy, by_position


def test_recall_view_draws_the_kinds_it_is_given_and_relays_out_for_others():
    accuracy, by_position = recall_data()
    some = ("softmax", "additive", "delta")
    fig = lw.draw_recall(16, {k: accuracy[k] for k in some}, {k: by_position[k] for k in some})
    gids = {line.get_gid() for ax in fig.axes[:2] for line in ax.lines}
    assert {g.split(" ", 1)[1] for g in gids if g.startswith("mean ")} == set(some)
    assert fig._suptitle.get_text().endswith(", ".join(f"{k} {accuracy[k].mean(0)[3].item():.2f}" for k in some))
    again = lw.draw_recall(16, accuracy, by_position, fig=fig)  # every kind: laid out anew
    gids = {line.get_gid() for ax in again.axes[:2] for line in ax.lines}
    assert again is fig and {g.split(" ", 1)[1] for g in gids if g.startswith("mean ")} == set(KINDS)
    legend = [t.get_text() for t in again.axes[0].get_legend().get_texts()]
    assert legend[:len(KINDS)] == list(KINDS)


def recall_lines(fig: Figure) -> dict[str, object]:
    return {line.get_gid(): line for ax in fig.axes for line in ax.lines}


def test_recall_view_draws_the_accuracies_given_at_every_n():
    accuracy, by_position = recall_data()
    view = lw.recall_view(accuracy, by_position)
    slider = control(view, "pairs written N")
    assert slider.value == 16
    assert view._controls[0].values == lw.PAIR_COUNTS == (4, 8, 12, 16, 24, 32, 48, 64)
    for i, n in enumerate(lw.PAIR_COUNTS):
        slider.value = n
        fig = view.result
        lines = recall_lines(fig)
        left, right = fig.axes[:2]
        bands = {c.get_gid(): c for c in left.collections}
        for kind in KINDS:
            mean = accuracy[kind].mean(0).numpy()
            np.testing.assert_allclose(lines[f"mean {kind}"].get_xdata(), lw.PAIR_COUNTS)
            np.testing.assert_allclose(lines[f"mean {kind}"].get_ydata(), mean, atol=1e-12)
            outline = bands[f"band {kind}"].get_paths()[0].vertices
            for x, low, high in zip(lw.PAIR_COUNTS, accuracy[kind].min(0).values.numpy(),
                                    accuracy[kind].max(0).values.numpy()):
                ys = outline[np.isclose(outline[:, 0], x), 1]
                assert np.isclose(ys.min(), low) and np.isclose(ys.max(), high)
            dot = lines[f"current {kind}"]
            assert list(dot.get_xdata()) == [n] and dot.get_ydata()[0] == pytest.approx(mean[i])
            curve = lines[f"position {kind}"]
            np.testing.assert_allclose(curve.get_xdata(), (np.arange(n) + 0.5) / n)
            np.testing.assert_allclose(curve.get_ydata(), by_position[kind][i].numpy())
            colors = {lines[f"{part} {kind}"].get_color() for part in ("mean", "current", "position")}
            assert colors == {lw.KIND_COLORS[kind]}  # one colour per kind, in both panels
        assert list(lines["shown"].get_xdata()) == [n, n]
        assert list(lines["state size"].get_xdata()) == [16, 16]
        means = ", ".join(f"{k} {accuracy[k].mean(0)[i].item():.2f}" for k in KINDS)
        assert fig._suptitle.get_text() == f"N = {n}, D = 16, mean accuracy: {means}"
        assert right.get_title() == f"which pairs are recalled, N = {n}"


def test_recall_axes_are_fixed_for_every_n():
    accuracy, by_position = recall_data(seeds=1)  # one seed: a band of no width
    fig = lw.draw_recall(4, accuracy, by_position)
    left, right = fig.axes[:2]
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in (left, right)]
    assert limits[0][1] == limits[1][1] == (0.0, 1.02)
    assert limits[1][0] == (0.0, 1.0) and left.get_xscale() == "log"
    assert limits[0][0][0] < 4 and 64 < limits[0][0][1]
    for n in lw.PAIR_COUNTS:
        assert lw.draw_recall(n, accuracy, by_position, fig=fig) is fig
        assert [(ax.get_xlim(), ax.get_ylim()) for ax in (left, right)] == limits


def test_draw_recall_redraws_new_data_in_place_and_a_foreign_figure():
    accuracy, by_position = recall_data()
    fig = lw.draw_recall(8, accuracy, by_position)
    lines = recall_lines(fig)
    other = {k: torch.full_like(v, 0.25) for k, v in accuracy.items()}
    assert lw.draw_recall(8, other, by_position, fig=fig) is fig
    assert recall_lines(fig) == lines  # the same artists, new numbers
    np.testing.assert_allclose(lines["mean delta"].get_ydata(), 0.25)
    foreign = lw.draw_states(3)
    out = lw.draw_recall(np.int64(64), accuracy, by_position, fig=foreign)
    assert out is foreign
    np.testing.assert_allclose(recall_lines(out)["position delta"].get_ydata(),
                               by_position["delta"][-1].numpy())


def test_recall_view_copies_its_data():
    accuracy, by_position = recall_data()
    view = lw.recall_view(accuracy, by_position, num_pairs=np.int64(4))
    want = accuracy["linear"].mean(0).numpy().copy()
    accuracy["linear"].fill_(0.0)
    by_position["linear"][0].fill_(0.0)
    control(view, "pairs written N").value = 8
    control(view, "pairs written N").value = 4
    lines = recall_lines(view.result)
    np.testing.assert_allclose(lines["mean linear"].get_ydata(), want)
    assert (lines["position linear"].get_ydata() > 0).any()


def _recall_bad(change):
    accuracy, by_position = recall_data()
    change(accuracy, by_position)
    return lambda: lw.draw_recall(16, accuracy, by_position)


@pytest.mark.parametrize("call, match", [
    (lambda: lw.draw_recall(10, *recall_data()), r"^num_pairs must be one of PAIR_COUNTS \(4, 8, .*64\), got 10"),
    (lambda: lw.draw_recall(16.0, *recall_data()), r"^num_pairs must be one of PAIR_COUNTS .* got 16.0"),
    (lambda: lw.recall_view(*recall_data(), num_pairs=True), r"^num_pairs must be one of .* got True"),
    (lambda: lw.draw_recall(16, [], recall_data()[1]), r"^accuracy must be a dict keyed by kinds of recall.KINDS .* got list"),
    (_recall_bad(lambda a, b: a.pop("delta")), r"^by_position must have the kinds of accuracy \['softmax', 'linear', .*\], got"),
    (_recall_bad(lambda a, b: b.update(gated=b["delta"])), r"^by_position must be keyed by one or more kinds of recall.KINDS \(softmax, linear, positive, additive, decay, delta, delta_token\)"),
    (_recall_bad(lambda a, b: (a.clear(), b.clear())), r"^accuracy must be keyed by one or more kinds of recall.KINDS"),
    (_recall_bad(lambda a, b: a.update(delta=a["delta"][:, :-1])), r"^accuracy\['delta'\] must have shape \(seeds, len\(PAIR_COUNTS\)\) = \(seeds, 8\), got \(3, 7\)"),
    (_recall_bad(lambda a, b: a.update(delta=a["delta"][0])), r"^accuracy\['delta'\] must have shape .* got \(8,\)"),
    (_recall_bad(lambda a, b: a.update(delta=a["delta"][:0])), r"^accuracy\['delta'\] must have shape .* got \(0, 8\)"),
    (_recall_bad(lambda a, b: a.update(delta=a["delta"].numpy())), r"^accuracy\['delta'\] must be a torch.Tensor .* got ndarray"),
    (_recall_bad(lambda a, b: a.update(delta=(a["delta"] > 0.5))), r"^accuracy\['delta'\] must be a floating tensor .* got dtype torch.bool"),
    (_recall_bad(lambda a, b: a["linear"].__setitem__((0, 0), 1.5)), r"^accuracy\['linear'\] must hold accuracies in \[0, 1\], got values from .* to 1.5"),
    (_recall_bad(lambda a, b: a["linear"].__setitem__((0, 0), math.nan)), r"^accuracy\['linear'\] must hold accuracies in \[0, 1\], got .* and NaN"),
    (_recall_bad(lambda a, b: b.update(softmax=b["softmax"][:-1])), r"^by_position\['softmax'\] must be a list of 8 tensors, .* got length 7"),
    (_recall_bad(lambda a, b: b.update(softmax=torch.ones(8, 4))), r"^by_position\['softmax'\] must be a list of 8 tensors, .* got Tensor"),
    (_recall_bad(lambda a, b: b["softmax"].__setitem__(2, torch.ones(13))), r"^by_position\['softmax'\]\[2\] must have shape \(N,\) = \(12,\), got \(13,\)"),
    (_recall_bad(lambda a, b: b["additive"].__setitem__(0, -torch.ones(4))), r"^by_position\['additive'\]\[0\] must hold accuracies in \[0, 1\]"),
    (lambda: lw.draw_recall(16, *recall_data(), fig="fig"), r"^fig must be a matplotlib Figure or None, got str"),
])
def test_bad_recall_input_is_refused_clearly(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------- the module as a whole
def test_demo_views_show_figures():
    views = lw.demo_views()
    assert list(views) == ["states", "features", "recall"]
    accuracy, by_position = lw._demo_recall()  # what the demo trained (seed 0 of each kind)
    assert control(views["recall"], "pairs written N").value == 16
    assert accuracy["softmax"].min() > 0.95  # the cache keeps every pair
    i = lw.PAIR_COUNTS.index(64)
    assert max(accuracy[k][0, i] for k in ("linear", "additive", "delta")) < 0.8  # D = 16 fills
    delta = by_position["delta"][i]  # (64,): the oldest pairs are forgotten, the newest kept
    assert delta[-16:].mean() > delta[:16].mean() + 0.3
    for view in views.values():
        assert isinstance(view, PageView) and isinstance(view.result, Figure)
        assert shown_png(view).startswith(b"\x89PNG")


@pytest.mark.parametrize("step", [0, 5, 8])
def test_state_texts_stay_inside_the_figure_and_apart(step):
    fig = lw.draw_states(step)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[-1]
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
    for i, a in enumerate(boxes):
        assert fig.bbox.x0 <= a.x0 and a.x1 <= fig.bbox.x1 and a.y0 >= fig.bbox.y0
        assert not any(a.overlaps(b) for b in boxes[i + 1:])
        assert a.y1 <= ax.get_window_extent(renderer).y1  # under the top of the axes


@pytest.mark.parametrize("call, match", [
    (lambda: lw.retrieval_errors(-1), r"^step must be an int in \[0, 8\] \(writes made, 0 … T\), got -1"),
    (lambda: lw.retrieval_errors(9), r"^step must be an int in \[0, 8\]"),
    (lambda: lw.retrieval_errors(2.0), r"^step must be an int .* got 2.0"),
    (lambda: lw.retrieval_errors(True), r"^step must be an int .* got True"),
    (lambda: lw.draw_states("3"), r"^step must be an int .* got '3'"),
    (lambda: lw.draw_states(3, fig=[]), r"^fig must be a matplotlib Figure or None, got list"),
    (lambda: lw.states_view(step=9), r"^step must be an int in \[0, 8\]"),
    (lambda: lw.random_feature_weights(0), r"^num_features must be an int in \[1, 1024\], got 0"),
    (lambda: lw.random_feature_weights(1025), r"^num_features must be an int in \[1, 1024\]"),
    (lambda: lw.random_feature_weights(4.0), r"^num_features must be an int .* got 4.0"),
    (lambda: lw.random_feature_weights(4, seed=0.5), r"^seed must be an int .* got 0.5"),
    (lambda: lw.random_feature_weights(4, seed=None), r"^seed must be an int .* got None"),
    (lambda: lw.draw_features(0), r"^num_features must be an int in \[1, 1024\]"),
    (lambda: lw.draw_features(4, fig="fig"), r"^fig must be a matplotlib Figure or None, got str"),
    (lambda: lw.features_view(3), r"^num_features must be one of the slider's \(1, 2, 4, .*1024\), got 3"),
    (lambda: lw.features_view(True), r"^num_features must be one of the slider's .* got True"),
    (lambda: lw.features_view(16.0), r"^num_features must be one of the slider's .* got 16.0"),
])
def test_bad_input_is_refused_clearly(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_numpy_ints_are_ints():
    torch.testing.assert_close(lw.retrieval_errors(np.int64(4)), lw.retrieval_errors(4), equal_nan=True)
    torch.testing.assert_close(lw.random_feature_weights(np.int32(8), np.int64(3)),
                               lw.random_feature_weights(8, 3))
    assert control(lw.features_view(np.int64(64)), "random features F").value == 64
