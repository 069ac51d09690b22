"""Specs for ``helpers.seq2seq``: the date task, the Bahdanau encoder-decoder, training and
greedy prediction (see ``tests/fuzz/__init__.py`` for the format).

The checks are written out here: the five formats as f-strings (and ``strptime`` for four-digit
years), the encoder as a plain GRU run on each row alone, the additive scores and the GRU step
from the module's own weights, the first training loss from the seeded batch."""

from __future__ import annotations

import contextlib
import datetime
import io
import math
import numbers

import numpy as np
import torch

from helpers import seq2seq as s
from helpers.device import cpu_threads
from tests.fuzz import Case, Int, Spec, T

# ------------------------------------------------------------------------------ fixtures
with torch.random.fork_rng(devices=[]):  # leave the global generator alone
    torch.manual_seed(0)
    MODEL = s.Seq2Seq(4, 5).eval()  # N = 5
    BASELINE = s.Seq2Seq(4, 5, attention=False).eval()

TEXTS = ["3 May 1998", "September 21, 2004", "07.11.1950"]  # 6, 8, 10 source tokens
TARGETS = ["1998-05-03", "2004-09-21", "1950-11-07"]
SRC, LENS = s.encode_sources(TEXTS)  # (3, 10), (3,)
with torch.no_grad():
    ENC, STATE = MODEL.encoder(SRC, LENS)  # (3, 10, 10), (3, 5)
TGT = s.encode_targets(TARGETS)  # (3, 11)
DATA = s.make_dates(6, seed=1, years=(1990, 1999))
BOS, EOS = s.TGT_VOCAB.stoi[s.BOS], s.TGT_VOCAB.stoi[s.EOS]
ABBR = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
         "September", "October", "November", "December"]
STRPTIME = {0: "%d %b %Y", 1: "%b %d, %Y", 2: "%d %B %Y", 3: "%B %d, %Y", 4: "%d.%m.%Y"}


def _model(attention: bool = True, seed: int = 0) -> s.Seq2Seq:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return s.Seq2Seq(3, 4, attention=attention)


def _train_kwargs() -> dict:
    """A fresh tiny model and data set, two steps of three examples on one thread (tensors this
    small train many times faster on one thread on a busy machine). The first Adam of a
    session imports ``torch._dynamo`` (seconds on a busy machine): done here, where the spec's
    good arguments are first built, outside the per-call time limit."""
    if not _ADAM_READY:
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
        _ADAM_READY.append(True)
    return dict(_out=io.StringIO(), model=_model(), data=_data(), steps=2, batch_size=3,
                lr=0.02, seed=0, print_every=None, callback=None, num_threads=1)


_ADAM_READY: list[bool] = []


def _data() -> s.DateData:
    return s.DateData(list(DATA.texts), list(DATA.targets), list(DATA.formats),
                      DATA.src.clone(), DATA.src_lens.clone(), DATA.tgt.clone())


# ---------------------------------------------------------------------------------- rules
def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _str_list(v) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(t, str) for t in v)


def _tokens_of(vocab: s.Vocab):
    return lambda v: _str_list(v) and all(t in vocab.stoi for t in v)


def _source_text(v) -> bool:
    """A str with at least one source token, each in SRC_VOCAB (whitespace separates)."""
    if not isinstance(v, str):
        return False
    words = v.replace(",", " , ").replace(".", " . ").split()
    tokens = [t for w in words for t in ([w] if w.isalpha() else list(w))]
    return bool(tokens) and all(t in s.SRC_VOCAB.stoi for t in tokens)


def _source_texts(v) -> bool:
    return isinstance(v, (list, tuple)) and all(map(_source_text, v))


def _years(v) -> bool:
    return (isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_int(y) for y in v)
            and 1 <= v[0] <= v[1] <= 9999)


def _usable_device(v) -> bool:
    if v is None:
        return True
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, torch.device, int)):
        return False
    try:
        d = torch.device(v)
    except (RuntimeError, TypeError, ValueError):
        return False
    if d.type == "cuda":
        return torch.cuda.is_available() and (d.index or 0) < torch.cuda.device_count()
    return d.type == "cpu"


def named(name: str, also: str = "") -> str:
    """The first line names ``name`` (a regex), contains ``also`` and says ``must ... got``."""
    return rf"^(?=[^\n]*\b(?:{name})\b)(?=[^\n]*{also})[^\n]*(must|expected)[^\n]*got"


IDS = T(rank=1, dtype="integer", lists=True)
SEQ2SEQ = lambda v: isinstance(v, s.Seq2Seq)  # noqa: E731
SIZES = {"vocab_size": "size", "embed_size": "size", "num_hiddens": "size"}


# --------------------------------------------------------------------------------- checks
def _expected_text(y: int, m: int, d: int, fmt: int) -> str:
    return [f"{d} {ABBR[m - 1]} {y}", f"{ABBR[m - 1]} {d}, {y}", f"{d} {NAMES[m - 1]} {y}",
            f"{NAMES[m - 1]} {d}, {y}", f"{d:02d}.{m:02d}.{y}"][fmt]


def _format_ok(out, kw) -> bool:
    y, m, d, fmt = (int(kw[k]) for k in ("year", "month", "day", "fmt"))
    text, target = out
    parsed_ok = y < 1000 or datetime.datetime.strptime(text, STRPTIME[fmt]) == datetime.datetime(y, m, d)
    return (text == _expected_text(y, m, d, fmt) and parsed_ok
            and target == datetime.date(y, m, d).isoformat())


def _all_texts(lo: int, hi: int) -> set[str]:
    texts, day = set(), datetime.date(lo, 1, 1)
    while day.year <= hi:
        texts |= {_expected_text(day.year, day.month, day.day, f) for f in range(5)}
        day += datetime.timedelta(days=1)
    return texts


def _decoded_sources(src, lens) -> list[list[str]]:
    return [[s.SRC_VOCAB.itos[i] for i in row[:n]] for row, n in zip(src.tolist(), lens.tolist())]


