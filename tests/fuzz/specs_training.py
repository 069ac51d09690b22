"""Specs for the training helpers: induction, relative_task, toy, and the checks they added to
``helpers.checks`` (see ``tests/fuzz/__init__.py`` for the format). Every training call trains a
tiny model for a step or two; every ``check`` recomputes the result from its definition."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from helpers import DecoderLM, checks, induction, relative_task, toy
from helpers.induction import CopyBatch, CopyTask
from tests.fuzz import Case, Int, OneOf, Spec, T, _is_real


# ------------------------------------------------------------------------------ rules
def _device_ok(v: object) -> bool:
    """None, or a device that can hold tensors on this machine (the CPU or a CUDA device here)."""
    if v is None:
        return True
    try:
        d = v if isinstance(v, torch.device) else torch.device(v)
    except (RuntimeError, TypeError, ValueError):
        return False
    return d.type == "cpu" or (d.type == "cuda" and torch.cuda.is_available()
                               and (d.index or 0) < torch.cuda.device_count())


def _generator_ok(v: object) -> bool:
    return v is None or isinstance(v, torch.Generator) and v.device.type == "cpu"


def _lr_ok(v: object) -> bool:
    """A positive finite lr that does not blow up the specs' two steps. lr = 1e30 (from the
    pool) is a number, but the second step's loss is NaN: the trainers must refuse it with
    their divergence error, whose first line names lr ("... with lr=1e+30: the loss must stay
    finite, got nan")."""
    return _is_real(v) and 0 < v < 1e6


def _instance(*types: type, optional: bool = False) -> Callable[[object], bool]:
    return lambda v: (optional and v is None) or isinstance(v, types)


def _seeded(make: Callable[[], object], seed: int = 0):
    """``make()`` with the global generator seeded, leaving it as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return make()


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _lm(dtype: torch.dtype = torch.float32) -> DecoderLM:
    """A tiny DecoderLM for relative_task (V = 5 tokens, T ≤ 8), always the same weights."""
    return _seeded(lambda: DecoderLM(5, 4, 1, 1, ffn_hiddens=4, max_len=8)).to(dtype)


def _ce_by_hand(logits: torch.Tensor, target: int) -> float:
    row = logits.double()
    return math.log(row.exp().sum()) - float(row[target])


# ------------------------------------------------------------------------ relative_task
def _relative_batch_right(out, kw) -> bool:
    tokens, targets = out
    B, L, off = kw["batch_size"], kw["length"], kw["offset"]
    if tokens.shape != (B, L) or targets.shape != (B, L) or tokens.dtype != torch.long:
        return False
    if not (0 <= int(tokens.min()) and int(tokens.max()) < kw["vocab_size"]):
        return False
    return all(int(targets[b, t]) == (relative_task.IGNORE if t < off else int(tokens[b, t - off]))
               for b in range(B) for t in range(L))


def _relative_train_right(out, kw) -> bool:
    """Exactly ``steps`` finite losses; the first is the cross-entropy of the untrained model
    on the first batch of the seeded generator, at the positions with a target."""
    if len(out) != kw["steps"] or not all(isinstance(x, float) and math.isfinite(x) for x in out):
        return False
    model = _lm(next(kw["model"].parameters()).dtype)
    L, off = kw["length"], kw["offset"]
    tokens = torch.randint(0, 5, (kw["batch_size"], L), generator=_gen(kw["seed"]))
    with torch.no_grad():
        logits = model(tokens)
    terms = [_ce_by_hand(logits[b, t], int(tokens[b, t - off]))
             for b in range(len(tokens)) for t in range(off, L)]
    return abs(out[0] - sum(terms) / len(terms)) < 1e-4


def _position_accuracy_right(out, kw) -> bool:
    model, L, off, N = kw["model"], kw["length"], kw["offset"], kw["num_sequences"]
    tokens = torch.randint(0, 5, (N, L), generator=_gen(kw["seed"]))
    with torch.no_grad():
        guess = model(tokens).argmax(-1)
    by_hand = [sum(int(guess[b, t]) == int(tokens[b, t - off]) for b in range(N)) / N
               for t in range(off, L)]
    return out.dtype == torch.float64 and out.tolist() == by_hand


def _poisoned_lm() -> DecoderLM:
    model = _lm()
    with torch.no_grad():
        model.head.bias[0] = float("nan")
    return model


def _untrainable(make: Callable[..., nn.Module]) -> list[Case]:
    """The models every training helper refuses before its first step, made by ``make(dtype)``:
    half precision (it would turn NaN silently) and parameters on the 'meta' device."""
    return [Case("model=float16", lambda kw: kw.update(model=make(torch.float16)),
                 r"model must have float32 or float64 parameters to train \(train in float32"),
            Case("model=bfloat16", lambda kw: kw.update(model=make(torch.bfloat16)),
                 r"model must have float32 or float64 parameters"),
            Case("model=meta", lambda kw: kw.update(model=make().to("meta")),
                 r"model's parameters must be on a device that holds data")]


RELATIVE = [
    Spec("helpers.relative_task.make_batch", call=relative_task.make_batch,
         good=lambda: dict(batch_size=3, length=6, vocab_size=5, offset=2, generator=None,
                           device=None),
         rules={"batch_size": "size", "length": "size", "vocab_size": "size", "offset": "size",
                "generator": _generator_ok, "device": _device_ok},
         valid=lambda kw: kw["offset"] < kw["length"], check=_relative_batch_right,
         bad=[Case("offset=length", lambda kw: kw.update(offset=6), r"offset must be below")],
         edge=[Case("seeded", lambda kw: kw.update(generator=_gen(4)), lambda out, kw: torch.equal(
             out[0], torch.randint(0, 5, (3, 6), generator=_gen(4))))]),
    Spec("helpers.relative_task.train", call=relative_task.train,
         good=lambda: dict(model=_lm(), steps=2, batch_size=3, length=6, lr=0.01, offset=2, seed=0),
         rules={"model": _instance(nn.Module), "steps": "size", "batch_size": "size",
                "length": Int(1, 8), "lr": _lr_ok, "offset": "size", "seed": "seed"},
         valid=lambda kw: kw["offset"] < kw["length"], check=_relative_train_right,
         bad=_untrainable(_lm) + [
              Case("model=NaN weights", lambda kw: kw.update(model=_poisoned_lm()),
                   r"model must have finite parameters"),
              Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must have an int vocab_size"),
              Case("length>max_len", lambda kw: kw.update(length=9),
                   r"sequence length must be at most max_len=8, got 9"),
              Case("lr=1e30 diverges", lambda kw: kw.update(lr=1e30, steps=3),
                   r"training diverged at step 2 with lr=1e\+30: the loss must stay finite")],
         edge=[Case("model=float64", lambda kw: kw.update(model=_lm(torch.float64)),
                    _relative_train_right)]),
    Spec("helpers.relative_task.accuracy_by_position", call=relative_task.accuracy_by_position,
         good=lambda: dict(model=_lm().eval(), length=7, num_sequences=6, offset=2, seed=1),
         rules={"model": _instance(nn.Module), "length": Int(1, 8), "num_sequences": "size",
                "offset": "size", "seed": "seed"},
         valid=lambda kw: kw["offset"] < kw["length"], check=_position_accuracy_right,
         bad=[Case("model=meta", lambda kw: kw.update(model=_lm().to("meta")),
                   r"model's parameters must be on a device that holds data"),
              Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must have an int vocab_size")],
         edge=[Case(f"model={dt}", lambda kw, dt=dt: kw.update(model=_lm(dt).eval()),
                    _position_accuracy_right) for dt in (torch.float16, torch.bfloat16)]),
]


# ---------------------------------------------------------------------------------- toy
def _toy_batch_right(out, kw) -> bool:
    tokens, targets = out
    B, L = kw["batch_size"], kw.get("seq_len", toy.SEQ_LEN)
    if tokens.shape != (B, L) or targets.shape != (B, L, 2) or tokens.dtype != torch.long:
        return False
    if not (0 <= int(tokens.min()) and int(tokens.max()) < kw.get("vocab_size", toy.VOCAB_SIZE)):
        return False
    return all(int(targets[b, i, 0]) == int(tokens[b, (i - 1) % L])
               and int(targets[b, i, 1]) == int(tokens[b, (i + 1) % L])
               for b in range(B) for i in range(L))


def _neighbour(**kw) -> toy.NeighbourModel:
    return _seeded(lambda: toy.NeighbourModel(2, num_hiddens=4, **kw), seed=3).eval()


def _neighbour_logits_by_hand(model: toy.NeighbourModel, tokens: torch.Tensor) -> torch.Tensor:
    """Embedding + learned positions → two heads of scaled dot-product attention → readout."""
    x = model.embedding.weight[tokens] + model.position_vectors  # (B, T, d)
    att = model.attention
    q, k, v = (x @ layer.weight.T for layer in (att.W_q, att.W_k, att.W_v))  # (B, T, d)
    heads = []
    for i in range(2):
        cols = slice(2 * i, 2 * i + 2)
        w = torch.softmax(q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(2), -1)
        heads.append(w @ v[..., cols])
    y = torch.cat(heads, -1) @ att.W_o.weight.T  # (B, T, d)
    return (y @ model.readout.weight.T + model.readout.bias).reshape(*tokens.shape, 2, -1)


def _toy_accuracy_right(out, kw) -> bool:
    with torch.no_grad():
        guess = kw["model"](kw["tokens"]).argmax(-1)  # (B, T, 2)
    targets = kw["targets"]
    n = targets.shape[0] * targets.shape[1]
    hits = [sum(int(guess[b, i, j]) == int(targets[b, i, j]) for b in range(targets.shape[0])
                for i in range(targets.shape[1])) / n for j in (0, 1)]
    return isinstance(out, tuple) and all(abs(a - b) < 1e-12 for a, b in zip(out, hits))


def _ceiling_by_hand(out, kw) -> bool:
    total = 0.0
    rows = kw["tokens"].tolist()
    for row in rows:
        for i in range(len(row)):
            others = row[:i] + row[i + 1:]
            total += max(others.count(t) for t in set(others)) / len(others)
    return abs(out - total / (len(rows) * len(rows[0]))) < 1e-12


def _toy_train_right(out, kw) -> bool:
    """``steps`` finite losses, checkpoints at 0, every ``every`` steps and the last; the first
    loss is the untrained model's (weights from ``seed``) on the first seeded batch."""
    steps, every = kw["steps"], kw["every"]
    if len(out.losses) != steps or not all(math.isfinite(x) for x in out.losses):
        return False
    if [c.step for c in out.checkpoints] != sorted({0, *range(every, steps + 1, every), steps}):
        return False
    model = _seeded(lambda: toy.NeighbourModel(kw["num_heads"], positions=kw["positions"],
                                               num_hiddens=kw["num_hiddens"]), seed=kw["seed"])
    tokens = torch.randint(toy.VOCAB_SIZE, (kw["batch_size"], toy.SEQ_LEN),
                           generator=_gen(kw["seed"]))
    with torch.no_grad():
        logits = model(tokens)  # (B, T, 2, V)
    L = toy.SEQ_LEN
    terms = [_ce_by_hand(logits[b, i, j], int(tokens[b, (i + (1 if j else -1)) % L]))
             for b in range(len(tokens)) for i in range(L) for j in (0, 1)]
    return abs(out.losses[0] - sum(terms) / len(terms)) < 1e-4 and not out.model.training


TOY_DATA = "a dataclass record that train fills (its constructor only stores the field); "

TOY = [
    Spec("helpers.toy.make_batch", call=toy.make_batch,
         good=lambda: dict(batch_size=3, seq_len=5, vocab_size=4, generator=None, device=None),
         rules={"batch_size": "size", "seq_len": "size", "vocab_size": "size",
                "generator": _generator_ok, "device": _device_ok},
         check=_toy_batch_right,
         edge=[Case("seeded", lambda kw: kw.update(generator=_gen(2)), lambda out, kw: torch.equal(
             out[0], torch.randint(4, (3, 5), generator=_gen(2))))]),
    Spec("helpers.toy.held_out_batch", call=toy.held_out_batch,
         good=lambda: dict(batch_size=5, device=None),
         rules={"batch_size": "size", "device": _device_ok},
         check=lambda out, kw: _toy_batch_right(out, kw) and torch.equal(
             out[0].cpu(), torch.randint(toy.VOCAB_SIZE, (kw["batch_size"], toy.SEQ_LEN),
                                         generator=_gen(toy.EVAL_SEED)))),
    Spec("helpers.toy.example_sequence", call=toy.example_sequence, good=lambda: dict(device=None),
         rules={"device": _device_ok},
         check=lambda out, kw: torch.equal(out.cpu(), torch.randint(
             toy.VOCAB_SIZE, (1, toy.SEQ_LEN), generator=_gen(toy.EXAMPLE_SEED))[0])),
    Spec("helpers.toy.NeighbourModel", call=toy.NeighbourModel,
         good=lambda: dict(num_heads=2, positions="learned", num_hiddens=4, vocab_size=3,
                           seq_len=5),
         rules={"num_heads": "size", "positions": OneOf(("learned", "sinusoidal", None)),
                "num_hiddens": "size", "vocab_size": "size", "seq_len": "size"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0,
         check=lambda out, kw: (
             out.embedding.weight.shape == (kw["vocab_size"], kw["num_hiddens"])
             and out.readout.weight.shape == (2 * kw["vocab_size"], kw["num_hiddens"])
             and (out.position_vectors is not None) == (kw["positions"] == "learned")
             and (out.encoding is not None) == (kw["positions"] == "sinusoidal")),
         edge=[Case("sinusoidal, odd width", lambda kw: kw.update(
             positions="sinusoidal", num_heads=1, num_hiddens=3),
             lambda out, kw: out(torch.zeros(1, 5, dtype=torch.long)).shape == (1, 5, 2, 3))]),
    Spec("helpers.toy.NeighbourModel.forward", call=lambda **kw: _neighbour()(**kw),
         good=lambda: dict(tokens=toy.make_batch(3, generator=_gen(1))[0]),
         rules={"tokens": T(rank=2, dtype="long")},
         check=lambda out, kw: torch.allclose(
             out, _neighbour_logits_by_hand(_neighbour(), kw["tokens"]), atol=1e-5),
         bad=[Case("tokens=V", lambda kw: kw.update(tokens=kw["tokens"] * 0 + toy.VOCAB_SIZE),
                   r"tokens must be token ids in \[0, vocab_size\) = \[0, 6\)"),
              Case("tokens=-1", lambda kw: kw.update(tokens=kw["tokens"] * 0 - 1),
                   r"tokens must be token ids in \[0, vocab_size\)"),
              Case("tokens T=7", lambda kw: kw.update(tokens=kw["tokens"][:, :7]),
                   r"tokens must be a long tensor \(B, 8\)")]),
    Spec("helpers.toy.accuracy", call=toy.accuracy,
         good=lambda: dict(model=_neighbour(), tokens=toy.make_batch(4, generator=_gen(2))[0],
                           targets=toy.make_batch(4, generator=_gen(2))[1]),
         rules={"model": _instance(nn.Module), "tokens": T(rank=2, dtype="long"),
                "targets": T(rank=3, dtype="long")},
         check=_toy_accuracy_right,
         bad=[Case("targets=V", lambda kw: kw.update(targets=kw["targets"] + toy.VOCAB_SIZE),
                   r"targets must be token ids in \[0, V\) = \[0, 6\)"),
              Case("targets B=3", lambda kw: kw.update(targets=kw["targets"][:3]),
                   r"targets must have shape \(B, T, 2\) = \(4, 8, 2\), got \(3, 8, 2\)"),
              Case("tokens=V", lambda kw: kw.update(tokens=kw["tokens"] + toy.VOCAB_SIZE),
                   r"tokens must be token ids in \[0, vocab_size\)")]),
    Spec("helpers.toy.blind_ceiling", call=toy.blind_ceiling,
         good=lambda: dict(tokens=toy.make_batch(5, generator=_gen(3))[0], vocab_size=6),
         rules={"tokens": T(rank=2, dtype="long"), "vocab_size": "size"},
         valid=lambda kw: int(kw["tokens"].max()) < kw["vocab_size"], check=_ceiling_by_hand,
         bad=[Case("T=1", lambda kw: kw.update(tokens=kw["tokens"][:, :1]),
                   r"tokens must have at least 1 sequence of at least 2 positions"),
              Case("tokens=-1", lambda kw: kw["tokens"].__setitem__((0, 0), -1),
                   r"tokens must be token ids in \[0, vocab_size\) = \[0, 6\), got values "
                   r"from -1")],
         edge=[Case("int32", lambda kw: kw.update(tokens=kw["tokens"].int()), _ceiling_by_hand)]),
    Spec("helpers.toy.Checkpoint", call=toy.Checkpoint,
         good=lambda: dict(step=3, weights=torch.rand(2, 8, 8), accuracy=(0.5, 0.25)),
         unfuzzed={f: TOY_DATA + "train is fuzzed, and builds every Checkpoint the project uses"
                   for f in ("step", "weights", "accuracy")},
         check=lambda out, kw: (out.step, out.weights, out.accuracy) == (
             kw["step"], kw["weights"], kw["accuracy"])),
    Spec("helpers.toy.Run", call=toy.Run,
         good=lambda: dict(model=_neighbour(), example=torch.zeros(8, dtype=torch.long),
                           checkpoints=[toy.Checkpoint(0, torch.rand(2, 8, 8), (0.5, 0.25))],
                           losses=[1.0]),
         unfuzzed={f: TOY_DATA + "train is fuzzed, and builds every Run the project uses"
                   for f in ("model", "example", "checkpoints", "losses")},
         check=lambda out, kw: out.final_accuracy == (0.5, 0.25) and out.losses == [1.0]),
    Spec("helpers.toy.train", call=toy.train,
         good=lambda: dict(num_heads=2, positions="learned", steps=2, every=1, seed=0, batch_size=4,
                           lr=0.02, num_hiddens=4, eval_size=8, device=None, num_threads=1),
         rules={"num_heads": "size", "positions": OneOf(("learned", "sinusoidal", None)),
                "steps": "size", "every": "size", "seed": Int(0, toy.EVAL_SEED - 1),
                "batch_size": "size", "lr": _lr_ok, "num_hiddens": "size", "eval_size": "size",
                "device": _device_ok, "num_threads": "size or None"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0, check=_toy_train_right,
         bad=[Case("lr=1e30 diverges", lambda kw: kw.update(lr=1e30, steps=3),
                   r"training diverged at step 2 with lr=1e\+30: the loss must stay finite")]),
]


# ---------------------------------------------------------------------------- induction
TASK = dict(vocab_size=6, seq_len=6, min_period=2, max_period=3)


def _task() -> CopyTask:
    return CopyTask(**TASK)


def _batch(size: int = 5, seed: int = 1) -> CopyBatch:
    return _task().sample(size, _gen(seed))


def _is_copy(batch: CopyBatch, vocab_size: int, lo: int, hi: int) -> bool:
    """Every row: distinct tokens before the copy, the segment repeated, periods in [lo, hi]."""
    for row, p in zip(batch.tokens.tolist(), batch.period.tolist()):
        start = len(row) - p
        if not lo <= p <= hi or row[start:] != row[start - p:start] \
                or len(set(row[:start])) != start or not all(0 <= t < vocab_size for t in row):
            return False
    return True


def _pairs_mean(weights: torch.Tensor, pairs: list[tuple[int, int, int]]) -> torch.Tensor:
    """Mean of weights[b, ..., i, j] over the (b, i, j) written out."""
    return torch.stack([weights[b, ..., i, j].double() for b, i, j in pairs]).mean(0)


def _offset_pairs(batch: CopyBatch, k: int) -> list[tuple[int, int, int]]:
    return [(b, i, i - k) for b in range(len(batch))
            for i in range(k, int(batch.tokens.shape[1] - batch.period[b]))]


def _induction_pairs(tokens: torch.Tensor, queries: torch.Tensor | None):
    pairs = []
    for b, row in enumerate(tokens.tolist()):
        for i, token in enumerate(row):
            earlier = [j for j in range(i) if row[j] == token]
            if earlier and (queries is None or bool(queries[b, i])):
                pairs.append((b, i, earlier[-1] + 1))
    return pairs


def _close(out: torch.Tensor, expected: torch.Tensor) -> bool:
    tol = 1e-2 if out.dtype in (torch.float16, torch.bfloat16) else 1e-5
    return torch.allclose(out.double(), expected, atol=tol)


def _copy_loss_by_hand(out, kw) -> bool:
    logits, batch = kw["logits"], kw["batch"]
    terms = [_ce_by_hand(logits[b, t].float(), int(batch.tokens[b, t + 1]))
             for b in range(len(batch))
             for t in range(int(batch.copy_start[b]), logits.shape[1] - 1)]
    tol = 2e-2 if logits.dtype in (torch.float16, torch.bfloat16) else 1e-5
    return out.dtype == logits.dtype and abs(out.item() - sum(terms) / len(terms)) < tol


def _copy_accuracy_by_hand(out, kw) -> bool:
    logits, batch = kw["logits"], kw["batch"]
    hits = [int(logits[b, t].argmax()) == int(batch.tokens[b, t + 1])
            for b in range(len(batch))
            for t in range(int(batch.copy_start[b]), logits.shape[1] - 1)]
    return isinstance(out, float) and abs(out - sum(hits) / len(hits)) < 1e-7


def _logits(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(5, 6, 6, generator=_gen(2)).to(dtype)


def _weights(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B, H, T, T) causal attention maps for ``_batch()``."""
    scores = torch.randn(5, 2, 6, 6, generator=_gen(3))
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~causal, -math.inf), -1).to(dtype)


def _induction_run_right(out, kw) -> bool:
    """Checkpoints at 0, every ``every`` steps and the last; the first training loss is the
    copy loss of the untrained model (``make_model(task, seed)``) on the first seeded batch."""
    steps, every, task = kw["steps"], kw["every"], kw["task"] or CopyTask()
    if out.steps != [*range(0, steps, every), steps] or out.train_loss.shape != (steps,):
        return False
    if not bool(torch.isfinite(out.train_loss).all()):
        return False
    model = induction.make_model(task, seed=kw["seed"]) if kw["model"] is None else None
    if model is None:
        return True  # a model passed in is trained in place: its first state is gone
    batch = task.sample(kw["batch_size"], _gen(kw["seed"]))
    with torch.no_grad():
        logits = model(batch.tokens)
    terms = [_ce_by_hand(logits[b, t], int(batch.tokens[b, t + 1]))
             for b in range(len(batch)) for t in range(int(batch.copy_start[b]), task.seq_len - 1)]
    return abs(out.train_loss[0].item() - sum(terms) / len(terms)) < 1e-4


def _make_model_right(out, kw) -> bool:
    task = kw["task"]
    ref = _seeded(lambda: DecoderLM(task.vocab_size, kw["num_hiddens"], kw["num_heads"],
                                    kw["num_layers"], kw["ffn_hiddens"], max_len=task.seq_len),
                  seed=kw["seed"])
    mine, theirs = out.state_dict(), ref.state_dict()
    return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def _tiny_model(dtype: torch.dtype = torch.float32) -> DecoderLM:
    return induction.make_model(_task(), num_hiddens=4, num_heads=1, num_layers=1,
                                ffn_hiddens=4).to(dtype)


def _brute_induction_targets(out, kw) -> bool:
    rows = kw["tokens"].tolist()
    expected = [[([j for j in range(i) if row[j] == t] or [-2])[-1] + 1 for i, t in enumerate(row)]
                for row in rows]
    return out.dtype == torch.long and out.tolist() == expected


def _offset_targets_by_hand(out, kw) -> bool:
    batch, k = kw["batch"], kw["offset"]
    T_ = batch.tokens.shape[1]
    expected = [[i - k if k <= i < T_ - p else -1 for i in range(T_)]
                for p in batch.period.tolist()]
    return out.tolist() == expected


def _two_layers(dtype: torch.dtype = torch.float32, positional: str = "sinusoidal") -> DecoderLM:
    """A 2-layer, 2-head DecoderLM of width 4 with LayerNorm gains that matter."""
    def make() -> DecoderLM:
        model = DecoderLM(6, 4, 2, 2, ffn_hiddens=4, max_len=6, positional=positional)
        with torch.no_grad():
            for block in model.blocks:
                block.norm1.weight.uniform_(0.5, 1.5)
        return model
    return _seeded(make).to(dtype)


def _composition_by_hand(out, kw) -> bool:
    """‖A B‖_F / (‖A‖_F ‖B‖_F) from matrices written out in float64: R = diag(γ)(I − 11ᵀ/4) per
    block, W_QK = (W_q R)ᵀ (W_k R) / √2 and W_OV = W_o W_v R per head (rows 2h … 2h + 1)."""
    model, kind = kw["model"], kw["kind"]
    P = torch.eye(4, dtype=torch.float64) - 0.25

    def circuits(layer):
        block = model.blocks[layer - 1]
        att = block.attention
        R = torch.diag(block.norm1.weight.detach().double()) @ P
        w = {name: getattr(att, name).weight.detach().double() for name in ("W_q", "W_k", "W_v", "W_o")}
        return [((w["W_q"][2 * h:2 * h + 2] @ R).T @ (w["W_k"][2 * h:2 * h + 2] @ R) / math.sqrt(2),
                 w["W_o"][:, 2 * h:2 * h + 2] @ w["W_v"][2 * h:2 * h + 2] @ R) for h in range(2)]

    ratio = lambda A, B: float((A @ B).norm() / (A.norm() * B.norm()))  # noqa: E731 (Frobenius)
    receivers, senders = circuits(kw["receiver"]), circuits(kw["sender"])
    expected = torch.tensor([[ratio({"k": qk, "q": qk.T, "v": ov}[kind], B) for qk, ov in receivers]
                             for _, B in senders], dtype=torch.float64)
    return out.shape == (2, 2) and out.dtype == torch.float32 and torch.allclose(
        out.double(), expected, rtol=1e-4, atol=1e-6)


INDUCTION_RUN = ("a dataclass record of what train_with_checkpoints computed (its constructor "
                 "only stores the field); train_with_checkpoints is fuzzed, and builds every "
                 "TrainingRun the project uses")
TRAINING_RUN_FIELDS = ("task", "model", "steps", "train_loss", "eval_loss", "eval_accuracy",
                       "previous_token", "induction", "eval_batch", "examples", "weights")

INDUCTION = [
    Spec("helpers.induction.CopyTask", call=CopyTask, good=lambda: dict(TASK),
         rules={name: "size" for name in TASK},
         valid=lambda kw: 2 <= kw["min_period"] <= kw["max_period"]
         and 2 * kw["max_period"] <= kw["seq_len"]
         and kw["vocab_size"] >= kw["seq_len"] - kw["min_period"],
         check=lambda out, kw: all(type(getattr(out, k)) is int and getattr(out, k) == v
                                   for k, v in kw.items())),
    Spec("helpers.induction.CopyTask.sample", call=lambda **kw: _task().sample(**kw),
         good=lambda: dict(batch_size=5, generator=None),
         rules={"batch_size": "size", "generator": _generator_ok},
         check=lambda out, kw: len(out) == kw["batch_size"] and _is_copy(out, 6, 2, 3),
         edge=[Case("seeded", lambda kw: kw.update(generator=_gen(7)), lambda out, kw: torch.equal(
             out.tokens, _task().sample(5, _gen(7)).tokens))]),
    Spec("helpers.induction.CopyBatch", call=CopyBatch,
         good=lambda: dict(tokens=_batch().tokens, period=_batch().period),
         rules={"tokens": T(rank=2, dtype="long"), "period": T(rank=1, dtype="long")},
         check=lambda out, kw: out.tokens is kw["tokens"] and out.period is kw["period"]
         and torch.equal(out.copy_start, 6 - kw["period"]),
         bad=[Case("period too long", lambda kw: kw["period"].__setitem__(0, 4),
                   r"period must lie in \[2, T/2\] = \[2, 3\] .*got values from [23] to 4"),
              Case("period=1", lambda kw: kw.update(period=torch.ones(5, dtype=torch.long)),
                   r"period must lie in \[2, T/2\]"),
              Case("period B=4", lambda kw: kw.update(period=kw["period"][:4]),
                   r"length of period .*expected 5, got 4"),
              Case("B=0", lambda kw: kw.update(tokens=kw["tokens"][:0], period=kw["period"][:0]),
                   r"tokens must hold at least one sequence")]),
    Spec("helpers.induction.TrainingRun", call=induction.TrainingRun,
         good=lambda: {f: None for f in TRAINING_RUN_FIELDS},
         unfuzzed={f: INDUCTION_RUN for f in TRAINING_RUN_FIELDS},
         check=lambda out, kw: all(getattr(out, f) is None for f in TRAINING_RUN_FIELDS)),
    Spec("helpers.induction.make_model", call=induction.make_model,
         good=lambda: dict(task=_task(), num_hiddens=4, num_heads=2, num_layers=1, ffn_hiddens=4,
                           seed=0),
         rules={"task": _instance(CopyTask), "num_hiddens": "size", "num_heads": "size",
                "num_layers": "size", "ffn_hiddens": "size or None", "seed": "seed"},
         valid=lambda kw: kw["num_hiddens"] % kw["num_heads"] == 0, check=_make_model_right),
    Spec("helpers.induction.copy_loss", call=induction.copy_loss,
         good=lambda: dict(logits=_logits(), batch=_batch()),
         rules={"logits": T(rank=3, same_dtype=False), "batch": _instance(CopyBatch)},
         check=_copy_loss_by_hand,
         bad=[Case("V=5", lambda kw: kw.update(logits=kw["logits"][..., :5]),
                   r"logits must score every token of batch"),
              Case("T=5", lambda kw: kw.update(logits=kw["logits"][:, :5]),
                   r"logits must have shape \(B, T, V\) with \(B, T\) = \(5, 6\), "
                   r"got \(5, 5, 6\)")],
         edge=[Case(f"logits={dt}", lambda kw, dt=dt: kw.update(logits=_logits(dt)),
                    _copy_loss_by_hand) for dt in (torch.float16, torch.bfloat16)]),
    Spec("helpers.induction.copy_accuracy", call=induction.copy_accuracy,
         good=lambda: dict(logits=_logits(), batch=_batch()),
         rules={"logits": T(rank=3, same_dtype=False), "batch": _instance(CopyBatch)},
         check=_copy_accuracy_by_hand,
         bad=[Case("V=5", lambda kw: kw.update(logits=kw["logits"][..., :5]),
                   r"logits must score every token of batch")],
         edge=[Case("logits=bfloat16", lambda kw: kw.update(logits=_logits(torch.bfloat16)),
                    _copy_accuracy_by_hand)]),
    Spec("helpers.induction.induction_targets", call=induction.induction_targets,
         good=lambda: dict(tokens=torch.randint(0, 3, (3, 7), generator=_gen(4))),
         rules={"tokens": T(rank=2, dtype="integer")}, check=_brute_induction_targets,
         edge=[Case("int32", lambda kw: kw.update(tokens=kw["tokens"].int()),
                    _brute_induction_targets)]),
    Spec("helpers.induction.offset_targets", call=induction.offset_targets,
         good=lambda: dict(batch=_batch(), offset=1),
         rules={"batch": _instance(CopyBatch), "offset": Int(lo=0)},
         valid=lambda kw: kw["offset"] < 6, check=_offset_targets_by_hand),
    Spec("helpers.induction.mean_weight_on", call=induction.mean_weight_on,
         good=lambda: dict(weights=_weights(), keys=induction.offset_targets(_batch(), 1)),
         rules={"weights": T(min_rank=3, same_dtype=False), "keys": T(rank=2, dtype="integer")},
         check=lambda out, kw: _close(out, _pairs_mean(kw["weights"], [
             (b, i, int(j)) for b, row in enumerate(kw["keys"]) for i, j in enumerate(row)
             if j >= 0])),
         bad=[Case("keys=T", lambda kw: kw["keys"].__setitem__((0, 0), 6),
                   r"keys must hold key positions in \[0, T\) = \[0, 6\) or -1 \(no key\), got "
                   r"values from -1 to 6"),
              Case("keys=-2", lambda kw: kw["keys"].__setitem__((0, 0), -2),
                   r"keys must hold key positions in \[0, T\)"),
              Case("keys all -1", lambda kw: kw["keys"].fill_(-1),
                   r"keys must hold at least one key position >= 0"),
              Case("weights T=5", lambda kw: kw.update(weights=kw["weights"][..., :5, :5]),
                   r"weights must have shape \(B, \.\.\., T, T\) = \(5, \.\.\., 6, 6\)"),
              Case("weights B=4", lambda kw: kw.update(weights=kw["weights"][:4]),
                   r"weights must have shape \(B, \.\.\., T, T\)")],
         edge=[Case("weights (B, T, T)", lambda kw: kw.update(weights=kw["weights"][:, 0]),
                    lambda out, kw: out.shape == () and _close(out, _pairs_mean(
                        kw["weights"], _offset_pairs(_batch(), 1))))]),
    Spec("helpers.induction.previous_token_score", call=induction.previous_token_score,
         good=lambda: dict(weights=_weights(), batch=_batch()),
         rules={"weights": T(min_rank=3, same_dtype=False), "batch": _instance(CopyBatch)},
         check=lambda out, kw: out.shape == (2,) and _close(
             out, _pairs_mean(kw["weights"], _offset_pairs(kw["batch"], 1))),
         bad=[Case("weights T=5", lambda kw: kw.update(weights=kw["weights"][..., :5, :5]),
                   r"weights must have shape")],
         edge=[Case("weights=float16", lambda kw: kw.update(weights=_weights(torch.float16)),
                    lambda out, kw: out.dtype == torch.float16 and _close(
                        out, _pairs_mean(kw["weights"], _offset_pairs(kw["batch"], 1))))]),
    Spec("helpers.induction.induction_score", call=induction.induction_score,
         good=lambda: dict(weights=_weights(), tokens=_batch().tokens,
                           queries=_batch().predictable),
         rules={"weights": T(min_rank=3, same_dtype=False), "tokens": T(rank=2, dtype="integer"),
                "queries": T(rank=2, dtype="bool", optional=True)},
         check=lambda out, kw: out.shape == (2,) and _close(out, _pairs_mean(
             kw["weights"], _induction_pairs(kw["tokens"], kw["queries"]))),
         bad=[Case("no repeat", lambda kw: kw.update(tokens=torch.arange(30).reshape(5, 6)),
                   r"tokens must repeat a token"),
              Case("queries all False", lambda kw: kw.update(queries=kw["queries"] & False),
                   r"tokens must repeat a token \(at a query that counts\)"),
              Case("queries T=5", lambda kw: kw.update(queries=kw["queries"][:, :5]),
                   r"queries must be a boolean tensor of shape \(B, T\) = \(5, 6\)"),
              Case("tokens T=5", lambda kw: kw.update(tokens=kw["tokens"][:, :5],
                                                      queries=None),
                   r"weights must have shape")]),
    Spec("helpers.induction.offset_profile", call=induction.offset_profile,
         good=lambda: dict(weights=_weights(), batch=_batch(), max_offset=2),
         rules={"weights": T(min_rank=3, same_dtype=False), "batch": _instance(CopyBatch),
                "max_offset": Int(lo=0)},
         valid=lambda kw: kw["max_offset"] < int(kw["batch"].copy_start.max()),
         check=lambda out, kw: out.shape == (2, kw["max_offset"] + 1) and all(
             _close(out[..., k], _pairs_mean(kw["weights"], _offset_pairs(kw["batch"], k)))
             for k in range(kw["max_offset"] + 1)),
         bad=[Case("max_offset=latest start", lambda kw: kw.update(max_offset=4),
                   r"max_offset must be below the latest copy start [34] .*got 4")]),
    Spec("helpers.induction.composition_scores", call=induction.composition_scores,
         good=lambda: dict(model=_two_layers(), kind="k", sender=1, receiver=2),
         rules={"model": _instance(DecoderLM), "kind": OneOf(("q", "k", "v")), "sender": Int(lo=1),
                "receiver": Int(lo=1)},
         valid=lambda kw: kw["sender"] < kw["receiver"] <= 2, check=_composition_by_hand,
         bad=[Case("rope", lambda kw: kw.update(model=_two_layers(positional="rope")),
                   r"model must have position-free queries and keys .*got positional='rope'"),
              Case("meta", lambda kw: kw.update(model=_two_layers().to("meta")),
                   r"model's parameters must be on a device that holds data, got meta"),
              Case("one layer", lambda kw: kw.update(model=_lm()),
                   r"receiver must be a layer of the model, 1 … 1, got 2"),
              Case("sender=receiver", lambda kw: kw.update(sender=2),
                   r"sender must be a layer before receiver=2, got 2")],
         edge=[Case(f"kind={k}", lambda kw, k=k: kw.update(kind=k), _composition_by_hand) for k in "qv"]
         + [Case(f"model={dt}", lambda kw, dt=dt: kw.update(model=_two_layers(dt)),
                 lambda out, kw: out.dtype == torch.promote_types(kw["model"].norm.weight.dtype, torch.float32)
                 and bool(((out > 0) & (out <= 1)).all()))
            for dt in (torch.float16, torch.bfloat16, torch.float64)]
         + [Case("a head writes nothing",  # sender head 1's W_o columns zeroed: its row scores 0
                 lambda kw: kw["model"].blocks[0].attention.W_o.weight.data[:, :2].zero_(),
                 lambda out, kw: bool((out[0] == 0).all() and (out[1] > 0).all()))]),
    Spec("helpers.induction.train_with_checkpoints", call=induction.train_with_checkpoints,
         good=lambda: dict(task=_task(), model=None, steps=2, every=1, batch_size=3, lr=0.01,
                           seed=0, eval_size=4, threads=1),
         rules={"task": _instance(CopyTask, optional=True),
                "model": _instance(DecoderLM, optional=True), "steps": "size", "every": "size",
                "batch_size": "size", "lr": _lr_ok, "seed": "seed", "eval_size": "size",
                "threads": "size or None"},
         check=_induction_run_right,
         bad=_untrainable(_tiny_model) + [
              Case("model V=5", lambda kw: kw.update(model=DecoderLM(5, 4, 1, 1, max_len=6)),
                   r"model vocab_size \(the task's\): expected 6, got 5"),
              Case("model max_len=5", lambda kw: kw.update(model=DecoderLM(6, 4, 1, 1, max_len=5)),
                   r"model max_len must be at least seq_len=6, got 5"),
              Case("lr=1e30 diverges", lambda kw: kw.update(lr=1e30, steps=3),
                   r"training diverged at step 2 with lr=1e\+30: the loss must stay finite")],
         edge=[Case("model given", lambda kw: kw.update(model=_tiny_model()), _induction_run_right),
               Case("largest seed", lambda kw: kw.update(seed=2**64 - 1), _induction_run_right),
               Case("float64 model", lambda kw: kw.update(model=_tiny_model(torch.float64)),
                    lambda out, kw: out.train_loss.shape == (2,))]),
    Spec("helpers.induction.token_labels", call=induction.token_labels,
         good=lambda: dict(tokens=torch.tensor([0, 25, 26, 3])),
         rules={"tokens": T(rank=1, dtype="integer")},
         check=lambda out, kw: out == [chr(ord("A") + i) if i < 26 else str(i)
                                       for i in kw["tokens"].tolist()],
         bad=[Case("tokens=-1", lambda kw: kw["tokens"].__setitem__(0, -1),
                   r"tokens must be token ids >= 0, got a minimum of -1")]),
]


# -------------------------------------------------------------- the checks added for training
def _module_with(**change) -> nn.Module:
    module = nn.Linear(2, 3)
    return module.to(**change) if change else module


CHECKS = [
    Spec("helpers.checks.check_generator", call=checks.check_generator,
         good=lambda: dict(name="generator", generator=torch.Generator()),
         rules={"generator": _generator_ok},
         unfuzzed={"name": "the parameter name the calling helper puts in the message "
                           "(a literal in the helpers' code, never user input)"},
         check=lambda out, kw: out is kw["generator"]),
    Spec("helpers.checks.as_usable_device", call=checks.as_usable_device,
         good=lambda: dict(name="device", device="cpu"),
         rules={"device": _device_ok},
         unfuzzed={"name": "the parameter name the calling helper puts in the message "
                           "(a literal in the helpers' code, never user input)"},
         check=lambda out, kw: out == (None if kw["device"] is None
                                       else torch.device(kw["device"])),
         bad=[Case("meta", lambda kw: kw.update(device="meta"), r"device must be the CPU or an "
                   r"accelerator present on this machine, got meta"),
              Case("cuda:7", lambda kw: kw.update(device="cuda:7"), r"device must be")]),
    Spec("helpers.checks.check_trainable", call=checks.check_trainable,
         good=lambda: dict(name="model", model=_module_with()),
         rules={"model": _instance(nn.Module)},
         unfuzzed={"name": "the parameter name the calling helper puts in the message "
                           "(a literal in the helpers' code, never user input)"},
         check=lambda out, kw: out is kw["model"],
         bad=[Case(f"model={dt}", lambda kw, dt=dt: kw.update(model=_module_with(dtype=dt)),
                   rf"model must have float32 or float64 parameters to train \(train in float32 "
                   rf"and cast afterwards\), got {dt}") for dt in (torch.float16, torch.bfloat16)]
         + [Case("model=meta", lambda kw: kw.update(model=_module_with(device="meta")),
                 r"model's parameters must be on a device that holds data"),
            Case("model=ReLU", lambda kw: kw.update(model=nn.ReLU()),
                 r"model must have parameters to train, got none"),
            Case("model=NaN", lambda kw: kw.update(model=_poisoned_lm()),
                 r"model must have finite parameters to train, got NaN or inf")],
         edge=[Case("float64", lambda kw: kw.update(model=_module_with(dtype=torch.float64)),
                    lambda out, kw: out is kw["model"])]),
    Spec("helpers.checks.check_finite_loss", call=checks.check_finite_loss,
         good=lambda: dict(loss=2.5, step=3, lr=0.01, model=None),
         rules={"loss": "finite", "step": "size", "lr": "positive",
                "model": _instance(nn.Module, optional=True)},
         check=lambda out, kw: out == kw["loss"],
         bad=[Case("model NaN", lambda kw: kw.update(model=_poisoned_lm()),
                   r"training diverged at step 3 with lr=0.01: the parameters must stay finite, "
                   r"got NaN or inf")],
         edge=[Case("model finite", lambda kw: kw.update(model=_lm()),
                    lambda out, kw: out == 2.5)]),
]

SPECS: list[Spec] = RELATIVE + TOY + INDUCTION + CHECKS
