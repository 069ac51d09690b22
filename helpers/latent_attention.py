"""Multi-head latent attention (多头潜在注意力, MLA; DeepSeek-V2 2024, DeepSeek-V3): every head's keys
and values are rebuilt from one small latent per token, so the KV cache holds only that latent.

Legend: B batch, T tokens, Q queries, K keys (cached ones first), N num_hiddens, H heads,
d_h head size, d_c latent size, d_r decoupled RoPE size, L layers.
Mask convention: causal, lower-right (``causal_mask``), True = takes part.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    check_bool, check_floating, check_holds_data, check_int, check_like, check_positive_int,
    check_rank, check_real, check_size,
)
from .masking import attention_hidden, softmax_owned
from .rotary import apply_rotary

__all__ = ["LatentCache", "MultiHeadLatentAttention", "kv_cache_bytes", "MODEL_SHAPES",
           "CACHE_KINDS"]

CACHE_KINDS = ("mha", "gqa", "mqa", "mla")  # kv_cache_bytes' kinds


class LatentCache:
    """What MLA caches per layer: the latents c (B, T, d_c) and the decoupled RoPE keys k_R
    (B, T, d_r), already rotated at their positions (d_r may be 0: an empty last dim).

    ``append(latents, rope_keys)`` adds the new tokens' (B, T_new, d_c) and (B, T_new, d_r) and
    returns all held; ``length`` is T. Both must be floating-point, agree in B and T_new, share
    one dtype and device, and match what is held in B, d_c, d_r, dtype and device; anything
    else raises a ValueError and leaves the cache as it was. The cache holds its own copies.
    Memory: B · T · (d_c + d_r) numbers per layer, against 2 · B · H · T · d_h for ``KVCache``.
    """

    def __init__(self) -> None:
        self.latents: torch.Tensor | None = None
        self.rope_keys: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.latents is None else self.latents.shape[1]

    def append(
        self, latents: torch.Tensor, rope_keys: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add latents (B, T_new, d_c) and RoPE keys (B, T_new, d_r); return all held,
        (B, T + T_new, d_c) and (B, T + T_new, d_r)."""
        check_rank("latents", latents, 3, "(B, T_new, d_c)")
        check_rank("rope_keys", rope_keys, 3, "(B, T_new, d_r)")
        check_floating("latents", latents)
        check_floating("rope_keys", rope_keys)
        if rope_keys.shape[:2] != latents.shape[:2]:
            raise ValueError(f"rope_keys must have the shape (B, T_new) of latents = "
                             f"{tuple(latents.shape[:2])}, got {tuple(rope_keys.shape[:2])}")
        check_like("rope_keys", rope_keys, "latents", latents)
        if self.latents is None:
            check_holds_data("latents", latents)  # (rope_keys: on the device of latents)
            self.latents = latents.clone(memory_format=torch.contiguous_format)  # (B, T_new, d_c)
            self.rope_keys = rope_keys.clone(memory_format=torch.contiguous_format)  # (B, T_new, d_r)
            return self.latents, self.rope_keys
        for name, old, new in (("latents", self.latents, latents),
                               ("rope_keys", self.rope_keys, rope_keys)):
            if old.shape[0] != new.shape[0] or old.shape[-1] != new.shape[-1]:
                raise ValueError(f"new {name} must have shape (B, T_new, size) = "
                                 f"({old.shape[0]}, T_new, {old.shape[-1]}), got {tuple(new.shape)}")
            check_like(name, new, f"the cached {name}", old)
        self.latents = torch.cat([self.latents, latents], dim=1)  # (B, T + T_new, d_c)
        self.rope_keys = torch.cat([self.rope_keys, rope_keys], dim=1)  # (B, T + T_new, d_r)
        return self.latents, self.rope_keys

    def nbytes(self) -> int:
        """Bytes held: latents and RoPE keys together."""
        if self.latents is None:
            return 0
        return (self.latents.numel() * self.latents.element_size()
                + self.rope_keys.numel() * self.rope_keys.element_size())


