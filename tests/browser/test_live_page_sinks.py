"""Notebook 11's attention-sink live view in Chromium: its numbers are the TinyDecoders' through
the notebook's two caches, its picture matplotlib's, its bad inputs answered
(helpers/widgets/live/sinks.py, decoder.js + sinks.js)."""

from __future__ import annotations

import matplotlib as mpl
import pytest

import helpers as h
from helpers.widgets.live import sinks
from tests.browser.live_harness import (assert_close, flat, live_page, pixel_verdict, save_failure,
                                        to_json)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def models():
    return sinks.demo_model()


@pytest.fixture
def themed():
    """The series' theme, as the notebook draws the view (spines 1.25 pt, its fonts), undone
    after the test."""
    with mpl.rc_context():
        h.set_theme()
        yield


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    yield from live_page(browser, tmp_path_factory, sinks.JS)


def test_forward_equals_pytorch_on_random_inputs(page, models, report):
    texts = sinks.random_texts(104, seed=1)
    cases = [(text, {"variant": sinks.MODELS[i % 2], "recent": str(sinks.RECENT[i % 4]),
                     "evict": i % 3 == 0}) for i, text in enumerate(texts)]
    got = page.forward(sinks.export(models), cases)
    worst, largest, numbers = 0.0, 0.0, 0
    for (text, controls), result in zip(cases, got):
        assert "error" not in result, f"{text!r}: {result}"
        want = to_json(sinks.forward(models, sinks.parse(text), variant=controls["variant"],
                                     recent=int(controls["recent"]), evict=controls["evict"]))
        worst = max(worst, assert_close(f"{text[:30]!r} {controls}", result, want))
        a, b = flat(result), flat(want)
        largest = max(largest, max(abs(x - y) for x, y in zip(a, b)))
        numbers += len(b)
    report(f"live sinks: {len(cases)} inputs, {numbers} numbers, worst |Δ|/(atol + rtol|x|) = "
           f"{worst:.2g}, largest |Δ| {largest:.2g}")
    page.assert_clean()


def test_bad_inputs_get_pythons_message(page, models):
    controls = {"variant": "softmax", "recent": "4", "evict": False}
    got = page.forward(sinks.export(models), [(t, controls) for t in sinks.BAD_INPUTS])
    for (text, part), result in zip(sinks.BAD_INPUTS.items(), got):
        with pytest.raises(ValueError) as python:
            sinks.parse(text)
        assert result.get("error") == str(python.value), text
        assert part in result["error"], text


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_the_picture_is_matplotlibs(page, models, which, themed, report):
    texts = [sinks.DEFAULT_TEXT, *sinks.random_texts(2, seed=7), "3 4"]
    controls = [dict(variant="softmax", recent=4, evict=False),
                dict(variant="softmax", recent=2, evict=True),
                dict(variant="sink logit", recent=8, evict=True),
                dict(variant="sink logit", recent=16, evict=False)][which]  # 3: nothing evicted
    view = sinks.live_view(models, texts[which], **controls)
    got = page.show(view)
    assert got["error"] is None and got["message"] == "", got
    rgba = page.pixels(got["size"])
    verdict, mpl = pixel_verdict(view, rgba)
    report(f"live sinks picture {which}: {verdict.line()}")
    if verdict.failures:
        saved = save_failure(f"sinks-{which}", rgba, mpl, verdict)
        pytest.fail("\n".join(verdict.failures) + f"\nimages: {saved}")
    page.assert_clean()


def test_typing_and_evicting_redraw_and_a_bad_input_keeps_the_last_picture(page, models):
    view = sinks.live_view(models)
    first = page.show(view)
    assert first["summary"].startswith("Softmax model, R = 4, BOS kept:"), first
    before = page.pixels(first["size"]).copy()
    text = "11 10 15 15 15 4 15 15 10 14 7 13 4 13"
    moved = page.type(text)
    assert moved["message"] == "" and moved["redraws"] == first["redraws"] + 1
    after = page.pixels(moved["size"]).copy()
    assert (after != before).any(), "a new input left the picture as it was"
    assert moved["text"] == text  # the model (kernel side) hears it
    assert moved["summary"] != first["summary"] and "of 11 positions" in moved["summary"]
    evicted = page.move([0, 1, 1])  # softmax, R = 4, evict BOS
    assert evicted["summary"].startswith("Softmax model, R = 4, BOS evicted:"), evicted
    assert (page.pixels(evicted["size"]) != after).any(), "evicting BOS changed nothing drawn"
    bad = page.type("11 10 BOS")
    assert "BOS only once, first" in bad["message"] and bad["invalid"] == "true"
    assert (page.pixels(bad["size"]) == page.pixels(evicted["size"])).all()
    assert bad["text"] == text  # the last valid input stays the model's
    page.assert_clean()
