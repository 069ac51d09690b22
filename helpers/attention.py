"""The two attention scorers (注意力评分函数): additive and scaled dot-product.

Legend: B batch, Q queries, K key-value pairs, D query/key size, V value size, N num_hiddens
(the additive scorer's hidden units).
Mask convention: ``valid_lens`` (B,) or (B, Q) keeps the first ``n`` keys; ``causal`` and its
sliding ``window`` hide keys as ``causal_mask`` does (lower-right); boolean masks use
``True`` = takes part (as ``F.scaled_dot_product_attention`` does).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    broadcast_shape, check_bool, check_floating, check_like, check_mask, check_positive_int,
    check_probability, check_qk_size, check_rank, check_size,
)
from .masking import ValidLens, attention_hidden, empty_rows, softmax_owned

__all__ = ["AdditiveAttention", "DotProductAttention", "scaled_dot_product"]


def scaled_dot_product(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
    mask: torch.Tensor | None = None, *, dropout_p: float = 0.0, need_weights: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(Q Kᵀ / √D) V over any leading dims: (..., Q, D), (..., K, D), (..., K, V).

    The leading dims broadcast as in ``torch.matmul`` (e.g. keys shared by a batch); the three
    tensors share one dtype and one device. ``mask`` is boolean, broadcastable to (..., Q, K),
    ``True`` = takes part. With ``need_weights`` it computes the weights itself and returns
    ``(out, weights)``; without, it calls ``F.scaled_dot_product_attention`` (fused kernels on a
    GPU) and returns ``(out, None)``. Either way a query with no key taking part gets an
    all-zero output, and a key that no query may see changes nothing, even holding NaN or inf.
    ``dropout_p`` in [0, 1) drops weights at every call (this function has no eval mode).
    """
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of at least 2 dimensions (..., T, size), "
                             f"got {tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        check_floating(name, t)
    check_like("keys", keys, "queries", queries)
    check_like("values", values, "queries", queries)
    check_qk_size(queries, keys)
    check_size("number of values (K, one per key)", keys.shape[-2], values.shape[-2])
    batch = broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
    if batch is None:
        raise ValueError(
            "leading (batch) dims of queries, keys and values must broadcast together, got "
            f"{tuple(queries.shape[:-2])}, {tuple(keys.shape[:-2])} and {tuple(values.shape[:-2])}"
        )
    dropout_p = check_probability("dropout_p", dropout_p)
    check_bool("need_weights", need_weights)
    if mask is not None:
        check_mask("mask", mask, (*batch, queries.shape[-2], keys.shape[-2]), "(..., Q, K)",
                   queries.device)
    return attend(queries, keys, values, None if mask is None else ~mask,
                  None if mask is None else empty_rows(mask),
                  dropout_p=dropout_p, need_weights=need_weights)


def unseen_rows(hidden: torch.Tensor) -> torch.Tensor:
    """The keys that no query may see, (..., K, 1), from ``hidden`` (..., 1 or Q, K) or (K,)."""
    if hidden.dim() == 1:
        return hidden[:, None]  # (K, 1)
    return (hidden if hidden.shape[-2] == 1 else hidden.all(dim=-2, keepdim=True)).mT  # (..., K, 1)


