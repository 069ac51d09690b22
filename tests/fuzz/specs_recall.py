"""Specs for ``helpers.recall``, the associative recall task of notebook 12 (see
``tests/fuzz/__init__.py`` for the format). Every ``check`` recomputes the result from its
definition: the batch from the task's rules, the logits from the formula of each kind, the first
training loss from the seeded batch, the accuracy by counting."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from helpers import recall
from helpers.recall import KINDS, RecallModel
from tests.fuzz import Case, Int, OneOf, Real, Spec, T, _is_int, _is_real
from tests.fuzz.specs_training import _device_ok, _generator_ok  # the same rules

NUM_KEYS, NUM_VALUES, SIZE = 9, 5, 4  # the specs' models


# ------------------------------------------------------------------------------ rules
def _lr_ok(v: object) -> bool:
    """A positive finite lr that does not blow up two steps. lr = 1e30 (from the pool) is a
    number, but the weights turn inf at once: train must refuse it with its divergence error,
    whose first line names lr ("... with lr=1e+30: the loss must stay finite, got nan")."""
    return _is_real(v) and 0 < v < 1e6


def _pairs_ok(v: object) -> bool:
    """None, an int in [1, num_keys], or a non-empty sequence (not a str) of such ints."""
    one = lambda n: _is_int(n) and 1 <= n <= NUM_KEYS  # noqa: E731
    return v is None or one(v) or (isinstance(v, Sequence) and not isinstance(v, str)
                                   and len(v) > 0 and all(one(n) for n in v))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _model(kind: str = "delta", dtype: torch.dtype = torch.float32) -> RecallModel:
    """A RecallModel of the specs' sizes, always the same weights (seeded, the global generator
    left as it was), β = sigmoid(0.4) for the delta rule, γ = sigmoid(1) for decay, β_t from
    seeded weights for delta_token."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = RecallModel(NUM_KEYS, NUM_VALUES, SIZE, kind)
        if model.beta_proj is not None:
            with torch.no_grad():
                model.beta_proj.weight.normal_()
                model.beta_proj.bias.fill_(0.2)
    with torch.no_grad():
        if model.beta_logit is not None:
            model.beta_logit.fill_(0.4)
        if model.decay_logit is not None:
            model.decay_logit.fill_(1.0)
    return model.to(dtype).eval()


def _batch(B: int = 3, N: int = 5, M: int | None = 4, seed: int = 2):
    return recall.make_batch(B, N, num_queries=M, num_keys=NUM_KEYS, num_values=NUM_VALUES,
                             generator=_gen(seed))


# ---------------------------------------------------------------------------- by hand
def _batch_right(out, kw) -> bool:
    keys, values, queries, targets = out
    B, N, R = kw["batch_size"], kw["num_pairs"], kw.get("rewrites", 0)
    M = N if kw["num_queries"] is None else kw["num_queries"]
    if keys.shape != (B, N + R) or values.shape != (B, N + R) or queries.shape != (B, M) \
            or targets.shape != (B, M) or any(t.dtype != torch.long for t in out):
        return False
    if not (0 <= int(keys.min()) and int(keys.max()) < kw["num_keys"]
            and 0 <= int(values.min()) and int(values.max()) < kw["num_values"]):
        return False
    for b in range(B):
        row, asked = keys[b].tolist(), queries[b].tolist()
        if len(set(row[:N])) != N or len(set(asked)) != M or not set(asked) <= set(row[:N]):
            return False
        if len(set(row[N:])) != R or not set(row[N:]) <= set(row[:N]):
            return False  # R distinct earlier keys, written again
        latest = {}
        for key, value in zip(row, values[b].tolist()):
            if latest.get(key) == value:
                return False  # a rewrite writes a new value
            latest[key] = value
        if any(t != latest[q] for q, t in zip(asked, targets[b].tolist())):
            return False
    return True


