"""Bahdanau attention (Bahdanau 注意力) in a small GRU encoder-decoder (编码器-解码器), and the
synthetic date-rewriting task it learns: "3 May 1998" → "1998-05-03".

Legend: B batch, T source tokens (the keys and values), S target steps (the queries),
E embedding size, H hidden units, C target vocabulary size.
Mask convention: ``src_lens`` (B,) is each source's valid length (有效长度): the first ``n``
tokens take part, the padding after them gets attention weight exactly 0.
Attention weights are laid out (B, S, T): one row per decoding step, one column per source token.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import AdditiveAttention
from .checks import check_rank, check_size

__all__ = [
    "PAD", "BOS", "EOS", "Vocab", "SRC_VOCAB", "TGT_VOCAB", "FORMATS",
    "tokenize_source", "tokenize_target", "format_date", "encode_sources", "encode_targets",
    "MONTHS", "MONTHS_ABBR", "decode_target", "output_text", "DateData", "make_dates", "shift_right",
    "Encoder", "AttentionDecoder", "Seq2Seq", "Adam", "train_seq2seq", "greedy_decode",
    "predict", "predict_many", "exact_match",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # English whatever the locale
MONTHS_ABBR = [m[:3] for m in MONTHS]  # "Jan" ... "Dec"


class Vocab:
    """A fixed list of tokens ↔ integer ids; id 0 is always ``<pad>``."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.itos = [PAD] + [t for t in tokens if t != PAD]
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("tokens must be distinct")

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def pad(self) -> int:
        return 0

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Token strings → ids; raises ValueError on a token outside the vocabulary."""
        unknown = [t for t in tokens if t not in self.stoi]
        if unknown:
            raise ValueError(f"tokens outside the vocabulary: {unknown}")
        return [self.stoi[t] for t in tokens]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """Ids → token strings."""
        return [self.itos[int(i)] for i in ids]


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
    return _SOURCE_TOKEN.findall(text)


def tokenize_target(text: str) -> list[str]:
    """'1998-05-03' → its characters."""
    return list(text)


def format_date(year: int, month: int, day: int, fmt: int) -> tuple[str, str]:
    """The source text of a date in format ``FORMATS[fmt]`` and its target 'YYYY-MM-DD'."""
    text = FORMATS[fmt].format(d=day, dd=f"{day:02d}", mm=f"{month:02d}", y=year,
                               mon=MONTHS_ABBR[month - 1], month=MONTHS[month - 1])
    return text, f"{year:04d}-{month:02d}-{day:02d}"


def encode_sources(texts: Sequence[str], device: torch.device | str = "cpu",
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokenize, encode and pad source texts → ids (B, T) padded with 0, valid lengths (B,)."""
    rows = [SRC_VOCAB.encode(tokenize_source(t)) for t in texts]
    return _pad(rows, device), torch.tensor([len(r) for r in rows], device=device)  # (B, T), (B,)


def _pad(rows: list[list[int]], device: torch.device | str) -> torch.Tensor:
    """Rows of ids → one tensor (B, T), each row padded with 0 (``<pad>``) to the longest."""
    width = max(map(len, rows), default=0)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long,
                        device=device).reshape(len(rows), width)


def encode_targets(texts: Sequence[str], device: torch.device | str = "cpu") -> torch.Tensor:
    """Target texts → ids (B, S) of their characters followed by ``<eos>``, padded with 0."""
    rows = [TGT_VOCAB.encode(tokenize_target(t) + [EOS]) for t in texts]
    return _pad(rows, device)


def output_text(tokens: Sequence[str]) -> str:
    """Output tokens (as ``predict`` returns them) → text, stopping at the first ``<eos>``."""
    return decode_target(TGT_VOCAB.encode(tokens))


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
    """Source texts, their targets and the encoded tensors (on the CPU).

    ``src`` (N, T) source ids padded with 0; ``src_lens`` (N,) valid lengths;
    ``tgt`` (N, S) target ids ending in ``<eos>``.
    """

    texts: list[str]
    targets: list[str]
    src: torch.Tensor
    src_lens: torch.Tensor
    tgt: torch.Tensor


