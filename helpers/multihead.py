"""Multi-head attention (多头注意力): H scaled dot-product heads side by side, with optional
positions: RoPE on the queries and keys, or a bias on the scores (ALiBi, T5's relative bias);
optionally a sliding window (滑动窗口注意力), a learnt attention sink (注意力汇点) per head,
fewer key-value heads than query heads (grouped-query attention, 分组查询注意力) and a sigmoid
gate on every head's output (gated attention, 门控注意力).

Legend: B batch, Q queries, K key-value pairs, N num_hiddens, H heads, N/H size of one head,
G key-value heads (G divides H).
Mask convention: ``valid_lens`` (B,) or (B, Q) keeps the first ``n`` keys (the opposite of
``nn.MultiheadAttention``'s ``key_padding_mask``, where ``True`` means *ignore*); ``causal``
and ``window`` hide keys as ``causal_mask`` does (its ``True`` = takes part).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import attend, check_qkv, unseen_rows
from .checks import (
    check_bool, check_holds_data, check_int, check_like, check_positive_int, check_probability,
    check_rank, check_real, check_size,
)
from .kv_cache import KVCache
from .masking import ValidLens, attention_hidden
from .rotary import apply_rotary
from .sinks import sink_softmax

__all__ = ["MultiHeadAttention", "transpose_qkv", "transpose_output", "alibi_slopes", "t5_buckets",
           "POSITION_BIASES"]

POSITION_BIASES = ("alibi", "t5")  # MultiHeadAttention's position_bias, besides None
T5_BUCKETS, T5_MAX_DISTANCE = 32, 128  # T5's defaults


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's fixed slopes (线性偏置注意力, Press et al. 2022), s_h = 2^(−8h/H) for h = 1 … H:
    (H,), float64. Head h adds −s_h·(m − n) to the score of query position m against key
    position n ≤ m; for H = 8 the slopes are 1/2, 1/4, …, 1/256."""
    H = check_positive_int("num_heads", num_heads)
    h = torch.arange(1, H + 1, dtype=torch.float64)  # (H,)
    return torch.pow(2.0, -8.0 * h / H)  # (H,)


