"""The Transformer block (pre-norm), a small decoder-only language model built from it, and
greedy generation with a KV cache.

Legend: B batch, T tokens, N num_hiddens (model width), H heads, F ffn_hiddens, L layers,
V vocabulary size. Mask convention: ``valid_lens`` (B,) or (B, T) keeps the first ``n`` keys;
``causal=True`` also hides every key in a query's future (``causal_mask``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .checks import (
    check_bool, check_floating, check_int, check_like, check_positive_int, check_probability,
    check_rank, check_real, check_size,
)
from .kv_cache import KVCache
from .masking import ValidLens
from .multihead import MultiHeadAttention
from .positional import sinusoidal_table

__all__ = ["TransformerBlock", "DecoderLM", "POSITIONAL", "generate"]

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}
POSITIONAL = ("sinusoidal", "rope", "none", "alibi", "t5")


class TransformerBlock(nn.Module):
    """One pre-norm Transformer block: ``X + attention(norm1(X))``, then ``+ ffn(norm2(·))``.

    Residual connections（残差连接）around self-attention and a position-wise feed-forward
    network（前馈网络）, each input normalised first by layer normalisation（层规范化）.
    ``forward(X (B, T, N), valid_lens=None, *, causal=False, cache=None)`` → (B, T, N).
    With copied weights it equals ``nn.TransformerEncoderLayer(N, H, F, dropout=0,
    activation="gelu", batch_first=True, norm_first=True)``. ``rotary``, ``rotary_scale``,
    ``position_bias``, ``window`` and ``sink`` go to its ``MultiHeadAttention`` (a position bias
    and a window need ``causal=True``).
    """

    def __init__(
        self, num_hiddens: int, num_heads: int, ffn_hiddens: int, dropout: float = 0.0,
        activation: str = "gelu", *, rotary: bool = False, rotary_scale: float = 1.0,
        position_bias: str | None = None, window: int | None = None, sink: bool = False,
    ) -> None:
        super().__init__()
        ffn_hiddens = check_positive_int("ffn_hiddens", ffn_hiddens)
        dropout = check_probability("dropout", dropout)
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout=dropout, bias=True,
                                            rotary=rotary, rotary_scale=rotary_scale,
                                            position_bias=position_bias, window=window, sink=sink)
        self.norm1 = nn.LayerNorm(num_hiddens)
        self.norm2 = nn.LayerNorm(num_hiddens)
        self.ffn = nn.Sequential(nn.Linear(num_hiddens, ffn_hiddens), ACTIVATIONS[activation](),
                                 nn.Linear(ffn_hiddens, num_hiddens))
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, X: torch.Tensor, valid_lens: ValidLens = None, *, causal: bool = False,
        cache: KVCache | None = None, need_weights: bool = True,
    ) -> torch.Tensor:
        check_rank("X", X, 3, "(B, T, N)")
        check_floating("X", X)
        check_like("X", X, "the module's parameters", self.norm1.weight)
        check_size("feature size of X (num_hiddens)", self.norm1.normalized_shape[0], X.shape[-1])
        Y = self.norm1(X)
        X = X + self.dropout(self.attention(Y, Y, Y, valid_lens, causal=causal, cache=cache,
                                            need_weights=need_weights))  # (B, T, N)
        return X + self.dropout(self.ffn(self.norm2(X)))  # (B, T, N)


class DecoderLM(nn.Module):
    """A decoder-only language model: token embedding, positions, L causal ``TransformerBlock``s,
    a final LayerNorm and a linear readout to the vocabulary.

    ``positional``: "sinusoidal" adds ``sinusoidal_table`` rows to the embeddings, "rope"
    rotates every layer's queries and keys instead (``apply_rotary``), "alibi" and "t5" add a
    bias of the distance m − n to every layer's scores (``MultiHeadAttention``'s
    ``position_bias``: ALiBi's fixed slopes, or T5's learnt scalar per bucket), "none" gives the
    model no position information at all. ``rotary_scale`` (RoPE only) multiplies RoPE's
    positions: train length / test length is position interpolation (位置插值, Chen et al.
    2023). ``window``: None (every layer attends to the whole past), an int W (every layer sees
    only the W most recent positions, Mistral's sliding window) or one ``int | None`` per layer
    (Gemma's local and global layers, e.g. ``[4, 4, None]``); ``sink=True`` gives every layer
    a learnt attention sink per head (``MultiHeadAttention``'s ``sink``).
    ``forward(tokens (B, T) long)`` → logits (B, T, V); after
    it, ``attention_weights`` holds one (B, H, T, T) tensor per layer (with a ``cache``:
    (B, H, T_new, T_cached + T_new)). ``new_cache()`` gives one empty ``KVCache`` per layer.
    """

    def __init__(
        self, vocab_size: int, num_hiddens: int, num_heads: int, num_layers: int,
        ffn_hiddens: int | None = None, max_len: int = 256, positional: str = "sinusoidal",
        dropout: float = 0.0, rotary_scale: float = 1.0,
        window: int | Sequence[int | None] | None = None, sink: bool = False,
    ) -> None:
        super().__init__()
        vocab_size, num_hiddens, num_heads, num_layers, max_len = (
            check_positive_int(name, value) for name, value in (
                ("vocab_size", vocab_size), ("num_hiddens", num_hiddens), ("num_heads", num_heads),
                ("num_layers", num_layers), ("max_len", max_len)))
        if not isinstance(positional, str) or positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {POSITIONAL}, got {positional!r}")
        ffn_hiddens = 4 * num_hiddens if ffn_hiddens is None else check_positive_int(
            "ffn_hiddens", ffn_hiddens)
        dropout = check_probability("dropout", dropout)
        rotary_scale = check_real("rotary_scale", rotary_scale, above=0.0)
        if rotary_scale != 1.0 and positional != "rope":
            raise ValueError(f"rotary_scale must be 1.0 unless positional='rope' (it rescales "
                             f"RoPE's positions), got rotary_scale={rotary_scale!r} with "
                             f"positional={positional!r}")
        windows = _layer_windows(window, num_layers)
        check_bool("sink", sink)
        self.vocab_size, self.max_len, self.positional = vocab_size, max_len, positional
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.blocks = nn.ModuleList(
            TransformerBlock(num_hiddens, num_heads, ffn_hiddens, dropout,
                             rotary=positional == "rope", rotary_scale=rotary_scale,
                             position_bias=positional if positional in ("alibi", "t5") else None,
                             window=w, sink=sink)
            for w in windows)
        self.norm = nn.LayerNorm(num_hiddens)
        self.head = nn.Linear(num_hiddens, vocab_size)
        self.dropout = nn.Dropout(dropout)
        table = sinusoidal_table(max_len, num_hiddens) if positional == "sinusoidal" else torch.zeros(0)
        self.register_buffer("P", table, persistent=False)  # (max_len, N), or empty
        self.attention_weights: list[torch.Tensor | None] = []

    def new_cache(
        self, *, window: int | None = None, sinks: int = 0, rope_positions: str = "original",
    ) -> list[KVCache]:
        """One empty ``KVCache`` per layer, for ``forward(..., cache=...)``; ``window``,
        ``sinks`` and ``rope_positions`` go to each (``KVCache``'s policies: a rolling window,
        StreamingLLM's sinks, RoPE positions in the cache). A cache that evicts streams past
        ``max_len`` unless the positions are sinusoidal (a table of ``max_len`` rows)."""
        return [KVCache(window=window, sinks=sinks, rope_positions=rope_positions)
                for _ in self.blocks]

    def forward(
        self, tokens: torch.Tensor, *, cache: list[KVCache] | None = None,
        need_weights: bool = True,
    ) -> torch.Tensor:
        self._check_tokens("tokens", tokens, "(B, T)")
        start = 0 if cache is None else self._cached_length(cache, tokens.shape[0])
        T = tokens.shape[1]
        evicts = cache is not None and cache[0].window is not None
        if start + T > self.max_len and (not evicts or self.positional == "sinusoidal"):
            raise ValueError(f"sequence length must be at most max_len={self.max_len}, "
                             f"got {start + T}" + (f" ({start} cached + {T} new)" if start else ""))
        X = self.embedding(tokens)  # (B, T, N)
        if self.positional == "sinusoidal":
            X = X + self.P[start: start + T].to(X.dtype)  # positions start, ..., start + T − 1
        X = self.dropout(X)
        for i, block in enumerate(self.blocks):
            X = block(X, causal=True, cache=None if cache is None else cache[i],
                      need_weights=need_weights)  # (B, T, N)
        self.attention_weights = [block.attention.attention_weights for block in self.blocks]
        return self.head(self.norm(X))  # (B, T, V)

    def _check_tokens(self, name: str, tokens: torch.Tensor, layout: str) -> None:
        """Raise unless ``tokens`` is a long (B, T) tensor of ids in [0, V) on the model's device."""
        check_rank(name, tokens, 2, layout)
        if tokens.dtype != torch.long:
            raise ValueError(f"{name} must be a long tensor of token ids, got dtype {tokens.dtype}")
        device = self.embedding.weight.device
        if tokens.device != device:
            raise ValueError(f"{name} must be on the model's device ({device}), got {tokens.device}")
        if tokens.numel() and not (0 <= int(tokens.min()) and int(tokens.max()) < self.vocab_size):
            raise ValueError(f"{name} must lie in [0, vocab_size) = [0, {self.vocab_size}), got "
                             f"values from {int(tokens.min())} to {int(tokens.max())}")

    def _cached_length(self, cache: object, batch: int) -> int:
        """The tokens every layer's cache has seen (held, or evicted by a policy): where the
        new positions start; raise unless ``cache`` is one ``KVCache`` per layer, all alike,
        holding a batch of ``batch``."""
        if not isinstance(cache, (list, tuple)) or not all(isinstance(c, KVCache) for c in cache):
            got = type(cache).__name__ if not isinstance(cache, (list, tuple)) else \
                f"a {type(cache).__name__} holding " + ", ".join(
                    sorted({type(c).__name__ for c in cache if not isinstance(c, KVCache)}))
            raise ValueError(f"cache must be a list of one KVCache per layer (new_cache()), got {got}")
        check_size("number of caches (one per layer)", len(self.blocks), len(cache))
        lengths = [c.seen for c in cache]
        if len(set(lengths)) > 1:
            raise ValueError(f"cache must hold one length in every layer, got lengths {lengths}")
        policies = {(c.window, c.sinks, c.rope_positions) for c in cache}
        if len(policies) > 1:
            raise ValueError(f"cache must have one policy (window, sinks, rope_positions) in "
                             f"every layer, got {sorted(policies, key=str)}")
        held = next((c.keys.shape[0] for c in cache if c.keys is not None), batch)
        if held != batch:
            raise ValueError(f"tokens must have the batch size of the cache (B = {held}), got {batch}")
        return lengths[0]


def _layer_windows(window: object, num_layers: int) -> list[int | None]:
    """One window (None or an int ≥ 1) per layer from DecoderLM's ``window``: None, one int for
    every layer, or a sequence of one ``int | None`` per layer."""
    listed = isinstance(window, Sequence) and not isinstance(window, (str, bytes))
    windows = list(window) if listed else [window] * num_layers
    if len(windows) != num_layers:
        raise ValueError(f"window must hold one entry per layer (num_layers={num_layers}), got "
                         f"{len(windows)} entries: {window!r:.80}")
    for w in windows:
        if w is not None and (not isinstance(w, numbers.Integral) or isinstance(w, (bool, np.bool_))
                              or w < 1):
            raise ValueError(f"window must be None, an int >= 1 or one int >= 1 or None per "
                             f"layer, got {window!r:.80}")
    return [None if w is None else int(w) for w in windows]


@torch.no_grad()
def generate(
    model: DecoderLM, prompt: torch.Tensor, num_new: int, *, use_cache: bool = True,
) -> torch.Tensor:
    """Greedy decoding: append ``num_new`` tokens to ``prompt`` (B, T0), T0 ≥ 1, each the most
    likely next token; returns a new tensor (B, T0 + num_new), never ``prompt`` itself. With
    ``use_cache`` the prompt runs once, then each step feeds only the newest token and every
    layer appends its keys and values to its ``KVCache`` (positions continue from the cache
    length); without, each step re-runs the whole sequence. Both give the same tokens. The
    model is put in eval mode and left so."""
    if not isinstance(model, DecoderLM):
        raise ValueError(f"model must be a DecoderLM, got {type(model).__name__}")
    model._check_tokens("prompt", prompt, "(B, T0)")
    if prompt.shape[1] == 0:
        raise ValueError(f"prompt must hold at least one token (T0 >= 1), got shape {tuple(prompt.shape)}")
    num_new = check_int("num_new", num_new, 0)
    check_bool("use_cache", use_cache)
    if prompt.shape[1] + num_new > model.max_len:
        raise ValueError(f"prompt length + num_new must be at most max_len={model.max_len}, "
                         f"got {prompt.shape[1]} + {num_new}")
    model.eval()
    tokens = prompt.clone()  # the result is ours, even when num_new is 0
    cache = model.new_cache() if use_cache else None
    logits = model(prompt, cache=cache)  # (B, T0, vocab); checks the tokens
    for step in range(num_new):
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)  # (B, T0 + step + 1)
        if step + 1 < num_new:
            logits = model(next_token, cache=cache) if use_cache else model(tokens)
    return tokens