def _logits_by_hand(model: RecallModel, keys, values, queries) -> torch.Tensor:
    """The logits (B, M, num_values) from the model's weights, in float64, by each formula."""
    E, U = model.key_embedding.weight.double(), model.value_embedding.weight.double()
    q = E[queries] @ model.W_q.weight.double().T  # (B, M, D)
    k = E[keys] @ model.W_k.weight.double().T  # (B, N, D)
    v = U[values] @ model.W_v.weight.double().T  # (B, N, D)
    if model.kind == "softmax":
        read = torch.softmax(q @ k.mT / math.sqrt(k.shape[-1]), dim=-1) @ v
    elif model.kind == "linear":
        weights = (F.elu(q) + 1) @ (F.elu(k) + 1).mT  # (B, M, N): φ(q_i)·φ(k_j)
        read = weights @ v / weights.sum(dim=-1, keepdim=True)
    else:
        if model.kind == "positive":
            q, k = F.elu(q) + 1, F.elu(k) + 1
        q, k = q / q.norm(dim=-1, keepdim=True), k / k.norm(dim=-1, keepdim=True)
        S = torch.zeros(k.shape[0], k.shape[-1], v.shape[-1], dtype=torch.float64)  # (B, D, D)
        if model.kind == "delta":
            beta = torch.full(keys.shape, float(model.beta.detach()), dtype=torch.float64)
        elif model.kind == "delta_token":
            w, b = model.beta_proj.weight.double()[0], model.beta_proj.bias.double()[0]
            beta = torch.sigmoid(E[keys] @ w + b)  # (B, N)
        else:
            beta = None
        gamma = 1.0 if model.decay is None else float(model.decay.detach())
        for t in range(k.shape[1]):
            write = v[:, t] if beta is None else beta[:, t, None] * (v[:, t] - (k[:, t, None] @ S)[:, 0])
            S = gamma * S + k[:, t, :, None] * write[:, None, :]
        read = q @ S
    return read @ model.readout.weight.double().T + model.readout.bias.double()


def _close(out: torch.Tensor, expected: torch.Tensor, tol: float = 1e-4) -> bool:
    return (isinstance(out, torch.Tensor) and out.shape == expected.shape
            and torch.allclose(out.double(), expected, rtol=tol, atol=tol))


def _forward_right(out, kw) -> bool:
    """The logits of the model called (``kw["model"]``, or the default delta rule) by hand."""
    model = kw.get("model") or _model()
    return _close(out, _logits_by_hand(model, kw["keys"], kw["values"], kw["queries"]))


def _train_right(out, kw) -> bool:
    """``steps`` finite floats; the first is the untrained model's cross-entropy on the first
    batch: N drawn from ``pairs`` with the seeded generator, then the batch from it."""
    if len(out) != kw["steps"] or not all(isinstance(x, float) and math.isfinite(x) for x in out):
        return False
    pairs = kw["pairs"]
    loads = list(range(1, NUM_KEYS + 1)) if pairs is None else (
        [int(pairs)] if _is_int(pairs) else [int(n) for n in pairs])
    generator = _gen(kw["seed"])
    n = loads[int(torch.randint(len(loads), (), generator=generator))]
    keys, values, queries, targets = recall.make_batch(
        kw["batch_size"], n, num_keys=NUM_KEYS, num_values=NUM_VALUES,
        rewrites=round(kw.get("rewrite_share", 0.0) * n), generator=generator)
    model = _model("delta", next(kw["model"].parameters()).dtype)
    logits = _logits_by_hand(model, keys, values, queries)  # (B, N, V)
    terms = logits.logsumexp(-1) - logits.gather(-1, targets[..., None])[..., 0]
    return abs(out[0] - terms.mean().item()) < 1e-4 and not kw["model"].training


