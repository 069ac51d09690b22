"""Specs for the model stack: multihead (with ALiBi and T5's bias, sliding windows and attention
sinks), kv_cache, transformer (with ``generate``), rotary, and ``checks.check_holds_data`` (see
``tests/fuzz/__init__.py`` for the format).

The references are written out here in float64: projections, heads, RoPE (the rotation
formula, queries at positions K − Q + i, positions × rotary_scale), ALiBi's −s_h·(m − n) and
T5's buckets, the masks, LayerNorm, the feed-forward network.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import torch
import torch.nn.functional as F

from helpers import checks, rotary
from helpers.kv_cache import KVCache
from helpers.multihead import (
    POSITION_BIASES, MultiHeadAttention, alibi_slopes, t5_buckets, transpose_output, transpose_qkv,
)
from helpers.transformer import POSITIONAL, DecoderLM, TransformerBlock, generate
from tests.fuzz import Case, Int, OneOf, Spec, T

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Seeded normal numbers: the same shape gives the same tensor."""
    g = torch.Generator().manual_seed(sum(shape) + 7 * len(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def close(out: torch.Tensor, expected: torch.Tensor, tol: float = 1e-5) -> bool:
    return (isinstance(out, torch.Tensor) and out.shape == expected.shape
            and torch.allclose(out.double(), expected.double(), rtol=tol, atol=tol))


def seeded(make):
    """Build a module under a fixed seed, in eval mode (the same weights at every import)."""
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    try:
        return make().eval()
    finally:
        torch.random.set_rng_state(state)


# ------------------------------------------------------------------------ the references
def rotate(x: torch.Tensor, positions, base: float, interleaved: bool = False) -> torch.Tensor:
    """RoPE written out: pair i of position p turned by p · base^(−2i/D), float64."""
    x = x.double()
    D = x.shape[-1]
    i = torch.arange(D // 2, dtype=torch.float64)
    angles = torch.as_tensor(positions).double()[:, None] * base ** (-2 * i / D)  # (T, D/2)
    c, s = angles.cos(), angles.sin()
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., : D // 2], x[..., D // 2:])
    ra, rb = a * c - b * s, a * s + b * c
    if interleaved:
        return torch.stack((ra, rb), dim=-1).flatten(-2)
    return torch.cat((ra, rb), dim=-1)


def t5_bucket(distance: int, num_buckets: int = 32, max_distance: int = 128) -> int:
    """T5's decoder bucket of one distance m − n (negative: 0), written out."""
    distance = max(int(distance), 0)
    exact = num_buckets // 2
    if distance < exact:
        return distance
    grow = math.log(distance / exact) / math.log(max_distance / exact)
    return min(num_buckets - 1, exact + int(grow * (num_buckets - exact)))


def bias_reference(m: MultiHeadAttention, Q: int, K: int) -> torch.Tensor:
    """(H, Q, K) float64: ALiBi's −s_h·(m − n), s_h = 2^(−8h/H), or T5's scalar of the bucket of
    m − n; query i at m = K − Q + i."""
    H = m.num_heads
    distance = torch.arange(K - Q, K)[:, None] - torch.arange(K)[None, :]  # (Q, K)
    if m.position_bias == "alibi":
        slopes = torch.tensor([2.0 ** (-8 * h / H) for h in range(1, H + 1)], dtype=torch.float64)
        return -slopes[:, None, None] * distance
    rows = torch.tensor([[t5_bucket(d) for d in row] for row in distance.tolist()],
                        dtype=torch.long).reshape(Q, K)
    return m.relative_bias.weight.detach().double()[rows].permute(2, 0, 1)


def linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    out = x.double() @ layer.weight.double().T
    return out if layer.bias is None else out + layer.bias.double()


def layer_norm(norm: torch.nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight.double() + norm.bias.double()


def mha_reference(m: MultiHeadAttention, queries, keys, values, valid_lens=None,
                  causal=False) -> torch.Tensor:
    """softmax(q kᵀ/√d) v per head, keys past the valid length and (causal) in a query's future
    or W or more positions behind it (``m.window``) hidden, query i at position K − Q + i (for
    the causal mask and for RoPE); with ``m.sink_logits``, the softmax over the scores and one
    more column holding the head's logit, that column dropped; with G = ``m.num_kv_heads`` < H
    key-value heads each repeated H/G times (query head h reads head h // (H/G)); with
    ``m.gate`` the heads' output times sigmoid(W_g queries) before W_o; (B, Q, N)."""
    H, G = m.num_heads, m.num_kv_heads
    q = transpose_qkv(linear(m.W_q, queries), H)  # (B, H, Q, d)
    k, v = (transpose_qkv(linear(layer, x), G).repeat_interleave(H // G, dim=1) for layer, x in (
        (m.W_k, keys), (m.W_v, values)))  # (B, H, K, d)
    B, _, Q, d = q.shape
    K = k.shape[-2]
    take = torch.ones(B, 1, Q, K, dtype=torch.bool)
    if valid_lens is not None:
        lens = torch.as_tensor(valid_lens).reshape(B, 1, -1, 1)  # (B, 1, 1 or Q, 1)
        take = take & (torch.arange(K) < lens)
    if causal:  # query i at K − Q + i sees key j iff 0 ≤ (K − Q + i) − j < W (no window: W = K)
        back = torch.arange(Q)[:, None] + (K - Q) - torch.arange(K)[None, :]  # (Q, K)
        take = take & (back >= 0) & (back < (K if m.window is None else m.window))
    if m.rotary:
        s = m.rotary_scale
        q, k = rotate(q, torch.arange(K - Q, K) * s, m.rotary_base), rotate(k, torch.arange(K) * s, m.rotary_base)
    v = v.masked_fill(~take.any(-2, keepdim=True).mT, 0.0)  # (B, 1, K, 1): values no query sees
    k = k.masked_fill(~take.any(-2, keepdim=True).mT, 0.0)  # NaN keys no query sees: 0 · NaN
    scores = q @ k.mT / math.sqrt(d)  # (B, H, Q, K)
    if m.position_bias is not None:
        scores = scores + bias_reference(m, Q, K)
    scores = scores.masked_fill(~take, -math.inf)
    if m.sink_logits is None:
        w = scores.softmax(-1).nan_to_num(0.0)  # a row with no key: all zeros
    else:  # one more column holding each head's sink logit, dropped after the softmax
        sink = m.sink_logits.detach().double()[None, :, None, None].expand(*scores.shape[:-1], 1)
        w = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]  # (B, H, Q, K)
    heads = transpose_output(w @ v)  # (B, Q, N)
    if m.gate:
        heads = heads * torch.sigmoid(linear(m.W_g, queries))
    return linear(m.W_o, heads)


def block_reference(b: TransformerBlock, X, valid_lens=None, causal=False) -> torch.Tensor:
    X = X.double()
    Y = layer_norm(b.norm1, X)
    X = X + mha_reference(b.attention, Y, Y, Y, valid_lens, causal)
    act = F.gelu if isinstance(b.ffn[1], torch.nn.GELU) else F.relu
    return X + linear(b.ffn[2], act(linear(b.ffn[0], layer_norm(b.norm2, X))))


def lm_reference(m: DecoderLM, tokens: torch.Tensor) -> torch.Tensor:
    X = m.embedding.weight.double()[tokens]  # (B, T, N)
    if m.positional == "sinusoidal":
        X = X + m.P[: tokens.shape[1]].double()
    for block in m.blocks:
        X = block_reference(block, X, causal=True)
    return linear(m.head, layer_norm(m.norm, X))  # (B, T, V)


def greedy_reference(m: DecoderLM, prompt: torch.Tensor, num_new: int) -> torch.Tensor:
    tokens = prompt
    with torch.no_grad():
        for _ in range(num_new):
            tokens = torch.cat([tokens, m(tokens)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


# ----------------------------------------------------------------------- the modules
MHA = seeded(lambda: MultiHeadAttention(8, 2, query_size=4, key_size=6, value_size=5, rotary=True,
                                        rotary_base=100.0))
BLOCK = seeded(lambda: TransformerBlock(8, 2, 12, rotary=True))
LM = seeded(lambda: DecoderLM(5, 8, 2, 2, max_len=6, positional="rope"))


def random_t5_tables(module):
    """T5's tables start at 0: fill them (seeded), so that a wrong bucket shows."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for table in [x.weight for name, x in module.named_modules() if name.endswith("relative_bias")]:
            table.copy_(torch.randn(table.shape, generator=g))
    return module


MHA_BIAS = {kind: seeded(lambda kind=kind: random_t5_tables(MultiHeadAttention(
    8, 2, query_size=4, key_size=6, value_size=5, bias=True, position_bias=kind))) for kind in POSITION_BIASES}
MHA_PI = seeded(lambda: MultiHeadAttention(8, 2, query_size=4, key_size=6, value_size=5, rotary=True,
                                           rotary_scale=0.25))
BLOCK_BIAS = {kind: seeded(lambda kind=kind: random_t5_tables(TransformerBlock(8, 2, 12, position_bias=kind)))
              for kind in POSITION_BIASES}
LM_OTHER = {kind: seeded(lambda kind=kind: random_t5_tables(DecoderLM(5, 8, 2, 2, max_len=6, positional=kind)))
            for kind in ("alibi", "t5", "none", "sinusoidal")}
LM_PI = seeded(lambda: DecoderLM(5, 8, 2, 2, max_len=6, positional="rope", rotary_scale=0.5))


def random_sinks(module):
    """Sink logits start at 0: fill them (seeded), so that a wrong head or a lost sink shows."""
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("sink_logits"):
                p.copy_(torch.randn(p.shape, generator=g))
    return module


MHA_WIN = seeded(lambda: MultiHeadAttention(8, 2, query_size=4, key_size=6, value_size=5, window=2))
MHA_SINK = seeded(lambda: random_sinks(MultiHeadAttention(8, 2, query_size=4, key_size=6, value_size=5,
                                                          rotary=True, window=3, sink=True)))
MHA_WIN_ALIBI = seeded(lambda: random_sinks(MultiHeadAttention(8, 2, query_size=4, key_size=6, value_size=5,
                                                               position_bias="alibi", window=2, sink=True)))
MHA_GQA = seeded(lambda: random_sinks(MultiHeadAttention(8, 4, query_size=4, key_size=6, value_size=5,
                                                         rotary=True, window=3, sink=True, num_kv_heads=2,
                                                         gate=True, bias=True)))
MHA_MQA = seeded(lambda: MultiHeadAttention(8, 4, query_size=4, key_size=6, value_size=5, num_kv_heads=1))
BLOCK_WS = seeded(lambda: random_sinks(TransformerBlock(8, 2, 12, rotary=True, window=2, sink=True)))
LM_WS = seeded(lambda: random_sinks(DecoderLM(5, 8, 2, 2, max_len=6, positional="rope", window=[2, None],
                                              sink=True)))


def filled_cache(B=1, H=2, T_=3, d=4, dtype=torch.float32) -> KVCache:
    cache = KVCache()
    cache.append(rand(B, H, T_, d, dtype=dtype), rand(B, H, T_, d + 2, dtype=dtype))
    return cache


def prefilled(module, *args, **kwargs) -> KVCache:
    cache = KVCache() if not isinstance(module, DecoderLM) else None
    cache = module.new_cache() if cache is None else cache
    with torch.no_grad():
        module(*args, cache=cache, **kwargs)
    return cache


MHA_EVICT = seeded(lambda: MultiHeadAttention(8, 2, query_size=4, key_size=4, value_size=4, rotary=True))


def evicting_prefilled() -> KVCache:
    """A KVCache(window=2, sinks=1) that MHA_EVICT has fed three tokens (causal self-attention)."""
    cache = KVCache(window=2, sinks=1)
    x = rand(2, 3, 4)
    with torch.no_grad():
        MHA_EVICT(x, x, x, causal=True, cache=cache)
    return cache


def nan_past_lens(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[0, 2:] = math.nan  # batch row 0 has valid length 2
    return x


is_cache = lambda v: v is None or isinstance(v, KVCache)  # noqa: E731
is_cache_list = lambda v: v is None  # noqa: E731  (the pools hold no list of KVCache)
MHA_KW = lambda: dict(queries=rand(2, 3, 4), keys=rand(2, 5, 6), values=rand(2, 5, 5),  # noqa: E731
                      valid_lens=torch.tensor([2, 5]), need_weights=True, causal=True, cache=None)


SPECS: list[Spec] = [
    # ---------------------------------------------------------------- multihead
    Spec("helpers.multihead.transpose_qkv", call=transpose_qkv,
         good=lambda: dict(X=rand(2, 5, 12), num_heads=4),
         rules={"X": T(rank=3, dtype="any", same_dtype=False), "num_heads": "size"},
         valid=lambda kw: 12 % kw["num_heads"] == 0,
         check=lambda out, kw: torch.equal(out, torch.as_tensor(kw["X"]).reshape(
             2, 5, kw["num_heads"], 12 // kw["num_heads"]).permute(0, 2, 1, 3)),
         bad=[Case("num_heads-5", lambda kw: kw.update(num_heads=5)),
              Case("num_heads-24", lambda kw: kw.update(num_heads=24))],
         edge=[Case("T-0", lambda kw: kw.update(X=rand(2, 0, 12)), lambda out, kw: out.shape == (2, 4, 0, 3))]),
    Spec("helpers.multihead.transpose_output", call=transpose_output,
         good=lambda: dict(X=rand(2, 3, 5, 4)), rules={"X": T(rank=4, dtype="any", same_dtype=False)},
         check=lambda out, kw: torch.equal(out, torch.cat([kw["X"][:, h] for h in range(3)], dim=-1))),
    Spec("helpers.multihead.MultiHeadAttention", call=MultiHeadAttention,
         good=lambda: dict(num_hiddens=8, num_heads=2, dropout=0.0, bias=False, query_size=None,
                           key_size=None, value_size=None, rotary=False, rotary_base=10000.0,
                           rotary_scale=1.0, position_bias=None, window=None, sink=False,
                           num_kv_heads=None, gate=False),
         rules={"num_hiddens": "size", "num_heads": "size", "dropout": "probability", "bias": "flag",
                "query_size": "size or None", "key_size": "size or None", "value_size": "size or None",
                "rotary": "flag", "rotary_base": "above one", "rotary_scale": "positive",
                "position_bias": OneOf((None, *POSITION_BIASES)), "window": "size or None", "sink": "flag",
                "num_kv_heads": "size or None", "gate": "flag"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0 and (
             kw["num_kv_heads"] is None or kw["num_heads"] % kw["num_kv_heads"] == 0) and (
             not kw["rotary"] or kw["num_hiddens"] // kw["num_heads"] % 2 == 0) and (
             kw["rotary"] or kw["rotary_scale"] == 1),
         check=lambda m, kw: isinstance(m, MultiHeadAttention) and m.W_o.out_features == kw["num_hiddens"]
         and m.W_k.in_features == (kw["key_size"] or kw["num_hiddens"]) and m.num_heads == kw["num_heads"]
         and (m.W_q.bias is not None) == bool(kw["bias"]) and m.position_bias == kw["position_bias"]
         and hasattr(m, "relative_bias") == (kw["position_bias"] == "t5") and m.window == kw["window"]
         and (m.sink_logits is not None) == bool(kw["sink"]) and (m.W_g is not None) == bool(kw["gate"])
         and m.num_kv_heads == (kw["num_kv_heads"] or kw["num_heads"])
         and m.W_k.out_features == m.num_kv_heads * (kw["num_hiddens"] // kw["num_heads"]),
         bad=[Case("rotary-odd-head", lambda kw: kw.update(num_hiddens=6, rotary=True)),
              Case("heads-3-of-8", lambda kw: kw.update(num_heads=3)),
              Case("rotary_scale-without-rotary", lambda kw: kw.update(rotary_scale=0.5), r"rotary_scale must"),
              Case("position_bias-rope", lambda kw: kw.update(position_bias="rope"), r"position_bias must"),
              Case("kv-heads-not-dividing", lambda kw: kw.update(num_kv_heads=3), r"num_kv_heads must divide")],
         edge=[Case("rotary-head-2", lambda kw: kw.update(num_hiddens=4, rotary=True),
                    lambda m, kw: m.rotary and m.num_heads == 2),
               Case("rotary_scale-0.25", lambda kw: kw.update(rotary=True, rotary_scale=0.25),
                    lambda m, kw: m.rotary_scale == 0.25),
               Case("t5-table", lambda kw: kw.update(position_bias="t5", num_heads=4),
                    lambda m, kw: m.relative_bias.weight.shape == (32, 4) and bool((m.relative_bias.weight == 0).all())),
               Case("alibi-with-rotary", lambda kw: kw.update(position_bias="alibi", rotary=True),
                    lambda m, kw: m.rotary and m.position_bias == "alibi"),
               Case("sink-logits", lambda kw: kw.update(sink=True, num_heads=4),
                    lambda m, kw: m.sink_logits.shape == (4,) and bool((m.sink_logits == 0).all())
                    and m.sink_logits.requires_grad),
               Case("window-4-rotary", lambda kw: kw.update(window=4, rotary=True),
                    lambda m, kw: m.window == 4 and type(m.window) is int)]),
    Spec("helpers.multihead.MultiHeadAttention.forward", call=lambda module=MHA, **kw: module(**kw), good=MHA_KW,
         rules={"queries": T(rank=3), "keys": T(rank=3), "values": T(rank=3),
                "valid_lens": T(dtype="integer", optional=True, lists=True),
                "need_weights": "flag", "causal": "flag", "cache": is_cache},
         check=lambda out, kw: close(out, mha_reference(MHA, kw["queries"], kw["keys"], kw["values"],
                                                        kw["valid_lens"], kw["causal"])),
         bad=[Case("values-K-4", lambda kw: kw.update(values=rand(2, 4, 5))),
              Case("queries-size-5", lambda kw: kw.update(queries=rand(2, 3, 5))),
              Case("keys-batch-1", lambda kw: kw.update(keys=rand(1, 5, 6), values=rand(1, 5, 5))),
              Case("valid_lens-6", lambda kw: kw.update(valid_lens=torch.tensor([6, 1])), r"valid_lens must"),
              Case("valid_lens-shape", lambda kw: kw.update(valid_lens=torch.tensor([1, 2, 3])), r"valid_lens must"),
              Case("cache-batch-1", lambda kw: kw.update(cache=filled_cache(1, 2, 3, 4))),
              Case("cache-float64", lambda kw: kw.update(cache=filled_cache(2, 2, 3, 4, torch.float64))),
              Case("alibi-not-causal", lambda kw: kw.update(module=MHA_BIAS["alibi"], causal=False), r"causal must"),
              Case("t5-not-causal", lambda kw: kw.update(module=MHA_BIAS["t5"], causal=False), r"causal must"),
              Case("window-not-causal", lambda kw: kw.update(module=MHA_WIN, causal=False), r"causal must")],
         edge=[
             Case("per-query-lens", lambda kw: kw.update(valid_lens=torch.tensor([[1, 2, 3], [0, 5, 4]])),
                  lambda out, kw: close(out, mha_reference(MHA, kw["queries"], kw["keys"], kw["values"],
                                                           kw["valid_lens"], True))),
             Case("Q-eq-K-no-lens-sdpa", lambda kw: kw.update(queries=rand(2, 5, 4), valid_lens=None,
                                                              need_weights=False),
                  lambda out, kw: close(out, mha_reference(MHA, kw["queries"], kw["keys"], kw["values"],
                                                           None, True))),
             Case("Q-gt-K-not-causal", lambda kw: kw.update(queries=rand(2, 7, 4), causal=False),
                  lambda out, kw: close(out, mha_reference(MHA, kw["queries"], kw["keys"], kw["values"],
                                                           kw["valid_lens"], False))),
             Case("nan-past-lens", lambda kw: kw.update(keys=nan_past_lens(kw["keys"]),
                                                        values=nan_past_lens(kw["values"])),
                  lambda out, kw: close(out, mha_reference(MHA, rand(2, 3, 4), rand(2, 5, 6), rand(2, 5, 5),
                                                           [2, 5], True))),
             Case("cache-continues", lambda kw: kw.update(
                 cache=prefilled(MHA, rand(2, 2, 4), rand(2, 5, 6)[:, :3], rand(2, 5, 5)[:, :3]),
                 keys=rand(2, 5, 6)[:, 3:], values=rand(2, 5, 5)[:, 3:], valid_lens=None),
                  lambda out, kw: close(out, mha_reference(MHA, rand(2, 3, 4), rand(2, 5, 6),
                                                           rand(2, 5, 5), None, True))),
             Case("K-0-causal", lambda kw: kw.update(keys=rand(2, 0, 6), values=rand(2, 0, 5), valid_lens=None),
                  lambda out, kw: out.shape == (2, 3, 8) and bool((out == 0).all())),
             Case("K-0-causal-sdpa", lambda kw: kw.update(keys=rand(2, 0, 6), values=rand(2, 0, 5),
                                                          valid_lens=None, need_weights=False),
                  lambda out, kw: out.shape == (2, 3, 8) and bool((out == 0).all())),
             Case("Q-0", lambda kw: kw.update(queries=rand(2, 0, 4)), lambda out, kw: out.shape == (2, 0, 8)),
             Case("B-0", lambda kw: kw.update(queries=rand(0, 3, 4), keys=rand(0, 5, 6), values=rand(0, 5, 5),
                                              valid_lens=None), lambda out, kw: out.shape == (0, 3, 8)),
             Case("rotary_scale", lambda kw: kw.update(module=MHA_PI),
                  lambda out, kw: close(out, mha_reference(MHA_PI, kw["queries"], kw["keys"], kw["values"],
                                                           kw["valid_lens"], True))),
         ] + [Case(f"{kind}{'-sdpa' if not weights else ''}{'-lens' if lens else ''}",
                   lambda kw, kind=kind, weights=weights, lens=lens: kw.update(
                       module=MHA_BIAS[kind], need_weights=weights,
                       valid_lens=torch.tensor([[0, 2, 3], [5, 4, 1]]) if lens else None),
                   lambda out, kw, kind=kind: close(out, mha_reference(
                       MHA_BIAS[kind], kw["queries"], kw["keys"], kw["values"], kw["valid_lens"], True)))
              for kind in POSITION_BIASES for weights in (True, False) for lens in (False, True)]
           + [Case(f"{kind}-nan-past-lens", lambda kw, kind=kind: kw.update(
                  module=MHA_BIAS[kind], keys=nan_past_lens(kw["keys"]), values=nan_past_lens(kw["values"])),
                   lambda out, kw, kind=kind: close(out, mha_reference(
                       MHA_BIAS[kind], rand(2, 3, 4), rand(2, 5, 6), rand(2, 5, 5), [2, 5], True)))
              for kind in POSITION_BIASES]
           + [Case(f"{kind}-cache-continues", lambda kw, kind=kind: kw.update(
                  module=MHA_BIAS[kind],
                  cache=prefilled(MHA_BIAS[kind], rand(2, 2, 4), rand(2, 5, 6)[:, :3], rand(2, 5, 5)[:, :3],
                                  causal=True),
                  keys=rand(2, 5, 6)[:, 3:], values=rand(2, 5, 5)[:, 3:], valid_lens=None),
                   lambda out, kw, kind=kind: close(out, mha_reference(
                       MHA_BIAS[kind], rand(2, 3, 4), rand(2, 5, 6), rand(2, 5, 5), None, True)))
              for kind in POSITION_BIASES]
           + [Case(f"{name}{'-sdpa' if not weights else ''}{'-lens' if lens else ''}",
                   lambda kw, module=module, weights=weights, lens=lens: kw.update(
                       module=module, need_weights=weights,
                       valid_lens=torch.tensor([[0, 2, 3], [5, 4, 1]]) if lens else None),
                   lambda out, kw, module=module: close(out, mha_reference(
                       module, kw["queries"], kw["keys"], kw["values"], kw["valid_lens"], True)))
              for name, module in (("window", MHA_WIN), ("window-sink-rope", MHA_SINK),
                                   ("window-sink-alibi", MHA_WIN_ALIBI))
              for weights in (True, False) for lens in (False, True)]
           + [Case(f"{name}-cache-continues", lambda kw, module=module: kw.update(
                  module=module,
                  cache=prefilled(module, rand(2, 2, 4), rand(2, 5, 6)[:, :3], rand(2, 5, 5)[:, :3], causal=True),
                  keys=rand(2, 5, 6)[:, 3:], values=rand(2, 5, 5)[:, 3:], valid_lens=None),
                   lambda out, kw, module=module: close(out, mha_reference(
                       module, rand(2, 3, 4), rand(2, 5, 6), rand(2, 5, 5), None, True)))
              for name, module in (("window", MHA_WIN), ("window-sink-rope", MHA_SINK),
                                   ("window-sink-alibi", MHA_WIN_ALIBI))]
           + [Case("window-nan-past-lens", lambda kw: kw.update(
                  module=MHA_SINK, keys=nan_past_lens(kw["keys"]), values=nan_past_lens(kw["values"])),
                   lambda out, kw: close(out, mha_reference(MHA_SINK, rand(2, 3, 4), rand(2, 5, 6),
                                                            rand(2, 5, 5), [2, 5], True))),
              Case("sink-K-0", lambda kw: kw.update(module=MHA_SINK, keys=rand(2, 0, 6), values=rand(2, 0, 5),
                                                    valid_lens=None),
                   lambda out, kw: out.shape == (2, 3, 8) and bool((out == 0).all())),
              Case("gqa-gate-sink-window", lambda kw: kw.update(module=MHA_GQA),
                   lambda out, kw: close(out, mha_reference(MHA_GQA, kw["queries"], kw["keys"], kw["values"],
                                                            kw["valid_lens"], True))),
              Case("gqa-gate-sdpa", lambda kw: kw.update(module=MHA_GQA, need_weights=False),
                   lambda out, kw: close(out, mha_reference(MHA_GQA, kw["queries"], kw["keys"], kw["values"],
                                                            kw["valid_lens"], True))),
              Case("mqa-sdpa-no-lens", lambda kw: kw.update(module=MHA_MQA, need_weights=False, valid_lens=None),
                   lambda out, kw: close(out, mha_reference(MHA_MQA, kw["queries"], kw["keys"], kw["values"],
                                                            None, True))),
              Case("gqa-cache-continues", lambda kw: kw.update(
                  module=MHA_GQA,
                  cache=prefilled(MHA_GQA, rand(2, 2, 4), rand(2, 5, 6)[:, :3], rand(2, 5, 5)[:, :3], causal=True),
                  keys=rand(2, 5, 6)[:, 3:], values=rand(2, 5, 5)[:, 3:], valid_lens=None),
                   lambda out, kw: close(out, mha_reference(MHA_GQA, rand(2, 3, 4), rand(2, 5, 6),
                                                            rand(2, 5, 5), None, True))
                   and kw["cache"].keys.shape == (2, 2, 5, 2))]
           + [Case(f"{kind}-Q-gt-K{'-sdpa' if not weights else ''}", lambda kw, kind=kind, weights=weights: kw.update(
                  module=MHA_BIAS[kind], queries=rand(2, 7, 4), valid_lens=None, need_weights=weights),
                   lambda out, kw, kind=kind: close(out, mha_reference(
                       MHA_BIAS[kind], kw["queries"], kw["keys"], kw["values"], None, True)))
              for kind in POSITION_BIASES for weights in (True, False)]
           + [Case("evicting-cache-Q-0", lambda kw: kw.update(
                  queries=rand(2, 0, 4), keys=rand(2, 0, 4), values=rand(2, 0, 4), valid_lens=None,
                  module=MHA_EVICT, cache=evicting_prefilled()),
                   lambda out, kw: out.shape == (2, 0, 8) and kw["cache"].seen == 3),
              Case("sink-weights-below-1", lambda kw: kw.update(module=MHA_SINK, valid_lens=None),
                   lambda out, kw: MHA_SINK.attention_weights.shape == (2, 2, 3, 5)
                   and bool((MHA_SINK.attention_weights.sum(-1) < 1).all()))]),
    Spec("helpers.multihead.MultiHeadAttention.score_bias",
         call=lambda module=MHA_BIAS["alibi"], **kw: module.score_bias(**kw),
         good=lambda: dict(num_queries=3, num_keys=5),
         rules={"num_queries": "count", "num_keys": "count"},
         check=lambda out, kw: out.dtype == torch.float32 and close(
             out, bias_reference(MHA_BIAS["alibi"], int(kw["num_queries"]), int(kw["num_keys"]))),
         bad=[Case("no-position-bias", lambda kw: kw.update(module=MHA), r"position_bias must")],
         edge=[Case("t5", lambda kw: kw.update(module=MHA_BIAS["t5"], num_queries=4, num_keys=200),
                    lambda out, kw: close(out, bias_reference(MHA_BIAS["t5"], 4, 200))),
               Case("float64-module", lambda kw: kw.update(module=seeded(lambda: MultiHeadAttention(
                   8, 2, position_bias="alibi").double())), lambda out, kw: out.dtype == torch.float64),
               Case("0-0", lambda kw: kw.update(num_queries=0, num_keys=0), lambda out, kw: out.shape == (2, 0, 0)),
               Case("Q-gt-K", lambda kw: kw.update(num_queries=6, num_keys=2),
                    lambda out, kw: close(out, bias_reference(MHA_BIAS["alibi"], 6, 2)))]),
    Spec("helpers.multihead.alibi_slopes", call=alibi_slopes, good=lambda: dict(num_heads=8),
         rules={"num_heads": "size"},
         check=lambda out, kw: out.dtype == torch.float64 and close(out, torch.tensor(
             [2.0 ** (-8 * h / int(kw["num_heads"])) for h in range(1, int(kw["num_heads"]) + 1)],
             dtype=torch.float64), 1e-12),
         edge=[Case("H-8", lambda kw: None, lambda out, kw: out.tolist() == [1 / 2 ** h for h in range(1, 9)])]),
    Spec("helpers.multihead.t5_buckets", call=t5_buckets,
         good=lambda: dict(distances=torch.tensor([[0, 5, 16, 200], [-3, 15, 113, 112]]), num_buckets=32,
                           max_distance=128),
         rules={"distances": T(dtype="integer"), "num_buckets": Int(lo=2), "max_distance": Int(lo=1)},
         valid=lambda kw: kw["max_distance"] > kw["num_buckets"] // 2,
         check=lambda out, kw: out.dtype == torch.long and out.shape == kw["distances"].shape and out.tolist() == [
             [t5_bucket(d, int(kw["num_buckets"]), int(kw["max_distance"])) for d in row]
             for row in kw["distances"].tolist()],
         bad=[Case("max_distance-16", lambda kw: kw.update(max_distance=16), r"max_distance must"),
              Case("distances-float", lambda kw: kw.update(distances=torch.zeros(3)), r"distances must"),
              Case("distances-list", lambda kw: kw.update(distances=[0, 1]), r"distances must")],
         edge=[Case("decoder-starts", lambda kw: kw.update(distances=torch.arange(301)),
                    lambda out, kw: [out.tolist().index(b) for b in range(16, 32)]
                    == [16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113]),
               Case("0-d", lambda kw: kw.update(distances=torch.tensor(20)),
                    lambda out, kw: out.shape == () and int(out) == 17),
               Case("int32", lambda kw: kw.update(distances=torch.arange(-2, 40, dtype=torch.int32)),
                    lambda out, kw: out.tolist() == [t5_bucket(d) for d in range(-2, 40)]),
               Case("empty", lambda kw: kw.update(distances=torch.zeros(0, 3, dtype=torch.long)),
                    lambda out, kw: out.shape == (0, 3)),
               Case("huge", lambda kw: kw.update(distances=torch.tensor([10**15])), lambda out, kw: out.tolist() == [31])]),
    # ---------------------------------------------------------------- transformer
    Spec("helpers.transformer.TransformerBlock", call=TransformerBlock,
         good=lambda: dict(num_hiddens=8, num_heads=2, ffn_hiddens=12, dropout=0.0, activation="gelu",
                           rotary=False, rotary_scale=1.0, position_bias=None, window=None, sink=False),
         rules={"num_hiddens": "size", "num_heads": "size", "ffn_hiddens": "size", "dropout": "probability",
                "activation": OneOf(("gelu", "relu")), "rotary": "flag", "rotary_scale": "positive",
                "position_bias": OneOf((None, *POSITION_BIASES)), "window": "size or None", "sink": "flag"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0 and (
             not kw["rotary"] or kw["num_hiddens"] // kw["num_heads"] % 2 == 0) and (
             kw["rotary"] or kw["rotary_scale"] == 1),
         check=lambda b, kw: isinstance(b, TransformerBlock) and b.ffn[0].out_features == kw["ffn_hiddens"]
         and b.norm1.normalized_shape == (kw["num_hiddens"],) and b.attention.rotary == bool(kw["rotary"])
         and b.dropout.p == kw["dropout"] and type(b.ffn[0].out_features) is int
         and b.attention.position_bias == kw["position_bias"] and b.attention.rotary_scale == kw["rotary_scale"]
         and b.attention.window == kw["window"] and (b.attention.sink_logits is not None) == bool(kw["sink"]),
         bad=[Case("rotary-odd-head", lambda kw: kw.update(num_hiddens=6, rotary=True)),
              Case("rotary_scale-without-rotary", lambda kw: kw.update(rotary_scale=2.0), r"rotary_scale must")],
         edge=[Case("rope-interpolated", lambda kw: kw.update(rotary=True, rotary_scale=0.5),
                    lambda b, kw: b.attention.rotary_scale == 0.5),
               Case("window-sink", lambda kw: kw.update(window=3, sink=True),
                    lambda b, kw: b.attention.window == 3 and b.attention.sink_logits.shape == (2,))]),
    Spec("helpers.transformer.TransformerBlock.forward", call=lambda block=BLOCK, **kw: block(**kw),
         good=lambda: dict(X=rand(2, 4, 8), valid_lens=torch.tensor([3, 4]), causal=True, cache=None,
                           need_weights=True),
         rules={"X": T(rank=3), "valid_lens": T(dtype="integer", optional=True, lists=True),
                "causal": "flag", "cache": is_cache, "need_weights": "flag"},
         check=lambda out, kw: close(out, block_reference(BLOCK, kw["X"], kw["valid_lens"], kw["causal"])),
         bad=[Case("X-width-6", lambda kw: kw.update(X=rand(2, 4, 6)), r"X"),
              Case("valid_lens-5", lambda kw: kw.update(valid_lens=torch.tensor([5, 1])), r"valid_lens must")],
         edge=[Case("cache-continues", lambda kw: kw.update(
             cache=prefilled(BLOCK, rand(2, 4, 8)[:, :2], causal=True), X=rand(2, 4, 8)[:, 2:], valid_lens=None),
             lambda out, kw: close(out, block_reference(BLOCK, rand(2, 4, 8), None, True)[:, 2:])),
               Case("T-0", lambda kw: kw.update(X=rand(2, 0, 8), valid_lens=None),
                    lambda out, kw: out.shape == (2, 0, 8))]
         + [Case(kind, lambda kw, kind=kind: kw.update(block=BLOCK_BIAS[kind]),
                 lambda out, kw, kind=kind: close(out, block_reference(BLOCK_BIAS[kind], kw["X"], kw["valid_lens"], True)))
            for kind in POSITION_BIASES]
         + [Case("window-sink", lambda kw: kw.update(block=BLOCK_WS),
                 lambda out, kw: close(out, block_reference(BLOCK_WS, kw["X"], kw["valid_lens"], True))),
            Case("window-sink-sdpa", lambda kw: kw.update(block=BLOCK_WS, need_weights=False),
                 lambda out, kw: close(out, block_reference(BLOCK_WS, kw["X"], kw["valid_lens"], True))),
            Case("window-sink-cache-continues", lambda kw: kw.update(
                block=BLOCK_WS, cache=prefilled(BLOCK_WS, rand(2, 4, 8)[:, :2], causal=True),
                X=rand(2, 4, 8)[:, 2:], valid_lens=None),
                lambda out, kw: close(out, block_reference(BLOCK_WS, rand(2, 4, 8), None, True)[:, 2:]))]),
    Spec("helpers.transformer.DecoderLM", call=DecoderLM,
         good=lambda: dict(vocab_size=5, num_hiddens=8, num_heads=2, num_layers=1, ffn_hiddens=None,
                           max_len=6, positional="sinusoidal", dropout=0.0, rotary_scale=1.0, window=None,
                           sink=False),
         rules={"vocab_size": "size", "num_hiddens": "size", "num_heads": "size", "num_layers": "size",
                "ffn_hiddens": "size or None", "max_len": "size", "positional": OneOf(POSITIONAL),
                "dropout": "probability", "rotary_scale": "positive",
                "window": "size or None",  # (the pools hold no list: the lists are below)
                "sink": "flag"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0 and (
             kw["positional"] != "rope" or kw["num_hiddens"] // kw["num_heads"] % 2 == 0) and (
             kw["positional"] == "rope" or kw["rotary_scale"] == 1),
         check=lambda m, kw: isinstance(m, DecoderLM) and len(m.blocks) == kw["num_layers"]
         and m.head.out_features == kw["vocab_size"] and m.max_len == kw["max_len"]
         and m.blocks[0].ffn[0].out_features == (kw["ffn_hiddens"] or 4 * kw["num_hiddens"])
         and all(b.attention.window == kw["window"] for b in m.blocks)
         and all((b.attention.sink_logits is not None) == bool(kw["sink"]) for b in m.blocks),
         bad=[Case("rope-odd-head", lambda kw: kw.update(num_hiddens=6, positional="rope")),
              Case("rotary_scale-sinusoidal", lambda kw: kw.update(rotary_scale=0.5), r"rotary_scale must"),
              Case("window-list-too-short", lambda kw: kw.update(num_layers=2, window=[2]), r"window must"),
              Case("window-list-too-long", lambda kw: kw.update(window=[2, None]), r"window must"),
              Case("window-list-0", lambda kw: kw.update(num_layers=2, window=[0, None]), r"window must"),
              Case("window-list-float", lambda kw: kw.update(num_layers=2, window=[2.0, None]), r"window must"),
              Case("window-list-bool", lambda kw: kw.update(num_layers=2, window=[True, None]), r"window must"),
              Case("window-list-str", lambda kw: kw.update(num_layers=2, window=[2, "none"]), r"window must"),
              Case("window-str", lambda kw: kw.update(num_layers=2, window="22"), r"window must")],
         edge=[Case("rope", lambda kw: kw.update(positional="rope"), lambda m, kw: m.blocks[0].attention.rotary),
               Case("rope-interpolated", lambda kw: kw.update(positional="rope", rotary_scale=0.5),
                    lambda m, kw: all(b.attention.rotary_scale == 0.5 for b in m.blocks)),
               Case("window-per-layer", lambda kw: kw.update(num_layers=3, window=[2, None, 4]),
                    lambda m, kw: [b.attention.window for b in m.blocks] == [2, None, 4]),
               Case("window-tuple-numpy", lambda kw: kw.update(num_layers=2, window=(np.int64(3), None)),
                    lambda m, kw: [b.attention.window for b in m.blocks] == [3, None]
                    and type(m.blocks[0].attention.window) is int),
               Case("window-int-every-layer", lambda kw: kw.update(num_layers=2, window=3, sink=True),
                    lambda m, kw: [b.attention.window for b in m.blocks] == [3, 3]
                    and all(b.attention.sink_logits.shape == (2,) for b in m.blocks))]
         + [Case(kind, lambda kw, kind=kind: kw.update(positional=kind),
                 lambda m, kw, kind=kind: all(b.attention.position_bias == kind for b in m.blocks))
            for kind in POSITION_BIASES]),
    Spec("helpers.transformer.DecoderLM.forward", call=lambda model=LM, **kw: model(**kw),
         good=lambda: dict(tokens=torch.tensor([[1, 2, 3], [4, 0, 2]]), cache=None, need_weights=True),
         rules={"tokens": T(rank=2, dtype="long"), "cache": is_cache_list, "need_weights": "flag"},
         check=lambda out, kw: close(out, lm_reference(LM, kw["tokens"])),
         bad=[Case("cache-one-KVCache", lambda kw: kw.update(cache=KVCache()), r"cache must"),
              Case("cache-list-of-str", lambda kw: kw.update(cache=[KVCache(), "x"]), r"cache must"),
              Case("cache-tuple-1", lambda kw: kw.update(cache=(KVCache(),)), r"cache"),
              Case("cache-lengths-differ", lambda kw: kw.update(cache=[filled_cache(2, 2, 3, 4), KVCache()]),
                   r"cache"),
              Case("cache-batch-1", lambda kw: kw.update(cache=prefilled(LM, torch.tensor([[1]])))),
              Case("token-5", lambda kw: kw.update(tokens=torch.tensor([[1, 5]])), r"tokens must"),
              Case("token--1", lambda kw: kw.update(tokens=torch.tensor([[-1, 2]])), r"tokens must"),
              Case("too-long", lambda kw: kw.update(tokens=torch.zeros(1, 7, dtype=torch.long))),
              Case("cache-plus-new-too-long", lambda kw: kw.update(
                  cache=prefilled(LM, torch.zeros(2, 4, dtype=torch.long)), tokens=torch.zeros(2, 3, dtype=torch.long)))],
         edge=[Case("cache-continues", lambda kw: kw.update(
             cache=prefilled(LM, torch.tensor([[1, 2], [4, 0]])), tokens=torch.tensor([[3], [2]])),
             lambda out, kw: close(out, lm_reference(LM, torch.tensor([[1, 2, 3], [4, 0, 2]]))[:, 2:])),
               Case("cache-tuple", lambda kw: kw.update(cache=tuple(LM.new_cache())),
                    lambda out, kw: close(out, lm_reference(LM, kw["tokens"]))),
               Case("T-0", lambda kw: kw.update(tokens=torch.zeros(2, 0, dtype=torch.long)),
                    lambda out, kw: out.shape == (2, 0, 5)),
               Case("B-0", lambda kw: kw.update(tokens=torch.zeros(0, 3, dtype=torch.long)),
                    lambda out, kw: out.shape == (0, 3, 5)),
               Case("max_len", lambda kw: kw.update(tokens=torch.tensor([[1, 2, 3, 4, 0, 1]])),
                    lambda out, kw: close(out, lm_reference(LM, kw["tokens"]))),
               Case("rope-interpolated", lambda kw: kw.update(model=LM_PI),
                    lambda out, kw: close(out, lm_reference(LM_PI, kw["tokens"]))),
               Case("window-sink", lambda kw: kw.update(model=LM_WS, tokens=torch.tensor([[1, 2, 3, 4, 0], [4, 0, 2, 2, 1]])),
                    lambda out, kw: close(out, lm_reference(LM_WS, kw["tokens"]))),
               Case("window-sink-sdpa", lambda kw: kw.update(model=LM_WS, need_weights=False),
                    lambda out, kw: close(out, lm_reference(LM_WS, kw["tokens"]))),
               Case("window-sink-cache-continues", lambda kw: kw.update(
                   model=LM_WS, cache=prefilled(LM_WS, torch.tensor([[1, 2, 3], [4, 0, 2]])),
                   tokens=torch.tensor([[3], [2]])),
                   lambda out, kw: close(out, lm_reference(LM_WS, torch.tensor([[1, 2, 3, 3], [4, 0, 2, 2]]))[:, 3:]))]
         + [Case(kind, lambda kw, kind=kind: kw.update(model=LM_OTHER[kind]),
                 lambda out, kw, kind=kind: close(out, lm_reference(LM_OTHER[kind], kw["tokens"])))
            for kind in LM_OTHER]
         + [Case(f"{kind}-cache-continues", lambda kw, kind=kind: kw.update(
             model=LM_OTHER[kind], cache=prefilled(LM_OTHER[kind], torch.tensor([[1, 2], [4, 0]])),
             tokens=torch.tensor([[3], [2]])),
             lambda out, kw, kind=kind: close(out, lm_reference(LM_OTHER[kind], torch.tensor([[1, 2, 3], [4, 0, 2]]))[:, 2:]))
            for kind in POSITION_BIASES]),
    Spec("helpers.transformer.DecoderLM.new_cache", call=lambda **kw: LM.new_cache(**kw),
         good=lambda: dict(window=3, sinks=1, rope_positions="original"),
         rules={"window": "size or None", "sinks": "count",
                "rope_positions": OneOf(("original", "cache"))},
         valid=lambda kw: kw["sinks"] == 0 or kw["window"] is not None,
         check=lambda out, kw: isinstance(out, list) and len(out) == 2
         and all(isinstance(c, KVCache) and c.length == 0 and c.window == kw["window"]
                 and c.sinks == kw["sinks"] and c.rope_positions == kw["rope_positions"]
                 for c in out) and out[0] is not out[1],
         edge=[Case("no-policy", lambda kw: kw.clear(),
                    lambda out, kw: all(c.window is None and c.sinks == 0 for c in out))]),
    Spec("helpers.transformer.generate", call=generate,
         good=lambda: dict(model=LM, prompt=torch.tensor([[1, 2], [3, 4]]), num_new=2, use_cache=True),
         rules={"model": lambda v: isinstance(v, DecoderLM), "prompt": T(rank=2, dtype="long"),
                "num_new": "count", "use_cache": "flag"},
         valid=lambda kw: kw["prompt"].shape[-1] + kw["num_new"] <= 6,
         check=lambda out, kw: torch.equal(out, greedy_reference(kw["model"], kw["prompt"], kw["num_new"]))
         and out is not kw["prompt"],
         bad=[Case("T0-0", lambda kw: kw.update(prompt=torch.zeros(2, 0, dtype=torch.long)), r"prompt must"),
              Case("token-5", lambda kw: kw.update(prompt=torch.tensor([[1, 5]])), r"prompt must"),
              Case("num_new-5", lambda kw: kw.update(num_new=5), r"num_new must"),
              Case("use_cache-no", lambda kw: kw.update(use_cache="no"), r"use_cache must"),
              Case("model-block", lambda kw: kw.update(model=BLOCK), r"model must")],
         edge=[Case("num_new-0-new-tensor", lambda kw: kw.update(num_new=0),
                    lambda out, kw: torch.equal(out, kw["prompt"]) and out is not kw["prompt"]
                    and out.data_ptr() != kw["prompt"].data_ptr()),
               Case("B-0", lambda kw: kw.update(prompt=torch.zeros(0, 2, dtype=torch.long)),
                    lambda out, kw: out.shape == (0, 4)),
               Case("to-max_len-no-cache", lambda kw: kw.update(num_new=4, use_cache=False),
                    lambda out, kw: torch.equal(out, greedy_reference(LM, kw["prompt"], 4)))]
         + [Case(f"{kind}-model", lambda kw, kind=kind: kw.update(model=LM_OTHER[kind], num_new=4),
                 lambda out, kw, kind=kind: torch.equal(out, greedy_reference(LM_OTHER[kind], kw["prompt"], 4)))
            for kind in POSITION_BIASES]
         + [Case("window-sink-model", lambda kw: kw.update(model=LM_WS, prompt=torch.tensor([[1], [3]]), num_new=5),
                 lambda out, kw: torch.equal(out, greedy_reference(LM_WS, kw["prompt"], 5)))]),
    # ---------------------------------------------------------------- rotary
    Spec("helpers.rotary.apply_rotary", call=rotary.apply_rotary,
         good=lambda: dict(x=rand(2, 3, 5, 8), positions=torch.tensor([3, 0, 7, 100, -5]), base=500.0,
                           interleaved=False, scale=0.5),
         rules={"x": T(min_rank=2, same_dtype=False), "positions": T(rank=1, dtype="integer", optional=True),
                "base": "above one", "interleaved": "flag", "scale": "positive"},
         check=lambda out, kw: out.dtype == kw["x"].dtype and (close(out, rotate(
             kw["x"], (torch.arange(5) if kw["positions"] is None else kw["positions"]) * float(kw["scale"]),
             float(kw["base"]), bool(kw["interleaved"])),
             {torch.float16: 4e-3, torch.bfloat16: 3e-2}.get(kw["x"].dtype, 1e-5)) if float(kw["scale"]) < 1e6
             # angles past 1e8 rad: the last bit of θ_i decides them; a rotation still keeps every norm
             else close(out.norm(dim=-1), kw["x"].norm(dim=-1), 1e-3)),
         bad=[Case("odd-D", lambda kw: kw.update(x=rand(2, 3, 5, 7)), r"D must"),
              Case("positions-4", lambda kw: kw.update(positions=torch.arange(4)), r"positions must"),
              Case("positions-list", lambda kw: kw.update(positions=[0, 1, 2, 3, 4]), r"positions must")],
         edge=[Case(f"x-{str(dtype)[6:]}", lambda kw, dtype=dtype: kw.update(x=rand(2, 3, 5, 8, dtype=dtype)),
                    lambda out, kw: out.dtype == kw["x"].dtype and close(out, rotate(
                        kw["x"], kw["positions"] * 0.5, 500.0), 4e-3 if kw["x"].dtype == torch.float16 else 3e-2))
               for dtype in (torch.float16, torch.bfloat16)]
         + [Case("T-0", lambda kw: kw.update(x=rand(2, 0, 8), positions=None), lambda out, kw: out.shape == (2, 0, 8)),
            Case("int32-positions", lambda kw: kw.update(positions=kw["positions"].int()),
                 lambda out, kw: close(out, rotate(kw["x"], kw["positions"] * 0.5, 500.0))),
            Case("scale-1-is-plain", lambda kw: kw.update(scale=1),
                 lambda out, kw: torch.equal(out, rotary.apply_rotary(kw["x"], kw["positions"], base=500.0))),
            Case("scale-tiny", lambda kw: kw.update(scale=1e-12),
                 lambda out, kw: close(out, kw["x"], 1e-6))]),
    Spec("helpers.rotary.rotary_angles", call=rotary.rotary_angles,
         good=lambda: dict(positions=torch.tensor([0, 3, 10]), size=6, base=100.0, dtype=torch.float64),
         rules={"positions": lambda v: False,  # the pools hold no 1-D tensor: the variants are below
                "size": Int(lo=2), "base": "above one", "dtype": OneOf(FLOATS)},
         valid=lambda kw: kw["size"] % 2 == 0,
         check=lambda out, kw: out.dtype == kw["dtype"] and close(out, torch.tensor(
             [[p * float(kw["base"]) ** (-2 * i / kw["size"]) for i in range(kw["size"] // 2)]
              for p in kw["positions"].tolist()], dtype=torch.float64),
             {torch.float16: 2e-3, torch.bfloat16: 1e-2}.get(kw["dtype"], 1e-6)),
         bad=[Case("size-5", lambda kw: kw.update(size=5), r"size must"),
              Case("positions-bool", lambda kw: kw.update(positions=torch.ones(3, dtype=torch.bool)), r"positions must"),
              Case("positions-complex", lambda kw: kw.update(positions=torch.ones(3, dtype=torch.complex64)),
                   r"positions must"),
              Case("positions-meta", lambda kw: kw.update(positions=torch.empty(3, device="meta")), r"positions must"),
              Case("positions-rank-2", lambda kw: kw.update(positions=torch.zeros(1, 3)), r"positions must"),
              Case("positions-0-d", lambda kw: kw.update(positions=torch.tensor(2)), r"positions must"),
              Case("positions-list", lambda kw: kw.update(positions=[0, 3, 10]), r"positions must")],
         edge=[Case("float-positions", lambda kw: kw.update(positions=torch.tensor([0.5, 1.5])),
                    lambda out, kw: close(out, torch.tensor([[p * 100.0 ** (-2 * i / 6) for i in range(3)]
                                                             for p in (0.5, 1.5)], dtype=torch.float64))),
               Case("int32-positions", lambda kw: kw.update(positions=torch.tensor([0, 3, 10], dtype=torch.int32)),
                    lambda out, kw: out.shape == (3, 3) and out.dtype == torch.float64),
               Case("T-0", lambda kw: kw.update(positions=torch.zeros(0, dtype=torch.long)),
                    lambda out, kw: out.shape == (0, 3))]),
    Spec("helpers.rotary.decay_bound", call=rotary.decay_bound,
         good=lambda: dict(distances=torch.tensor([0.0, 3.0, -7.5, 1000.0]), size=6, base=100.0),
         rules={"distances": lambda v: False,  # the pools hold no 1-D tensor: the variants are below
                "size": Int(lo=2), "base": "above one"},
         valid=lambda kw: kw["size"] % 2 == 0,
         check=lambda out, kw: out.dtype == torch.float64 and close(out, torch.tensor(
             [sum(abs(sum(cmath.exp(1j * d * float(kw["base"]) ** (-2 * k / kw["size"])) for k in range(j)))
                  for j in range(1, kw["size"] // 2 + 1)) / (kw["size"] // 2)
              for d in kw["distances"].tolist()], dtype=torch.float64), 1e-9),
         bad=[Case("size-5", lambda kw: kw.update(size=5), r"size must"),
              Case("distances-bool", lambda kw: kw.update(distances=torch.ones(3, dtype=torch.bool)),
                   r"distances must"),
              Case("distances-complex", lambda kw: kw.update(distances=torch.ones(3, dtype=torch.complex64)),
                   r"distances must"),
              Case("distances-meta", lambda kw: kw.update(distances=torch.empty(3, device="meta")), r"distances must"),
              Case("distances-rank-2", lambda kw: kw.update(distances=torch.zeros(1, 3)), r"distances must"),
              Case("distances-0-d", lambda kw: kw.update(distances=torch.tensor(2.0)), r"distances must"),
              Case("distances-list", lambda kw: kw.update(distances=[0.0, 3.0]), r"distances must")],
         edge=[Case("int-distances", lambda kw: kw.update(distances=torch.tensor([0, 3, 10])),
                    lambda out, kw: out.shape == (3,) and out[0].item() == 2.0),  # (D/2 + 1)/2 at 0
               Case("float32-distances", lambda kw: kw.update(distances=torch.tensor([0.0, 3.0], dtype=torch.float32)),
                    lambda out, kw: out.dtype == torch.float64 and out.shape == (2,)),
               Case("T-0", lambda kw: kw.update(distances=torch.zeros(0)), lambda out, kw: out.shape == (0,))]),
    # ---------------------------------------------------------------- checks (added for these modules)
    Spec("helpers.checks.check_holds_data", call=checks.check_holds_data,
         good=lambda: dict(name="x", x=rand(2, 3)),
         rules={"x": T(dtype="any", same_dtype=False)},
         unfuzzed={"name": "the caller's own parameter name, a string literal at every call in helpers/"},
         check=lambda out, kw: out is None, names={"x": r"\bx\b"}),
]
