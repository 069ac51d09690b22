"""Induction heads（归纳头）on a toy copy task: the data, training with checkpoints, head metrics.

Legend: B batch, T tokens, V vocabulary size, L layers, H heads, C checkpoints, E examples,
N model width. Layers and heads are numbered from 1 where a function takes them as arguments.
A sequence is a random prefix, a segment of random tokens, then the same segment again; the
segment's length (the copy distance) varies from sequence to sequence, so no fixed look-back
offset predicts the copy: a model has to find the previous occurrence of the current token and
read the token after it. Attention weights are laid out (..., Q, K) with Q = K = T (self-attention);
``predictable`` (B, T) is True where the *next* token is determined by the sequence so far.
"""

from __future__ import annotations

import numbers
import string
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .adam import Adam
from .checks import (
    check_finite_loss, check_floating, check_generator, check_holds_data, check_int,
    check_positive_int, check_rank, check_real, check_seed, check_size, check_trainable,
    float32_default,
)
from .device import cpu_threads
from .transformer import DecoderLM

__all__ = [
    "CopyTask", "CopyBatch", "TrainingRun", "make_model", "copy_loss", "copy_accuracy",
    "induction_targets", "offset_targets", "mean_weight_on", "previous_token_score",
    "induction_score", "offset_profile", "composition_scores",
    "train_with_checkpoints", "token_labels",
]

LETTERS = string.ascii_uppercase


def _check_ids(name: str, x: object, rank: int, layout: str, *, long: bool = False) -> None:
    """Raise unless ``x`` is an integer tensor (a long one with ``long``) of ``rank`` dims, on
    a device that holds data."""
    check_rank(name, x, rank, layout)
    if (long and x.dtype != torch.long) or x.dtype == torch.bool or x.is_floating_point() \
            or x.is_complex():
        kind = "a long" if long else "an integer"
        raise ValueError(f"{name} must be {kind} tensor {layout} of token positions or ids, "
                         f"got {x.dtype}")
    check_holds_data(name, x)


def _check_batch(batch: object) -> None:
    if not isinstance(batch, CopyBatch):
        raise ValueError(f"batch must be a CopyBatch, got {type(batch).__name__}")


@dataclass(frozen=True)
class CopyBatch:
    """``tokens`` (B, T) long and ``period`` (B,) long, the copy distance of each sequence: the
    segment occupies positions T − 2·period … T − period − 1 and is repeated from T − period
    on. Checked: both on one device, B ≥ 1, tokens ≥ 0, every period in [2, T/2] (that the
    tokens do repeat is not)."""

    tokens: torch.Tensor
    period: torch.Tensor

    def __post_init__(self) -> None:
        _check_ids("tokens", self.tokens, 2, "(B, T)", long=True)
        _check_ids("period", self.period, 1, "(B,)", long=True)
        B, T = self.tokens.shape
        if B == 0:
            raise ValueError(f"tokens must hold at least one sequence (B, T), got shape {(B, T)}")
        check_size("length of period (one per sequence, B)", B, len(self.period))
        if self.period.device != self.tokens.device:
            raise ValueError(f"period must be on the device of tokens ({self.tokens.device}), "
                             f"got {self.period.device}")
        if int(self.tokens.min()) < 0:
            raise ValueError(f"tokens must be token ids >= 0, got a minimum of "
                             f"{int(self.tokens.min())}")
        low, high = int(self.period.min()), int(self.period.max())
        if low < 2 or 2 * high > T:
            raise ValueError(f"period must lie in [2, T/2] = [2, {T // 2}] (a segment and its copy "
                             f"in T = {T} tokens), got values from {low} to {high}")

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, index: int | slice | torch.Tensor | list[int]) -> CopyBatch:
        """The sequences ``index`` picks, as a CopyBatch: one integer (a Python or NumPy int, or
        a 0-d integer tensor; negative counts from the end) gives a batch of one (1, T); a slice,
        a list or a tensor of positions, or a boolean mask (B,), several. A bool or a float is
        refused (ValueError); a position out of range raises IndexError (so iteration stops)."""
        given = index
        if isinstance(index, (torch.Tensor, np.ndarray)) and index.ndim == 0:
            index = index.item()  # a 0-d tensor or array: the number it holds
        if isinstance(index, (bool, np.bool_)) or (isinstance(index, numbers.Number)
                                                   and not isinstance(index, numbers.Integral)):
            raise ValueError(f"index must be an int, a slice, or a list or tensor of positions "
                             f"(or a boolean mask (B,)), got {given!r}")
        if isinstance(index, numbers.Integral):  # int, np.int64, ...: all alike
            index = [int(index)]
        return CopyBatch(self.tokens[index], self.period[index])

    @property
    def copy_start(self) -> torch.Tensor:
        """(B,) the position where the repeated segment starts, T − period."""
        return self.tokens.shape[1] - self.period

    @property
    def predictable(self) -> torch.Tensor:
        """(B, T) bool: True at positions t whose next token t + 1 is a copy of an earlier one
        (t from the copy start to T − 2). The copy's first token itself is not predictable."""
        t = torch.arange(self.tokens.shape[1], device=self.tokens.device)  # (T,)
        return (t >= self.copy_start[:, None]) & (t < self.tokens.shape[1] - 1)  # (B, T)


