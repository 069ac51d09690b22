"""TransformerBlock against nn.TransformerEncoderLayer (copied weights, causal and padding
masks); DecoderLM's causality, its attention weights and its input checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import DecoderLM, TransformerBlock, causal_mask, generate
from helpers.device import cpu_threads
from helpers.transformer import POSITIONAL
from tests.conftest import TOL


def torch_layer_like(block: TransformerBlock) -> nn.TransformerEncoderLayer:
    att = block.attention
    N, H, F = att.W_o.out_features, att.num_heads, block.ffn[0].out_features
    ref = nn.TransformerEncoderLayer(N, H, F, dropout=0.0, activation="gelu", batch_first=True,
                                     norm_first=True)
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([att.W_q.weight, att.W_k.weight, att.W_v.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([att.W_q.bias, att.W_k.bias, att.W_v.bias]))
        ref.self_attn.out_proj.weight.copy_(att.W_o.weight)
        ref.self_attn.out_proj.bias.copy_(att.W_o.bias)
        for mine, theirs in ((block.ffn[0], ref.linear1), (block.ffn[2], ref.linear2),
                             (block.norm1, ref.norm1), (block.norm2, ref.norm2)):
            theirs.weight.copy_(mine.weight)
            theirs.bias.copy_(mine.bias)
    return ref.train()  # train mode (dropout 0) keeps PyTorch off its fused inference path


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lens", [None, [7, 4]])
def test_block_equals_torch_encoder_layer(dtype, causal, lens):
    torch.manual_seed(0)
    B, T, N, H, F = 2, 7, 12, 3, 20
    block = TransformerBlock(N, H, F).to(dtype)
    with torch.no_grad():  # LayerNorm starts at weight 1, bias 0: make them matter
        for norm in (block.norm1, block.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    ref = torch_layer_like(block).to(dtype)
    X = torch.randn(B, T, N, dtype=dtype)
    kwargs = {}
    if causal:
        kwargs["src_mask"] = ~causal_mask(T, T)  # PyTorch: True = ignore
        kwargs["is_causal"] = True
    if lens is not None:
        kwargs["src_key_padding_mask"] = torch.arange(T)[None, :] >= torch.tensor(lens)[:, None]
    expected = ref(X, **kwargs)
    got = block(X, None if lens is None else torch.tensor(lens), causal=causal)
    assert got.shape == (B, T, N)
    torch.testing.assert_close(got, expected, **TOL[dtype])
    assert block.attention.attention_weights.shape == (B, H, T, T)


def test_block_structure_and_input_kept():
    block = TransformerBlock(8, 2, 16, activation="relu")
    assert isinstance(block.attention.W_q.bias, nn.Parameter)  # attention with biases
    assert isinstance(block.norm1, nn.LayerNorm) and isinstance(block.norm2, nn.LayerNorm)
    assert [type(m) for m in block.ffn] == [nn.Linear, nn.ReLU, nn.Linear]
    X = torch.randn(1, 3, 8)
    before = X.clone()
    block(X, causal=True)
    assert torch.equal(X, before)


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_hiddens=8, num_heads=3, ffn_hiddens=16), r"num_hiddens must be divisible by num_heads"),
    (dict(num_hiddens=8, num_heads=2, ffn_hiddens=0), r"ffn_hiddens must be a positive int, got 0"),
    (dict(num_hiddens=8, num_heads=2, ffn_hiddens=16, activation="tanh"), r"activation must be one of \['gelu', 'relu'\], got 'tanh'"),
    (dict(num_hiddens=8, num_heads=2, ffn_hiddens=16, dropout=1.0), r"dropout must be a probability in \[0, 1\), got 1.0"),
])
def test_block_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerBlock(**kwargs)


@pytest.mark.parametrize("positional", POSITIONAL)
def test_decoder_is_causal_and_keeps_weights_per_layer(positional):
    torch.manual_seed(1)
    model = DecoderLM(11, 16, 2, num_layers=3, max_len=12, positional=positional).eval()
    tokens = torch.randint(0, 11, (2, 9))
    logits = model(tokens)
    assert logits.shape == (2, 9, 11)
    assert len(model.attention_weights) == 3
    for w in model.attention_weights:
        assert w.shape == (2, 2, 9, 9)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 9))
        assert torch.all(w.triu(diagonal=1) == 0)  # no weight on a future key
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11  # change every token from position 6 on
    again = model(changed)
    torch.testing.assert_close(again[:, :6], logits[:, :6], rtol=0, atol=0)  # earlier outputs equal
    assert not torch.allclose(again[:, 6:], logits[:, 6:])


def test_positions_matter_unless_positional_is_none():
    torch.manual_seed(2)
    tokens = torch.tensor([[3, 1, 4, 1, 5]])
    swapped = tokens[:, [1, 0, 2, 3, 4]]  # the first two tokens swapped
    for positional in POSITIONAL:
        model = DecoderLM(7, 8, 2, num_layers=1, max_len=8, positional=positional).eval()
        if positional == "t5":  # its table starts at 0 (no position preference): give it values
            with torch.no_grad():
                model.blocks[0].attention.relative_bias.weight.normal_()
        # the last position sees the same multiset of tokens: only positions tell them apart
        same = torch.allclose(model(tokens)[0, -1], model(swapped)[0, -1], atol=1e-6)
        assert same == (positional == "none"), positional


def test_sinusoidal_positions_are_added_to_the_embeddings():
    model = DecoderLM(5, 8, 2, num_layers=1, max_len=6).eval()
    assert model.P.shape == (6, 8) and not model.P.requires_grad
    assert "P" not in model.state_dict()  # a non-persistent buffer


@pytest.mark.parametrize("tokens, match", [
    (torch.tensor([[0, 5]]), r"tokens must lie in \[0, vocab_size\) = \[0, 5\), got values from 0 to 5"),
    (torch.tensor([[-1, 2]]), r"got values from -1 to 2"),
    (torch.zeros(1, 7, dtype=torch.long), r"sequence length must be at most max_len=6, got 7"),
    (torch.zeros(1, 3), r"tokens must be a long tensor of token ids, got dtype torch.float32"),
    (torch.zeros(3, dtype=torch.long), r"tokens must have 2 dimensions \(B, T\), got 1"),
])
def test_decoder_rejects_bad_tokens(tokens, match):
    model = DecoderLM(5, 8, 2, num_layers=1, max_len=6)
    with pytest.raises(ValueError, match=match):
        model(tokens)


def test_decoder_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"positional must be one of \('sinusoidal', 'rope', 'none', "
                                         r"'alibi', 't5'\), got 'learned'"):
        DecoderLM(5, 8, 2, 1, positional="learned")
    with pytest.raises(ValueError, match=r"rotary_scale must be 1.0 unless positional='rope' \(it rescales "
                                         r"RoPE's positions\), got rotary_scale=0.5 with positional='alibi'"):
        DecoderLM(5, 8, 2, 1, positional="alibi", rotary_scale=0.5)
    with pytest.raises(ValueError, match=r"rotary_scale must be a finite number > 0.0, got -1"):
        DecoderLM(5, 8, 2, 1, positional="rope", rotary_scale=-1)
    with pytest.raises(ValueError, match=r"rotary needs an even head size: num_hiddens/num_heads must be even, got 6/2 = 3"):
        DecoderLM(5, 6, 2, 1, positional="rope")
    with pytest.raises(ValueError, match=r"vocab_size must be a positive int, got 0"):
        DecoderLM(0, 8, 2, 1)


def test_decoder_trains_on_a_task_that_needs_attention():
    """Copy the token two positions back: impossible without attending to earlier tokens."""
    torch.manual_seed(3)
    gen = torch.Generator().manual_seed(3)
    model = DecoderLM(6, 32, 2, num_layers=1, max_len=10)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with cpu_threads(1):  # small tensors: one thread is faster, far faster on a busy machine
        for _ in range(150):
            x = torch.randint(0, 6, (32, 10), generator=gen)
            logits = model(x)[:, 2:]  # positions 2..9 predict the token two back
            loss = nn.functional.cross_entropy(logits.reshape(-1, 6), x[:, :-2].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    x = torch.randint(0, 6, (64, 10), generator=gen)
    with torch.no_grad():
        accuracy = (model(x)[:, 2:].argmax(-1) == x[:, :-2]).float().mean().item()
    assert accuracy > 0.9, accuracy  # chance is 1/6


def test_block_refuses_input_of_another_dtype_than_its_weights():
    block = TransformerBlock(8, 2, 16)
    with pytest.raises(ValueError, match=r"X must have the dtype and device of the module's parameters "
                                         r"\(torch.float32 on cpu\), got torch.float64 on cpu"):
        block(torch.randn(1, 3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"X must be a floating-point tensor, got dtype torch.int64"):
        block(torch.zeros(1, 3, 8, dtype=torch.long))
    assert block.double()(torch.randn(1, 3, 8, dtype=torch.float64)).dtype == torch.float64


def test_decoder_refuses_tokens_on_another_device():
    model = DecoderLM(5, 8, 2, num_layers=1, max_len=6)
    with pytest.raises(ValueError, match=r"tokens must be on the model's device \(cpu\), got meta"):
        model(torch.zeros(1, 3, dtype=torch.long, device="meta"))


@pytest.mark.parametrize("positional", POSITIONAL)
def test_every_positional_generates_the_same_tokens_with_and_without_a_cache(positional):
    torch.manual_seed(4)
    model = DecoderLM(9, 16, 2, num_layers=2, max_len=24, positional=positional).eval()
    if positional == "t5":
        with torch.no_grad():
            for block in model.blocks:
                block.attention.relative_bias.weight.normal_()
    prompt = torch.randint(0, 9, (3, 4))
    assert torch.equal(generate(model, prompt, 12, use_cache=True), generate(model, prompt, 12, use_cache=False))


def test_the_positional_choice_reaches_every_layer():
    for positional in POSITIONAL:
        model = DecoderLM(5, 8, 2, num_layers=2, max_len=6, positional=positional)
        for block in model.blocks:
            att = block.attention
            assert att.rotary == (positional == "rope")
            assert att.position_bias == (positional if positional in ("alibi", "t5") else None)
        assert (model.P.numel() > 0) == (positional == "sinusoidal")
    t5 = DecoderLM(5, 8, 2, num_layers=2, max_len=6, positional="t5")
    assert sum(p.numel() for p in t5.parameters()) - sum(
        p.numel() for p in DecoderLM(5, 8, 2, num_layers=2, max_len=6, positional="none").parameters()) == 2 * 32 * 2


def test_rotary_scale_is_position_interpolation_of_the_same_weights():
    """DecoderLM(..., rotary_scale=s) loaded with a RoPE model's weights: at s = 1 it is the
    model itself; at s = 1/2 the first layer's attention weights are those of the rotation
    written out at the halved positions 0, 0.5, 1, … (float64)."""
    from helpers import transpose_qkv
    from tests.test_rotary import rotate_by_hand

    torch.manual_seed(5)
    model = DecoderLM(7, 16, 2, num_layers=2, max_len=32, positional="rope").double().eval()
    tokens = torch.randint(0, 7, (2, 9))
    same = DecoderLM(7, 16, 2, num_layers=2, max_len=32, positional="rope", rotary_scale=1.0)
    same.double().eval().load_state_dict(model.state_dict())
    assert torch.equal(same(tokens), model(tokens))
    half = DecoderLM(7, 16, 2, num_layers=2, max_len=32, positional="rope", rotary_scale=0.5)
    half.double().eval().load_state_dict(model.state_dict())
    assert all(block.attention.rotary_scale == 0.5 for block in half.blocks)
    half(tokens)
    block = half.blocks[0]
    X = block.norm1(half.embedding(tokens))  # (B, T, N): the first layer's attention input
    positions = [p / 2 for p in range(9)]
    q = rotate_by_hand(transpose_qkv(block.attention.W_q(X), 2), positions, 10000.0, False)
    k = rotate_by_hand(transpose_qkv(block.attention.W_k(X), 2), positions, 10000.0, False)
    future = torch.ones(9, 9, dtype=torch.bool).triu(1)
    expected = (q @ k.transpose(-2, -1) / 8 ** 0.5).masked_fill(future, float("-inf")).softmax(-1)
    torch.testing.assert_close(half.attention_weights[0], expected.detach())
    assert not torch.allclose(half(tokens), model(tokens))


# ---------------------------------------------------------------- sliding windows and attention sinks
def band(T: int, window: int) -> torch.Tensor:
    """(T, T) True = takes part: position i sees j iff 0 ≤ i − j < window."""
    return torch.tensor([[0 <= i - j < window for j in range(T)] for i in range(T)])


def test_window_per_layer_reaches_every_block():
    model = DecoderLM(5, 8, 2, num_layers=2, max_len=6, window=[2, None])
    assert [b.attention.window for b in model.blocks] == [2, None]
    assert [b.attention.window for b in DecoderLM(5, 8, 2, 3, window=4).blocks] == [4, 4, 4]
    assert [b.attention.window for b in DecoderLM(5, 8, 2, 3, window=(None, 1, 3)).blocks] == [None, 1, 3]
    assert all(b.attention.window is None and b.attention.sink_logits is None for b in DecoderLM(5, 8, 2, 2).blocks)
    with_sink = DecoderLM(5, 8, 2, num_layers=2, sink=True)
    assert all(b.attention.sink_logits.shape == (2,) for b in with_sink.blocks)
    assert sum(p.numel() for p in with_sink.parameters()) - sum(
        p.numel() for p in DecoderLM(5, 8, 2, num_layers=2).parameters()) == 2 * 2
    block = TransformerBlock(8, 2, 16, window=3, sink=True)
    assert block.attention.window == 3 and block.attention.sink_logits.shape == (2,)


@pytest.mark.parametrize("window, match", [
    ([2], r"^window must hold one entry per layer \(num_layers=2\), got 1 entries"),
    ([2, None, 3], r"^window must hold one entry per layer \(num_layers=2\), got 3 entries"),
    ([0, None], r"^window must be None, an int >= 1 or one int >= 1 or None per layer, got \[0, None\]"),
    ([2, 2.5], r"^window must be None, an int >= 1 .* got \[2, 2.5\]"),
    ([True, 2], r"^window must be None, an int >= 1 .* got \[True, 2\]"),
    (0, r"^window must be None, an int >= 1 .* got 0"),
    ("22", r"^window must be None, an int >= 1 .* got '22'"),
    (2.0, r"^window must be None, an int >= 1 .* got 2.0"),
])
def test_bad_windows_are_refused(window, match):
    with pytest.raises(ValueError, match=match):
        DecoderLM(5, 8, 2, num_layers=2, window=window)


def test_sink_must_be_a_flag():
    with pytest.raises(ValueError, match=r"^sink must be True or False, got 'yes'"):
        DecoderLM(5, 8, 2, num_layers=2, sink="yes")
    with pytest.raises(ValueError, match=r"^causal must be True with window=2"):
        TransformerBlock(8, 2, 16, window=2)(torch.randn(1, 3, 8))


@pytest.mark.parametrize("positional", ["rope", "alibi", "sinusoidal"])
def test_windows_and_sinks_generate_the_same_tokens_with_and_without_a_cache(positional):
    """Gemma-style local and global layers, each with a learnt sink: greedy decoding with a
    KVCache gives the tokens of re-running the whole sequence, and the logits of a prompt fed
    through a cache token by token are those of the full forward."""
    torch.manual_seed(6)
    model = DecoderLM(9, 16, 2, num_layers=3, max_len=24, positional=positional,
                      window=[2, None, 3], sink=True).double().eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attention.sink_logits.normal_()
    prompt = torch.randint(0, 9, (3, 4))
    assert torch.equal(generate(model, prompt, 12, use_cache=True), generate(model, prompt, 12, use_cache=False))
    tokens = torch.randint(0, 9, (2, 10))
    full = model(tokens)
    weights = model.attention_weights
    for w, window in zip(weights, (2, 10, 3)):  # the band of each layer, rows summing below 1
        assert bool((w[..., ~band(10, window)] == 0).all()) and bool((w.sum(-1) < 1).all())
    cache = model.new_cache()
    steps = [model(tokens[:, :3], cache=cache)] + [model(tokens[:, t:t + 1], cache=cache) for t in range(3, 10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    plain = DecoderLM(9, 16, 2, num_layers=3, max_len=24, positional=positional, sink=True).double().eval()
    plain.load_state_dict(model.state_dict())
    assert not torch.allclose(plain(tokens), full)  # the windows matter


def test_block_with_window_and_sink_equals_the_block_written_out():
    """The block's attention with a window and a sink, written out: LayerNorm, projections,
    scores masked to the band, softmax over [scores, sink] without the sink's column."""
    torch.manual_seed(7)
    block = TransformerBlock(8, 2, 12, window=2, sink=True).double().eval()
    with torch.no_grad():
        block.attention.sink_logits.copy_(torch.tensor([0.5, -0.5]))
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    att = block.attention
    Y = block.norm1(X)
    q, k, v = (transpose_heads(layer(Y)) for layer in (att.W_q, att.W_k, att.W_v))  # (B, H, T, 4)
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~band(5, 2), float("-inf"))  # √d = 2
    sink = att.sink_logits[None, :, None, None].expand(2, 2, 5, 1)
    weights = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]  # (B, H, T, T)
    H1 = X + att.W_o((weights @ v).transpose(1, 2).reshape(2, 5, 8))
    expected = H1 + block.ffn(block.norm2(H1))
    torch.testing.assert_close(block(X, causal=True), expected)
    torch.testing.assert_close(block(X, causal=True, need_weights=False), expected)


