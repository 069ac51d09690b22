"""A task that needs relative position (相对位置): at every position, name the token ``offset``
places back. Notebook 10 trains small ``DecoderLM``s on it, at a fixed budget, and measures
length extrapolation (外推): the accuracy at each position of sequences longer than in training.

Legend: B batch, T sequence length, V vocabulary size.
Targets hold ``IGNORE`` (-100, ``cross_entropy``'s ignore_index) at the first ``offset``
positions, which have no token ``offset`` places back.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    as_usable_device, check_finite_loss, check_generator, check_holds_data, check_positive_int,
    check_real, check_seed, check_trainable,
)
from .adam import Adam
from .device import cpu_threads

__all__ = ["IGNORE", "make_batch", "train", "accuracy_by_position"]

IGNORE = -100


def make_batch(
    batch_size: int, length: int, *, vocab_size: int = 10, offset: int = 3,
    generator: torch.Generator | None = None, device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` sequences of ``length`` tokens drawn uniformly from ``range(vocab_size)``
    (with ``generator``, on the CPU, then moved to ``device``), and their targets:
    ``targets[:, t] = tokens[:, t - offset]`` for t ≥ offset, ``IGNORE`` before.
    Returns (tokens (B, T), targets (B, T)), both long. ``generator``: None or a CPU generator;
    ``device``: None (the CPU) or a device present here."""
    batch_size = check_positive_int("batch_size", batch_size)
    length = check_positive_int("length", length)
    vocab_size = check_positive_int("vocab_size", vocab_size)
    offset = check_positive_int("offset", offset)
    if offset >= length:
        raise ValueError(f"offset must be below the length (a target needs a token offset places "
                         f"back), got offset={offset}, length={length}")
    generator = check_generator("generator", generator)
    device = as_usable_device("device", device)
    tokens = torch.randint(0, vocab_size, (batch_size, length), generator=generator)  # (B, T)
    targets = torch.full_like(tokens, IGNORE)
    targets[:, offset:] = tokens[:, :-offset]  # position t answers with the token at t - offset
    return tokens.to(device), targets.to(device)


def _vocab_size(model: nn.Module) -> int:
    size = getattr(model, "vocab_size", None)
    if not isinstance(model, nn.Module) or not isinstance(size, int):
        raise ValueError(f"model must have an int vocab_size (a DecoderLM module), got "
                         f"{type(model).__name__} with vocab_size={size!r}")
    return size


def _device(model: nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (raise unless it has one that holds data)."""
    param = next(model.parameters(), None)
    if param is None:
        raise ValueError("model must have parameters (its device is theirs), got none")
    check_holds_data("model's parameters", param)
    return param.device


def train(
    model: nn.Module, *, steps: int = 120, batch_size: int = 32, length: int = 16,
    lr: float = 1e-2, offset: int = 3, seed: int = 0,
) -> list[float]:
    """Train ``model`` (a ``DecoderLM``: tokens (B, T) → logits (B, T, V)) in place with Adam for
    exactly ``steps`` steps of ``batch_size`` fresh sequences of ``length`` tokens (batches drawn
    from a generator seeded with ``seed``); the loss is the cross-entropy over the positions that
    have a target. Returns the loss of every step. On the CPU it runs on one thread (small
    tensors train faster so) and restores the previous thread count. The model is left in eval
    mode.

    Adam is written out (``helpers.adam``, betas 0.9 and 0.999, eps 1e-8, no weight decay): on
    the CPU it gives ``torch.optim.Adam``'s numbers exactly, without the second or more that the
    first ``torch.optim.Adam`` of a session spends importing ``torch._dynamo``.

    Every setting is checked before the model is touched. A model in float16 or bfloat16 is
    refused (a ValueError: train in float32 and cast afterwards; in half precision Adam's
    updates round away and the loss overflows to NaN within a step or two). A loss that turns
    NaN or ±inf raises a ValueError naming the step (the model is left as that step found it),
    and so do non-finite weights after the last step: never NaN losses returned silently."""
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    length = check_positive_int("length", length)
    lr = check_real("lr", lr, above=0.0)
    offset = check_positive_int("offset", offset)
    if offset >= length:
        raise ValueError(f"offset must be below the length (a target needs a token offset places "
                         f"back), got offset={offset}, length={length}")
    seed = check_seed(seed)
    vocab_size = _vocab_size(model)
    check_trainable("model", model)
    device = _device(model)
    generator = torch.Generator().manual_seed(seed)

    def loss_at(step: int) -> torch.Tensor:
        tokens, targets = make_batch(batch_size, length, vocab_size=vocab_size, offset=offset,
                                     generator=generator, device=device)  # (B, T) each
        logits = model(tokens, need_weights=False)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)

    return _adam_loop(model, steps, lr, loss_at)


def _adam_loop(model: nn.Module, steps: int, lr: float,
              loss_at: Callable[[int], torch.Tensor]) -> list[float]:
    """``steps`` steps of ``helpers.adam.Adam`` on every trainable parameter of ``model``
    (checked by the caller), the loss of step t (1 … steps) being ``loss_at(t)``; returns every
    step's loss. The model trains in train mode and is left in eval mode; on the CPU the loop
    runs on one thread and restores the thread count; a NaN or ±inf loss, or non-finite weights
    after the last step, raise a ValueError naming the step. Shared by ``train``,
    ``recall.train`` and ``streaming.train``."""
    device = _device(model)
    optimizer = Adam(model.parameters(), lr=lr)
    losses = []
    try:
        model.train()
        with cpu_threads(1 if device.type == "cpu" else None):
            for step in range(1, steps + 1):
                loss = loss_at(step)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(check_finite_loss(loss.item(), step, lr,
                                                model if step == steps else None))
    finally:
        model.eval()
    return losses


@torch.no_grad()
def accuracy_by_position(
    model: nn.Module, length: int, *, num_sequences: int = 256, offset: int = 3, seed: int = 1,
) -> torch.Tensor:
    """The fraction of ``num_sequences`` fresh sequences of ``length`` tokens (drawn with
    ``seed``) whose token ``offset`` places back the model names correctly (argmax of its
    logits), at each position t = offset … length − 1: a float64 tensor (length − offset,) on
    the CPU. For a causal model the prediction at t sees only tokens 0 … t, so the mean of the
    first L − offset entries is the accuracy on sequences of length L. On the CPU it runs on one
    thread, like ``train``."""
    check_positive_int("num_sequences", num_sequences)
    tokens, targets = make_batch(num_sequences, length, vocab_size=_vocab_size(model),
                                 offset=offset, generator=torch.Generator().manual_seed(
                                     check_seed(seed)),
                                 device=_device(model))
    was_training = model.training
    model.eval()
    try:
        with cpu_threads(1 if tokens.device.type == "cpu" else None):  # as in train
            predictions = model(tokens, need_weights=False).argmax(dim=-1)  # (B, T)
    finally:
        model.train(was_training)
    correct = (predictions == targets)[:, offset:]  # (B, T - offset)
    return correct.double().mean(dim=0).cpu()