@dataclass(frozen=True)
class CopyTask:
    """Sequences of ``seq_len`` tokens from ``vocab_size``: a random prefix, a segment of
    ``period`` tokens (drawn per sequence from ``min_period`` … ``max_period``), the segment
    again. All tokens before the copy are distinct, so every token of the copy has exactly one
    earlier occurrence."""

    vocab_size: int = 16
    seq_len: int = 16
    min_period: int = 4
    max_period: int = 7

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "min_period", "max_period"):  # stored as ints
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        if not 2 <= self.min_period <= self.max_period:
            raise ValueError(f"periods must satisfy 2 ≤ min_period ≤ max_period, got "
                             f"min_period={self.min_period}, max_period={self.max_period}")
        if 2 * self.max_period > self.seq_len:
            raise ValueError(f"2·max_period must be at most seq_len={self.seq_len}, got "
                             f"2·{self.max_period} = {2 * self.max_period}")
        if self.vocab_size < self.seq_len - self.min_period:
            raise ValueError(f"vocab_size must be at least seq_len − min_period = "
                             f"{self.seq_len - self.min_period} (distinct tokens before the copy), "
                             f"got {self.vocab_size}")

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> CopyBatch:
        """``batch_size`` sequences drawn with ``generator`` (None or a CPU generator)."""
        check_positive_int("batch_size", batch_size)
        check_generator("generator", generator)
        T = self.seq_len
        period = torch.randint(self.min_period, self.max_period + 1, (batch_size,),
                               generator=generator)  # (B,)
        noise = torch.rand(batch_size, self.vocab_size, generator=generator,
                           dtype=torch.float32)  # (B, V): the same draws under any default dtype
        distinct = noise.argsort(-1)  # (B, V): each row a random order of the vocabulary
        t = torch.arange(T)  # (T,)
        in_copy = t >= (T - period)[:, None]  # (B, T)
        source = t - period[:, None] * in_copy  # (B, T): position t of the copy reads t − period
        return CopyBatch(distinct.gather(1, source), period)  # tokens (B, T)


def token_labels(tokens: torch.Tensor) -> list[str]:
    """Letters for a (T,) sequence of token ids ≥ 0 (0 → "A", ...; ids past Z as numbers)."""
    _check_ids("tokens", tokens, 1, "(T,)")
    if tokens.numel() and int(tokens.min()) < 0:
        raise ValueError(f"tokens must be token ids >= 0, got a minimum of {int(tokens.min())}")
    return [LETTERS[i] if i < len(LETTERS) else str(i) for i in tokens.tolist()]


def make_model(task: CopyTask, *, num_hiddens: int = 64, num_heads: int = 2, num_layers: int = 2,
               ffn_hiddens: int = 64, seed: int = 0) -> DecoderLM:
    """A ``DecoderLM`` sized for ``task`` (sinusoidal positions), its weights drawn from ``seed``
    without touching the global random state."""
    if not isinstance(task, CopyTask):
        raise ValueError(f"task must be a CopyTask, got {type(task).__name__}")
    seed = check_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DecoderLM(task.vocab_size, num_hiddens, num_heads, num_layers, ffn_hiddens,
                         max_len=task.seq_len)


