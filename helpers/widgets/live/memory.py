"""Live view for notebook 12: the reader writes key → value pairs into the memories of
``helpers.recall`` and reads every key back.

The notebook trains ``recall.RecallModel(64, 64, 16, kind)`` for every kind (200 Adam steps,
seeds 0–2). This view takes its seed-0 models of five kinds (``MEMORIES``: softmax attention,
linear attention, the additive sum of unit keys, the decaying sum, the delta rule) and, for the
pairs the reader types (``3=17 8=42 3=40``: a key written again gets a new value), writes them
into the memory the select picks, in order, then reads each distinct key once, as the notebook's
task asks. The figure: left, what the memory holds (the state S (D, D) of the fixed memories;
softmax's cache of every k and v, which grows); middle, the weight of each write in each read
(every memory's read is a weighted sum of the written values, read_i = Σ_j w_ij v_j: softmax's
attention weights, linear attention's normalised kernel, q̂·k̂ for the additive sum, the decay's
γ^age q̂·k̂, and for the delta rule the same state written with one-hot values); right, the
probability the model gives each written value (and all the others together) for each key, and
the value it recalls. The title counts the keys that read back their latest value.

Legend: T writes (≤ ``MAX_WRITES``), M distinct keys read (M ≤ T), D the models' size (16),
U distinct values written.

The oracle (``forward``) is the model itself: ``RecallModel.forward`` for the logits, and the
helpers the notebook uses for what the memory holds and how each read weighs the writes
(``attention.scaled_dot_product``, ``linear_attention.linear_attention``,
``linear_attention.recurrent_states`` with the model's β or γ), in float32; ``draw`` runs it
on a float64 copy of the same weights, as the page computes.
"""

from __future__ import annotations

import copy
import math
import re
import sys
from collections.abc import Mapping

import ipywidgets as widgets
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from ...attention import scaled_dot_product
from ...linear_attention import elu_feature_map, linear_attention, recurrent_states
from ...recall import RecallModel, make_batch, train
from .._common import check_figure, start_figure
from . import LiveView, mark, mark_ticks, tensor_json

__all__ = ["KIND", "JS", "DEFAULT_TEXT", "ACCEPTED", "MEMORIES", "MAX_WRITES", "BAD_INPUTS",
           "CONTROLS", "live_view", "parse", "forward", "draw", "export"]
# (demo_model, random_texts, reads, float64: the tests' and the view's, not the series' API)

KIND = "memory"
JS = ["memory.js"]
NUM_KEYS = NUM_VALUES = 64  # the notebook's RecallModel(64, 64, 16, kind)
SIZE = 16
MEMORIES = ("softmax", "linear", "additive", "decay", "delta")  # the select's values
MAX_WRITES = 12  # one column a write in the middle panel
DEFAULT_TEXT = "3=17 8=42 21=5 30=9 3=40"
INPUT_LABEL = "writes key=value, in order"
ACCEPTED = (f"Up to {MAX_WRITES} writes key=value (keys and values: whole numbers "
            f"0–{NUM_KEYS - 1}, the models' 64 key and 64 value tokens) separated by spaces or "
            f"commas; a key written again gets the new value, and every key is then read back.")
_SEPARATORS = re.compile(r"[ \t\n\r,;]+")  # the same set as memory.js (not \s: JS's differs)
_EQUALS = re.compile(r"[ \t]*=[ \t]*")  # "3 = 17" is "3=17"
_WRITE = re.compile(r"(0|[1-9][0-9]*)=(0|[1-9][0-9]*)")

LABEL = "live.memory"
FIGSIZE = (9.0, 4.4)
NAMES = [str(i) for i in range(NUM_KEYS)]  # token id → tick label ("0" … "63")
OTHER = "rest"  # the probabilities' last column: every value not written, together
RECALLED = [f"→ {v} {mark_}" for v in range(NUM_VALUES) for mark_ in ("✓", "✗")]
TICK_SIZE = 7
STATE_CMAP = WEIGHT_CMAP = "RdBu_r"
PROB_CMAP = "Blues"