def _recalled_by_hand(kw, which: str = "all") -> torch.Tensor:
    """(B, N) float64: 1 where the key written first at position j of sequence b is recalled
    (its latest value); NaN where ``which`` leaves that key out ("rewritten": keys written once;
    "once": keys written again)."""
    model, N, B, R = kw["model"], kw["num_pairs"], kw["num_sequences"], kw.get("rewrites", 0)
    keys, values, queries, targets = recall.make_batch(
        B, N, num_keys=NUM_KEYS, num_values=NUM_VALUES, rewrites=R, generator=_gen(kw["seed"]))
    with torch.no_grad():
        answers = model(keys, values, queries).argmax(-1)
    right = torch.zeros(B, N, dtype=torch.float64)
    for b in range(B):
        row = keys[b].tolist()
        for i in range(N):
            j = row.index(int(queries[b, i]))
            again = int(queries[b, i]) in row[N:]
            keep = which == "all" or again == (which == "rewritten")
            right[b, j] = float(answers[b, i] == targets[b, i]) if keep else math.nan
    return right


def _accuracy_right(out, kw) -> bool:
    right = _recalled_by_hand(kw, kw.get("which", "all"))
    return isinstance(out, float) and abs(out - right[~right.isnan()].mean().item()) < 1e-12


def _by_position_right(out, kw) -> bool:
    return (isinstance(out, torch.Tensor) and out.dtype == torch.float64
            and out.shape == (kw["num_pairs"],)
            and torch.allclose(out, _recalled_by_hand(kw).mean(dim=0), atol=1e-12))


def _untrainable() -> list[Case]:
    """The models train refuses before its first step: half precision and 'meta' parameters."""
    return [Case("model=float16", lambda kw: kw.update(model=_model("delta", torch.float16)),
                 r"model must have float32 or float64 parameters to train \(train in float32"),
            Case("model=bfloat16", lambda kw: kw.update(model=_model("delta", torch.bfloat16)),
                 r"model must have float32 or float64 parameters"),
            Case("model=meta", lambda kw: kw.update(model=_model().to("meta")),
                 r"model's parameters must be on a device that holds data")]


def _poisoned() -> RecallModel:
    model = _model()
    with torch.no_grad():
        model.readout.bias[0] = float("nan")
    return model