def _scored(logits: torch.Tensor, batch: CopyBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits at the predictable positions and the tokens they must name: (P, V), (P,)."""
    _check_batch(batch)
    check_rank("logits", logits, 3, "(B, T, V)")
    check_floating("logits", logits)
    check_holds_data("logits", logits)
    if logits.shape[:2] != batch.tokens.shape:
        raise ValueError(f"logits must have shape (B, T, V) with (B, T) = "
                         f"{tuple(batch.tokens.shape)}, got {tuple(logits.shape)}")
    largest = int(batch.tokens.max())
    if logits.shape[-1] <= largest:
        raise ValueError(f"logits must score every token of batch: a vocabulary of more than "
                         f"{largest} (its largest token), got V = {logits.shape[-1]}")
    keep = batch.predictable.to(logits.device)  # (B, T)
    nxt = batch.tokens.roll(-1, dims=1).to(logits.device)  # (B, T): the token at t + 1
    return logits[keep], nxt[keep]


def copy_loss(logits: torch.Tensor, batch: CopyBatch) -> torch.Tensor:
    """Cross-entropy of the next token, averaged over the predictable positions only:
    ``logits`` (B, T, V) at position t score the token at t + 1."""
    return F.cross_entropy(*_scored(logits, batch))


def copy_accuracy(logits: torch.Tensor, batch: CopyBatch) -> float:
    """Fraction of predictable positions whose most likely next token is the right one."""
    scored, nxt = _scored(logits, batch)
    return (scored.argmax(-1) == nxt).float().mean().item()


def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    """(B, T) long: for query i, the key right after the latest earlier occurrence of
    ``tokens[b, i]`` (j + 1 for the largest j < i with the same token), or −1 if there is none.
    An induction head attends there: it finds where the current token was before and reads
    what came next."""
    _check_ids("tokens", tokens, 2, "(B, T)")
    T = tokens.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)  # (Q, K): j < i
    same = (tokens[:, :, None] == tokens[:, None, :]) & earlier  # (B, Q, K)
    j = torch.where(same, torch.arange(T, device=tokens.device), -1).amax(-1)  # (B, Q)
    return torch.where(j >= 0, j + 1, -1)


def offset_targets(batch: CopyBatch, offset: int = 1) -> torch.Tensor:
    """(B, T) long: key i − ``offset`` for every query i before the copy starts (from
    ``offset`` to copy_start − 1), −1 elsewhere. With offset 1 these are the cells a
    previous-token head attends to, at the positions that later queries look up (inside the
    copy nothing looks back at them, and a model need not care what happens there).
    ``offset`` in [0, T)."""
    _check_batch(batch)
    offset = check_int("offset", offset, 0)
    T = batch.tokens.shape[1]
    if offset >= T:
        raise ValueError(f"offset must be below the sequence length T = {T}, got {offset}")
    i = torch.arange(T, device=batch.tokens.device)  # (T,)
    keep = (i >= offset) & (i < batch.copy_start.to(i.device)[:, None])  # (B, T)
    return torch.where(keep, i - offset, -1)


def mean_weight_on(weights: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Mean of ``weights[b, ..., i, keys[b, i]]`` over every (sequence b, query i) with
    ``keys[b, i] ≥ 0``: ``weights`` (B, ..., T, T) floating and ``keys`` (B, T) integer, each
    entry a key position in [0, T) or −1 (no key) → (...), one number per layer and head.
    Raises ValueError when no query has a key."""
    _check_ids("keys", keys, 2, "(B, T)")
    B, T = keys.shape
    if not isinstance(weights, torch.Tensor) or weights.dim() < 3 or weights.shape[0] != B \
            or weights.shape[-2:] != (T, T):
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must have shape (B, ..., T, T) = ({B}, ..., {T}, {T}), "
                         f"got {got}")
    check_floating("weights", weights)
    check_holds_data("weights", weights)
    if keys.numel() and (int(keys.min()) < -1 or int(keys.max()) >= T):
        raise ValueError(f"keys must hold key positions in [0, T) = [0, {T}) or -1 (no key), "
                         f"got values from {int(keys.min())} to {int(keys.max())}")
    keys = keys.to(weights.device)
    b, i = (keys >= 0).nonzero(as_tuple=True)  # the (sequence, query) pairs that count
    if not len(b):
        raise ValueError("keys must hold at least one key position >= 0 (a query to score), "
                         "got -1 everywhere")
    return weights.movedim(0, -3)[..., b, i, keys[b, i]].mean(-1)  # (..., n) → (...)


