"""Live view for notebook 08: the trained copy-task model on the reader's own letters.

The notebook trains ``h.DecoderLM`` (2 layers, 2 heads, sinusoidal positions) on the copy task
of ``induction.CopyTask`` (16 letters A–P, sequences of 16: a random prefix, a segment, the
segment again) and finds a *previous-token head* in layer 1 and an *induction head* in layer 2.
This view runs the model on the letters the reader types and draws the attention weights of
those two heads (picked at export time as the notebook scores them: the highest
``previous_token_score`` and ``induction_score`` on the notebook's 128 evaluation sequences)
and the model's next-letter probabilities after the last letter.

Input: 1 to 16 letters A–P, one letter a token (each token of the task is one letter, so
typing them side by side is the natural way: "MKPCFADJHNFADJHN"); spaces, tabs and line breaks
are ignored, so a segment can be set apart ("MKPC FADJHN FADJHN"), and lower case is read as
upper case.

Legend: T letters typed, V = 16 letters, L layers, H heads.
The page's forward is ``decoder.js``'s ``decoder_forward``; the oracle here is the model itself
(``decoder.reference``) and the notebook's own scores (``induction.mean_weight_on``,
``induction.induction_targets``).
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from ... import induction
from ...plotting import MASKED_COLOR
from ...transformer import DecoderLM
from .._common import check_figure, start_figure
from . import LiveView, mark, mark_ticks
from .decoder import export_decoder, kept_weights, reference

__all__ = ["KIND", "JS", "DEFAULT_TEXT", "ACCEPTED", "BAD_INPUTS", "CONTROLS", "live_view",
           "parse", "forward", "draw", "export"]
# (demo_model, random_texts, pick_heads: the tests' and the view's, not the series' API)

KIND = "induction"
JS = ["decoder.js", "induction.js"]
TASK = induction.CopyTask()  # the notebook's task: 16 letters, sequences of 16
VOCAB, MAX_LEN = TASK.vocab_size, TASK.seq_len
LETTERS = induction.LETTERS[:VOCAB]  # "ABCDEFGHIJKLMNOP"
SPACES = " \t\r\n"  # ignored between letters (the same set as induction.js)
EVAL_SEED = 1  # the notebook's evaluation sequences: train_with_checkpoints(seed=0) draws them
EVAL_SIZE = 128  # with Generator().manual_seed(0 + 1), 128 of them
DEFAULT_TEXT = "MKPC FADJHN FADJHN"  # a prefix, a segment of 6, the segment again: 16 letters
INPUT_LABEL = "letters"
ACCEPTED = (f"1 to {MAX_LEN} letters A–P, one letter a token (spaces are ignored; lower case "
            f"is read as upper case), e.g. a segment and its repeat: {DEFAULT_TEXT}.")
CONTROLS: dict = {}
TOP = 3  # next-letter guesses shown

LABEL = "live.induction"
FIGSIZE = (9.0, 4.4)
CMAP = "Reds"  # the notebook's heatmaps (show_heatmaps), the future in MASKED_COLOR
TICK_SIZE = 8


# ------------------------------------------------------------------------------ input
def parse(text: str, **controls: object) -> list[int]:
    """The token ids (0 = A … 15 = P) of ``text``: 1 to 16 letters A–P or a–p, spaces, tabs
    and line breaks ignored. ValueError (the message induction.js gives) for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if controls:
        raise ValueError(f"controls must be none (this view has no controls), got "
                         f"{sorted(controls)}")
    tokens = []
    for char in text:  # code points, as induction.js's Array.from(text)
        if char in SPACES:
            continue
        upper = char.upper() if char in LETTERS.lower() else char
        if upper not in LETTERS:
            raise ValueError(f"'{char}' is not a token: the model's tokens are the {VOCAB} "
                             f"letters A–P, one letter a token (spaces are ignored).")
        tokens.append(LETTERS.index(upper))
    if not tokens:
        raise ValueError(f"Type at least one letter: the model's tokens are the {VOCAB} letters "
                         f"A–P (spaces are ignored).")
    if len(tokens) > MAX_LEN:
        raise ValueError(f"{len(tokens)} letters is too many: at most {MAX_LEN}, the length "
                         f"of the sequences the model was trained on.")
    return tokens