def attend(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, hidden: torch.Tensor | None,
    empty: torch.Tensor | None, *, dropout_p: float, need_weights: bool, is_causal: bool = False,
    clean: bool = False, bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``scaled_dot_product`` without the checks, for the helpers' own callers. ``hidden`` is
    the inverse mask (True = masked *out*, as ``lens_hidden`` builds it); ``empty`` marks
    (..., Q, 1) rows where no key takes part (None: there are none). ``is_causal`` (only with
    Q = K, ``hidden`` None and no weights) hands SDPA its own causal flag, so that the fused
    kernels that take no mask (flash attention on a GPU) can run. ``clean``: the caller vouches
    that no key or value row hidden from every query can hold NaN or inf (it zeroed them, or
    there are none, as with no valid lengths), so the copies that zero them are skipped.
    ``bias``: a float tensor added to every scaled score, broadcasting against the scores
    (..., Q, K) (a position bias: ALiBi, T5); SDPA then takes it as a float ``attn_mask``,
    −inf where ``hidden``."""
    if is_causal and (need_weights or hidden is not None or bias is not None
                      or queries.shape[-2] != keys.shape[-2]):
        raise ValueError("is_causal needs Q = K, no other mask and need_weights=False")
    clean = clean or hidden is None
    if not clean:  # a weight of exactly 0 does not stop NaN or inf (0 · NaN = NaN), so
        unseen = unseen_rows(hidden)  # the rows that no query may see, (..., K, 1), become 0
        values = torch.where(unseen, 0.0, values)  # new tensor
    if need_weights:
        scale = 1.0 / math.sqrt(queries.shape[-1])
        scores = (queries * scale) @ keys.transpose(-2, -1)  # (..., Q, K): scaled on the Q side
        if bias is not None:
            scores = scores + bias  # (..., Q, K): a new tensor, softmax_owned may write into it
        weights = softmax_owned(scores, hidden, empty)
        dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
        return dropped @ values, weights  # (..., Q, V)
    mask = None
    if not clean:
        keys = torch.where(unseen, 0.0, keys)  # SDPA adds -inf to a NaN score: it stays NaN
    if bias is not None:  # a float mask, added to the scores: −inf where hidden
        mask = (bias if hidden is None else torch.where(hidden, -math.inf, bias)).to(queries.dtype)
    elif hidden is not None:
        mask = ~hidden if hidden.dim() > 1 else ~hidden[None]  # True = takes part; SDPA wants (Q, K)
    if not queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]:  # broadcast them first:
        lead = broadcast_shape(queries.shape[:-2], keys.shape[:-2], values.shape[:-2])
        queries, keys, values = (t.expand(*lead, *t.shape[-2:]) for t in (queries, keys, values))
        # (views; SDPA's own broadcasting gets the output's shape wrong when a size is 0)
    one_head = queries.dim() == keys.dim() == values.dim() == 3
    if one_head:  # fused kernels need (B, H, T, size): add H = 1 (masks of < 3 dims broadcast)
        queries, keys, values = (t.unsqueeze(-3) for t in (queries, keys, values))
        mask, empty = (t.unsqueeze(-3) if t is not None and t.dim() >= 3 else t for t in (mask, empty))
    out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, dropout_p=dropout_p,
                                         is_causal=is_causal)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)  # rows with nothing to see (SDPA leaves them NaN)
    return (out.squeeze(-3) if one_head else out), None  # (..., Q, V)


class DotProductAttention(nn.Module):
    """Scaled dot-product attention (缩放点积注意力): queries and keys share the size D.

    ``forward(queries (B, Q, D), keys (B, K, D), values (B, K, V), valid_lens=None)`` → (B, Q, V).
    Mask convention (as ``causal_mask``'s True = takes part): a key takes part only if it lies
    within the query's valid length (``valid_lens`` (B,) or (B, Q)) **and**, with
    ``causal=True``, not in the query's future (lower-right aligned, so Q < K works with cached
    keys) **and**, with ``window=W`` (an int ≥ 1, only with ``causal=True``), fewer than W
    positions behind it: sliding-window attention, query i sees keys K − Q + i − W < j ≤ K − Q + i.
    A query that sees no key gets all-zero weights and output, never NaN.
    Keys that no query may see change nothing, even holding NaN or inf.
    The weights of the last call are kept in ``attention_weights`` (B, Q, K), or None when
    called with ``need_weights=False`` (then PyTorch's fused SDPA does the work).
    """

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
        valid_lens: ValidLens = None, *, need_weights: bool = True, causal: bool = False,
        window: int | None = None,
    ) -> torch.Tensor:
        check_qkv(queries, keys, values, same_qk_size=True)
        check_bool("need_weights", need_weights)
        check_bool("causal", causal)
        window = check_window(window, causal)
        B, Q, _ = queries.shape
        K = keys.shape[1]
        banded = window is not None and window < K and Q > 0  # the window hides some key
        is_causal = causal and not banded and valid_lens is None and Q == K and not need_weights
        hidden, empty = attention_hidden(valid_lens, B, Q, K, queries.device,
                                         causal=causal and not is_causal,
                                         window=window if banded else None)
        p = self.dropout.p if self.training else 0.0
        clean = valid_lens is None and not banded  # causal alone hides no key from every
        # query (key j is seen from position j on); a window may (its keys are zeroed then)
        out, self.attention_weights = attend(
            queries, keys, values, hidden, empty, dropout_p=p, need_weights=need_weights,
            is_causal=is_causal, clean=clean)
        return out


class AdditiveAttention(nn.Module):
    """Additive attention (加性注意力): score(q, k) = w_vᵀ tanh(W_q q + W_k k), no biases.

    Queries (B, Q, D_q) and keys (B, K, D_k) may differ in size.
    ``forward(queries, keys, values (B, K, V), valid_lens=None)`` → (B, Q, V);
    the weights of the last call are kept in ``attention_weights`` (B, Q, K).
    """

    def __init__(self, key_size: int, query_size: int, num_hiddens: int, dropout: float = 0.0) -> None:
        super().__init__()
        key_size, query_size, num_hiddens = (check_positive_int(name, size) for name, size in (
            ("key_size", key_size), ("query_size", query_size), ("num_hiddens", num_hiddens)))
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.attention_weights: torch.Tensor | None = None

    def get_scores(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Unnormalised scores (B, Q, K) of queries (B, Q, D_q) and keys (B, K, D_k)."""
        self._check_qk(queries, keys)
        q, k = self.W_q(queries), self.W_k(keys)  # (B, Q, N), (B, K, N)
        features = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))  # (B, Q, K, N)
        return self.w_v(features).squeeze(-1)  # (B, Q, K)

    def forward(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
        valid_lens: ValidLens = None,
    ) -> torch.Tensor:
        check_qkv(queries, keys, values, same_qk_size=False)
        self._check_qk(queries, keys)
        B, Q, _ = queries.shape
        hidden, empty = attention_hidden(valid_lens, B, Q, keys.shape[1], queries.device)
        if hidden is not None:
            values = torch.where(unseen_rows(hidden), 0.0, values)  # 0 · NaN would be NaN
        self.attention_weights = softmax_owned(self.get_scores(queries, keys), hidden, empty)
        return torch.bmm(self.dropout(self.attention_weights), values)  # (B, Q, V)

    def _check_qk(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        """Raise unless queries (B, Q, D_q) and keys (B, K, D_k) fit the module's layers."""
        check_rank("queries", queries, 3, "(B, Q, D_q)")
        check_rank("keys", keys, 3, "(B, K, D_k)")
        check_floating("queries", queries)
        check_floating("keys", keys)
        check_like("queries", queries, "the module's parameters", self.W_q.weight)
        check_like("keys", keys, "queries", queries)
        check_size("batch size of keys (B)", queries.shape[0], keys.shape[0])
        check_size("feature size of queries (query_size)", self.W_q.in_features, queries.shape[-1])
        check_size("feature size of keys (key_size)", self.W_k.in_features, keys.shape[-1])


def check_window(window: object, causal: bool) -> int | None:
    """Return ``window`` as an int (None stays None); raise unless it is None or an int ≥ 1
    given together with ``causal=True`` (a sliding window is a band of the causal mask)."""
    if window is None:
        return None
    window = check_positive_int("window", window)
    if not causal:
        raise ValueError(f"window must come with causal=True (a sliding window needs "
                         f"causal=True), got causal={causal!r} with window={window}")
    return window


def check_qkv(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              *, same_qk_size: bool) -> None:
    """Check queries (B, Q, D), keys (B, K, D), values (B, K, V) agree; raise ValueError if not."""
    check_rank("queries", queries, 3, "(B, Q, D)")
    check_rank("keys", keys, 3, "(B, K, D)")
    check_rank("values", values, 3, "(B, K, V)")
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        check_floating(name, t)
    check_like("keys", keys, "queries", queries)
    check_like("values", values, "queries", queries)
    check_size("batch size of keys (B)", queries.shape[0], keys.shape[0])
    check_size("batch size of values (B)", queries.shape[0], values.shape[0])
    check_size("number of values (K, one per key)", keys.shape[1], values.shape[1])
    if same_qk_size:
        check_qk_size(queries, keys)