def _sources_ok(out, kw) -> bool:
    src, lens = out
    texts = list(kw["texts"])
    width = max((len(s.tokenize_source(t)) for t in texts), default=0)
    device = torch.device("cpu") if kw["device"] is None else torch.device(kw["device"])
    return (src.dtype == lens.dtype == torch.long and src.shape == (len(texts), width)
            and src.device.type == lens.device.type == device.type
            and lens.tolist() == [len(s.tokenize_source(t)) for t in texts]
            and _decoded_sources(src, lens) == [s.tokenize_source(t) for t in texts]
            and all((row[n:] == 0).all() for row, n in zip(src.cpu(), lens.tolist())))


def _targets_ok(out, kw) -> bool:
    texts = list(kw["texts"])
    want = [[s.TGT_VOCAB.stoi[c] for c in t] + [EOS] for t in texts]
    width = max(map(len, want), default=0)
    return out.dtype == torch.long and out.tolist() == [w + [0] * (width - len(w)) for w in want]


def _decode_target_ok(out, kw) -> bool:
    ids = kw["ids"].tolist() if isinstance(kw["ids"], torch.Tensor) else list(kw["ids"])
    tokens = [s.TGT_VOCAB.itos[int(i)] for i in ids]
    tokens = tokens[:tokens.index(s.EOS)] if s.EOS in tokens else tokens
    return out == "".join(t for t in tokens if t not in (s.PAD, s.BOS))


def _dates_ok(out, kw) -> bool:
    lo, hi = (int(y) for y in kw["years"])
    n = int(kw["n"])
    ok = (len(out.texts) == len(set(out.texts)) == len(out.targets) == len(out.formats) == n
          and not set(out.texts) & set(kw["exclude"]))
    for text, target, fmt in zip(out.texts, out.targets, out.formats):
        y, m, d = map(int, target.split("-"))
        ok = ok and lo <= y <= hi and text == _expected_text(y, m, d, fmt)
    src, lens = s.encode_sources(out.texts)
    again = s.make_dates(**kw)
    return (ok and torch.equal(out.src, src) and torch.equal(out.src_lens, lens)
            and torch.equal(out.tgt, s.encode_targets(out.targets)) and again.texts == out.texts)


def _shift_ok(out, kw) -> bool:
    tgt = kw["tgt"]
    return (out.shape == tgt.shape and out.dtype == tgt.dtype and bool((out[:, 0] == BOS).all())
            and torch.equal(out[:, 1:], tgt[:, :-1]))


def _encoder_ok(out, kw) -> bool:
    """Each row alone through the same GRU, unpacked: outputs on the valid tokens, 0 after;
    state = tanh(W [forward state at the last valid token; backward state at the first])."""
    enc = MODEL.encoder
    outputs, state = out
    src, lens = kw["src"], kw["src_lens"]
    N = enc.rnn.hidden_size
    with torch.no_grad():
        for b in range(src.shape[0]):
            n = int(lens[b])
            alone, _ = enc.rnn(enc.embedding(src[b:b + 1, :n]))  # (1, n, 2N)
            want = torch.tanh(enc.init_state(torch.cat([alone[0, -1, :N], alone[0, 0, N:]])))
            if not (torch.allclose(outputs[b, :n], alone[0], atol=1e-6)
                    and (outputs[b, n:] == 0).all() and torch.allclose(state[b], want, atol=1e-6)):
                return False
    return outputs.shape == (*src.shape, 2 * N) and state.shape == (src.shape[0], N)


def _context_want(decoder, state, enc, lens):
    """(context (B, 2N), weights (B, T)), written out: softmax over the valid tokens of
    w_vᵀ tanh(W_q s + W_k h_j), or 1/n on them without attention."""
    valid = torch.arange(enc.shape[1]) < lens[:, None].cpu()  # (B, T)
    if isinstance(decoder, s.AttentionDecoder):
        att = decoder.attention
        scores = att.w_v(torch.tanh(att.W_q(state)[:, None, :] + att.W_k(enc))).squeeze(-1)
        weights = torch.softmax(scores.masked_fill(~valid, -math.inf), dim=-1)
    else:
        weights = valid.to(enc.dtype) / lens[:, None].to(enc.dtype)
    return (weights[:, :, None] * enc).sum(1), weights


def _context_ok(out, kw) -> bool:
    with torch.no_grad():
        context, weights = _context_want(kw["decoder"], kw["state"], kw["enc_outputs"], kw["src_lens"])
    return torch.allclose(out[0], context, atol=1e-6) and torch.allclose(out[1], weights, atol=1e-6)


def _step_want(decoder, token, state, enc, lens):
    context, weights = _context_want(decoder, state, enc, lens)
    new_state = decoder.cell(torch.cat([decoder.embedding(token), context], -1), state)
    return decoder.dense(torch.cat([new_state, context], -1)), new_state, weights


def _step_ok(out, kw) -> bool:
    with torch.no_grad():
        want = _step_want(kw["decoder"], kw["token"], kw["state"], kw["enc_outputs"], kw["src_lens"])
    return all(torch.allclose(a, b, atol=1e-6) for a, b in zip(out, want))


def _teacher_forcing_want(decoder, tgt_in, state, enc, lens):
    logits, weights = [], []
    with torch.no_grad():
        for t in range(tgt_in.shape[1]):
            out, state, w = _step_want(decoder, tgt_in[:, t], state, enc, lens)
            logits.append(out)
            weights.append(w)
    return torch.stack(logits, 1), torch.stack(weights, 1)


def _decoder_forward_ok(out, kw) -> bool:
    want = _teacher_forcing_want(kw["decoder"], kw["tgt_in"], kw["state"], kw["enc_outputs"],
                                 kw["src_lens"])
    return all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out, want))


def _model_forward_ok(out, kw) -> bool:
    model = kw["model"]
    with torch.no_grad():
        enc, state = model.encoder(kw["src"], kw["src_lens"])
    want = _teacher_forcing_want(model.decoder, kw["tgt_in"], state, enc, kw["src_lens"])
    return all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out, want))


