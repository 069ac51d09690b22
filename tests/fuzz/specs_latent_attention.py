"""Specs for ``helpers.latent_attention``: the LatentCache, MultiHeadLatentAttention (naive and
absorbed paths, with a cache) and ``kv_cache_bytes`` (see ``tests/fuzz/__init__.py`` for the
format).

The reference is MLA written out as plain multi-head attention in float64: per head the keys
[W_uk c ; RoPE(W_kr x)], the queries [W_q x ; RoPE(W_qr x)] (queries at the last positions
K − Q + i), the values W_uv c, softmax with the lower-right causal mask, then W_o; with
DeepSeek's options, c = RMSNorm(W_dkv x) and the queries read c_Q = RMSNorm(W_dq x) instead of x.
"""

from __future__ import annotations

import math

import torch

from helpers.kv_cache import KVCache
from helpers.latent_attention import (
    CACHE_KINDS, LatentCache, MultiHeadLatentAttention, kv_cache_bytes,
)
from tests.fuzz import Case, Int, OneOf, Spec, T
from tests.fuzz.specs_model import close, rand, seeded


def linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """x Wᵀ + b in float64."""
    out = x.double() @ layer.weight.double().T
    return out if layer.bias is None else out + layer.bias.double()


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Half-split RoPE written out: features i and i + D/2 of position p turned by
    p · base^(−2i/D), float64."""
    x = x.double()
    D = x.shape[-1]
    angles = positions.double()[:, None] * base ** (-2 * torch.arange(D // 2, dtype=torch.float64) / D)
    a, b = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1)


def rms(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    """RMSNorm written out (eps 1e-6, DeepSeek's), float64."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * gain.double()


# ------------------------------------------------------------------------ the reference
def mla_reference(m: MultiHeadLatentAttention, X_all: torch.Tensor, num_queries: int,
                  causal: bool = True) -> torch.Tensor:
    """The last ``num_queries`` rows of MLA over all tokens ``X_all`` (B, K, N) (the cached
    ones first), written out as MHA with low-rank keys and values; (B, Q, N), float64."""
    B, K, _ = X_all.shape
    Q, H, d_h, d_r = num_queries, m.num_heads, m.head_size, m.rope_size
    c = linear(m.W_dkv, X_all)  # (B, K, d_c)
    if m.kv_norm is not None:
        c = rms(c, m.kv_norm.weight)
    k = (c @ m.W_uk.weight.double().T).reshape(B, K, H, d_h).transpose(1, 2)  # (B, H, K, d_h)
    v = (c @ m.W_uv.weight.double().T).reshape(B, K, H, d_h).transpose(1, 2)
    X = X_all[:, K - Q:]
    X_q = X if m.W_dq is None else rms(linear(m.W_dq, X), m.q_norm.weight)  # (B, Q, N or d_q)
    q = linear(m.W_q, X_q).reshape(B, Q, H, d_h).transpose(1, 2)  # (B, H, Q, d_h)
    if d_r:
        k_r = rotate(linear(m.W_kr, X_all), torch.arange(K), m.rotary_base)  # (B, K, d_r)
        q_r = rotate(linear(m.W_qr, X_q).reshape(B, Q, H, d_r).transpose(1, 2), torch.arange(K - Q, K),
                     m.rotary_base)  # (B, H, Q, d_r)
        k = torch.cat([k, k_r[:, None].expand(B, H, K, d_r)], dim=-1)
        q = torch.cat([q, q_r], dim=-1)
    scores = q @ k.mT / math.sqrt(d_h + d_r)  # (B, H, Q, K)
    if causal:
        seen = torch.arange(K)[None, :] <= torch.arange(Q)[:, None] + (K - Q)  # (Q, K)
        scores = scores.masked_fill(~seen, -math.inf)
    w = scores.softmax(-1).nan_to_num(0.0)  # a query with no key: all zeros
    return linear(m.W_o, (w @ v).transpose(1, 2).reshape(B, Q, H * d_h))  # (B, Q, N)


# ----------------------------------------------------------------------- the modules
MLA = seeded(lambda: MultiHeadLatentAttention(12, 3, 7, head_size=5, rope_size=4, rotary_base=100.0))
MLA_PLAIN = seeded(lambda: MultiHeadLatentAttention(12, 3, 7, head_size=5, bias=True))  # no RoPE
MLA_DEEPSEEK = seeded(lambda: MultiHeadLatentAttention(  # compressed queries, normalised latent
    12, 3, 7, head_size=5, rope_size=4, rotary_base=100.0, bias=True, query_latent_size=6,
    latent_norm=True))


def filled_cache(B=2, T_=3, d_c=7, d_r=4, dtype=torch.float32) -> LatentCache:
    cache = LatentCache()
    cache.append(rand(B, T_, d_c, dtype=dtype), rand(B, T_, d_r, dtype=dtype))
    return cache


def prefilled(module: MultiHeadLatentAttention, X: torch.Tensor) -> LatentCache:
    cache = LatentCache()
    with torch.no_grad():
        module(X, cache=cache)
    return cache


def forward_check(module: MultiHeadLatentAttention):
    """The check of a call on ``module`` with no cache: the reference's rows."""
    return lambda out, kw: close(out, mla_reference(module, kw["X"], kw["X"].shape[1], bool(kw["causal"])))


def cache_bytes(kw: dict) -> int:
    """kv_cache_bytes' formula, written out."""
    L, b = kw["num_layers"], kw["bytes_per_number"]
    if kw["kind"] == "mla":
        return L * (kw["latent_size"] + kw["rope_size"]) * b
    heads = {"mha": kw["num_heads"], "gqa": kw["num_kv_heads"], "mqa": 1}[kw["kind"]]
    return 2 * L * heads * kw["head_size"] * b


def cache_bytes_valid(kw: dict) -> bool:
    """Which calls of kv_cache_bytes are valid as a whole (each argument following its rule)."""
    kind, H, G = kw["kind"], kw["num_heads"], kw["num_kv_heads"]
    needed = {"mha": ("num_heads", "head_size"), "gqa": ("num_kv_heads", "head_size"),
              "mqa": ("head_size",), "mla": ("latent_size",)}[kind]
    return (all(kw[name] is not None for name in needed) and kw["rope_size"] % 2 == 0
            and (kind == "mla" or (kw["latent_size"] is None and kw["rope_size"] == 0))
            and (kind != "mha" or G is None or G == H) and (kind != "mqa" or G in (None, 1))
            and (H is None or G is None or H % G == 0))


is_latent_cache = lambda v: v is None or isinstance(v, LatentCache)  # noqa: E731
FORWARD_KW = lambda: dict(X=rand(2, 5, 12), causal=True, cache=None, absorbed=False,  # noqa: E731
                          need_weights=True)


SPECS: list[Spec] = [
    # ---------------------------------------------------------------- LatentCache
    Spec("helpers.latent_attention.LatentCache", call=LatentCache, good=dict,
         check=lambda c, kw: isinstance(c, LatentCache) and c.length == 0 and c.nbytes() == 0
         and c.latents is None and c.rope_keys is None),
    Spec("helpers.latent_attention.LatentCache.append",
         call=lambda cache=None, **kw: (LatentCache() if cache is None else cache).append(**kw),
         good=lambda: dict(latents=rand(2, 3, 7), rope_keys=rand(2, 3, 4)),
         rules={"latents": T(rank=3), "rope_keys": T(rank=3)},
         check=lambda out, kw: torch.equal(out[0], kw["latents"]) and torch.equal(out[1], kw["rope_keys"]),
         bad=[Case("T_new-differs", lambda kw: kw.update(rope_keys=rand(2, 2, 4)), r"rope_keys must"),
              Case("B-differs", lambda kw: kw.update(rope_keys=rand(1, 3, 4)), r"rope_keys must"),
              Case("onto-float32-float64", lambda kw: kw.update(
                  cache=filled_cache(), latents=rand(2, 1, 7, dtype=torch.float64),
                  rope_keys=rand(2, 1, 4, dtype=torch.float64)), r"latents must"),
              Case("onto-cpu-meta", lambda kw: kw.update(
                  cache=filled_cache(), latents=torch.empty(2, 1, 7, device="meta"),
                  rope_keys=torch.empty(2, 1, 4, device="meta")), r"latents must"),
              Case("onto-B-2-B-1", lambda kw: kw.update(cache=filled_cache(), latents=rand(1, 1, 7),
                                                        rope_keys=rand(1, 1, 4)), r"latents must"),
              Case("onto-d_c-differs", lambda kw: kw.update(cache=filled_cache(), latents=rand(2, 1, 6),
                                                            rope_keys=rand(2, 1, 4)), r"latents must"),
              Case("onto-d_r-differs", lambda kw: kw.update(cache=filled_cache(), latents=rand(2, 1, 7),
                                                            rope_keys=rand(2, 1, 2)), r"rope_keys must")],
         edge=[Case("onto-filled", lambda kw: kw.update(cache=filled_cache(), latents=rand(2, 2, 7),
                                                        rope_keys=rand(2, 2, 4)),
                    lambda out, kw: torch.equal(out[0], torch.cat([rand(2, 3, 7), rand(2, 2, 7)], 1))
                    and torch.equal(out[1], torch.cat([rand(2, 3, 4), rand(2, 2, 4)], 1))),
               Case("d_r-0", lambda kw: kw.update(rope_keys=rand(2, 3, 0)),
                    lambda out, kw: out[1].shape == (2, 3, 0) and torch.equal(out[0], kw["latents"])),
               Case("float16", lambda kw: kw.update(latents=rand(2, 3, 7, dtype=torch.float16),
                                                    rope_keys=rand(2, 3, 4, dtype=torch.float16)),
                    lambda out, kw: out[0].dtype == torch.float16 and torch.equal(out[1], kw["rope_keys"])),
               Case("T_new-0", lambda kw: kw.update(latents=rand(2, 0, 7), rope_keys=rand(2, 0, 4)),
                    lambda out, kw: out[0].shape == (2, 0, 7))]),
    Spec("helpers.latent_attention.LatentCache.nbytes", call=lambda cache: cache.nbytes(),
         good=lambda: dict(cache=filled_cache()),
         check=lambda out, kw: out == 2 * 3 * (7 + 4) * 4,
         edge=[Case("empty", lambda kw: kw.update(cache=LatentCache()), lambda out, kw: out == 0),
               Case("float16-d_r-0", lambda kw: kw.update(cache=filled_cache(d_r=0, dtype=torch.float16)),
                    lambda out, kw: out == 2 * 3 * 7 * 2)]),
    # ---------------------------------------------------------------- MultiHeadLatentAttention
    Spec("helpers.latent_attention.MultiHeadLatentAttention", call=MultiHeadLatentAttention,
         good=lambda: dict(num_hiddens=12, num_heads=3, latent_size=7, head_size=None, rope_size=4,
                           rotary_base=10000.0, bias=False, query_latent_size=None,
                           latent_norm=False),
         rules={"num_hiddens": "size", "num_heads": "size", "latent_size": "size",
                "head_size": "size or None", "rope_size": Int(lo=0), "rotary_base": "above one",
                "bias": "flag", "query_latent_size": "size or None", "latent_norm": "flag"},
         valid=lambda kw: kw["rope_size"] % 2 == 0 and (
             kw["head_size"] is not None or kw["num_hiddens"] >= kw["num_heads"]),
         check=lambda m, kw: isinstance(m, MultiHeadLatentAttention)
         and m.head_size == (kw["head_size"] or kw["num_hiddens"] // kw["num_heads"])
         and type(m.head_size) is int and m.W_dkv.out_features == kw["latent_size"]
         and m.W_uk.out_features == m.W_uv.out_features == kw["num_heads"] * m.head_size
         and m.W_o.out_features == kw["num_hiddens"] and m.W_uk.bias is None and m.W_uv.bias is None
         and (m.W_q.bias is not None) == bool(kw["bias"])
         and (m.W_kr is None if kw["rope_size"] == 0 else m.W_kr.out_features == kw["rope_size"])
         and m.kv_numbers_per_token() == kw["latent_size"] + kw["rope_size"]
         and (m.W_dq is None if kw["query_latent_size"] is None
              else m.W_dq.out_features == m.W_q.in_features == kw["query_latent_size"])
         and (m.kv_norm is not None) == bool(kw["latent_norm"]),
         bad=[Case("rope_size-3", lambda kw: kw.update(rope_size=3), r"rope_size must"),
              Case("heads-more-than-hiddens", lambda kw: kw.update(num_hiddens=2), r"num_hiddens must")],
         edge=[Case("head_size-given", lambda kw: kw.update(num_hiddens=2, head_size=5),
                    lambda m, kw: m.head_size == 5 and m.W_q.out_features == 15),
               Case("no-rope", lambda kw: kw.update(rope_size=0, bias=True),
                    lambda m, kw: m.W_qr is None and m.W_kr is None and m.W_dkv.bias is not None),
               Case("deepseek-options", lambda kw: kw.update(query_latent_size=5, latent_norm=True, bias=True),
                    lambda m, kw: m.W_dq.out_features == 5 and m.q_norm.weight.shape == (5,)
                    and m.W_qr.in_features == 5 and m.kv_norm.weight.shape == (7,)
                    and m.W_dq.bias is not None and m.kv_numbers_per_token() == 11)]),
    Spec("helpers.latent_attention.MultiHeadLatentAttention.forward",
         call=lambda module=MLA, **kw: module(**kw), good=FORWARD_KW,
         rules={"X": T(rank=3), "causal": "flag", "cache": is_latent_cache, "absorbed": "flag",
                "need_weights": "flag"},
         check=forward_check(MLA),
         bad=[Case("X-width-10", lambda kw: kw.update(X=rand(2, 5, 10)), r"X"),
              Case("cache-KVCache", lambda kw: kw.update(cache=KVCache()), r"cache must"),
              Case("cache-batch-1", lambda kw: kw.update(cache=filled_cache(B=1)), r"cache must"),
              Case("cache-d_c-6", lambda kw: kw.update(cache=filled_cache(d_c=6)), r"cache must"),
              Case("cache-no-rope", lambda kw: kw.update(cache=filled_cache(d_r=0)), r"cache must"),
              Case("cache-float64", lambda kw: kw.update(cache=filled_cache(dtype=torch.float64)), r"cache"),
              Case("cache-of-rope-module", lambda kw: kw.update(module=MLA_PLAIN, cache=filled_cache()),
                   r"cache must")],
         edge=[Case(f"{'absorbed' if absorbed else 'naive'}{'-sdpa' if not weights else ''}"
                    f"{'-not-causal' if not causal else ''}",
                    lambda kw, a=absorbed, w=weights, c=causal: kw.update(absorbed=a, need_weights=w, causal=c),
                    forward_check(MLA))
               for absorbed in (False, True) for weights in (True, False) for causal in (True, False)
               if (absorbed, weights, causal) != (False, True, True)]
         + [Case(f"cache-continues-{'absorbed' if absorbed else 'naive'}",
                 lambda kw, a=absorbed: kw.update(cache=prefilled(MLA, rand(2, 5, 12)[:, :3]),
                                                  X=rand(2, 5, 12)[:, 3:], absorbed=a),
                 lambda out, kw: close(out, mla_reference(MLA, rand(2, 5, 12), 2)))
            for absorbed in (False, True)]
         + [Case(f"no-rope-bias-{'absorbed' if absorbed else 'naive'}",
                 lambda kw, a=absorbed: kw.update(module=MLA_PLAIN, absorbed=a),
                 forward_check(MLA_PLAIN)) for absorbed in (False, True)]
         + [Case(f"deepseek-options-{'absorbed' if absorbed else 'naive'}",
                 lambda kw, a=absorbed: kw.update(module=MLA_DEEPSEEK, absorbed=a),
                 forward_check(MLA_DEEPSEEK)) for absorbed in (False, True)]
         + [Case("deepseek-options-cache-continues",
                 lambda kw: kw.update(module=MLA_DEEPSEEK, cache=prefilled(MLA_DEEPSEEK, rand(2, 5, 12)[:, :3]),
                                      X=rand(2, 5, 12)[:, 3:], absorbed=True),
                 lambda out, kw: close(out, mla_reference(MLA_DEEPSEEK, rand(2, 5, 12), 2)))]
         + [Case("T-0", lambda kw: kw.update(X=rand(2, 0, 12)), lambda out, kw: out.shape == (2, 0, 12)),
            Case("T-0-absorbed-sdpa", lambda kw: kw.update(X=rand(2, 0, 12), absorbed=True, need_weights=False),
                 lambda out, kw: out.shape == (2, 0, 12)),
            Case("B-0", lambda kw: kw.update(X=rand(0, 5, 12)), lambda out, kw: out.shape == (0, 5, 12)),
            Case("T-1", lambda kw: kw.update(X=rand(2, 1, 12), absorbed=True), forward_check(MLA)),
            Case("empty-cache", lambda kw: kw.update(cache=LatentCache()), forward_check(MLA)),
            Case("float64-module", lambda kw: kw.update(
                module=seeded(lambda: MultiHeadLatentAttention(12, 3, 7, head_size=5, rope_size=4,
                                                               rotary_base=100.0)).double(),
                X=rand(2, 5, 12, dtype=torch.float64), absorbed=True),
                 lambda out, kw: out.dtype == torch.float64 and close(out, mla_reference(MLA, rand(2, 5, 12), 5)))]),
    Spec("helpers.latent_attention.MultiHeadLatentAttention.kv_numbers_per_token",
         call=lambda module=MLA: module.kv_numbers_per_token(), good=dict,
         check=lambda out, kw: out == 7 + 4 and type(out) is int,
         edge=[Case("no-rope", lambda kw: kw.update(module=MLA_PLAIN), lambda out, kw: out == 7)]),
    # ---------------------------------------------------------------- cache-size arithmetic
    Spec("helpers.latent_attention.kv_cache_bytes", call=kv_cache_bytes,
         good=lambda: dict(kind="gqa", num_layers=32, num_heads=32, num_kv_heads=8, head_size=128,
                           latent_size=None, rope_size=0, bytes_per_number=2),
         rules={"kind": OneOf(CACHE_KINDS), "num_layers": "size", "num_heads": "size or None",
                "num_kv_heads": "size or None", "head_size": "size or None",
                "latent_size": "size or None", "rope_size": Int(lo=0), "bytes_per_number": "size"},
         valid=cache_bytes_valid,
         check=lambda out, kw: type(out) is int and out == cache_bytes(kw),
         bad=[Case("mla-without-latent", lambda kw: kw.update(kind="mla"), r"latent_size must"),
              Case("gqa-3-of-32", lambda kw: kw.update(num_kv_heads=3), r"num_kv_heads must"),
              Case("mha-8-kv-heads", lambda kw: kw.update(kind="mha"), r"num_kv_heads must"),
              Case("mqa-8-kv-heads", lambda kw: kw.update(kind="mqa"), r"num_kv_heads must"),
              Case("rope-for-gqa", lambda kw: kw.update(rope_size=64), r"rope_size must"),
              Case("mla-odd-rope", lambda kw: kw.update(kind="mla", latent_size=512, rope_size=63,
                                                        num_kv_heads=None), r"rope_size must")],
         edge=[Case("llama-2-7b", lambda kw: kw.update(kind="mha", num_kv_heads=None),
                    lambda out, kw: out == 524_288),
               Case("deepseek-v3", lambda kw: kw.update(kind="mla", num_layers=61, num_heads=128,
                                                        num_kv_heads=None, head_size=None,
                                                        latent_size=512, rope_size=64),
                    lambda out, kw: out == 70_272),
               Case("mqa-fp8", lambda kw: kw.update(kind="mqa", num_kv_heads=1, bytes_per_number=1),
                    lambda out, kw: out == 2 * 32 * 128)]),
]
