"""Multi-head attention (多头注意力): H scaled dot-product heads side by side.

Legend: B batch, Q queries, K key-value pairs, N num_hiddens, H heads, N/H size of one head.
Mask convention: ``valid_lens`` (B,) or (B, Q) keeps the first ``n`` keys (the opposite of
``nn.MultiheadAttention``'s ``key_padding_mask``, where ``True`` means *ignore*).
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import attend, check_qkv, unseen_rows
from .checks import (
    check_bool, check_holds_data, check_like, check_positive_int, check_probability, check_rank,
    check_real, check_size,
)
from .kv_cache import KVCache
from .masking import ValidLens, attention_hidden
from .rotary import apply_rotary

__all__ = ["MultiHeadAttention", "transpose_qkv", "transpose_output"]


def transpose_qkv(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the last axis into heads: (B, T, N) → (B, H, T, N/H)."""
    check_rank("X", X, 3, "(B, T, N)")
    check_holds_data("X", X)
    num_heads = check_positive_int("num_heads", num_heads)
    B, T, N = X.shape
    if N % num_heads:
        raise ValueError(f"feature size N={N} must be divisible by num_heads={num_heads}, "
                         f"got a remainder of {N % num_heads}")
    return X.reshape(B, T, num_heads, N // num_heads).transpose(1, 2)  # (B, H, T, N/H)


def transpose_output(X: torch.Tensor) -> torch.Tensor:
    """Undo ``transpose_qkv``: (B, H, T, N/H) → (B, T, N), the heads concatenated."""
    check_rank("X", X, 4, "(B, H, T, N/H)")
    check_holds_data("X", X)
    B, H, T, d = X.shape
    return X.transpose(1, 2).reshape(B, T, H * d)  # (B, T, N)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with projections ``W_q``, ``W_k``, ``W_v``, ``W_o``.

    ``MultiHeadAttention(num_hiddens, num_heads, *, dropout=0.0, bias=False, query_size=None,
    key_size=None, value_size=None)``: everything after the two sizes is keyword-only (d2l-zh
    passes ``key_size, query_size, value_size`` first; that order raises a ValueError).
    Queries (B, Q, query_size), keys (B, K, key_size), values (B, K, value_size); sizes
    default to ``num_hiddens``. ``forward(...)`` → (B, Q, num_hiddens). With ``need_weights``
    (the default) the weights of the last call are kept in ``attention_weights`` (B, H, Q, K);
    with ``need_weights=False`` it calls ``F.scaled_dot_product_attention`` (fused on a GPU)
    and ``attention_weights`` is None. Keys and values past every query's valid length change
    nothing, even holding NaN or inf. With copied weights it equals
    ``nn.MultiheadAttention(num_hiddens, H, kdim=key_size, vdim=value_size, batch_first=True)``.

    ``causal=True``: a key takes part only if it is within the valid length **and** not in the
    query's future (``causal_mask``, lower-right). ``rotary=True`` (self-attention only):
    queries and keys are rotated by their positions (``apply_rotary``, half-split layout,
    head size even) after the projection. ``cache``: a ``KVCache`` that the new keys and values
    are appended to before attending; positions then continue from its length.

    Positions, with or without ``causal``: the K keys (cached ones first) sit at 0, …, K − 1,
    and the Q queries are the *last* Q positions, query i at K − Q + i (lower-right, as
    ``causal_mask`` places them). So ``forward(X[:, s:], X, X)`` gives the last rows of
    ``forward(X, X, X)``, RoPE included; with Q > K the first queries sit at negative positions.
    """

    def __init__(
        self, num_hiddens: int, num_heads: int, *misplaced: object, dropout: float = 0.0,
        bias: bool = False, query_size: int | None = None, key_size: int | None = None,
        value_size: int | None = None, rotary: bool = False, rotary_base: float = 10000.0,
    ) -> None:
        super().__init__()
        if misplaced:  # `*misplaced` instead of a bare `*`: a ValueError that says what to write
            raise ValueError(_keyword_only_message((num_hiddens, num_heads, *misplaced)))
        query_size, key_size, value_size = (num_hiddens if size is None else size
                                            for size in (query_size, key_size, value_size))
        num_hiddens, num_heads, query_size, key_size, value_size = (
            check_positive_int(name, size) for name, size in (
                ("num_hiddens", num_hiddens), ("num_heads", num_heads), ("query_size", query_size),
                ("key_size", key_size), ("value_size", value_size)))
        check_bool("bias", bias)
        check_bool("rotary", rotary)
        if num_hiddens % num_heads:
            raise ValueError(
                f"num_hiddens must be divisible by num_heads: got num_hiddens={num_hiddens}, "
                f"num_heads={num_heads} (remainder {num_hiddens % num_heads})"
            )
        if rotary and (num_hiddens // num_heads) % 2:
            raise ValueError(f"rotary needs an even head size: num_hiddens/num_heads must be even, "
                             f"got {num_hiddens}/{num_heads} = {num_hiddens // num_heads}")
        self.num_heads = num_heads
        self.dropout = check_probability("dropout", dropout)
        self.rotary = rotary
        self.rotary_base = check_real("rotary_base", rotary_base, above=1.0)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
        valid_lens: ValidLens = None, *, need_weights: bool = True, causal: bool = False,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        check_qkv(queries, keys, values, same_qk_size=False)
        for name, layer, x in (("queries", self.W_q, queries), ("keys", self.W_k, keys),
                               ("values", self.W_v, values)):
            check_size(f"feature size of {name}", layer.in_features, x.shape[-1])
        check_like("queries", queries, "the module's parameters", self.W_q.weight)
        check_bool("need_weights", need_weights)
        check_bool("causal", causal)
        if cache is not None and not isinstance(cache, KVCache):
            raise ValueError(f"cache must be a KVCache or None, got {type(cache).__name__}")
        B, Q, _ = queries.shape
        start = 0 if cache is None else cache.length  # positions continue after the cache
        K = start + keys.shape[1]
        is_causal = causal and valid_lens is None and Q == K and not need_weights
        hidden, empty = attention_hidden(valid_lens, B, Q, K, queries.device,
                                         causal=causal and not is_causal)
        q_all = self.W_q(queries)  # (B, Q, N)
        k_new, v_new = self.W_k(keys), self.W_v(values)  # (B, K_new, N): new tensors, ours
        clean = valid_lens is None or cache is None  # (the causal mask hides no key from all)
        if valid_lens is not None and cache is None:  # keys and values that no query may see
            unseen = unseen_rows(hidden)  # (B, K, 1) become 0, in place: 0 · NaN would be NaN
            k_new.masked_fill_(unseen, 0.0)
            v_new.masked_fill_(unseen, 0.0)
        q = transpose_qkv(q_all, self.num_heads)  # (B, H, Q, N/H)
        k = transpose_qkv(k_new, self.num_heads)  # (B, H, K_new, N/H)
        v = transpose_qkv(v_new, self.num_heads)  # (B, H, K_new, N/H)
        if self.rotary:  # keys at start, …, K − 1; query i at K − Q + i (lower-right)
            q = apply_rotary(q, torch.arange(K - Q, K, device=q.device), base=self.rotary_base)
            k = apply_rotary(k, torch.arange(start, K, device=k.device), base=self.rotary_base)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, K, N/H): the cached keys, then the new ones
        if hidden is not None and hidden.dim() == 3:  # (B, 1 or Q, K): the same for every head
            hidden = hidden.unsqueeze(1)  # (B, 1, 1 or Q, K)
            empty = None if empty is None else empty.unsqueeze(1)  # (B, 1, 1 or Q, 1)
        p = self.dropout if self.training else 0.0
        out, self.attention_weights = attend(
            q, k, v, hidden, empty, dropout_p=p, need_weights=need_weights,
            is_causal=is_causal, clean=clean)  # (B, H, Q, N/H)
        return self.W_o(transpose_output(out))  # (B, Q, N)


def _keyword_only_message(args: tuple[object, ...]) -> str:
    """Say that only num_hiddens and num_heads are positional, and show the call to write."""
    if len(args) == 6 and not isinstance(args[3], bool):  # d2l-zh's order (ours has bias 4th)
        key_size, query_size, value_size, num_hiddens, num_heads, dropout = args
        call = (f"MultiHeadAttention({num_hiddens!r}, {num_heads!r}, dropout={dropout!r}, "
                f"query_size={query_size!r}, key_size={key_size!r}, value_size={value_size!r})")
        order = " in d2l-zh's order (key_size, query_size, value_size, num_hiddens, num_heads, dropout)"
    elif len(args) > 7:
        call = ("MultiHeadAttention(num_hiddens, num_heads, dropout=..., bias=..., query_size=..., "
                "key_size=..., value_size=...)")
        order = ""
    else:
        names = ("num_hiddens", "num_heads", "dropout", "bias", "query_size", "key_size", "value_size")
        parts = [repr(a) if i < 2 else f"{name}={a!r}" for i, (name, a) in enumerate(zip(names, args))]
        call = f"MultiHeadAttention({', '.join(parts)})"
        order = ""
    return (f"MultiHeadAttention takes only num_hiddens and num_heads by position; dropout, bias, "
            f"query_size, key_size and value_size are keyword-only. Got {len(args)} positional "
            f"arguments {args!r}{order}: write {call}")
