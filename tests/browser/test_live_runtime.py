"""The live runtime (helpers/widgets/live/runtime.js) against matplotlib's own formulas: a value's
colour under a norm and colour map, weights decoded bit for bit, a missing part refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from matplotlib.colors import Normalize, PowerNorm

from helpers.widgets.live import nw, tensor_json
from tests.browser.live_harness import live_page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    yield from live_page(browser, tmp_path_factory, nw.JS)


def _values() -> np.ndarray:
    """Random values, every bin edge of a 256-colour table and its neighbours, the ends, beyond
    them, NaN."""
    rng = np.random.default_rng(0)
    edges = np.arange(257) / 256
    near = np.concatenate([edges, np.nextafter(edges, -1), np.nextafter(edges, 2)])
    return np.concatenate([rng.uniform(-0.2, 1.2, 2000), near, [0.0, 1.0, -1e-12, 1 + 1e-12,
                                                                 np.nan, -np.inf, np.inf]])


@pytest.mark.parametrize("norm", [Normalize(0, 1), PowerNorm(0.5, 0, 1), Normalize(-0.3, 0.7),
                                  PowerNorm(0.35, 0, 0.4), Normalize(0.2, 0.9, clip=True)],
                         ids=["linear", "sqrt", "shifted", "power", "clipped"])
def test_a_values_colour_is_matplotlibs(page, norm):
    cmap = colormaps["viridis"]
    values = _values()
    want = cmap(norm(values), bytes=True)  # what imshow's to_rgba gives a float64 array
    lut = [("#" + bytes(c).hex()) for c in cmap(np.arange(cmap.N), bytes=True)]
    under, over, bad = (("#" + bytes(c).hex()) for c in cmap(np.array([-1.0, 2.0, np.nan]),
                                                                bytes=True))
    layout = {"lut": lut, "under": under, "over": over, "bad": bad,
              "norm": {"kind": "power" if isinstance(norm, PowerNorm) else "linear",
                       "vmin": norm.vmin, "vmax": norm.vmax,
                       "gamma": getattr(norm, "gamma", 1.0), "clip": bool(norm.clip)}}
    got = page.page.evaluate("""([values, l]) => values.map((v) => {
        const k = globalThis.__live.colourIndex(v === null ? NaN : v, l);
        return k >= 0 ? l.lut[k] : k === -1 ? l.under : k === -2 ? l.over : l.bad; })""",
                             [[None if np.isnan(v) else float(v) for v in values], layout])
    expected = ["#" + bytes(c).hex() for c in want]
    wrong = [(float(v), g, e) for v, g, e in zip(values, got, expected) if g != e]
    assert not wrong, f"{len(wrong)} of {len(values)} values coloured otherwise, e.g. {wrong[:5]}"


def test_weights_arrive_bit_for_bit(page):
    t = torch.randn(4, 7, generator=torch.Generator().manual_seed(1)) * 1e3
    t[0, 0] = torch.finfo(torch.float32).tiny / 4  # a subnormal
    got = page.page.evaluate("m => Array.from(globalThis.__live.tensors(m).data)",
                             tensor_json(t))
    assert np.array_equal(np.array(got, np.float32), t.numpy().reshape(-1))


def test_an_engine_that_leaves_a_part_undrawn_is_refused(page):
    error = page.page.evaluate("""() => {
        const pic = new globalThis.__live.LivePicture({ a: { type: "text", op: ["t", 0, 0, "x",
          10, "#000000ff", 0, 400, "normal", 5] }, b: { type: "text", op: ["t", 0, 9, "y", 10,
          "#000000ff", 0, 400, "normal", 5] } });
        pic.text("a", "hello");
        try { pic.check(); return null; } catch (e) { return e.message; } }""")
    assert error == "live view: the engine drew no b"
