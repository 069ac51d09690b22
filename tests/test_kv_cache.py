"""KVCache and generate: the cache changes how much is computed, never the tokens."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import DecoderLM, KVCache, generate


def full_rerun(model: DecoderLM, prompt: torch.Tensor, num_new: int) -> torch.Tensor:
    """Greedy decoding written out: re-run the whole sequence for every new token."""
    tokens = prompt
    with torch.no_grad():
        for _ in range(num_new):
            next_token = model(tokens)[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


@pytest.mark.parametrize("positional", ["sinusoidal", "rope", "none"])
def test_tokens_with_and_without_cache_are_identical(positional, device):
    torch.manual_seed(0)
    model = DecoderLM(13, 32, 4, num_layers=2, max_len=40, positional=positional).to(device).eval()
    prompt = torch.randint(0, 13, (3, 5), device=device)
    cached = generate(model, prompt, 20, use_cache=True)
    uncached = generate(model, prompt, 20, use_cache=False)
    assert cached.shape == (3, 25)
    assert torch.equal(cached[:, :5], prompt)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached, full_rerun(model, prompt, 20))


@pytest.mark.parametrize("positional", ["sinusoidal", "rope", "none"])
def test_cached_logits_equal_the_full_forward(positional):
    torch.manual_seed(1)
    model = DecoderLM(9, 16, 2, num_layers=2, max_len=16, positional=positional).eval()
    tokens = torch.randint(0, 9, (2, 10))
    full = model(tokens)
    cache = model.new_cache()
    with torch.no_grad():
        parts = [model(tokens[:, :4], cache=cache)]  # a prompt of 4, then one token at a time
        for t in range(4, 10):
            parts.append(model(tokens[:, t:t + 1], cache=cache))
            assert model.attention_weights[0].shape == (2, 2, 1, t + 1)  # one query, t + 1 keys
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-5, atol=1e-5)
    assert [c.length for c in cache] == [10, 10]
    assert cache[0].keys.shape == (2, 2, 10, 8)  # (B, H, T, N/H)
    assert cache[0].nbytes() == 2 * 2 * 2 * 10 * 8 * 4  # keys + values, float32


def test_rope_positions_continue_from_the_cache():
    """With RoPE the cached keys were rotated at their own positions: feeding the same token
    after a cached prefix must give the full run's logits, not those of position 0."""
    torch.manual_seed(2)
    model = DecoderLM(7, 16, 2, num_layers=1, max_len=8, positional="rope").eval()
    tokens = torch.tensor([[1, 2, 3, 4]])
    cache = model.new_cache()
    with torch.no_grad():
        model(tokens[:, :3], cache=cache)
        last = model(tokens[:, 3:], cache=cache)
    torch.testing.assert_close(last[:, 0], model(tokens)[:, 3], rtol=1e-5, atol=1e-5)


def test_cache_rejects_mismatched_shapes_and_counts():
    cache = KVCache()
    assert cache.length == 0 and cache.nbytes() == 0
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"new keys must have shape \(B, H, T_new, size\) = \(1, 2, T_new, 4\), got \(1, 3, 1, 4\)"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(ValueError, match=r"keys must have 4 dimensions"):
        cache.append(torch.zeros(2, 1, 4), torch.zeros(2, 1, 4))
    model = DecoderLM(5, 8, 2, num_layers=2, max_len=6)
    with pytest.raises(ValueError, match=r"number of caches \(one per layer\): expected 2, got 1"):
        model(torch.zeros(1, 2, dtype=torch.long), cache=[KVCache()])