BAD_INPUTS = {
    "": "Type at least one letter",
    " \n\t ": "Type at least one letter",
    "ABQ": "'Q' is not a token",
    "AB,C": "',' is not a token",
    "AB 7": "'7' is not a token",
    "ABCÄ": "'Ä' is not a token",
    "AB😀": "'😀' is not a token",
    "ABCDEFGHIJKLMNOPA": "17 letters is too many: at most 16",
    "abcd efgh abcd efgh i": "17 letters is too many: at most 16",
}


def random_texts(n: int, seed: int) -> list[str]:
    """``n`` valid inputs, seeded: a third drawn from the notebook's copy task (a prefix, a
    segment, the segment again; spaces around the segment), a third random letters with
    repeats, a third short or in lower case; 1 … 16 letters."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        if i % 3 == 0:
            batch = TASK.sample(1, gen)
            letters = induction.token_labels(batch.tokens[0])
            p = MAX_LEN - 2 * int(batch.period[0])  # the prefix's length
            end = int(rng.integers(p + 1, MAX_LEN + 1))  # cut anywhere after the prefix
            text = "".join(letters[:p]) + " " + "".join(letters[p:end])
        elif i % 3 == 1:
            length = int(rng.integers(1, MAX_LEN + 1))
            text = "".join(LETTERS[t] for t in rng.integers(0, VOCAB, length))
        else:
            text = "".join(LETTERS[t] for t in rng.integers(0, VOCAB, int(rng.integers(1, 6))))
            text = text.lower() if i % 2 else " ".join(text)
        out.append(text)
    return out


# ------------------------------------------------------------------------------ the model
def _check_model(model: object) -> DecoderLM:
    if not isinstance(model, DecoderLM):
        raise ValueError(f"model must be notebook 08's DecoderLM (induction.make_model), got "
                         f"{type(model).__name__}")
    if (model.vocab_size, model.max_len) != (VOCAB, MAX_LEN):
        raise ValueError(f"model must have the copy task's vocab_size and max_len ({VOCAB}, "
                         f"{MAX_LEN}), got ({model.vocab_size}, {model.max_len})")
    return model


@torch.no_grad()
def pick_heads(model: DecoderLM) -> dict[str, dict]:
    """The notebook's scores of every head on its 128 evaluation sequences
    (``induction.previous_token_score``; ``induction_score`` over the queries the loss scores):
    {"previous": {"layer", "head" (from 1), "score"} of the best previous-token head,
    "induction": the same for the best induction head}. The model's attention_weights are
    left as they were."""
    _check_model(model)
    batch = TASK.sample(EVAL_SIZE, torch.Generator().manual_seed(EVAL_SEED))
    tokens = batch.tokens.to(model.head.weight.device)
    with kept_weights(model):
        model(tokens)
        weights = torch.stack(model.attention_weights, dim=1).float().cpu()  # (B, L, H, T, T)
    scores = {"previous": induction.previous_token_score(weights, batch),  # (L, H)
              "induction": induction.induction_score(weights, batch.tokens, batch.predictable)}
    picked = {}
    for kind, s in scores.items():
        layer, head = divmod(int(s.argmax()), s.shape[1])
        picked[kind] = {"layer": layer + 1, "head": head + 1, "score": float(s[layer, head])}
    return picked


def export(model: DecoderLM) -> dict:
    """The model (``export_decoder``), the two heads the view shows and the letters."""
    return {"decoder": export_decoder(_check_model(model)), "heads": pick_heads(model),
            "letters": LETTERS, "max_len": MAX_LEN}


def _check_parsed(parsed: object) -> list[int]:
    ok = (isinstance(parsed, (list, tuple)) and 1 <= len(parsed) <= MAX_LEN
          and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < VOCAB
                  for t in parsed))
    if not ok:
        raise ValueError(f"parsed must be parse()'s list of 1 … {MAX_LEN} ids in [0, {VOCAB}), "
                         f"got {parsed!r:.80}")
    return list(parsed)


def _score(weights: torch.Tensor, keys: torch.Tensor) -> float | None:
    """``induction.mean_weight_on`` of one head's (T, T) weights on ``keys`` (T,), or None
    when no query has a key (``keys`` all −1)."""
    if not bool((keys >= 0).any()):
        return None
    return float(induction.mean_weight_on(weights[None], keys[None]))


def forward(model: DecoderLM, parsed: list[int], **controls: object) -> dict:
    """The oracle, the model itself in float32 (``decoder.reference``): ``previous`` and
    ``induction`` (T, T), the two heads' weights (query rows; 0 on the future); ``probs`` (V,)
    the next-letter probabilities after the last letter (softmax of the last logits);
    ``previous_score``, the previous-token head's mean weight on key i − 1 over the queries
    i ≥ 1, and ``induction_score``, the induction head's mean weight on the key after the
    latest earlier occurrence of the query's letter (``induction_targets``) over the queries
    that have one (None where no query counts)."""
    if controls:
        raise ValueError(f"controls must be none (this view has no controls), got "
                         f"{sorted(controls)}")
    tokens = _check_parsed(parsed)
    heads = pick_heads(_check_model(model))
    out = reference(model, tokens)
    logits = torch.from_numpy(out["logits"][-1])  # (V,) float32
    (lp, hp), (li, hi) = ((heads[k]["layer"] - 1, heads[k]["head"] - 1)
                          for k in ("previous", "induction"))
    previous = torch.from_numpy(out["weights"][lp, hp])  # (T, T)
    inducing = torch.from_numpy(out["weights"][li, hi])  # (T, T)
    T = len(tokens)
    return {"previous": previous.numpy(), "induction": inducing.numpy(),
            "probs": torch.softmax(logits, -1).numpy(),
            "previous_score": _score(previous, torch.arange(T) - 1),
            "induction_score": _score(inducing, induction.induction_targets(
                torch.tensor([tokens]))[0])}


# ------------------------------------------------------------------------------ the picture
def _texts(tokens: list[int], result: dict) -> dict[str, str]:
    """The four live lines: the prediction, what an induction head would copy, each head's
    weight on its target cells for this input."""
    probs = result["probs"].astype(np.float64)
    order = sorted(range(VOCAB), key=lambda v: (-probs[v], v))[:TOP]  # ties: the first letter
    last = LETTERS[tokens[-1]]
    guesses = " · ".join(f"{LETTERS[v]} {probs[v]:.2f}" for v in order)
    earlier = [j for j in range(len(tokens) - 1) if tokens[j] == tokens[-1]]
    if earlier:
        j = earlier[-1]
        copy = (f"{last} came before at position {j} (counting from 0), followed by "
                f"{LETTERS[tokens[j + 1]]}: "
                f"the letter an induction head reads there, and copies.")
    else:
        copy = (f"{last} has not come before: nothing to copy (and training never scored a "
                f"guess after a new letter).")
    T = len(tokens)
    s = result["previous_score"]
    previous = ("here: no query has a letter before it" if s is None else
                f"here: {s:.2f} on the letter just before (mean of {T - 1} "
                f"quer{'y' if T == 2 else 'ies'})")
    targets = int((induction.induction_targets(torch.tensor([tokens]))[0] >= 0).sum())
    s = result["induction_score"]
    inducing = ("here: no letter repeats, so no query has a letter to copy" if s is None else
                f"here: {s:.2f} on the letter after the earlier one (mean of {targets} "
                f"quer{'y' if targets == 1 else 'ies'})")
    return {"prediction": f"Next letter after the last one ({last}): {guesses}",
            "copy": copy, "previous_text": previous, "induction_text": inducing}


def _inches(fig: Figure, left: float, top: float, width: float, height: float) -> list[float]:
    """A box given in inches from the figure's top-left, in figure coordinates."""
    w, h = fig.get_size_inches()
    return [left / w, (h - top - height) / h, width / w, height / h]