# ------------------------------------------------------------------------------ input
def _shown(word: str) -> str:
    """A word as a message quotes it: at most 12 characters (code points)."""
    return word if len(word) <= 12 else word[:12] + "…"


def _refuse(message: str):
    raise ValueError(message)


def parse(text: str, **controls: object) -> tuple[tuple[int, int], ...]:
    """The writes in order, ((key, value), …), 1 … ``MAX_WRITES`` of them, ids in [0, 64).
    ``text``: pairs key=value separated by spaces, commas or semicolons (spaces around "=" are
    allowed). ValueError (the message memory.js gives) for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    words = [w for w in _SEPARATORS.split(_EQUALS.sub("=", text)) if w]
    last = NUM_KEYS - 1
    if not words:
        _refuse(f"Type at least one write key=value, e.g. 3=17: keys and values are whole "
                f"numbers 0–{last}.")
    writes = []
    for word in words:
        match = _WRITE.fullmatch(word)
        if match is None:
            _refuse(f"'{_shown(word)}' is not a write: type key=value, two whole numbers "
                    f"0–{last} (no leading zeros) joined by = (e.g. 3=17), separated by spaces "
                    f"or commas.")
        key, value = match.groups()
        if int(key) >= NUM_KEYS:
            _refuse(f"'{_shown(word)}': the key {_shown(key)} is not one of the models' "
                    f"{NUM_KEYS} keys, 0–{last}.")
        if int(value) >= NUM_VALUES:
            _refuse(f"'{_shown(word)}': the value {_shown(value)} is not one of the models' "
                    f"{NUM_VALUES} values, 0–{last}.")
        writes.append((int(key), int(value)))
    if len(writes) > MAX_WRITES:
        _refuse(f"{len(writes)} writes is too many: at most {MAX_WRITES} (the middle panel "
                f"keeps one column a write).")
    return tuple(writes)


def random_texts(n: int, seed: int) -> list[str]:
    """``n`` valid inputs, seeded: 1 … 12 writes; half from the notebook's task
    (``recall.make_batch``: distinct keys, then some written again with new values), half keys
    drawn with repeats; spaces, commas, ";" or spaces around "=" between them."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        if i % 2:
            pairs = int(rng.integers(1, 9))
            again = int(rng.integers(0, min(pairs, MAX_WRITES - pairs) + 1))
            keys, values, _, _ = make_batch(1, pairs, rewrites=again, generator=gen)
            writes = list(zip(keys[0].tolist(), values[0].tolist()))
        else:
            count = int(rng.integers(1, MAX_WRITES + 1))
            keys = rng.integers(0, int(rng.integers(2, NUM_KEYS + 1)), count).tolist()
            writes = list(zip(keys, rng.integers(0, NUM_VALUES, count).tolist()))
        sep, eq = ((" ", "="), (", ", "="), (",", " = "), ("; ", "="))[i % 4]
        out.append(sep.join(f"{k}{eq}{v}" for k, v in writes))
    return out


BAD_INPUTS = {
    "": "Type at least one write key=value",
    " , ;": "Type at least one write key=value",
    "3=17 8": "'8' is not a write",
    "3=17 8=": "'8=' is not a write",
    "a=1": "'a=1' is not a write",
    "3=1.5": "'3=1.5' is not a write",
    "03=17": "'03=17' is not a write",
    "3=-1": "'3=-1' is not a write",
    "3==17": "'3==17' is not a write",
    "64=1": "the key 64 is not one of the models' 64 keys",
    "3=64": "the value 64 is not one of the models' 64 values",
    "1=1 " + "9" * 20 + "=2": "the key 999999999999… is not one of",
    " ".join(f"{k}=1" for k in range(13)): "13 writes is too many: at most 12",
    "3=17 abcdefghijklmnop": "'abcdefghijkl…' is not a write",
}