def make_dates(n: int, seed: int = 0, years: tuple[int, int] = (1900, 2099),
               exclude: Sequence[str] = ()) -> DateData:
    """``n`` distinct random dates (years in the closed range ``years``), formats mixed.

    Depends on ``seed`` alone (its own generator; the global random state is untouched).
    Texts in ``exclude`` are skipped: pass the training texts to get a disjoint test set.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    gen = torch.Generator().manual_seed(seed)
    seen, texts, targets = set(exclude), [], []
    while len(texts) < n:
        k = 2 * (n - len(texts)) + 16  # candidates per round; repeats are dropped
        ys = torch.randint(years[0], years[1] + 1, (k,), generator=gen).tolist()
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
    src, src_lens = encode_sources(texts)
    return DateData(texts, targets, src, src_lens, encode_targets(targets))


# ---------------------------------------------------------------------------- the model
def _check_source(src: torch.Tensor, src_lens: torch.Tensor) -> None:
    check_rank("src", src, 2, "(B, T)")
    check_rank("src_lens", src_lens, 1, "(B,)")
    check_size("batch size of src_lens (B)", src.shape[0], src_lens.shape[0])
    if src.is_floating_point() or src_lens.is_floating_point():
        raise ValueError("src and src_lens must hold integer ids and lengths")


class Encoder(nn.Module):
    """Embedding + one-layer bidirectional GRU over the source tokens (as in Bahdanau et al.).

    ``forward(src (B, T), src_lens (B,))`` → ``outputs`` (B, T, 2H): for each source token the
    forward and backward GRU states side by side (the keys and values of the attention), zero
    on padded positions; and ``state`` (B, H), the decoder's initial state tanh(W [→h_n; ←h_1]).
    The sequences are packed by ``src_lens``, so padded tokens are never read: changing them
    changes nothing.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, batch_first=True, bidirectional=True)
        self.init_state = nn.Linear(2 * num_hiddens, num_hiddens)

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_source(src, src_lens)
        lens = src_lens.cpu()  # pack_padded_sequence wants the lengths on the CPU
        if lens.numel() and (int(lens.min()) < 1 or int(lens.max()) > src.shape[1]):
            raise ValueError(f"src_lens must lie in [1, T] = [1, {src.shape[1]}], "
                             f"got values from {int(lens.min())} to {int(lens.max())}")
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embedding(src), lens, batch_first=True, enforce_sorted=False)
        outputs, last = self.rnn(packed)  # last: (2, B, H), forward and backward final states
        outputs, _ = nn.utils.rnn.pad_packed_sequence(
            outputs, batch_first=True, total_length=src.shape[1])  # (B, T, 2H)
        state = torch.tanh(self.init_state(torch.cat([last[0], last[1]], dim=-1)))  # (B, H)
        return outputs, state


