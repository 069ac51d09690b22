"""The toy task of notebooks 06 and 07: at every position, name the previous and the next token.

Legend: B batch (sequences), T sequence length (positions), V vocabulary size, d num_hiddens,
H heads. A sequence is T tokens drawn uniformly from V; the targets of position i are the tokens
at i-1 and i+1, wrapping around at the ends (position 0's previous token is position T-1's).
The model: token embedding (+ position vectors) → one multi-head self-attention layer → a linear
readout of 2·V logits. It sees no mask: every query looks at every key.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .adam import Adam
from .checks import (
    as_usable_device, check_finite_loss, check_generator, check_holds_data, check_int,
    check_positive_int, check_rank, check_real, float32_default,
)
from .device import cpu_threads
from .multihead import MultiHeadAttention
from .positional import PositionalEncoding

__all__ = [
    "SEQ_LEN", "VOCAB_SIZE", "POSITIONS", "EVAL_SEED", "EXAMPLE_SEED", "make_batch",
    "held_out_batch", "example_sequence", "NeighbourModel", "accuracy",
    "blind_ceiling", "Checkpoint", "Run", "train",
]

SEQ_LEN, VOCAB_SIZE = 8, 6
POSITIONS = ("learned", "sinusoidal", None)  # what the model adds to its token embeddings
EVAL_SEED, EXAMPLE_SEED = 10_000, 20_000  # training runs use seeds below EVAL_SEED


def _check_ids(name: str, x: object, rank: int, layout: str) -> None:
    """Raise unless ``x`` is an integer tensor of ``rank`` dims on a device that holds data."""
    check_rank(name, x, rank, layout)
    if x.dtype == torch.bool or x.is_floating_point() or x.is_complex():
        raise ValueError(f"{name} must be an integer tensor {layout} of token ids, got {x.dtype}")
    check_holds_data(name, x)


def _check_range(name: str, x: torch.Tensor, size: int, what: str) -> None:
    """Raise unless every entry of ``x`` lies in [0, size); ``what`` names the bound."""
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= size):
        raise ValueError(f"{name} must be token ids in [0, {what}) = [0, {size}), got values "
                         f"from {int(x.min())} to {int(x.max())}")


def make_batch(
    batch_size: int, *, seq_len: int = SEQ_LEN, vocab_size: int = VOCAB_SIZE,
    generator: torch.Generator | None = None, device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (B, T) and targets (B, T, 2): ``targets[..., 0]`` the previous token,
    ``targets[..., 1]`` the next one (wrapping around). Drawn on the CPU from ``generator``
    (None or a CPU generator: the same numbers on every device), then moved to ``device``."""
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len),
                        ("vocab_size", vocab_size)):
        check_positive_int(name, value)
    check_generator("generator", generator)
    device = as_usable_device("device", device)
    tokens = torch.randint(vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    targets = torch.stack([tokens.roll(1, dims=1), tokens.roll(-1, dims=1)], dim=-1)  # (B, T, 2)
    return tokens.to(device), targets.to(device)


def held_out_batch(
    batch_size: int = 256, *, device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequences every run is scored on: ``make_batch`` from a seed of its own
    (``EVAL_SEED``), never used for training batches (those use seeds below it)."""
    return make_batch(batch_size, generator=torch.Generator().manual_seed(EVAL_SEED),
                      device=device)


def example_sequence(*, device: torch.device | str | None = None) -> torch.Tensor:
    """The one sequence (T,) whose attention weights the checkpoints keep."""
    device = as_usable_device("device", device)
    return make_batch(1, generator=torch.Generator().manual_seed(EXAMPLE_SEED), device=device)[0][0]


class NeighbourModel(nn.Module):
    """Embedding → (+ positions) → self-attention with ``num_heads`` heads → 2·V logits.

    ``positions``: ``"learned"`` adds a trained vector per position (as BERT and GPT-2 do),
    ``"sinusoidal"`` adds the fixed table of ``PositionalEncoding``, ``None`` adds nothing
    (then the model cannot tell positions apart). ``forward(tokens (B, T))`` → logits
    (B, T, 2, V): ``[..., 0, :]`` for the previous token, ``[..., 1, :]`` for the next.
    The attention weights of the last call are in ``attention_weights`` (B, H, T, T).
    """

    def __init__(
        self, num_heads: int = 2, *, positions: str | None = "learned", num_hiddens: int = 16,
        vocab_size: int = VOCAB_SIZE, seq_len: int = SEQ_LEN,
    ) -> None:
        super().__init__()
        if not (positions is None or isinstance(positions, str) and positions in POSITIONS):
            raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
        for name, value in (("num_heads", num_heads), ("num_hiddens", num_hiddens),
                            ("vocab_size", vocab_size), ("seq_len", seq_len)):
            check_positive_int(name, value)
        self.positions, self.vocab_size, self.seq_len = positions, vocab_size, seq_len
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.position_vectors = (nn.Parameter(torch.randn(seq_len, num_hiddens))
                                 if positions == "learned" else None)  # (T, d)
        self.encoding = (PositionalEncoding(num_hiddens, max_len=seq_len)
                         if positions == "sinusoidal" else None)
        self.attention = MultiHeadAttention(num_hiddens, num_heads)
        self.readout = nn.Linear(num_hiddens, 2 * vocab_size)

    @property
    def attention_weights(self) -> torch.Tensor | None:
        """(B, H, T, T) of the last call."""
        return self.attention.attention_weights

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) long, ids in [0, V), on the model's device → logits (B, T, 2, V)."""
        check_rank("tokens", tokens, 2, "(B, T)")
        if tokens.dtype != torch.long or tokens.shape[1] != self.seq_len:
            raise ValueError(f"tokens must be a long tensor (B, {self.seq_len}), got dtype "
                             f"{tokens.dtype} and shape {tuple(tokens.shape)}")
        if tokens.device != self.embedding.weight.device:
            raise ValueError(f"tokens must be on the model's device "
                             f"({self.embedding.weight.device}), got {tokens.device}")
        _check_range("tokens", tokens, self.vocab_size, "vocab_size")
        x = self.embedding(tokens)  # (B, T, d)
        if self.position_vectors is not None:
            x = x + self.position_vectors  # (B, T, d)
        if self.encoding is not None:
            x = self.encoding(x)  # X + P: (B, T, d)
        y = self.attention(x, x, x)  # self-attention: queries = keys = values, (B, T, d)
        B, T = tokens.shape
        return self.readout(y).reshape(B, T, 2, self.vocab_size)  # (B, T, 2, V)


def accuracy(
    model: NeighbourModel, tokens: torch.Tensor, targets: torch.Tensor,
) -> tuple[float, float]:
    """Fraction of positions whose previous / next token the model names (argmax), on
    tokens (B, T) and targets (B, T, 2) integer, on one device, ids in [0, V) where V is the
    size of the model's logits (B, T, 2, V)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _check_ids("tokens", tokens, 2, "(B, T)")
    _check_ids("targets", targets, 3, "(B, T, 2)")
    if targets.shape != (*tokens.shape, 2):
        raise ValueError(f"targets must have shape (B, T, 2) = {(*tokens.shape, 2)}, got "
                         f"{tuple(targets.shape)}")
    if targets.device != tokens.device:
        raise ValueError(f"targets must be on the device of tokens ({tokens.device}), got "
                         f"{targets.device}")
    with torch.no_grad():
        logits = model(tokens)  # (B, T, 2, V)
    _check_range("targets", targets, logits.shape[-1], "V")
    pred = logits.argmax(-1)  # (B, T, 2)
    hits = (pred == targets).double().mean(dim=(0, 1))  # (2,)
    return float(hits[0]), float(hits[1])


def blind_ceiling(tokens: torch.Tensor, vocab_size: int = VOCAB_SIZE) -> float:
    """The best expected accuracy on tokens (B, T) of a model blind to order. Such a model
    knows a position's own token and which tokens the other T-1 positions hold, but not
    where they sit: to it the neighbour is any of those T-1 tokens, equally likely, and its
    best guess is the most common of them. Mean over positions of
    (count of the most common other token) / (T-1). ``tokens`` integer ids in [0, vocab_size)."""
    vocab_size = check_positive_int("vocab_size", vocab_size)
    _check_ids("tokens", tokens, 2, "(B, T)")
    B, T = tokens.shape
    if T < 2 or B < 1:
        raise ValueError(f"tokens must have at least 1 sequence of at least 2 positions (B, T), "
                         f"got shape {(B, T)}")
    _check_range("tokens", tokens, vocab_size, "vocab_size")
    own = F.one_hot(tokens.long(), vocab_size)  # (B, T, V); one_hot takes long ids only
    others = own.sum(1, keepdim=True) - own  # (B, T, V): the bag of the other T-1 tokens
    return float(others.max(-1).values.double().mean() / (T - 1))


@dataclass
class Checkpoint:
    """What training kept at one step: the attention weights (H, T, T) on the example
    sequence and the accuracy (previous, next) on the held-out batch."""

    step: int
    weights: torch.Tensor
    accuracy: tuple[float, float]


@dataclass
class Run:
    """One training run: the trained model, the example sequence (T,) its checkpoints
    look at, the checkpoints (step 0 = before training) and the loss of every step."""

    model: NeighbourModel
    example: torch.Tensor
    checkpoints: list[Checkpoint] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    @property
    def final_accuracy(self) -> tuple[float, float]:
        return self.checkpoints[-1].accuracy


def train(
    num_heads: int = 2, *, positions: str | None = "learned", steps: int = 200, every: int = 5,
    seed: int = 0, batch_size: int = 64, lr: float = 0.02, num_hiddens: int = 16,
    eval_size: int = 256, device: torch.device | str | None = None, num_threads: int | None = 1,
) -> Run:
    """Train a ``NeighbourModel`` with Adam on fresh batches, seeded by ``seed``; every
    ``every`` steps (and at step 0 and the last) keep a ``Checkpoint``: the weights on one
    example sequence and the accuracy on ``eval_size`` held-out sequences.

    ``num_threads``: the CPU threads for the run (tensors this small train fastest on one);
    the previous count is restored afterwards, even on an error. None: leave it alone.
    The model comes back in eval mode. Every setting is checked before training; the model is
    float32 whatever ``torch.get_default_dtype()`` is (never float16 / bfloat16: the run is the
    one the float32 default gives). A loss that turns NaN or ±inf raises a ValueError naming
    the step (lower ``lr``), and so do non-finite weights after the last step: never NaN losses
    returned silently.
    """
    for name, value in (("steps", steps), ("every", every), ("batch_size", batch_size),
                        ("eval_size", eval_size)):
        check_positive_int(name, value)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not 0 <= seed < EVAL_SEED:
        raise ValueError(f"seed must be an int in 0 … {EVAL_SEED - 1} (the held-out sequences "
                         f"use seed {EVAL_SEED}), got {seed!r}")
    seed = int(seed)
    lr = check_real("lr", lr, above=0.0)
    device = as_usable_device("device", device)
    if num_threads is not None:
        check_positive_int("num_threads", num_threads)
    # the initial weights: from seed, in float32 whatever the default dtype (the global
    # generator and the default dtype are left as they were)
    with torch.random.fork_rng(devices=[]), float32_default():
        torch.manual_seed(seed)
        model = NeighbourModel(num_heads, positions=positions, num_hiddens=num_hiddens)
    model = model.to(device)
    gen = torch.Generator().manual_seed(seed)  # the training batches
    held_out = held_out_batch(eval_size, device=device)  # the same for every run
    example = example_sequence(device=device)[None]  # (1, T)
    opt = Adam(model.parameters(), lr=lr)
    run = Run(model, example[0].cpu())

    def checkpoint(step: int) -> None:
        model.eval()
        with torch.no_grad():
            model(example)
        weights = model.attention_weights[0].detach().cpu()  # (H, T, T)
        run.checkpoints.append(Checkpoint(step, weights, accuracy(model, *held_out)))
        model.train()

    with cpu_threads(num_threads):
        checkpoint(0)
        for step in range(1, steps + 1):
            tokens, targets = make_batch(batch_size, generator=gen, device=device)
            logits = model(tokens)  # (B, T, 2, V)
            loss = F.cross_entropy(logits.reshape(-1, model.vocab_size), targets.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.losses.append(check_finite_loss(loss.item(), step, lr,
                                                model if step == steps else None))
            if step % every == 0 or step == steps:
                checkpoint(step)
    model.eval()
    return run