def t5_buckets(
    distances: torch.Tensor, *, num_buckets: int = T5_BUCKETS, max_distance: int = T5_MAX_DISTANCE,
) -> torch.Tensor:
    """The bucket of each distance m − n in T5's decoder (Raffel et al. 2020; T5's
    ``_relative_position_bucket`` with ``bidirectional=False``): distances 0 … E − 1 get a bucket
    each (E = num_buckets // 2), the larger ones share the other buckets, whose widths grow
    logarithmically up to ``max_distance``; every distance from there on is in the last bucket.
    A negative distance (a key after its query, which a causal mask hides) counts as 0.
    ``distances``: an integer tensor of any shape; returns a long tensor of the same shape.
    ``num_buckets`` ≥ 2, ``max_distance`` > num_buckets // 2."""
    if not isinstance(distances, torch.Tensor):
        raise ValueError(f"distances must be an integer tensor, got {type(distances).__name__}")
    if distances.is_floating_point() or distances.is_complex() or distances.dtype == torch.bool:
        raise ValueError(f"distances must hold integers, got dtype {distances.dtype}")
    check_holds_data("distances", distances)
    num_buckets = check_int("num_buckets", num_buckets, 2)
    exact = num_buckets // 2  # distances 0 … exact − 1: one bucket each
    max_distance = check_int("max_distance", max_distance, exact + 1)
    d = distances.long().clamp(min=0)  # future keys: distance 0
    work = torch.float32 if d.device.type == "mps" else torch.float64  # MPS has no float64
    grow = torch.log(d.clamp(min=exact).to(work) / exact) / math.log(max_distance / exact)  # 0 … 1 …
    far = (exact + grow * (num_buckets - exact)).long().clamp(max=num_buckets - 1)
    return torch.where(d < exact, d, far)  # same shape as distances


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
    nothing, even holding NaN or inf. With copied weights (and G = H, no gate) it equals
    ``nn.MultiheadAttention(num_hiddens, H, kdim=key_size, vdim=value_size, batch_first=True)``.

    ``causal=True``: a key takes part only if it is within the valid length **and** not in the
    query's future (``causal_mask``, lower-right). ``rotary=True`` (self-attention only):
    queries and keys are rotated by their positions (``apply_rotary``, half-split layout,
    head size even) after the projection; ``rotary_scale`` multiplies those positions first
    (1: plain RoPE; train length / test length: position interpolation). ``cache``: a
    ``KVCache`` that the new keys and values are appended to before attending; positions then
    continue from its length.

    ``position_bias`` adds a number to every score, softmax(q·k/√(N/H) + b_h(m − n)), for causal
    attention only (``forward`` refuses ``causal=False``): "alibi", b_h = −s_h·(m − n) with the
    fixed ``alibi_slopes``; "t5", b_h = a learnt scalar per head and ``t5_buckets`` bucket of
    m − n (32 buckets up to distance 128, held in ``relative_bias``, an ``nn.Embedding(32, H)``
    that starts at 0; T5 shares one table between its layers, here each module has its own).
    With ``need_weights=False`` the bias goes to ``F.scaled_dot_product_attention`` as a float
    ``attn_mask``.

    ``window=W`` (an int ≥ 1, a property of the layer: Mistral's ``sliding_window``, Gemma's
    local layers) is sliding-window attention, for causal attention only (``forward`` refuses
    ``causal=False``): query i sees only the W most recent positions, itself included, the keys
    K − Q + i − W < j ≤ K − Q + i (``causal_mask(..., window=W)``). ``sink=True`` adds a learnt
    logit per head, ``sink_logits`` (H,), starting at 0, to every softmax's denominator
    (``sink_softmax``, gpt-oss's attention sink): a query may give part of its weight to
    nothing, so the weights of a row sum to less than 1 and a row with no key is all zeros. It
    is computed through the weights (with ``need_weights=False`` too, which keeps no weights):
    SDPA has no such logit.

    ``num_kv_heads=G`` (None: G = H) is grouped-query attention (GQA, Ainslie et al. 2023,
    https://arxiv.org/abs/2305.13245): ``W_k`` and ``W_v`` project to G·(N/H) features only, G
    key-value heads, and query head h reads key-value head h // (H/G), so each group of H/G
    consecutive query heads shares one key and one value head (``F.scaled_dot_product_attention
    (..., enable_gqa=True)``'s grouping). G = H is multi-head attention, G = 1 multi-query
    attention (MQA, Shazeer 2019). A ``cache`` then holds G heads, (B, G, T, N/H): H/G times
    fewer numbers. ``attention_weights`` stays (B, H, Q, K), one row per query head.

    ``gate=True`` is gated attention (Qiu et al. 2025, https://arxiv.org/abs/2505.06708, as in
    Qwen3-Next): the heads' concatenated output (B, Q, N), before ``W_o``, is multiplied
    elementwise by sigmoid(``W_g`` queries), ``W_g`` an ``nn.Linear(query_size, N)``: one gate
    per output feature of every head, computed from the query's own input (the paper's best
    variant, elementwise and head-specific, after the attention output). A gate near 0 lets a
    head output nearly nothing without parking its weight anywhere.

    Positions, with or without ``causal``: the K keys (cached ones first) sit at 0, …, K − 1,
    and the Q queries are the *last* Q positions, query i at K − Q + i (lower-right, as
    ``causal_mask`` places them). So ``forward(X[:, s:], X, X)`` gives the last rows of
    ``forward(X, X, X)``, RoPE included; with Q > K the first queries sit at negative positions.
    """

    def __init__(
        self, num_hiddens: int, num_heads: int, *misplaced: object, dropout: float = 0.0,
        bias: bool = False, query_size: int | None = None, key_size: int | None = None,
        value_size: int | None = None, rotary: bool = False, rotary_base: float = 10000.0,
        rotary_scale: float = 1.0, position_bias: str | None = None, window: int | None = None,
        sink: bool = False, num_kv_heads: int | None = None, gate: bool = False,
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
        self.num_kv_heads = num_heads if num_kv_heads is None else check_positive_int(
            "num_kv_heads", num_kv_heads)
        if num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads must divide num_heads={num_heads} (each group of query "
                             f"heads shares one key-value head), got num_kv_heads={num_kv_heads}")
        check_bool("gate", gate)
        self.gate = bool(gate)
        self.dropout = check_probability("dropout", dropout)
        self.rotary = rotary
        self.rotary_base = check_real("rotary_base", rotary_base, above=1.0)
        self.rotary_scale = check_real("rotary_scale", rotary_scale, above=0.0)
        if self.rotary_scale != 1.0 and not rotary:
            raise ValueError(f"rotary_scale must be 1.0 without rotary (it rescales RoPE's "
                             f"positions), got rotary_scale={rotary_scale!r} with rotary=False")
        if position_bias is not None and not (isinstance(position_bias, str)
                                              and position_bias in POSITION_BIASES):
            raise ValueError(f"position_bias must be None or one of {POSITION_BIASES}, "
                             f"got {position_bias!r}")
        self.position_bias = position_bias
        self.window = None if window is None else check_positive_int("window", window)
        check_bool("sink", sink)
        self.sink = bool(sink)  # a learnt logit per head in every softmax's denominator, 0 first
        self.sink_logits = nn.Parameter(torch.zeros(num_heads)) if sink else None  # (H,)
        if position_bias == "t5":  # one learnt scalar per bucket and head, all 0 at the start
            self.relative_bias = nn.Embedding(T5_BUCKETS, num_heads)
            nn.init.zeros_(self.relative_bias.weight)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        kv_hiddens = self.num_kv_heads * (num_hiddens // num_heads)  # G·(N/H)
        self.W_k = nn.Linear(key_size, kv_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, kv_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_g = nn.Linear(query_size, num_hiddens, bias=bias) if gate else None  # the gate
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
        if cache is not None and cache.rope_positions == "cache" and not self.rotary:
            raise ValueError("cache must have rope_positions='original' unless the layer uses "
                             "RoPE (rotary=True), got rope_positions='cache'")
        if self.position_bias is not None and not causal:
            raise ValueError(f"causal must be True with position_bias={self.position_bias!r} (a "
                             f"decoder's bias of the distance m − n ≥ 0), got causal=False")
        if self.window is not None and not causal:
            raise ValueError(f"causal must be True with window={self.window} (a sliding window "
                             f"over the past), got causal=False")
        B, Q, _ = queries.shape
        policy = cache is not None and cache.window is not None  # a cache that evicts
        if policy:
            self._check_policy_cache(cache, valid_lens, causal, Q, keys.shape[1])
        start = 0 if cache is None else cache.seen if policy else cache.length  # positions
        # continue after every token the cache has seen (held, or evicted by a policy)
        K = start + keys.shape[1]  # (with a policy cache: the positions, not the keys held)
        banded = self.window is not None and self.window < K  # the window hides some key
        is_causal = (causal and valid_lens is None and Q == K and not need_weights and not banded
                     and self.position_bias is None and not self.sink and not policy)
        hidden, empty = (None, None) if policy else attention_hidden(
            valid_lens, B, Q, K, queries.device, causal=causal and not is_causal,
            window=self.window if banded else None)
        q_all = self.W_q(queries)  # (B, Q, N)
        k_new, v_new = self.W_k(keys), self.W_v(values)  # (B, K_new, G·N/H): new tensors, ours
        clean = cache is None or (valid_lens is None and not banded)  # (the causal mask alone
        # hides no key from every query; lengths and a window may)
        if cache is None and (valid_lens is not None or banded):  # keys no query may see
            unseen = unseen_rows(hidden)  # (B, K, 1) become 0, in place: 0 · NaN would be NaN
            k_new.masked_fill_(unseen, 0.0)
            v_new.masked_fill_(unseen, 0.0)
        q = transpose_qkv(q_all, self.num_heads)  # (B, H, Q, N/H)
        k = transpose_qkv(k_new, self.num_kv_heads)  # (B, G, K_new, N/H)
        v = transpose_qkv(v_new, self.num_kv_heads)  # (B, G, K_new, N/H)
        in_cache = self.rotary and cache is not None and cache.rope_positions == "cache"
        if self.rotary and not in_cache:  # keys at start, …, K − 1; query i at K − Q + i
            q = apply_rotary(q, torch.arange(K - Q, K, device=q.device), base=self.rotary_base,
                             scale=self.rotary_scale)
            k = apply_rotary(k, torch.arange(start, K, device=k.device), base=self.rotary_base,
                             scale=self.rotary_scale)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, G, K, N/H): the cached keys, then the new ones
        if in_cache:  # StreamingLLM: positions in the cache, 0 … n − 1, keys rotated only now
            n = k.shape[-2]
            q = apply_rotary(q, torch.arange(n - Q, n, device=q.device), base=self.rotary_base,
                             scale=self.rotary_scale)
            k = apply_rotary(k, torch.arange(n, device=k.device), base=self.rotary_base,
                             scale=self.rotary_scale)
        if self.num_kv_heads != self.num_heads:  # query head h reads key-value head h // (H/G)
            k, v = (t.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)
                    for t in (k, v))  # (B, H, K, N/H): new tensors
        if policy:  # what the cache keeps visible, and the layer's own window on the positions
            visible = cache.mask(Q)  # (Q, n), True = takes part
            if self.window is not None:
                back = (torch.arange(K - Q, K, device=k.device)[:, None]
                        - cache.key_positions.to(k.device)[None, :])  # (Q, n): m − p
                visible = visible & (back < self.window)
            hidden = ~visible  # (Q, n); every query sees at least its own key: no empty row
        if hidden is not None and hidden.dim() == 3:  # (B, 1 or Q, K): the same for every head
            hidden = hidden.unsqueeze(1)  # (B, 1, 1 or Q, K)
            empty = None if empty is None else empty.unsqueeze(1)  # (B, 1, 1 or Q, 1)
        p = self.dropout if self.training else 0.0
        bias = None if self.position_bias is None else self.score_bias(Q, K).to(q.dtype)  # (H, Q, K)
        if self.sink:
            out, weights = self._attend_with_sink(q, k, v, hidden, p, clean, bias)
            self.attention_weights = weights if need_weights else None
        else:
            out, self.attention_weights = attend(
                q, k, v, hidden, empty, dropout_p=p, need_weights=need_weights,
                is_causal=is_causal, clean=clean, bias=bias)  # (B, H, Q, N/H)
        out = transpose_output(out)  # (B, Q, N): the heads side by side
        if self.gate:  # one sigmoid gate per output feature, from the query's own input
            out = out * torch.sigmoid(self.W_g(queries))  # (B, Q, N)
        return self.W_o(out)  # (B, Q, N)

    def _check_policy_cache(self, cache: KVCache, valid_lens: ValidLens, causal: bool,
                            num_queries: int, num_new: int) -> None:
        """Raise unless a cache with a window (and sinks) can serve this call: causal
        self-attention of the new tokens, no valid lengths, no position bias (its distances
        assume keys at 0 … K − 1), RoPE or no positions in the layer."""
        if not causal:
            raise ValueError(f"causal must be True with a cache that evicts (window="
                             f"{cache.window}): it serves a decoder, got causal=False")
        if valid_lens is not None:
            raise ValueError("valid_lens must be None with a cache that evicts (window="
                             f"{cache.window}), got {type(valid_lens).__name__}")
        if self.position_bias is not None:
            raise ValueError(f"cache must not evict (window=None) with position_bias="
                             f"{self.position_bias!r}, got window={cache.window}")
        if num_queries != num_new:
            raise ValueError(f"queries must be the new tokens with a cache that evicts: Q must "
                             f"equal the number of new keys ({num_new}), got {num_queries}")

    def _attend_with_sink(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hidden: torch.Tensor | None,
        dropout_p: float, clean: bool, bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``attend``'s weights path with ``sink_softmax``: (out (B, H, Q, N/H), weights
        (B, H, Q, K)). ``hidden``: True = masked *out*, (B, 1, 1 or Q, K), (Q, K) or None."""
        scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)  # (B, H, Q, K)
        if bias is not None:
            scores = scores + bias  # (B, H, Q, K)
        sink = self.sink_logits.to(scores.dtype)[:, None, None]  # (H, 1, 1)
        weights = sink_softmax(scores, sink, None if hidden is None else ~hidden)  # (B, H, Q, K)
        if not clean and hidden is not None:  # values no query may see: 0 · NaN would be NaN
            v = torch.where(unseen_rows(hidden), 0.0, v)  # new tensor
        dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
        return dropped @ v, weights  # (B, H, Q, N/H)

    def score_bias(self, num_queries: int, num_keys: int) -> torch.Tensor:
        """What ``position_bias`` adds to the scores, (H, Q, K), in the parameters' dtype (at
        least float32): query i at position m = K − Q + i, key j at n = j, as ``forward`` places
        them. Entries with n > m (hidden by the causal mask) hold the formula's value at m − n
        (ALiBi) or bucket 0 (T5). With Q > K the first Q − K queries sit at negative positions:
        the causal mask hides every key from them, so ``forward`` gives them zeros, as without
        a bias."""
        if self.position_bias is None:
            raise ValueError("position_bias must be 'alibi' or 't5' for score_bias, got None")
        Q = check_int("num_queries", num_queries, 0)
        K = check_int("num_keys", num_keys, 0)
        weight = self.W_q.weight
        dtype = torch.promote_types(weight.dtype, torch.float32)
        m = torch.arange(K - Q, K, device=weight.device)  # (Q,): the queries' positions
        distance = m[:, None] - torch.arange(K, device=weight.device)[None, :]  # (Q, K): m − n
        if self.position_bias == "alibi":
            slopes = alibi_slopes(self.num_heads).to(dtype).to(weight.device)  # (H,)
            return -slopes[:, None, None] * distance.to(dtype)  # (H, Q, K)
        bias = self.relative_bias(t5_buckets(distance))  # (Q, K, H)
        return bias.permute(2, 0, 1).to(dtype)  # (H, Q, K)


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
