"""Notebook 05 live: the reader types a date, the trained encoder-decoder with Bahdanau
attention rewrites it in the page, and the figure draws where each output step looked.

Legend: T source tokens (the keys and values), S decoding steps (the queries, one per output
token), N hidden units (``num_hiddens``), E embedding size, C target vocabulary size.
Weights are laid out (S, T); steps count from 1 in the figure (step t is row t - 1).

The page (``dates.js``) runs the model's greedy decoding itself, from the exported float32
weights: the bidirectional GRU encoder, the additive scorer, the GRU cell and the output layer
of ``helpers.seq2seq``, ``MAX_STEPS`` steps from ``<bos>``, each step feeding back its own
argmax (as ``greedy_decode``). ``forward`` is the oracle the browser tests compare it with:
``greedy_decode`` itself, and the logits of the same steps replayed with ``decoder.step``.

Input: any sequence of source tokens (digits, ',', '.', English month names whole or as
Jan ... Dec) of at most ``MAX_TOKENS``. A well-formed but impossible date (31 February 2001) is
accepted and decoded: the model runs on any tokens, and what it writes for a date that does
not exist (it copies the digits, it knows no calendar) is worth seeing; the figure's second
line says that there is no such date, so no right answer.
"""

from __future__ import annotations

import calendar
import functools
import sys

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from ...checks import check_seed
from ...plotting import MASKED_COLOR
from ...seq2seq import (
    BOS, EOS, MONTHS, MONTHS_ABBR, SRC_VOCAB, TGT_VOCAB, AttentionDecoder, Seq2Seq, encode_sources,
    greedy_decode, make_dates, output_text, tokenize_source, train_seq2seq,
)
from .._common import check_figure, start_figure
from . import LiveView, mark, mark_ticks, tensor_json

__all__ = ["KIND", "JS", "DEFAULT_TEXT", "ACCEPTED", "MAX_TOKENS", "MAX_STEPS", "YEARS",
           "BAD_INPUTS", "live_view", "parse", "forward", "draw", "export"]
# (demo_model, random_texts, read_date: the tests' and the view's, not the series' API)

KIND = "dates"
JS = ["dates.js"]
LABEL = "live.dates"  # the figure's label
DEFAULT_TEXT = "3 May 1998"
INPUT_LABEL = "a date to rewrite"
MAX_TOKENS = 16  # source tokens the view takes: the task's longest source has 10
SHOWN_CHARS = 36  # the title shows at most this much of the input (then "...")
MAX_STEPS = 12  # decoding steps, as s2s.predict (the notebook's) takes by default
YEARS = (1900, 2099)  # the years the notebook trains on (make_dates' default)
ACCEPTED = ("Accepted: a date such as 3 May 1998, May 3, 1998, 3 September 1998, "
            "September 3, 1998 or 03.05.1998, or any other mix of digits, ',', '.' and English "
            "month names (January ... December or Jan ... Dec, capitalised), "
            f"at most {MAX_TOKENS} tokens (each digit is one).")
FIGSIZE = (9.0, 4.5)
CMAP = colormaps["Reds"].with_extremes(bad=MASKED_COLOR)  # as draw_alignment
LEFT, RIGHT, BOTTOM, TOP = 0.14, 0.86, 0.29, 0.8  # the heatmap's box, figure fractions
STEP_LABELS = [f"{t}: {token}" for t in range(1, MAX_STEPS + 1) for token in TGT_VOCAB.itos]
SOURCE_TOKENS = SRC_VOCAB.itos[1:]  # every source token but <pad>

BAD_INPUTS = {
    "": "must hold at least one token, got none",
    "  \t ": "must hold at least one token, got none",
    "3 Mai 1998": "got 'Mai'",
    "3 may 1998": "'may' (write May)",
    "3/5/1998": "got '/'",
    "5 Sept 1998!": "got 'Sept' and '!'",
    "3 May 1998 ☃": "got '☃'",
    "1" * (MAX_TOKENS + 1): f"at most {MAX_TOKENS} tokens, got {MAX_TOKENS + 1}",
    "03.05.1998 03.05.1998": f"at most {MAX_TOKENS} tokens, got 20",
}


def _refuse(problem: str) -> ValueError:
    return ValueError(f"{problem}. {ACCEPTED}")


