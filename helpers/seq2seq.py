"""Bahdanau attention (Bahdanau 注意力) in a small GRU encoder-decoder (编码器-解码器), the
same decoder without attention (a fixed context), and the synthetic date task they learn:
"3 May 1998" → "1998-05-03".

Legend: B batch, T source tokens (the keys and values), S target steps (the queries),
E embedding size, N hidden units (``num_hiddens``), C target vocabulary size, n dates.
Mask convention: ``src_lens`` (B,) is each source's valid length (有效长度): the first ``n``
tokens take part, the padding after them gets attention weight exactly 0.
Attention weights are laid out (B, S, T): one row per decoding step, one column per source token.
Steps count from 1 in the docs, as in the maths (step t reads s_{t-1} and writes y_t); tensors
index them from 0, so step t is row t - 1.
"""

from __future__ import annotations

import calendar
import math
import numbers
import operator
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .attention import AdditiveAttention
from .adam import Adam
from .checks import (
    as_usable_device, check_bool, check_like, check_positive_int, check_rank, check_real, check_seed,
    check_size,
)
from .device import cpu_threads

__all__ = [
    "PAD", "BOS", "EOS", "Vocab", "SRC_VOCAB", "TGT_VOCAB", "FORMATS",
    "tokenize_source", "tokenize_target", "format_date", "encode_sources", "encode_targets",
    "MONTHS", "MONTHS_ABBR", "decode_target", "output_text", "DateData", "count_dates",
    "make_dates", "shift_right",
    "Encoder", "Decoder", "AttentionDecoder", "MeanContextDecoder", "Seq2Seq", "train_seq2seq",
    "greedy_decode", "predict", "predict_many", "matches", "exact_match",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # English whatever the locale
MONTHS_ABBR = [m[:3] for m in MONTHS]  # "Jan" ... "Dec"


def _check_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}")