class AttentionDecoder(nn.Module):
    """GRU decoder that attends over the encoder outputs at every step (Bahdanau attention).

    At step t the query is the previous decoder state s_{t-1} (B, H); keys = values = the
    encoder outputs (B, T, 2H); the additive scorer ``h.AdditiveAttention`` weighs them, and
    ``src_lens`` (B,) masks the padding (the first ``n`` tokens of a row take part, the rest get
    weight exactly 0). The context c_t (B, 2H) is concatenated with the embedding of the input
    token and fed to a GRU cell: s_t = GRU([e(y_{t-1}); c_t], s_{t-1}); the logits come from
    [s_t; c_t].
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.attention = AdditiveAttention(2 * num_hiddens, num_hiddens, num_hiddens)
        self.cell = nn.GRUCell(embed_size + 2 * num_hiddens, num_hiddens)
        self.dense = nn.Linear(3 * num_hiddens, vocab_size)

    def step(self, token: torch.Tensor, state: torch.Tensor, enc_outputs: torch.Tensor,
             src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decoding step: input ids (B,), state (B, H) → logits (B, C), new state (B, H),
        attention weights (B, T) (exactly 0 on padded source tokens)."""
        context = self.attention(state.unsqueeze(1), enc_outputs, enc_outputs, src_lens)  # (B, 1, 2H)
        context = context.squeeze(1)  # (B, 2H)
        state = self.cell(torch.cat([self.embedding(token), context], dim=-1), state)  # (B, H)
        logits = self.dense(torch.cat([state, context], dim=-1))  # (B, C)
        return logits, state, self.attention.attention_weights.squeeze(1)  # (B, T)

    def forward(self, tgt_in: torch.Tensor, state: torch.Tensor, enc_outputs: torch.Tensor,
                src_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing: inputs ``tgt_in`` (B, S) (``<bos>`` then the target shifted right),
        initial state (B, H) → logits (B, S, C) and attention weights (B, S, T)."""
        check_rank("tgt_in", tgt_in, 2, "(B, S)")
        check_rank("state", state, 2, "(B, H)")
        check_rank("enc_outputs", enc_outputs, 3, "(B, T, 2H)")
        check_rank("src_lens", src_lens, 1, "(B,)")
        for name, size in (("state", state.shape[0]), ("enc_outputs", enc_outputs.shape[0]),
                           ("src_lens", src_lens.shape[0])):
            check_size(f"batch size of {name} (B)", tgt_in.shape[0], size)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            out, state, w = self.step(tgt_in[:, t], state, enc_outputs, src_lens)
            logits.append(out)
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)  # (B, S, C), (B, S, T)


class Seq2Seq(nn.Module):
    """Encoder + attention decoder for the date task (vocabularies ``SRC_VOCAB``, ``TGT_VOCAB``).

    ``forward(src (B, T), src_lens (B,), tgt_in (B, S))`` → logits (B, S, C), weights (B, S, T).
    """

    def __init__(self, embed_size: int = 16, num_hiddens: int = 32) -> None:
        super().__init__()
        self.encoder = Encoder(len(SRC_VOCAB), embed_size, num_hiddens)
        self.decoder = AttentionDecoder(len(TGT_VOCAB), embed_size, num_hiddens)

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor,
                tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_source(src, src_lens)
        check_rank("tgt_in", tgt_in, 2, "(B, S)")
        check_size("batch size of tgt_in (B)", src.shape[0], tgt_in.shape[0])
        enc_outputs, state = self.encoder(src, src_lens)  # (B, T, 2H), (B, H)
        return self.decoder(tgt_in, state, enc_outputs, src_lens)


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Decoder inputs for teacher forcing: ``<bos>`` followed by ``tgt`` without its last id."""
    bos = torch.full_like(tgt[:, :1], TGT_VOCAB.stoi[BOS])  # (B, 1)
    return torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, S)


class Adam:
    """Adam (Kingma & Ba, 2015), the same update as ``torch.optim.Adam(params, lr, betas, eps)``.

    Written out because constructing a ``torch.optim`` optimizer imports ``torch._dynamo`` on
    first use, which takes seconds — longer than training this model. ``tests/test_seq2seq.py``
    checks that both give the same parameters step after step.
    """

    def __init__(self, params: Iterable[nn.Parameter], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.t = lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]  # first moments
        self.v = [torch.zeros_like(p) for p in self.params]  # second moments

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        step_size = self.lr / (1 - b1 ** self.t)
        root_correction = (1 - b2 ** self.t) ** 0.5
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m.lerp_(p.grad, 1 - b1)  # m ← β1 m + (1 - β1) g
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)  # v ← β2 v + (1 - β2) g²
            p.addcdiv_(m, (v.sqrt() / root_correction).add_(self.eps), value=-step_size)