def test_generate_checks_its_arguments():
    model = DecoderLM(5, 8, 2, num_layers=1, max_len=6)
    prompt = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"prompt length \+ num_new must be at most max_len=6, got 4 \+ 3"):
        generate(model, prompt, 3)
    with pytest.raises(ValueError, match=r"num_new must be an int >= 0, got -1"):
        generate(model, prompt, -1)
    with pytest.raises(ValueError, match=r"prompt must have 2 dimensions \(B, T0\), got 1"):
        generate(model, torch.zeros(4, dtype=torch.long), 1)
    assert torch.equal(generate(model, prompt, 0), prompt)
    cache = model.new_cache()
    model(prompt, cache=cache)
    with pytest.raises(ValueError, match=r"sequence length must be at most max_len=6, got 7 \(4 cached \+ 3 new\)"):
        model(torch.zeros(1, 3, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("keys, values, match", [
    (torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 2, 4),
     r"values must have the shape \(B, H, T_new\) of keys = \(1, 2, 1\), got \(1, 2, 2\)"),
    (torch.zeros(1, 2, 1, 4, dtype=torch.float64), torch.zeros(1, 2, 1, 4, dtype=torch.float64),
     r"keys must have the dtype and device of the cached keys \(torch.float32 on cpu\), got torch.float64 on cpu"),
    (torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4, dtype=torch.float64),
     r"values must have the dtype and device of keys \(torch.float32 on cpu\), got torch.float64"),
    (torch.zeros(1, 2, 1, 4, device="meta"), torch.zeros(1, 2, 1, 4, device="meta"),
     r"keys must .*got .*meta"),
    (torch.zeros(1, 2, 1, 4, dtype=torch.long), torch.zeros(1, 2, 1, 4, dtype=torch.long),
     r"keys must be a floating-point tensor, got dtype torch.int64"),
])
def test_append_refuses_what_does_not_fit_the_cache(keys, values, match):
    cache = KVCache()
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match=match):
        cache.append(keys, values)
    assert cache.length == 3 and cache.keys.dtype == torch.float32  # unchanged


def test_first_append_checks_keys_against_values_too():
    with pytest.raises(ValueError, match=r"values must have the shape \(B, H, T_new\) of keys = \(1, 2, 3\), got \(1, 2, 2\)"):
        KVCache().append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"keys must .*got .*meta"):
        KVCache().append(torch.zeros(1, 2, 3, 4, device="meta"), torch.zeros(1, 2, 3, 4, device="meta"))
    cache = KVCache()  # values may have another last size than keys
    keys, values = cache.append(torch.zeros(1, 2, 3, 4), torch.ones(1, 2, 3, 6))
    assert keys.shape == (1, 2, 3, 4) and values.shape == (1, 2, 3, 6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device")
def test_append_refuses_another_device():
    cache = KVCache()
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"keys must have the dtype and device of the cached keys"):
        cache.append(torch.zeros(1, 2, 1, 4, device="cuda"), torch.zeros(1, 2, 1, 4, device="cuda"))


def test_generate_returns_a_new_tensor_and_checks_model_prompt_and_flag():
    model = DecoderLM(5, 8, 2, num_layers=1, max_len=6)
    prompt = torch.tensor([[1, 2]])
    out = generate(model, prompt, 0)
    assert torch.equal(out, prompt) and out.data_ptr() != prompt.data_ptr()
    out[0, 0] = 4
    assert prompt.tolist() == [[1, 2]]  # the prompt is not the result
    with pytest.raises(ValueError, match=r"prompt must hold at least one token \(T0 >= 1\), got shape \(1, 0\)"):
        generate(model, torch.zeros(1, 0, dtype=torch.long), 2)
    with pytest.raises(ValueError, match=r"use_cache must be True or False, got 'no'"):
        generate(model, prompt, 1, use_cache="no")
    with pytest.raises(ValueError, match=r"model must be a DecoderLM, got str"):
        generate("gpt", prompt, 1)


def test_decoder_refuses_one_cache_instead_of_one_per_layer():
    model = DecoderLM(5, 8, 2, num_layers=2, max_len=6)
    tokens = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match=r"cache must be a list of one KVCache per layer \(new_cache\(\)\), got KVCache"):
        model(tokens, cache=KVCache())
    with pytest.raises(ValueError, match=r"cache must be a list of one KVCache per layer \(new_cache\(\)\), got a list holding str"):
        model(tokens, cache=[KVCache(), "x"])
    cache = model.new_cache()
    model(tokens, cache=cache)
    with pytest.raises(ValueError, match=r"tokens must have the batch size of the cache \(B = 1\), got 3"):
        model(torch.tensor([[1], [2], [3]]), cache=cache)