def _check_texts(name: str, texts: object) -> list[str]:
    """A list of str from a sequence of str; a lone str is refused (it would be read char by
    char, each character a text of its own)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise ValueError(f"{name} must be a list of str (one text each), got "
                         f"{type(texts).__name__}" + (f" {texts!r}: wrap it in [...]"
                                                      if isinstance(texts, str) else ""))
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return list(texts)


def _kind(value: object) -> str:
    """How an error names a wrong value: a str in full, anything else by its type."""
    return f"the str {value!r}" if isinstance(value, str) else type(value).__name__


def _is_int(value: object) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _check_in(name: str, value: object, lo: int, hi: int, why: str = "") -> int:
    """``value`` as an int; raise unless it is an integer in [lo, hi]."""
    if not _is_int(value) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an int in [{lo}, {hi}]{why}, got {value!r}")
    return int(value)


class Vocab:
    """A fixed list of tokens ↔ integer ids; id 0 is always ``<pad>``."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if isinstance(tokens, str) or not isinstance(tokens, Sequence):
            raise ValueError(f"tokens must be a list of str, got {_kind(tokens)}")
        if any(not isinstance(t, str) for t in tokens):
            raise ValueError(f"tokens must be str, got {[type(t).__name__ for t in tokens]}")
        self.itos = [PAD] + [t for t in tokens if t != PAD]
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            repeated = sorted({t for t in self.itos if self.itos.count(t) > 1})
            raise ValueError(f"tokens must be distinct, got repeated tokens {repeated}")

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def pad(self) -> int:
        return 0

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Token strings → ids; raises ValueError on a token outside the vocabulary (a lone str
        is refused too: pass a list of tokens, e.g. ``tokenize_source(text)``)."""
        if isinstance(tokens, str) or not isinstance(tokens, Sequence):
            raise ValueError(f"tokens must be a list of tokens, got {_kind(tokens)}")
        unknown = [t for t in tokens if not isinstance(t, str) or t not in self.stoi]
        if unknown:
            raise ValueError(f"tokens must all be in the vocabulary, got {unknown} "
                             "(outside the vocabulary)")
        return [self.stoi[t] for t in tokens]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """Ids (integers in [0, len(vocab) - 1]: a list, a 1-D integer tensor or NumPy array)
        → token strings. Bools are not ids."""
        if isinstance(ids, (torch.Tensor, np.ndarray)):
            integer = (ids.dtype.kind in "iu" if isinstance(ids, np.ndarray) else
                       not (ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool))
            if ids.ndim != 1 or not integer:
                raise ValueError(f"ids must be a 1-D integer tensor, got dtype {ids.dtype} "
                                 f"and shape {tuple(ids.shape)}")
            if isinstance(ids, torch.Tensor) and ids.device.type == "meta":
                raise ValueError("ids must hold values, got a tensor on the 'meta' device")
            ids = ids.tolist()
        elif isinstance(ids, str) or not isinstance(ids, Sequence):
            raise ValueError(f"ids must be a list of ints or a 1-D integer tensor, got "
                             f"{type(ids).__name__} {ids!r}")
        out = []
        for i in ids:
            if isinstance(i, (bool, np.bool_)):
                raise ValueError(f"ids must be integers, got the bool {i!r}")
            try:
                i = operator.index(i)  # ints, NumPy ints; not floats
            except TypeError:
                raise ValueError(f"ids must be integers, got {type(i).__name__} {i!r}") from None
            if not 0 <= i < len(self.itos):
                raise ValueError(f"ids must lie in [0, {len(self.itos) - 1}], got {i}")
            out.append(self.itos[i])
        return out


DIGITS = [str(d) for d in range(10)]
# Source tokens: digits one by one, month names as whole words, punctuation.
SRC_VOCAB = Vocab(DIGITS + MONTHS_ABBR + [m for m in MONTHS if m not in MONTHS_ABBR] + [",", "."])
# Target tokens: characters of "YYYY-MM-DD", framed by <bos> and <eos>.
TGT_VOCAB = Vocab([BOS, EOS] + DIGITS + ["-"])

_SOURCE_TOKEN = re.compile(r"[A-Za-z]+|\d|[^\sA-Za-z\d]")

# The input formats, as str.format templates over the fields of one date.
FORMATS = (
    "{d} {mon} {y}",        # 3 May 1998
    "{mon} {d}, {y}",       # May 3, 1998
    "{d} {month} {y}",      # 3 September 1998
    "{month} {d}, {y}",     # September 3, 1998
    "{dd}.{mm}.{y}",        # 03.05.1998
)


def tokenize_source(text: str) -> list[str]:
    """'3 May, 1998' → ['3', 'May', ',', '1', '9', '9', '8']: words whole, digits one by one."""
    _check_str("text", text)
    return _SOURCE_TOKEN.findall(text)


def tokenize_target(text: str) -> list[str]:
    """'1998-05-03' → its characters."""
    _check_str("text", text)
    return list(text)


def format_date(year: int, month: int, day: int, fmt: int) -> tuple[str, str]:
    """The source text of a date in format ``FORMATS[fmt]`` and its target 'YYYY-MM-DD'.

    Raises ValueError for a date that does not exist (year outside 1–9999, month outside
    1–12, 30 February, ...) or a format index outside [0, 4].
    """
    year, month = _check_in("year", year, 1, 9999), _check_in("month", month, 1, 12)
    days = calendar.monthrange(year, month)[1]
    day = _check_in("day", day, 1, days,
                    f" (no such date: {MONTHS[month - 1]} {year} has {days} days)")
    fmt = _check_in("fmt", fmt, 0, len(FORMATS) - 1)
    text = FORMATS[fmt].format(d=day, dd=f"{day:02d}", mm=f"{month:02d}", y=year,
                               mon=MONTHS_ABBR[month - 1], month=MONTHS[month - 1])
    return text, f"{year:04d}-{month:02d}-{day:02d}"


def encode_sources(texts: Sequence[str], device: torch.device | str = "cpu",
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokenize, encode and pad source texts → ids (B, T) padded with 0, valid lengths (B,).

    ``device``: a ``torch.device`` or a name ('cpu', 'cuda') present here; None: PyTorch's
    default. Raises ValueError for a text with no tokens or a token outside ``SRC_VOCAB``.
    """
    texts = _check_texts("texts", texts)
    device = as_usable_device("device", device)
    rows = [_source_ids(f"texts[{i}]", text) for i, text in enumerate(texts)]
    lens = torch.tensor([len(r) for r in rows], dtype=torch.long, device=device)  # (B,)
    return _pad(rows, device), lens  # (B, T), (B,)


def _source_ids(name: str, text: str) -> list[int]:
    """The ids of one source text (a str); ``name`` names it in the errors."""
    tokens = tokenize_source(text)
    if not tokens:
        raise ValueError(f"{name} must hold at least one token, got {text!r}: no tokens")
    try:
        return SRC_VOCAB.encode(tokens)
    except ValueError as err:
        raise ValueError(f"{name} = {text!r}: {err}") from None


def _pad(rows: list[list[int]], device: torch.device | str) -> torch.Tensor:
    """Rows of ids → one tensor (B, T), each row padded with 0 (``<pad>``) to the longest."""
    width = max(map(len, rows), default=0)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long,
                        device=device).reshape(len(rows), width)