def draw(model: DecoderLM, parsed: list[int], *, fig: Figure | None = None,
         **controls: object) -> Figure:
    """Two heatmaps, the previous-token head's and the induction head's weights on the typed
    letters (letters on both axes, the future grey), the next-letter guesses above them and a
    line under each title saying how much weight the head puts where its kind looks."""
    check_figure("fig", fig, optional=True)
    tokens = _check_parsed(parsed)
    result = forward(model, tokens, **controls)
    heads = pick_heads(model)
    fig = Figure(figsize=FIGSIZE) if fig is None else fig
    start_figure(fig, LABEL, fixed_layout=True)
    width, height = FIGSIZE
    texts = _texts(tokens, result)
    mark(fig.text(0.15 / width, 1 - 0.32 / height, texts["prediction"], ha="left",
                  va="baseline", fontsize=11), "prediction")
    mark(fig.text(0.15 / width, 1 - 0.56 / height, texts["copy"], ha="left", va="baseline",
                  fontsize=9), "copy")
    cmap = colormaps[CMAP].with_extremes(bad=MASKED_COLOR)
    norm = Normalize(0.0, 1.0)
    T = len(tokens)
    labels = [LETTERS[t] for t in tokens]
    future = np.triu(np.ones((T, T), dtype=bool), 1)  # (Q, K): the causal mask hides these
    kinds = {"previous": ("a previous-token head", "prev"),
             "induction": ("an induction head", "ind")}
    image = None
    for (kind, (what, short)), left in zip(kinds.items(), (0.7, 4.6)):
        head = heads[kind]
        fig.text(left / width, 1 - 0.93 / height,
                 f"Layer {head['layer']} · head {head['head']}, {what} ({short} "
                 f"{head['score']:.2f})", ha="left", va="baseline", fontsize=10)
        mark(fig.text(left / width, 1 - 1.13 / height, texts[f"{kind}_text"], ha="left",
                      va="baseline", fontsize=8), f"{kind}_text")
        ax = fig.add_axes(_inches(fig, left, 1.3, 2.85, 2.45))
        values = np.where(future, np.nan, result[kind].astype(np.float64))  # (T, T)
        image = mark(ax.imshow(values, aspect="auto", interpolation="nearest", cmap=cmap,
                               norm=norm), kind)
        ax.set_xticks(range(T), labels, fontsize=TICK_SIZE)
        ax.set_yticks(range(T), labels, fontsize=TICK_SIZE)
        ax.tick_params(axis="both", length=2, pad=2)
        ax.set_xlabel("key", fontsize=9)
        ax.set_ylabel("query", fontsize=9)
        ax.xaxis.set_label_coords(0.5, -0.1)
        ax.yaxis.set_label_coords(-0.075, 0.5)
        mark_ticks(ax.xaxis, f"{kind}_keys", LETTERS)
        mark_ticks(ax.yaxis, f"{kind}_queries", LETTERS)
    bar = fig.colorbar(image, cax=fig.add_axes(_inches(fig, 7.8, 1.3, 0.12, 2.45)))
    bar.set_ticks([0.0, 0.5, 1.0])
    bar.ax.tick_params(labelsize=8, length=2, pad=2)
    bar.set_label("attention weight", fontsize=8.5)
    fig.text(0.15 / width, 1 - 4.28 / height,
             f"Grey: the future. prev, ind: each head's score on the notebook's {EVAL_SIZE} "
             f"evaluation sequences; here: its mean over your queries with such a letter.",
             ha="left", va="baseline", fontsize=8, color="0.3")
    return fig


# ------------------------------------------------------------------------------ the view
def live_view(model: DecoderLM | None = None, text: str = DEFAULT_TEXT,
              **controls: object) -> LiveView:
    """The live view of ``model`` (notebook 08's trained DecoderLM; None: ``demo_model()``),
    opening on ``text``."""
    if controls:
        raise ValueError(f"controls must be none (this view has no controls), got "
                         f"{sorted(controls)}")
    model = demo_model() if model is None else _check_model(model)
    return LiveView.of(sys.modules[__name__], model, text, {})


_demo: dict[int, DecoderLM] = {}


def demo_model(seed: int = 0) -> DecoderLM:
    """Notebook 08's model of ``seed``, trained as the notebook trains it
    (``induction.train_with_checkpoints(task, steps=200)``: the same weights; about 2 s on a
    CPU), once per session."""
    if seed not in _demo:
        _demo[seed] = induction.train_with_checkpoints(TASK, steps=200, every=200, seed=seed).model
    return _demo[seed]