MODULES = ("helpers.kv_cache", "helpers.multihead", "helpers.transformer", "helpers.rotary")


@pytest.mark.parametrize("module", MODULES)
def test_each_model_module_imports_alone(module):
    """A fresh interpreter imports the module by itself (no import cycle to trip over)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_cache_imports_nothing_of_the_model():
    """kv_cache.py is the plain data structure at the bottom: it imports neither the
    attention module nor the model, not even for type checking."""
    import ast
    from pathlib import Path

    source = Path(__file__).resolve().parents[1] / "helpers" / "kv_cache.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[-1])
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[-1] for alias in node.names)
    assert not imported & {"transformer", "multihead", "DecoderLM", "MultiHeadAttention", "generate"}, imported
    import helpers
    import helpers.transformer

    assert helpers.generate is helpers.transformer.generate and helpers.KVCache.__module__ == "helpers.kv_cache"


def test_the_cache_owns_what_it_stores_even_from_one_reused_buffer():
    """A caller that writes each step's keys and values into one buffer and appends it: the
    first step's entries must survive the later writes (torch.cat copies on later appends;
    the first append must copy too)."""
    g = torch.Generator().manual_seed(4)
    key_buffer, value_buffer = torch.empty(2, 3, 1, 4), torch.empty(2, 3, 1, 5)  # (B, H, 1, ·)
    cache, appended_keys, appended_values = KVCache(), [], []
    for _ in range(4):
        key_buffer.copy_(torch.randn(2, 3, 1, 4, generator=g))  # in place: same storage
        value_buffer.copy_(torch.randn(2, 3, 1, 5, generator=g))
        appended_keys.append(key_buffer.clone())
        appended_values.append(value_buffer.clone())
        cache.append(key_buffer, value_buffer)
    key_buffer.fill_(float("nan"))  # and once more after the last append
    value_buffer.fill_(float("nan"))
    assert torch.equal(cache.keys, torch.cat(appended_keys, dim=-2))  # (2, 3, 4, 4)
    assert torch.equal(cache.values, torch.cat(appended_values, dim=-2))  # (2, 3, 4, 5)


def test_the_first_append_copies_like_cat_keeping_gradients_and_a_contiguous_layout():
    keys = torch.randn(1, 4, 2, 3).transpose(1, 3).requires_grad_()  # (1, 3, 2, 4), strided
    values = torch.randn(1, 3, 2, 5, requires_grad=True)
    cached_keys, cached_values = KVCache().append(keys, values)
    assert torch.equal(cached_keys, keys) and torch.equal(cached_values, values)
    assert cached_keys.is_contiguous()  # as torch.cat returns
    weight = torch.randn(1, 3, 2, 4)
    (grad,) = torch.autograd.grad((cached_keys * weight).sum(), keys)
    assert torch.equal(grad, weight)  # the copy stays in the graph, as cat's result does
    assert torch.equal(torch.autograd.grad(cached_values.sum(), values)[0], torch.ones_like(values))


# ------------------------------------------------------------------ policies: window and sinks
POLICIES = [(4, 0), (4, 2), (1, 0), (1, 3), (6, 1), (30, 2)]  # (W, S)
CHUNKS = (1, 1, 3, 1, 5, 2, 4, 6)  # T_new of each append: 23 tokens in all
HELD_AT_THE_END = {  # the positions held after all 23 tokens: the first S, then the last W − 1
    (4, 0): [20, 21, 22], (4, 2): [0, 1, 20, 21, 22], (1, 0): [], (1, 3): [0, 1, 2],
    (6, 1): [0, 18, 19, 20, 21, 22], (30, 2): list(range(23)),
}


def sees(m: int, p: int, W: int, S: int) -> bool:
    """The query at position m sees the key at p: causal, and within the window or a sink."""
    return p <= m and (m - p < W or p < S)


@pytest.mark.parametrize("W, S", POLICIES)
def test_a_rolling_cache_attends_exactly_as_the_full_stream(W, S):
    """Attention of each chunk's queries over what append returned, with mask(), equals
    attention over the whole stream with the window-and-sinks mask written out."""
    from helpers.attention import scaled_dot_product
    from helpers.masking import causal_mask

    B, H, T, d = 2, 3, sum(CHUNKS), 4
    g = torch.Generator().manual_seed(10 * W + S)
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=torch.float64) for _ in range(3))
    visible = torch.tensor([[sees(m, p, W, S) for p in range(T)] for m in range(T)])  # (T, T)
    scores = (q @ k.transpose(-2, -1) / d ** 0.5).masked_fill(~visible, float("-inf"))
    expected = scores.softmax(dim=-1) @ v  # (B, H, T, d): the full stream, written out
    cache = KVCache(window=W, sinks=S)
    assert (cache.window, cache.sinks, cache.capacity, cache.seen) == (W, S, S + W - 1, 0)
    assert cache.key_positions is None and cache.positions.tolist() == []
    start = 0
    for T_new in CHUNKS:
        end = start + T_new
        held_before = cache.positions.tolist()
        keys, values = cache.append(k[:, :, start:end], v[:, :, start:end])
        key_positions = held_before + list(range(start, end))
        assert cache.key_positions.tolist() == key_positions
        assert torch.equal(keys, k[:, :, key_positions]) and torch.equal(values, v[:, :, key_positions])
        mask = cache.mask(T_new)  # (T_new, n)
        assert torch.equal(mask, visible[start:end][:, key_positions])
        if S == 0:  # the keys are consecutive positions: causal_mask's band
            assert torch.equal(mask, causal_mask(T_new, len(key_positions), window=W))
        out, _ = scaled_dot_product(q[:, :, start:end], keys, values, mask)
        torch.testing.assert_close(out, expected[:, :, start:end], rtol=1e-12, atol=1e-12)
        # between calls: the first S and the last W − 1 tokens, copies of their own size
        held = [p for p in range(end) if p < S or p >= end - (W - 1)]
        assert cache.seen == end and cache.length == len(held) == min(end, S + W - 1)
        assert cache.positions.tolist() == held
        assert torch.equal(cache.keys, k[:, :, held]) and torch.equal(cache.values, v[:, :, held])
        held_bytes = B * H * len(held) * d * 8  # float64, keys and values alike
        assert cache.nbytes() == 2 * held_bytes
        assert cache.keys.untyped_storage().nbytes() <= held_bytes
        assert cache.values.untyped_storage().nbytes() <= held_bytes
        start = end
    assert cache.positions.tolist() == HELD_AT_THE_END[W, S]


def test_without_a_policy_the_mask_is_lower_right_causal_and_nothing_is_evicted():
    cache = KVCache()
    assert (cache.window, cache.sinks, cache.capacity) == (None, 0, None)
    k = torch.randn(1, 2, 5, 3)
    cache.append(k[:, :, :3], k[:, :, :3])
    keys, _ = cache.append(k[:, :, 3:], k[:, :, 3:])
    assert keys is cache.keys and torch.equal(keys, k)  # as before: all of it, held
    assert cache.seen == cache.length == 5
    assert cache.positions.tolist() == cache.key_positions.tolist() == [0, 1, 2, 3, 4]
    assert cache.mask(2).tolist() == [[True, True, True, True, False],
                                      [True, True, True, True, True]]  # queries at 3 and 4
    assert cache.mask(1).tolist() == [[True] * 5]


def test_an_empty_append_counts_nothing_and_leaves_no_query():
    cache = KVCache(window=2, sinks=1)
    cache.append(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2))
    keys, _ = cache.append(torch.zeros(1, 1, 0, 2), torch.zeros(1, 1, 0, 2))
    assert keys.shape == (1, 1, 2, 2) and cache.seen == 4 and cache.positions.tolist() == [0, 3]
    with pytest.raises(ValueError, match=r"num_queries must be at most the number of tokens the last append added \(0\), got 1"):
        cache.mask(1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(window=0), r"window must be a positive int, got 0"),
    (dict(window=-1), r"window must be a positive int, got -1"),
    (dict(window=2.5), r"window must be a positive int, got 2.5"),
    (dict(window=True), r"window must be a positive int, got True"),
    (dict(window="3"), r"window must be a positive int, got '3'"),
    (dict(window=3, sinks=-1), r"sinks must be an int >= 0, got -1"),
    (dict(window=3, sinks=1.5), r"sinks must be an int >= 0, got 1.5"),
    (dict(sinks=2), r"sinks needs a window .*window must be an int >= 1 when sinks > 0, got window=None with sinks=2"),
])
def test_the_policy_is_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KVCache(**kwargs)


def test_the_policy_is_keyword_only_and_mask_checks_num_queries():
    with pytest.raises(TypeError):
        KVCache(4)
    cache = KVCache(window=3)
    with pytest.raises(ValueError, match=r"num_queries must count tokens of the last append, got 1 before any append"):
        cache.mask(1)
    cache.append(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))
    cache.append(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    assert cache.mask(0).shape == (0, 4)  # an empty chunk: no query row
    for bad, match in ((-1, r"num_queries must be an int >= 0, got -1"),
                       (True, r"num_queries must be an int >= 0, got True"),
                       (3, r"num_queries must be at most the number of tokens the last append added \(2\), got 3")):
        with pytest.raises(ValueError, match=match):
            cache.mask(bad)
    assert cache.mask(2).shape == (2, 4)  # keys 3, 4 (held) and 5, 6 (new)


@pytest.mark.parametrize("W, S", [(3, 0), (2, 1), (10, 0)])
def test_a_rolling_cache_holds_copies(W, S):
    """Changing what was appended afterwards changes nothing, evicted or not."""
    cache, appended = KVCache(window=W, sinks=S), []
    for T_new in (2, 1, 3):
        keys = torch.randn(1, 2, T_new, 4)
        appended.append(keys.clone())
        cache.append(keys, keys)
        keys.fill_(float("nan"))
    held = torch.cat(appended, dim=-2)[:, :, cache.positions]
    assert torch.equal(cache.keys, held) and torch.equal(cache.values, held)


# ------------------------------------------------------------- policy caches inside the model
@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "none"])
@pytest.mark.parametrize("window", [1, 3, 5])
def test_rolling_cache_streams_the_windowed_model(positional, window):
    """A model fed one token at a time through KVCache(window=W) (original positions) computes
    exactly what the same weights compute with every layer's window W over the whole sequence."""
    torch.manual_seed(3)
    plain = DecoderLM(11, 16, 2, num_layers=2, max_len=40, positional=positional).double().eval()
    banded = DecoderLM(11, 16, 2, num_layers=2, max_len=40, positional=positional,
                       window=window).double().eval()
    banded.load_state_dict(plain.state_dict())
    tokens = torch.randint(0, 11, (2, 30))
    cache = plain.new_cache(window=window)
    with torch.no_grad():
        streamed = torch.cat([plain(tokens[:, :4], cache=cache)]
                             + [plain(tokens[:, t:t + 1], cache=cache) for t in range(4, 30)], dim=1)
        torch.testing.assert_close(streamed, banded(tokens), rtol=1e-12, atol=1e-12)
    assert [c.length for c in cache] == [window - 1] * 2 and [c.seen for c in cache] == [30, 30]