def encode_targets(texts: Sequence[str], device: torch.device | str = "cpu") -> torch.Tensor:
    """Target texts → ids (B, S) of their characters followed by ``<eos>``, padded with 0."""
    texts = _check_texts("texts", texts)
    device = as_usable_device("device", device)
    rows = []
    for i, text in enumerate(texts):
        try:
            rows.append(TGT_VOCAB.encode(tokenize_target(text) + [EOS]))
        except ValueError as err:
            raise ValueError(f"texts[{i}] = {text!r}: {err}") from None
    return _pad(rows, device)


def output_text(tokens: Sequence[str]) -> str:
    """Output tokens (as ``predict`` returns them) → text, stopping at the first ``<eos>``."""
    return decode_target(TGT_VOCAB.encode(list(tokens) if isinstance(tokens, str) else tokens))


def decode_target(ids: Sequence[int] | torch.Tensor) -> str:
    """Target ids → text, stopping at the first ``<eos>``; ``<bos>``/``<pad>`` are dropped."""
    out = []
    for tok in TGT_VOCAB.decode(ids):
        if tok == EOS:
            break
        if tok not in (PAD, BOS):
            out.append(tok)
    return "".join(out)


@dataclass
class DateData:
    """Source texts, their targets, formats and the encoded tensors (on the CPU).

    ``formats`` the index into ``FORMATS`` each text was written in; ``src`` (n, T) source ids
    padded with 0; ``src_lens`` (n,) valid lengths in [1, T]; ``tgt`` (n, S) target ids ending
    in ``<eos>``. Checked when built: n of each, ``torch.long`` tensors on one device, ids in
    ``SRC_VOCAB`` / ``TGT_VOCAB``.
    """

    texts: list[str]
    targets: list[str]
    formats: list[int]
    src: torch.Tensor
    src_lens: torch.Tensor
    tgt: torch.Tensor

    def __post_init__(self) -> None:
        """Check that the fields agree (n of each, ids and lengths in range); the lists are
        copied, the tensors kept as given."""
        self.texts = _check_texts("texts", self.texts)
        n = len(self.texts)
        self.targets = _check_texts("targets", self.targets)
        if isinstance(self.formats, str) or not isinstance(self.formats, Sequence):
            raise ValueError(f"formats must be a list of ints, got {type(self.formats).__name__}")
        self.formats = [_check_in(f"formats[{i}]", f, 0, len(FORMATS) - 1)
                        for i, f in enumerate(self.formats)]
        for name, size in (("targets", len(self.targets)), ("formats", len(self.formats))):
            if size != n:
                raise ValueError(f"{name} must have one entry per text ({n}), got {size}")
        for name, x, rank, layout, vocab in (("src", self.src, 2, "(n, T)", SRC_VOCAB),
                                             ("src_lens", self.src_lens, 1, "(n,)", None),
                                             ("tgt", self.tgt, 2, "(n, S)", TGT_VOCAB)):
            check_rank(name, x, rank, layout)
            if x.dtype != torch.long:
                raise ValueError(f"{name} must be a torch.long tensor, got {x.dtype}")
            if x.shape[0] != n:
                raise ValueError(f"{name} must have one row per text ({n}), "
                                 f"got shape {tuple(x.shape)}")
            if x.device != self.src.device:
                raise ValueError(f"{name} must be on the device of src ({self.src.device}), "
                                 f"got {x.device}")
            if vocab is not None:
                _check_ids(name, x, len(vocab))
        _check_lens(self.src_lens, self.src.shape[1])


def _check_years(years: object) -> tuple[int, int]:
    if (not isinstance(years, Sequence) or isinstance(years, str) or len(years) != 2
            or not all(map(_is_int, years))):
        raise ValueError(f"years must be a pair of ints (first, last), got {years!r}")
    lo, hi = int(years[0]), int(years[1])
    if not 1 <= lo <= hi <= 9999:
        raise ValueError(f"years must satisfy 1 <= first <= last <= 9999, got {years!r}")
    return lo, hi


def count_dates(years: tuple[int, int] = (1900, 2099)) -> int:
    """How many distinct source texts the dates of ``years`` (closed range) can be written as.

    Every date has one text per format, except that "May" is its own abbreviation: May dates
    have 3 distinct texts, not 5.
    """
    lo, hi = _check_years(years)
    days = sum(366 if calendar.isleap(y) else 365 for y in range(lo, hi + 1))
    return len(FORMATS) * days - 2 * 31 * (hi - lo + 1)