# ------------------------------------------------------------------------------ the models
def _check_models(model: object) -> dict[str, RecallModel]:
    """The five RecallModels of ``MEMORIES`` (the models themselves, in a plain dict)."""
    if not isinstance(model, Mapping) or set(model) != set(MEMORIES):
        got = sorted(model) if isinstance(model, Mapping) else type(model).__name__
        raise ValueError(f"model must be a dict with the keys {list(MEMORIES)} (the notebook's "
                         f"RecallModel of each kind), got {got}")
    for kind in MEMORIES:
        m = model[kind]
        if not isinstance(m, RecallModel) or m.kind != kind:
            of = f" of kind {m.kind!r}" if isinstance(m, RecallModel) else ""
            raise ValueError(f"model[{kind!r}] must be a recall.RecallModel of kind {kind!r}, got "
                             f"{type(m).__name__}{of}")
        shape = (m.num_keys, m.num_values, m.size)
        if shape != (NUM_KEYS, NUM_VALUES, SIZE):
            raise ValueError(f"model[{kind!r}] must have the notebook's (num_keys, num_values, "
                             f"size) = {(NUM_KEYS, NUM_VALUES, SIZE)}, got {shape}")
    return {kind: model[kind] for kind in MEMORIES}


def export(model: Mapping[str, RecallModel]) -> dict:
    """Every model's weights (float32): {"models": {kind: {"key_embedding" (64, D),
    "value_embedding" (64, D), "W_q", "W_k", "W_v" (D, D) as nn.Linear holds them (out, in),
    "readout_weight" (64, D), "readout_bias" (64,), and "beta_logit" (delta) or "decay_logit"
    (decay), 0-d}}}."""
    models = _check_models(model)
    out = {}
    for kind, m in models.items():
        w = {"key_embedding": m.key_embedding.weight, "value_embedding": m.value_embedding.weight,
             "W_q": m.W_q.weight, "W_k": m.W_k.weight, "W_v": m.W_v.weight,
             "readout_weight": m.readout.weight, "readout_bias": m.readout.bias}
        if kind == "delta":
            w["beta_logit"] = m.beta_logit
        if kind == "decay":
            w["decay_logit"] = m.decay_logit
        out[kind] = {name: tensor_json(t) for name, t in w.items()}
    return {"models": out}


def _memory(memory: object = "delta") -> str:
    if memory not in MEMORIES:
        raise ValueError(f"memory must be one of {MEMORIES}, got {memory!r:.60}")
    return str(memory)


def _check_parsed(parsed: object) -> list[tuple[int, int]]:
    ok = (isinstance(parsed, (list, tuple)) and 1 <= len(parsed) <= MAX_WRITES
          and all(isinstance(p, (list, tuple)) and len(p) == 2
                  and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < NUM_KEYS
                          for x in p) for p in parsed))
    if not ok:
        raise ValueError(f"parsed must be parse()'s ((key, value), …): 1 … {MAX_WRITES} pairs of "
                         f"ids in [0, {NUM_KEYS}), got {parsed!r:.80}")
    return [tuple(p) for p in parsed]