class MultiHeadLatentAttention(nn.Module):
    """Causal self-attention whose keys and values are low-rank: MHA with k = W_uk c, v = W_uv c
    for a latent c = W_dkv x of size d_c, plus a decoupled RoPE part (DeepSeek-V2, section 2.1).

    ``MultiHeadLatentAttention(num_hiddens, num_heads, latent_size, *, head_size=None,
    rope_size=0, rotary_base=10000.0, bias=False, query_latent_size=None, latent_norm=False)``:
    N, H, d_c; d_h defaults to N // H; d_r = ``rope_size`` (even, 0: no RoPE). Layers: ``W_dkv``
    (N → d_c, down to the latent), ``W_uk``, ``W_uv`` (d_c → H·d_h, up from it), ``W_q``
    (→ H·d_h), with RoPE ``W_qr`` (→ H·d_r) and ``W_kr`` (N → d_r: one RoPE key shared by every
    head), and ``W_o`` (H·d_h → N). The queries are read from x itself (N → …, as in
    DeepSeek-V2-Lite) or, with ``query_latent_size`` = d_q, from a compressed query
    c_Q = RMSNorm(W_dq x) (``W_dq``: N → d_q, then ``q_norm``; ``W_q`` and ``W_qr`` are then
    d_q → …: DeepSeek-V2/V3's W_UQ and W_QR, d_q = q_lora_rank = 1536). ``latent_norm=True``
    normalises the latent, c = RMSNorm(W_dkv x) (``kv_norm``, DeepSeek's kv_a_layernorm), before
    it is cached and up-projected, so both paths below read the same normalised c; k_R is not
    normalised. Both norms: ``nn.RMSNorm(size, eps=1e-6)`` (DeepSeek's default), a learnt gain,
    no bias. ``bias=True`` gives biases to ``W_dkv``, ``W_dq``, ``W_q``, ``W_qr``, ``W_kr`` and
    ``W_o``, never to ``W_uk`` / ``W_uv``: a bias there would add a term that the absorbed path
    cannot fold into the latents.

    Head h scores key j: (q_C,h · k_C,h,j + q_R,h · k_R,j) / √(d_h + d_r), with k_C = W_uk c and
    q_C = W_q x (or W_q c_Q) split into heads, k_R = RoPE(W_kr x) and q_R = RoPE(W_qr x) (or of
    c_Q) (``apply_rotary``, half-split; DeepSeek's checkpoints pair the features interleaved,
    the same up to a permutation of the rows of ``W_qr`` and ``W_kr``). Positions: the K keys
    (cached ones first) sit at 0 … K − 1 and the T queries are the last T, query i at K − T + i
    (as ``MultiHeadAttention`` places them). Left out from DeepSeek-V3: YaRN (its
    ``rope_scaling``, factor 40), which stretches RoPE's low frequencies from 4,096 positions
    to 163,840 and multiplies the scale by mscale² = (0.1 ln 40 + 1)² ≈ 1.87 (0.135 instead of
    1/√192 ≈ 0.072); here RoPE is plain and the scale 1/√(d_h + d_r), for models trained at
    their own length (``rotary.py`` builds RoPE alone; scaling it is notebook 10's subject).

    ``forward(X (B, T, N), *, causal=True, cache=None, absorbed=False, need_weights=True)`` →
    (B, T, N). ``causal``: ``causal_mask`` (lower-right); False: every key. ``cache``: a
    ``LatentCache`` that the new latents and RoPE keys (rotated once, before caching) are appended
    to; attention then runs over all held. ``absorbed=True`` is the inference path: W_uk goes
    into the query (q̃_h = W_uk,hᵀ q_C,h, size d_c, and q_C,h · k_C,h,j = q̃_h · c_j) and W_uv
    into the output (o_h = Σ_j w_hj c_j, out = Σ_h W_o,h W_uv,h o_h), so k_C and v are never
    built: attention runs on the latents, as multi-query attention with keys [c; k_R] of size
    d_c + d_r shared by every head. Both paths give the same numbers up to rounding. With
    ``need_weights`` the weights are kept in ``attention_weights`` (B, H, T, K); without, the
    work goes to ``F.scaled_dot_product_attention`` and ``attention_weights`` is None.
    A query that sees no key gets a zero output (then only ``W_o``'s bias).
    """

    def __init__(
        self, num_hiddens: int, num_heads: int, latent_size: int, *, head_size: int | None = None,
        rope_size: int = 0, rotary_base: float = 10000.0, bias: bool = False,
        query_latent_size: int | None = None, latent_norm: bool = False,
    ) -> None:
        super().__init__()
        N = check_positive_int("num_hiddens", num_hiddens)
        H = check_positive_int("num_heads", num_heads)
        d_c = check_positive_int("latent_size", latent_size)
        if head_size is None:
            if N < H:
                raise ValueError(f"num_hiddens must be at least num_heads when head_size is None "
                                 f"(it defaults to num_hiddens // num_heads), got num_hiddens={N}, "
                                 f"num_heads={H}")
            head_size = N // H
        d_h = check_positive_int("head_size", head_size)
        d_r = check_int("rope_size", rope_size, 0)
        if d_r % 2:
            raise ValueError(f"rope_size must be an even int >= 0 (RoPE turns pairs of features; "
                             f"0: no RoPE), got {rope_size!r}")
        self.rotary_base = check_real("rotary_base", rotary_base, above=1.0)
        check_bool("bias", bias)
        d_q = None if query_latent_size is None else check_positive_int(
            "query_latent_size", query_latent_size)
        check_bool("latent_norm", latent_norm)
        self.num_hiddens, self.query_latent_size = N, d_q
        self.num_heads, self.head_size, self.latent_size, self.rope_size = H, d_h, d_c, d_r
        self.W_dkv = nn.Linear(N, d_c, bias=bias)  # down to the latent: all that is cached
        self.kv_norm = nn.RMSNorm(d_c, eps=1e-6) if latent_norm else None  # on c, before caching
        # queries: from x (N → …) or from the compressed query c_Q = RMSNorm(W_dq x) (d_q → …)
        self.W_dq = None if d_q is None else nn.Linear(N, d_q, bias=bias)
        self.q_norm = None if d_q is None else nn.RMSNorm(d_q, eps=1e-6)
        q_in = N if d_q is None else d_q
        self.W_uk = nn.Linear(d_c, H * d_h, bias=False)  # up: the keys of every head
        self.W_uv = nn.Linear(d_c, H * d_h, bias=False)  # up: the values of every head
        self.W_q = nn.Linear(q_in, H * d_h, bias=bias)
        self.W_qr = nn.Linear(q_in, H * d_r, bias=bias) if d_r else None  # RoPE queries, per head
        self.W_kr = nn.Linear(N, d_r, bias=bias) if d_r else None  # one RoPE key for all heads
        self.W_o = nn.Linear(H * d_h, N, bias=bias)
        self.attention_weights: torch.Tensor | None = None

    def kv_numbers_per_token(self) -> int:
        """Numbers cached per token and layer: d_c + d_r (MHA: 2 · H · d_h)."""
        return self.latent_size + self.rope_size

    def forward(
        self, X: torch.Tensor, *, causal: bool = True, cache: LatentCache | None = None,
        absorbed: bool = False, need_weights: bool = True,
    ) -> torch.Tensor:
        check_rank("X", X, 3, "(B, T, N)")
        check_floating("X", X)
        check_size("feature size of X (N)", self.num_hiddens, X.shape[-1])
        check_like("X", X, "the module's parameters", self.W_dkv.weight)
        check_bool("causal", causal)
        check_bool("absorbed", absorbed)
        check_bool("need_weights", need_weights)
        B, T, _ = X.shape
        H, d_h, d_c, d_r = self.num_heads, self.head_size, self.latent_size, self.rope_size
        if cache is not None:
            self._check_cache(cache, X)
        start = 0 if cache is None else cache.length  # positions continue after the cache
        K = start + T
        c = self.W_dkv(X)  # (B, T, d_c)
        if self.kv_norm is not None:
            c = self.kv_norm(c)  # normalised once, before caching: both paths read this c
        if d_r:  # rotated once, at the keys' own positions, before they are cached
            k_r = apply_rotary(self.W_kr(X), torch.arange(start, K, device=X.device),
                               base=self.rotary_base)  # (B, T, d_r)
        else:
            k_r = X.new_zeros(B, T, 0)  # (B, T, 0)
        if cache is not None:
            c, k_r = cache.append(c, k_r)  # (B, K, d_c), (B, K, d_r): the cached ones first
        q_in = X if self.W_dq is None else self.q_norm(self.W_dq(X))  # (B, T, N) or (B, T, d_q)
        q_c = self.W_q(q_in).reshape(B, T, H, d_h).transpose(1, 2)  # (B, H, T, d_h)
        if d_r:
            q_r = self.W_qr(q_in).reshape(B, T, H, d_r).transpose(1, 2)  # (B, H, T, d_r)
            q_r = apply_rotary(q_r, torch.arange(K - T, K, device=X.device), base=self.rotary_base)
        else:
            q_r = X.new_zeros(B, H, T, 0)  # (B, H, T, 0)
        hidden, empty = attention_hidden(None, B, T, K, X.device, causal=causal)  # (T, K) or None
        scale = 1.0 / math.sqrt(d_h + d_r)
        if not absorbed:  # MHA with keys [k_C; k_R] of size d_h + d_r and values v, per head
            k_c = self.W_uk(c).reshape(B, K, H, d_h).transpose(1, 2)  # (B, H, K, d_h)
            v = self.W_uv(c).reshape(B, K, H, d_h).transpose(1, 2)  # (B, H, K, d_h)
            q = torch.cat([q_c, q_r], dim=-1)  # (B, H, T, d_h + d_r)
            k = torch.cat([k_c, k_r.unsqueeze(1).expand(B, H, K, d_r)], dim=-1)  # (B, H, K, d_h + d_r)
            out, self.attention_weights = _attend(q, k, v, hidden, empty, scale, need_weights)
            return self.W_o(out.transpose(1, 2).reshape(B, T, H * d_h))  # (B, T, N)
        # absorbed: W_uk into the queries, W_uv into W_o; attention over the latents themselves
        W_uk = self.W_uk.weight.reshape(H, d_h, d_c)  # (H, d_h, d_c): rows h·d_h … of W_uk
        W_uv = self.W_uv.weight.reshape(H, d_h, d_c)  # (H, d_h, d_c)
        q_lat = q_c @ W_uk  # (B, H, T, d_c): q̃_h = W_uk,hᵀ q_C,h
        q = torch.cat([q_lat, q_r], dim=-1)  # (B, H, T, d_c + d_r)
        k = torch.cat([c, k_r], dim=-1).unsqueeze(1).expand(B, H, K, d_c + d_r)  # one for all heads
        o_lat, self.attention_weights = _attend(
            q, k, c.unsqueeze(1).expand(B, H, K, d_c), hidden, empty, scale, need_weights)  # (B, H, T, d_c)
        # (an inference engine multiplies W_o,h W_uv,h, and W_q,h by W_uk,h, once, not per call)
        W_ov = self.W_o.weight.reshape(-1, H, d_h).transpose(0, 1) @ W_uv  # (H, N, d_c): W_o,h W_uv,h
        out = torch.einsum("bhtc,hnc->btn", o_lat, W_ov)  # (B, T, N): Σ_h W_o,h W_uv,h o_h
        return out if self.W_o.bias is None else out + self.W_o.bias

    def _check_cache(self, cache: object, X: torch.Tensor) -> None:
        """Raise unless ``cache`` is a LatentCache that fits this module and ``X`` (before any
        work, so that a refused call leaves the cache as it was)."""
        if not isinstance(cache, LatentCache):
            raise ValueError(f"cache must be a LatentCache or None, got {type(cache).__name__}")
        if cache.latents is None:
            return
        B, d_c, d_r = X.shape[0], self.latent_size, self.rope_size
        if (cache.latents.shape[0], cache.latents.shape[-1], cache.rope_keys.shape[-1]) != (B, d_c, d_r):
            raise ValueError(
                f"cache must hold latents (B, T, d_c) = ({B}, T, {d_c}) and RoPE keys (B, T, d_r) = "
                f"({B}, T, {d_r}), got {tuple(cache.latents.shape)} and {tuple(cache.rope_keys.shape)}")
        check_like("cache's latents", cache.latents, "X", X)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hidden: torch.Tensor | None,
    empty: torch.Tensor | None, scale: float, need_weights: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q kᵀ · scale) v with ``hidden`` (True = masked *out*) and the ``empty`` rows
    zeroed: (B, H, Q, d), (B, H, K, d), (B, H, K, d_v) → ((B, H, Q, d_v), weights or None)."""
    if need_weights:
        scores = (q * scale) @ k.transpose(-2, -1)  # (B, H, Q, K): a new tensor, ours to fill
        weights = softmax_owned(scores, hidden, empty)
        return weights @ v, weights
    mask = None if hidden is None else ~hidden  # (Q, K), True = takes part
    if k.shape[-2] == 0 or q.shape[-2] == 0:  # nothing to attend to, or nobody asking
        return q.new_zeros(*q.shape[:-1], v.shape[-1]), None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)  # (B, H, Q, d_v)
    return (out if empty is None else out.masked_fill(empty, 0.0)), None


def kv_cache_bytes(
    kind: str, *, num_layers: int, num_heads: int | None = None, num_kv_heads: int | None = None,
    head_size: int | None = None, latent_size: int | None = None, rope_size: int = 0,
    bytes_per_number: int = 2,
) -> int:
    """Bytes one token adds to the KV cache over all L layers, b = ``bytes_per_number`` (2: bf16):
    "mha" 2·L·H·d_h·b, "gqa" 2·L·G·d_h·b (G = ``num_kv_heads``), "mqa" 2·L·1·d_h·b, "mla"
    L·(d_c + d_r)·b. Each kind needs its sizes (mha: num_heads, head_size; gqa: num_kv_heads,
    head_size; mqa: head_size; mla: latent_size, rope_size even ≥ 0). The others may be given to
    describe the model (then they must be sizes, num_kv_heads must divide num_heads, be
    num_heads for "mha" and 1 for "mqa"); latent_size and rope_size are for "mla" only.
    """
    if not isinstance(kind, str) or kind not in CACHE_KINDS:
        raise ValueError(f"kind must be one of {CACHE_KINDS}, got {kind!r}")
    L = check_positive_int("num_layers", num_layers)
    b = check_positive_int("bytes_per_number", bytes_per_number)
    H, G, d_h, d_c = (None if v is None else check_positive_int(name, v) for name, v in (
        ("num_heads", num_heads), ("num_kv_heads", num_kv_heads), ("head_size", head_size),
        ("latent_size", latent_size)))
    d_r = check_int("rope_size", rope_size, 0)
    if d_r % 2:
        raise ValueError(f"rope_size must be an even int >= 0, got {rope_size!r}")
    needed = {"mha": ("num_heads", "head_size"), "gqa": ("num_kv_heads", "head_size"),
              "mqa": ("head_size",), "mla": ("latent_size",)}[kind]
    given = {"num_heads": H, "num_kv_heads": G, "head_size": d_h, "latent_size": d_c}
    for name in needed:
        if given[name] is None:
            raise ValueError(f"{name} must be given for kind={kind!r} (a positive int), got None")
    if kind != "mla" and (d_c is not None or d_r):
        raise ValueError(f"latent_size and rope_size must be None and 0 for kind={kind!r} (they "
                         f"size MLA's cache), got latent_size={latent_size!r}, rope_size={rope_size!r}")
    if kind == "mha" and G not in (None, H):
        raise ValueError(f"num_kv_heads must be None or num_heads={H} for 'mha', got {G}")
    if kind == "mqa" and G not in (None, 1):
        raise ValueError(f"num_kv_heads must be None or 1 for 'mqa', got {G}")
    if H is not None and G is not None and H % G:
        raise ValueError(f"num_kv_heads must divide num_heads={H} (each group shares one key and "
                         f"value head), got {G}")
    if kind == "mla":
        return L * (d_c + d_r) * b
    heads = {"mha": H, "gqa": G, "mqa": 1}[kind]
    return 2 * L * heads * d_h * b  # keys and values


# Real shapes, each from the model's config.json on Hugging Face (``source``); ``cache``: the
# arguments of ``kv_cache_bytes`` (bytes_per_number left at 2: bf16). Checked against copies of
# those configs found in public code: Falcon-7B (hidden_size 4544, n_head 71, n_layer 32,
# multi_query true), Llama-2-7B (hidden 4096 / 32 heads = head 128, 32 KV
# heads), Llama-3-8B (num_key_value_heads 8), Mistral-7B-v0.1 (num_key_value_heads 8,
# sliding_window 4096), DeepSeek-V2 (num_hidden_layers 60, num_attention_heads 128, kv_lora_rank
# 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128) and DeepSeek-V3
# (num_hidden_layers 61, num_attention_heads 128, kv_lora_rank 512, qk_rope_head_dim 64,
# qk_nope_head_dim 128, v_head_dim 128, hidden_size 7168, q_lora_rank 1536, rope_scaling yarn
# with factor 40, mscale 1.0, mscale_all_dim 1.0, original_max_position_embeddings 4096).
# DeepSeek-V2's hidden_size 5120 and q_lora_rank 1536 are the paper's d and d_c'.
# (Not read from huggingface.co itself: the copies agree.)
MODEL_SHAPES: dict[str, dict] = {
    "Llama-2-7B": dict(
        source="https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
        cache=dict(kind="mha", num_layers=32, num_heads=32, head_size=128)),
    "Llama-3-8B": dict(
        source="https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
        cache=dict(kind="gqa", num_layers=32, num_heads=32, num_kv_heads=8, head_size=128)),
    "Falcon-7B": dict(  # multi-query: hidden 4544 / 71 heads = head 64, one key-value head
        source="https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json",
        cache=dict(kind="mqa", num_layers=32, num_heads=71, head_size=64)),
    "Mistral-7B-v0.1": dict(
        source="https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
        cache=dict(kind="gqa", num_layers=32, num_heads=32, num_kv_heads=8, head_size=128),
        sliding_window=4096),  # the cache never holds more than the last 4096 tokens
    "DeepSeek-V2": dict(
        source="https://huggingface.co/deepseek-ai/DeepSeek-V2/blob/main/config.json",
        cache=dict(kind="mla", num_layers=60, num_heads=128, latent_size=512, rope_size=64),
        qk_nope_head_dim=128, v_head_dim=128,  # d_h of the keys (without RoPE) and values
        hidden_size=5120, q_lora_rank=1536),  # N and d_q, the compressed query's size
    "DeepSeek-V3": dict(
        source="https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
        cache=dict(kind="mla", num_layers=61, num_heads=128, latent_size=512, rope_size=64),
        qk_nope_head_dim=128, v_head_dim=128, hidden_size=7168, q_lora_rank=1536,
        rope_scaling=dict(type="yarn", factor=40, mscale=1.0, mscale_all_dim=1.0,
                          original_max_position_embeddings=4096)),  # YaRN: not built here
}