def _greedy_ok(out, kw) -> bool:
    """Teacher forcing with the greedy output as input gives back the same argmaxes."""
    ids, weights = out
    model, src, lens = kw["model"], kw["src"], kw["src_lens"]
    with torch.no_grad():
        enc, state = model.encoder(src, lens)
    logits, want_weights = _teacher_forcing_want(model.decoder, s.shift_right(ids), state, enc, lens)
    return (ids.shape == (src.shape[0], int(kw["max_steps"]))
            and torch.equal(logits.argmax(-1), ids) and torch.allclose(weights, want_weights, atol=1e-6))


def _prediction_ok(text: str, tokens, weights, model, max_steps) -> bool:
    src, lens = s.encode_sources([text])
    ids, all_weights = s.greedy_decode(model, src, lens, int(max_steps))
    names = [s.TGT_VOCAB.itos[i] for i in ids[0].tolist()]
    steps = names.index(s.EOS) + 1 if s.EOS in names else int(max_steps)
    return (tokens == names[:steps] and weights.shape == (steps, len(s.tokenize_source(text)))
            and torch.allclose(weights, all_weights[0, :steps]) and weights.device.type == "cpu")


def _hits_want(kw) -> list[bool]:
    out = []
    for text, target in zip(kw["texts"], kw["targets"]):
        tokens, _ = s.predict(kw["model"], text)
        cut = tokens[:tokens.index(s.EOS)] if s.EOS in tokens else tokens
        out.append("".join(t for t in cut if t not in (s.PAD, s.BOS)) == target)
    return out


def _set_first(x: torch.Tensor, value: int) -> torch.Tensor:
    """A copy of ``x`` with its first element set to ``value``."""
    x = x.clone()
    x.view(-1)[0] = value
    return x


def _train(_out: io.StringIO, **kw):
    with contextlib.redirect_stdout(_out):
        return s.train_seq2seq(**kw)


def _first_loss(kw) -> float:
    """The loss of step 1 written out: the same fresh model, the first seeded batch, the
    cross-entropy of every target token (padding aside)."""
    model = _model(isinstance(kw["model"].decoder, s.AttentionDecoder)).to(
        next(kw["model"].parameters()).dtype)
    data = kw["data"]
    idx = torch.randint(len(data.texts), (int(kw["batch_size"]),),
                        generator=torch.Generator().manual_seed(int(kw["seed"])))
    src, lens, tgt = data.src[idx], data.src_lens[idx], data.tgt[idx]
    bos = torch.full((len(idx), 1), BOS)
    with torch.no_grad(), cpu_threads(1):
        logits, _ = model(src[:, :int(lens.max())], lens, torch.cat([bos, tgt[:, :-1]], 1))
        logp = logits.double().log_softmax(-1).gather(-1, tgt[..., None])[..., 0]
    return float(-logp[tgt != 0].mean())