def parse(text: str) -> dict:
    """The reader's text → ``{"text": the text with its spaces tidied, "tokens": [...],
    "ids": [...] (SRC_VOCAB), "target": 'YYYY-MM-DD' or None, "note": str}`` (``read_date``).

    Raises ValueError (the page's message, word for word) for a text with no token, a token
    outside ``SRC_VOCAB`` or more than ``MAX_TOKENS`` tokens.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    tokens = tokenize_source(text)  # the notebook's tokenizer
    if not tokens:
        raise _refuse("The date must hold at least one token, got none")
    unknown = list(dict.fromkeys(t for t in tokens if t not in SRC_VOCAB.stoi))
    if unknown:
        listed = [f"'{t}'" + (f" (write {t.capitalize()})" if t.isascii() and t.isalpha()
                              and t.capitalize() in SRC_VOCAB.stoi else "") for t in unknown[:3]]
        shown = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
        raise _refuse(f"The date must be made of source tokens, got {shown}, "
                      f"outside the vocabulary")
    if len(tokens) > MAX_TOKENS:
        raise _refuse(f"The date must hold at most {MAX_TOKENS} tokens, got {len(tokens)}")
    target, note = read_date(tokens)
    return {"text": " ".join(text.split()), "tokens": tokens, "ids": SRC_VOCAB.encode(tokens),
            "target": target, "note": note}


def _digits(tokens: list[str], n: tuple[int, ...]) -> bool:
    return len(tokens) in n and all(t.isdigit() and t.isascii() for t in tokens)


def read_date(tokens: list[str]) -> tuple[str | None, str]:
    """What the source tokens say as a date of the task: ``(target, note)``.

    ``target`` is 'YYYY-MM-DD' when the tokens are exactly how ``format_date`` writes a real
    date (one of ``FORMATS``), else None; ``note`` says why there is no target (not one of the
    task's formats; no such date), or that the year lies outside ``YEARS``; '' otherwise.
    """
    months = {name: i + 1 for i, name in enumerate(MONTHS)}
    months.update({name: i + 1 for i, name in enumerate(MONTHS_ABBR)})
    not_task = (None, "not written in one of the task's five formats, so no target")
    n = len(tokens)
    if n >= 6 and tokens[-5] in months and _digits(tokens[:-5], (1, 2)) \
            and _digits(tokens[-4:], (4,)):  # 3 May 1998, 3 September 1998
        day, month, year = tokens[:-5], months[tokens[-5]], tokens[-4:]
    elif n >= 7 and tokens[0] in months and tokens[-5] == "," and _digits(tokens[1:-5], (1, 2)) \
            and _digits(tokens[-4:], (4,)):  # May 3, 1998, September 3, 1998
        day, month, year = tokens[1:-5], months[tokens[0]], tokens[-4:]
    elif n == 10 and tokens[2] == tokens[5] == "." \
            and _digits(tokens[:2] + tokens[3:5] + tokens[6:], (8,)):  # 03.05.1998
        day, year = tokens[:2], tokens[6:]
        month = int("".join(tokens[3:5]))
        if not 1 <= month <= 12:
            return None, f"no such date: there is no month {month}, so no right answer"
    else:
        return not_task
    if year[0] == "0" or (n != 10 and day[:-1] == ["0"]):  # the task writes 3 May, not 03 May
        return not_task
    d, y = int("".join(day)), int("".join(year))
    days = calendar.monthrange(y, month)[1]
    if not 1 <= d <= days:
        why = "days start at 1" if d == 0 else f"{MONTHS[month - 1]} {y} has {days} days"
        return None, f"no such date: {why}, so no right answer"
    note = "" if YEARS[0] <= y <= YEARS[1] else (
        f"{y} lies outside the training years {YEARS[0]}-{YEARS[1]}")
    return f"{y:04d}-{month:02d}-{d:02d}", note


def _check_model(model: object) -> Seq2Seq:
    if not isinstance(model, Seq2Seq) or not isinstance(model.decoder, AttentionDecoder):
        got = (f"a Seq2Seq with a {type(model.decoder).__name__}" if isinstance(model, Seq2Seq)
               else type(model).__name__)
        raise ValueError(f"model must be a Seq2Seq with attention (Seq2Seq(attention=True)), "
                         f"got {got}")
    return model


def _check_parsed(parsed: object) -> dict:
    """Raise unless ``parsed`` is what ``parse`` returns: its keys, 1 … MAX_TOKENS source
    tokens."""
    tokens = parsed.get("tokens") if isinstance(parsed, dict) else None
    ok = (isinstance(parsed, dict) and set(parsed) == {"text", "tokens", "ids", "target", "note"}
          and isinstance(parsed["text"], str) and isinstance(tokens, list)
          and 1 <= len(tokens) <= MAX_TOKENS
          and all(isinstance(t, str) and t in SRC_VOCAB.stoi and t != SRC_VOCAB.itos[0]
                  for t in tokens)
          and (parsed["target"] is None or isinstance(parsed["target"], str))
          and isinstance(parsed["note"], str))
    if not ok:
        raise ValueError(f"parsed must be parse()'s dict {{'text', 'tokens', 'ids', 'target', "
                         f"'note'}} (1 … {MAX_TOKENS} source tokens), got {parsed!r:.80}")
    return parsed


def export(model: Seq2Seq) -> dict:
    """The model as the page reads it: every weight of ``model.state_dict()`` by its name
    (float32, ``tensor_json``), the vocabularies and the view's limits. The model is not changed."""
    _check_model(model)
    return {"weights": {name: tensor_json(t) for name, t in model.state_dict().items()},
            "src_itos": list(SRC_VOCAB.itos), "tgt_itos": list(TGT_VOCAB.itos),
            "months": list(MONTHS), "months_abbr": list(MONTHS_ABBR), "years": list(YEARS),
            "max_tokens": MAX_TOKENS, "max_steps": MAX_STEPS, "accepted": ACCEPTED}


@torch.no_grad()
def forward(model: Seq2Seq, parsed: dict) -> dict:
    """The oracle: the page's numbers as the helpers compute them (in the model's dtype,
    float32 for the notebook's, on its device).

    ``greedy_decode`` gives the ids and the weights of ``MAX_STEPS`` steps; the logits of those
    steps come from replaying them with ``model.decoder.step`` fed the same ids. Returns
    ``encoder_outputs`` (T, 2N), ``initial_state`` (N,), ``weights`` (S, T), ``logits`` (S, C),
    ``probs`` (S, C) (softmax of the logits), ``ids`` and ``tokens`` (S,), ``steps`` (the rows
    drawn: up to and including the first ``<eos>``), ``output`` (the text written) and the two
    lines of the figure's title (``title``, ``verdict``).
    """
    _check_model(model)
    _check_parsed(parsed)
    device = next(model.parameters()).device
    src, lens = encode_sources([" ".join(parsed["tokens"])], device)  # (1, T), (1,)
    was_training = model.training
    model.eval()
    try:
        ids, weights = greedy_decode(model, src, lens, MAX_STEPS)  # (1, S), (1, S, T)
        enc, state = model.encoder(src, lens)  # (1, T, 2N), (1, N)
        initial = state[0]
        token = torch.full((1,), TGT_VOCAB.stoi[BOS], dtype=torch.long, device=device)
        logits = []
        for t in range(MAX_STEPS):
            out, state, _ = model.decoder.step(token, state, enc, lens)  # (1, C), (1, N)
            logits.append(out[0])
            token = ids[:, t]
    finally:
        model.train(was_training)
    logits = torch.stack(logits)  # (S, C)
    tokens = TGT_VOCAB.decode(ids[0])
    steps = tokens.index(EOS) + 1 if EOS in tokens else MAX_STEPS
    output = output_text(tokens[:steps])
    title, verdict = _title(parsed, output, EOS in tokens)

    def f64(t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().double().numpy()

    return {"encoder_outputs": f64(enc[0]), "initial_state": f64(initial),
            "weights": f64(weights[0]), "logits": f64(logits),
            "probs": f64(torch.softmax(logits, dim=-1)), "ids": ids[0].tolist(),
            "tokens": tokens, "steps": steps, "output": output, "title": title,
            "verdict": verdict}


def _title(parsed: dict, output: str, ended: bool) -> tuple[str, str]:
    """The figure's two lines: what was typed → what the model wrote (``ended``: it wrote
    ``<eos>``); whether that is the date."""
    text = parsed["text"]
    text = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."
    title = f"'{text}' → {output if output else '(nothing)'}"
    if not ended:
        title += f" (no <eos> in {MAX_STEPS} steps)"
    target, note = parsed["target"], parsed["note"]
    if target is None:
        verdict = note
    else:
        verdict = ("right" if output == target else "wrong") + f": the date is {target}"
        verdict += f" ({note})" if note else ""
    return title, verdict


def _layout(fig: Figure) -> None:
    """The fixed frame: the heatmap's Axes, its colour bar, labels, and the two title lines."""
    start_figure(fig, LABEL, fixed_layout=True)
    ax = fig.add_axes((LEFT, BOTTOM, RIGHT - LEFT, TOP - BOTTOM))
    image = ax.imshow(np.zeros((1, 1)), cmap=CMAP, norm=Normalize(0.0, 1.0), aspect="auto",
                      interpolation="nearest")
    mark(image, "weights")
    cax = fig.add_axes((RIGHT + 0.02, BOTTOM, 0.015, TOP - BOTTOM))
    fig.colorbar(image, cax=cax).set_label("attention weight α_tj")
    ax.set_xlabel("source token j (the keys)")
    ax.set_ylabel("step t: output token y_t")
    ax.xaxis.set_label_coords(0.5, -0.39)  # fixed: not moved by the widest tick label
    ax.yaxis.set_label_coords(-0.15, 0.5)
    mark_ticks(ax.xaxis, "source", SOURCE_TOKENS)
    mark_ticks(ax.yaxis, "steps", STEP_LABELS)
    title, verdict = _title_texts(fig, "title", "verdict")
    mark(title, "title")
    mark(verdict, "verdict")


def _title_texts(fig: Figure, title: str, verdict: str) -> tuple:
    """Set the two title lines (the figure's suptitle, the Axes' left title: both name the
    canvas in the page), at fixed places (left-aligned, no automatic placement)."""
    ax = fig.axes[0]
    return (fig.suptitle(title, x=LEFT, y=0.93, ha="left", va="baseline", fontsize="large"),
            ax.set_title(verdict, loc="left", y=1.09, fontsize="medium", color="0.35"))


def draw(model: Seq2Seq, parsed: dict, *, fig: Figure | None = None) -> Figure:
    """The alignment of the model's greedy output for ``parsed``: one row per output token
    written (up to and including ``<eos>``), one column per source token, the weights on
    draw_alignment's fixed 0-1 Reds scale; the title says the input and the output, and
    whether the output is the date (``read_date``)."""
    check_figure("fig", fig, optional=True)
    result = forward(model, parsed)
    if fig is None:
        fig = Figure(figsize=FIGSIZE)
    if fig.get_label() != LABEL or len(fig.axes) != 2:
        _layout(fig)
    ax = fig.axes[0]
    S, tokens = result["steps"], parsed["tokens"]
    ax.images[0].set_data(result["weights"][:S])  # (S, T)
    ax.images[0].set_extent((-0.5, len(tokens) - 0.5, S - 0.5, -0.5))
    ax.set_xlim(-0.5, len(tokens) - 0.5)
    ax.set_ylim(S - 0.5, -0.5)  # step 1 on top
    ax.set_xticks(range(len(tokens)), tokens, rotation=45, ha="right", rotation_mode="anchor",
                  fontsize="small")
    ax.set_yticks(range(S), [f"{t}: {tok}" for t, tok in enumerate(result["tokens"][:S], 1)],
                  fontsize="small")
    _title_texts(fig, result["title"], result["verdict"])
    return fig


def random_texts(n: int, seed: int) -> list[str]:
    """``n`` valid inputs: the task's dates (``make_dates``: random dates, random formats),
    one in ten from the years 1000-9999, and one in ten random strings of source tokens."""
    seed = check_seed(seed)
    far, odd = n // 10, n // 10
    texts = make_dates(n - far - odd, seed=seed).texts
    texts += make_dates(far, seed=seed, years=(1000, 9999)).texts if far else []
    gen = torch.Generator().manual_seed(seed)
    for _ in range(odd):
        k = int(torch.randint(1, MAX_TOKENS + 1, (1,), generator=gen))
        picks = torch.randint(1, len(SRC_VOCAB), (k,), generator=gen).tolist()
        texts.append(" ".join(SRC_VOCAB.itos[i] for i in picks))
    return texts


def live_view(model: Seq2Seq | None = None, text: str = DEFAULT_TEXT) -> LiveView:
    """The live view of ``model`` (None: ``demo_model()``), opening on ``text``."""
    model = demo_model() if model is None else _check_model(model)
    return LiveView.of(sys.modules[__name__], model, text)


@functools.lru_cache(maxsize=1)
def _demo_state() -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Seq2Seq(embed_size=16, num_hiddens=32)
    train_seq2seq(model, make_dates(4000, seed=1), steps=100, batch_size=128, lr=0.02,
                  print_every=None, num_threads=1)
    return {k: v.clone() for k, v in model.state_dict().items()}


def demo_model() -> Seq2Seq:
    """The notebook's model, trained as notebook 05 trains it (seed 0, 4000 dates, 100 Adam
    steps; about 3 s the first time, then a fresh copy of the same weights), in eval mode."""
    with torch.random.fork_rng(devices=[]):
        model = Seq2Seq(embed_size=16, num_hiddens=32)
    model.load_state_dict(_demo_state())
    return model.eval()
