"""Live view for notebook 11: attention sinks (注意力汇点) on the reader's own sequence.

The notebook trains one-layer ``streaming.TinyDecoder`` models on the bigram-backcopy task (BOS,
then a bigram chain over tokens 0–15; after a trigger, a token < 6, the next token copies the
one before the trigger) and streams them through two caches of window R: **sinks + window**
(``new_cache(window=R, sinks=1, rope_positions="cache")``: BOS and the last R tokens) and
**window only** (``new_cache(window=R)``: from the query at t = R on, BOS is evicted). This view
runs both caches on the tokens the reader types, for the softmax model or the one with a learnt
sink logit (seed 0 of each in the notebook), and draws, for the cache the "evict BOS" checkbox
picks, where each head's attention goes at each query position: on BOS, on the other keys it
sees, and on no key at all (1 − the row's sum, which only a sink logit can take); then the
model's top guess for the next token, and where that guess differs between the two caches.

Legend: T tokens (BOS included), H heads (2), V outputs (17: the 16 tokens and BOS), R the
cache's window, t a query position.
The page's forward is ``decoder.js``'s ``decoder_forward`` with the same caches; the oracle
here is ``decoder.reference``: the model itself (a float64 copy of its float32 weights) fed one
token at a time through its ``new_cache(...)``, as ``streaming.stream`` does.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure

from ...plotting import MASKED_COLOR
from ...streaming import BackcopyTask, TinyDecoder, from_pool, train
from .._common import check_figure, start_figure
from . import LiveView, mark, mark_ticks
from .decoder import export_decoder, reference

__all__ = ["KIND", "JS", "DEFAULT_TEXT", "ACCEPTED", "MODELS", "RECENT", "BAD_INPUTS",
           "CONTROLS", "live_view", "parse", "forward", "draw", "export"]
# (demo_model, random_texts: the tests' and the view's, not the series' API)

KIND = "sinks"
JS = ["decoder.js", "sinks.js"]
VOCAB, TRIGGERS = 16, 6  # the notebook's BackcopyTask(vocab_size=16, num_triggers=6)
BOS = VOCAB  # BOS's id; the models' vocabulary is 0 … 16
HEADS = 2
MAX_TOKENS = 47  # after BOS: 48 in all, the training length
MODELS = ("softmax", "sink logit")  # the select's values: the notebook's "softmax" and
# "sink logit 3" variants
RECENT = (2, 4, 8, 16)  # the cache's window R, as in the notebook's streaming experiment
TOKENS = ("BOS",) + tuple(str(i) for i in range(VOCAB))  # tick labels: "BOS", "0" … "15"
NAMES = [str(i) for i in range(VOCAB)] + ["BOS"]  # id → name (BOS = 16)
DEFAULT_TEXT = "14 12 12 13 6 1 6 14 15 10 4 10 14 11 15 0 15 15 0 15 15 15 4 15 15 15 10 15 10"
INPUT_LABEL = "tokens after BOS"
ACCEPTED = (f"Up to {MAX_TOKENS} tokens, the numbers 0–{VOCAB - 1} separated by spaces or "
            f"commas; the page puts BOS first. 0–{TRIGGERS - 1} are triggers: the token after "
            f"a trigger copies the one before it.")
_SEPARATORS = re.compile(r"[ \t\n\r,]+")  # the same set as sinks.js (not \s: JS's differs)
_NUMBER = re.compile(r"(0|[1-9][0-9]?)")

LABEL = "live.sinks"
FIGSIZE = (9.0, 4.4)
WEIGHT_ROWS = tuple(f"head {h}: {where}" for h in range(HEADS)
                    for where in ("BOS", "other keys", "no key"))  # the heatmap's rows
WEIGHT_CMAP = "Reds"
GUESS_CMAP = "Greens"
DIFFERS = ListedColormap(["#ffffff", "#c44e52"])  # same guess / another guess
TICK_SIZE = 6.5  # 48 token labels side by side


# ------------------------------------------------------------------------------ input
def _shown(token: str) -> str:
    """A token as a message quotes it: at most 12 characters (code points)."""
    return token if len(token) <= 12 else token[:12] + "…"


def parse(text: str, **controls: object) -> list[int]:
    """The token ids the models read, BOS (16) first: [16, t_1, …], T ≤ 48. ``text``: the
    numbers 0–15 separated by spaces or commas, optionally after a leading "BOS". ValueError
    (the message sinks.js gives) for anything else."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    words = [w for w in _SEPARATORS.split(text) if w]
    if words and words[0] == "BOS":
        words = words[1:]
    if not words:
        raise ValueError(f"Type at least one token after BOS: the numbers 0–{VOCAB - 1} "
                         f"separated by spaces or commas.")
    for word in words:
        if word == "BOS":
            raise ValueError(f"BOS only once, first (the page puts it there): type the "
                             f"numbers 0–{VOCAB - 1} after it.")
        if not _NUMBER.fullmatch(word) or int(word) >= VOCAB:
            raise ValueError(f"'{_shown(word)}' is not a token: the tokens are the numbers "
                             f"0–{VOCAB - 1}, no leading zeros (0–{TRIGGERS - 1} are triggers), "
                             f"separated by spaces or commas.")
    if len(words) > MAX_TOKENS:
        raise ValueError(f"{len(words)} tokens is too many: at most {MAX_TOKENS} after BOS (the "
                         f"models were trained on {MAX_TOKENS + 1} tokens).")
    return [BOS] + [int(w) for w in words]