def _all_dates(lo: int, hi: int) -> dict[str, tuple[str, int]]:
    """Every distinct source text of the years [lo, hi] → (target, format), in a fixed order."""
    out: dict[str, tuple[str, int]] = {}
    for y in range(lo, hi + 1):
        for m in range(1, 13):
            for d in range(1, calendar.monthrange(y, m)[1] + 1):
                for fmt in range(len(FORMATS)):
                    text, target = format_date(y, m, d, fmt)
                    out.setdefault(text, (target, fmt))
    return out


def make_dates(n: int, seed: int = 0, years: tuple[int, int] = (1900, 2099),
               exclude: Sequence[str] = ()) -> DateData:
    """``n`` distinct random dates (years in the closed range ``years``), formats mixed.

    Depends on ``seed`` alone (its own generator; the global random state is untouched).
    Texts in ``exclude`` are skipped: pass the training texts to get a disjoint test set.
    Raises ValueError when ``years`` (less ``exclude``) holds fewer than ``n`` distinct texts
    (see ``count_dates``). Dates are drawn as year, month, day, format, each uniform; when ``n``
    is more than half of the texts left, they are drawn instead from the list of all of them
    (uniform over texts), so that the draw always ends.
    """
    n = check_positive_int("n", n)
    seed = check_seed(seed)
    lo, hi = _check_years(years)
    seen = set(_check_texts("exclude", exclude))
    total = count_dates((lo, hi))
    universe = None
    if n > (total - len(seen)) // 2:  # few texts to spare: count exactly, then draw from the list
        universe = {t: v for t, v in _all_dates(lo, hi).items() if t not in seen}
        if n > len(universe):
            raise ValueError(
                f"n must be at most {len(universe)}: the years {lo}-{hi} give only {total} "
                f"distinct texts ({total - len(universe)} of them excluded, {len(universe)} left), "
                f"got {n}")
    gen = torch.Generator().manual_seed(seed)
    texts, targets, formats = [], [], []
    if universe is not None:
        pool = list(universe.items())
        for i in torch.randperm(len(pool), generator=gen)[:n].tolist():
            text, (target, fmt) = pool[i]
            texts.append(text)
            targets.append(target)
            formats.append(fmt)
    while len(texts) < n:  # at least half of the texts are free: each round fills most of the rest
        k = 2 * (n - len(texts)) + 16  # candidates per round; repeats are dropped
        ys = torch.randint(lo, hi + 1, (k,), generator=gen).tolist()
        ms = torch.randint(1, 13, (k,), generator=gen).tolist()
        us = torch.rand(k, generator=gen, dtype=torch.float64).tolist()
        fmts = torch.randint(len(FORMATS), (k,), generator=gen).tolist()
        for y, m, u, fmt in zip(ys, ms, us, fmts):
            d = int(u * calendar.monthrange(y, m)[1]) + 1  # uniform over the month's days
            text, target = format_date(y, m, d, fmt)
            if text not in seen and len(texts) < n:
                seen.add(text)
                texts.append(text)
                targets.append(target)
                formats.append(fmt)
    src, src_lens = encode_sources(texts)
    return DateData(texts, targets, formats, src, src_lens, encode_targets(targets))