def reads(writes: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """The keys read back (each distinct key once, in the order of its first write) and the
    value each should recall (its latest)."""
    latest = {}
    for key, value in writes:
        latest[key] = value
    queries = list(dict.fromkeys(k for k, _ in writes))
    return queries, [latest[k] for k in queries]


def forward(model: Mapping[str, RecallModel], parsed: object, *, memory: object = "delta",
            ) -> dict[str, object]:
    """The oracle, in the models' dtype (float32; ``float64(model)`` gives the same formulas
    without float32's rounding, as the page computes them). For the writes ``parsed`` into the
    model of kind ``memory`` and the distinct keys read back (``reads``):

    * ``logits`` (M, 64): ``RecallModel.forward``; ``probs`` (M, 64) their softmax;
    * ``weights`` (M, T): the weight of write j in read i, read_i = Σ_j w_ij v_j (the read the
      model's readout takes): the same memory written with one-hot values (the T × T identity)
      and read with the same queries. softmax: ``scaled_dot_product``'s weights; linear:
      ``linear_attention``; additive, decay, delta: ``recurrent_states`` of the unit keys (with
      the model's γ as ``decay``, β as ``beta``), read by the unit queries;
    * ``state``: what the memory holds after the last write: softmax's cache [K | V] (T, 2D);
      linear's S = Σ φ(k_j) v_jᵀ (D, D) (``recurrent_states`` of φ(k)) and ``z`` = Σ φ(k_j)
      (D,); the others' S (D, D) (``recurrent_states`` of the unit keys);
    * ``recalled`` (M,) the argmax of each row of logits (a list of ints)."""
    models = _check_models(model)
    kind = _memory(memory)
    writes = _check_parsed(parsed)
    m = models[kind]
    queries, _ = reads(writes)
    keys = torch.tensor([[k for k, _ in writes]])  # (1, T)
    values = torch.tensor([[v for _, v in writes]])  # (1, T)
    asked = torch.tensor([queries])  # (1, M)
    T = len(writes)
    out: dict[str, object] = {}
    with torch.no_grad():
        logits = m(keys, values, asked)[0]  # (M, 64)
        k = m.W_k(m.key_embedding(keys))  # (1, T, D)
        v = m.W_v(m.value_embedding(values))  # (1, T, D)
        q = m.W_q(m.key_embedding(asked))  # (1, M, D)
        one_hot = torch.eye(T, dtype=k.dtype)[None]  # (1, T, T): write j's value is e_j
        if kind == "softmax":
            _, weights = scaled_dot_product(q, k, one_hot)  # (1, M, T)
            state = torch.cat([k, v], dim=-1)[0]  # (T, 2D): the cache
        elif kind == "linear":
            weights = linear_attention(q, k, one_hot)  # (1, M, T)
            phi = elu_feature_map(k)  # (1, T, D)
            state = recurrent_states(phi, v)[0, -1]  # (D, D)
            out["z"] = phi.sum(dim=1)[0].numpy()  # (D,)
        else:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # unit, as the model does
            rule = {"beta": m.beta if kind == "delta" else None,
                    "decay": m.decay.item() if kind == "decay" else None}
            if rule["beta"] is not None:
                rule["beta"] = rule["beta"].expand(1, T)  # (1, T): the learnt β at each write
            weights = q @ recurrent_states(k, one_hot, **rule)[:, -1]  # (1, M, T)
            state = recurrent_states(k, v, **rule)[0, -1]  # (D, D)
    out |= {"logits": logits.numpy(), "probs": torch.softmax(logits, dim=-1).numpy(),
            "weights": weights[0].numpy(), "state": state.numpy(),
            "recalled": [int(i) for i in logits.argmax(dim=-1)]}
    return out


def float64(model: Mapping[str, RecallModel]) -> dict[str, RecallModel]:
    """Copies of the models in float64 (the same float32 weights, exactly): the oracle's
    formulas without float32's rounding, as the page computes them. ``draw`` draws from these,
    so that a value on a colour's edge (softmax's 0.5 for a key written twice) falls on the
    same side in matplotlib and in the page."""
    return {kind: copy.deepcopy(m).double() for kind, m in _check_models(model).items()}


# ------------------------------------------------------------------------------ the words
def _sigmoid(logit: torch.Tensor) -> float:
    """σ of a float32 logit, in float64 (as the page computes it, for the titles)."""
    return 1.0 / (1.0 + math.exp(-float(logit.detach())))


def _name(m: RecallModel, kind: str) -> str:
    """The memory as the title names it (with its learnt β or γ)."""
    if kind == "decay":
        return f"Decaying memory S ← γ S + k̂ vᵀ (γ = {_sigmoid(m.decay_logit):.3f} learnt)"
    if kind == "delta":
        return f"Delta rule S ← S + β k̂ (v − Sᵀk̂)ᵀ (β = {_sigmoid(m.beta_logit):.2f} learnt)"
    return {"softmax": "Softmax attention (a cache of every write)",
            "linear": "Linear attention (φ = elu + 1, a fixed state)",
            "additive": "Additive memory S ← S + k̂ vᵀ"}[kind]


def _texts(m: RecallModel, kind: str, writes: list[tuple[int, int]],
           result: dict[str, object]) -> dict[str, str]:
    """The live lines: the title (how many keys read back right), the rewrite line, the state
    panel's two lines, the weights panel's formula."""
    queries, targets = reads(writes)
    recalled = result["recalled"]
    right = sum(r == t for r, t in zip(recalled, targets))
    M, T = len(queries), len(writes)
    title = f"{_name(m, kind)}: {right} of {M} keys read back their latest value"
    again = [k for k in queries if sum(w == k for w, _ in writes) > 1]
    if not again:
        k, v = writes[0]
        rewrite = (f"No key written twice: write one again (e.g. add {k}={(v + 1) % NUM_VALUES}) "
                   f"to see whether this memory replaces its value or adds the new one to it.")
    else:
        k = again[0]
        i = queries.index(k)
        cols = [j for j, (w, _) in enumerate(writes) if w == k]
        weights = result["weights"][i]
        values = ", ".join(str(writes[j][1]) for j in cols)
        said = ", ".join(f"{float(weights[j]):.2f}" for j in cols)
        p = float(result["probs"][i][recalled[i]])
        verdict = ("its latest ✓" if recalled[i] == targets[i]
                   else f"not its latest ({targets[i]}) ✗")
        rewrite = (f"Key {k} written {len(cols)} times ({values}): its read weighs those writes "
                   f"{said} and recalls {recalled[i]} (p {p:.2f}), {verdict}"
                   + (f"; {len(again) - 1} more key{'s' if len(again) > 2 else ''} written again."
                      if len(again) > 1 else "."))
    top = float(np.abs(result["state"]).max())
    if kind == "softmax":
        state = f"Cache K, V: {T} × {2 * SIZE} = {T * 2 * SIZE} numbers, grows"
        rows = f"rows: writes (key); columns: k, then v; ÷ {top:.2f}"
    elif kind == "linear":
        state = f"State S, z: {SIZE} × {SIZE} + {SIZE} = {SIZE * SIZE + SIZE} numbers, fixed"
        rows = f"S; rows: key dim.; columns: value dim.; ÷ {top:.2f}"
    else:
        state = f"State S: {SIZE} × {SIZE} = {SIZE * SIZE} numbers, fixed"
        rows = f"rows: key dim.; columns: value dim.; ÷ {top:.2f}"
    formula = {"softmax": "w = softmax(q·k / √16) over the writes",
               "linear": "w = φ(q)·φ(k) / Σ φ(q)·φ(k)",
               "additive": "w = q̂·k̂",
               "decay": "w = γ^(writes after it) q̂·k̂",
               "delta": "w = q̂ᵀS for one-hot values v = e_j"}[kind]
    return {"title": title, "rewrite": rewrite, "state_title": state, "state_rows": rows,
            "formula": formula}


# ------------------------------------------------------------------------------ the picture
def _layout(fig: Figure) -> None:
    """The fixed frame: two live lines on top; three heatmaps (the state, the weights, the
    probabilities), each under two lines of text (live where they depend on the memory), with
    live tick labels; horizontal colour bars under them. Inches from the top-left of
    ``FIGSIZE``."""
    start_figure(fig, LABEL, fixed_layout=True)
    width, height = FIGSIZE
    top, tall, bars = 1.12, 2.28, 3.84  # the heatmaps' top and height; the colour bars' top

    def box(left: float, y: float, w: float, h: float) -> list[float]:
        return [left / width, (height - y - h) / height, w / width, h / height]

    def line(left: float, baseline: float, text: str, size: float, name: str | None = None,
             colour: str = "black") -> None:
        t = fig.text(left / width, 1 - baseline / height, text, ha="left", va="baseline",
                     fontsize=size, color=colour)
        if name:
            mark(t, name)

    line(0.12, 0.22, "placeholder", 10.5, "title")
    line(0.12, 0.43, "placeholder", 8.5, "rewrite")
    panels = {"state": (0.42, 2.1), "weights": (3.2, 2.5), "probs": (6.28, 2.1)}
    axes = {}
    for name, (left, w) in panels.items():
        axes[name] = ax = fig.add_axes(box(left, top, w, tall), label=name)
        ax.tick_params(axis="both", length=2, pad=1.5, labelsize=TICK_SIZE)

    left, w = panels["state"]
    ax = axes["state"]
    line(left, top - 0.36, "placeholder", 8, "state_title")
    line(left, top - 0.2, "placeholder", 7, "state_rows", "0.3")
    image = ax.imshow(np.zeros((SIZE, SIZE)), aspect="auto", interpolation="nearest",
                      cmap=STATE_CMAP, norm=Normalize(-1.0, 1.0))
    mark(image, "state")
    ax.set_xticks([])
    ax.set_yticks(range(SIZE), NAMES[:SIZE])
    mark_ticks(ax.yaxis, "state_ticks", NAMES)
    _bar(fig, image, box(left, bars, w, 0.09), "each entry ÷ the largest |entry| (above)",
         [-1, 0, 1])

    left, w = panels["weights"]
    ax = axes["weights"]
    line(left, top - 0.36, "How much each write weighs in each read", 8)
    line(left, top - 0.2, "placeholder", 7, "formula", "0.3")
    image = ax.imshow(np.zeros((1, 1)), aspect="auto", interpolation="nearest",
                      cmap=WEIGHT_CMAP, norm=Normalize(-1.0, 1.0))
    mark(image, "weights")
    ax.set_xticks([0], ["0"])
    ax.set_yticks([0], ["0"])
    ax.set_xlabel("writes: key (value above)", fontsize=7.5)
    ax.xaxis.set_label_coords(0.5, -0.075)
    ax.set_ylabel("key read", fontsize=7.5)
    ax.yaxis.set_label_coords(-0.085, 0.5)
    mark_ticks(ax.xaxis, "write_keys", NAMES)
    mark_ticks(ax.yaxis, "weight_reads", NAMES)
    _bar(fig, image, box(left, bars, w, 0.09),
         "w_ij, the weight of write j in read i: read_i = Σ_j w_ij v_j", [-1, -0.5, 0, 0.5, 1])
    above = ax.twiny()  # the value of each write, on top
    above.set_label("write values")
    above.set_xlim(-0.5, 0.5)
    above.set_xticks([0], ["0"])
    above.tick_params(axis="x", length=2, pad=1.5, labelsize=TICK_SIZE, labelcolor="0.3")
    mark_ticks(above.xaxis, "write_values", NAMES)

    left, w = panels["probs"]
    ax = axes["probs"]
    line(left, top - 0.36, "What each key reads back: p(value)", 8)
    line(left, top - 0.2, "values written, then the rest together; → argmax", 7,
         colour="0.3")
    image = ax.imshow(np.zeros((1, 1)), aspect="auto", interpolation="nearest",
                      cmap=PROB_CMAP, norm=Normalize(0.0, 1.0))
    mark(image, "probs")
    ax.set_xticks([0], ["0"])
    ax.tick_params(axis="x", labelsize=6.5)  # up to 13 columns: "rest" beside a number
    ax.set_yticks([0], ["0"])
    ax.set_xlabel("value", fontsize=7.5)
    ax.xaxis.set_label_coords(0.5, -0.075)
    mark_ticks(ax.xaxis, "values", NAMES + [OTHER])
    mark_ticks(ax.yaxis, "prob_reads", NAMES)
    _bar(fig, image, box(left, bars, w, 0.09), "probability", [0, 0.5, 1])
    right = ax.twinx()  # the recalled value, on the right
    right.set_label("recalled")
    right.set_ylim(0.5, -0.5)
    right.set_yticks([0], [RECALLED[0]])
    right.tick_params(axis="y", length=2, pad=1.5, labelsize=TICK_SIZE)
    mark_ticks(right.yaxis, "recalled", RECALLED)


def _bar(fig: Figure, image, rect: list[float], label: str, ticks: list[float]) -> None:
    bar = fig.colorbar(image, cax=fig.add_axes(rect), orientation="horizontal")
    bar.set_ticks(ticks)
    bar.ax.tick_params(labelsize=7, length=2, pad=1.5)
    bar.set_label(label, fontsize=7, labelpad=1)


def _fill(ax, data: np.ndarray) -> None:
    """Set ``ax``'s heatmap to ``data`` (rows, cols), filling the Axes."""
    rows, cols = data.shape
    image = ax.images[0]
    image.set_data(data)
    image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)