def random_texts(n: int, seed: int) -> list[str]:
    """``n`` valid inputs, seeded: half drawn from the notebook's task (so the models' guesses
    mean something), half uniform tokens; 1 … 47 tokens, spaces, commas or a leading BOS."""
    rng = np.random.default_rng(seed)
    task = BackcopyTask(vocab_size=VOCAB, num_triggers=TRIGGERS, seed=0)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = int(rng.integers(1, MAX_TOKENS + 1))
        if i % 2:
            tokens = task.sample(1, length + 1, gen)[0][0, 1:].tolist()
        else:
            tokens = rng.integers(0, VOCAB, length).tolist()
        sep = (" ", ", ", ",", "  ")[i % 4]
        text = sep.join(str(t) for t in tokens)
        out.append(("BOS " + text) if i % 5 == 3 else text)
    return out


BAD_INPUTS = {
    "": "Type at least one token after BOS",
    "  , ": "Type at least one token after BOS",
    "BOS": "Type at least one token after BOS",
    "7 16 3": "'16' is not a token",
    "7 x 3": "'x' is not a token",
    "7 -1": "'-1' is not a token",
    "3.5": "'3.5' is not a token",
    "07 3": "'07' is not a token",
    "7 BOS 3": "BOS only once, first",
    " ".join(["7"] * 48): "48 tokens is too many: at most 47",
    "abcdefghijklmnopq": "'abcdefghijkl…' is not a token",
}


# ------------------------------------------------------------------------------ the models
def _check_models(model: object) -> dict[str, TinyDecoder]:
    """{"softmax": TinyDecoder, "sink logit": TinyDecoder} with the notebook's shape, as a
    plain dict (the models themselves, not copies)."""
    if not isinstance(model, Mapping) or set(model) != set(MODELS):
        got = sorted(model) if isinstance(model, Mapping) else type(model).__name__
        raise ValueError(f"model must be a dict with the keys {list(MODELS)} (the notebook's "
                         f"softmax model and the one with a sink logit), got {got}")
    for name in MODELS:
        m = model[name]
        if not isinstance(m, TinyDecoder) or m.latent:
            raise ValueError(f"model[{name!r}] must be a streaming.TinyDecoder without latent "
                             f"attention, got {type(m).__name__}")
        attention = m.blocks[0].attention
        shape = (m.vocab_size, m.num_outputs, len(m.blocks), attention.num_heads)
        if shape != (VOCAB + 1, VOCAB + 1, 1, HEADS):
            raise ValueError(f"model[{name!r}] must have the notebook's shape (vocabulary, "
                             f"outputs, layers, heads) = {(VOCAB + 1, VOCAB + 1, 1, HEADS)}, "
                             f"got {shape}")
        if m.window is not None:
            raise ValueError(f"model[{name!r}] must have no window of its own (the caches "
                             f"bring it), got window={m.window}")
        extras = {"gate": attention.gate, "ffn": m.blocks[0].ffn is not None,
                  "grouped": attention.num_kv_heads != attention.num_heads}
        if any(extras.values()):
            raise ValueError(f"model[{name!r}] must be the notebook's plain attention layer (no "
                             f"gate, no feed-forward network, no grouped keys), got {extras}")
        if attention.sink != (name == "sink logit"):
            raise ValueError(f"model[{name!r}] must {'' if name == 'sink logit' else 'not '}"
                             f"have a sink logit (sink={name == 'sink logit'}), got "
                             f"sink={attention.sink}")
    return {name: model[name] for name in MODELS}


