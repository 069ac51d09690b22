"""Notebook 08's live view in Chromium: its numbers are the trained DecoderLM's, its picture
matplotlib's, its bad inputs answered (helpers/widgets/live/induction.py, induction.js)."""

from __future__ import annotations

import pytest

from helpers.widgets.live import induction as iv
from tests.browser.live_harness import (assert_close, live_page, pixel_verdict, save_failure,
                                        to_json)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def model():
    return iv.demo_model()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    yield from live_page(browser, tmp_path_factory, iv.JS)


def test_forward_equals_pytorch_on_random_inputs(page, model, report):
    texts = iv.random_texts(120, seed=1) + [iv.DEFAULT_TEXT]
    got = page.forward(iv.export(model), [(t, {}) for t in texts])
    worst = 0.0
    for text, result in zip(texts, got):
        assert "error" not in result, f"{text!r}: {result}"
        want = to_json(iv.forward(model, iv.parse(text)))
        worst = max(worst, assert_close(repr(text), result, want))
    report(f"live induction: {len(texts)} inputs, worst |Δ|/(atol + rtol|x|) = {worst:.3f}")
    page.assert_clean()


def test_bad_inputs_get_pythons_message(page, model):
    got = page.forward(iv.export(model), [(t, {}) for t in iv.BAD_INPUTS])
    for (text, part), result in zip(iv.BAD_INPUTS.items(), got):
        with pytest.raises(ValueError) as python:
            iv.parse(text)
        assert result.get("error") == str(python.value), text
        assert part in result["error"], text


@pytest.mark.parametrize("text", [iv.DEFAULT_TEXT, "ABCAB", "K", "fadjhn fadj"])
def test_the_picture_is_matplotlibs(page, model, text):
    view = iv.live_view(model, text)
    got = page.show(view)
    assert got["error"] is None and got["message"] == "", got
    rgba = page.pixels(got["size"])
    verdict, mpl = pixel_verdict(view, rgba)
    if verdict.failures:
        saved = save_failure(f"induction-{len(text)}", rgba, mpl, verdict)
        pytest.fail("\n".join(verdict.failures) + f"\nimages: {saved}")
    page.assert_clean()


def test_typing_redraws_and_a_bad_input_keeps_the_last_picture(page, model):
    view = iv.live_view(model)
    first = page.show(view)
    assert "Layer 2 head 2 (the induction head) puts 0.96" in first["summary"]
    before = page.pixels(first["size"]).copy()
    moved = page.type("MKPC FADJHN FAD")
    assert moved["message"] == "" and moved["redraws"] == first["redraws"] + 1
    after = page.pixels(moved["size"]).copy()
    assert (after != before).any(), "a new input left the picture as it was"
    assert moved["text"] == "MKPC FADJHN FAD"  # the model (kernel side) hears it
    assert "Next letter after the last one (D): J 1.00" in moved["summary"]
    bad = page.type("MKPC FADJHN FAZ")
    assert "'Z' is not a token" in bad["message"] and bad["invalid"] == "true"
    assert (page.pixels(bad["size"]) == after).all(), "a bad input changed the picture"
    assert bad["text"] == "MKPC FADJHN FAD"  # the last valid input stays the model's
    page.assert_clean()
