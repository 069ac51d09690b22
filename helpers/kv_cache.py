"""The KV cache (键值缓存) and greedy generation with it.

Legend: B batch, H heads, T tokens seen so far, N/H size of one head, L layers.
A decoder that generates one token at a time would recompute the keys and values of every
earlier token at every step; the cache keeps them, so each step feeds only the new token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .checks import check_int, check_rank

if TYPE_CHECKING:
    from .transformer import DecoderLM

__all__ = ["KVCache", "generate"]


class KVCache:
    """The keys and values one attention layer has seen so far, (B, H, T, N/H) each.

    ``append(keys, values)`` adds the new tokens' keys and values (B, H, T_new, N/H) and
    returns all of them; ``length`` is T. Memory: 2 · B · H · T · (N/H) numbers per layer.
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_rank("keys", keys, 4, "(B, H, T_new, N/H)")
        check_rank("values", values, 4, "(B, H, T_new, N/H)")
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            for name, old, new in (("keys", self.keys, keys), ("values", self.values, values)):
                if old.shape[:2] != new.shape[:2] or old.shape[-1] != new.shape[-1]:
                    raise ValueError(f"new {name} must have shape (B, H, T_new, size) = "
                                     f"({old.shape[0]}, {old.shape[1]}, T_new, {old.shape[-1]}), "
                                     f"got {tuple(new.shape)}")
            self.keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, T + T_new, N/H)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values

    def nbytes(self) -> int:
        """Bytes held: keys and values together."""
        return 0 if self.keys is None else (
            self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size())


@torch.no_grad()
def generate(
    model: DecoderLM, prompt: torch.Tensor, num_new: int, *, use_cache: bool = True,
) -> torch.Tensor:
    """Greedy decoding: append ``num_new`` tokens to ``prompt`` (B, T0), each the most likely
    next token; returns (B, T0 + num_new). With ``use_cache`` the prompt runs once, then each
    step feeds only the newest token and every layer appends its keys and values to its
    ``KVCache`` (positions continue from the cache length); without, each step re-runs the
    whole sequence. Both give the same tokens. The model is put in eval mode and left so."""
    check_rank("prompt", prompt, 2, "(B, T0)")
    num_new = check_int("num_new", num_new, 0)
    if prompt.shape[1] + num_new > model.max_len:
        raise ValueError(f"prompt length + num_new must be at most max_len={model.max_len}, "
                         f"got {prompt.shape[1]} + {num_new}")
    model.eval()
    tokens = prompt
    cache = model.new_cache() if use_cache else None
    logits = model(prompt, cache=cache)  # (B, T0, vocab)
    for step in range(num_new):
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, T0 + step + 1)
        if step + 1 < num_new:
            logits = model(next_token, cache=cache) if use_cache else model(tokens)
    return tokens