def rope_rows(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE written out (half-split layout): x (..., T, d) rotated by angle p·10000^(−2i/d)."""
    half = x.shape[-1] // 2
    freq = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])  # (d/2,)
    angle = positions.double()[:, None] * freq[None, :]  # (T, d/2)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=-1)


@pytest.mark.parametrize("window, sinks", [(3, 0), (3, 2), (1, 1), (6, 3)])
@pytest.mark.parametrize("rope_positions", ["original", "cache"])
def test_streaming_attention_equals_attention_over_the_kept_tokens(window, sinks, rope_positions):
    """MultiHeadAttention(rotary) streaming through KVCache(window, sinks, rope_positions):
    each new token's output equals attention written out over the tokens the policy keeps (the
    first S and the last W − 1, and itself), rotated at their original positions, or at their
    index among the kept tokens (StreamingLLM)."""
    from helpers import MultiHeadAttention

    torch.manual_seed(4)
    layer = MultiHeadAttention(12, 3, rotary=True).double().eval()
    X = torch.randn(2, 25, 12, dtype=torch.float64)
    cache = KVCache(window=window, sinks=sinks, rope_positions=rope_positions)
    B, H, d = 2, 3, 4
    heads = lambda Y: Y.reshape(B, -1, H, d).transpose(1, 2)  # noqa: E731  (B, H, T, d)
    with torch.no_grad():
        for t in range(25):
            got = layer(X[:, t:t + 1], X[:, t:t + 1], X[:, t:t + 1], causal=True, cache=cache)
            kept = torch.tensor(sorted({p for p in range(t + 1) if p < sinks or t - p < window}))
            q = heads(layer.W_q(X[:, t:t + 1]))  # (B, H, 1, d)
            k = heads(layer.W_k(X[:, kept]))  # (B, H, n, d)
            v = heads(layer.W_v(X[:, kept]))
            if rope_positions == "original":
                q, k = rope_rows(q, torch.tensor([t])), rope_rows(k, kept)
            else:  # positions in the cache: 0 … n − 1, the query last
                n = len(kept)
                q, k = rope_rows(q, torch.tensor([n - 1])), rope_rows(k, torch.arange(n))
            weights = torch.softmax(q @ k.mT / math.sqrt(d), dim=-1)  # (B, H, 1, n)
            want = layer.W_o((weights @ v).transpose(1, 2).reshape(B, 1, 12))
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
            assert cache.positions.tolist() == [p for p in kept.tolist() if p < sinks or t - p < window - 1]


def test_streaming_one_layer_model_equals_a_fresh_run_on_the_kept_tokens():
    """StreamingLLM's claim for one layer: with RoPE positions in the cache, the logits of token
    t are those of the model run from scratch on the kept tokens (sinks, then the window)."""
    torch.manual_seed(5)
    model = DecoderLM(9, 16, 2, num_layers=1, max_len=16, positional="rope").double().eval()
    tokens = torch.randint(0, 9, (3, 40))  # longer than max_len: the cache streams past it
    window, sinks = 4, 2
    cache = model.new_cache(window=window, sinks=sinks, rope_positions="cache")
    with torch.no_grad():
        for t in range(40):
            got = model(tokens[:, t:t + 1], cache=cache)[:, -1]
            kept = [p for p in range(t + 1) if p < sinks or t - p < window]
            torch.testing.assert_close(got, model(tokens[:, kept])[:, -1], rtol=1e-12, atol=1e-12)


def test_policy_caches_are_refused_where_they_cannot_work():
    from helpers import MultiHeadAttention

    X = torch.randn(1, 3, 8)
    rope = MultiHeadAttention(8, 2, rotary=True)
    with pytest.raises(ValueError, match="causal must be True"):
        rope(X, X, X, cache=KVCache(window=2))
    with pytest.raises(ValueError, match="valid_lens must be None"):
        rope(X, X, X, torch.tensor([2]), causal=True, cache=KVCache(window=2))
    with pytest.raises(ValueError, match="cache must not evict"):
        MultiHeadAttention(8, 2, position_bias="alibi")(X, X, X, causal=True, cache=KVCache(window=2))
    with pytest.raises(ValueError, match="rope_positions='original'"):
        MultiHeadAttention(8, 2)(X, X, X, causal=True, cache=KVCache(rope_positions="cache"))
    with pytest.raises(ValueError, match="Q must equal"):
        rope(X[:, :1], X, X, causal=True, cache=KVCache(window=2))
    with pytest.raises(ValueError, match="rope_positions must be one of"):
        KVCache(rope_positions="absolute")
    model = DecoderLM(5, 8, 2, num_layers=2, max_len=4, positional="sinusoidal")
    cache = model.new_cache(window=2)
    with pytest.raises(ValueError, match="max_len"):  # a table of 4 positions: no streaming past it
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache)
    mixed = [KVCache(window=2), KVCache(window=3)]
    with pytest.raises(ValueError, match="one policy"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=mixed)
