"""Notebook 02's live view in Chromium: its numbers are NWKernelRegression's, its picture
matplotlib's, its bad inputs answered (helpers/widgets/live/nw.py, nw.js)."""

from __future__ import annotations

import pytest

from helpers.widgets.live import nw
from tests.browser.live_harness import (assert_close, live_page, pixel_verdict, save_failure,
                                        to_json)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def model():
    return nw.demo_model()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    yield from live_page(browser, tmp_path_factory, nw.JS)


def test_forward_equals_pytorch_on_random_inputs(page, model, report):
    texts = nw.random_texts(120, seed=1)
    cases = [(t, {"w": w}) for t in texts for w in nw.W_CHOICES]
    got = page.forward(nw.export(model), cases)
    worst = 0.0
    for (text, controls), result in zip(cases, got):
        assert "error" not in result, f"{text!r}: {result}"
        want = to_json(nw.forward(model, nw.parse(text), **controls))
        worst = max(worst, assert_close(f"{text[:30]!r} {controls}", result, want))
    report(f"live nw: {len(cases)} inputs, worst |Δ|/(atol + rtol|x|) = {worst:.3f}")
    page.assert_clean()


def test_bad_inputs_get_pythons_message(page, model):
    got = page.forward(nw.export(model), [(t, {"w": nw.W_CHOICES[1]}) for t in nw.BAD_INPUTS])
    for (text, part), result in zip(nw.BAD_INPUTS.items(), got):
        with pytest.raises(ValueError) as python:
            nw.parse(text)
        assert result.get("error") == str(python.value), text
        assert part in result["error"], text


@pytest.mark.parametrize("which", [0, 1, 2])
def test_the_picture_is_matplotlibs(page, model, which):
    texts = [nw.DEFAULT_TEXT, *nw.random_texts(2, seed=7)]
    view = nw.live_view(model, texts[which], w=nw.W_CHOICES[which % 2])
    got = page.show(view)
    assert got["error"] is None and got["message"] == "", got
    rgba = page.pixels(got["size"])
    verdict, mpl = pixel_verdict(view, rgba)
    if verdict.failures:
        saved = save_failure(f"nw-{which}", rgba, mpl, verdict)
        pytest.fail("\n".join(verdict.failures) + f"\nimages: {saved}")
    page.assert_clean()


def test_typing_redraws_and_a_bad_input_keeps_the_last_picture(page, model):
    view = nw.live_view(model)
    first = page.show(view)
    before = page.pixels(first["size"]).copy()
    moved = page.type("12 | 1 1, 5 6, 13 2")
    assert moved["message"] == "" and moved["redraws"] == first["redraws"] + 1
    after = page.pixels(moved["size"]).copy()
    assert (after != before).any(), "a new input left the picture as it was"
    assert moved["text"] == "12 | 1 1, 5 6, 13 2"  # the model (kernel side) hears it
    assert "x = 12.00" in moved["summary"]
    bad = page.type("12 | 1 1, 5")
    assert "Point 2 must be two numbers" in bad["message"] and bad["invalid"] == "true"
    assert (page.pixels(bad["size"]) == after).all(), "a bad input changed the picture"
    assert bad["text"] == "12 | 1 1, 5 6, 13 2"  # the last valid input stays the model's
    page.assert_clean()


def test_dragging_a_point_and_the_query_edits_the_input_and_the_picture(page, model):
    # A drag on the figure is a reader's other way in: it rewrites the input text (what moved,
    # to 2 decimals; the rest keep their values), which the page then draws as typed.
    view = nw.live_view(model, "5 | 2 1, 10 4, 15 2")
    first = page.show(view)
    layout = view.scene_data()["live"]["layouts"]["points"]
    (x0, y0, w, h), (a, b), (c, d) = layout["rect"], layout["xlim"], layout["ylim"]

    def pixel(x: float, y: float) -> tuple[float, float]:  # data → canvas CSS px (scale 1)
        box = page.page.locator(".ahv-canvas").bounding_box()
        return box["x"] + x0 + (x - a) / (b - a) * w, box["y"] + y0 + h - (y - c) / (d - c) * h

    before = page.pixels(first["size"]).copy()
    mouse = page.page.mouse
    mouse.move(*pixel(10, 4))
    mouse.down()
    mouse.move(*pixel(11, 6), steps=4)
    mouse.up()
    moved = page.state()
    assert moved["text"] == "5 | 2 1, 11.00 6.00, 15 2", moved
    assert (page.pixels(moved["size"]) != before).any()
    mouse.move(*pixel(17, 0))  # away from every point: the query follows
    mouse.down()
    mouse.up()
    assert page.state()["text"] == "17.00 | 2 1, 11 6, 15 2"
    page.assert_clean()
