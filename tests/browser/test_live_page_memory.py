"""Notebook 12's live view in Chromium: its numbers are the recall models', its picture
matplotlib's, its bad inputs answered (helpers/widgets/live/memory.py, memory.js)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.widgets.live import memory
from tests.browser.live_harness import (assert_close, live_page, pixel_verdict, save_failure,
                                        to_json)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def model():
    return memory.demo_model()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    yield from live_page(browser, tmp_path_factory, memory.JS)


def _scaled_ratio(page: object, python: object) -> float:
    """The largest |page − python| / (1e-6 + 1e-5 |python| + 1e-5 max|array|) over the arrays of
    a result: float32's rounding is relative to the terms summed, not to a result near 0."""
    worst = 0.0
    for name, want in python.items():
        want = np.asarray(want, dtype=np.float64)
        got = np.asarray(page[name], dtype=np.float64)
        assert got.shape == want.shape, name
        scale = np.abs(want).max() if want.size else 0.0
        tol = 1e-6 + 1e-5 * np.abs(want) + 1e-5 * scale
        worst = max(worst, float((np.abs(got - want) / tol).max()))
    return worst


def test_forward_equals_pytorch_on_random_inputs(page, model, report):
    """Every logit, probability, read weight, state entry (and linear attention's z) of >= 100
    random inputs for each memory: against the oracle on a float64 copy of the models (the same
    helpers and float32 weights, no float32 rounding) within rtol 1e-5, atol 1e-6; against the
    float32 models within float32's rounding of the sums (``_scaled_ratio``)."""
    texts = memory.random_texts(120, seed=1)
    cases = [(t, {"memory": kind}) for t in texts for kind in memory.MEMORIES]
    got = page.forward(memory.export(model), cases)
    doubled = memory.float64(model)
    strict, scaled = {}, {}
    for (text, controls), result in zip(cases, got):
        assert "error" not in result, f"{text!r}: {result}"
        kind = controls["memory"]
        want = to_json(memory.forward(doubled, memory.parse(text), **controls))
        strict[kind] = max(strict.get(kind, 0.0), assert_close(f"{text!r} {kind}", result, want))
        f32 = memory.forward(model, memory.parse(text), **controls)
        f32.pop("recalled")
        ratio = _scaled_ratio(result, f32)
        assert ratio <= 1, f"{text!r} {kind}: {ratio}"
        scaled[kind] = max(scaled.get(kind, 0.0), ratio)
    assert len(texts) >= 100
    report(f"live memory: {len(texts)} inputs × {len(memory.MEMORIES)} memories; worst |Δ|/"
           f"(atol + rtol|x|) vs float64: "
           + ", ".join(f"{k} {v:.2g}" for k, v in strict.items())
           + "; vs float32 (scaled): " + ", ".join(f"{k} {v:.2g}" for k, v in scaled.items()))
    page.assert_clean()


def test_bad_inputs_get_pythons_message(page, model):
    got = page.forward(memory.export(model), [(t, {"memory": "delta"}) for t in memory.BAD_INPUTS])
    for (text, part), result in zip(memory.BAD_INPUTS.items(), got):
        with pytest.raises(ValueError) as python:
            memory.parse(text)
        assert result.get("error") == str(python.value), text
        assert part in result["error"], text


@pytest.mark.parametrize("which", range(len(memory.MEMORIES)))
def test_the_picture_is_matplotlibs(page, model, which):
    texts = [memory.DEFAULT_TEXT, *memory.random_texts(len(memory.MEMORIES) - 1, seed=7)]
    kind = memory.MEMORIES[which]
    view = memory.live_view(model, texts[which], memory=kind)
    got = page.show(view)
    assert got["error"] is None and got["message"] == "", got
    rgba = page.pixels(got["size"])
    verdict, mpl = pixel_verdict(view, rgba)
    if verdict.failures:
        saved = save_failure(f"memory-{which}", rgba, mpl, verdict)
        pytest.fail("\n".join(verdict.failures) + f"\nimages: {saved}")
    page.assert_clean()


def test_typing_and_the_memory_redraw_and_a_bad_input_keeps_the_last_picture(page, model):
    view = memory.live_view(model, memory="additive")
    first = page.show(view)
    assert "additive memory: " in first["summary"]
    before = page.pixels(first["size"]).copy()
    moved = page.type("5=1 5=2")
    assert moved["message"] == "" and moved["redraws"] == first["redraws"] + 1
    after = page.pixels(moved["size"]).copy()
    assert (after != before).any(), "a new input left the picture as it was"
    assert moved["text"] == "5=1 5=2"  # the model (kernel side) hears it
    assert moved["summary"] != first["summary"] and "key 5, written again" in moved["summary"]
    bad = page.type("5=1 5=")
    assert "'5=' is not a write" in bad["message"] and bad["invalid"] == "true"
    assert (page.pixels(bad["size"]) == after).all(), "a bad input changed the picture"
    assert bad["text"] == "5=1 5=2"  # the last valid input stays the model's
    page.type("5=1 5=2")
    delta = page.move([memory.MEMORIES.index("delta")])
    assert delta["summary"].startswith("delta memory: ")
    assert (page.pixels(delta["size"]) != after).any(), "another memory left the picture as it was"
    page.assert_clean()
