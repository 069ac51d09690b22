"""helpers.chunkwise: the chunkwise-parallel forms against the recurrent ones of
helpers.linear_attention and against the formulas written out one token at a time in float64
(``written_out`` for normalised causal linear attention, ``written_out_delta`` for the additive
and delta-rule states, with a decay), for chunk sizes that do and do not divide T; gradients
against autograd of the recurrent forms; NaN reaching only the tokens that see it; dtypes,
devices, inputs unchanged, bad input.

Sizes: B batch 2, T tokens, D query/key size 3, V value size 4 (D ≠ V).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.chunkwise import chunkwise_additive, chunkwise_delta_rule, chunkwise_linear_attention
from helpers.linear_attention import delta_rule, linear_attention, recurrent_states
from tests.conftest import FLOAT_DTYPES
from tests.test_linear_attention import TOL, make, written_out, written_out_delta

B, D, V = 2, 3, 4
LENGTHS = [1, 7, 13]
CHUNKS = [1, 2, 3, 5, 13, 64]  # 13 = T for the longest; 64 > every T: one chunk


def tokens(T: int, dtype=torch.float64, device="cpu", seed=0, unit_keys=False):
    q, k, v = (make(B, T, n, dtype=torch.float64, seed=seed + i) for i, n in enumerate((D, D, V)))
    if unit_keys:  # DeltaNet's keys: the delta rule with β ≤ 1 then stays bounded
        k = F.normalize(k, dim=-1)
    return tuple(t.to(device=device, dtype=dtype) for t in (q, k, v))


def gates(T: int, seed=0, device="cpu", dtype=torch.float64):
    """β_t in (0, 1) and α_t in (0.5, 1), (B, T) each."""
    g = torch.Generator().manual_seed(100 + seed)
    beta = torch.rand(B, T, generator=g, dtype=torch.float64)
    decay = 0.5 + 0.5 * torch.rand(B, T, generator=g, dtype=torch.float64)
    return beta.to(device=device, dtype=dtype), decay.to(device=device, dtype=dtype)


def read(states: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """o_t = S_tᵀ q_t: (B, T, D, V), (B, T, D) → (B, T, V)."""
    return torch.einsum("btdv,btd->btv", states, q.double().cpu())


# --------------------------------------------------------------------- equal to the recurrence
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("T", LENGTHS)
def test_linear_attention_chunk_by_chunk_equals_the_causal_forms(T, chunk):
    q, k, v = tokens(T)
    out = chunkwise_linear_attention(q, k, v, chunk_size=chunk)
    assert out.shape == (B, T, V) and out.dtype == torch.float64
    torch.testing.assert_close(out, written_out(q, k, v, causal=True), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, linear_attention(q, k, v, causal=True, form="recurrent"),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("decay", [None, 0.9, "tensor", "with-zero"])
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("T", LENGTHS)
def test_additive_state_chunk_by_chunk_equals_the_recurrence(T, chunk, decay):
    q, k, v = tokens(T)
    if decay in ("tensor", "with-zero"):
        kind, decay = decay, gates(T)[1]
        if kind == "with-zero":
            decay[0, T // 2] = 0.0  # forgets everything before: Mamba-2's α can underflow to 0
    out = chunkwise_additive(q, k, v, decay, chunk_size=chunk)
    full = None if decay is None else decay if isinstance(decay, torch.Tensor) else torch.full(
        (B, T), decay, dtype=torch.float64)
    torch.testing.assert_close(out, read(written_out_delta(k, v, None, full), q), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, read(recurrent_states(k, v, decay=decay), q), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("decay", [None, 0.8, "tensor"])
@pytest.mark.parametrize("beta", [1.0, 0.5, "tensor"])
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("T", LENGTHS)
def test_delta_rule_through_the_ut_transform_equals_the_recurrence(T, chunk, beta, decay):
    q, k, v = tokens(T, unit_keys=True)
    b, a = gates(T)
    beta = b if beta == "tensor" else beta
    decay = a if decay == "tensor" else decay
    out = chunkwise_delta_rule(q, k, v, beta, decay, chunk_size=chunk)
    full = lambda x: x if x is None or isinstance(x, torch.Tensor) else torch.full(  # noqa: E731
        (B, T), x, dtype=torch.float64)
    torch.testing.assert_close(out, read(written_out_delta(k, v, full(beta), full(decay)), q),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, delta_rule(q, k, v, beta, decay), rtol=1e-12, atol=1e-12)


def test_delta_rule_with_keys_that_are_not_unit_vectors():
    """Keys of any length and β up to 1.5: the state grows, the two forms still agree (relative
    to the largest output)."""
    q, k, v = tokens(13, seed=3)
    beta = 1.5 * gates(13, seed=3)[0]
    for chunk in (2, 5, 13):
        out = chunkwise_delta_rule(q, k, v, beta, 0.9, chunk_size=chunk)
        ref = delta_rule(q, k, v, beta, 0.9)
        assert (out - ref).abs().max() < 1e-10 * ref.abs().max()


def test_a_long_sequence_with_a_strong_decay_in_float32():
    """α = 1e-3 per token over chunks of 64: Γ_ij = α^{i−j} underflows inside a chunk (to 0,
    not NaN: running products, never a quotient)."""
    q, k, v = tokens(200, dtype=torch.float32, seed=5)
    for decay in (1e-3, 0.99):
        out = chunkwise_additive(q, k, v, decay, chunk_size=64)
        ref = read(recurrent_states(k.double(), v.double(), decay=decay), q)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


def test_gradients_equal_those_of_the_recurrent_forms():
    """Autograd through the chunks (the triangular solve included) gives the gradients of the
    recurrence, for queries, keys, values, β and α (one α exactly 0: finite there too)."""
    T = 11
    q, k, v = tokens(T, unit_keys=True)
    beta, decay = gates(T)
    decay[0, 5] = 0.0
    d_out = make(B, T, V, seed=9)
    for name in ("linear", "additive", "delta"):
        leaves = [t.clone().requires_grad_() for t in (q, k, v, beta, decay)]
        twins = [t.clone().requires_grad_() for t in (q, k, v, beta, decay)]
        if name == "linear":
            a = chunkwise_linear_attention(*leaves[:3], chunk_size=4)
            b = linear_attention(*twins[:3], causal=True, form="recurrent")
            used = 3
        elif name == "additive":
            a = chunkwise_additive(*leaves[:3], leaves[4], chunk_size=4)
            b = read(recurrent_states(twins[1], twins[2], decay=twins[4]), twins[0])
            used = 5
        else:
            a = chunkwise_delta_rule(*leaves, chunk_size=4)
            b = delta_rule(*twins)
            used = 5
        torch.autograd.backward(a, d_out)
        torch.autograd.backward(b, d_out)
        for i, (x, y) in enumerate(zip(leaves[:used], twins[:used])):
            if x.grad is None and y.grad is None:
                continue
            torch.testing.assert_close(x.grad, y.grad, rtol=1e-10, atol=1e-12, msg=f"{name} {i}")


# --------------------------------------------------------------------------- NaN, sizes, dtypes
@pytest.mark.parametrize("where", ["query", "key", "value"])
@pytest.mark.parametrize("form", ["linear", "additive", "delta"])
def test_nan_reaches_the_tokens_that_see_it_and_no_earlier_one(form, where):
    """One NaN entry at token 6 of row 0 (chunks of 4: in the middle of the second chunk): the
    outputs are NaN exactly where the recurrent form's are (a query: its own token; a key or
    value: from token 6 on), never at tokens 4 and 5 of the same chunk (a plain product of the
    masked C × C matrix with the values would reach them through 0 · NaN)."""
    T = 11
    q, k, v = tokens(T, unit_keys=True)
    beta, decay = gates(T)
    x = {"query": q, "key": k, "value": v}
    x[where] = x[where].clone()
    x[where][0, 6, 1] = math.nan
    q, k, v = x["query"], x["key"], x["value"]
    if form == "linear":
        out, ref = chunkwise_linear_attention(q, k, v, chunk_size=4), linear_attention(q, k, v, causal=True)
    elif form == "additive":
        out = chunkwise_additive(q, k, v, decay, chunk_size=4)
        ref = read(recurrent_states(k, v, decay=decay), q)
    else:
        out, ref = chunkwise_delta_rule(q, k, v, beta, decay, chunk_size=4), delta_rule(q, k, v, beta, decay)
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    nan_tokens = torch.isnan(out).any(-1)  # (B, T)
    assert nan_tokens[0, 6] and not nan_tokens[0, :6].any() and not nan_tokens[1].any()
    assert nan_tokens[0, 7:].all() == (where != "query")
    torch.testing.assert_close(out[~torch.isnan(ref)], ref[~torch.isnan(ref)], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 4])
def test_no_tokens(chunk):
    q, k, v = tokens(0)
    for out in (chunkwise_linear_attention(q, k, v, chunk_size=chunk),
                chunkwise_additive(q, k, v, 0.5, chunk_size=chunk),
                chunkwise_delta_rule(q, k, v, torch.zeros(B, 0, dtype=torch.float64), chunk_size=chunk)):
        assert out.shape == (B, 0, V) and out.dtype == torch.float64
    assert chunkwise_additive(*tokens(5)[:2], make(B, 5, 0)).shape == (B, 5, 0)  # V = 0
    empty = [t[:0] for t in tokens(5)]  # B = 0
    assert chunkwise_delta_rule(*empty, chunk_size=2).shape == (0, 5, V)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_every_dtype_and_device(device, dtype):
    """Half precision computes in float32 (the same numbers as float32 inputs, rounded once)."""
    T = 9
    q, k, v = tokens(T, dtype=dtype, device=device, unit_keys=True)
    beta, decay = gates(T, dtype=dtype, device=device)
    outs = [chunkwise_linear_attention(q, k, v, chunk_size=4),
            chunkwise_additive(q, k, v, decay, chunk_size=4),
            chunkwise_delta_rule(q, k, v, beta, decay, chunk_size=4)]
    refs = [written_out(q, k, v, causal=True),
            read(written_out_delta(k, v, None, decay), q),
            read(written_out_delta(k, v, beta, decay), q)]
    for out, ref in zip(outs, refs):
        assert out.dtype == dtype and out.device.type == device.type and out.shape == (B, T, V)
        torch.testing.assert_close(out.cpu().double(), ref, **TOL[dtype])
    if dtype in (torch.float16, torch.bfloat16):
        f = [t.float() for t in (q, k, v, beta, decay)]
        wide = [chunkwise_linear_attention(*f[:3], chunk_size=4),
                chunkwise_additive(*f[:3], f[4], chunk_size=4),
                chunkwise_delta_rule(*f, chunk_size=4)]
        for out, w in zip(outs, wide):
            assert torch.equal(out, w.to(dtype))


def test_inputs_are_never_modified():
    q, k, v = tokens(7, dtype=torch.float32)
    beta, decay = gates(7, dtype=torch.float32)
    before = [t.clone() for t in (q, k, v, beta, decay)]

    def in_place(x):  # a feature map that writes into its input
        return x.clamp_(min=0).add_(1)

    chunkwise_linear_attention(q, k, v, feature_map=in_place, chunk_size=3)
    chunkwise_additive(q, k, v, decay, chunk_size=3)
    chunkwise_delta_rule(q, k, v, beta, decay, chunk_size=3)
    for t, b in zip((q, k, v, beta, decay), before):
        assert torch.equal(t, b)


def test_feature_maps_are_checked_as_linear_attention_checks_them():
    q = torch.tensor([[[1.0, -1.0], [1.0, -1.0], [1.0, 1.0]]])
    k = torch.tensor([[[-1.0, 1.0], [-2.0, 3.0], [1.0, 1.0]]])
    v = torch.ones(1, 3, 2)
    with pytest.raises(ValueError, match=r"^feature_map must give a normaliser φ\(q\)·Σφ\(k\) > 0"):
        chunkwise_linear_attention(q, k, v, feature_map=torch.relu, chunk_size=2)
    with pytest.raises(ValueError, match=r"^feature_map must return finite features for finite queries"):
        chunkwise_linear_attention(q, k, v, feature_map=torch.sqrt)
    with pytest.raises(ValueError, match=r"^feature_map must return features >= 0"):
        chunkwise_linear_attention(q, k, v, feature_map=lambda x: x)


Q_, K_, V_ = (make(*s, dtype=torch.float32) for s in ((2, 5, 3), (2, 5, 3), (2, 5, 4)))
BAD = [
    ("chunk-0", lambda: chunkwise_additive(Q_, K_, V_, chunk_size=0), r"^chunk_size must be a positive int, got 0"),
    ("chunk-float", lambda: chunkwise_delta_rule(Q_, K_, V_, chunk_size=2.0),
     r"^chunk_size must be a positive int, got 2.0"),
    ("chunk-bool", lambda: chunkwise_linear_attention(Q_, K_, V_, chunk_size=True),
     r"^chunk_size must be a positive int, got True"),
    ("queries-T", lambda: chunkwise_additive(Q_[:, :4], K_, V_),
     r"^queries must have the \(B, T\) of keys \(2, 5\) \(one query per token\), got \(2, 4\)"),
    ("queries-D", lambda: chunkwise_delta_rule(make(2, 5, 2, dtype=torch.float32), K_, V_),
     r"feature size of queries \(D, same as keys\): expected 3, got 2"),
    ("values-T", lambda: chunkwise_linear_attention(Q_, K_, V_[:, :4]),
     r"number of values \(T, one per key\): expected 5, got 4"),
    ("values-B", lambda: chunkwise_additive(Q_, K_, V_[:1]), r"batch size of values \(B\): expected 2, got 1"),
    ("queries-rank", lambda: chunkwise_additive(Q_[0], K_, V_),
     r"^queries must have 3 dimensions \(B, T, D\), got 2"),
    ("queries-dtype", lambda: chunkwise_additive(Q_.double(), K_, V_),
     r"^queries must have the dtype and device of keys \(torch.float32 on cpu\), got torch.float64"),
    ("values-dtype", lambda: chunkwise_delta_rule(Q_, K_, V_.double()), r"^values must have the dtype"),
    ("beta-None", lambda: chunkwise_delta_rule(Q_, K_, V_, None), r"^beta must be a finite number .* got None"),
    ("beta-shape", lambda: chunkwise_delta_rule(Q_, K_, V_, torch.ones(2, 4)),
     r"^beta must be a number or a tensor \(B, T\) = \(2, 5\), got shape \(2, 4\)"),
    ("decay-above-one", lambda: chunkwise_additive(Q_, K_, V_, 1.01), r"^decay must be a number in \[0, 1\]"),
    ("decay-entry", lambda: chunkwise_delta_rule(Q_, K_, V_, 1.0, torch.full((2, 5), -0.5)),
     r"^decay must hold numbers in \[0, 1\], got -0.5"),
    ("map-not-callable", lambda: chunkwise_linear_attention(Q_, K_, V_, feature_map="elu"),
     r"^feature_map must be a function"),
]


@pytest.mark.parametrize("call, match", [(c, m) for _, c, m in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input_is_a_value_error_naming_expected_and_actual(call, match):
    with pytest.raises(ValueError, match=match):
        call()