def train_seq2seq(
    model: Seq2Seq, data: DateData, *, steps: int = 100, batch_size: int = 128,
    lr: float = 0.02, seed: int = 0, print_every: int | None = 100,
    callback: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Adam (``Adam`` above) with teacher forcing on random batches of ``data``; returns the
    loss of each step.

    Batches come from a generator seeded with ``seed`` and are moved to the model's device.
    The loss is the cross-entropy of every target token (padding ignored). Every
    ``print_every`` steps it prints the mean loss of those steps; ``callback(step, loss)``,
    if given, is called after every step.
    """
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    opt = Adam(model.parameters(), lr=lr)
    model.train()
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        idx = torch.randint(len(data.texts), (batch_size,), generator=gen)
        src, lens, tgt = data.src[idx], data.src_lens[idx], data.tgt[idx]
        width = int(lens.max())
        src, lens, tgt = src[:, :width].to(device), lens.to(device), tgt.to(device)
        logits, _ = model(src, lens, shift_right(tgt))  # (B, S, C)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=TGT_VOCAB.pad)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if callback is not None:
            callback(step, losses[-1])
        if print_every and step % print_every == 0:
            recent = sum(losses[-print_every:]) / len(losses[-print_every:])
            print(f"step {step:4d}/{steps}  loss {recent:.2f}  ({time.perf_counter() - start:.1f} s)")
    model.eval()
    return losses


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: torch.Tensor, src_lens: torch.Tensor,
                  max_steps: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding from ``<bos>``: each step feeds back its own argmax.

    ``src`` (B, T), ``src_lens`` (B,) → ids (B, max_steps) and weights (B, max_steps, T).
    Rows go on past their ``<eos>``; cut them with ``decode_target`` / ``predict``.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be positive, got {max_steps}")
    enc_outputs, state = model.encoder(src, src_lens)  # (B, T, 2H), (B, H)
    token = torch.full((src.shape[0],), TGT_VOCAB.stoi[BOS], dtype=torch.long, device=src.device)
    ids, weights = [], []
    for _ in range(max_steps):
        logits, state, w = model.decoder.step(token, state, enc_outputs, src_lens.to(src.device))
        token = logits.argmax(-1)  # (B,)
        ids.append(token)
        weights.append(w)
    return torch.stack(ids, 1), torch.stack(weights, 1)  # (B, S), (B, S, T)


def predict_many(model: Seq2Seq, texts: Sequence[str], max_steps: int = 12,
                 ) -> list[tuple[list[str], torch.Tensor]]:
    """Greedy predictions for source texts, each ``(tokens, weights)``.

    ``tokens``: the output tokens up to and including ``<eos>`` (if produced within
    ``max_steps``); ``weights`` (len(tokens), T_i): one row per output token over the
    text's own T_i source tokens (``tokenize_source(text)``), on the CPU.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    src, lens = encode_sources(texts, device)
    ids, weights = greedy_decode(model, src, lens, max_steps)
    model.train(was_training)
    out = []
    for b in range(len(texts)):
        tokens = TGT_VOCAB.decode(ids[b])
        steps = tokens.index(EOS) + 1 if EOS in tokens else max_steps
        out.append((tokens[:steps], weights[b, :steps, :int(lens[b])].cpu()))
    return out


def predict(model: Seq2Seq, text: str, max_steps: int = 12) -> tuple[list[str], torch.Tensor]:
    """One source text → output tokens and attention weights (steps × source tokens)."""
    return predict_many(model, [text], max_steps)[0]


def exact_match(model: Seq2Seq, texts: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of texts whose whole greedy output string equals the target."""
    if len(texts) != len(targets):
        raise ValueError(f"{len(texts)} texts but {len(targets)} targets")
    preds = predict_many(model, texts)
    hits = sum(output_text(tokens) == want for (tokens, _), want in zip(preds, targets))
    return hits / len(texts)