def _probs_table(writes: list[tuple[int, int]], probs: np.ndarray
                 ) -> tuple[list[int], np.ndarray]:
    """The values written (distinct, first-written first) and the probabilities (M, U + 1):
    each written value's, then 1 − their sum (every other value), in float64."""
    written = list(dict.fromkeys(v for _, v in writes))
    p = probs.astype(np.float64)[:, written]  # (M, U)
    return written, np.concatenate([p, 1.0 - p.sum(axis=1, keepdims=True)], axis=1)


def draw(model: Mapping[str, RecallModel], parsed: object, *, fig: Figure | None = None,
         memory: object = "delta") -> Figure:
    """The figure for the writes ``parsed`` into the model of kind ``memory``: see the
    module's docstring. ``fig``: a Figure this function drew is updated in place, any other
    rebuilt."""
    models = _check_models(model)
    kind = _memory(memory)
    writes = _check_parsed(parsed)
    check_figure("fig", fig, optional=True)
    result = forward(float64(models), writes, memory=kind)  # the page's precision: see float64
    if fig is None:
        fig = Figure(figsize=FIGSIZE)
    if fig.get_label() != LABEL:
        _layout(fig)
    queries, targets = reads(writes)
    state = result["state"].astype(np.float64)
    state = state / max(float(np.abs(state).max()), 1e-30)  # all zero only for a zero model
    written, table = _probs_table(writes, result["probs"])
    axes = {ax.get_label(): ax for ax in fig.axes}
    ax_state, ax_w, ax_p = axes["state"], axes["weights"], axes["probs"]
    twin, twin_top = axes["recalled"], axes["write values"]
    _fill(ax_state, state)
    _fill(ax_w, result["weights"].astype(np.float64))
    _fill(ax_p, table)
    rows = [NAMES[k] for k, _ in writes] if kind == "softmax" else NAMES[:SIZE]
    ax_state.set_yticks(range(len(rows)), rows)
    ax_w.set_xticks(range(len(writes)), [NAMES[k] for k, _ in writes])
    ax_w.set_yticks(range(len(queries)), [NAMES[k] for k in queries])
    twin_top.set_xlim(-0.5, len(writes) - 0.5)
    twin_top.set_xticks(range(len(writes)), [NAMES[v] for _, v in writes])
    ax_p.set_xticks(range(len(written) + 1), [NAMES[v] for v in written] + [OTHER])
    ax_p.set_yticks(range(len(queries)), [NAMES[k] for k in queries])
    twin.set_ylim(len(queries) - 0.5, -0.5)
    twin.set_yticks(range(len(queries)), [f"→ {r} {'✓' if r == t else '✗'}"
                                          for r, t in zip(result["recalled"], targets)])
    texts = {t.get_gid(): t for t in fig.texts}
    for name, line in _texts(models[kind], kind, writes, result).items():
        texts["live:" + name].set_text(line)
    return fig


