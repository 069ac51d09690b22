"""Try a large catalogue of bad and edge inputs on the public helpers, and print a tally.

    .venv/bin/python tools/fuzz_inputs.py [--limit SECONDS] [--seed N] [--quiet]

Five sources of cases, all run in this process (no subprocess), each call under a time limit
(``signal.setitimer``), so that a hang is counted instead of blocking the run:

1. the tables of ``tests/test_bad_input.py`` (each bad call with the pattern its message must
   match, each edge case with the check its result must pass);
2. every numeric or flag hyper-parameter of the attention helpers against a pool of odd values
   (NumPy scalars, NaN, ±inf, bools, None, strings, 0-d tensors), judged by the project's rules
   (sizes: ints ≥ 1; probabilities in [0, 1); finite numbers; flags are bools);
3. random attention calls (seeded): shapes, dtypes, devices ('meta'), valid lengths and masks
   drawn at random, some perturbed, judged by an oracle written out here and, when valid,
   checked against the formula softmax(q kᵀ/√D) v;
4. the specs of ``tests/fuzz/``: every public callable of every module (the list comes from
   the modules' ``__all__``, widget modules included), each parameter swept over a pool of odd
   values and tensor variants, plus each spec's own bad and edge cases;
5. every notebook's exercise checks, with right, wrong and oddly typed answers.

A bad input counts as *clear* when it raises a ValueError whose message matches its pattern
(for generated cases: it says what was expected and what came, ``must ... got``), *vague* for
a ValueError whose message does not, *raw* for any other exception (PyTorch's own, an
IndexError...), *silent* when nothing is raised. An edge case must return a right result. The
exit status is 0 only when every bad input is clear and every edge case works.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's helpers and tests, whatever is installed

import numpy as np  # noqa: E402
import torch  # noqa: E402

import helpers as h  # noqa: E402
from tests import fuzz  # noqa: E402
from tests.notebook_code import notebook_namespace  # noqa: E402
from tests.test_bad_input import BAD, EDGE  # noqa: E402

GENERIC = fuzz.GENERIC  # a generated bad case: says what was expected and what came


@dataclass
class Case:
    source: str  # "table", "hyper-parameter", "random attention"
    id: str
    call: Callable[[], Any]
    bad: bool
    match: str | None = None  # bad: the pattern the ValueError must match
    check: Callable[[Any], bool] | None = None  # edge: True when the result is right (None: any)
    limit: float | None = None  # seconds for this call (None: --limit)


def run_case(case: Case, limit: float) -> tuple[str, str]:
    """(outcome, detail): outcome is clear / vague / raw / silent / hang for a bad input and
    ok / rejected / wrong / hang for an edge case (``tests.fuzz.run_case`` judges it)."""
    return fuzz.run_case(fuzz.Generated(case.source, case.id, case.call, case.bad, case.match,
                                        case.check, max(limit, case.limit or 0)))


# ------------------------------------------------------------------ 2. hyper-parameters
ODD_VALUES, _is_int, _is_real = fuzz.ODD_VALUES, fuzz._is_int, fuzz._is_real


RULES: dict[str, Callable[[Any], bool]] = {
    **fuzz.RULES,
    "bandwidth": lambda v: _is_real(v) and v > 0 or isinstance(v, torch.Tensor) and v.dim() == 0
    and v.dtype != torch.bool and bool(torch.isfinite(v)) and bool(v > 0),
}


def _small_qkv():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g),
            torch.randn(2, 5, 6, generator=g))


def _x():
    return torch.linspace(0, 2, 5)


# (name, rule, call with the value, extra condition for validity beyond the rule)
PARAMETERS: list[tuple[str, str, Callable[[Any], Any], Callable[[Any], bool]]] = [
    ("DotProductAttention(dropout)", "probability", lambda v: h.DotProductAttention(v), lambda v: True),
    ("DotProductAttention.forward(need_weights)", "flag",
     lambda v: h.DotProductAttention()(*_small_qkv(), need_weights=v), lambda v: True),
    ("AdditiveAttention(key_size)", "size", lambda v: h.AdditiveAttention(v, 3, 4), lambda v: True),
    ("AdditiveAttention(query_size)", "size", lambda v: h.AdditiveAttention(2, v, 4), lambda v: True),
    ("AdditiveAttention(num_hiddens)", "size", lambda v: h.AdditiveAttention(2, 3, v), lambda v: True),
    ("AdditiveAttention(dropout)", "probability", lambda v: h.AdditiveAttention(2, 3, 4, v), lambda v: True),
    ("MultiHeadAttention(num_hiddens)", "size", lambda v: h.MultiHeadAttention(v, 1), lambda v: True),
    ("MultiHeadAttention(num_heads)", "size", lambda v: h.MultiHeadAttention(4, v), lambda v: 4 % v == 0),
    ("MultiHeadAttention(dropout)", "probability", lambda v: h.MultiHeadAttention(4, 2, dropout=v), lambda v: True),
    ("MultiHeadAttention(bias)", "flag", lambda v: h.MultiHeadAttention(4, 2, bias=v), lambda v: True),
    ("MultiHeadAttention(query_size)", "size or None", lambda v: h.MultiHeadAttention(4, 2, query_size=v), lambda v: True),
    ("MultiHeadAttention(key_size)", "size or None", lambda v: h.MultiHeadAttention(4, 2, key_size=v), lambda v: True),
    ("MultiHeadAttention(value_size)", "size or None", lambda v: h.MultiHeadAttention(4, 2, value_size=v), lambda v: True),
    ("MultiHeadAttention.forward(need_weights)", "flag", lambda v: h.MultiHeadAttention(
        8, 2, query_size=4, key_size=4, value_size=6)(*_small_qkv(), need_weights=v), lambda v: True),
    ("scaled_dot_product(dropout_p)", "probability",
     lambda v: h.scaled_dot_product(*_small_qkv(), dropout_p=v), lambda v: True),
    ("scaled_dot_product(dropout_p, need_weights=False)", "probability",
     lambda v: h.scaled_dot_product(*_small_qkv(), dropout_p=v, need_weights=False), lambda v: True),
    ("scaled_dot_product(need_weights)", "flag",
     lambda v: h.scaled_dot_product(*_small_qkv(), need_weights=v), lambda v: True),
    ("transpose_qkv(num_heads)", "size", lambda v: h.transpose_qkv(torch.zeros(1, 2, 4), v),
     lambda v: 4 % v == 0),
    ("valid_lens_to_mask(batch)", "count", lambda v: h.valid_lens_to_mask([], v, 2, 3), lambda v: v == 0),
    ("valid_lens_to_mask(queries)", "count", lambda v: h.valid_lens_to_mask([1], 1, v, 3), lambda v: True),
    ("valid_lens_to_mask(keys)", "count", lambda v: h.valid_lens_to_mask([1], 1, 2, v), lambda v: v >= 1),
    ("PositionalEncoding(num_hiddens)", "size", lambda v: h.PositionalEncoding(v, max_len=4), lambda v: True),
    ("PositionalEncoding(dropout)", "probability", lambda v: h.PositionalEncoding(4, v, max_len=4), lambda v: True),
    ("PositionalEncoding(max_len)", "size", lambda v: h.PositionalEncoding(4, max_len=v), lambda v: True),
    ("sinusoidal_table(max_len)", "size", lambda v: h.sinusoidal_table(v, 4), lambda v: True),
    ("sinusoidal_table(num_hiddens)", "size", lambda v: h.sinusoidal_table(4, v), lambda v: True),
    ("make_regression_data(n_train)", "size", lambda v: h.make_regression_data(n_train=v, n_test=3), lambda v: True),
    ("make_regression_data(n_test)", "size", lambda v: h.make_regression_data(n_train=3, n_test=v), lambda v: True),
    ("make_regression_data(width)", "positive", lambda v: h.make_regression_data(3, 3, width=v), lambda v: True),
    ("make_regression_data(noise)", "non-negative", lambda v: h.make_regression_data(3, 3, noise=v), lambda v: True),
    ("make_regression_data(seed)", "seed", lambda v: h.make_regression_data(3, 3, seed=v), lambda v: True),
    ("nadaraya_watson(bandwidth)", "bandwidth",
     lambda v: h.nadaraya_watson(_x(), _x(), _x(), bandwidth=v), lambda v: True),
    ("NWKernelRegression(init)", "finite", lambda v: h.NWKernelRegression(_x(), _x(), init=v), lambda v: True),
    ("NWKernelRegression(per_key)", "flag", lambda v: h.NWKernelRegression(_x(), _x(), per_key=v), lambda v: True),
    ("NWKernelRegression.forward(leave_one_out)", "flag",
     lambda v: h.NWKernelRegression(_x(), _x())(_x(), leave_one_out=v), lambda v: True),
    ("set_seed(seed)", "seed", lambda v: h.set_seed(v), lambda v: True),
    ("causal_mask(num_queries)", "size", lambda v: h.causal_mask(v, 3), lambda v: True),
    ("causal_mask(num_keys)", "size", lambda v: h.causal_mask(3, v), lambda v: True),
    ("DotProductAttention.forward(causal)", "flag",
     lambda v: h.DotProductAttention()(*_small_qkv(), causal=v), lambda v: True),
    ("MultiHeadAttention.forward(causal)", "flag", lambda v: h.MultiHeadAttention(
        8, 2, query_size=4, key_size=4, value_size=6)(*_small_qkv(), causal=v), lambda v: True),
    ("MultiHeadAttention(rotary)", "flag", lambda v: h.MultiHeadAttention(4, 2, rotary=v), lambda v: True),
    ("MultiHeadAttention(rotary_base)", "above one",
     lambda v: h.MultiHeadAttention(4, 2, rotary=True, rotary_base=v), lambda v: True),
    ("apply_rotary(base)", "above one", lambda v: h.apply_rotary(torch.zeros(3, 4), base=v), lambda v: True),
    ("apply_rotary(interleaved)", "flag", lambda v: h.apply_rotary(torch.zeros(3, 4), interleaved=v), lambda v: True),
    ("TransformerBlock(ffn_hiddens)", "size", lambda v: h.TransformerBlock(4, 2, v), lambda v: True),
    ("TransformerBlock(dropout)", "probability", lambda v: h.TransformerBlock(4, 2, 8, v), lambda v: True),
    ("DecoderLM(vocab_size)", "size", lambda v: h.DecoderLM(v, 4, 2, 1, max_len=4), lambda v: True),
    ("DecoderLM(num_hiddens)", "size", lambda v: h.DecoderLM(3, v, 1, 1, max_len=4), lambda v: True),
    ("DecoderLM(num_layers)", "size", lambda v: h.DecoderLM(3, 4, 2, v, max_len=4), lambda v: v <= 1000),
    ("DecoderLM(max_len)", "size", lambda v: h.DecoderLM(3, 4, 2, 1, max_len=v), lambda v: True),
    ("DecoderLM(dropout)", "probability", lambda v: h.DecoderLM(3, 4, 2, 1, max_len=4, dropout=v), lambda v: True),
    ("tiled_attention(block_size)", "size", lambda v: h.tiled_attention(*_small_qkv(), block_size=v), lambda v: True),
    ("tiled_attention(causal)", "flag", lambda v: h.tiled_attention(*_small_qkv(), causal=v), lambda v: True),
    ("generate(num_new)", "count", lambda v: h.generate(h.DecoderLM(3, 4, 2, 1, max_len=6),
                                                        torch.zeros(1, 2, dtype=torch.long), v), lambda v: v <= 4),
]
HUGE_SIZE = 10**6  # sizes above this would allocate too much: not tried as sizes


def hyper_parameter_cases() -> list[Case]:
    cases = []
    for name, rule, call, extra in PARAMETERS:
        for shown, value in ODD_VALUES:
            if rule in ("size", "count", "size or None") and isinstance(value, (int, float)) and abs(value) > HUGE_SIZE:
                continue
            follows_rule = RULES[rule](value)
            # a value that breaks the rule must be named in the message; one that breaks a
            # condition between arguments (divisibility, lengths) needs only say must ... got
            param = re.search(r"\((\w+)", name).group(1)
            match = GENERIC if follows_rule else rf"^(?=[^\n]*\b{param}\b)[^\n]*{GENERIC}"
            cases.append(Case("hyper-parameter", f"{name} = {shown}", lambda call=call, value=value:
                              call(value), bad=not (follows_rule and extra(value)), match=match,
                              check=lambda result: True))
    return cases


# --------------------------------------------------------------- 3. random attention calls
MODULE_KINDS = ["dot", "dot-sdpa", "additive", "multihead", "multihead-sdpa", "sdp", "sdp-sdpa",
                "masked_softmax"]
PERTURBATIONS = [
    "k-batch+1", "v-batch+1", "v-K+1", "k-D+1", "q-D+1", "v-V+1", "q-drop-batch", "k-extra-dim",
    "k-float64", "v-float16", "q-int", "v-bool", "all-float64", "all-bfloat16", "k-meta", "D-0",
    "lens-negative", "lens-too-long", "lens-float", "lens-bool", "lens-shape", "lens-per-query-shape",
    "lens-list", "mask-float", "mask-shape",
]


SPEC_CHANGES: dict[str, Callable[[dict], None]] = {  # the perturbations of sizes, dtypes, devices
    "k-batch+1": lambda s: s.update(kB=s["kB"] + 1),
    "v-batch+1": lambda s: s.update(vB=s["vB"] + 1),
    "v-K+1": lambda s: s.update(Kv=s["Kv"] + 1),
    "k-D+1": lambda s: s.update(Dk=s["Dk"] + 1),
    "q-D+1": lambda s: s.update(Dq=s["Dq"] + 1),
    "v-V+1": lambda s: s.update(V=s["V"] + 1),
    "D-0": lambda s: s.update(Dq=0, Dk=0),
    "k-float64": lambda s: s.update(k_dtype=torch.float64),
    "v-float16": lambda s: s.update(v_dtype=torch.float16),
    "q-int": lambda s: s.update(q_dtype=torch.int64),
    "v-bool": lambda s: s.update(v_dtype=torch.bool),
    "all-float64": lambda s: s.update(q_dtype=torch.float64, k_dtype=torch.float64, v_dtype=torch.float64),
    "all-bfloat16": lambda s: s.update(q_dtype=torch.bfloat16, k_dtype=torch.bfloat16,
                                       v_dtype=torch.bfloat16),
    "k-meta": lambda s: s.update(k_device="meta"),
}


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast of ``shapes`` (NumPy's rule, written out), or None if they do not broadcast."""
    out: list[int] = []
    for dims in zip(*(((1,) * (max(map(len, shapes)) - len(s)) + tuple(s)) for s in shapes)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def random_attention_cases(n: int, seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [_random_case(i, rng) for i in range(n)]


def _random_case(i: int, rng: np.random.Generator) -> Case:
    kind = MODULE_KINDS[i % len(MODULE_KINDS)]
    B, Q, K = (int(rng.choice(c)) for c in ((0, 1, 2, 3), (0, 1, 3), (0, 1, 4)))
    D, V = int(rng.choice((1, 2, 4))), int(rng.choice((1, 3)))
    s = dict(qB=B, kB=B, vB=B, Kv=K, Dq=D, Dk=D, V=V,
             q_dtype=torch.float32, k_dtype=torch.float32, v_dtype=torch.float32, k_device="cpu")
    lens_kind = str(rng.choice(["none", "per-row", "per-query"]))
    perturbed = [str(p) for p in rng.choice(PERTURBATIONS, size=int(rng.choice((0, 0, 1, 1, 2))), replace=False)]
    mod_D, mod_V = D, V  # the modules are built for the unperturbed sizes
    for p in perturbed:
        SPEC_CHANGES.get(p, lambda s: None)(s)
    q_drop = "q-drop-batch" in perturbed
    k_extra = "k-extra-dim" in perturbed
    q_shape = ((Q,) if q_drop else (s["qB"], Q)) + (s["Dq"],)
    k_shape = ((1,) if k_extra else ()) + (s["kB"], K, s["Dk"])
    v_shape = (s["vB"], s["Kv"], s["V"])
    g = torch.Generator().manual_seed(int(rng.integers(2**31)))
    lens_values = rng.integers(0, K + 1, size=(B,) if lens_kind == "per-row" else (B, Q))
    lens: Any = None if lens_kind == "none" else torch.tensor(lens_values, dtype=torch.long).reshape(
        (B,) if lens_kind == "per-row" else (B, Q))
    lens_ok = True
    if lens is not None or any(p.startswith("lens-") for p in perturbed):
        if lens is None:
            lens_kind, lens = "per-row", torch.tensor(rng.integers(0, K + 1, size=B), dtype=torch.long)
        if "lens-negative" in perturbed and lens.numel():
            lens = lens.clone(); lens.view(-1)[0] = -1; lens_ok = False
        if "lens-too-long" in perturbed and lens.numel():
            lens = lens.clone(); lens.view(-1)[-1] = K + 2; lens_ok = False
        if "lens-float" in perturbed and lens.numel():
            lens = lens.float(); lens_ok = False
        if "lens-bool" in perturbed and lens.numel():
            lens = lens > 0; lens_ok = False
        if "lens-shape" in perturbed:
            lens = torch.zeros(B + 1, dtype=torch.long); lens_ok = False
        if "lens-per-query-shape" in perturbed:
            lens = torch.zeros(B, Q + 1, dtype=torch.long); lens_ok = False
        if "lens-list" in perturbed and lens.numel():  # (an empty one would lose its shape)
            lens = lens.tolist()  # a plain list is as good as a tensor
    mask: Any = None
    if kind.startswith("sdp"):
        options = [None, (K,), (Q, K), (B, 1, K), (B, Q, K)]
        mask_shape = options[int(rng.integers(len(options)))]
        if "mask-shape" in perturbed:
            mask_shape = (K + 1,)
        if mask_shape is not None:
            mask = torch.rand(*mask_shape, generator=g) > 0.3
            if "mask-float" in perturbed:
                mask = mask.float()

    def make(shape, dtype, device="cpu"):
        if device == "meta":
            return torch.empty(shape, dtype=dtype, device="meta")
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        return x.to(dtype) if dtype.is_floating_point else (x > 0).to(dtype)

    q = make(q_shape, s["q_dtype"])
    k = make(k_shape, s["k_dtype"], s["k_device"])
    v = make(v_shape, s["v_dtype"])

    # ---- the oracle: is this call valid, by the documented contract?
    floating = all(x.dtype.is_floating_point for x in (q, k, v))
    alike = len({x.dtype for x in (q, k, v)}) == 1 and len({x.device for x in (q, k, v)}) == 1
    if kind.startswith("sdp"):
        lead = _broadcast(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        valid = floating and alike and q.shape[-1] == k.shape[-1] >= 1 and k.shape[-2] == v.shape[-2] \
            and lead is not None
        if valid and mask is not None:
            target = (*lead, q.shape[-2], k.shape[-2])
            valid = mask.dtype == torch.bool and mask.dim() <= len(target) \
                and _broadcast(mask.shape, target) == target
        lens = None
    elif kind == "masked_softmax":
        X = make((s["qB"], Q, K) if not q_drop else (Q, K), s["q_dtype"])
        valid = X.dtype.is_floating_point and X.dim() == 3 and (lens is None or lens_ok)
    else:
        valid = floating and alike and q.dim() == k.dim() == v.dim() == 3 \
            and q.shape[0] == k.shape[0] == v.shape[0] and k.shape[1] == v.shape[1] and lens_ok
        if kind.startswith("dot"):
            valid = valid and q.shape[-1] == k.shape[-1] >= 1
        else:  # the module's parameters: float32 on the CPU, sizes fixed at construction
            valid = valid and q.dtype == torch.float32 and q.device.type == "cpu" \
                and (q.shape[-1], k.shape[-1]) == (mod_D, mod_D)
            if kind.startswith("multihead"):
                valid = valid and v.shape[-1] == mod_V

    # Padding must change nothing: in some valid calls, what no query may see becomes NaN / inf
    # for the helper, while the reference below reads the clean tensors.
    poisoned = valid and bool(rng.random() < 0.4)
    qc, kc, vc = q, k, v
    if poisoned:
        if kind == "masked_softmax":
            Xc = X.masked_fill(~_keep(lens, X.shape), math.nan)
        else:
            unseen = _unseen(kind, lens, mask, q, k)  # (..., K) or None
            if unseen is None:
                poisoned = False
            else:
                kc = k.masked_fill(unseen[..., None], math.nan)
                vc = v.masked_fill(unseen[..., None], math.inf)
    nw = not kind.endswith("-sdpa")
    if kind.startswith("dot"):
        call = lambda: h.DotProductAttention()(qc, kc, vc, lens, need_weights=nw)  # noqa: E731
    elif kind == "additive":
        call = lambda: h.AdditiveAttention(mod_D, mod_D, 3)(qc, kc, vc, lens)  # noqa: E731
    elif kind.startswith("multihead"):
        call = lambda: h.MultiHeadAttention(  # noqa: E731
            4, 2, query_size=mod_D, key_size=mod_D, value_size=mod_V)(qc, kc, vc, lens, need_weights=nw)
    elif kind.startswith("sdp"):
        call = lambda: h.scaled_dot_product(qc, kc, vc, mask, need_weights=nw)[0]  # noqa: E731
    else:
        call = lambda: h.masked_softmax(Xc if poisoned else X, lens)  # noqa: E731

    def check(out: torch.Tensor) -> bool:
        if kind == "masked_softmax":
            keep = _keep(lens, X.shape)
            ref = torch.softmax(X.double().masked_fill(~keep, -math.inf), -1).nan_to_num(0.0)
            tol = 1e-2 if X.dtype in (torch.float16, torch.bfloat16) else 1e-5
            return out.shape == X.shape and torch.allclose(out.double(), ref, atol=tol)
        if kind.startswith(("additive", "multihead")):
            return out.shape == (q.shape[0], Q, 4 if kind.startswith("multihead") else v.shape[-1]) \
                and bool(torch.isfinite(out).all())
        keep = _keep(lens, (q.shape[0], Q, K)) if kind.startswith("dot") else (
            torch.ones(K, dtype=torch.bool) if mask is None else mask)
        scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        ref = torch.softmax(scores.masked_fill(~keep, -math.inf), -1).nan_to_num(0.0) @ v.double()
        tol = 3e-2 if q.dtype in (torch.float16, torch.bfloat16) else 1e-5
        return out.dtype == q.dtype and out.shape == ref.shape and torch.allclose(out.double(), ref, atol=tol)

    desc = (f"{kind} q{tuple(q.shape)} k{tuple(k.shape)}{'@meta' if k.is_meta else ''} v{tuple(v.shape)} "
            f"dtypes {str(q.dtype)[6:]}/{str(k.dtype)[6:]}/{str(v.dtype)[6:]} "
            f"lens {_lens_text(lens)} mask {None if mask is None else tuple(mask.shape)} "
            f"perturbed {perturbed or '-'}{' padding NaN/inf' if poisoned else ''}")
    return Case("random attention", f"#{i} {desc}", call, bad=not valid, match=GENERIC, check=check)


def _unseen(kind: str, lens: Any, mask: Any, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """The keys no query may see, (B, K) or (..., K) laid out like k's leading dims; None when
    they cannot be told apart from k's layout (a mask broadcast over k's leading dims)."""
    if kind.startswith("sdp"):
        if mask is None:
            return None
        target = (*_broadcast(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        unseen = ~mask.expand(target).any(-2)  # (*lead, K)
        return unseen if unseen.shape[:-1] == k.shape[:-2] else None
    if lens is None:
        return None
    return ~_keep(lens, (q.shape[0], q.shape[1], k.shape[1])).any(-2)  # (B, K)


def _keep(lens: Any, shape: tuple[int, int, int]) -> torch.Tensor:
    B, Q, K = shape
    if lens is None:
        return torch.ones(B, Q, K, dtype=torch.bool)
    lens = torch.as_tensor(lens, dtype=torch.long)
    lens = lens[:, None] if lens.dim() == 1 else lens
    return torch.arange(K) < lens[..., None]


def _lens_text(lens: Any) -> str:
    if lens is None:
        return "None"
    if isinstance(lens, torch.Tensor):
        return f"{tuple(lens.shape)} {str(lens.dtype)[6:]}"
    return f"list {lens}"[:40]


# ----------------------------------------------------------------------------------- main
def spec_cases() -> list[Case]:
    """Sources 4 and 5: the cases generated from the specs of tests/fuzz."""
    cases = []
    for spec in fuzz.all_specs():
        cases += [Case("api specs", f"{g.target} {g.id}", g.call, g.bad, g.match, g.check,
                       g.limit) for g in fuzz.generate_cases(spec)]
    for spec in fuzz.all_check_specs():
        ns = notebook_namespace(spec.notebook, {spec.name, *spec.wanted}, spec.namespace())
        cases += [Case("exercise checks", f"{g.target} {g.id}", g.call, g.bad, g.match, g.check,
                       g.limit) for g in fuzz.generate_check_cases(spec, ns)]
    return cases


def coverage() -> tuple[int, list[str]]:
    """(number of public callables, those without a spec)."""
    targets = fuzz.public_targets()
    specced = {spec.target for spec in fuzz.all_specs()}
    return len(targets), sorted(set(targets) - specced)


def catalogue(n_random: int, seed: int) -> list[Case]:
    table = [Case("table", c.id, c.call, bad=True, match=c.match) for c in BAD]
    table += [Case("table", c.id, c.call, bad=False, check=c.check) for c in EDGE]
    return table + hyper_parameter_cases() + random_attention_cases(n_random, seed) + spec_cases()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=10.0, help="seconds per call (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random attention calls")
    parser.add_argument("--random", type=int, default=400, help="number of random attention calls")
    parser.add_argument("--quiet", action="store_true", help="the tally only, no list of cases")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    cases = catalogue(args.random, args.seed)
    results = [(case, *run_case(case, args.limit)) for case in cases]

    print(f"fuzz_inputs: helpers from {Path(h.__file__).parent}, torch {torch.__version__}")
    bad = [r for r in results if r[0].bad]
    edge = [r for r in results if not r[0].bad]
    count = lambda rows, outcome: sum(1 for r in rows if r[1] == outcome)  # noqa: E731
    print(f"tried {len(results)}: {len(bad)} bad inputs, {len(edge)} inputs that must work")
    print(f"bad inputs: clear ValueError {count(bad, 'clear')} | vague ValueError (not matching its "
          f"pattern) {count(bad, 'vague')} | raw (another exception type) {count(bad, 'raw')} | "
          f"silent {count(bad, 'silent')} | hangs {count(bad, 'hang')}")
    print(f"must work:  work {count(edge, 'ok')} | wrongly rejected {count(edge, 'rejected')} | "
          f"wrong result {count(edge, 'wrong')} | hangs {count(edge, 'hang')}")
    total, missing = coverage()
    print(f"public callables (from every module's __all__): {total}, with a spec: "
          f"{total - len(missing)}" + (f"; WITHOUT a spec: {len(missing)}" if missing else ""))
    for source in ("table", "hyper-parameter", "random attention", "api specs", "exercise checks"):
        rows = [r for r in results if r[0].source == source]
        b, e = [r for r in rows if r[0].bad], [r for r in rows if not r[0].bad]
        print(f"  {source:17s} bad {len(b):4d} (clear {count(b, 'clear')}, vague {count(b, 'vague')}, "
              f"raw {count(b, 'raw')}, "
              f"silent {count(b, 'silent')}, hangs {count(b, 'hang')}) | must work {len(e):4d} "
              f"(work {count(e, 'ok')}, rejected {count(e, 'rejected')}, wrong {count(e, 'wrong')}, "
              f"hangs {count(e, 'hang')})")
    problems = [r for r in results if r[1] not in ("clear", "ok")]
    if missing and not args.quiet:
        print("\npublic callables without a spec in tests/fuzz:", ", ".join(missing))
    if problems and not args.quiet:
        print("\nevery case that is not a clear error or a working edge case:")
        for case, outcome, detail in problems:
            print(f"  [{outcome}] ({case.source}) {case.id}: {detail}")
    return 1 if problems or missing else 0


if __name__ == "__main__":
    sys.exit(main())