def export(model: Mapping[str, TinyDecoder]) -> dict:
    """Both models' weights, ``export_decoder``'s JSON each: {"models": {name: ...}}."""
    models = _check_models(model)
    return {"models": {name: export_decoder(m) for name, m in models.items()}}


def _controls(variant: object = MODELS[0], recent: object = 4, evict: object = False,
              **others: object) -> tuple[str, int, bool]:
    if others:
        raise ValueError(f"controls must be among variant, recent and evict, got "
                         f"{sorted(others)}")
    if not isinstance(variant, str) or variant not in MODELS:
        raise ValueError(f"variant must be one of {MODELS}, got {variant!r}")
    if (not isinstance(recent, numbers.Integral) or isinstance(recent, (bool, np.bool_))
            or recent not in RECENT):
        raise ValueError(f"recent must be one of {RECENT}, got {recent!r}")
    if not isinstance(evict, (bool, np.bool_)):
        raise ValueError(f"evict must be True or False, got {evict!r}")
    return str(variant), int(recent), bool(evict)


def _check_parsed(parsed: object) -> list[int]:
    ok = (isinstance(parsed, (list, tuple)) and 2 <= len(parsed) <= MAX_TOKENS + 1
          and parsed[0] == BOS and all(isinstance(t, int) and not isinstance(t, bool)
                                       and 0 <= t < VOCAB for t in parsed[1:]))
    if not ok:
        raise ValueError(f"parsed must be parse()'s list [16, t_1, …] (BOS, then 1 … "
                         f"{MAX_TOKENS} ids in [0, {VOCAB})), got {parsed!r:.80}")
    return list(parsed)


CACHES = {"kept": {"window": None, "sinks": 1, "rope_positions": "cache"},  # sinks + window
          "evicted": {"window": None}}  # window only: BOS gone from t = R on


def _widened(model: TinyDecoder) -> TinyDecoder:
    """A float64 TinyDecoder of ``model``'s shape holding its float32 weights, in eval mode
    (``model`` is not touched: a deepcopy would copy its last attention_weights, and fails on
    them when they carry a graph)."""
    attention = model.blocks[0].attention
    wide = TinyDecoder(model.vocab_size, model.embedding.weight.shape[1], attention.num_heads, 1,
                       sink=attention.sink)
    wide.load_state_dict(model.state_dict())
    return wide.double().eval()