def previous_token_score(weights: torch.Tensor, batch: CopyBatch) -> torch.Tensor:
    """Mean weight on the previous token (``offset_targets(batch, 1)``), queries before the
    copy: (B, ..., T, T) → (...). 1 for a perfect previous-token head."""
    return mean_weight_on(weights, offset_targets(batch, 1))


def offset_profile(weights: torch.Tensor, batch: CopyBatch, max_offset: int = 3) -> torch.Tensor:
    """Mean weight on key i − k, k = 0 … ``max_offset``, for the queries before the copy:
    (B, ..., T, T) → (..., max_offset + 1). Entry 1 is ``previous_token_score``. Every offset
    needs a query: ``max_offset`` below the latest copy start."""
    _check_batch(batch)
    max_offset = check_int("max_offset", max_offset, 0)
    latest = int(batch.copy_start.max())
    if max_offset >= latest:
        raise ValueError(f"max_offset must be below the latest copy start {latest} (each offset "
                         f"needs a query before the copy), got {max_offset}")
    return torch.stack([mean_weight_on(weights, offset_targets(batch, k))
                        for k in range(max_offset + 1)], dim=-1)


def induction_score(weights: torch.Tensor, tokens: torch.Tensor,
                    queries: torch.Tensor | None = None) -> torch.Tensor:
    """Mean weight on the induction target (``induction_targets``), over every query whose
    token occurred before (and, given ``queries`` (B, T) bool, that is True there):
    (B, ..., T, T) with ``tokens`` (B, T) → (...). 1 for a perfect induction head."""
    targets = induction_targets(tokens)  # (B, T)
    if queries is not None:
        if not isinstance(queries, torch.Tensor) or queries.dtype != torch.bool \
                or queries.shape != tokens.shape:
            got = (f"{queries.dtype} {tuple(queries.shape)}" if isinstance(queries, torch.Tensor)
                   else type(queries).__name__)
            raise ValueError(f"queries must be a boolean tensor of shape (B, T) = "
                             f"{tuple(tokens.shape)}, got {got}")
        check_holds_data("queries", queries)
        targets = torch.where(queries.to(targets.device), targets, -1)
    if not bool((targets >= 0).any()):
        raise ValueError("tokens must repeat a token (at a query that counts) so that some query "
                         "has an induction target, got none")
    return mean_weight_on(weights, targets)


_KINDS = ("q", "k", "v")  # composition_scores: queries, keys, values