# ------------------------------------------------------------------------------ specs
SPECS: list[Spec] = [
    Spec("helpers.recall.make_batch", call=recall.make_batch,
         good=lambda: dict(batch_size=3, num_pairs=4, num_queries=2, num_keys=6, num_values=5,
                           rewrites=2, generator=None, device=None),
         rules={"batch_size": "size", "num_pairs": "size", "num_queries": "size or None",
                "num_keys": "size", "num_values": "size", "rewrites": Int(0, 4),
                "generator": _generator_ok, "device": _device_ok},
         valid=lambda kw: kw["num_pairs"] <= kw["num_keys"] and (
             kw["num_queries"] is None or kw["num_queries"] <= kw["num_pairs"]) and (
             kw["rewrites"] <= kw["num_pairs"]) and (kw["rewrites"] == 0 or kw["num_values"] >= 2),
         check=_batch_right,
         bad=[Case("num_pairs>num_keys", lambda kw: kw.update(num_pairs=7),
                   r"num_pairs must be at most num_keys .* got num_pairs=7, num_keys=6"),
              Case("num_queries>num_pairs", lambda kw: kw.update(num_queries=5),
                   r"num_queries must be at most num_pairs .* got num_queries=5, num_pairs=4"),
              Case("rewrites>num_pairs", lambda kw: kw.update(num_pairs=1, num_queries=1),
                   r"rewrites must be an int in \[0, num_pairs\] = \[0, 1\] .* got 2"),
              Case("num_values=1 rewrites", lambda kw: kw.update(num_values=1),
                   r"num_values must be at least 2 when rewrites > 0 .* got num_values=1")],
         edge=[Case("seeded", lambda kw: kw.update(generator=_gen(4)), lambda out, kw: all(
             torch.equal(a, b) for a, b in zip(out, recall.make_batch(
                 3, 4, num_queries=2, num_keys=6, num_values=5, rewrites=2, generator=_gen(4))))),
               Case("rewrites=0 as before", lambda kw: kw.update(rewrites=0, generator=_gen(4)),
                    lambda out, kw: all(torch.equal(a, b) for a, b in zip(out, recall.make_batch(
                        3, 4, num_queries=2, num_keys=6, num_values=5, generator=_gen(4))))),
               Case("every key rewritten", lambda kw: kw.update(rewrites=4, num_values=2),
                    _batch_right),
               Case("every key", lambda kw: kw.update(num_pairs=6, num_queries=None),
                    lambda out, kw: _batch_right(out, kw) and torch.equal(
                        out[0][:, :6].sort(dim=1).values, torch.arange(6).expand(3, 6)))]),
    Spec("helpers.recall.RecallModel", call=RecallModel,
         good=lambda: dict(num_keys=6, num_values=4, size=3, kind="delta"),
         rules={"num_keys": "size", "num_values": "size", "size": "size", "kind": OneOf(KINDS),
                "decay": Real(0.0, 1.0, lo_open=True, hi_open=True, optional=True)},
         valid=lambda kw: kw.get("decay") is None or kw["kind"] == "decay",  # a frozen γ: decay's
         check=lambda m, kw: (
             m.key_embedding.weight.shape == (kw["num_keys"], kw["size"])
             and m.value_embedding.weight.shape == (kw["num_values"], kw["size"])
             and m.readout.weight.shape == (kw["num_values"], kw["size"])
             and (m.kind, m.num_keys, m.num_values, m.size) == (
                 kw["kind"], kw["num_keys"], kw["num_values"], kw["size"])
             and type(m.num_keys) is int and (m.beta is not None) == (kw["kind"] == "delta")
             and (m.decay is not None) == (kw["kind"] == "decay")),
         edge=[Case(kind, lambda kw, kind=kind: kw.update(kind=kind),
                    lambda m, kw: sum(p.numel() for p in m.parameters()) == 6 * 3 + 4 * 3
                    + 3 * 9 + 3 * 4 + 4 + {"delta": 1, "decay": 1, "delta_token": 3 + 1}.get(
                        kw["kind"], 0)) for kind in KINDS]
         + [Case("decay frozen at 0.9: γ a buffer, the parameters additive's",
                 lambda kw: kw.update(kind="decay", decay=0.9),
                 lambda m, kw: abs(m.decay.item() - 0.9) < 1e-6 and "decay_logit" in dict(m.named_buffers())
                 and sum(p.numel() for p in m.parameters()) == 6 * 3 + 4 * 3 + 3 * 9 + 3 * 4 + 4)],
         bad=[Case("decay with kind delta", lambda kw: kw.update(decay=0.9), r"decay must be None for kind 'delta'"),
              Case("decay 1", lambda kw: kw.update(kind="decay", decay=1.0), r"decay must be in \(0, 1\)")]),
    Spec("helpers.recall.RecallModel.forward",
         call=lambda model=None, **kw: (_model() if model is None else model)(**kw),
         good=lambda: dict(zip(("keys", "values", "queries"), _batch()[:3])),
         rules={"keys": T(rank=2, dtype="long"), "values": T(rank=2, dtype="long"),
                "queries": T(rank=2, dtype="long")},
         check=_forward_right,
         bad=[Case("keys=num_keys", lambda kw: kw.update(keys=kw["keys"] * 0 + NUM_KEYS),
                   r"keys must be token ids in \[0, num_keys\) = \[0, 9\), got values from 9"),
              Case("queries=-1", lambda kw: kw.update(queries=kw["queries"] * 0 - 1),
                   r"queries must be token ids in \[0, num_keys\) = \[0, 9\)"),
              Case("values=num_values", lambda kw: kw.update(values=kw["values"] * 0 + NUM_VALUES),
                   r"values must be token ids in \[0, num_values\) = \[0, 5\)"),
              Case("values N=4", lambda kw: kw.update(values=kw["values"][:, :4]),
                   r"values must have the shape of keys \(B, N\) = \(3, 5\) \(one value per "
                   r"key\), got \(3, 4\)"),
              Case("queries B=2", lambda kw: kw.update(queries=kw["queries"][:2]),
                   r"queries must have the batch size of keys \(3\), got 2"),
              Case("keys N=0", lambda kw: kw.update(keys=kw["keys"][:, :0], values=kw["values"][:, :0]),
                   r"keys must have at least one sequence of at least one token, got shape \(3, 0\)"),
              Case("queries int32", lambda kw: kw.update(queries=kw["queries"].int()),
                   r"queries must be a long tensor of token ids, got dtype torch.int32")],
         edge=[Case(f"kind={kind}", lambda kw, kind=kind: kw.update(model=_model(kind)),
                    _forward_right) for kind in KINDS]
         + [Case(f"kind={kind} {dt}", lambda kw, kind=kind, dt=dt: kw.update(model=_model(kind, dt)),
                 lambda out, kw, dt=dt: out.dtype == dt and _close(out, _logits_by_hand(
                     kw["model"], kw["keys"], kw["values"], kw["queries"]),
                     1e-10 if dt == torch.float64 else 0.1))
            for kind in KINDS for dt in (torch.float16, torch.bfloat16, torch.float64)]
         + [Case("B=1 M=1 N=1", lambda kw: kw.update(**dict(zip(("keys", "values", "queries"),
                                                              _batch(1, 1, 1)[:3]))),
                 _forward_right)]),
    Spec("helpers.recall.RecallModel.token_beta",
         call=lambda model=None, **kw: (_model("delta_token") if model is None else model).token_beta(**kw),
         good=lambda: dict(keys=_batch()[0]),
         rules={"keys": T(rank=2, dtype="long")},
         check=lambda out, kw: _close(out, torch.sigmoid(
             _model("delta_token").key_embedding.weight.double()[kw["keys"]]
             @ _model("delta_token").beta_proj.weight.double()[0]
             + _model("delta_token").beta_proj.bias.double()[0]).detach(), 1e-6),
         bad=[Case("keys=num_keys", lambda kw: kw.update(keys=kw["keys"] * 0 + NUM_KEYS),
                   r"keys must be token ids in \[0, num_keys\) = \[0, 9\), got values from 9"),
              Case("kind=delta", lambda kw: kw.update(model=_model("delta")),
                   r"token_beta is delta_token's, got a model of kind 'delta'")]),
    Spec("helpers.recall.state_numbers", call=recall.state_numbers,
         good=lambda: dict(model=_model("softmax"), num_pairs=7),
         rules={"model": lambda v: isinstance(v, RecallModel), "num_pairs": Int(1, NUM_KEYS)},
         check=lambda out, kw: out == 2 * kw["num_pairs"] * SIZE,
         bad=[Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a RecallModel, got Linear")],
         edge=[Case(kind, lambda kw, kind=kind: kw.update(model=_model(kind)),
                    lambda out, kw, n=n: out == n)
               for kind, n in (("linear", SIZE * SIZE + SIZE), ("positive", SIZE * SIZE),
                               ("additive", SIZE * SIZE), ("decay", SIZE * SIZE),
                               ("delta", SIZE * SIZE), ("delta_token", SIZE * SIZE))]),
    Spec("helpers.recall.train", call=recall.train,
         good=lambda: dict(model=_model(), steps=2, batch_size=3, pairs=range(2, 5), lr=0.01,
                           seed=0, rewrite_share=0.5),
         rules={"model": lambda v: isinstance(v, nn.Module), "steps": "size",
                "batch_size": "size", "pairs": _pairs_ok, "lr": _lr_ok, "seed": "seed",
                "rewrite_share": Real(0.0, 1.0)},
         check=_train_right,
         bad=_untrainable() + [
             Case("model=NaN weights", lambda kw: kw.update(model=_poisoned()),
                  r"model must have finite parameters"),
             Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                  r"model must be a RecallModel \(an nn.Module with int num_keys and num_values\)"),
             Case("pairs=[0]", lambda kw: kw.update(pairs=[3, 0]),
                  r"pairs must hold ints in \[1, num_keys\] = \[1, 9\] .* got 0"),
             Case("pairs=10", lambda kw: kw.update(pairs=10),
                  r"pairs must be at most the model's num_keys=9 .* got 10"),
             Case("pairs=()", lambda kw: kw.update(pairs=()),
                  r"pairs must be an int or a non-empty sequence of ints"),
             Case("pairs={3}", lambda kw: kw.update(pairs={3}),
                  r"pairs must be an int or a non-empty sequence of ints"),
             Case("lr=1e30 diverges", lambda kw: kw.update(lr=1e30, steps=3),
                  r"training diverged at step \d with lr=1e\+30: the (loss|parameters) must "
                  r"stay finite")],
         edge=[Case("model=float64", lambda kw: kw.update(model=_model("delta", torch.float64)),
                    _train_right),
               Case("no rewrites", lambda kw: kw.update(rewrite_share=0.0), _train_right),
               Case("every key rewritten", lambda kw: kw.update(rewrite_share=1.0), _train_right),
               Case("pairs=9", lambda kw: kw.update(pairs=9), _train_right),
               Case("pairs=[1, 9]", lambda kw: kw.update(pairs=[1, 9]), _train_right)]),
    Spec("helpers.recall.accuracy", call=recall.accuracy,
         good=lambda: dict(model=_model(), num_pairs=5, rewrites=2, which="all", num_sequences=6,
                           seed=1),
         rules={"model": lambda v: isinstance(v, nn.Module), "num_pairs": Int(1, NUM_KEYS),
                "rewrites": Int(0, NUM_KEYS), "which": OneOf(("all", "rewritten", "once")),
                "num_sequences": "size", "seed": "seed"},
         valid=lambda kw: kw["rewrites"] <= kw["num_pairs"] and (
             kw["which"] == "all" or (kw["rewrites"] > 0 if kw["which"] == "rewritten"
                                      else kw["rewrites"] < kw["num_pairs"])),
         check=_accuracy_right,
         bad=[Case("model=meta", lambda kw: kw.update(model=_model().to("meta")),
                   r"model's parameters must be on a device that holds data"),
              Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a RecallModel"),
              Case("rewrites>num_pairs", lambda kw: kw.update(rewrites=6),
                   r"rewrites must be an int in \[0, num_pairs\] = \[0, 5\]"),
              Case("rewritten, none", lambda kw: kw.update(rewrites=0, which="rewritten"),
                   r"which='rewritten' selects no query with rewrites=0 of num_pairs=5"),
              Case("once, none", lambda kw: kw.update(rewrites=5, which="once"),
                   r"which='once' selects no query with rewrites=5 of num_pairs=5")],
         edge=[Case(f"model={dt}", lambda kw, dt=dt: kw.update(model=_model("delta", dt)),
                    _accuracy_right) for dt in (torch.float16, torch.bfloat16, torch.float64)]
         + [Case(f"kind={kind} {which}", lambda kw, kind=kind, which=which: kw.update(
             model=_model(kind), which=which), _accuracy_right)
            for kind in KINDS for which in ("all", "rewritten", "once")]),
    Spec("helpers.recall.accuracy_by_position", call=recall.accuracy_by_position,
         good=lambda: dict(model=_model(), num_pairs=5, num_sequences=6, seed=1),
         rules={"model": lambda v: isinstance(v, nn.Module), "num_pairs": Int(1, NUM_KEYS),
                "num_sequences": "size", "seed": "seed"},
         check=_by_position_right,
         bad=[Case("model=meta", lambda kw: kw.update(model=_model().to("meta")),
                   r"model's parameters must be on a device that holds data"),
              Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a RecallModel")],
         edge=[Case(f"kind={kind}", lambda kw, kind=kind: kw.update(model=_model(kind)),
                    _by_position_right) for kind in KINDS]),
]
