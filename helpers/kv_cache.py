"""The KV cache (键值缓存): the keys and values an attention layer has already computed.

Legend: B batch, H heads, T tokens held, N/H size of one head, L layers; W window, S sinks,
Q queries of the last append, n keys it returned.
A decoder that generates one token at a time would recompute the keys and values of every
earlier token at every step; the cache keeps them, so each step feeds only the new token.
A plain data structure: it knows nothing of the model (``generate`` lives in ``transformer``).
"""

from __future__ import annotations

import torch

from .checks import (
    check_floating, check_holds_data, check_int, check_like, check_positive_int, check_rank,
)

__all__ = ["KVCache", "ROPE_POSITIONS"]

ROPE_POSITIONS = ("original", "cache")  # where a RoPE layer places the cached keys


class KVCache:
    """The keys and values one attention layer has seen so far, (B, H, T, N/H) each (H: the
    layer's key-value heads, G of them with grouped-query attention, shared by H/G query heads).

    ``append(keys, values)`` adds the new tokens' keys and values (B, H, T_new, N/H) and
    returns the held ones followed by the new ones; ``length`` is T. Keys and values must agree
    in B, H and T_new (their last sizes may differ), be floating-point, and match the cached
    ones in B, H, last size, dtype and device; anything else raises a ValueError and leaves the
    cache as it was. The cache holds its own copies (the first append copies too): changing a
    tensor after appending it never changes what is cached.

    A policy (keyword-only; ``KVCache()`` keeps every token) bounds what is held between calls:

    * ``window=W``: sliding-window attention (query m sees keys m − W < p ≤ m) needs only the
      W − 1 most recent tokens, since each new query brings its own key: Mistral's rolling
      buffer cache.
    * ``sinks=S`` (with a window): the first S tokens ever appended are kept forever too, and
      stay visible to every query: StreamingLLM's attention sinks (Xiao et al. 2023), which
      keep the softmax stable once the window has moved past the start.

    So T ≤ ``capacity`` = S + W − 1 between calls. ``mask(Q)`` is the boolean (Q, n) mask for
    the last append, ``True`` = takes part: its Q last tokens are the queries, at positions
    ``seen − Q … seen − 1``; the key at position p is seen by the query at m iff p ≤ m and
    (m − p < W or p < S) (no window: p ≤ m, the lower-right causal mask).

    ``rope_positions`` tells a RoPE layer (``MultiHeadAttention(rotary=True)``) where the keys
    sit: "original" (the default, notebook 10's way) rotates each key once, at its own position,
    before it is cached; "cache" (StreamingLLM's) caches keys *before* rotation and rotates all
    that ``append`` returned by their index among them (0 … n − 1), the queries by theirs, so
    that no distance exceeds what the cache can hold, however long the stream. The cache itself
    stores whatever it is given either way.
    Memory: 2 · B · H · T · (N/H) numbers per layer.
    """

    def __init__(self, *, window: int | None = None, sinks: int = 0,
                 rope_positions: str = "original") -> None:
        self._window = None if window is None else check_positive_int("window", window)
        self._sinks = check_int("sinks", sinks)
        if self._sinks and self._window is None:
            raise ValueError(f"sinks needs a window (the sinks are kept beside a sliding window): "
                             f"window must be an int >= 1 when sinks > 0, got window=None with "
                             f"sinks={self._sinks}")
        if not isinstance(rope_positions, str) or rope_positions not in ROPE_POSITIONS:
            raise ValueError(f"rope_positions must be one of {ROPE_POSITIONS}, got {rope_positions!r}")
        self.rope_positions = rope_positions
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self._seen = 0  # tokens appended in all
        self._new = 0  # tokens the last append added
        self._before: int | None = None  # tokens seen before the last append (None: no append)

    @property
    def window(self) -> int | None:
        return self._window

    @property
    def sinks(self) -> int:
        return self._sinks

    @property
    def capacity(self) -> int | None:
        """S + W − 1: the most tokens held between calls (None without a window)."""
        return None if self._window is None else self._sinks + self._window - 1

    @property
    def seen(self) -> int:
        """Tokens appended in all, the evicted ones included."""
        return self._seen

    @property
    def length(self) -> int:
        """Tokens held now (T)."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def positions(self) -> torch.Tensor:
        """(T,) long: the original positions (from 0) of the held tokens, in order."""
        return self._held(self._seen, None if self.keys is None else self.keys.device)

    @property
    def key_positions(self) -> torch.Tensor | None:
        """(n,) long: the positions of the keys the last ``append`` returned (None before one)."""
        return None if self._before is None else self._returned_positions()

    def _returned_positions(self) -> torch.Tensor:
        """(n,) the positions of what the last append returned: those held before it, then
        the new ones (built when asked for, so that a cache without a policy adds no work to
        a decoding step)."""
        device = self.keys.device
        return torch.cat([self._held(self._before, device),
                          torch.arange(self._before, self._seen, device=device)])  # (n,)

    def _held(self, seen: int, device: torch.device | None) -> torch.Tensor:
        """(T,) the positions held once ``seen`` tokens have come: all, or the first S and the
        last W − 1."""
        if self._window is None or seen <= self.capacity:
            return torch.arange(seen, device=device)
        recent = max(self._sinks, seen - (self._window - 1))
        return torch.cat([torch.arange(self._sinks, device=device),
                          torch.arange(recent, seen, device=device)])

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add keys (B, H, T_new, d_k) and values (B, H, T_new, d_v); return the held ones and
        the new ones, (B, H, T + T_new, d_k) and (B, H, T + T_new, d_v). Then evict what the
        policy no longer holds."""
        check_rank("keys", keys, 4, "(B, H, T_new, N/H)")
        check_rank("values", values, 4, "(B, H, T_new, N/H)")
        check_floating("keys", keys)
        check_floating("values", values)
        if keys.shape[:3] != values.shape[:3]:
            raise ValueError(f"values must have the shape (B, H, T_new) of keys = "
                             f"{tuple(keys.shape[:3])}, got {tuple(values.shape[:3])}")
        check_like("values", values, "keys", keys)
        if self.keys is None:
            check_holds_data("keys", keys)  # (values: on the device of keys)
            # copies, as torch.cat makes on later appends: a caller that reuses one buffer per
            # step must not overwrite what the cache holds
            all_keys = keys.clone(memory_format=torch.contiguous_format)  # (B, H, T_new, N/H)
            all_values = values.clone(memory_format=torch.contiguous_format)
        else:
            for name, old, new in (("keys", self.keys, keys), ("values", self.values, values)):
                if old.shape[:2] != new.shape[:2] or old.shape[-1] != new.shape[-1]:
                    raise ValueError(f"new {name} must have shape (B, H, T_new, size) = "
                                     f"({old.shape[0]}, {old.shape[1]}, T_new, {old.shape[-1]}), "
                                     f"got {tuple(new.shape)}")
                check_like(name, new, f"the cached {name}", old)
            all_keys = torch.cat([self.keys, keys], dim=-2)  # (B, H, T + T_new, N/H): new tensors
            all_values = torch.cat([self.values, values], dim=-2)
        before, self._new = self._seen, keys.shape[-2]
        self._seen += self._new
        self._before = before
        self.keys, self.values = all_keys, all_values
        if self._window is not None and all_keys.shape[-2] > self.capacity:
            # evict: the first S and the last W − 1, copied into tensors of their own size (a
            # view would keep the whole returned tensor alive)
            S, recent = self._sinks, all_keys.shape[-2] - (self._window - 1)
            self.keys = torch.cat([all_keys[..., :S, :], all_keys[..., recent:, :]], dim=-2)
            self.values = torch.cat([all_values[..., :S, :], all_values[..., recent:, :]], dim=-2)
        return all_keys, all_values

    def mask(self, num_queries: int) -> torch.Tensor:
        """(Q, n) boolean, ``True`` = takes part: which keys the last append returned each of
        its last Q = ``num_queries`` tokens, as queries, may see (see the class docstring)."""
        num_queries = check_int("num_queries", num_queries, 0)  # 0: an empty chunk, (0, n)
        if self._before is None:
            raise ValueError(f"num_queries must count tokens of the last append, got "
                             f"{num_queries} before any append (append first)")
        if num_queries > self._new:
            raise ValueError(f"num_queries must be at most the number of tokens the last append "
                             f"added ({self._new}), got {num_queries}")
        p = self._returned_positions()  # (n,)
        m = torch.arange(self._seen - num_queries, self._seen, device=p.device)[:, None]  # (Q, 1)
        visible = p <= m  # (Q, n)
        if self._window is not None:
            visible &= (m - p < self._window) | (p < self._sinks)
        return visible

    def nbytes(self) -> int:
        """Bytes held: keys and values together."""
        return 0 if self.keys is None else (
            self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size())