def transpose_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, T, 8) → (B, 2, T, 4): two heads."""
    return x.reshape(x.shape[0], x.shape[1], 2, 4).transpose(1, 2)


@pytest.mark.parametrize("policy", [dict(), dict(window=2), dict(window=2, sinks=1)], ids=str)
def test_an_empty_chunk_through_an_evicting_cache_gives_b_0_v(policy):
    """DecoderLM(tokens of T = 0, cache=...) returns (B, 0, V) and changes no cache, with or
    without eviction (an evicting cache raised "num_queries must be a positive int, got 0")."""
    torch.manual_seed(2)
    model = DecoderLM(5, 8, 2, 2, max_len=16, positional="rope").eval()
    tokens = torch.randint(0, 5, (2, 4))
    cache = model.new_cache(**policy)
    model(tokens, cache=cache)
    held = [c.keys.clone() for c in cache]
    assert model(tokens[:, :0], cache=cache).shape == (2, 0, 5)
    assert all(c.seen == 4 and torch.equal(c.keys, h) for c, h in zip(cache, held))
    nxt = torch.randint(0, 5, (2, 1))
    fresh = model.new_cache(**policy)
    model(tokens, cache=fresh)
    torch.testing.assert_close(model(nxt, cache=cache), model(nxt, cache=fresh))