# ---------------------------------------------------------------------------- the model
def _check_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Integer ids in [0, vocab_size - 1] (an embedding would fail on others, on a GPU with a
    device-side assert)."""
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer ids, got dtype {ids.dtype}")
    if ids.device.type == "meta":
        raise ValueError(f"{name} must hold values, got a tensor on the 'meta' device")
    if ids.numel():
        lo, hi = torch.aminmax(ids)
        if int(lo) < 0 or int(hi) >= vocab_size:
            raise ValueError(f"{name} must hold ids in [0, {vocab_size - 1}], "
                             f"got values from {int(lo)} to {int(hi)}")


def _check_lens(src_lens: torch.Tensor, T: int) -> None:
    """Integer valid lengths (B,) in [1, T] (a row of length 0 would have no keys at all)."""
    if src_lens.is_floating_point() or src_lens.is_complex() or src_lens.dtype == torch.bool:
        raise ValueError(f"src_lens must hold integer lengths, got dtype {src_lens.dtype}")
    if src_lens.device.type == "meta":
        raise ValueError("src_lens must hold values, got a tensor on the 'meta' device")
    if src_lens.numel():
        lo, hi = (int(v) for v in torch.aminmax(src_lens))
        if lo < 1 or hi > T:
            raise ValueError(f"src_lens must lie in [1, T] = [1, {T}], "
                             f"got values from {lo} to {hi}")


def _check_device(name: str, x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.device != weight.device:
        raise ValueError(f"{name} must be on the model's device ({weight.device}), got {x.device}")


def _check_source(src: torch.Tensor, src_lens: torch.Tensor) -> None:
    check_rank("src", src, 2, "(B, T)")
    check_rank("src_lens", src_lens, 1, "(B,)")
    check_size("batch size of src_lens (B)", src.shape[0], src_lens.shape[0])
    if src.shape[0] == 0:
        raise ValueError(f"src must hold at least one sequence, got shape {tuple(src.shape)}")
    _check_lens(src_lens, src.shape[1])


def _sizes(vocab_size: int, embed_size: int, num_hiddens: int) -> tuple[int, int, int]:
    return (check_positive_int("vocab_size", vocab_size),
            check_positive_int("embed_size", embed_size),
            check_positive_int("num_hiddens", num_hiddens))


class Encoder(nn.Module):
    """Embedding + one-layer bidirectional GRU over the source tokens (as in Bahdanau et al.).

    ``forward(src (B, T), src_lens (B,))`` → ``outputs`` (B, T, 2N): for each source token the
    forward and backward GRU states side by side (the keys and values of the attention), zero
    on padded positions; and ``state`` (B, N), the decoder's initial state tanh(W [→h_n; ←h_1]).
    The sequences are packed by ``src_lens`` (each in [1, T]), so padded tokens are never read:
    changing them changes nothing.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int) -> None:
        super().__init__()
        vocab_size, embed_size, num_hiddens = _sizes(vocab_size, embed_size, num_hiddens)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, batch_first=True, bidirectional=True)
        self.init_state = nn.Linear(2 * num_hiddens, num_hiddens)

    def forward(self, src: torch.Tensor,
                src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_source(src, src_lens)
        _check_ids("src", src, self.embedding.num_embeddings)
        _check_device("src", src, self.embedding.weight)
        packed = nn.utils.rnn.pack_padded_sequence(  # the lengths on the CPU, as it wants them
            self.embedding(src), src_lens.cpu(), batch_first=True, enforce_sorted=False)
        outputs, last = self.rnn(packed)  # last: (2, B, N), forward and backward final states
        outputs, _ = nn.utils.rnn.pad_packed_sequence(
            outputs, batch_first=True, total_length=src.shape[1])  # (B, T, 2N)
        state = torch.tanh(self.init_state(torch.cat([last[0], last[1]], dim=-1)))  # (B, N)
        return outputs, state


class Decoder(nn.Module):
    """GRU decoder that reads a context c_t (B, 2N) of the encoder outputs at every step t.

    Subclasses say where the context comes from (``_context``: ``AttentionDecoder``,
    ``MeanContextDecoder``); everything else is shared:
    s_t = GRU([e(y_{t-1}); c_t], s_{t-1}), and the logits of y_t come from [s_t; c_t].
    The public methods check their inputs (``src_lens`` (B,): valid lengths in [1, T]);
    ``forward`` checks them once, not at every step.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int) -> None:
        super().__init__()
        vocab_size, embed_size, num_hiddens = _sizes(vocab_size, embed_size, num_hiddens)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.cell = nn.GRUCell(embed_size + 2 * num_hiddens, num_hiddens)
        self.dense = nn.Linear(3 * num_hiddens, vocab_size)

    def _check(self, state: torch.Tensor, enc_outputs: torch.Tensor,
               src_lens: torch.Tensor) -> torch.Tensor:
        """Check state (B, N), enc_outputs (B, T, 2N), src_lens (B,); the lengths on the
        device of enc_outputs."""
        check_rank("state", state, 2, "(B, N)")
        check_rank("enc_outputs", enc_outputs, 3, "(B, T, 2N)")
        check_rank("src_lens", src_lens, 1, "(B,)")
        for name, x in (("state", state), ("enc_outputs", enc_outputs)):
            check_like(name, x, "the decoder's weights", self.dense.weight)
        N = self.cell.hidden_size
        check_size("size of state (N)", N, state.shape[1])
        check_size("size of enc_outputs (2N)", 2 * N, enc_outputs.shape[2])
        check_size("batch size of enc_outputs (B, as state)", state.shape[0], enc_outputs.shape[0])
        check_size("batch size of src_lens (B, as state)", state.shape[0], src_lens.shape[0])
        _check_lens(src_lens, enc_outputs.shape[1])
        return src_lens.to(enc_outputs.device)

    def _check_tokens(self, name: str, tokens: torch.Tensor, state: torch.Tensor) -> None:
        """Ids (B, ...) in the vocabulary, on the model's device, B as in state (B, N)."""
        check_rank("state", state, 2, "(B, N)")
        check_size(f"batch size of state (B, as {name})", tokens.shape[0], state.shape[0])
        _check_ids(name, tokens, self.embedding.num_embeddings)
        _check_device(name, tokens, self.embedding.weight)

    def _context(self, state: torch.Tensor, enc_outputs: torch.Tensor,
                 src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError("Decoder is the shared base: use AttentionDecoder or "
                                  "MeanContextDecoder, which say where the context comes from")

    def context(self, state: torch.Tensor, enc_outputs: torch.Tensor,
                src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """State s_{t-1} (B, N), encoder outputs (B, T, 2N), valid lengths (B,) → context c_t
        (B, 2N) and the weights (B, T) it gave each source token (0 on padding)."""
        return self._context(state, enc_outputs, self._check(state, enc_outputs, src_lens))

    def _step(self, token: torch.Tensor, state: torch.Tensor, enc_outputs: torch.Tensor,
              src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        context, weights = self._context(state, enc_outputs, src_lens)  # (B, 2N), (B, T)
        state = self.cell(torch.cat([self.embedding(token), context], dim=-1), state)  # (B, N)
        logits = self.dense(torch.cat([state, context], dim=-1))  # (B, C)
        return logits, state, weights

    def step(self, token: torch.Tensor, state: torch.Tensor, enc_outputs: torch.Tensor,
             src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decoding step: input ids (B,), state (B, N) → logits (B, C), new state (B, N),
        weights (B, T) (exactly 0 on padded source tokens)."""
        check_rank("token", token, 1, "(B,)")
        self._check_tokens("token", token, state)
        src_lens = self._check(state, enc_outputs, src_lens)
        return self._step(token, state, enc_outputs, src_lens)

    def _teacher_forcing(self, tgt_in: torch.Tensor, state: torch.Tensor, enc_outputs: torch.Tensor,
                         src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            out, state, w = self._step(tgt_in[:, t], state, enc_outputs, src_lens)
            logits.append(out)
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)  # (B, S, C), (B, S, T)

    def forward(self, tgt_in: torch.Tensor, state: torch.Tensor, enc_outputs: torch.Tensor,
                src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing: inputs ``tgt_in`` (B, S), S ≥ 1 (``<bos>`` then the target shifted
        right), initial state (B, N) → logits (B, S, C) and weights (B, S, T)."""
        _check_steps("tgt_in", tgt_in)
        self._check_tokens("tgt_in", tgt_in, state)
        src_lens = self._check(state, enc_outputs, src_lens)
        return self._teacher_forcing(tgt_in, state, enc_outputs, src_lens)


def _check_steps(name: str, ids: torch.Tensor) -> None:
    check_rank(name, ids, 2, "(B, S)")
    if ids.shape[1] < 1:
        raise ValueError(f"{name} must have at least one step, got shape {tuple(ids.shape)}")


class AttentionDecoder(Decoder):
    """Bahdanau attention: at step t the query is the previous decoder state s_{t-1} (B, N);
    keys = values = the encoder outputs (B, T, 2N); the additive scorer
    ``h.AdditiveAttention`` weighs them, and ``src_lens`` (B,) masks the padding (the first
    ``n`` tokens of a row take part, the rest get weight exactly 0). c_t = Σ_j α_tj h_j.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int) -> None:
        super().__init__(vocab_size, embed_size, num_hiddens)
        self.attention = AdditiveAttention(2 * self.cell.hidden_size, self.cell.hidden_size,
                                           self.cell.hidden_size)

    def _context(self, state: torch.Tensor, enc_outputs: torch.Tensor,
                 src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        query = state.unsqueeze(1)  # (B, 1, N): one query, s_{t-1}
        context = self.attention(query, enc_outputs, enc_outputs, src_lens)  # (B, 1, 2N)
        return context.squeeze(1), self.attention.attention_weights.squeeze(1)  # (B, 2N), (B, T)


class MeanContextDecoder(Decoder):
    """No attention: every step gets the same context, the mean of the encoder outputs over the
    valid tokens — attention with every weight frozen at 1/n (average pooling, 平均汇聚).
    Same cell, same sizes as ``AttentionDecoder``, less the scorer's parameters.
    """

    def _context(self, state: torch.Tensor, enc_outputs: torch.Tensor,
                 src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = enc_outputs.shape[1]
        lens = src_lens.to(enc_outputs.device)
        valid = torch.arange(T, device=enc_outputs.device) < lens[:, None]  # (B, T), True = real
        weights = valid.to(enc_outputs.dtype) / lens[:, None].clamp(min=1).to(enc_outputs.dtype)
        return torch.bmm(weights.unsqueeze(1), enc_outputs).squeeze(1), weights  # (B, 2N), (B, T)


class Seq2Seq(nn.Module):
    """Encoder + decoder for the date task (vocabularies ``SRC_VOCAB``, ``TGT_VOCAB``).

    ``attention=True``: ``AttentionDecoder`` (Bahdanau); ``False``: ``MeanContextDecoder`` (a
    fixed context, the baseline). ``forward(src (B, T), src_lens (B,), tgt_in (B, S))`` →
    logits (B, S, C), weights (B, S, T).
    """

    def __init__(self, embed_size: int = 16, num_hiddens: int = 32, attention: bool = True) -> None:
        super().__init__()
        check_bool("attention", attention)
        self.encoder = Encoder(len(SRC_VOCAB), embed_size, num_hiddens)
        decoder = AttentionDecoder if attention else MeanContextDecoder
        self.decoder = decoder(len(TGT_VOCAB), embed_size, num_hiddens)

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor,
                tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_source(src, src_lens)
        _check_steps("tgt_in", tgt_in)
        check_size("batch size of tgt_in (B)", src.shape[0], tgt_in.shape[0])
        enc_outputs, state = self.encoder(src, src_lens)  # (B, T, 2N), (B, N)
        self.decoder._check_tokens("tgt_in", tgt_in, state)
        return self.decoder._teacher_forcing(tgt_in, state, enc_outputs, src_lens.to(src.device))


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Decoder inputs for teacher forcing: ``<bos>`` followed by ``tgt`` (B, S) without its last
    id → (B, S)."""
    _check_steps("tgt", tgt)
    _check_ids("tgt", tgt, len(TGT_VOCAB))
    bos = torch.full_like(tgt[:, :1], TGT_VOCAB.stoi[BOS])  # (B, 1)
    return torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, S)


def _check_model(model: object) -> None:
    if not isinstance(model, Seq2Seq):
        raise ValueError(f"model must be a Seq2Seq, got {type(model).__name__}")


def train_seq2seq(
    model: Seq2Seq, data: DateData, *, steps: int = 100, batch_size: int = 128,
    lr: float = 0.02, seed: int = 0, print_every: int | None = 100,
    callback: Callable[[int, float], None] | None = None, num_threads: int | None = None,
) -> list[float]:
    """Adam (``helpers.adam``: ``torch.optim.Adam``'s numbers, written out) with teacher forcing
    on random batches of ``data``; returns the loss of each step.

    Batches come from a generator seeded with ``seed`` and are moved to the model's device.
    The loss is the cross-entropy of every target token (padding ignored). Every
    ``print_every`` steps it prints the mean loss of those steps; ``callback(step, loss)``,
    if given, is called after every step. ``num_threads``: PyTorch's CPU thread count during
    training (restored afterwards, even on an error); None leaves it alone.

    Training is in float32 (or float64): a float16 / bfloat16 model is refused (in float16
    Adam's squared gradients and its eps underflow to 0 and the weights turn to inf / NaN; in
    bfloat16 its small updates round away): train in float32, then convert. A step whose loss
    or gradient norm is not finite (``lr`` far too large) raises a ValueError naming the step,
    before its update: the weights are left as the previous step made them, never NaN.
    """
    _check_model(model)
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()})
    if dtypes not in (["float32"], ["float64"]):
        raise ValueError(f"model must be in float32 (or float64) to train, got {dtypes}: Adam "
                         "loses its updates in reduced precision (NaN weights in float16); train "
                         "in float32, then convert the model")
    if not isinstance(data, DateData):
        raise ValueError(f"data must be a DateData (make_dates), got {type(data).__name__}")
    if not data.texts:
        raise ValueError("data must hold at least one example, got an empty DateData")
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    lr = check_real("lr", lr, above=0)
    dtype = next(model.parameters()).dtype
    if lr >= torch.finfo(dtype).max / 10:  # Adam's first step is lr / (1 - 0.9)
        raise ValueError(f"lr must be below {torch.finfo(dtype).max / 10:.3g} for {dtype} weights "
                         f"(Adam's first step is 10 lr), got {lr!r}")
    seed = check_seed(seed)
    if print_every is not None:
        print_every = check_positive_int("print_every", print_every)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be None or a function (step, loss), got {callback!r}")
    with cpu_threads(num_threads):  # (checked there)
        device = next(model.parameters()).device
        gen = torch.Generator().manual_seed(seed)
        opt = Adam(model.parameters(), lr=lr)
        model.train()
        losses: list[float] = []
        start = time.perf_counter()
        try:
            for step in range(1, steps + 1):
                idx = torch.randint(len(data.texts), (batch_size,), generator=gen)
                src, lens, tgt = data.src[idx], data.src_lens[idx], data.tgt[idx]
                width = int(lens.max())
                src, lens, tgt = src[:, :width].to(device), lens.to(device), tgt.to(device)
                logits, _ = model(src, lens, shift_right(tgt))  # (B, S, C)
                loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(),
                                       ignore_index=TGT_VOCAB.pad)
                opt.zero_grad()
                loss.backward()
                norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                value, norm = torch.stack([loss.detach().double(), norm.double()]).tolist()
                if not (math.isfinite(value) and math.isfinite(norm)):
                    raise ValueError(
                        f"the loss and its gradient must stay finite, got loss {value} and "
                        f"gradient norm {norm} at step {step} (lr = {lr} too large?); the "
                        f"weights are left as step {step - 1} made them")
                opt.step()
                losses.append(value)
                if callback is not None:
                    callback(step, losses[-1])
                if print_every and step % print_every == 0:
                    recent = sum(losses[-print_every:]) / len(losses[-print_every:])
                    took = time.perf_counter() - start
                    print(f"step {step:4d}/{steps}  loss {recent:.2f}  ({took:.1f} s)")
        finally:
            model.eval()
        return losses


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor,
                  max_steps: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding from ``<bos>``: each step feeds back its own argmax.

    ``src`` (B, T), ``src_lens`` (B,) → ids (B, max_steps) and weights (B, max_steps, T).
    Rows go on past their ``<eos>``; cut them with ``decode_target`` / ``predict``.
    """
    _check_model(model)
    max_steps = check_positive_int("max_steps", max_steps)
    enc_outputs, state = model.encoder(src, src_lens)  # (B, T, 2N), (B, N); checks src, src_lens
    token = torch.full((src.shape[0],), TGT_VOCAB.stoi[BOS], dtype=torch.long, device=src.device)
    ids, weights = [], []
    lens = src_lens.to(src.device)
    for _ in range(max_steps):
        logits, state, w = model.decoder._step(token, state, enc_outputs, lens)
        token = logits.argmax(-1)  # (B,)
        ids.append(token)
        weights.append(w)
    return torch.stack(ids, 1), torch.stack(weights, 1)  # (B, S), (B, S, T)


def predict_many(model: Seq2Seq, texts: Sequence[str], max_steps: int = 12,
                 ) -> list[tuple[list[str], torch.Tensor]]:
    """Greedy predictions for source texts, each ``(tokens, weights)``; [] for no texts.

    ``tokens``: the output tokens up to and including ``<eos>`` (if produced within
    ``max_steps``); ``weights`` (len(tokens), T_i): one row per output token over the
    text's own T_i source tokens (``tokenize_source(text)``), on the CPU.
    """
    _check_model(model)
    texts = _check_texts("texts", texts)
    max_steps = check_positive_int("max_steps", max_steps)
    if not texts:
        return []
    was_training = model.training
    device = next(model.parameters()).device
    src, lens = encode_sources(texts, device)
    model.eval()
    try:
        ids, weights = greedy_decode(model, src, lens, max_steps)  # (B, S), (B, S, T)
    finally:
        model.train(was_training)
    out = []
    for b in range(len(texts)):
        tokens = TGT_VOCAB.decode(ids[b])
        steps = tokens.index(EOS) + 1 if EOS in tokens else max_steps
        out.append((tokens[:steps], weights[b, :steps, :int(lens[b])].cpu()))
    return out


def predict(model: Seq2Seq, text: str, max_steps: int = 12) -> tuple[list[str], torch.Tensor]:
    """One source text → output tokens and weights (steps × source tokens)."""
    _check_str("text", text)
    _source_ids("text", text)  # its errors name ``text``
    return predict_many(model, [text], max_steps)[0]


def matches(model: Seq2Seq, texts: Sequence[str], targets: Sequence[str]) -> torch.Tensor:
    """Boolean (n,): whether the whole greedy output string of each text equals its target."""
    texts, targets = _check_texts("texts", texts), _check_texts("targets", targets)
    if len(texts) != len(targets):
        raise ValueError(f"targets must have one entry per text ({len(texts)}), got {len(targets)}")
    preds = predict_many(model, texts)
    return torch.tensor([output_text(tokens) == want for (tokens, _), want in zip(preds, targets)],
                        dtype=torch.bool)


def exact_match(model: Seq2Seq, texts: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of texts whose whole greedy output string equals the target."""
    hits = matches(model, texts, targets)
    if not len(hits):
        raise ValueError("texts must hold at least one text for exact_match, got none")
    return int(hits.sum()) / len(hits)