# ------------------------------------------------------------------------------ the view
CONTROLS = {
    "memory": lambda: widgets.Dropdown(options=list(MEMORIES), value="delta",
                                       description="memory"),
}


def live_view(model: Mapping[str, RecallModel] | None = None, text: str = DEFAULT_TEXT,
              memory: str = "delta") -> LiveView:
    """The live view of the notebook's models ({kind: RecallModel} for ``MEMORIES``; None:
    ``demo_model()``), opening on ``text`` with the memory ``memory``."""
    model = demo_model() if model is None else model
    _check_models(model)
    control = CONTROLS["memory"]()
    control.value = _memory(memory)
    return LiveView.of(sys.modules[__name__], model, text, {"memory": control})


def demo_model(seed: int = 0, steps: int = 200) -> dict[str, RecallModel]:
    """The notebook's models of ``seed`` for ``MEMORIES``, trained as its ``train_recall``
    does (the initial weights from ``torch.manual_seed(seed)``, then ``recall.train(model,
    steps=200, seed=seed)``: N from 1 to 64, no rewrites). About 2 s on a CPU."""
    models = {}
    for kind in MEMORIES:
        torch.manual_seed(seed)
        m = RecallModel(NUM_KEYS, NUM_VALUES, SIZE, kind)
        train(m, steps=steps, seed=seed)
        models[kind] = m
    return models
