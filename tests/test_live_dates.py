"""Notebook 05's live view, the Python side (helpers/widgets/live/dates.py): the input is
parsed with the task's own tokenizer and vocabulary, refused with a message that says what is
accepted, read as a date exactly as format_date writes dates; forward is greedy_decode's
numbers; draw marks every part that depends on the input and nothing else moves."""

from __future__ import annotations

import base64
import calendar
import json

import matplotlib as mpl
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from helpers import seq2seq as s2s
from helpers.plotting import set_theme
from helpers.widgets.live import LiveFrameChanged, LiveView, live_scene, verify_frame
from helpers.widgets.live import dates

ODD = ["31 February 2001", "3 May 1850", "May May", "1", "0 0 0 0", "29.02.1900",
       "00.00.0000", "03 May 1998", "Dec 31, 9999", "13.13.2013", "3\u00a0May\u2003 1998",
       "September September September 3 , 1 . 9 September Jan 0 0 0 1 2 3"]


@pytest.fixture(scope="module", autouse=True)
def theme():
    """The series' theme, as the notebook draws, for this module's tests only (the rcParams
    are put back after them: other tests draw with matplotlib's defaults)."""
    with mpl.rc_context():
        set_theme()
        yield


@pytest.fixture(scope="module")
def model() -> s2s.Seq2Seq:
    return dates.demo_model()


def test_parse_uses_the_tasks_tokenizer_and_vocabulary():
    for text in dates.random_texts(100, seed=3) + ODD:
        parsed = dates.parse(text)
        assert parsed["tokens"] == s2s.tokenize_source(text)
        assert parsed["ids"] == s2s.encode_sources([text])[0][0].tolist()
        assert parsed["text"] == " ".join(text.split())
    assert dates.parse("3\u00a0May\u2003 1998")["text"] == "3 May 1998"


def test_bad_inputs_are_refused_with_what_is_accepted():
    for text, part in dates.BAD_INPUTS.items():
        with pytest.raises(ValueError) as err:
            dates.parse(text)
        assert part in str(err.value), (text, str(err.value))
        assert str(err.value).endswith(dates.ACCEPTED)
    with pytest.raises(ValueError, match="text must be a str, got bytes"):
        dates.parse(b"3 May 1998")
    assert len(dates.parse("1" * dates.MAX_TOKENS)["tokens"]) == dates.MAX_TOKENS  # the limit


def test_read_date_agrees_with_format_date_on_every_text_of_two_years():
    texts = {}
    for y in (1900, 2000):  # not a leap year, a leap year
        for m in range(1, 13):
            for d in range(1, calendar.monthrange(y, m)[1] + 1):
                for fmt in range(len(s2s.FORMATS)):
                    text, target = s2s.format_date(y, m, d, fmt)
                    texts[text] = target
    assert len(texts) == s2s.count_dates((1900, 1900)) + s2s.count_dates((2000, 2000))
    for text, target in texts.items():
        assert dates.read_date(s2s.tokenize_source(text)) == (target, ""), text


def test_read_date_says_why_there_is_no_target():
    read = lambda text: dates.read_date(s2s.tokenize_source(text))  # noqa: E731
    assert read("3 May 1850") == ("1850-05-03", "1850 lies outside the training years 1900-2099")
    assert read("Dec 31, 9999")[0] == "9999-12-31"
    for text, why in [("31 February 2001", "February 2001 has 28 days"),
                      ("29.02.1900", "February 1900 has 28 days"),
                      ("September 31, 2004", "September 2004 has 30 days"),
                      ("0 May 1998", "days start at 1"), ("13.13.2013", "there is no month 13"),
                      ("01.00.2000", "there is no month 0")]:
        assert read(text) == (None, f"no such date: {why}, so no right answer"), text
    assert read("29 Feb 2000") == ("2000-02-29", "")  # a leap year: a real date
    for text in ["03 May 1998", "3.5.1998", "May 3 1998", "3 May 98", "1998", "3 May 0998",
                 "May", "3 May 1998 ,", "3 , May 1998"]:
        assert read(text) == (None, "not written in one of the task's five formats, so no target")


def test_forward_is_greedy_decode(model):
    for text in dates.random_texts(10, seed=4) + ODD:
        got = dates.forward(model, dates.parse(text))
        src, lens = s2s.encode_sources([text])
        ids, weights = s2s.greedy_decode(model, src, lens, dates.MAX_STEPS)
        assert got["ids"] == ids[0].tolist()
        np.testing.assert_array_equal(got["weights"], weights[0].double().numpy())
        assert (got["logits"].argmax(-1) == ids[0].numpy()).all()  # the logits of those steps
        np.testing.assert_allclose(got["probs"].sum(-1), 1.0, rtol=1e-6)
        tokens, shown = s2s.predict(model, text, max_steps=dates.MAX_STEPS)  # the notebook's
        assert got["tokens"][:got["steps"]] == tokens
        np.testing.assert_array_equal(got["weights"][:got["steps"]], shown.double().numpy())
        assert got["output"] == s2s.output_text(tokens)
        with torch.no_grad():
            enc, state = model.encoder(src, lens)
        np.testing.assert_array_equal(got["encoder_outputs"], enc[0].double().numpy())
        np.testing.assert_array_equal(got["initial_state"], state[0].double().numpy())