def forward(model: Mapping[str, TinyDecoder], parsed: list[int], **controls: object,
            ) -> dict[str, np.ndarray]:
    """The oracle: the chosen model (``variant``) fed the tokens one at a time through its
    two caches of window R (``recent``): "kept" = ``new_cache(window=R, sinks=1,
    rope_positions="cache")``, "evicted" = ``new_cache(window=R)`` (``decoder.reference``:
    the TinyDecoder and its KVCaches themselves). Run on a float64 copy of the model (its
    float32 weights widened, the same modules): the page computes in float64 from the float32
    weights, and the float32 model's own rounding (logits off by up to ~2e-6 here) is larger
    than the contract's atol of 1e-6; tests/test_live_sinks.py holds this oracle to the float32
    model within that rounding. For each cache c: ``weights_c`` (H, T, T) the attention
    weights (query rows, key columns at their positions, 0 where a key is not in the cache),
    ``bos_c`` (H, T) the weight on position 0, ``others_c`` (H, T) the sum of the weights on
    the other positions, ``nobody_c`` (H, T) 1 − the row's sum (the sink logit's share),
    ``logits_c`` (T, V) and ``probs_c`` (T, V) their softmax; all float64 NumPy arrays."""
    models = _check_models(model)
    variant, recent, _ = _controls(**controls)
    tokens = _check_parsed(parsed)
    wide = _widened(models[variant])
    out = {}
    for name, cache in CACHES.items():
        r = reference(wide, tokens, {**cache, "window": recent})
        w = r["weights"][0]  # (H, T, T): the one layer
        out[f"weights_{name}"] = w
        out[f"bos_{name}"] = w[:, :, 0].copy()  # (H, T)
        out[f"others_{name}"] = w[:, :, 1:].astype(np.float64).sum(-1)  # (H, T)
        out[f"nobody_{name}"] = 1.0 - w.astype(np.float64).sum(-1)  # (H, T)
        out[f"logits_{name}"] = r["logits"]  # (T, V) float64
        out[f"probs_{name}"] = torch.softmax(torch.from_numpy(r["logits"]), -1).numpy()
    return out


# ------------------------------------------------------------------------------ the picture
def _layout(fig: Figure) -> None:
    """The fixed frame: three live texts, the weights' heatmap (3 rows a head), the strip that
    marks where the two caches guess differently, the guesses' row; colour bars. Inches from
    the top-left of ``FIGSIZE``."""
    start_figure(fig, LABEL, fixed_layout=True)
    width, height = FIGSIZE
    left, right = 1.3, 8.05  # the heatmaps' x span, on whole pixels at 100 dpi; bars beyond
    span = right - left

    def box(top: float, h: float, x0: float = left, w: float = span) -> list[float]:
        return [x0 / width, (height - top - h) / height, w / width, h / height]

    for name, baseline, size in (("title", 0.24, 10.8), ("effect", 0.46, 9.36),
                                 ("triggers", 0.64, 9.36)):  # 15 px and 13 px at 100 dpi
        mark(fig.text(0.12 / width, 1 - baseline / height, "placeholder", ha="left",
                      va="baseline", fontsize=size), name)
    ax_w = fig.add_axes(box(1.0, 1.62))
    ax_w.set_title("Each head's attention weight on BOS, on the other keys it sees, on no key "
                   "(1 − row sum: the sink logit's share); grey: BOS evicted", fontsize=8,
                   loc="left")
    image = ax_w.imshow(np.zeros((len(WEIGHT_ROWS), 2)), aspect="auto",
                        interpolation="nearest", cmap=_cmap(WEIGHT_CMAP), norm=Normalize(0.0, 1.0))
    mark(image, "weights")
    ax_w.set_yticks(range(len(WEIGHT_ROWS)), WEIGHT_ROWS, fontsize=8)
    ax_w.set_xticks(range(2), ["BOS", "0"], fontsize=TICK_SIZE)
    ax_w.tick_params(axis="both", length=2, pad=2)
    ax_w.set_xlabel(f"query position t: your tokens (0–{TRIGGERS - 1} are triggers)",
                    fontsize=8)
    ax_w.xaxis.set_label_coords(0.5, -0.13)
    mark_ticks(ax_w.xaxis, "tokens", TOKENS)
    for h in range(1, HEADS):  # a white rule between the heads
        ax_w.axhline(3 * h - 0.5, color="white", linewidth=2.5)
    bar = fig.colorbar(image, cax=fig.add_axes(box(1.0, 1.62, right + 0.15, 0.12)))
    bar.set_ticks([0.0, 0.5, 1.0])
    bar.ax.tick_params(labelsize=7, length=2, pad=2)
    bar.set_label("attention weight", fontsize=7.5)

    ax_d = fig.add_axes(box(3.33, 0.12))
    ax_d.set_title("The top guess for the next token (colour: its probability); red above it: "
                   "the other cache's top guess is another token", fontsize=8, loc="left")
    strip = ax_d.imshow(np.zeros((1, 2)), aspect="auto", interpolation="nearest", cmap=DIFFERS,
                        norm=Normalize(0.0, 1.0))
    mark(strip, "differs")
    ax_d.set_xticks([])
    ax_d.set_yticks([0], ["differs"], fontsize=7)
    ax_d.tick_params(axis="y", length=0, pad=3)
    ax_g = fig.add_axes(box(3.47, 0.3))
    guess = ax_g.imshow(np.zeros((1, 2)), aspect="auto", interpolation="nearest",
                        cmap=_cmap(GUESS_CMAP), norm=Normalize(0.0, 1.0))
    mark(guess, "guesses")
    ax_g.set_yticks([0], ["top guess"], fontsize=8)
    ax_g.set_xticks(range(2), ["BOS", "0"], fontsize=TICK_SIZE)
    ax_g.tick_params(axis="both", length=2, pad=2)
    ax_g.set_xlabel("the token the model rates likeliest to come after position t", fontsize=8)
    ax_g.xaxis.set_label_coords(0.5, -0.75)
    mark_ticks(ax_g.xaxis, "guessed", TOKENS)
    bar = fig.colorbar(guess, cax=fig.add_axes(box(3.33, 0.44, right + 0.15, 0.12)))
    bar.set_ticks([0.0, 1.0])
    bar.ax.tick_params(labelsize=7, length=2, pad=2)
    bar.set_label("p", fontsize=7.5)