def _folded(weight: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """``weight`` (rows, N) reading through the LayerNorm ``norm``, with the norm's linear part
    folded in: W diag(γ) P, P = I − 11ᵀ/N the centring (each row's mean taken out)."""
    W = weight * norm.weight  # (rows, N)
    return W - W.mean(-1, keepdim=True)


def _circuits(model: DecoderLM, layer: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s (from 1) QK and OV circuits, (H, N, N) each: a query vector x scores a
    key vector y as xᵀ W_QK y; W_OV z is what a head writes for a vector z it reads."""
    block = model.blocks[layer - 1]
    att = block.attention
    H = att.num_heads
    d_h = att.W_q.out_features // H
    q, k, v = (_folded(lin.weight.to(dtype), block.norm1).reshape(H, d_h, -1)  # (H, d_h, N)
               for lin in (att.W_q, att.W_k, att.W_v))
    o = att.W_o.weight.to(dtype).reshape(-1, H, d_h).transpose(0, 1)  # (H, N, d_h)
    return q.transpose(-2, -1) @ k / d_h**0.5, o @ v  # (H, N, N) each


def composition_scores(model: DecoderLM, kind: str = "k", sender: int = 1,
                       receiver: int = 2) -> torch.Tensor:
    """How much each head of layer ``sender`` writes into what each head of layer ``receiver``
    reads (Elhage et al., 2021), from the weights alone → (H, H), entry [i, j] for sender head
    i + 1 and receiver head j + 1 (layers numbered from 1, ``sender < receiver``).

    With W_QK = W_qᵀ W_k / √d_h (N, N), laid out (query, key), and W_OV = W_o W_v (N, N) per
    head, the score is ‖A B‖_F / (‖A‖_F ‖B‖_F) with B = W_OV of the sender head and A, by
    ``kind``: "k" W_QK of the receiver (the sender's output enters its keys), "q" W_QKᵀ (its
    queries), "v" W_OV (its values). Each block's first LayerNorm is folded into the weights
    that read through it as its linear part, γ and the centring (W → W diag(γ)(I − 11ᵀ/N));
    its 1/σ (a positive number per token) and every bias are left out. A head whose matrix
    is 0 scores 0. Computed in the parameters' dtype, at least float32; a "rope" model is
    refused (its scores depend on the positions, not on W_QK alone). An "alibi" or "t5" model
    adds a bias of the distance alone to its scores, the same whatever the content: the scores
    here measure the content part, W_QK, as for the others.
    """
    if not isinstance(model, DecoderLM):
        raise ValueError(f"model must be a DecoderLM, got {type(model).__name__}")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    if model.positional == "rope":
        raise ValueError("model must have position-free queries and keys (any positional but "
                         "'rope'), got positional='rope'")
    L = len(model.blocks)
    sender = check_int("sender", sender, 1)
    receiver = check_int("receiver", receiver, 1)
    if receiver > L:
        raise ValueError(f"receiver must be a layer of the model, 1 … {L}, got {receiver}")
    if sender >= receiver:
        raise ValueError(f"sender must be a layer before receiver={receiver}, got {sender}")
    weight = model.blocks[0].attention.W_q.weight
    check_holds_data("model's parameters", weight)
    dtype = torch.promote_types(weight.dtype, torch.float32)
    with torch.no_grad():
        qk, ov = _circuits(model, receiver, dtype)
        A = {"k": qk, "q": qk.transpose(-2, -1), "v": ov}[kind][None]  # (1, H, N, N): receivers
        B = _circuits(model, sender, dtype)[1][:, None]  # (H, 1, N, N): senders
        norm = torch.linalg.matrix_norm
        den = norm(A) * norm(B)  # (H, H)
        return torch.where(den > 0, norm(A @ B) / den.where(den > 0, 1.0), 0.0)


@dataclass
class TrainingRun:
    """What ``train_with_checkpoints`` recorded. Checkpoint c is taken *before* training step
    ``steps[c]`` (so ``steps[0] = 0`` is the untrained model, the last one the trained model).

    ``train_loss`` (S,): the loss of each training step. ``eval_loss``, ``eval_accuracy`` (C,):
    on a fixed evaluation batch ``eval_batch``. ``previous_token``, ``induction`` (C, L, H): the
    two head scores on that batch (``previous_token_score``; ``induction_score`` over the
    queries the loss scores, ``eval_batch.predictable``: the last query predicts nothing).
    ``examples``: E sequences of it (one per copy distance, shortest first) and ``weights``
    (C, E, L, H, T, T) their attention maps at every checkpoint."""

    task: CopyTask
    model: DecoderLM
    steps: list[int]
    train_loss: torch.Tensor
    eval_loss: torch.Tensor
    eval_accuracy: torch.Tensor
    previous_token: torch.Tensor
    induction: torch.Tensor
    eval_batch: CopyBatch
    examples: CopyBatch
    weights: torch.Tensor


def _one_per_period(batch: CopyBatch) -> list[int]:
    """Indices of the first sequence of each copy distance present, shortest distance first."""
    found = {}
    for i, p in enumerate(batch.period.tolist()):
        found.setdefault(p, i)
    return [found[p] for p in sorted(found)]


def train_with_checkpoints(
    task: CopyTask | None = None, model: DecoderLM | None = None, *, steps: int = 200,
    every: int = 10, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
    eval_size: int = 128, threads: int | None = 1,
) -> TrainingRun:
    """Train ``model`` (default ``make_model(task, seed=seed)``) on ``task`` with Adam for
    ``steps`` steps of ``batch_size`` fresh sequences, minimising ``copy_loss``, on the CPU.

    Every ``every`` steps, and after the last, it records the loss, the accuracy and the head
    scores on a fixed batch of ``eval_size`` sequences, and the attention weights of one
    example per copy distance (small: C·E·L·H·T² numbers), so that a view can show any
    checkpoint without running the model. ``threads``: torch's CPU threads while training
    (restored afterwards; None leaves them alone) — one is fastest for tensors this small.
    The global random state is not touched: data come from generators seeded by ``seed``.

    Every setting is checked first. A model in float16 or bfloat16 is refused (a ValueError:
    train in float32 and cast afterwards; in half precision Adam's updates round away and the
    loss turns NaN); the default model is built in float32 whatever ``torch.get_default_dtype()``
    is, so the run is the one the float32 default gives, and the recorded losses and accuracies
    are float32. A loss that turns NaN or ±inf raises a ValueError naming the step, and so
    do non-finite weights after the last step: never a run of NaN recorded silently.
    """
    if task is not None and not isinstance(task, CopyTask):
        raise ValueError(f"task must be a CopyTask or None, got {type(task).__name__}")
    if model is not None and not isinstance(model, DecoderLM):
        raise ValueError(f"model must be a DecoderLM or None, got {type(model).__name__}")
    task = CopyTask() if task is None else task
    steps, every, batch_size, eval_size = (check_positive_int(name, value) for name, value in (
        ("steps", steps), ("every", every), ("batch_size", batch_size), ("eval_size", eval_size)))
    lr = check_real("lr", lr, above=0.0)
    seed = check_seed(seed)
    if threads is not None:
        check_positive_int("threads", threads)
    if model is not None:
        check_trainable("model", model)
    if model is None:
        with float32_default():  # float32 whatever the default dtype (restored afterwards)
            model = make_model(task, seed=seed)
    check_size("model vocab_size (the task's)", task.vocab_size, model.vocab_size)
    if model.max_len < task.seq_len:
        raise ValueError(f"model max_len must be at least seq_len={task.seq_len}, "
                         f"got {model.max_len}")
    model = model.cpu()
    data = torch.Generator().manual_seed(seed)
    eval_batch = task.sample(eval_size, torch.Generator().manual_seed((seed + 1) % 2**64))
    scored = eval_batch.predictable  # (B, T): the queries whose next token the loss scores
    shown = _one_per_period(eval_batch)  # the examples: indices into eval_batch
    examples = eval_batch[shown]
    optimizer = Adam(model.parameters(), lr=lr)
    train_loss, checkpoints, records = [], [], []

    def record(step: int) -> None:
        model.eval()
        with torch.no_grad():
            logits = model(eval_batch.tokens)  # (B, T, V); attention_weights: L × (B, H, T, T)
            weights = torch.stack(model.attention_weights, dim=1)  # (B, L, H, T, T)
        records.append((copy_loss(logits, eval_batch).item(), copy_accuracy(logits, eval_batch),
                        previous_token_score(weights, eval_batch),  # (L, H)
                        induction_score(weights, eval_batch.tokens, scored),  # (L, H)
                        weights[shown].clone()))  # (E, L, H, T, T)
        checkpoints.append(step)
        model.train()

    with cpu_threads(threads):
        for step in range(steps):
            if step % every == 0:
                record(step)
            batch = task.sample(batch_size, data)
            loss = copy_loss(model(batch.tokens, need_weights=False), batch)  # fused attention
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_loss.append(check_finite_loss(loss.item(), step + 1, lr,
                                                model if step + 1 == steps else None))
        record(steps)
    model.eval()
    losses, accs, prev, ind, ex = zip(*records)
    return TrainingRun(
        task=task, model=model, steps=checkpoints,
        train_loss=torch.tensor(train_loss, dtype=torch.float32),  # (not the default dtype)
        eval_loss=torch.tensor(losses, dtype=torch.float32),
        eval_accuracy=torch.tensor(accs, dtype=torch.float32),
        previous_token=torch.stack(prev), induction=torch.stack(ind), eval_batch=eval_batch,
        examples=examples, weights=torch.stack(ex),
    )