def test_the_title_says_right_or_wrong(model):
    right = dates.forward(model, dates.parse("3 May 1998"))
    assert right["title"] == f"'3 May 1998' → {right['output']}"
    verdict = "right" if right["output"] == "1998-05-03" else "wrong"
    assert right["verdict"] == f"{verdict}: the date is 1998-05-03"
    far = dates.forward(model, dates.parse("3 May 1850"))
    assert far["verdict"].endswith(": the date is 1850-05-03 (1850 lies outside the training "
                                   "years 1900-2099)")
    none = dates.forward(model, dates.parse("31 February 2001"))
    assert none["verdict"] == "no such date: February 2001 has 28 days, so no right answer"
    long = dates.forward(model, dates.parse(ODD[-1]))
    assert long["title"].startswith("'September September September 3 ,...' → ")


def test_draw_marks_every_live_part_and_nothing_else_moves(model):
    fig = dates.draw(model, dates.parse("3 May 1998"))
    assert isinstance(fig, Figure) and fig.get_layout_engine() is None
    scene = live_scene(fig)
    assert sorted(scene["layouts"]) == ["source", "steps", "title", "verdict", "weights"]
    frame = scene["frame"]
    for text in ["1", ODD[-1], "31.02.2000", "September 21, 2004"]:  # 1 to 16 tokens
        verify_frame(frame, dates.draw(model, dates.parse(text)), text)
    result = dates.forward(model, dates.parse(ODD[-1]))
    fig = dates.draw(model, dates.parse(ODD[-1]), fig=fig)  # redrawn in place
    ax = fig.axes[0]
    S = result["steps"]
    np.testing.assert_array_equal(ax.images[0].get_array(), result["weights"][:S])
    assert [t.get_text() for t in ax.get_xticklabels()] == s2s.tokenize_source(ODD[-1])
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        f"{t}: {tok}" for t, tok in enumerate(result["tokens"][:S], 1)]
    assert fig.get_suptitle() == result["title"] and ax.get_title("left") == result["verdict"]
    assert ax.images[0].norm.vmin == 0 and ax.images[0].norm.vmax == 1  # draw_alignment's scale


def test_a_part_left_unmarked_would_be_caught(model):
    fig = dates.draw(model, dates.parse("3 May 1998"))
    frame = live_scene(fig)["frame"]
    other = dates.draw(model, dates.parse("1"))
    verdict = other.axes[0].set_title(other.axes[0].get_title("left"), loc="left")  # its Text
    verdict.set_gid(None)  # the verdict, no longer marked: it differs
    with pytest.raises(LiveFrameChanged):
        verify_frame(frame, other, "unmarked verdict")


def test_export_is_the_models_weights(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    got = json.loads(json.dumps(dates.export(model)))
    assert set(got["weights"]) == set(before)
    for name, t in before.items():
        w = got["weights"][name]
        values = np.frombuffer(base64.b64decode(w["f32"]), "<f4").reshape(w["shape"])
        np.testing.assert_array_equal(values, t.numpy())
        assert torch.equal(model.state_dict()[name], t)  # unchanged
    assert got["src_itos"] == s2s.SRC_VOCAB.itos and got["tgt_itos"] == s2s.TGT_VOCAB.itos
    with torch.random.fork_rng(devices=[]):
        baseline = s2s.Seq2Seq(attention=False)
    with pytest.raises(ValueError, match="with attention.*got a Seq2Seq with a MeanContextDecoder"):
        dates.export(baseline)
    with pytest.raises(ValueError, match="got str"):
        dates.forward("model", dates.parse("1"))


def test_random_texts_are_seeded_valid_and_mixed():
    texts = dates.random_texts(120, seed=1)
    assert texts == dates.random_texts(120, seed=1) != dates.random_texts(120, seed=2)
    assert len(texts) == 120 and len(set(texts)) >= 115
    for text in texts:
        dates.parse(text)
    targets = [dates.parse(t)["target"] for t in texts]
    assert sum(t is not None for t in targets) >= 96  # the task's dates, real ones
    assert sum(t is None for t in targets) >= 5  # and random token strings


def test_live_view_shows_draws_figure(model):
    view = dates.live_view(model, "September 21, 2004")
    assert isinstance(view, LiveView) and view.kind == "dates"
    scene = view.scene_data()
    assert scene["live"]["input"]["accepted"] == dates.ACCEPTED
    assert scene["live"]["model"] == json.loads(json.dumps(dates.export(model)))
    assert view.result.get_suptitle().startswith("'September 21, 2004' → ")
    with pytest.raises(ValueError, match="got 'Mai'"):
        dates.live_view(model, "3 Mai 1998")
