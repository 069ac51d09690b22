"""streaming: the two tasks follow their rules (BOS, copies after triggers, bigram frequencies,
offsets), TinyDecoder computes the forward pass written out by hand, streaming through a cache
gives the full forward's logits (a window cache: the windowed model's), recompute runs each
window from scratch, train learns and is deterministic, and bad inputs are refused by name."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import streaming
from helpers.kv_cache import KVCache
from helpers.latent_attention import LatentCache
from helpers.streaming import (
    IGNORE, BackcopyTask, TinyDecoder, accuracy_by_offset, offsets_sample, position_loss,
    recompute, stream, train,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _model(seed: int = 0, **kw) -> TinyDecoder:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        args = dict(vocab_size=7, num_hiddens=8, num_heads=2, num_layers=2)
        args.update(kw)
        return TinyDecoder(**args).double().eval()


# ------------------------------------------------------------------------------ tasks
def test_backcopy_bos_and_copies_exactly():
    task = BackcopyTask(vocab_size=9, num_triggers=3, alpha=0.3, seed=1)
    tokens, targets, is_copy = task.sample(50, 21, _gen(0))
    assert task.num_tokens == 10 and task.bos_token == 9
    assert tokens.shape == targets.shape == is_copy.shape == (50, 21)
    assert (tokens[:, 0] == 9).all() and (tokens[:, 1:] < 9).all()
    assert torch.equal(targets[:, :-1], tokens[:, 1:]) and (targets[:, -1] == IGNORE).all()
    for b in range(50):
        for t in range(20):
            # the target at t is a copy iff token t is a trigger and token t - 1 is regular (t >= 2)
            expected = bool(tokens[b, t] < 3) and t >= 2
            assert bool(is_copy[b, t]) == expected
            if expected:
                assert tokens[b, t + 1] == tokens[b, t - 1]
    assert not is_copy[:, -1].any() and is_copy.any()


def test_backcopy_without_bos_copies_from_position_one():
    task = BackcopyTask(vocab_size=5, num_triggers=2, seed=3, bos=False)
    tokens, _, is_copy = task.sample(40, 9, _gen(1))
    assert (tokens < 5).all()
    for b in range(40):
        for t in range(8):
            assert bool(is_copy[b, t]) == (bool(tokens[b, t] < 2) and t >= 1)


def test_backcopy_transitions_seeded_rows_and_frequencies():
    task = BackcopyTask(vocab_size=6, num_triggers=2, alpha=0.5, seed=4)
    P = task.transitions
    assert P.dtype == torch.float64 and P.shape == (6, 6)
    assert torch.allclose(P.sum(-1), torch.ones(6, dtype=torch.float64)) and (P >= 0).all()
    assert torch.equal(P, BackcopyTask(6, 2, 0.5, seed=4).transitions)
    assert not torch.equal(P, BackcopyTask(6, 2, 0.5, seed=5).transitions)
    tokens, _, is_copy = task.sample(4000, 30, _gen(2))
    cur, nxt, copy = tokens[:, 1:-1].flatten(), tokens[:, 2:].flatten(), is_copy[:, 1:-1].flatten()
    counts = torch.zeros(6, 6, dtype=torch.float64)
    counts.index_put_((cur[~copy], nxt[~copy]), torch.ones(int((~copy).sum()), dtype=torch.float64),
                      accumulate=True)
    n = counts.sum(-1, keepdim=True)  # (V, 1) transitions seen from each token
    assert (n > 500).all()
    # binomial standard error sqrt(P(1 - P)/n): every frequency within 5 of them (+ 1e-3)
    assert ((counts / n - P).abs() <= 5 * (P * (1 - P) / n).sqrt() + 1e-3).all()
    # the first regular token is uniform
    first = torch.bincount(tokens[:, 1], minlength=6).double() / 4000
    assert ((first - 1 / 6).abs() < 5 * math.sqrt(1 / 6 * 5 / 6 / 4000)).all()


def test_backcopy_seeded_sample_is_reproducible():
    task = BackcopyTask()
    a, b = task.sample(3, 10, _gen(7)), task.sample(3, 10, _gen(7))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_offsets_targets_written_out():
    tokens, targets = offsets_sample(4, 6, vocab_size=5, max_offset=7, generator=_gen(3))
    assert tokens.shape == (4, 6) and targets.shape == (4, 6, 7) and targets.dtype == torch.long
    assert (tokens >= 0).all() and (tokens < 5).all()
    for b in range(4):
        for t in range(6):
            for o in range(1, 8):
                want = int(tokens[b, t - o]) if t - o >= 0 else IGNORE
                assert int(targets[b, t, o - 1]) == want


# ------------------------------------------------------------------------------ the model
def _rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE: pair (i, i + d/2) turns by p · 10000^(−2i/d)."""
    d = x.shape[-1]
    angle = positions[:, None].double() * 10000.0 ** (-2 * torch.arange(d // 2).double() / d)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)


def _by_hand(model: TinyDecoder, tokens: torch.Tensor, window: int | None) -> torch.Tensor:
    """TinyDecoder's logits from its weights: pre-norm blocks, RoPE, sliding window, sink logit
    in the softmax's denominator, GELU feed-forward."""
    lin = lambda layer, x: x @ layer.weight.T + layer.bias  # noqa: E731
    ln = lambda layer, x: F.layer_norm(x, x.shape[-1:], layer.weight, layer.bias)  # noqa: E731
    X = model.embedding.weight[tokens]  # (B, T, N)
    B, T, N = X.shape
    pos = torch.arange(T)
    for block in model.blocks:
        att = block.attention
        H = att.num_heads
        Y = ln(block.norm, X)
        G = att.num_kv_heads  # key-value heads: query head h reads head h // (H/G)
        split = lambda Z, n: Z.view(B, T, n, N // H).transpose(1, 2)  # noqa: E731  (B, n, T, N/H)
        q = split(lin(att.W_q, Y), H)
        k, v = (split(lin(W, Y), G).repeat_interleave(H // G, dim=1) for W in (att.W_k, att.W_v))
        q, k = _rope(q, pos), _rope(k, pos)
        s = q @ k.transpose(-1, -2) / math.sqrt(N // H)  # (B, H, T, T)
        back = pos[:, None] - pos[None, :]
        visible = (back >= 0) & ((back < window) if window else True)
        e = torch.where(visible, s.exp(), 0.0)
        denom = e.sum(-1, keepdim=True)
        if att.sink:
            denom = denom + att.sink_logits.exp()[:, None, None]
        out = (e / denom) @ v  # (B, H, T, N/H)
        out = out.transpose(1, 2).reshape(B, T, N)  # (B, T, N)
        if att.gate:  # gated attention: sigmoid(W_g y) on every feature, before W_o
            out = out * torch.sigmoid(lin(att.W_g, Y))
        X = X + lin(att.W_o, out)
        if block.ffn is not None:
            f = block.ffn
            X = X + lin(f[3], F.gelu(lin(f[1], ln(f[0], X))))
    return lin(model.head, ln(model.norm, X))


@pytest.mark.parametrize("window,sink,ffn,extra", [
    (None, False, False, {}), (2, True, True, {}), (3, False, True, {}),
    (None, False, False, dict(num_kv_heads=1)), (2, True, False, dict(num_kv_heads=1, gate=True)),
    (None, True, False, dict(gate=True))])
def test_tiny_decoder_equals_hand_written_forward(window, sink, ffn, extra):
    model = _model(window=window, sink=sink, sink_init=0.7 if sink else 0.0, ffn=ffn,
                   num_outputs=11, **extra)
    tokens = torch.randint(0, 7, (3, 6), generator=_gen(1))
    out = model(tokens)
    assert out.shape == (3, 6, 11) and out.dtype == torch.float64
    assert torch.allclose(out, _by_hand(model, tokens, window), atol=1e-12, rtol=1e-10)
    assert len(model.attention_weights) == 2 and model.attention_weights[0].shape == (3, 2, 6, 6)
    if sink:
        assert all(torch.allclose(b.attention.sink_logits, torch.full((2,), 0.7, dtype=torch.float64))
                   for b in model.blocks)  # (filled in float32, then cast)


@pytest.mark.parametrize("kw", [dict(), dict(sink=True, sink_init=1.0, ffn=True),
                                dict(latent_size=3), dict(latent_size=2, rope_size=0)])
def test_stream_through_full_cache_equals_full_forward(kw):
    model = _model(**kw)
    tokens = torch.randint(0, 7, (2, 9), generator=_gen(2))
    full = model(tokens)
    cache = model.new_cache()
    assert all(isinstance(c, LatentCache if "latent_size" in kw else KVCache) for c in cache)
    assert torch.allclose(stream(model, tokens, cache), full, atol=1e-12)


@pytest.mark.parametrize("W,sink", [(1, False), (3, False), (4, True)])
def test_stream_with_window_cache_equals_windowed_model(W, sink):
    plain = _model(sink=sink)
    windowed = _model(window=W, sink=sink)
    windowed.load_state_dict(plain.state_dict())
    tokens = torch.randint(0, 7, (2, 11), generator=_gen(3))
    cache = plain.new_cache(window=W)
    assert torch.allclose(stream(plain, tokens, cache), windowed(tokens), atol=1e-12)
    assert all(c.length == W - 1 for c in cache)


def test_stream_with_sinks_and_cache_positions_is_the_model_on_the_held_tokens():
    # one layer: its keys depend on the tokens alone, so with StreamingLLM's positions (index in
    # the cache) the step at t is the model run from scratch on the tokens it sees: the sink 0
    # and the W = 3 most recent, t − 2, t − 1, t
    model = _model(num_layers=1)
    tokens = torch.randint(0, 7, (2, 10), generator=_gen(4))
    cache = model.new_cache(window=3, sinks=1, rope_positions="cache")
    out = stream(model, tokens, cache)
    assert cache[0].positions.tolist() == [0, 8, 9]
    for t in range(3, 10):
        held = tokens[:, [0, t - 2, t - 1, t]]
        assert torch.allclose(out[:, t], model(held)[:, -1], atol=1e-12)
    assert torch.allclose(out[:, :4], model(tokens[:, :4]), atol=1e-12)  # nothing evicted yet


def test_recompute_equals_each_window_from_scratch():
    model = _model(ffn=True)
    tokens = torch.randint(0, 7, (2, 8), generator=_gen(5))
    for W in (1, 3, 8, 10):
        out = recompute(model, tokens, W)
        want = torch.stack([model(tokens[:, max(0, t - W + 1): t + 1])[:, -1] for t in range(8)], 1)
        assert out.shape == (2, 8, 7) and torch.allclose(out, want, atol=1e-12)


def test_kv_numbers_per_token():
    assert _model(num_hiddens=12, num_heads=3).kv_numbers_per_token() == 24  # 2 · N
    assert _model(num_hiddens=12, num_heads=6, num_kv_heads=2).kv_numbers_per_token() == 8  # 2·G·N/H
    assert _model(num_hiddens=12, num_heads=3, num_kv_heads=1).kv_numbers_per_token() == 8  # MQA
    assert _model(latent_size=5).kv_numbers_per_token() == 5 + 4  # d_c + d_r (d_r = 4)
    assert _model(latent_size=5, rope_size=2).kv_numbers_per_token() == 7


# ------------------------------------------------------------------------------ training
def test_train_learns_and_is_deterministic():
    sample = lambda g: offsets_sample(16, 6, vocab_size=4, max_offset=1, generator=g)  # noqa: E731
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = TinyDecoder(4, 16, 2, 1, num_outputs=4)
        runs.append((train(model, sample, steps=60, lr=2e-2, seed=3), model))
    (losses, model), (again, other) = runs
    assert len(losses) == 60 and losses == again
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), other.parameters()))
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5 and not model.training
    tokens, targets = sample(_gen(9))
    assert accuracy_by_offset(model, tokens, targets).item() > 0.9


def test_train_first_loss_is_the_cross_entropy_of_the_first_batch():
    model = _model(num_outputs=7 * 2).float()
    sample = lambda g: offsets_sample(3, 5, vocab_size=7, max_offset=2, generator=g)  # noqa: E731
    tokens, targets = sample(_gen(11))
    with torch.no_grad():
        logits = model(tokens).view(3, 5, 2, 7)
    ok = targets != IGNORE
    logp = logits.log_softmax(-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    first = -(logp[ok]).mean().item()
    losses = train(model, sample, steps=1, lr=1e-3, seed=11)
    assert abs(losses[0] - first) < 1e-5


def test_from_pool_hands_out_consecutive_batches():
    task = BackcopyTask(vocab_size=5, num_triggers=2)
    pool = task.sample(6, 4, _gen(0))
    sample = streaming.from_pool(pool, 2)
    for k in range(3):
        batch = sample(_gen(k))
        assert all(torch.equal(x, p[2 * k: 2 * k + 2]) for x, p in zip(batch, pool))
    with pytest.raises(ValueError, match=r"^pool must hold a batch for every step"):
        sample(None)
    torch.manual_seed(0)
    model = TinyDecoder(task.num_tokens, 8, 2, 1)
    assert len(train(model, streaming.from_pool(pool, 2), steps=3, lr=1e-2)) == 3


def test_position_loss_and_accuracy_by_offset_formulas():
    logits = torch.randn(4, 5, 3 * 6, generator=_gen(6), dtype=torch.float64)
    tokens, targets = offsets_sample(4, 5, vocab_size=6, max_offset=3, generator=_gen(7))
    got = position_loss(logits, targets)
    lp = logits.view(4, 5, 3, 6).log_softmax(-1)
    for t in range(5):
        terms = [-lp[b, t, o, targets[b, t, o]] for b in range(4) for o in range(3)
                 if targets[b, t, o] != IGNORE]
        want = torch.stack(terms).mean() if terms else torch.tensor(math.nan)
        assert torch.allclose(got[t], want.double(), equal_nan=True)
    assert math.isnan(got[0])  # position 0 has no earlier token
    flat = position_loss(logits[..., :6], targets[..., 0])  # (B, T) targets
    assert torch.allclose(flat[1:], torch.stack([
        -logits[:, t, :6].log_softmax(-1)[torch.arange(4), targets[:, t, 0]].mean()
        for t in range(1, 5)]))
    model = _model(num_outputs=6 * 3, vocab_size=6)
    acc = accuracy_by_offset(model, tokens, targets)
    pred = model(tokens).view(4, 5, 3, 6).argmax(-1)
    for o in range(3):
        rows = [(pred[b, t, o] == targets[b, t, o]).item() for b in range(4) for t in range(5)
                if targets[b, t, o] != IGNORE]
        assert acc[o].item() == pytest.approx(sum(rows) / len(rows))
    # offsets 3 and 4 of a 3-token stream have no target: NaN (0 / 0), documented, not 0
    short, short_targets = offsets_sample(4, 3, vocab_size=6, max_offset=4, generator=_gen(8))
    acc = accuracy_by_offset(_model(num_outputs=6 * 4, vocab_size=6), short, short_targets)
    assert bool((short_targets[..., 2:] == IGNORE).all())
    assert not acc[:2].isnan().any() and bool(acc[2:].isnan().all())


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("call,pattern", [
    (lambda: BackcopyTask(vocab_size=0), r"^vocab_size must .* got 0"),
    (lambda: BackcopyTask(num_triggers=17), r"^num_triggers must be at most"),
    (lambda: BackcopyTask(alpha=0.0), r"^alpha must .* got"),
    (lambda: BackcopyTask(bos=1), r"^bos must be True or False"),
    (lambda: BackcopyTask().sample(0, 5), r"^batch_size must .* got 0"),
    (lambda: BackcopyTask().sample(2, 5, 3), r"^generator must .* got 3"),
    (lambda: offsets_sample(2, 5, max_offset=0), r"^max_offset must .* got 0"),
    (lambda: TinyDecoder(5, 8, 3, 1), r"^num_hiddens must be divisible"),
    (lambda: TinyDecoder(5, 8, 2, 1, latent_size=2, window=3), r"^latent_size must be None"),
    (lambda: TinyDecoder(5, 8, 2, 1, sink_init=1.0), r"^sink_init must be 0.0 without sink"),
    (lambda: TinyDecoder(5, 8, 2, 1, rope_size=2), r"^rope_size must be None"),
    (lambda: _model()(torch.tensor([[7]])), r"^tokens must be ids in \[0, vocab_size\)"),
    (lambda: _model()(torch.zeros(1, 3)), r"^tokens must be a long tensor"),
    (lambda: _model()(torch.zeros(1, 3).long(), cache=[KVCache()]), r"^cache must be None or a list of 2"),
    (lambda: _model(latent_size=2).new_cache(window=3), r"^window must be None"),
    (lambda: _model().new_cache(rope_positions="x"), r"^rope_positions must be one of"),
    (lambda: train(torch.nn.Linear(2, 2), lambda g: None, steps=1, lr=0.1), r"^model must be a TinyDecoder"),
    (lambda: train(_model(), 3, steps=1, lr=0.1), r"^sample must be a callable"),
    (lambda: train(_model(), lambda g: (torch.zeros(1, 2).long(),), steps=1, lr=0.1),
     r"^sample must return \(tokens, targets"),
    (lambda: train(_model(), lambda g: None, steps=0, lr=0.1), r"^steps must .* got 0"),
    (lambda: stream(_model(), torch.zeros(1, 2).long(), None), r"^cache must be a list"),
    (lambda: recompute(_model(), torch.zeros(1, 2).long(), 0), r"^window must .* got 0"),
    (lambda: position_loss(torch.zeros(2, 3, 4), torch.zeros(2, 4).long()), r"^targets must have the \(B, T\)"),
    (lambda: position_loss(torch.zeros(2, 3, 4), torch.full((2, 3), 4)), r"^targets must be ids in \[0, 4\)"),
])
def test_bad_inputs_name_the_parameter(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_module_lists_its_names():
    assert set(streaming.__all__) >= {"IGNORE", "BackcopyTask", "TinyDecoder", "train", "stream",
                                      "recompute", "position_loss", "offsets_sample",
                                      "accuracy_by_offset"}


@pytest.mark.parametrize("kw", [dict(num_kv_heads=1), dict(num_kv_heads=1, sink=True, gate=True)])
def test_gqa_decoder_streams_through_caches_of_g_heads(kw):
    """num_kv_heads = G: every layer's cache holds (B, G, T, N/H); streaming through a full cache,
    or a window cache, equals the full (windowed) forward."""
    model = _model(**kw)
    windowed = _model(window=3, **kw)
    windowed.load_state_dict(model.state_dict())
    tokens = torch.randint(0, 7, (2, 9), generator=_gen(2))
    cache = model.new_cache()
    assert torch.allclose(stream(model, tokens, cache), model(tokens), atol=1e-12)
    assert cache[0].keys.shape == (2, 1, 9, 4)
    cache = model.new_cache(window=3)
    assert torch.allclose(stream(model, tokens, cache), windowed(tokens), atol=1e-12)


def test_gqa_and_gate_refusals():
    with pytest.raises(ValueError, match=r"num_kv_heads must divide num_heads=2, got 3"):
        _model(num_kv_heads=3)
    with pytest.raises(ValueError, match=r"num_kv_heads must be a positive int, got 0"):
        _model(num_kv_heads=0)
    with pytest.raises(ValueError, match=r"gate must be True or False, got 1"):
        _model(gate=1)
    with pytest.raises(ValueError, match=r"latent_size must be None with window, sink, num_kv_heads or gate"):
        _model(latent_size=2, gate=True)