def _cmap(name: str):
    """The colour map ``name`` with the series' grey for NaN cells."""
    return colormaps[name].with_extremes(bad=MASKED_COLOR)


def _texts(variant: str, recent: int, evict: bool, tokens: list[int],
           result: dict[str, np.ndarray]) -> tuple[str, str, str]:
    """The three live lines: what is shown; what evicting BOS does to the top guesses and to
    the loss on the typed next tokens; what it does at the triggers (or what to type for it
    to evict anything)."""
    T = len(tokens)
    what = f"window only: BOS evicted from t = {recent} on" if evict else "sinks + window: BOS kept"
    title = (f"{'Softmax model' if variant == 'softmax' else 'Model with a sink logit'}, "
             f"a cache of the last R = {recent} tokens, {what}")
    if T <= recent:
        return (title, f"Nothing is evicted: your {T} tokens (BOS included) fit in the window "
                       f"R = {recent}, so every query sees BOS with either cache.",
                f"Type at least {recent} tokens after BOS to see the window evict it.")
    guess = {c: result[f"probs_{c}"].argmax(-1) for c in ("kept", "evicted")}  # (T,) each
    changed = int((guess["kept"][recent:] != guess["evicted"][recent:]).sum())
    effect = (f"Evicting BOS (t = {recent} … {T - 1}) changes the top guess at {changed} of "
              f"{T - recent} positions")
    if T - 1 > recent:  # typed next tokens: the notebook's loss, in nats
        t = np.arange(recent, T - 1)
        following = np.array(tokens[recent + 1:])
        loss = {c: float(-np.log(result[f"probs_{c}"][t, following].astype(np.float64)).mean())
                for c in ("kept", "evicted")}
        effect += (f"; mean loss on your next tokens: {loss['kept']:.2f} → "
                   f"{loss['evicted']:.2f} nats")
    copies = [t for t in range(max(recent, 2), T) if tokens[t] < TRIGGERS]  # after a regular token
    if not copies:
        none = f"No trigger at t ≥ {recent} (a token 0–{TRIGGERS - 1} after another token)."
        return title, effect + ".", none
    named = {c: sum(int(guess[c][t]) == tokens[t - 1] for t in copies) for c in ("kept", "evicted")}
    n = len(copies)
    return title, effect + ".", (
        f"At the {n} trigger{'s' if n > 1 else ''} from t = {recent} on, the top guess is the "
        f"token before the trigger {named['kept']} time{'s' if named['kept'] != 1 else ''} with "
        f"BOS kept, {named['evicted']} with BOS evicted.")


