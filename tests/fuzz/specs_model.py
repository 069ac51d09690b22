"""Specs for the model stack: multihead, kv_cache, transformer (with ``generate``), rotary, and
``checks.check_holds_data`` (see ``tests/fuzz/__init__.py`` for the format).

The references are written out here in float64: projections, heads, RoPE (the rotation
formula, queries at positions K − Q + i), the masks, LayerNorm, the feed-forward network.
"""

from __future__ import annotations

import cmath
import math

import torch
import torch.nn.functional as F

from helpers import checks, rotary
from helpers.kv_cache import KVCache
from helpers.multihead import MultiHeadAttention, transpose_output, transpose_qkv
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


def linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    out = x.double() @ layer.weight.double().T
    return out if layer.bias is None else out + layer.bias.double()


def layer_norm(norm: torch.nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight.double() + norm.bias.double()


def mha_reference(m: MultiHeadAttention, queries, keys, values, valid_lens=None,
                  causal=False) -> torch.Tensor:
    """softmax(q kᵀ/√d) v per head, keys past the valid length and (causal) in a query's future
    hidden, query i at position K − Q + i (for the causal mask and for RoPE); (B, Q, N)."""
    H = m.num_heads
    q, k, v = (transpose_qkv(linear(layer, x), H) for layer, x in (
        (m.W_q, queries), (m.W_k, keys), (m.W_v, values)))  # (B, H, T, d)
    B, _, Q, d = q.shape
    K = k.shape[-2]
    take = torch.ones(B, 1, Q, K, dtype=torch.bool)
    if valid_lens is not None:
        lens = torch.as_tensor(valid_lens).reshape(B, 1, -1, 1)  # (B, 1, 1 or Q, 1)
        take = take & (torch.arange(K) < lens)
    if causal:
        take = take & (torch.arange(K)[None, :] <= torch.arange(Q)[:, None] + (K - Q))
    if m.rotary:
        q, k = rotate(q, torch.arange(K - Q, K), m.rotary_base), rotate(k, torch.arange(K), m.rotary_base)
    v = v.masked_fill(~take.any(-2, keepdim=True).mT, 0.0)  # (B, 1, K, 1): values no query sees
    scores = (q @ k.mT / math.sqrt(d)).masked_fill(~take, -math.inf)  # (B, H, Q, K)
    w = scores.softmax(-1).nan_to_num(0.0)  # a row with no key: all zeros
    return linear(m.W_o, transpose_output(w @ v))


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
                           key_size=None, value_size=None, rotary=False, rotary_base=10000.0),
         rules={"num_hiddens": "size", "num_heads": "size", "dropout": "probability", "bias": "flag",
                "query_size": "size or None", "key_size": "size or None", "value_size": "size or None",
                "rotary": "flag", "rotary_base": "above one"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0 and (
             not kw["rotary"] or kw["num_hiddens"] // kw["num_heads"] % 2 == 0),
         check=lambda m, kw: isinstance(m, MultiHeadAttention) and m.W_o.out_features == kw["num_hiddens"]
         and m.W_k.in_features == (kw["key_size"] or kw["num_hiddens"]) and m.num_heads == kw["num_heads"]
         and (m.W_q.bias is not None) == bool(kw["bias"]),
         bad=[Case("rotary-odd-head", lambda kw: kw.update(num_hiddens=6, rotary=True)),
              Case("heads-3-of-8", lambda kw: kw.update(num_heads=3))],
         edge=[Case("rotary-head-2", lambda kw: kw.update(num_hiddens=4, rotary=True),
                    lambda m, kw: m.rotary and m.num_heads == 2)]),
    Spec("helpers.multihead.MultiHeadAttention.forward", call=lambda **kw: MHA(**kw), good=MHA_KW,
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
              Case("cache-float64", lambda kw: kw.update(cache=filled_cache(2, 2, 3, 4, torch.float64)))],
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
         ]),
    # ---------------------------------------------------------------- kv_cache
    Spec("helpers.kv_cache.KVCache", call=KVCache, good=dict,
         check=lambda c, kw: isinstance(c, KVCache) and c.length == 0 and c.nbytes() == 0 and c.keys is None),
    Spec("helpers.kv_cache.KVCache.append",
         call=lambda cache=None, **kw: (KVCache() if cache is None else cache).append(**kw),
         good=lambda: dict(keys=rand(1, 2, 3, 4), values=rand(1, 2, 3, 6)),
         rules={"keys": T(rank=4), "values": T(rank=4)},
         check=lambda out, kw: torch.equal(out[0], kw["keys"]) and torch.equal(out[1], kw["values"]),
         bad=[Case("T_new-differs", lambda kw: kw.update(values=rand(1, 2, 2, 6)), r"values must"),
              Case("B-differs", lambda kw: kw.update(values=rand(2, 2, 3, 6)), r"values must"),
              Case("H-differs", lambda kw: kw.update(values=rand(1, 3, 3, 6)), r"values must"),
              Case("onto-float32-float64", lambda kw: kw.update(
                  cache=filled_cache(), keys=rand(1, 2, 1, 4, dtype=torch.float64),
                  values=rand(1, 2, 1, 6, dtype=torch.float64)), r"keys must"),
              Case("onto-cpu-meta", lambda kw: kw.update(
                  cache=filled_cache(), keys=torch.empty(1, 2, 1, 4, device="meta"),
                  values=torch.empty(1, 2, 1, 6, device="meta")), r"keys must"),
              Case("onto-H-2-H-3", lambda kw: kw.update(cache=filled_cache(), keys=rand(1, 3, 1, 4),
                                                        values=rand(1, 3, 1, 6)), r"keys must"),
              Case("onto-values-size-differs", lambda kw: kw.update(cache=filled_cache(), keys=rand(1, 2, 1, 4),
                                                                    values=rand(1, 2, 1, 4)), r"values must")],
         edge=[Case("onto-filled", lambda kw: kw.update(cache=filled_cache(), keys=rand(1, 2, 2, 4),
                                                        values=rand(1, 2, 2, 6)),
                    lambda out, kw: torch.equal(out[0], torch.cat([rand(1, 2, 3, 4), rand(1, 2, 2, 4)], 2))
                    and torch.equal(out[1], torch.cat([rand(1, 2, 3, 6), rand(1, 2, 2, 6)], 2))),
               Case("float16", lambda kw: kw.update(keys=rand(1, 2, 3, 4, dtype=torch.float16),
                                                    values=rand(1, 2, 3, 6, dtype=torch.float16)),
                    lambda out, kw: out[0].dtype == torch.float16 and torch.equal(out[1], kw["values"])),
               Case("T_new-0", lambda kw: kw.update(keys=rand(1, 2, 0, 4), values=rand(1, 2, 0, 6)),
                    lambda out, kw: out[0].shape == (1, 2, 0, 4))]),
    Spec("helpers.kv_cache.KVCache.nbytes", call=lambda cache: cache.nbytes(),
         good=lambda: dict(cache=filled_cache()),
         check=lambda out, kw: out == (1 * 2 * 3 * 4 + 1 * 2 * 3 * 6) * 4,
         edge=[Case("empty", lambda kw: kw.update(cache=KVCache()), lambda out, kw: out == 0),
               Case("float16", lambda kw: kw.update(cache=filled_cache(dtype=torch.float16)),
                    lambda out, kw: out == (24 + 36) * 2)]),
    # ---------------------------------------------------------------- transformer
    Spec("helpers.transformer.TransformerBlock", call=TransformerBlock,
         good=lambda: dict(num_hiddens=8, num_heads=2, ffn_hiddens=12, dropout=0.0, activation="gelu",
                           rotary=False),
         rules={"num_hiddens": "size", "num_heads": "size", "ffn_hiddens": "size", "dropout": "probability",
                "activation": OneOf(("gelu", "relu")), "rotary": "flag"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0 and (
             not kw["rotary"] or kw["num_hiddens"] // kw["num_heads"] % 2 == 0),
         check=lambda b, kw: isinstance(b, TransformerBlock) and b.ffn[0].out_features == kw["ffn_hiddens"]
         and b.norm1.normalized_shape == (kw["num_hiddens"],) and b.attention.rotary == bool(kw["rotary"])
         and b.dropout.p == kw["dropout"] and type(b.ffn[0].out_features) is int,
         bad=[Case("rotary-odd-head", lambda kw: kw.update(num_hiddens=6, rotary=True))]),
    Spec("helpers.transformer.TransformerBlock.forward", call=lambda **kw: BLOCK(**kw),
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
                    lambda out, kw: out.shape == (2, 0, 8))]),
    Spec("helpers.transformer.DecoderLM", call=DecoderLM,
         good=lambda: dict(vocab_size=5, num_hiddens=8, num_heads=2, num_layers=1, ffn_hiddens=None,
                           max_len=6, positional="sinusoidal", dropout=0.0),
         rules={"vocab_size": "size", "num_hiddens": "size", "num_heads": "size", "num_layers": "size",
                "ffn_hiddens": "size or None", "max_len": "size", "positional": OneOf(POSITIONAL),
                "dropout": "probability"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0 and (
             kw["positional"] != "rope" or kw["num_hiddens"] // kw["num_heads"] % 2 == 0),
         check=lambda m, kw: isinstance(m, DecoderLM) and len(m.blocks) == kw["num_layers"]
         and m.head.out_features == kw["vocab_size"] and m.max_len == kw["max_len"]
         and m.blocks[0].ffn[0].out_features == (kw["ffn_hiddens"] or 4 * kw["num_hiddens"]),
         bad=[Case("rope-odd-head", lambda kw: kw.update(num_hiddens=6, positional="rope"))],
         edge=[Case("rope", lambda kw: kw.update(positional="rope"), lambda m, kw: m.blocks[0].attention.rotary)]),
    Spec("helpers.transformer.DecoderLM.forward", call=lambda **kw: LM(**kw),
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
                    lambda out, kw: close(out, lm_reference(LM, kw["tokens"])))]),
    Spec("helpers.transformer.DecoderLM.new_cache", call=lambda: LM.new_cache(), good=dict,
         check=lambda out, kw: isinstance(out, list) and len(out) == 2
         and all(isinstance(c, KVCache) and c.length == 0 for c in out) and out[0] is not out[1]),
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
                    lambda out, kw: torch.equal(out, greedy_reference(LM, kw["prompt"], 4)))]),
    # ---------------------------------------------------------------- rotary
    Spec("helpers.rotary.apply_rotary", call=rotary.apply_rotary,
         good=lambda: dict(x=rand(2, 3, 5, 8), positions=torch.tensor([3, 0, 7, 100, -5]), base=500.0,
                           interleaved=False),
         rules={"x": T(min_rank=2, same_dtype=False), "positions": T(rank=1, dtype="integer", optional=True),
                "base": "above one", "interleaved": "flag"},
         check=lambda out, kw: out.dtype == kw["x"].dtype and close(out, rotate(
             kw["x"], torch.arange(5) if kw["positions"] is None else kw["positions"], float(kw["base"]),
             bool(kw["interleaved"])), {torch.float16: 4e-3, torch.bfloat16: 3e-2}.get(kw["x"].dtype, 1e-5)),
         bad=[Case("odd-D", lambda kw: kw.update(x=rand(2, 3, 5, 7)), r"D must"),
              Case("positions-4", lambda kw: kw.update(positions=torch.arange(4)), r"positions must"),
              Case("positions-list", lambda kw: kw.update(positions=[0, 1, 2, 3, 4]), r"positions must")],
         edge=[Case(f"x-{str(dtype)[6:]}", lambda kw, dtype=dtype: kw.update(x=rand(2, 3, 5, 8, dtype=dtype)),
                    lambda out, kw: out.dtype == kw["x"].dtype and close(out, rotate(
                        kw["x"], kw["positions"], 500.0), 4e-3 if kw["x"].dtype == torch.float16 else 3e-2))
               for dtype in (torch.float16, torch.bfloat16)]
         + [Case("T-0", lambda kw: kw.update(x=rand(2, 0, 8), positions=None), lambda out, kw: out.shape == (2, 0, 8)),
            Case("int32-positions", lambda kw: kw.update(positions=kw["positions"].int()),
                 lambda out, kw: close(out, rotate(kw["x"], kw["positions"], 500.0)))]),
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
