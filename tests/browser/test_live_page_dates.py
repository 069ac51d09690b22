"""Notebook 05's live view in Chromium: the page's greedy decoding is the model's (every
encoder output, attention weight, logit, probability and decoded token against greedy_decode),
its picture matplotlib's, its bad inputs answered with Python's words
(helpers/widgets/live/dates.py, dates.js)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.widgets.live import dates
from tests.browser.live_harness import (assert_close, live_page, pixel_verdict, save_failure,
                                        to_json)

pytestmark = pytest.mark.browser

# Hand-made inputs beside the random ones: impossible dates, years outside the training range,
# text in none of the task's formats, the longest input, Python's odd whitespace (U+001C,
# U+0085 are spaces to Python, not to JavaScript's \s).
ODD = ["31 February 2001", "3 May 1850", "May May", "1", "0 0 0 0", "29.02.1900", "00.00.0000",
       "03 May 1998", "Dec 31, 9999", "13.13.2013", "29 Feb 2000", "3\u00a0May\u2003 1998",
       "3\x1cMay\x851998", "September September September 3 , 1 . 9 September Jan 0 0 0 1 2 3"]
# The float32 model's logits are themselves off from the same model in float64 (the page's
# arithmetic) by up to 6.2e-6 (measured: the demo model, 212 inputs, logits up to 19 in size;
# every other number within ATOL + RTOL·x): the page against float32 logits is held to this,
# the page against the model in float64 to 1e-9 · (1 + |x|).
F32_LOGITS = 2e-5
F64_TOL = 1e-9


@pytest.fixture(scope="module")
def model():
    return dates.demo_model()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    yield from live_page(browser, tmp_path_factory, dates.JS)


def texts() -> list[str]:
    return dates.random_texts(120, seed=1) + ODD


def test_forward_equals_greedy_decode_in_float32(page, model, report):
    cases = [(t, {}) for t in texts()]
    got = page.forward(dates.export(model), cases)
    worst, worst_logit = 0.0, 0.0
    for (text, _), result in zip(cases, got):
        assert "error" not in result, f"{text!r}: {result}"
        want = to_json(dates.forward(model, dates.parse(text)))
        page_logits, want_logits = result.pop("logits"), want.pop("logits")
        worst = max(worst, assert_close(repr(text[:30]), result, want))  # ids, tokens, titles too
        diff = np.abs(np.array(page_logits) - np.array(want_logits))
        assert diff.max() <= F32_LOGITS, f"{text!r}: logits off by {diff.max():.3g}"
        worst_logit = max(worst_logit, float(diff.max()))
    report(f"live dates: {len(cases)} inputs vs float32 greedy_decode, worst "
           f"|Δ|/(atol + rtol|x|) = {worst:.3f} (weights, probs, encoder), logits |Δ| <= "
           f"{worst_logit:.2g}")
    page.assert_clean()


def test_forward_equals_the_model_in_float64(page, model, report):
    """The same weights in float64 (model.double(): the page's arithmetic): every number to
    1e-9, so each formula is PyTorch's, not merely close to it."""
    double = dates.demo_model().double()
    cases = [(t, {}) for t in texts()]
    got = page.forward(dates.export(model), cases)
    worst = 0.0
    for (text, _), result in zip(cases, got):
        want = to_json(dates.forward(double, dates.parse(text)))
        assert result["ids"] == want["ids"], text
        for key in ("encoder_outputs", "initial_state", "weights", "logits", "probs"):
            a, b = np.array(result[key]), np.array(want[key])
            assert a.shape == b.shape, (text, key)
            ratio = float((np.abs(a - b) / (F64_TOL * (1 + np.abs(b)))).max())
            assert ratio <= 1, f"{text!r} {key}: off by {np.abs(a - b).max():.3g}"
            worst = max(worst, ratio * F64_TOL)
    report(f"live dates: {len(cases)} inputs vs the model in float64, worst |Δ|/(1 + |x|) = "
           f"{worst:.2g}")
    assert math.isfinite(worst)
    page.assert_clean()


def test_bad_inputs_get_pythons_message(page, model):
    odd_spaces = ["\ufeff3 May 1998", "3\u200bMay 1998", "٣ May 1998"]  # not spaces in Python
    bad = list(dates.BAD_INPUTS) + odd_spaces
    got = page.forward(dates.export(model), [(t, {}) for t in bad])
    for text, result in zip(bad, got):
        with pytest.raises(ValueError) as python:
            dates.parse(text)
        assert result.get("error") == str(python.value), text
        assert dates.BAD_INPUTS.get(text, "outside the vocabulary") in result["error"], text


@pytest.mark.parametrize("text", [dates.DEFAULT_TEXT, "31 February 2001", ODD[-1]])
def test_the_picture_is_matplotlibs(page, model, text, report):
    view = dates.live_view(model, text)
    got = page.show(view)
    assert got["error"] is None and got["message"] == "", got
    rgba = page.pixels(got["size"])
    verdict, mpl = pixel_verdict(view, rgba)
    if verdict.failures:
        saved = save_failure(f"dates-{len(text)}", rgba, mpl, verdict)
        pytest.fail("\n".join(verdict.failures) + f"\nimages: {saved}")
    report(f"live dates picture of {text[:20]!r}: mean |Δ| {verdict.mean_abs:.2f}, worst text "
           f"box {verdict.text.value:.1f}")
    page.assert_clean()


def test_typing_redraws_and_a_bad_input_keeps_the_last_picture(page, model):
    view = dates.live_view(model)
    first = page.show(view)
    before = page.pixels(first["size"]).copy()
    assert first["summary"].startswith("'3 May 1998' → ")
    moved = page.type("September 21, 2004")
    assert moved["message"] == "" and moved["redraws"] == first["redraws"] + 1
    after = page.pixels(moved["size"]).copy()
    assert (after != before).any(), "a new input left the picture as it was"
    assert moved["text"] == "September 21, 2004"  # the model (kernel side) hears it
    assert moved["summary"].startswith("'September 21, 2004' → ")
    assert "Steps 1 to " in moved["summary"]
    assert "'September 21, 2004' →" in moved["label"]  # the canvas's description: the title
    bad = page.type("21 Sept 2004")
    assert "got 'Sept', outside the vocabulary" in bad["message"] and bad["invalid"] == "true"
    assert (page.pixels(bad["size"]) == after).all(), "a bad input changed the picture"
    assert bad["text"] == "September 21, 2004"  # the last valid input stays the model's
    again = page.type("31 February 2001")
    assert again["message"] == "" and again["invalid"] is None
    assert "no such date: February 2001 has 28 days" in again["summary"]
    page.assert_clean()
