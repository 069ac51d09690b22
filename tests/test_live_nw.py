"""Notebook 02's live view, Python side (helpers/widgets/live/nw.py)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.widgets.live import nw


@pytest.fixture(scope="module")
def model():
    return nw.demo_model(steps=30)


def test_parse_reads_the_query_and_the_points():
    assert nw.parse(" 7.5 | 1 2.1, 4 -0.3,9 3 ") == {"query": 7.5, "x": [1.0, 4.0, 9.0],
                                                     "y": [2.1, -0.3, 3.0]}
    assert nw.parse(nw.DEFAULT_TEXT)["query"] == 7.5 and len(nw.parse(nw.DEFAULT_TEXT)["x"]) == 20
    for text in nw.random_texts(50, seed=3):
        nw.parse(text)


@pytest.mark.parametrize("text, part", list(nw.BAD_INPUTS.items()))
def test_parse_refuses_saying_what_is_accepted(text, part):
    with pytest.raises(ValueError) as error:
        nw.parse(text)
    assert part in str(error.value) and nw.ACCEPTED in str(error.value)


@pytest.mark.parametrize("w", nw.W_CHOICES)
def test_forward_is_the_formula_written_out(model, w):
    parsed = nw.parse("7.5 | 1 2.1, 4 -0.3, 9 3, 9 4")
    out = nw.forward(model, parsed, w=w)
    width = 1.0 if w == nw.W_CHOICES[0] else float(model.w.detach()[0])
    x, y = np.array(parsed["x"]), np.array(parsed["y"])
    for q, weights, yhat in [(7.5, out["query_weights"], out["answer"]),
                             *zip(nw.queries().numpy(), out["weights"], out["fit"])]:
        s = -((q - x) * width) ** 2 / 2
        want = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        np.testing.assert_allclose(weights, want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(yhat, want @ y, rtol=1e-5, atol=1e-5)
    assert out["weights"].shape == (nw.GRID, 4)


def test_draw_marks_every_input_dependent_part(model):
    fig = nw.draw(model, nw.parse(nw.DEFAULT_TEXT))
    marked = {a.get_gid() for a in fig.findobj(lambda a: str(a.get_gid()).startswith("live:"))}
    assert marked == {f"live:{n}" for n in ("fit", "points", "query", "answer", "title",
                                              "weights", "map_title")}


def test_live_view_refuses_a_per_key_model():
    from helpers.kernel_regression import NWKernelRegression
    import torch
    per_key = NWKernelRegression(torch.arange(3.0), torch.zeros(3), per_key=True)
    with pytest.raises(ValueError, match=r"per_key=False\), got w of shape \(3,\)"):
        nw.live_view(per_key)


def test_the_trained_w_makes_a_staircase_as_the_notebook_says():
    """Notebook 02's cell before the view: on the default 20 points, the trained w (≈ 6.9)
    gives 94 of the 100 grid queries over 0.9 of their weight on one point; w = 1 gives none."""
    trained = nw.demo_model()
    assert round(float(trained.w.detach()[0]), 1) == 6.9
    parsed = nw.parse(nw.DEFAULT_TEXT)
    sharp = nw.forward(trained, parsed, w=nw.W_CHOICES[1])["weights"].max(axis=1)
    smooth = nw.forward(trained, parsed, w=nw.W_CHOICES[0])["weights"].max(axis=1)
    assert int((sharp > 0.9).sum()) == 94 and int((smooth > 0.9).sum()) == 0