def draw(model: Mapping[str, TinyDecoder], parsed: list[int], *, fig: Figure | None = None,
         **controls: object) -> Figure:
    """The figure for ``parsed`` under ``controls`` (variant, recent, evict): see the module's
    docstring. ``fig``: a Figure this function drew is updated in place, any other rebuilt."""
    variant, recent, evict = _controls(**controls)
    result = forward(model, parsed, variant=variant, recent=recent)
    tokens = _check_parsed(parsed)
    check_figure("fig", fig, optional=True)
    if fig is None:
        fig = Figure(figsize=FIGSIZE)
    if fig.get_label() != LABEL:
        _layout(fig)
    T = len(tokens)
    shown = "evicted" if evict else "kept"
    bos = result[f"bos_{shown}"].astype(np.float64)  # (H, T)
    nobody = result[f"nobody_{shown}"]  # (H, T) float64
    others = result[f"others_{shown}"]  # (H, T) float64
    if evict:
        bos[:, recent:] = np.nan  # BOS no longer in the cache
    values = np.stack([bos, others, nobody], axis=1).reshape(-1, T)  # (3H, T): head by head
    probs = result[f"probs_{shown}"]  # (T, V)
    guess = probs.argmax(-1)  # (T,)
    differs = (result["probs_kept"].argmax(-1) != result["probs_evicted"].argmax(-1))
    texts = {t.get_gid(): t for t in fig.texts}
    for name, line in zip(("title", "effect", "triggers"),
                          _texts(variant, recent, evict, tokens, result)):
        texts["live:" + name].set_text(line)
    ax_w, _, ax_d, ax_g, _ = fig.axes
    for ax, data in ((ax_w, values), (ax_d, differs[None].astype(np.float64)),
                     (ax_g, probs[np.arange(T), guess][None].astype(np.float64))):
        image = ax.images[0]
        image.set_data(data)
        image.set_extent((-0.5, T - 0.5, data.shape[0] - 0.5, -0.5))
        ax.set_xlim(-0.5, T - 0.5)
        ax.set_ylim(data.shape[0] - 0.5, -0.5)
    ax_w.set_xticks(range(T), [NAMES[t] for t in tokens], fontsize=TICK_SIZE)
    ax_g.set_xticks(range(T), [NAMES[int(g)] for g in guess], fontsize=TICK_SIZE)
    ax_d.set_xticks([])
    return fig


# ------------------------------------------------------------------------------ the view
CONTROLS = {
    "variant": lambda: widgets.Dropdown(options=list(MODELS), value=MODELS[0],
                                        description="model"),
    "recent": lambda: widgets.Dropdown(options=list(RECENT), value=4,
                                       description="cache window R",
                                       style={"description_width": "initial"}),
    "evict": lambda: widgets.Checkbox(value=False, description="evict BOS"),
}


def live_view(model: Mapping[str, TinyDecoder] | None = None, text: str = DEFAULT_TEXT,
              **controls: object) -> LiveView:
    """The live view of the notebook's two models ({"softmax": ..., "sink logit": ...};
    None: ``demo_model()``), opening on ``text`` with ``controls`` (variant, recent, evict)."""
    model = demo_model() if model is None else model
    _check_models(model)
    values = dict(zip(("variant", "recent", "evict"), _controls(**controls)))
    made = {}
    for name, make in CONTROLS.items():
        made[name] = make()
        made[name].value = values[name]
    return LiveView.of(KIND, model, text, made)


def demo_model(seed: int = 0) -> dict[str, TinyDecoder]:
    """The notebook's two models of ``seed``, trained as its ``train_backcopy`` does (150 Adam
    steps, lr 1e-2, batches of 32 sequences of 48 tokens): "softmax" and "sink logit" (the
    notebook's "sink logit 3", the logit started at 3). About 2 s on a CPU. The global torch
    generator's state is restored afterwards."""
    task = BackcopyTask(vocab_size=VOCAB, num_triggers=TRIGGERS, seed=0)
    steps = 150
    pool = task.sample(32 * steps, MAX_TOKENS + 1, torch.Generator().manual_seed(seed))
    models = {}
    for name, kwargs in (("softmax", {}), ("sink logit", dict(sink=True, sink_init=3.0))):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the initial weights, as the notebook draws them
            model = TinyDecoder(task.num_tokens, 32, HEADS, 1, **kwargs)
        train(model, from_pool(pool[:2], 32), steps=steps, lr=1e-2, seed=seed)
        models[name] = model
    return models
