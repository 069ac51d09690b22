"""Adam (Kingma & Ba 2015) written out: the trainers' optimiser.

It gives ``torch.optim.Adam``'s numbers bit for bit on the CPU (its default single-tensor path:
the same operations in the same order; the tests compare weights and losses with
``torch.equal``). Why not ``torch.optim.Adam`` itself: the first ``torch.optim`` optimiser of a
Python session imports ``torch._dynamo``, 1.7 s on a 2-core machine, which is more than some of
the series' trainings take. The update runs on lists of tensors (``torch._foreach_*``): one
Python call per operation for all the parameters, not one per parameter.

Internal (the trainers of ``induction``, ``toy``, ``seq2seq``, ``relative_task``, ``recall`` and
``streaming`` use it). Notebooks 02 and 08 train by hand with it too, and say why in a note.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

__all__: list[str] = []  # internal: nothing here is part of the helpers' public API

BETAS, EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults


@torch.no_grad()
def adam_step(params: list[nn.Parameter], moments: list[tuple[torch.Tensor, torch.Tensor]],
              step: int, lr: float) -> None:
    """One Adam step on every parameter that has a gradient, in place, with the operations of
    ``torch.optim.Adam``'s single-tensor path (so the same numbers). ``moments``: (m, v) per
    parameter, zeros before step 1; ``step``: 1 at the first step. A parameter without a
    gradient is left alone, as ``torch.optim.Adam`` does."""
    live = [(p, m, v) for p, (m, v) in zip(params, moments) if p.grad is not None]
    if not live:
        return
    ps, ms, vs = (list(column) for column in zip(*live))
    grads = [p.grad for p in ps]
    b1, b2 = BETAS
    step_size = lr / (1 - b1**step)  # lr over the bias correction of m
    root = (1 - b2**step) ** 0.5  # √ of the bias correction of v
    torch._foreach_lerp_(ms, grads, 1 - b1)  # m ← β1·m + (1 − β1)·g
    torch._foreach_mul_(vs, b2)
    torch._foreach_addcmul_(vs, grads, grads, value=1 - b2)  # v ← β2·v + (1 − β2)·g²
    denoms = torch._foreach_sqrt(vs)
    torch._foreach_div_(denoms, root)
    torch._foreach_add_(denoms, EPS)  # √v̂ + ε
    torch._foreach_addcdiv_(ps, ms, denoms, value=-step_size)  # p ← p − lr·m̂/(√v̂ + ε)


class Adam:
    """``torch.optim.Adam(params, lr=lr)``'s ``zero_grad`` and ``step`` (betas 0.9 and 0.999,
    eps 1e-8, no weight decay), written out. Like ``torch.optim.Adam``, each parameter counts
    its own steps: one without a gradient at a step is skipped and its count stays."""

    def __init__(self, params: Iterable[nn.Parameter], lr: float) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr = lr
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]
        self.counts = [0] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        groups: dict[int, list[int]] = {}  # step count after this step → parameter indices
        for i, p in enumerate(self.params):
            if p.grad is not None:
                self.counts[i] += 1
                groups.setdefault(self.counts[i], []).append(i)
        for count, indices in groups.items():
            adam_step([self.params[i] for i in indices], [self.moments[i] for i in indices],
                      count, self.lr)
