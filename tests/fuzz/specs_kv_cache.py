"""Specs for ``helpers.kv_cache``: the constructor with its policy (window, sinks), ``append``,
``mask`` and ``nbytes`` (see ``tests/fuzz/__init__.py`` for the format). Written out here: which
positions a rolling cache holds (the first S, then the last W − 1) and the mask (the query at m
sees the key at p iff p ≤ m and (m − p < W or p < S))."""

from __future__ import annotations

import torch

from helpers.kv_cache import KVCache
from tests.fuzz import OneOf, Case, Int, Spec, T


def rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Seeded normal numbers: the same shape gives the same tensor."""
    g = torch.Generator().manual_seed(sum(shape) + 7 * len(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def filled_cache(B=1, H=2, T_=3, d=4, dtype=torch.float32, **policy) -> KVCache:
    cache = KVCache(**policy)
    cache.append(rand(B, H, T_, d, dtype=dtype), rand(B, H, T_, d + 2, dtype=dtype))
    return cache


def stream(chunks=(4, 3), **policy) -> KVCache:
    """A cache fed ``chunks`` tokens in turn (keys (1, 2, ·, 4) and values (1, 2, ·, 6) of the
    stream ``rand(1, 2, sum(chunks), ·)``)."""
    cache, start = KVCache(**policy), 0
    keys, values = rand(1, 2, sum(chunks), 4), rand(1, 2, sum(chunks), 6)
    for T_new in chunks:
        cache.append(keys[:, :, start:start + T_new], values[:, :, start:start + T_new])
        start += T_new
    return cache


def held(seen: int, window: int | None, sinks: int = 0) -> list[int]:
    """The positions held between calls: all, or the first S and the last W − 1."""
    return [p for p in range(seen) if window is None or p < sinks or p >= seen - (window - 1)]


def mask_written_out(cache: KVCache, Q: int) -> list[list[bool]]:
    W, S, seen = cache.window, cache.sinks, cache.seen
    return [[p <= m and (W is None or m - p < W or p < S) for p in cache.key_positions.tolist()]
            for m in range(seen - Q, seen)]


def made(c: object, kw: dict) -> bool:
    window, sinks = kw.get("window"), kw.get("sinks", 0)
    return (isinstance(c, KVCache) and c.length == 0 and c.seen == 0 and c.nbytes() == 0
            and c.keys is None and c.values is None and c.key_positions is None
            and c.positions.tolist() == [] and c.window == window and c.sinks == sinks
            and type(c.sinks) is int and (window is None or type(c.window) is int)
            and c.capacity == (None if window is None else sinks + window - 1))


def evicts(out, kw) -> bool:
    """Window 3, sinks 1: 4 tokens (held: 0, 2, 3), then 2 more; returned 0, 2, 3, 4, 5; held 0, 4, 5."""
    keys = torch.cat([rand(1, 2, 4, 4), rand(1, 2, 2, 4)], dim=-2)  # (1, 2, 6, 4): the stream
    values = torch.cat([rand(1, 2, 4, 6), rand(1, 2, 2, 6)], dim=-2)
    cache = kw["cache"]
    return (torch.equal(out[0], keys[:, :, [0, 2, 3, 4, 5]]) and torch.equal(out[1], values[:, :, [0, 2, 3, 4, 5]])
            and cache.positions.tolist() == held(6, 3, 1) == [0, 4, 5] and cache.seen == 6
            and torch.equal(cache.keys, keys[:, :, [0, 4, 5]]) and torch.equal(cache.values, values[:, :, [0, 4, 5]])
            and cache.keys.untyped_storage().nbytes() == 1 * 2 * 3 * 4 * 4)


SPECS: list[Spec] = [
    Spec("helpers.kv_cache.KVCache", call=KVCache,
         good=lambda: dict(window=3, sinks=1, rope_positions="cache"),
         rules={"window": "size or None", "sinks": "count",
                "rope_positions": OneOf(("original", "cache"))},
         valid=lambda kw: kw["sinks"] == 0 or kw["window"] is not None,
         check=made,
         bad=[Case("sinks-without-window", lambda kw: kw.update(window=None, sinks=2),
                   r"sinks needs a window.*window must .*got window=None")],
         edge=[Case("no-policy", lambda kw: kw.clear(), made),
               Case("window-1", lambda kw: kw.update(window=1, sinks=0), made),
               Case("window-only", lambda kw: kw.pop("sinks"), made)]),
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
                                                                    values=rand(1, 2, 1, 4)), r"values must"),
              Case("onto-window-H-2-H-3", lambda kw: kw.update(cache=filled_cache(window=2, sinks=1),
                                                               keys=rand(1, 3, 1, 4), values=rand(1, 3, 1, 6)),
                   r"keys must")],
         edge=[Case("onto-filled", lambda kw: kw.update(cache=filled_cache(), keys=rand(1, 2, 2, 4),
                                                        values=rand(1, 2, 2, 6)),
                    lambda out, kw: torch.equal(out[0], torch.cat([rand(1, 2, 3, 4), rand(1, 2, 2, 4)], 2))
                    and torch.equal(out[1], torch.cat([rand(1, 2, 3, 6), rand(1, 2, 2, 6)], 2))),
               Case("float16", lambda kw: kw.update(keys=rand(1, 2, 3, 4, dtype=torch.float16),
                                                    values=rand(1, 2, 3, 6, dtype=torch.float16)),
                    lambda out, kw: out[0].dtype == torch.float16 and torch.equal(out[1], kw["values"])),
               Case("T_new-0", lambda kw: kw.update(keys=rand(1, 2, 0, 4), values=rand(1, 2, 0, 6)),
                    lambda out, kw: out[0].shape == (1, 2, 0, 4)),
               Case("window-3-sinks-1-evicts", lambda kw: kw.update(
                   cache=stream((4,), window=3, sinks=1), keys=rand(1, 2, 2, 4), values=rand(1, 2, 2, 6)),
                    evicts),
               Case("window-1-holds-nothing", lambda kw: kw.update(cache=KVCache(window=1)),
                    lambda out, kw: torch.equal(out[0], kw["keys"]) and torch.equal(out[1], kw["values"])
                    and kw["cache"].length == 0 and kw["cache"].seen == 3 and kw["cache"].nbytes() == 0
                    and kw["cache"].key_positions.tolist() == [0, 1, 2]),
               Case("window-over-the-stream", lambda kw: kw.update(cache=KVCache(window=9, sinks=2)),
                    lambda out, kw: torch.equal(out[0], kw["keys"]) and kw["cache"].positions.tolist() == [0, 1, 2])]),
    Spec("helpers.kv_cache.KVCache.mask", call=lambda cache, num_queries: cache.mask(num_queries),
         good=lambda: dict(cache=stream((4, 3), window=2, sinks=1), num_queries=2),
         rules={"num_queries": Int(0, 3)},  # the last append added 3 tokens (0: an empty chunk)
         check=lambda out, kw: out.dtype == torch.bool
         and out.tolist() == mask_written_out(kw["cache"], kw["num_queries"])
         and kw["cache"].key_positions.tolist() == [0, 3, 4, 5, 6],
         bad=[Case("before-append", lambda kw: kw.update(cache=KVCache(window=2)), r"num_queries must"),
              Case("after-empty-append", lambda kw: kw.update(cache=stream((4, 0), window=2)),
                   r"num_queries must .*\(0\), got 2")],
         edge=[Case("no-policy-lower-right", lambda kw: kw.update(cache=stream((3, 2))),
                    lambda out, kw: out.tolist() == [[True, True, True, True, False], [True] * 5]),
               Case("window-1-itself", lambda kw: kw.update(cache=stream((4, 3), window=1), num_queries=3),
                    lambda out, kw: out.tolist() == [[True, False, False], [False, True, False], [False, False, True]]),
               Case("sinks-seen-by-all",
                    lambda kw: kw.update(cache=stream((5, 1, 1), window=2, sinks=2), num_queries=1),
                    lambda out, kw: kw["cache"].key_positions.tolist() == [0, 1, 5, 6]
                    and out.tolist() == [[True, True, True, True]]),
               Case("sinks-end-before-S", lambda kw: kw.update(cache=stream((1, 4), window=2, sinks=1), num_queries=4),
                    lambda out, kw: out.tolist() == [[True, True, False, False, False],  # m = 1
                                                     [True, True, True, False, False],  # m = 2
                                                     [True, False, True, True, False],  # m = 3: 1 is no sink
                                                     [True, False, False, True, True]]),  # m = 4
               Case("window-over-the-stream",
                    lambda kw: kw.update(cache=stream((4, 3), window=20, sinks=1), num_queries=3),
                    lambda out, kw: out.tolist() == mask_written_out(kw["cache"], 3)
                    and out.tolist() == torch.ones(7, 7, dtype=torch.bool).tril()[4:].tolist())]),
    Spec("helpers.kv_cache.KVCache.nbytes", call=lambda cache: cache.nbytes(),
         good=lambda: dict(cache=filled_cache()),
         check=lambda out, kw: out == (1 * 2 * 3 * 4 + 1 * 2 * 3 * 6) * 4,
         edge=[Case("empty", lambda kw: kw.update(cache=KVCache()), lambda out, kw: out == 0),
               Case("float16", lambda kw: kw.update(cache=filled_cache(dtype=torch.float16)),
                    lambda out, kw: out == (24 + 36) * 2),
               Case("window-evicted", lambda kw: kw.update(cache=stream((4, 3), window=2, sinks=1)),
                    lambda out, kw: kw["cache"].positions.tolist() == held(7, 2, 1) == [0, 6]
                    and out == 2 * (1 * 2 * 4 + 1 * 2 * 6) * 4),
               Case("window-1-empty", lambda kw: kw.update(cache=stream((4, 3), window=1)),
                    lambda out, kw: out == 0 and kw["cache"].length == 0)]),
]