def _train_ok(out, kw) -> bool:
    printed = kw["_out"].getvalue().splitlines()
    every = kw["print_every"]
    return (len(out) == int(kw["steps"]) and all(isinstance(x, float) and math.isfinite(x) for x in out)
            and math.isclose(out[0], _first_loss(kw), rel_tol=1e-4)
            and not kw["model"].training
            and all(torch.isfinite(p).all() for p in kw["model"].parameters())
            and len(printed) == (0 if every is None else int(kw["steps"]) // int(every)))


# ---------------------------------------------------------------------------------- specs
def _sizes(target: str, cls, check) -> Spec:
    return Spec(target, call=cls, good=lambda: dict(vocab_size=7, embed_size=3, num_hiddens=4),
                rules=dict(SIZES), check=check)


def _decoder_ok(out, kw) -> bool:
    V, E, N = (int(kw[k]) for k in ("vocab_size", "embed_size", "num_hiddens"))
    return (out.embedding.weight.shape == (V, E) and out.cell.hidden_size == N
            and out.cell.input_size == E + 2 * N and out.dense.weight.shape == (V, 3 * N))


DECODER_RULES = {"state": T(rank=2), "enc_outputs": T(rank=3), "src_lens": T(rank=1, dtype="integer")}


def _decoder_bad(extra: list[Case]) -> list[Case]:
    return extra + [
        Case("state-N-4", lambda kw: kw.update(state=kw["state"][:, :4]), named("state")),
        Case("state-batch-2", lambda kw: kw.update(state=kw["state"][:2]), named("state")),
        Case("enc_outputs-2N-8", lambda kw: kw.update(enc_outputs=kw["enc_outputs"][..., :8]),
             named("enc_outputs")),
        Case("enc_outputs-no-tokens", lambda kw: kw.update(enc_outputs=kw["enc_outputs"][:, :0]),
             named("src_lens|enc_outputs")),
        Case("src_lens-0", lambda kw: kw.update(src_lens=kw["src_lens"] * 0), named("src_lens")),
        Case("src_lens-above-T", lambda kw: kw.update(src_lens=kw["src_lens"] + 1), named("src_lens")),
        Case("src_lens-batch-2", lambda kw: kw.update(src_lens=kw["src_lens"][:2]), named("src_lens")),
        Case("decoder-float64", lambda kw: kw.update(
            decoder=s.Seq2Seq(4, 5).double().decoder), named("state", "dtype")),
    ]


DECODER_EDGE = [
    Case("mean-context-decoder", lambda kw: kw.update(decoder=BASELINE.decoder)),
    Case("src_lens-int32", lambda kw: kw.update(src_lens=kw["src_lens"].int())),
    Case("src_lens-all-1", lambda kw: kw.update(src_lens=torch.ones(3, dtype=torch.long))),
]


def _with_decoder(**kw) -> dict:
    return dict(decoder=MODEL.decoder, state=STATE.clone(), enc_outputs=ENC.clone(),
                src_lens=LENS.clone(), **kw)


SPECS: list[Spec] = [
    # ------------------------------------------------------------------------ vocabulary
    Spec("helpers.seq2seq.Vocab", call=s.Vocab, good=lambda: dict(tokens=["b", "a", "<bos>"]),
         rules={"tokens": lambda v: _str_list(v) and len(set(v)) == len(v)},
         check=lambda v, kw: (v.itos == [s.PAD] + [t for t in kw["tokens"] if t != s.PAD]
                              and len(v) == len(v.itos) and v.pad == 0
                              and all(v.stoi[t] == i for i, t in enumerate(v.itos))),
         bad=[Case("tokens-repeated", lambda kw: kw.update(tokens=["a", "b", "a"]), named("tokens", r"repeated")),
              Case("tokens-non-str", lambda kw: kw.update(tokens=["a", 1]), named("tokens")),
              Case("tokens-set", lambda kw: kw.update(tokens={"a", "b"}), named("tokens")),
              Case("tokens-generator", lambda kw: kw.update(tokens=(t for t in "ab")), named("tokens")),
              Case("tokens-tensor", lambda kw: kw.update(tokens=torch.tensor([1, 2])), named("tokens"))],
         edge=[Case("tokens-empty", lambda kw: kw.update(tokens=[]), lambda v, kw: v.itos == [s.PAD]),
               Case("tokens-with-pad", lambda kw: kw.update(tokens=("a", s.PAD)),
                    lambda v, kw: v.itos == [s.PAD, "a"]),
               Case("tokens-empty-str", lambda kw: kw.update(tokens=[""]),
                    lambda v, kw: v.encode([""]) == [1])]),
    Spec("helpers.seq2seq.Vocab.encode", call=lambda **kw: s.TGT_VOCAB.encode(**kw),
         good=lambda: dict(tokens=[s.BOS, "1", "9", "-", s.EOS]),
         rules={"tokens": _tokens_of(s.TGT_VOCAB)},
         check=lambda out, kw: [s.TGT_VOCAB.itos[i] for i in out] == list(kw["tokens"]),
         bad=[Case("tokens-unknown", lambda kw: kw.update(tokens=["1", "x"]), named("tokens", r"outside the vocabulary")),
              Case("tokens-nested", lambda kw: kw.update(tokens=[["1"]]), named("tokens")),
              Case("tokens-none-item", lambda kw: kw.update(tokens=["1", None]), named("tokens")),
              Case("tokens-set", lambda kw: kw.update(tokens={"1"}), named("tokens"))],
         edge=[Case("tokens-empty", lambda kw: kw.update(tokens=[]), lambda out, kw: out == []),
               Case("tokens-tuple", lambda kw: kw.update(tokens=("0", "-")), lambda out, kw: out == [3, 13])]),
    Spec("helpers.seq2seq.Vocab.decode", call=lambda **kw: s.TGT_VOCAB.decode(**kw),
         good=lambda: dict(ids=torch.tensor([1, 3, 12, 13, 2, 0])), rules={"ids": IDS},
         check=lambda out, kw: out == [s.TGT_VOCAB.itos[int(i)] for i in kw["ids"]],
         bad=[Case("ids-negative", lambda kw: kw.update(ids=[1, -1]), named("ids")),
              Case("ids-too-large", lambda kw: kw.update(ids=torch.tensor([14])), named("ids")),
              Case("ids-float-item", lambda kw: kw.update(ids=[1.7]), named("ids")),
              Case("ids-bool-item", lambda kw: kw.update(ids=[True, 3]), named("ids")),
              Case("ids-str", lambda kw: kw.update(ids="13"), named("ids")),
              Case("ids-int", lambda kw: kw.update(ids=3), named("ids"))],
         edge=[Case("ids-empty", lambda kw: kw.update(ids=[]), lambda out, kw: out == []),
               Case("ids-empty-tensor", lambda kw: kw.update(ids=torch.zeros(0, dtype=torch.long)),
                    lambda out, kw: out == []),
               Case("ids-numpy-ints", lambda kw: kw.update(ids=(np.int64(3), np.int32(4))),
                    lambda out, kw: out == ["0", "1"]),
               Case("ids-int32", lambda kw: kw.update(ids=torch.tensor([3, 13], dtype=torch.int32)),
                    lambda out, kw: out == ["0", "-"]),
               Case("ids-uint8", lambda kw: kw.update(ids=torch.tensor([3, 13], dtype=torch.uint8)),
                    lambda out, kw: out == ["0", "-"])]),
    # ---------------------------------------------------------------------- text and ids
    Spec("helpers.seq2seq.tokenize_source", call=s.tokenize_source,
         good=lambda: dict(text="3 May, 1998"), rules={"text": lambda v: isinstance(v, str)},
         check=lambda out, kw: ("".join(out) == "".join(kw["text"].split()) and all(
             t.isascii() and t.isalpha() or len(t) == 1 and not t.isspace() for t in out)
             and (kw["text"] != "3 May, 1998" or out == ["3", "May", ",", "1", "9", "9", "8"])),
         edge=[Case("text-empty", lambda kw: kw.update(text=""), lambda out, kw: out == []),
               Case("text-spaces", lambda kw: kw.update(text=" \t\n"), lambda out, kw: out == []),
               Case("text-glued", lambda kw: kw.update(text="May3,"),
                    lambda out, kw: out == ["May", "3", ","]),
               Case("text-numpy-str", lambda kw: kw.update(text=np.str_("07.11")),
                    lambda out, kw: out == ["0", "7", ".", "1", "1"])]),
    Spec("helpers.seq2seq.tokenize_target", call=s.tokenize_target,
         good=lambda: dict(text="1998-05-03"), rules={"text": lambda v: isinstance(v, str)},
         check=lambda out, kw: out == [c for c in kw["text"]],
         edge=[Case("text-empty", lambda kw: kw.update(text=""), lambda out, kw: out == [])]),
    Spec("helpers.seq2seq.format_date", call=s.format_date,
         good=lambda: dict(year=1998, month=5, day=28, fmt=1),
         rules={"year": Int(1, 9999), "month": Int(1, 12), "day": Int(1, 31), "fmt": Int(0, 4)},
         check=_format_ok,
         bad=[Case("day-30-february", lambda kw: kw.update(month=2, day=30), named("day", r"no such date")),
              Case("day-29-february-1900", lambda kw: kw.update(year=1900, month=2, day=29), named("day")),
              Case("day-31-april", lambda kw: kw.update(month=4, day=31), named("day")),
              Case("day-huge", lambda kw: kw.update(day=10**20), named("day")),
              Case("year-huge", lambda kw: kw.update(year=-(10**20)), named("year"))],
         edge=[Case(f"fmt-{f}-29-february-2000", lambda kw, f=f: kw.update(year=2000, month=2, day=29, fmt=f),
                    _format_ok) for f in range(5)]
         + [Case("year-1-fmt-4", lambda kw: kw.update(year=1, fmt=4), _format_ok),
            Case("numpy-ints", lambda kw: kw.update(year=np.int64(2004), month=np.int32(9),
                                                    day=np.int16(21), fmt=np.uint8(3)), _format_ok)]),
    Spec("helpers.seq2seq.encode_sources", call=s.encode_sources,
         good=lambda: dict(texts=list(TEXTS), device="cpu"),
         rules={"texts": _source_texts,
                "device": _usable_device},
         check=_sources_ok,
         bad=[Case("texts-unknown-word", lambda kw: kw.update(texts=["3 Mai 1998"]), named("texts", r"3 Mai 1998")),
              Case("texts-no-tokens", lambda kw: kw.update(texts=["3 May 1998", " "]), named("texts", r"no tokens")),
              Case("texts-int-item", lambda kw: kw.update(texts=["3 May 1998", 1998]), named("texts")),
              Case("texts-set", lambda kw: kw.update(texts={"3 May 1998"}), named("texts")),
              Case("device-meta", lambda kw: kw.update(device="meta"), named("device")),
              Case("device-absent-cuda", lambda kw: kw.update(device="cuda:63"), named("device")),
              Case("device-name", lambda kw: kw.update(device="gpu"), named("device"))],
         edge=[Case("texts-empty", lambda kw: kw.update(texts=[]), _sources_ok),
               Case("texts-tuple", lambda kw: kw.update(texts=tuple(TEXTS)), _sources_ok),
               Case("device-torch-device", lambda kw: kw.update(device=torch.device("cpu")), _sources_ok)]),
    Spec("helpers.seq2seq.encode_targets", call=s.encode_targets,
         good=lambda: dict(texts=["1998-05-03", "", "7-"], device="cpu"),
         rules={"texts": lambda v: _str_list(v) and all(c in s.TGT_VOCAB.stoi for t in v for c in t),
                "device": _usable_device},
         check=_targets_ok,
         bad=[Case("texts-unknown-char", lambda kw: kw.update(texts=["1998/05/03"]),
                   r"^texts\b.*outside the vocabulary"),
              Case("texts-eos-token", lambda kw: kw.update(texts=["<eos>"]), named("texts")),
              Case("device-meta", lambda kw: kw.update(device="meta"), named("device"))],
         edge=[Case("texts-empty", lambda kw: kw.update(texts=[]), _targets_ok)]),
    Spec("helpers.seq2seq.decode_target", call=s.decode_target,
         good=lambda: dict(ids=torch.tensor([BOS, 4, 12, 12, 11, EOS, 5, 0])), rules={"ids": IDS},
         check=lambda out, kw: _decode_target_ok(out, kw) and (len(kw["ids"]) != 8 or out == "1998"),
         bad=[Case("ids-negative", lambda kw: kw.update(ids=[3, -2]), named("ids")),
              Case("ids-bool", lambda kw: kw.update(ids=[True]), named("ids"))],
         edge=[Case("ids-no-eos", lambda kw: kw.update(ids=[3, 13, 0, 4]), lambda out, kw: out == "0-1"),
               Case("ids-empty", lambda kw: kw.update(ids=[]), lambda out, kw: out == "")]),
    Spec("helpers.seq2seq.output_text", call=s.output_text,
         good=lambda: dict(tokens=list("1998-05-03") + [s.EOS, "1"]),
         rules={"tokens": lambda v: (isinstance(v, str) and all(c in s.TGT_VOCAB.stoi for c in v)
                                     or _tokens_of(s.TGT_VOCAB)(v))},
         check=lambda out, kw: out == "".join(
             t for t in (list(kw["tokens"]) + [s.EOS])[:(list(kw["tokens"]) + [s.EOS]).index(s.EOS)]
             if t not in (s.PAD, s.BOS)),
         bad=[Case("tokens-unknown", lambda kw: kw.update(tokens=["1", "x"]), named("tokens")),
              Case("tokens-int-item", lambda kw: kw.update(tokens=["1", 9]), named("tokens"))],
         edge=[Case("tokens-str", lambda kw: kw.update(tokens="1998"), lambda out, kw: out == "1998"),
               Case("tokens-bos-pad", lambda kw: kw.update(tokens=[s.BOS, "1", s.PAD]),
                    lambda out, kw: out == "1")]),
    # ------------------------------------------------------------------------------ data
    Spec("helpers.seq2seq.DateData", call=s.DateData,
         good=lambda: vars(_data()).copy(),
         rules={"texts": _str_list, "targets": _str_list,
                "formats": lambda v: isinstance(v, (list, tuple)) and all(_is_int(f) and 0 <= f < 5 for f in v),
                "src": T(rank=2, dtype="long"), "src_lens": T(rank=1, dtype="long"),
                "tgt": T(rank=2, dtype="long")},
         valid=lambda kw: all(len(kw[k]) == 6 for k in ("texts", "targets", "formats", "src", "src_lens", "tgt")),
         check=lambda out, kw: (out.texts == list(kw["texts"]) and out.targets == list(kw["targets"])
                                and out.formats == list(kw["formats"]) and out.src is kw["src"]
                                and out.src_lens is kw["src_lens"] and out.tgt is kw["tgt"]),
         bad=[Case("targets-one-short", lambda kw: kw.update(targets=kw["targets"][:5]), named("targets")),
              Case("formats-5", lambda kw: kw.update(formats=[5] * 6), named("formats")),
              Case("formats-bool", lambda kw: kw.update(formats=[True] * 6), named("formats")),
              Case("src-rows", lambda kw: kw.update(src=kw["src"][:5]), named("src")),
              Case("src-id-too-large", lambda kw: kw.update(src=kw["src"] + 100), named("src")),
              Case("src_lens-0", lambda kw: kw.update(src_lens=kw["src_lens"] * 0), named("src_lens")),
              Case("src_lens-above-T", lambda kw: kw.update(src_lens=kw["src_lens"] + 100), named("src_lens")),
              Case("tgt-rows", lambda kw: kw.update(tgt=kw["tgt"][:5]), named("tgt")),
              Case("tgt-id-negative", lambda kw: kw.update(tgt=_set_first(kw["tgt"], -1)), named("tgt")),
              Case("tgt-int32", lambda kw: kw.update(tgt=kw["tgt"].int()), named("tgt"))],
         edge=[Case("tuples", lambda kw: kw.update(texts=tuple(kw["texts"]), formats=tuple(kw["formats"])),
                    lambda out, kw: out.texts == list(kw["texts"]) and out.formats == list(kw["formats"]))]),
    Spec("helpers.seq2seq.count_dates", call=s.count_dates, good=lambda: dict(years=(2000, 2001)),
         rules={"years": _years},
         check=lambda out, kw: out == len(_all_texts(int(kw["years"][0]), int(kw["years"][1]))),
         bad=[Case("years-reversed", lambda kw: kw.update(years=(2001, 2000)), named("years")),
              Case("years-0", lambda kw: kw.update(years=(0, 5)), named("years")),
              Case("years-10000", lambda kw: kw.update(years=(9999, 10000)), named("years")),
              Case("years-one", lambda kw: kw.update(years=(2000,)), named("years")),
              Case("years-three", lambda kw: kw.update(years=(2000, 2001, 2002)), named("years")),
              Case("years-floats", lambda kw: kw.update(years=(2000.0, 2001.0)), named("years")),
              Case("years-bools", lambda kw: kw.update(years=(True, True)), named("years")),
              Case("years-str", lambda kw: kw.update(years="20"), named("years"))],
         edge=[Case("years-list", lambda kw: kw.update(years=[2001, 2001]), lambda out, kw: out == 5 * 365 - 62),
               Case("years-numpy", lambda kw: kw.update(years=(np.int64(2001), np.int32(2001))),
                    lambda out, kw: out == 5 * 365 - 62),
               Case("years-1", lambda kw: kw.update(years=(1, 1)), lambda out, kw: out == 5 * 365 - 62),
               Case("years-9999", lambda kw: kw.update(years=(9999, 9999)), lambda out, kw: out == 5 * 365 - 62)]),
    Spec("helpers.seq2seq.make_dates", call=s.make_dates,
         good=lambda: dict(n=4, seed=3, years=(2001, 2002), exclude=["3 May 2001"]),
         rules={"n": "size", "seed": "seed", "years": _years, "exclude": _str_list},
         check=_dates_ok,
         bad=[Case("n-above-texts", lambda kw: kw.update(n=s.count_dates((2001, 2002)) + 1),
                   r"^n\b.*only 3526 distinct"),
              Case("n-above-texts-left", lambda kw: kw.update(years=(2001, 2001), n=1763), named("n", r"1762 left")),
              Case("exclude-str", lambda kw: kw.update(exclude="3 May 2001"), named("exclude", r"wrap it")),
              Case("exclude-int-item", lambda kw: kw.update(exclude=["3 May 2001", 4]), named("exclude")),
              Case("exclude-set", lambda kw: kw.update(exclude={"3 May 2001"}), named("exclude"))],
         edge=[Case("n-every-text", lambda kw: kw.update(years=(2001, 2001), n=1762), _dates_ok),
               Case("n-numpy", lambda kw: kw.update(n=np.int64(5), seed=np.uint64(2**63)), _dates_ok),
               Case("exclude-tuple", lambda kw: kw.update(exclude=("x", "May 3, 2001")), _dates_ok)]),
    Spec("helpers.seq2seq.shift_right", call=s.shift_right, good=lambda: dict(tgt=TGT.clone()),
         rules={"tgt": T(rank=2, dtype="integer")}, check=_shift_ok,
         bad=[Case("tgt-no-steps", lambda kw: kw.update(tgt=kw["tgt"][:, :0]), named("tgt")),
              Case("tgt-id-too-large", lambda kw: kw.update(tgt=kw["tgt"] + 14), named("tgt")),
              Case("tgt-id-negative", lambda kw: kw.update(tgt=_set_first(kw["tgt"], -1)), named("tgt"))],
         edge=[Case("tgt-int32", lambda kw: kw.update(tgt=kw["tgt"].int()), _shift_ok),
               Case("tgt-one-step", lambda kw: kw.update(tgt=kw["tgt"][:, :1]), _shift_ok),
               Case("tgt-no-rows", lambda kw: kw.update(tgt=kw["tgt"][:0]), _shift_ok)]),
    # ----------------------------------------------------------------------------- model
    _sizes("helpers.seq2seq.Encoder", s.Encoder, lambda out, kw: (
        out.embedding.weight.shape == (int(kw["vocab_size"]), int(kw["embed_size"]))
        and out.rnn.hidden_size == int(kw["num_hiddens"]) and out.rnn.bidirectional
        and out.init_state.weight.shape == (int(kw["num_hiddens"]), 2 * int(kw["num_hiddens"])))),
    Spec("helpers.seq2seq.Encoder.forward", call=lambda **kw: MODEL.encoder(**kw),
         good=lambda: dict(src=SRC.clone(), src_lens=LENS.clone()),
         rules={"src": T(rank=2, dtype="integer"), "src_lens": T(rank=1, dtype="integer")},
         check=_encoder_ok,
         bad=[Case("src_lens-0", lambda kw: kw.update(src_lens=kw["src_lens"] * 0), named("src_lens")),
              Case("src_lens-above-T", lambda kw: kw.update(src_lens=kw["src_lens"] + 1), named("src_lens")),
              Case("src_lens-batch-2", lambda kw: kw.update(src_lens=kw["src_lens"][:2]), named("src_lens")),
              Case("src-id-too-large", lambda kw: kw.update(src=kw["src"] + 30), named("src")),
              Case("src-no-rows", lambda kw: kw.update(src=kw["src"][:0], src_lens=kw["src_lens"][:0]), named("src"))],
         edge=[Case("padding-any-ids", lambda kw: kw.update(src=torch.where(kw["src"] == 0, 7, kw["src"])),
                    _encoder_ok),
               Case("src_lens-int32", lambda kw: kw.update(src_lens=kw["src_lens"].int()), _encoder_ok),
               Case("one-row", lambda kw: kw.update(src=kw["src"][1:2, :8], src_lens=kw["src_lens"][1:2]),
                    _encoder_ok)]),
    _sizes("helpers.seq2seq.Decoder", s.Decoder, _decoder_ok),
    Spec("helpers.seq2seq.Decoder.context", call=lambda decoder, **kw: decoder.context(**kw),
         good=_with_decoder, rules=dict(DECODER_RULES), check=_context_ok,
         bad=_decoder_bad([]), edge=list(DECODER_EDGE)),
    Spec("helpers.seq2seq.Decoder.step", call=lambda decoder, **kw: decoder.step(**kw),
         good=lambda: _with_decoder(token=torch.tensor([BOS, 3, 13])),
         rules={"token": T(rank=1, dtype="integer"), **DECODER_RULES}, check=_step_ok,
         bad=_decoder_bad([
             Case("token-id-too-large", lambda kw: kw.update(token=kw["token"] + 14), named("token")),
             Case("token-batch-2", lambda kw: kw.update(token=kw["token"][:2]), named("token|state"))]),
         edge=list(DECODER_EDGE)),
    Spec("helpers.seq2seq.Decoder.forward", call=lambda decoder, **kw: decoder(**kw),
         good=lambda: _with_decoder(tgt_in=s.shift_right(TGT)),
         rules={"tgt_in": T(rank=2, dtype="integer"), **DECODER_RULES}, check=_decoder_forward_ok,
         bad=_decoder_bad([
             Case("tgt_in-no-steps", lambda kw: kw.update(tgt_in=kw["tgt_in"][:, :0]), named("tgt_in")),
             Case("tgt_in-id-negative", lambda kw: kw.update(tgt_in=_set_first(kw["tgt_in"], -1)), named("tgt_in")),
             Case("tgt_in-batch-2", lambda kw: kw.update(tgt_in=kw["tgt_in"][:2]), named("state|tgt_in"))]),
         edge=list(DECODER_EDGE)),
    _sizes("helpers.seq2seq.AttentionDecoder", s.AttentionDecoder, lambda out, kw: (
        _decoder_ok(out, kw) and out.attention.W_k.in_features == 2 * int(kw["num_hiddens"])
        and out.attention.W_q.in_features == int(kw["num_hiddens"]))),
    _sizes("helpers.seq2seq.MeanContextDecoder", s.MeanContextDecoder, lambda out, kw: (
        _decoder_ok(out, kw) and not hasattr(out, "attention"))),
    Spec("helpers.seq2seq.Seq2Seq", call=s.Seq2Seq,
         good=lambda: dict(embed_size=3, num_hiddens=4, attention=True),
         rules={"embed_size": "size", "num_hiddens": "size", "attention": "flag"},
         check=lambda out, kw: (
             isinstance(out.decoder, s.AttentionDecoder if kw["attention"] else s.MeanContextDecoder)
             and out.encoder.embedding.weight.shape == (len(s.SRC_VOCAB), int(kw["embed_size"]))
             and out.decoder.dense.out_features == len(s.TGT_VOCAB)
             and out.decoder.cell.hidden_size == int(kw["num_hiddens"]))),
    Spec("helpers.seq2seq.Seq2Seq.forward", call=lambda model, **kw: model(**kw),
         good=lambda: dict(model=MODEL, src=SRC.clone(), src_lens=LENS.clone(), tgt_in=s.shift_right(TGT)),
         rules={"src": T(rank=2, dtype="integer"), "src_lens": T(rank=1, dtype="integer"),
                "tgt_in": T(rank=2, dtype="integer")},
         check=_model_forward_ok,
         bad=[Case("tgt_in-batch-2", lambda kw: kw.update(tgt_in=kw["tgt_in"][:2]), named("tgt_in")),
              Case("tgt_in-no-steps", lambda kw: kw.update(tgt_in=kw["tgt_in"][:, :0]), named("tgt_in")),
              Case("tgt_in-id-too-large", lambda kw: kw.update(tgt_in=kw["tgt_in"] + 14), named("tgt_in")),
              Case("src_lens-0", lambda kw: kw.update(src_lens=kw["src_lens"] * 0), named("src_lens"))],
         edge=[Case("baseline", lambda kw: kw.update(model=BASELINE), _model_forward_ok),
               Case("float64", lambda kw: kw.update(model=s.Seq2Seq(4, 5).double().eval()), _model_forward_ok),
               Case("bfloat16", lambda kw: kw.update(model=s.Seq2Seq(4, 5).bfloat16().eval()),
                    lambda out, kw: out[0].dtype == torch.bfloat16 and torch.isfinite(out[0]).all())]),
    # ---------------------------------------------------------------- training, prediction
    Spec("helpers.seq2seq.train_seq2seq", call=_train,
         good=_train_kwargs,
         rules={"model": lambda v: isinstance(v, s.Seq2Seq), "data": lambda v: isinstance(v, s.DateData),
                "steps": "size", "batch_size": "size", "lr": "positive", "seed": "seed",
                "print_every": "size or None", "callback": lambda v: v is None or callable(v),
                "num_threads": "size or None"},
         # from lr ≈ 1e20 the first update sends float32 activations to inf: the loss of step 2
         # is NaN, and the helper must say so (lr = 1e15 still gives finite, if huge, losses)
         valid=lambda kw: not _is_real_above(kw["lr"], 1e20),
         check=_train_ok,
         bad=[Case("model-float16", lambda kw: kw["model"].half(), named("model", r"float32")),
              Case("model-mixed-float16", lambda kw: kw["model"].decoder.half(), named("model", r"float16")),
              Case("model-bfloat16", lambda kw: kw["model"].bfloat16(), named("model", r"float32")),
              Case("model-linear", lambda kw: kw.update(model=torch.nn.Linear(2, 2)), named("model")),
              Case("data-tuple", lambda kw: kw.update(data=(DATA.texts, DATA.targets)), named("data")),
              Case("lr-diverges", lambda kw: kw.update(lr=1e25, steps=3), named("loss", r"step 2")),
              Case("lr-overflows-adam", lambda kw: kw.update(lr=1e300), named("lr")),
              Case("data-empty", lambda kw: kw.update(data=s.DateData([], [], [], DATA.src[:0], DATA.src_lens[:0],
                                                                      DATA.tgt[:0])), named("data")),
              Case("callback-str", lambda kw: kw.update(callback="print"), named("callback"))],
         edge=[Case("callback-sees-each-loss", lambda kw: kw.update(callback=_Recorder()),
                    lambda out, kw: kw["callback"].seen == list(enumerate(out, start=1))),
               Case("print_every-1", lambda kw: kw.update(print_every=1, steps=3), _train_ok),
               Case("float64-model", lambda kw: kw["model"].double(), _train_ok),
               Case("baseline", lambda kw: kw.update(model=_model(attention=False)), _train_ok),
               Case("numpy-numbers", lambda kw: kw.update(steps=np.int64(2), batch_size=np.int32(2),
                                                          lr=np.float32(0.01), seed=np.int64(4)), _train_ok)]),
    Spec("helpers.seq2seq.greedy_decode", call=s.greedy_decode,
         good=lambda: dict(model=MODEL, src=SRC.clone(), src_lens=LENS.clone(), max_steps=5),
         rules={"model": SEQ2SEQ, "src": T(rank=2, dtype="integer"), "src_lens": T(rank=1, dtype="integer"),
                "max_steps": "size"},
         check=_greedy_ok,
         bad=[Case("src_lens-0", lambda kw: kw.update(src_lens=kw["src_lens"] * 0), named("src_lens")),
              Case("src-id-too-large", lambda kw: kw.update(src=kw["src"] + 30), named("src")),
              Case("src_lens-batch-2", lambda kw: kw.update(src_lens=kw["src_lens"][:2]), named("src_lens"))],
         edge=[Case("baseline", lambda kw: kw.update(model=BASELINE), _greedy_ok),
               Case("src_lens-all-1", lambda kw: kw.update(src_lens=torch.ones(3, dtype=torch.long)), _greedy_ok),
               Case("float64", lambda kw: kw.update(model=s.Seq2Seq(4, 5).double().eval()), _greedy_ok)]),
    Spec("helpers.seq2seq.predict", call=s.predict,
         good=lambda: dict(model=MODEL, text="3 May 1998", max_steps=6),
         rules={"model": SEQ2SEQ, "text": _source_text, "max_steps": "size"},
         check=lambda out, kw: _prediction_ok(kw["text"], *out, kw["model"], kw["max_steps"]),
         bad=[Case("text-unknown-word", lambda kw: kw.update(text="3 Mai 1998"), named("text", "outside the vocabulary")),
              Case("text-list", lambda kw: kw.update(text=["3 May 1998"]), named("text")),
              Case("text-no-tokens", lambda kw: kw.update(text="  "), named("text", "no tokens"))],
         edge=[Case("baseline", lambda kw: kw.update(model=BASELINE),
                    lambda out, kw: _prediction_ok(kw["text"], *out, kw["model"], kw["max_steps"]))]),
    Spec("helpers.seq2seq.predict_many", call=s.predict_many,
         good=lambda: dict(model=MODEL, texts=list(TEXTS), max_steps=6),
         rules={"model": SEQ2SEQ, "texts": _source_texts,
                "max_steps": "size"},
         check=lambda out, kw: len(out) == len(kw["texts"]) and all(
             _prediction_ok(t, tokens, w, kw["model"], kw["max_steps"]) for t, (tokens, w) in zip(kw["texts"], out)),
         bad=[Case("texts-str", lambda kw: kw.update(texts="3 May 1998"), named("texts", r"wrap it")),
              Case("texts-unknown-word", lambda kw: kw.update(texts=["3 Mai 1998"]), named("texts"))],
         edge=[Case("texts-empty", lambda kw: kw.update(texts=[]), lambda out, kw: out == [])]),
    Spec("helpers.seq2seq.matches", call=s.matches,
         good=lambda: dict(model=MODEL, texts=list(TEXTS), targets=list(TARGETS)),
         rules={"model": SEQ2SEQ, "texts": _source_texts,
                "targets": _str_list},
         valid=lambda kw: not (_str_list(kw["texts"]) and _str_list(kw["targets"])) or len(kw["texts"]) == len(kw["targets"]),
         check=lambda out, kw: out.dtype == torch.bool and out.tolist() == _hits_want(kw),
         bad=[Case("targets-one-short", lambda kw: kw.update(targets=TARGETS[:2]), named("targets")),
              Case("targets-str", lambda kw: kw.update(targets="1998-05-03"), named("targets", r"wrap it"))],
         edge=[Case("targets-own-output", lambda kw: kw.update(
                   targets=[s.output_text(t) for t, _ in s.predict_many(MODEL, TEXTS)]),
                   lambda out, kw: out.tolist() == [True] * 3),
               Case("no-texts", lambda kw: kw.update(texts=[], targets=[]),
                    lambda out, kw: out.dtype == torch.bool and out.shape == (0,))]),
    Spec("helpers.seq2seq.exact_match", call=s.exact_match,
         good=lambda: dict(model=MODEL, texts=list(TEXTS), targets=[
             s.output_text(s.predict(MODEL, TEXTS[0])[0]), "x", TARGETS[2]]),
         rules={"model": SEQ2SEQ, "texts": _source_texts,
                "targets": _str_list},
         valid=lambda kw: len(kw["texts"]) == len(kw["targets"]) >= 1,
         check=lambda out, kw: isinstance(out, float) and out == sum(_hits_want(kw)) / len(kw["texts"]),
         bad=[Case("no-texts", lambda kw: kw.update(texts=[], targets=[]), named("texts")),
              Case("targets-one-short", lambda kw: kw.update(targets=TARGETS[:2]), named("targets"))]),
]


class _Recorder:
    """A callback that keeps every (step, loss) it is given."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []

    def __call__(self, step: int, loss: float) -> None:
        self.seen.append((step, loss))


def _is_real_above(v, bound: float) -> bool:
    return (isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
            and math.isfinite(v) and v > bound)


