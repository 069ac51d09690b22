"""Bad input and edge cases for every public helper (seq2seq, plotting and widgets aside).

``BAD``: each call must raise a ValueError whose message matches a pattern that names what was
expected and what came. ``EDGE``: each call must work, and its result passes a check written
out here. ``tools/fuzz_inputs.py`` runs both tables, and many generated inputs besides.
Sizes: B batch 2, Q queries 3, K keys 5, D query/key size 4, V value size 6.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

import helpers as h

B, Q, K, D, V = 2, 3, 5, 4, 6
NAN, INF = float("nan"), float("inf")


@dataclass(frozen=True)
class Bad:
    id: str
    call: Callable[[], Any]
    match: str  # a regex: the message must name the expected and the actual value or shape


@dataclass(frozen=True)
class Edge:
    id: str
    call: Callable[[], Any]
    check: Callable[[Any], bool]  # True when the result is right


def t(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    """A tensor of ``shape``: seeded normal floats, zeros for other dtypes, nothing on 'meta'."""
    if device == "meta":
        return torch.empty(*shape, dtype=dtype, device="meta")
    if not dtype.is_floating_point:
        return torch.zeros(*shape, dtype=dtype)
    g = torch.Generator().manual_seed(sum(shape) + 7 * len(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def qkv(q=(B, Q, D), k=(B, K, D), v=(B, K, V), dtype=torch.float32):
    return t(*q, dtype=dtype), t(*k, dtype=dtype), t(*v, dtype=dtype)


# ------------------------------------------------------------------ the attention modules
# name → (make the module, keyword arguments of forward)
MODULES: dict[str, tuple[Callable[[], torch.nn.Module], dict]] = {
    "dot": (lambda: h.DotProductAttention(), {}),
    "dot-sdpa": (lambda: h.DotProductAttention(), {"need_weights": False}),
    "additive": (lambda: h.AdditiveAttention(D, D, 8), {}),
    "multihead": (lambda: h.MultiHeadAttention(8, 2, query_size=D, key_size=D, value_size=V), {}),
    "multihead-sdpa": (lambda: h.MultiHeadAttention(8, 2, query_size=D, key_size=D, value_size=V),
                       {"need_weights": False}),
}
OUT_SIZE = {"dot": V, "dot-sdpa": V, "additive": V, "multihead": 8, "multihead-sdpa": 8}

# (id, queries, keys, values, pattern) — bad for every module
BAD_QKV = [
    ("queries-rank-2", lambda: (t(Q, D), t(B, K, D), t(B, K, V)),
     r"queries must have 3 dimensions \(B, Q, D\), got 2 with shape \(3, 4\)"),
    ("keys-rank-4", lambda: (t(B, Q, D), t(B, 1, K, D), t(B, K, V)),
     r"keys must have 3 dimensions \(B, K, D\), got 4 with shape \(2, 1, 5, 4\)"),
    ("values-rank-2", lambda: (t(B, Q, D), t(B, K, D), t(K, V)),
     r"values must have 3 dimensions \(B, K, V\), got 2 with shape \(5, 6\)"),
    ("queries-list", lambda: (t(B, Q, D).tolist(), t(B, K, D), t(B, K, V)),
     r"queries must be a torch.Tensor of shape \(B, Q, D\), got list"),
    ("keys-numpy", lambda: (t(B, Q, D), t(B, K, D).numpy(), t(B, K, V)),
     r"keys must be a torch.Tensor of shape \(B, K, D\), got ndarray"),
    ("values-none", lambda: (t(B, Q, D), t(B, K, D), None),
     r"values must be a torch.Tensor of shape \(B, K, V\), got NoneType"),
    ("queries-int", lambda: (t(B, Q, D, dtype=torch.long), t(B, K, D), t(B, K, V)),
     r"queries must be a floating-point tensor, got dtype torch.int64"),
    ("values-bool", lambda: (t(B, Q, D), t(B, K, D), t(B, K, V, dtype=torch.bool)),
     r"values must be a floating-point tensor, got dtype torch.bool"),
    ("keys-float64", lambda: (t(B, Q, D), t(B, K, D, dtype=torch.float64), t(B, K, V)),
     r"keys must have the dtype and device of queries \(torch.float32 on cpu\), "
     r"got torch.float64 on cpu"),
    ("values-float16", lambda: (t(B, Q, D), t(B, K, D), t(B, K, V, dtype=torch.float16)),
     r"values must have the dtype and device of queries \(torch.float32 on cpu\), "
     r"got torch.float16 on cpu"),
    ("keys-meta", lambda: (t(B, Q, D), t(B, K, D, device="meta"), t(B, K, V)),
     r"keys must have the dtype and device of queries \(torch.float32 on cpu\), "
     r"got torch.float32 on meta"),
    ("keys-batch-3", lambda: (t(B, Q, D), t(3, K, D), t(B, K, V)),
     r"batch size of keys \(B\): expected 2, got 3"),
    ("values-batch-1", lambda: (t(B, Q, D), t(B, K, D), t(1, K, V)),
     r"batch size of values \(B\): expected 2, got 1"),
    ("values-K-6", lambda: (t(B, Q, D), t(B, K, D), t(B, 6, V)),
     r"number of values \(K, one per key\): expected 5, got 6"),
    ("keys-size-3", lambda: (t(B, Q, D), t(B, K, 3), t(B, K, V)),
     r"feature size of keys.*: expected 4, got 3"),
    ("queries-size-5", lambda: (t(B, Q, 5), t(B, K, D), t(B, K, V)),
     r"feature size of (queries.*: expected 4, got 5|keys.*: expected 5, got 4)"),
]

# (id, valid_lens, pattern) — bad for every module and for masked_softmax, with K = 5
BAD_LENS = [
    ("negative", lambda: torch.tensor([-1, 2]), r"\[0, K\] = \[0, 5\], got values from -1 to 2"),
    ("too-long", lambda: torch.tensor([2, 6]), r"\[0, K\] = \[0, 5\], got values from 2 to 6"),
    ("too-long-per-query", lambda: torch.tensor([[1, 2, 3], [0, 9, 5]]),
     r"\[0, K\] = \[0, 5\], got values from 0 to 9"),
    ("float-tensor", lambda: torch.tensor([1.0, 2.0]), r"integers, got dtype torch.float32"),
    ("float-list", lambda: [1.5, 2], r"integers, got dtype torch.float32"),
    ("bool", lambda: torch.tensor([True, False]), r"integers, got dtype torch.bool"),
    ("complex", lambda: torch.tensor([1 + 0j, 2 + 0j]), r"integers, got dtype torch.complex64"),
    ("shape-3", lambda: torch.tensor([1, 2, 3]),
     r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 3\), got \(3,\)"),
    ("shape-2x4", lambda: torch.ones(2, 4, dtype=torch.long),
     r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 3\), got \(2, 4\)"),
    ("rank-3", lambda: torch.ones(2, 3, 1, dtype=torch.long), r"\(B, Q\)=\(2, 3\), got \(2, 3, 1\)"),
    ("scalar", lambda: 3, r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 3\), got \(\)"),
    ("string", lambda: "23", r"valid_lens must be a tensor or a \(nested\) list of ints, got '23'"),
    ("ragged", lambda: [[1, 2, 3], [1]],
     r"valid_lens must be a tensor or a \(nested\) list of ints, got \[\[1, 2, 3\], \[1\]\]"),
    ("huge", lambda: [10**20, 1], r"list of ints, got \[100000000000000000000, 1\]"),
    ("none-inside", lambda: [None, 1], r"list of ints, got \[None, 1\]"),
    ("meta", lambda: torch.ones(2, dtype=torch.long, device="meta"),
     r"valid_lens must be on a device that holds data \(cpu\), got 'meta'"),
    ("empty-for-batch-2", lambda: [], r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 3\), got \(0,\)"),
]

DROPOUTS = [(1.5, "1.5"), (-0.5, "-0.5"), (1.0, "1.0"), (NAN, "nan"), ("0.1", "'0.1'"),
            (True, "True"), (None, "None")]


def prob(name: str, shown: str) -> str:
    return rf"{name} must be a probability in \[0, 1\), got {shown}"


def _module_cases() -> list[Bad]:
    cases = []
    for mod, (make, kw) in MODULES.items():
        for id_, inputs, match in BAD_QKV:
            cases.append(Bad(f"{mod}:{id_}", lambda make=make, kw=kw, inputs=inputs:
                             make()(*inputs(), **kw), match))
        for id_, lens, match in BAD_LENS:
            cases.append(Bad(f"{mod}:lens-{id_}", lambda make=make, kw=kw, lens=lens:
                             make()(*qkv(), lens(), **kw), match))
    for mod in ("additive", "multihead"):  # inputs that disagree with the parameters
        make, _ = MODULES[mod]
        cases += [
            Bad(f"{mod}:all-float64", lambda make=make: make()(*qkv(dtype=torch.float64)),
                r"queries must have the dtype and device of the module's parameters "
                r"\(torch.float32 on cpu\), got torch.float64 on cpu"),
            Bad(f"{mod}:all-meta", lambda make=make: make()(
                *(x.to("meta") for x in qkv())),
                r"module's parameters \(torch.float32 on cpu\), got torch.float32 on meta"),
        ]
    cases += [
        Bad("multihead:values-size-7", lambda: MODULES["multihead"][0]()(*qkv(v=(B, K, 7))),
            r"feature size of values: expected 6, got 7"),
        Bad("dot:D-0", lambda: h.DotProductAttention()(*qkv(q=(B, Q, 0), k=(B, K, 0))),
            r"feature size D of queries and keys must be at least 1, got 0"),
        Bad("additive:D-0", lambda: MODULES["additive"][0]()(*qkv(q=(B, Q, 0), k=(B, K, 0))),
            r"feature size of queries \(query_size\): expected 4, got 0"),
    ]
    for value, shown in [("no", "'no'"), (None, "None"), (1, "1")]:
        for mod in ("dot", "multihead"):
            cases.append(Bad(f"{mod}:need_weights={shown}", lambda mod=mod, value=value:
                             MODULES[mod][0]()(*qkv(), need_weights=value),
                             rf"need_weights must be True or False, got {shown}"))
    # hyper-parameters
    for value, shown in DROPOUTS:
        cases += [
            Bad(f"DotProductAttention(dropout={shown})",
                lambda value=value: h.DotProductAttention(value), prob("dropout", shown)),
            Bad(f"AdditiveAttention(dropout={shown})",
                lambda value=value: h.AdditiveAttention(2, 3, 4, dropout=value), prob("dropout", shown)),
            Bad(f"MultiHeadAttention(dropout={shown})",
                lambda value=value: h.MultiHeadAttention(8, 2, dropout=value), prob("dropout", shown)),
            Bad(f"PositionalEncoding(dropout={shown})",
                lambda value=value: h.PositionalEncoding(8, dropout=value), prob("dropout", shown)),
        ]
    sizes = [(0, "0"), (-1, "-1"), (2.5, "2.5"), (True, "True"), ("4", "'4'"), (None, "None"),
             (np.float64(4.0), r"np.float64\(4.0\)"), (NAN, "nan")]
    for value, shown in sizes:
        cases += [
            Bad(f"AdditiveAttention(key_size={shown})", lambda value=value:
                h.AdditiveAttention(key_size=value, query_size=3, num_hiddens=4),
                rf"key_size must be a positive int, got {shown}"),
            Bad(f"AdditiveAttention(num_hiddens={shown})", lambda value=value:
                h.AdditiveAttention(2, 3, value), rf"num_hiddens must be a positive int, got {shown}"),
            Bad(f"MultiHeadAttention(num_heads={shown})", lambda value=value:
                h.MultiHeadAttention(8, value), rf"num_heads must be a positive int, got {shown}"),
        ]
    for name in ("num_hiddens", "query_size", "key_size", "value_size"):
        cases.append(Bad(f"MultiHeadAttention({name}=0)", lambda name=name:
                         h.MultiHeadAttention(**({"num_hiddens": 8, "num_heads": 2} | {name: 0})),
                         rf"{name} must be a positive int, got 0"))
    cases += [
        Bad("MultiHeadAttention(10, 4)", lambda: h.MultiHeadAttention(10, 4),
            r"divisible by num_heads: got num_hiddens=10, num_heads=4"),
        Bad("MultiHeadAttention(bias='yes')", lambda: h.MultiHeadAttention(8, 2, bias="yes"),
            r"bias must be True or False, got 'yes'"),
        Bad("MultiHeadAttention(bias=None)", lambda: h.MultiHeadAttention(8, 2, bias=None),
            r"bias must be True or False, got None"),
        Bad("MultiHeadAttention d2l-zh positional order",
            lambda: h.MultiHeadAttention(100, 100, 100, 100, 5, 0.5),
            r"keyword-only.*\(100, 100, 100, 100, 5, 0.5\) in d2l-zh's order .*: write "
            r"MultiHeadAttention\(100, 5, dropout=0.5, query_size=100, key_size=100, value_size=100\)"),
        Bad("MultiHeadAttention d2l-en positional dropout",
            lambda: h.MultiHeadAttention(100, 5, 0.5),
            r"keyword-only.*Got 3 positional arguments \(100, 5, 0.5\): write "
            r"MultiHeadAttention\(100, 5, dropout=0.5\)"),
    ]
    return cases


def _function_cases() -> list[Bad]:
    X = lambda: t(B, Q, K)  # noqa: E731  scores (B, Q, K)
    cases = [
        Bad(f"masked_softmax:lens-{id_}", lambda lens=lens: h.masked_softmax(X(), lens()), match)
        for id_, lens, match in BAD_LENS
    ]
    cases += [
        Bad("masked_softmax:X-rank-2", lambda: h.masked_softmax(t(3, 4)),
            r"X must have 3 dimensions \(B, Q, K\), got 2 with shape \(3, 4\)"),
        Bad("masked_softmax:X-rank-4", lambda: h.masked_softmax(t(1, 2, 3, 4), [1]),
            r"X must have 3 dimensions \(B, Q, K\), got 4 with shape \(1, 2, 3, 4\)"),
        Bad("masked_softmax:X-int", lambda: h.masked_softmax(t(B, Q, K, dtype=torch.long), [1, 2]),
            r"X must be a floating-point tensor, got dtype torch.int64"),
        Bad("masked_softmax:X-list", lambda: h.masked_softmax([[[1.0, 2.0]]], [1]),
            r"X must be a torch.Tensor of shape \(B, Q, K\), got list"),
        # softmax_with_mask
        Bad("softmax_with_mask:scores-list", lambda: h.softmax_with_mask([1.0, 2.0], None),
            r"scores must be a tensor of shape \(\.\.\., K\), got \[1.0, 2.0\]"),
        Bad("softmax_with_mask:scores-0d", lambda: h.softmax_with_mask(torch.tensor(1.0), None),
            r"scores must be a tensor of shape \(\.\.\., K\), got tensor\(1.\)"),
        Bad("softmax_with_mask:scores-int", lambda: h.softmax_with_mask(t(Q, K, dtype=torch.long), None),
            r"scores must be a floating-point tensor, got dtype torch.int64"),
        Bad("softmax_with_mask:mask-float", lambda: h.softmax_with_mask(X(), torch.ones(Q, K)),
            r"mask must be a boolean tensor \(True = takes part\), got torch.float32"),
        Bad("softmax_with_mask:mask-list", lambda: h.softmax_with_mask(X(), [[True] * K] * Q),
            r"mask must be a boolean tensor \(True = takes part\), got list"),
        Bad("softmax_with_mask:mask-shape", lambda: h.softmax_with_mask(X(), torch.ones(4, K, dtype=torch.bool)),
            r"mask must broadcast to scores' shape \(\.\.\., Q, K\) = \(2, 3, 5\), got \(4, 5\)"),
        Bad("softmax_with_mask:mask-bigger", lambda: h.softmax_with_mask(t(Q, K), torch.ones(B, Q, K, dtype=torch.bool)),
            r"mask must broadcast to scores' shape \(\.\.\., Q, K\) = \(3, 5\), got \(2, 3, 5\)"),
        # valid_lens_to_mask
        Bad("valid_lens_to_mask:batch-1.5", lambda: h.valid_lens_to_mask([1], 1.5, 2, 3),
            r"batch must be an int >= 0, got 1.5"),
        Bad("valid_lens_to_mask:queries--1", lambda: h.valid_lens_to_mask([1], 1, -1, 3),
            r"queries must be an int >= 0, got -1"),
        Bad("valid_lens_to_mask:keys-None", lambda: h.valid_lens_to_mask([1], 1, 2, None),
            r"keys must be an int >= 0, got None"),
        Bad("valid_lens_to_mask:batch-True", lambda: h.valid_lens_to_mask([1], True, 2, 3),
            r"batch must be an int >= 0, got True"),
        Bad("valid_lens_to_mask:device-gpu7", lambda: h.valid_lens_to_mask([1], 1, 2, 3, "gpu7"),
            r"device must be a torch.device or a name such as 'cpu' or 'cuda', got 'gpu7'"),
        Bad("valid_lens_to_mask:too-long", lambda: h.valid_lens_to_mask([1, 4], 2, 2, 3),
            r"\[0, K\] = \[0, 3\], got values from 1 to 4"),
        Bad("valid_lens_to_mask:shape", lambda: h.valid_lens_to_mask([1, 2, 3], 2, 2, 3),
            r"\(B,\)=\(2,\) or \(B, Q\)=\(2, 2\), got \(3,\)"),
        # sequence_mask: d2l's meaning, X (B, T, ...) masked along axis 1 with valid_len (B,)
        Bad("sequence_mask:X-rank-1", lambda: h.sequence_mask(t(5), [1]),
            r"X must have shape \(B, T\) or \(B, T, \.\.\.\), got \(5,\)"),
        Bad("sequence_mask:X-list", lambda: h.sequence_mask([[1, 2]], [1]),
            r"X must have shape \(B, T\) or \(B, T, \.\.\.\), got list"),
        Bad("sequence_mask:per-query-lens-on-3d", lambda: h.sequence_mask(t(2, 3, 5), torch.ones(2, 3, dtype=torch.long)),
            r"valid_len must have shape \(B,\)=\(2,\), one length per row of X, got \(2, 3\)"),
        Bad("sequence_mask:too-long", lambda: h.sequence_mask(t(2, 3, 5), [1, 4]),
            r"valid_len must lie in \[0, T\] = \[0, 3\], got values from 1 to 4"),
        Bad("sequence_mask:negative", lambda: h.sequence_mask(t(2, 3), [-2, 1]),
            r"valid_len must lie in \[0, T\] = \[0, 3\], got values from -2 to 1"),
        Bad("sequence_mask:float-lens", lambda: h.sequence_mask(t(2, 3), torch.tensor([1.0, 2.0])),
            r"integers, got dtype torch.float32"),
        Bad("sequence_mask:value-str", lambda: h.sequence_mask(t(2, 3), [1, 2], value="x"),
            r"value must be a number that X's dtype torch.float32 holds, got 'x'"),
        Bad("sequence_mask:value-float-on-int", lambda: h.sequence_mask(
            t(2, 3, dtype=torch.long), [1, 2], value=-1.5),
            r"value must be a number that X's dtype torch.int64 holds, got -1.5"),
        Bad("sequence_mask:value-bool-on-float", lambda: h.sequence_mask(t(2, 3), [1, 2], value=True),
            r"value must be a number that X's dtype torch.float32 holds, got True"),
        # transpose_qkv / transpose_output
        Bad("transpose_qkv:rank-2", lambda: h.transpose_qkv(t(3, 12), 4),
            r"X must have 3 dimensions \(B, T, N\), got 2 with shape \(3, 12\)"),
        Bad("transpose_qkv:not-divisible", lambda: h.transpose_qkv(t(2, 3, 12), 5),
            r"feature size N=12 must be divisible by num_heads=5"),
        Bad("transpose_qkv:heads-0", lambda: h.transpose_qkv(t(2, 3, 12), 0),
            r"num_heads must be a positive int, got 0"),
        Bad("transpose_qkv:heads-2.0", lambda: h.transpose_qkv(t(2, 3, 12), 2.0),
            r"num_heads must be a positive int, got 2.0"),
        Bad("transpose_qkv:heads-True", lambda: h.transpose_qkv(t(2, 3, 12), True),
            r"num_heads must be a positive int, got True"),
        Bad("transpose_qkv:list", lambda: h.transpose_qkv([[[1.0]]], 1),
            r"X must be a torch.Tensor of shape \(B, T, N\), got list"),
        Bad("transpose_output:rank-3", lambda: h.transpose_output(t(2, 3, 4)),
            r"X must have 4 dimensions \(B, H, T, N/H\), got 3 with shape \(2, 3, 4\)"),
        Bad("transpose_output:none", lambda: h.transpose_output(None),
            r"X must be a torch.Tensor of shape \(B, H, T, N/H\), got NoneType"),
    ]
    # scaled_dot_product: any leading dims, (..., Q, D), (..., K, D), (..., K, V)
    sdp = h.scaled_dot_product
    cases += [
        Bad("scaled_dot_product:keys-rank-1", lambda: sdp(t(B, Q, D), t(5), t(B, K, V)),
            r"keys must be a tensor of at least 2 dimensions \(\.\.\., T, size\), got \(5,\)"),
        Bad("scaled_dot_product:queries-list", lambda: sdp([[1.0]], t(B, K, D), t(B, K, V)),
            r"queries must be a tensor of at least 2 dimensions \(\.\.\., T, size\), got list"),
        Bad("scaled_dot_product:queries-int", lambda: sdp(t(B, Q, D, dtype=torch.long), t(B, K, D), t(B, K, V)),
            r"queries must be a floating-point tensor, got dtype torch.int64"),
        Bad("scaled_dot_product:mixed-float32-float64", lambda: sdp(
            t(B, Q, D), t(B, K, D, dtype=torch.float64), t(B, K, V)),
            r"keys must have the dtype and device of queries \(torch.float32 on cpu\), "
            r"got torch.float64 on cpu"),
        Bad("scaled_dot_product:mixed-values-float64", lambda: sdp(
            t(B, Q, D), t(B, K, D), t(B, K, V, dtype=torch.float64), need_weights=False),
            r"values must have the dtype and device of queries \(torch.float32 on cpu\), "
            r"got torch.float64 on cpu"),
        Bad("scaled_dot_product:values-meta", lambda: sdp(t(B, Q, D), t(B, K, D), t(B, K, V, device="meta")),
            r"values must have the dtype and device of queries \(torch.float32 on cpu\), "
            r"got torch.float32 on meta"),
        Bad("scaled_dot_product:D-mismatch", lambda: sdp(t(B, Q, D), t(B, K, 3), t(B, K, V)),
            r"feature size of keys \(D, same as queries\): expected 4, got 3"),
        Bad("scaled_dot_product:K-mismatch", lambda: sdp(t(B, Q, D), t(B, K, D), t(B, 4, V)),
            r"number of values \(K, one per key\): expected 5, got 4"),
        Bad("scaled_dot_product:D-0", lambda: sdp(t(B, Q, 0), t(B, K, 0), t(B, K, V)),
            r"feature size D of queries and keys must be at least 1, got 0"),
        Bad("scaled_dot_product:batch-2-vs-3-no-mask", lambda: sdp(t(2, Q, D), t(3, K, D), t(3, K, V)),
            r"leading \(batch\) dims of queries, keys and values must broadcast together, "
            r"got \(2,\), \(3,\) and \(3,\)"),
        Bad("scaled_dot_product:batch-values-4-no-mask", lambda: sdp(
            t(2, Q, D), t(2, K, D), t(4, K, V), need_weights=False),
            r"must broadcast together, got \(2,\), \(2,\) and \(4,\)"),
        Bad("scaled_dot_product:mask-float", lambda: sdp(*qkv(), torch.ones(Q, K)),
            r"mask must be a boolean tensor \(True = takes part\), got torch.float32"),
        Bad("scaled_dot_product:mask-list", lambda: sdp(*qkv(), [True] * K),
            r"mask must be a boolean tensor \(True = takes part\), got list"),
        Bad("scaled_dot_product:mask-shape", lambda: sdp(*qkv(), torch.ones(4, K, dtype=torch.bool)),
            r"mask must broadcast to \(\.\.\., Q, K\) = \(2, 3, 5\), got \(4, 5\)"),
        Bad("scaled_dot_product:mask-K-4", lambda: sdp(*qkv(), torch.ones(4, dtype=torch.bool)),
            r"mask must broadcast to \(\.\.\., Q, K\) = \(2, 3, 5\), got \(4,\)"),
        Bad("scaled_dot_product:mask-meta", lambda: sdp(*qkv(), torch.ones(K, dtype=torch.bool, device="meta")),
            r"mask must be on the device of the scores \(cpu\), got meta"),
        Bad("scaled_dot_product:need_weights-str", lambda: sdp(*qkv(), need_weights="no"),
            r"need_weights must be True or False, got 'no'"),
    ]
    for value, shown in [(-0.1, "-0.1"), (1.0, "1.0"), (1.5, "1.5"), (NAN, "nan"), ("0.1", "'0.1'"),
                         (True, "True")]:
        for nw in (True, False):
            cases.append(Bad(f"scaled_dot_product:dropout_p={shown},need_weights={nw}",
                             lambda value=value, nw=nw: sdp(*qkv(), dropout_p=value, need_weights=nw),
                             prob("dropout_p", shown)))
    # positional encoding
    pe = lambda: h.PositionalEncoding(6, max_len=10)  # noqa: E731
    cases += [
        Bad("PositionalEncoding:X-int", lambda: pe()(t(1, 4, 6, dtype=torch.long)),
            r"X must be a floating-point tensor, got dtype torch.int64"),
        Bad("PositionalEncoding:X-bool", lambda: pe()(t(1, 4, 6, dtype=torch.bool)),
            r"X must be a floating-point tensor, got dtype torch.bool"),
        Bad("PositionalEncoding:X-rank-2", lambda: pe()(t(4, 6)),
            r"X must have 3 dimensions \(B, T, N\), got 2 with shape \(4, 6\)"),
        Bad("PositionalEncoding:X-size-5", lambda: pe()(t(1, 4, 5)),
            r"feature size of X \(num_hiddens\): expected 6, got 5"),
        Bad("PositionalEncoding:too-long", lambda: pe()(t(1, 11, 6)),
            r"sequence length T must be at most max_len=10, got 11"),
        Bad("PositionalEncoding:X-meta", lambda: pe()(t(1, 4, 6, device="meta")),
            r"X must be on the module's device \(cpu\), got meta"),
        Bad("PositionalEncoding:X-list", lambda: pe()([[[0.0] * 6]]),
            r"X must be a torch.Tensor of shape \(B, T, N\), got list"),
    ]
    for value, shown in [(0, "0"), (4.5, "4.5"), (True, "True"), (None, "None"), ("8", "'8'")]:
        cases += [
            Bad(f"PositionalEncoding(num_hiddens={shown})", lambda value=value: h.PositionalEncoding(value),
                rf"num_hiddens must be a positive int, got {shown}"),
            Bad(f"PositionalEncoding(max_len={shown})", lambda value=value: h.PositionalEncoding(4, max_len=value),
                rf"max_len must be a positive int, got {shown}"),
            Bad(f"sinusoidal_table(max_len={shown})", lambda value=value: h.sinusoidal_table(value, 4),
                rf"max_len must be a positive int, got {shown}"),
        ]
    for dtype, shown in [(torch.long, "torch.int64"), (torch.bool, "torch.bool"), ("float32", "'float32'"),
                         (np.float32, "<class 'numpy.float32'>")]:
        cases.append(Bad(f"sinusoidal_table(dtype={shown})", lambda dtype=dtype: h.sinusoidal_table(5, 4, dtype),
                         rf"dtype must be a floating-point torch.dtype, got {shown}"))
    return cases


def _regression_cases() -> list[Bad]:
    mk = h.make_regression_data
    cases = []
    for name, value, match in [
        ("n_train", 0, r"n_train must be a positive int, got 0"),
        ("n_train", 2.5, r"n_train must be a positive int, got 2.5"),
        ("n_train", True, r"n_train must be a positive int, got True"),
        ("n_test", -1, r"n_test must be a positive int, got -1"),
        ("width", 0.0, r"width must be a finite number > 0, got 0.0"),
        ("width", -1, r"width must be a finite number > 0, got -1"),
        ("width", NAN, r"width must be a finite number > 0, got nan"),
        ("width", INF, r"width must be a finite number > 0, got inf"),
        ("width", "5", r"width must be a finite number > 0, got '5'"),
        ("width", True, r"width must be a finite number > 0, got True"),
        ("noise", -1.0, r"noise must be a finite number >= 0, got -1.0"),
        ("noise", NAN, r"noise must be a finite number >= 0, got nan"),
        ("noise", -INF, r"noise must be a finite number >= 0, got -inf"),
        ("noise", INF, r"noise must be a finite number >= 0, got inf"),
        ("seed", 1.5, r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 1.5"),
        ("seed", "0", r"seed must be an int in \[-2\*\*63, 2\*\*64\), got '0'"),
        ("seed", True, r"seed must be an int in \[-2\*\*63, 2\*\*64\), got True"),
        ("seed", 2**64, r"seed must be an int in \[-2\*\*63, 2\*\*64\), got 18446744073709551616"),
    ]:
        cases.append(Bad(f"make_regression_data({name}={value!r})",
                         lambda name=name, value=value: mk(**{name: value}), match))
    for value, shown in [(1.5, "1.5"), ("0", "'0'"), (True, "True"), (None, "None"),
                         (2**64, "18446744073709551616"), (-(2**63) - 1, "-9223372036854775809")]:
        cases.append(Bad(f"set_seed({shown})", lambda value=value: h.set_seed(value),
                         rf"seed must be an int in \[-2\*\*63, 2\*\*64\), got {shown}"))
    cases += [
        Bad("target_function:list", lambda: h.target_function([1.0, 2.0]),
            r"x must be a floating-point torch.Tensor, got list"),
        Bad("target_function:int", lambda: h.target_function(torch.arange(3)),
            r"x must be a floating-point tensor, got dtype torch.int64"),
        Bad("target_function:negative", lambda: h.target_function(torch.tensor([1.0, -0.5])),
            r"x must be >= 0 .*got a minimum of -0.5"),
    ]
    x, y, xq = (lambda: torch.linspace(0, 1, 4)), (lambda: torch.zeros(4)), (lambda: torch.zeros(3))
    nw = h.nadaraya_watson
    cases += [
        Bad("nadaraya_watson:x_train-rank-2", lambda: nw(t(4, 1), y(), xq()),
            r"x_train must have 1 dimensions \(N,\), got 2 with shape \(4, 1\)"),
        Bad("nadaraya_watson:x_query-0d", lambda: nw(x(), y(), torch.tensor(1.0)),
            r"x_query must have 1 dimensions \(Q,\), got 0 with shape \(\)"),
        Bad("nadaraya_watson:y-size", lambda: nw(x(), torch.zeros(5), xq()),
            r"number of training values y_train \(N\): expected 4, got 5"),
        Bad("nadaraya_watson:empty-train", lambda: nw(torch.zeros(0), torch.zeros(0), xq()),
            r"x_train must hold at least one point, got shape \(0,\)"),
        Bad("nadaraya_watson:x_train-int", lambda: nw(torch.arange(4), y(), xq()),
            r"x_train must be a floating-point tensor, got dtype torch.int64"),
        Bad("nadaraya_watson:x_query-int", lambda: nw(x(), y(), torch.arange(3)),
            r"x_query must be a floating-point tensor, got dtype torch.int64"),
        Bad("nadaraya_watson:x_query-meta", lambda: nw(x(), y(), torch.zeros(3, device="meta")),
            r"x_query must be on x_train's device \(cpu\), got meta"),
        Bad("nadaraya_watson:y_train-meta", lambda: nw(x(), torch.zeros(4, device="meta"), xq()),
            r"y_train must be on x_train's device \(cpu\), got meta"),
        Bad("nadaraya_watson:x_train-list", lambda: nw([0.0, 1.0], torch.zeros(2), xq()),
            r"x_train must be a torch.Tensor of shape \(N,\), got list"),
        Bad("nadaraya_watson:kernel-unknown", lambda: nw(x(), y(), xq(), kernel="triangle"),
            r"kernel must be one of \['boxcar', 'constant', 'epanechnikov', 'gaussian'\], got 'triangle'"),
        Bad("nadaraya_watson:kernel-list", lambda: nw(x(), y(), xq(), kernel=["gaussian"]),
            r"kernel must be one of \[.*\], got \['gaussian'\]"),
        Bad("nadaraya_watson:kernel-None", lambda: nw(x(), y(), xq(), kernel=None),
            r"kernel must be one of \[.*\], got None"),
    ]
    for value, match in [
        (0.0, r"bandwidth must be > 0 and finite, got 0.0"),
        (-1.0, r"bandwidth must be > 0 and finite, got -1.0"),
        (NAN, r"bandwidth must be > 0 and finite, got nan"),
        (INF, r"bandwidth must be > 0 and finite, got inf"),
        (np.float32("nan"), r"bandwidth must be > 0 and finite, got nan"),
        (torch.tensor(INF), r"bandwidth must be > 0 and finite, got inf"),
        (torch.tensor(-2.0), r"bandwidth must be > 0 and finite, got -2.0"),
        (torch.tensor([0.5]), r"bandwidth must be a positive number, got tensor\(\[0.5000\]\) \(Tensor\)"),
        (torch.tensor(True), r"bandwidth must be a positive number, got tensor\(True\) \(Tensor\)"),
        (True, r"bandwidth must be a positive number, got True \(bool\)"),
        ("1", r"bandwidth must be a positive number, got '1' \(str\)"),
        (None, r"bandwidth must be a positive number, got None \(NoneType\)"),
    ]:
        cases.append(Bad(f"nadaraya_watson(bandwidth={value!r})",
                         lambda value=value: nw(x(), y(), xq(), bandwidth=value), match))
    NW = h.NWKernelRegression
    for value, shown in [(NAN, "nan"), (INF, "inf"), (-INF, "-inf"), ("1", "'1'"), (True, "True"),
                         (None, "None")]:
        cases.append(Bad(f"NWKernelRegression(init={shown})", lambda value=value: NW(x(), y(), init=value),
                         rf"init must be a finite number, got {shown}"))
    cases += [
        Bad("NWKernelRegression(per_key='yes')", lambda: NW(x(), y(), per_key="yes"),
            r"per_key must be True or False, got 'yes'"),
        Bad("NWKernelRegression(per_key=1)", lambda: NW(x(), y(), per_key=1),
            r"per_key must be True or False, got 1"),
        Bad("NWKernelRegression:x_train-int", lambda: NW(torch.arange(4), y()),
            r"x_train must be a floating-point tensor, got dtype torch.int64"),
        Bad("NWKernelRegression:x_train-rank-2", lambda: NW(t(4, 1), y()),
            r"x_train must have 1 dimensions \(N,\), got 2 with shape \(4, 1\)"),
        Bad("NWKernelRegression:y-size", lambda: NW(x(), torch.zeros(3)),
            r"number of training values y_train \(N\): expected 4, got 3"),
        Bad("NWKernelRegression:empty", lambda: NW(torch.zeros(0), torch.zeros(0)),
            r"x_train must hold at least one point, got shape \(0,\)"),
        Bad("NWKernelRegression.forward:queries-int", lambda: NW(x(), y())(torch.arange(3)),
            r"queries must be a floating-point tensor, got dtype torch.int64"),
        Bad("NWKernelRegression.forward:queries-rank-2", lambda: NW(x(), y())(t(3, 1)),
            r"queries must have 1 dimensions \(Q,\), got 2 with shape \(3, 1\)"),
        Bad("NWKernelRegression.forward:queries-meta", lambda: NW(x(), y())(torch.zeros(3, device="meta")),
            r"queries must be on the model's device \(cpu\), got meta"),
        Bad("NWKernelRegression.forward:leave_one_out-str", lambda: NW(x(), y())(x(), leave_one_out="yes"),
            r"leave_one_out must be True or False, got 'yes'"),
        Bad("NWKernelRegression.forward:leave_one_out-Q", lambda: NW(x(), y())(xq(), leave_one_out=True),
            r"Q = N\): expected 4, got 3"),
        Bad("RegressionData:x_train-rank-2", lambda: h.RegressionData(t(4, 1), y(), xq(), xq()),
            r"x_train must have 1 dimensions \(N,\), got 2 with shape \(4, 1\)"),
        Bad("RegressionData:y_train-size", lambda: h.RegressionData(x(), torch.zeros(3), xq(), xq()),
            r"number of training values y_train \(N\): expected 4, got 3"),
        Bad("RegressionData:y_truth-size", lambda: h.RegressionData(x(), y(), xq(), torch.zeros(2)),
            r"number of true values y_truth \(Q\): expected 3, got 2"),
        Bad("RegressionData:list", lambda: h.RegressionData([0.0], y(), xq(), xq()),
            r"x_train must be a torch.Tensor of shape \(N,\), got list"),
        Bad("RegressionData.to(gpu7)", lambda: h.make_regression_data(n_train=3, n_test=2).to("gpu7"),
            r"device must be a torch.device or a name such as 'cpu' or 'cuda', got 'gpu7'"),
    ]
    return cases


BAD: list[Bad] = _module_cases() + _function_cases() + _regression_cases()


# ------------------------------------------------------------------------- edge cases
def _close(a: torch.Tensor, b: torch.Tensor, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), **(tol or {"atol": 1e-5}))


def formula(q, k, v, keep):
    """softmax over the kept keys of q kᵀ / √D, times v; a row keeping nothing gives 0."""
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~keep, -INF)
    w = torch.softmax(scores, -1).nan_to_num(0.0)
    return w @ v.double()


def _edge_attention() -> list[Edge]:
    sdp = h.scaled_dot_product
    cases = []
    key_mask = torch.tensor([True, False, True, True, False])  # (K,)
    qk_mask = torch.rand(Q, K, generator=torch.Generator().manual_seed(0)) > 0.5  # (Q, K)
    for nw in (True, False):
        cases += [
            Edge(f"scaled_dot_product:(K,)-mask,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv(), key_mask, need_weights=nw)[0],
                 lambda out: _close(out, formula(*qkv(), key_mask))),
            Edge(f"scaled_dot_product:(Q,K)-mask,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv(), qk_mask, need_weights=nw)[0],
                 lambda out: _close(out, formula(*qkv(), qk_mask))),
            Edge(f"scaled_dot_product:2-D-inputs,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv((Q, D), (K, D), (K, V)), key_mask, need_weights=nw)[0],
                 lambda out: _close(out, formula(*qkv((Q, D), (K, D), (K, V)), key_mask))),
            Edge(f"scaled_dot_product:4-D,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv((B, 2, Q, D), (B, 2, K, D), (B, 2, K, V)), need_weights=nw)[0],
                 lambda out: _close(out, formula(*qkv((B, 2, Q, D), (B, 2, K, D), (B, 2, K, V)),
                                                 torch.ones(K, dtype=torch.bool)))),
            Edge(f"scaled_dot_product:keys-shared-by-batch,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv((B, Q, D), (1, K, D), (1, K, V)), need_weights=nw)[0],
                 lambda out: _close(out, formula(*qkv((B, Q, D), (1, K, D), (1, K, V)),
                                                 torch.ones(K, dtype=torch.bool)))),
            Edge(f"scaled_dot_product:K=0,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv(k=(B, 0, D), v=(B, 0, V)), need_weights=nw)[0],
                 lambda out: out.shape == (B, Q, V) and bool((out == 0).all())),
            Edge(f"scaled_dot_product:Q=0,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv(q=(B, 0, D)), need_weights=nw)[0],
                 lambda out: out.shape == (B, 0, V)),
            Edge(f"scaled_dot_product:batch-0,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv((0, Q, D), (0, K, D), (0, K, V)), need_weights=nw)[0],
                 lambda out: out.shape == (0, Q, V)),
            Edge(f"scaled_dot_product:np.float32-dropout_p-0,need_weights={nw}",
                 lambda nw=nw: sdp(*qkv(), dropout_p=np.float32(0.0), need_weights=nw)[0],
                 lambda out: _close(out, formula(*qkv(), torch.ones(K, dtype=torch.bool)))),
            Edge(f"scaled_dot_product:np.bool_-need_weights={nw}",
                 lambda nw=nw: sdp(*qkv(), need_weights=np.bool_(nw))[0],
                 lambda out: out.shape == (B, Q, V)),
        ]
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            cases.append(Edge(f"scaled_dot_product:{dtype},need_weights={nw}",
                              lambda nw=nw, dtype=dtype: sdp(*qkv(dtype=dtype), key_mask, need_weights=nw)[0],
                              lambda out, dtype=dtype: out.dtype == dtype and _close(
                                  out, formula(*qkv(dtype=dtype), key_mask), atol=3e-2)))
    lens_forms = {
        "list": [2, 5], "tuple": (2, 5), "numpy": np.array([2, 5]), "np.int64-items": [np.int64(2), np.int64(5)],
        "int32": torch.tensor([2, 5], dtype=torch.int32), "uint8": torch.tensor([2, 5], dtype=torch.uint8),
        "per-query": [[1, 2, 5], [5, 0, 3]],
    }
    for mod, (make, kw) in MODULES.items():
        n = OUT_SIZE[mod]
        for form, lens in lens_forms.items():
            cases.append(Edge(f"{mod}:lens-{form}", lambda make=make, kw=kw, lens=lens:
                              (make().eval(), lens), lambda pair, kw=kw: _same_as_tensor_lens(*pair, kw)))
        cases += [
            Edge(f"{mod}:batch-0-empty-lens", lambda make=make, kw=kw:
                 make()(*qkv((0, Q, D), (0, K, D), (0, K, V)), [], **kw),
                 lambda out, n=n: out.shape == (0, Q, n)),
            Edge(f"{mod}:batch-0-empty-float-tensor-lens", lambda make=make, kw=kw:
                 make()(*qkv((0, Q, D), (0, K, D), (0, K, V)), torch.tensor([]), **kw),
                 lambda out, n=n: out.shape == (0, Q, n)),
            Edge(f"{mod}:Q-0", lambda make=make, kw=kw: make()(*qkv(q=(B, 0, D)), [1, 2], **kw),
                 lambda out, n=n: out.shape == (B, 0, n)),
            Edge(f"{mod}:K-0-lens-0", lambda make=make, kw=kw:
                 make()(*qkv(k=(B, 0, D), v=(B, 0, V)), [0, 0], **kw),
                 lambda out, n=n: out.shape == (B, Q, n) and bool(torch.isfinite(out).all())),
            Edge(f"{mod}:lens-0-and-full", lambda make=make, kw=kw:
                 make()(*qkv(), torch.tensor([[0, 0, 0], [5, 5, 5]]), **kw),
                 lambda out, n=n: out.shape == (B, Q, n) and bool(torch.isfinite(out).all())),
        ]
    cases += [
        Edge("dot:float64-inputs", lambda: h.DotProductAttention()(*qkv(dtype=torch.float64), [2, 5]),
             lambda out: _close(out, formula(*qkv(dtype=torch.float64),
                                             torch.arange(K)[None, None] < torch.tensor([2, 5])[:, None, None]))),
        Edge("dot:V-0", lambda: h.DotProductAttention()(*qkv(v=(B, K, 0)), [1, 2]),
             lambda out: out.shape == (B, Q, 0)),
        Edge("DotProductAttention(np.float32(0.25))", lambda: h.DotProductAttention(np.float32(0.25)).dropout.p,
             lambda p: p == 0.25),
        Edge("AdditiveAttention(np.int64 sizes)", lambda: h.AdditiveAttention(np.int64(4), np.int64(4), np.int64(8))(
            *qkv()), lambda out: out.shape == (B, Q, V)),
        Edge("MultiHeadAttention(np.int64(8), np.int64(2), sizes np.int64)", lambda: h.MultiHeadAttention(
            np.int64(8), np.int64(2), query_size=np.int64(D), key_size=np.int64(D), value_size=np.int64(V),
            dropout=np.float32(0.0), bias=np.True_)(*qkv()), lambda out: out.shape == (B, Q, 8)),
        Edge("MultiHeadAttention keyword call", lambda: h.MultiHeadAttention(
            num_hiddens=8, num_heads=2, dropout=0.1, bias=True).dropout, lambda p: p == 0.1),
        Edge("transpose_qkv(np.int64 heads)", lambda: h.transpose_qkv(t(B, 3, 12), np.int64(4)),
             lambda out: out.shape == (B, 4, 3, 3)),
        Edge("transpose_qkv:batch-0", lambda: h.transpose_qkv(t(0, 3, 12), 4), lambda out: out.shape == (0, 4, 3, 3)),
        Edge("transpose_output:batch-0", lambda: h.transpose_output(t(0, 4, 3, 3)), lambda out: out.shape == (0, 3, 12)),
    ]
    return cases


def _same_as_tensor_lens(module: torch.nn.Module, lens: Any, kw: dict) -> bool:
    """The module gives the same output with ``lens`` as with ``torch.tensor(lens)``."""
    q, k, v = qkv()
    as_tensor = torch.as_tensor(np.asarray(lens, dtype=np.int64))
    return torch.equal(module(q, k, v, lens, **kw), module(q, k, v, as_tensor, **kw))


def _edge_functions() -> list[Edge]:
    X = t(B, Q, K)
    cases = [
        Edge("masked_softmax:batch-0-[]", lambda: h.masked_softmax(t(0, Q, K), []), lambda w: w.shape == (0, Q, K)),
        Edge("masked_softmax:batch-0-(B,Q)", lambda: h.masked_softmax(t(0, Q, K), torch.zeros(0, Q, dtype=torch.long)),
             lambda w: w.shape == (0, Q, K)),
        Edge("masked_softmax:K-0", lambda: h.masked_softmax(t(B, Q, 0), [0, 0]), lambda w: w.shape == (B, Q, 0)),
        Edge("masked_softmax:np-lens", lambda: h.masked_softmax(X, np.array([0, 5])),
             lambda w: bool((w[0] == 0).all()) and _close(w[1].sum(-1), torch.ones(Q))),
        Edge("softmax_with_mask:all-False", lambda: h.softmax_with_mask(X, torch.zeros(K, dtype=torch.bool)),
             lambda w: bool((w == 0).all())),
        Edge("softmax_with_mask:K-0", lambda: h.softmax_with_mask(t(Q, 0), torch.zeros(Q, 0, dtype=torch.bool)),
             lambda w: w.shape == (Q, 0)),
        Edge("valid_lens_to_mask:np.int64 sizes", lambda: h.valid_lens_to_mask(
            [1, 2], np.int64(2), np.int64(3), np.int64(4)), lambda m: m.shape == (2, 1, 4) and m.sum().item() == 3),
        Edge("valid_lens_to_mask:batch-0", lambda: h.valid_lens_to_mask([], 0, 3, 4), lambda m: m.shape == (0, 1, 4)),
        Edge("valid_lens_to_mask:device torch.device", lambda: h.valid_lens_to_mask(
            [1], 1, 1, 2, torch.device("cpu")), lambda m: m.tolist() == [[[True, False]]]),
        Edge("sequence_mask:d2l-example", lambda: h.sequence_mask(torch.ones(2, 3, 4), torch.tensor([1, 2]), value=-1),
             lambda out: out[0, 1:].eq(-1).all().item() and out[1, 2].eq(-1).all().item()
             and out[0, 0].eq(1).all().item() and out[1, :2].eq(1).all().item()),
        Edge("sequence_mask:4-D", lambda: h.sequence_mask(torch.ones(2, 3, 2, 2), [3, 0]),
             lambda out: out[0].eq(1).all().item() and out[1].eq(0).all().item()),
        Edge("sequence_mask:int-X", lambda: h.sequence_mask(torch.tensor([[1, 2, 3], [4, 5, 6]]), [1, 2], value=-1),
             lambda out: out.tolist() == [[1, -1, -1], [4, 5, -1]]),
        Edge("sequence_mask:bool-X", lambda: h.sequence_mask(torch.ones(2, 2, dtype=torch.bool), [1, 2], value=False),
             lambda out: out.tolist() == [[True, False], [True, True]]),
        Edge("sequence_mask:np.float32-value", lambda: h.sequence_mask(torch.ones(1, 2), [1], value=np.float32(2.5)),
             lambda out: out.tolist() == [[1.0, 2.5]]),
        Edge("sequence_mask:batch-0", lambda: h.sequence_mask(torch.ones(0, 3), []), lambda out: out.shape == (0, 3)),
        Edge("sequence_mask:T-0", lambda: h.sequence_mask(torch.ones(2, 0), [0, 0]), lambda out: out.shape == (2, 0)),
        Edge("PositionalEncoding(np ints, np.float32 dropout)", lambda: h.PositionalEncoding(
            np.int64(6), dropout=np.float32(0.0), max_len=np.int64(10))(torch.zeros(1, 4, 6)),
             lambda out: _close(out[0], h.sinusoidal_table(4, 6))),
        Edge("PositionalEncoding:batch-0", lambda: h.PositionalEncoding(6)(torch.zeros(0, 4, 6)),
             lambda out: out.shape == (0, 4, 6)),
        Edge("PositionalEncoding:T-0", lambda: h.PositionalEncoding(6)(torch.zeros(2, 0, 6)),
             lambda out: out.shape == (2, 0, 6)),
        Edge("PositionalEncoding:float16", lambda: h.PositionalEncoding(6)(torch.zeros(1, 3, 6, dtype=torch.float16)),
             lambda out: out.dtype == torch.float16 and _close(out[0], h.sinusoidal_table(3, 6), atol=1e-3)),
        Edge("sinusoidal_table(np.int64)", lambda: h.sinusoidal_table(np.int64(5), np.int64(3), torch.float64),
             lambda P: P.shape == (5, 3) and P.dtype == torch.float64),
    ]
    return cases


def _edge_regression() -> list[Edge]:
    x, y = torch.linspace(0, 2, 5), torch.linspace(1, 3, 5)
    ref = lambda b: h.nadaraya_watson(x, y, torch.tensor([0.3, 1.7]), bandwidth=b)[0]  # noqa: E731
    return [
        Edge("make_regression_data(np scalars)", lambda: h.make_regression_data(
            np.int64(5), np.int64(4), np.float32(2.0), np.float64(0.1), np.int64(3)),
             lambda d: d.x_train.shape == (5,) and d.x_test.shape == (4,) and float(d.x_train.max()) < 2.0),
        Edge("make_regression_data(noise=0, width=int)", lambda: h.make_regression_data(
            n_train=3, n_test=2, width=2, noise=0), lambda d: torch.equal(d.y_train, h.target_function(d.x_train))),
        Edge("make_regression_data(seed=-1)", lambda: h.make_regression_data(n_train=3, seed=-1),
             lambda d: d.x_train.shape == (3,)),
        Edge("set_seed(np.int64)", lambda: h.set_seed(np.int64(3)), lambda r: r is None),
        Edge("set_seed(-1)", lambda: h.set_seed(-1), lambda r: r is None),
        Edge("set_seed(2**63)", lambda: h.set_seed(2**63), lambda r: r is None),
        Edge("get_device()", h.get_device, lambda d: isinstance(d, torch.device)),
        Edge("target_function:empty", lambda: h.target_function(torch.zeros(0)), lambda y_: y_.shape == (0,)),
        Edge("nadaraya_watson(bandwidth=np.float32)", lambda: h.nadaraya_watson(
            x, y, torch.tensor([0.3, 1.7]), bandwidth=np.float32(0.5))[0], lambda out: _close(out, ref(0.5))),
        Edge("nadaraya_watson(bandwidth=np.int64)", lambda: h.nadaraya_watson(
            x, y, torch.tensor([0.3, 1.7]), bandwidth=np.int64(2))[0], lambda out: _close(out, ref(2.0))),
        Edge("nadaraya_watson(bandwidth=tensor)", lambda: h.nadaraya_watson(
            x, y, torch.tensor([0.3, 1.7]), bandwidth=torch.tensor(0.5))[0], lambda out: _close(out, ref(0.5))),
        Edge("nadaraya_watson:Q-0", lambda: h.nadaraya_watson(x, y, torch.zeros(0)),
             lambda r: r[0].shape == (0,) and r[1].shape == (0, 5)),
        Edge("NWKernelRegression(init=np.float32, per_key=np.True_)", lambda: h.NWKernelRegression(
            x, y, per_key=np.True_, init=np.float32(2.0)).w, lambda w: w.shape == (5,) and bool((w == 2.0).all())),
        Edge("NWKernelRegression(init=0)", lambda: h.NWKernelRegression(x, y, init=0)(torch.tensor([0.3])),
             lambda out: _close(out, y.mean()[None])),
        Edge("NWKernelRegression:Q-0", lambda: h.NWKernelRegression(x, y)(torch.zeros(0)), lambda out: out.shape == (0,)),
        Edge("RegressionData.to(torch.device)", lambda: h.make_regression_data(n_train=3, n_test=2).to(
            torch.device("cpu")), lambda d: d.x_train.device.type == "cpu"),
        Edge("RegressionData:empty-test", lambda: h.RegressionData(x, y, torch.zeros(0), torch.zeros(0)),
             lambda d: d.x_test.shape == (0,)),
    ]


def _transformer_cases() -> list[Bad]:
    """causal_mask, apply_rotary, TransformerBlock, DecoderLM, KVCache and generate."""
    lm = lambda **kw: h.DecoderLM(5, 8, 2, num_layers=1, max_len=6, **kw)  # noqa: E731
    tokens = lambda *rows: torch.tensor(rows)  # noqa: E731
    cases = [
        Bad("causal_mask:Q-0", lambda: h.causal_mask(0, 3), r"num_queries must be a positive int, got 0"),
        Bad("causal_mask:K-1.5", lambda: h.causal_mask(2, 1.5), r"num_keys must be a positive int, got 1.5"),
        Bad("causal_mask:Q-True", lambda: h.causal_mask(True, 3), r"num_queries must be a positive int, got True"),
        Bad("causal_mask:device-gpu7", lambda: h.causal_mask(2, 3, "gpu7"), r"device must be a torch.device .* got 'gpu7'"),
        Bad("DotProductAttention:causal-str", lambda: h.DotProductAttention()(*qkv(), causal="yes"),
            r"causal must be True or False, got 'yes'"),
        Bad("MultiHeadAttention:causal-1", lambda: h.MultiHeadAttention(8, 2)(t(1, 3, 8), t(1, 3, 8), t(1, 3, 8), causal=1),
            r"causal must be True or False, got 1"),
        Bad("MultiHeadAttention:cache-list", lambda: h.MultiHeadAttention(8, 2)(t(1, 3, 8), t(1, 3, 8), t(1, 3, 8), cache=[]),
            r"cache must be a KVCache or None, got list"),
        Bad("MultiHeadAttention:rotary-odd-head", lambda: h.MultiHeadAttention(6, 2, rotary=True),
            r"rotary needs an even head size: num_hiddens/num_heads must be even, got 6/2 = 3"),
        Bad("MultiHeadAttention:rotary-str", lambda: h.MultiHeadAttention(8, 2, rotary="yes"),
            r"rotary must be True or False, got 'yes'"),
        Bad("MultiHeadAttention:rotary_base-1", lambda: h.MultiHeadAttention(8, 2, rotary=True, rotary_base=1),
            r"rotary_base must be a finite number > 1.0, got 1"),
        Bad("apply_rotary:odd-D", lambda: h.apply_rotary(t(3, 5)), r"D must be even .* got D=5"),
        Bad("apply_rotary:rank-1", lambda: h.apply_rotary(t(4)), r"x must be a tensor of shape \(\.\.\., T, D\), got \(4,\)"),
        Bad("apply_rotary:int-x", lambda: h.apply_rotary(t(3, 4, dtype=torch.long)), r"x must be a floating-point tensor, got dtype torch.int64"),
        Bad("apply_rotary:positions-shape", lambda: h.apply_rotary(t(3, 4), torch.arange(4)),
            r"positions must have shape \(T,\) = \(3,\), got \(4,\)"),
        Bad("apply_rotary:positions-float", lambda: h.apply_rotary(t(3, 4), torch.zeros(3)),
            r"positions must hold integers, got dtype torch.float32"),
        Bad("apply_rotary:positions-list", lambda: h.apply_rotary(t(3, 4), [0, 1, 2]),
            r"positions must have shape \(T,\) = \(3,\), got list"),
        Bad("apply_rotary:base-nan", lambda: h.apply_rotary(t(3, 4), base=NAN), r"base must be a finite number > 1.0, got nan"),
        Bad("apply_rotary:base-0.5", lambda: h.apply_rotary(t(3, 4), base=0.5), r"base must be a finite number > 1.0, got 0.5"),
        Bad("TransformerBlock:ffn-0", lambda: h.TransformerBlock(8, 2, 0), r"ffn_hiddens must be a positive int, got 0"),
        Bad("TransformerBlock:activation", lambda: h.TransformerBlock(8, 2, 16, activation="tanh"),
            r"activation must be one of \['gelu', 'relu'\], got 'tanh'"),
        Bad("TransformerBlock:dropout-1", lambda: h.TransformerBlock(8, 2, 16, dropout=1.0),
            r"dropout must be a probability in \[0, 1\), got 1.0"),
        Bad("TransformerBlock:heads", lambda: h.TransformerBlock(8, 3, 16), r"num_hiddens must be divisible by num_heads"),
        Bad("TransformerBlock.forward:rank-2", lambda: h.TransformerBlock(8, 2, 16)(t(3, 8)),
            r"X must have 3 dimensions \(B, T, N\), got 2 with shape \(3, 8\)"),
        Bad("TransformerBlock.forward:width", lambda: h.TransformerBlock(8, 2, 16)(t(1, 3, 6)),
            r"feature size of X \(num_hiddens\): expected 8, got 6"),
        Bad("TransformerBlock.forward:lens-too-long", lambda: h.TransformerBlock(8, 2, 16)(t(1, 3, 8), [4]),
            r"\[0, K\] = \[0, 3\], got values from 4 to 4"),
        Bad("DecoderLM:vocab-0", lambda: h.DecoderLM(0, 8, 2, 1), r"vocab_size must be a positive int, got 0"),
        Bad("DecoderLM:layers-1.0", lambda: h.DecoderLM(5, 8, 2, 1.0), r"num_layers must be a positive int, got 1.0"),
        Bad("DecoderLM:positional", lambda: lm(positional="learned"),
            r"positional must be one of \('sinusoidal', 'rope', 'none', 'alibi', 't5'\), got 'learned'"),
        Bad("DecoderLM:rope-odd-head", lambda: h.DecoderLM(5, 6, 2, 1, positional="rope"),
            r"rotary needs an even head size"),
        Bad("DecoderLM:dropout-nan", lambda: lm(dropout=NAN), r"dropout must be a probability in \[0, 1\), got nan"),
        Bad("DecoderLM.forward:token-too-big", lambda: lm()(tokens([0, 5])),
            r"tokens must lie in \[0, vocab_size\) = \[0, 5\), got values from 0 to 5"),
        Bad("DecoderLM.forward:token-negative", lambda: lm()(tokens([-1, 2])), r"got values from -1 to 2"),
        Bad("DecoderLM.forward:float-tokens", lambda: lm()(torch.zeros(1, 3)),
            r"tokens must be a long tensor of token ids, got dtype torch.float32"),
        Bad("DecoderLM.forward:int32-tokens", lambda: lm()(torch.zeros(1, 3, dtype=torch.int32)),
            r"tokens must be a long tensor of token ids, got dtype torch.int32"),
        Bad("DecoderLM.forward:rank-1", lambda: lm()(torch.zeros(3, dtype=torch.long)),
            r"tokens must have 2 dimensions \(B, T\), got 1 with shape \(3,\)"),
        Bad("DecoderLM.forward:too-long", lambda: lm()(torch.zeros(1, 7, dtype=torch.long)),
            r"sequence length must be at most max_len=6, got 7"),
        Bad("DecoderLM.forward:cache-count", lambda: lm()(tokens([1]), cache=[]),
            r"number of caches \(one per layer\): expected 1, got 0"),
        Bad("KVCache.append:rank-3", lambda: h.KVCache().append(t(2, 3, 4), t(2, 3, 4)),
            r"keys must have 4 dimensions \(B, H, T_new, N/H\), got 3 with shape \(2, 3, 4\)"),
        Bad("generate:num_new--1", lambda: h.generate(lm(), tokens([1, 2]), -1), r"num_new must be an int >= 0, got -1"),
        Bad("generate:num_new-1.5", lambda: h.generate(lm(), tokens([1, 2]), 1.5), r"num_new must be an int >= 0, got 1.5"),
        Bad("generate:too-long", lambda: h.generate(lm(), tokens([1, 2]), 5),
            r"prompt length \+ num_new must be at most max_len=6, got 2 \+ 5"),
        Bad("generate:prompt-rank-1", lambda: h.generate(lm(), torch.tensor([1, 2]), 1),
            r"prompt must have 2 dimensions \(B, T0\), got 1 with shape \(2,\)"),
        Bad("generate:T0-0", lambda: h.generate(lm(), torch.zeros(1, 0, dtype=torch.long), 2),
            r"prompt must hold at least one token \(T0 >= 1\), got shape \(1, 0\)"),
        Bad("generate:use_cache-str", lambda: h.generate(lm(), tokens([1, 2]), 1, use_cache="no"),
            r"use_cache must be True or False, got 'no'"),
        Bad("generate:model-block", lambda: h.generate(h.TransformerBlock(8, 2, 16), tokens([1, 2]), 1),
            r"model must be a DecoderLM, got TransformerBlock"),
        Bad("generate:prompt-float", lambda: h.generate(lm(), torch.zeros(1, 2), 1),
            r"prompt must be a long tensor of token ids, got dtype torch.float32"),
        Bad("DecoderLM.forward:one-KVCache", lambda: lm()(tokens([1]), cache=h.KVCache()),
            r"cache must be a list of one KVCache per layer \(new_cache\(\)\), got KVCache"),
        Bad("TransformerBlock.forward:float64", lambda: h.TransformerBlock(8, 2, 16)(t(1, 3, 8, dtype=torch.float64)),
            r"X must have the dtype and device of the module's parameters \(torch.float32 on cpu\), got torch.float64"),
        Bad("KVCache.append:T_new-differs", lambda: h.KVCache().append(t(1, 2, 3, 4), t(1, 2, 2, 4)),
            r"values must have the shape \(B, H, T_new\) of keys = \(1, 2, 3\), got \(1, 2, 2\)"),
        Bad("KVCache.append:float64-onto-float32", lambda: (lambda c: (c.append(t(1, 2, 3, 4), t(1, 2, 3, 4)), c.append(
            t(1, 2, 1, 4, dtype=torch.float64), t(1, 2, 1, 4, dtype=torch.float64))))(h.KVCache()),
            r"keys must have the dtype and device of the cached keys \(torch.float32 on cpu\), got torch.float64"),
        Bad("rotary_angles:size-odd", lambda: h.rotary.rotary_angles(torch.arange(3), 5), r"size must be an even int >= 2, got 5"),
        Bad("rotary_angles:dtype-long", lambda: h.rotary.rotary_angles(torch.arange(3), 4, dtype=torch.long),
            r"dtype must be a floating torch.dtype, got torch.int64"),
    ]
    return cases


def _edge_transformer() -> list[Edge]:
    lm = lambda **kw: h.DecoderLM(5, 8, 2, num_layers=1, max_len=6, **kw)  # noqa: E731
    return [
        Edge("causal_mask:np.int64", lambda: h.causal_mask(np.int64(2), np.int64(3)),
             lambda m: m.tolist() == [[True, True, False], [True, True, True]]),
        Edge("causal_mask:Q>K", lambda: h.causal_mask(3, 2), lambda m: m.tolist() == [[False, False], [True, False], [True, True]]),
        Edge("DotProductAttention:causal-Q>K-no-NaN", lambda: h.DotProductAttention()(t(1, 4, 3), t(1, 2, 3), t(1, 2, 2), causal=True),
             lambda out: bool((out[0, :2] == 0).all()) and not out.isnan().any()),
        Edge("MultiHeadAttention:causal+lens-0", lambda: h.MultiHeadAttention(8, 2)(t(1, 3, 8), t(1, 3, 8), t(1, 3, 8), [0], causal=True),
             lambda out: not out.isnan().any()),
        Edge("apply_rotary:T-0", lambda: h.apply_rotary(t(2, 0, 4)), lambda y: y.shape == (2, 0, 4)),
        Edge("apply_rotary:np.float32-base", lambda: h.apply_rotary(t(3, 4), base=np.float32(100.0)), lambda y: y.shape == (3, 4)),
        Edge("DecoderLM:np.int64-sizes", lambda: h.DecoderLM(np.int64(5), np.int64(8), np.int64(2), np.int64(1)),
             lambda m: len(m.blocks) == 1),
        Edge("DecoderLM:max_len-tokens", lambda: lm()(torch.zeros(2, 6, dtype=torch.long)), lambda out: out.shape == (2, 6, 5)),
        Edge("DecoderLM:batch-0", lambda: lm()(torch.zeros(0, 3, dtype=torch.long)), lambda out: out.shape == (0, 3, 5)),
        Edge("generate:num_new-0", lambda: h.generate(lm(), torch.tensor([[1, 2]]), 0), lambda out: out.tolist() == [[1, 2]]),
        Edge("generate:np.int64", lambda: h.generate(lm(), torch.tensor([[1, 2]]), np.int64(2)), lambda out: out.shape == (1, 4)),
        Edge("generate:num_new-0-is-a-copy", lambda: (lambda p: (p, h.generate(lm(), p, 0)))(torch.tensor([[1, 2]])),
             lambda r: torch.equal(r[0], r[1]) and r[0].data_ptr() != r[1].data_ptr()),
        Edge("MultiHeadAttention:causal-K-0", lambda: h.MultiHeadAttention(8, 2)(t(1, 3, 8), t(1, 0, 8), t(1, 0, 8), causal=True),
             lambda out: out.shape == (1, 3, 8) and bool((out == 0).all())),
        Edge("MultiHeadAttention:rotary-last-queries", lambda: (lambda m, x: (m(x[:, 3:], x, x, causal=True),
                                                                               m(x, x, x, causal=True)[:, 3:]))(
            h.MultiHeadAttention(8, 2, rotary=True).eval(), t(1, 5, 8)),
             lambda r: torch.allclose(r[0], r[1], atol=1e-6)),
        Edge("rotary_angles:fractional", lambda: h.rotary.rotary_angles(torch.tensor([0.5]), 2, base=4.0),
             lambda a: a.tolist() == [[0.5]]),
    ]


BAD += _transformer_cases()
EDGE: list[Edge] = _edge_attention() + _edge_functions() + _edge_regression() + _edge_transformer()


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_input_raises_value_error_naming_expected_and_actual(case: Bad):
    with pytest.raises(ValueError, match=case.match):
        case.call()


@pytest.mark.parametrize("case", EDGE, ids=[c.id for c in EDGE])
def test_edge_case_works(case: Edge):
    assert case.check(case.call())


def test_tables_are_broad_and_ids_unique():
    assert len(BAD) >= 200 and len(EDGE) >= 60
    ids = [c.id for c in BAD + EDGE]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("shapes", [
    [(2, 3), (1, 3)], [(5,), (4, 1)], [(), (2,)], [(0, 3), (1, 3)], [(2, 1, 4), (3, 1)], [(2, 3), (3, 2)],
    [(2,), (3,)], [(1,), (0,)], [(4, 0), (4, 1), (1, 1)],
])
def test_broadcast_shape_follows_torch(shapes):
    from helpers.checks import broadcast_shape

    try:
        expected = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        expected = None
    assert broadcast_shape(*shapes) == expected
