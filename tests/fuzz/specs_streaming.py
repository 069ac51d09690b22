"""Specs for ``helpers.streaming``, the tasks and tiny decoder of notebook 11 (see
``tests/fuzz/__init__.py`` for the format). Every ``check`` recomputes the result from its
definition: the batches from the tasks' rules, the logits from the forward pass written out by
hand (``tests.test_streaming._by_hand``), the streamed and recomputed logits from the model run
in full or on each window, the first training loss from the seeded batch, the losses and
accuracies by counting."""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from helpers import streaming
from helpers.kv_cache import ROPE_POSITIONS, KVCache
from helpers.latent_attention import LatentCache
from helpers.streaming import IGNORE, BackcopyTask, TinyDecoder
from tests.fuzz import Case, OneOf, Real, Spec, T, _is_real
from tests.fuzz.specs_training import _generator_ok
from tests.test_streaming import _by_hand

VOCAB = 7  # the specs' models: V = 7, N = 8, H = 2, L = 2


def _lr_ok(v: object) -> bool:
    """A positive finite lr that does not blow up two steps (1e30 from the pool diverges: train
    refuses it with its divergence error, whose first line names lr)."""
    return _is_real(v) and 0 < v < 1e6


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _model(dtype: torch.dtype = torch.float64, **kw) -> TinyDecoder:
    """The specs' TinyDecoder, always the same weights (seeded, the global generator left as it
    was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        args = dict(vocab_size=VOCAB, num_hiddens=8, num_heads=2, num_layers=2)
        args.update(kw)
        model = TinyDecoder(**args)
    return model.to(dtype).eval()


def _tokens(B: int = 2, T: int = 6, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (B, T), generator=_gen(seed))


def _close(out: object, expected: torch.Tensor, tol: float = 1e-9) -> bool:
    return (isinstance(out, torch.Tensor) and out.shape == expected.shape
            and torch.allclose(out.double(), expected.double(), rtol=tol, atol=tol))


# ---------------------------------------------------------------------------- by hand
def _backcopy_right(out, kw, task: BackcopyTask) -> bool:
    tokens, targets, is_copy = out
    B, T = kw["batch_size"], kw["length"]
    if any(x.shape != (B, T) for x in out) or is_copy.dtype != torch.bool \
            or tokens.dtype != torch.long:
        return False
    first = int(task.bos)
    if task.bos and not (tokens[:, 0] == task.bos_token).all():
        return False
    if not ((tokens[:, first:] >= 0) & (tokens[:, first:] < task.vocab_size)).all():
        return False
    if not (torch.equal(targets[:, :-1], tokens[:, 1:]) and (targets[:, -1] == IGNORE).all()):
        return False
    for b in range(B):
        for t in range(T - 1):
            copy = bool(tokens[b, t] < task.num_triggers) and t > first
            if bool(is_copy[b, t]) != copy or (copy and tokens[b, t + 1] != tokens[b, t - 1]):
                return False
    return not is_copy[:, -1].any()


def _offsets_right(out, kw) -> bool:
    tokens, targets = out
    B, T, O = kw["batch_size"], kw["length"], kw["max_offset"]
    if tokens.shape != (B, T) or targets.shape != (B, T, O):
        return False
    if not ((tokens >= 0) & (tokens < kw["vocab_size"])).all():
        return False
    return all(int(targets[b, t, o - 1]) == (int(tokens[b, t - o]) if t >= o else IGNORE)
               for b in range(B) for t in range(T) for o in range(1, O + 1))


def _decoder_right(m, kw) -> bool:
    N, H, L = kw["num_hiddens"], kw["num_heads"], kw["num_layers"]
    outputs = kw["vocab_size"] if kw["num_outputs"] is None else kw["num_outputs"]
    if m.embedding.weight.shape != (kw["vocab_size"], N) or len(m.blocks) != L \
            or m.head.out_features != outputs or type(m.num_outputs) is not int:
        return False
    if (m.blocks[0].ffn is not None) != bool(kw["ffn"]):
        return False
    if kw["latent_size"] is not None:
        d_r = 4 if kw["rope_size"] is None else kw["rope_size"]
        return m.kv_numbers_per_token() == kw["latent_size"] + d_r
    att = m.blocks[0].attention
    if att.window != kw["window"] or att.sink != bool(kw["sink"]) or att.gate != bool(kw["gate"]):
        return False
    G = H if kw["num_kv_heads"] is None else kw["num_kv_heads"]
    if att.num_kv_heads != G or m.kv_numbers_per_token() != 2 * G * (N // H):
        return False
    return not kw["sink"] or all(
        torch.allclose(b.attention.sink_logits, torch.tensor(float(kw["sink_init"])).float())
        for b in m.blocks)


def _forward_right(out, kw) -> bool:
    model = kw.get("model") or _model()
    return _close(out, _by_hand(model.double(), kw["tokens"], model.window))


def _first_loss(model: TinyDecoder, batch: tuple) -> float:
    tokens, targets = batch[:2]
    with torch.no_grad():
        logits = model(tokens).double()
    if targets.dim() == 3:
        logits = logits.view(*targets.shape, -1)
    ok = targets != IGNORE
    logp = logits.log_softmax(-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    return -logp[ok].mean().item()


def _sample(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return streaming.offsets_sample(3, 5, vocab_size=VOCAB, max_offset=1, generator=g)


def _train_right(out, kw) -> bool:
    """``steps`` finite floats; the first is the untrained model's cross-entropy on the first
    batch (the generator seeded with ``seed``); the model left in eval mode."""
    if len(out) != kw["steps"] or not all(isinstance(x, float) and math.isfinite(x) for x in out):
        return False
    dtype = next(kw["model"].parameters()).dtype
    fresh = _model(dtype, num_outputs=VOCAB)
    want = _first_loss(fresh, kw["sample"](_gen(kw["seed"])))
    return abs(out[0] - want) < 1e-4 and not kw["model"].training


def _stream_right(out, kw) -> bool:
    model = kw["model"]
    with torch.no_grad():
        return _close(out, model(kw["tokens"]))


def _recompute_right(out, kw) -> bool:
    model, tokens, W = kw["model"], kw["tokens"], kw["window"]
    with torch.no_grad():
        want = torch.stack([model(tokens[:, max(0, t - W + 1): t + 1])[:, -1]
                            for t in range(tokens.shape[1])], 1)
    return _close(out, want)


def _position_loss_right(out, kw) -> bool:
    logits, targets = kw["logits"].double(), kw["targets"]
    T = targets.shape[1]
    if not (isinstance(out, torch.Tensor) and out.shape == (T,) and out.dtype == torch.float64):
        return False
    if targets.dim() == 3:
        logits = logits.view(*targets.shape, -1)
    lp = logits.log_softmax(-1)
    for t in range(T):
        terms = [-lp[idx + (int(targets[idx]),)].item()
                 for idx in (tuple(i) for i in (targets[:, t] != IGNORE).nonzero().tolist())
                 for idx in [(idx[0], t) + tuple(idx[1:])]]
        want = sum(terms) / len(terms) if terms else math.nan
        if not (math.isnan(want) and math.isnan(out[t]) or abs(out[t].item() - want) < 1e-9):
            return False
    return True


def _accuracy_right(out, kw) -> bool:
    model, tokens, targets = kw.get("model") or _acc_model(), kw["tokens"], kw["targets"]
    O = targets.shape[-1]
    with torch.no_grad():
        pred = model(tokens).view(*targets.shape, -1).argmax(-1)
    want = []
    for o in range(O):
        rows = [bool(pred[b, t, o] == targets[b, t, o]) for b in range(targets.shape[0])
                for t in range(targets.shape[1]) if targets[b, t, o] != IGNORE]
        want.append(sum(rows) / len(rows) if rows else math.nan)
    return isinstance(out, torch.Tensor) and out.dtype == torch.float64 and torch.allclose(
        out, torch.tensor(want, dtype=torch.float64), equal_nan=True)


def _acc_model() -> TinyDecoder:
    return _model(num_outputs=3 * VOCAB)


def _raises(call, pattern: str) -> bool:
    try:
        call()
    except ValueError as error:
        return re.search(pattern, str(error)) is not None
    return False


def _decoder_valid(kw) -> bool:
    N, H = kw["num_hiddens"], kw["num_heads"]
    if kw["sink_init"] != 0 and not kw["sink"]:
        return False
    if kw["latent_size"] is None:
        return (kw["rope_size"] is None and N % H == 0 and (N // H) % 2 == 0
                and (kw["num_kv_heads"] is None or H % kw["num_kv_heads"] == 0))
    return (kw["window"] is None and not kw["sink"] and N >= H and kw["num_kv_heads"] is None
            and not kw["gate"]
            and (kw["rope_size"] is None or kw["rope_size"] % 2 == 0))


# ------------------------------------------------------------------------------ specs
SPECS: list[Spec] = [
    Spec("helpers.streaming.BackcopyTask", call=BackcopyTask,
         good=lambda: dict(vocab_size=5, num_triggers=2, alpha=0.3, seed=1, bos=True),
         rules={"vocab_size": "size", "num_triggers": "count", "alpha": Real(1e-3, 1e6),
                "seed": "seed", "bos": "flag"},
         valid=lambda kw: kw["num_triggers"] <= kw["vocab_size"],
         check=lambda task, kw: (
             task.transitions.shape == (kw["vocab_size"],) * 2
             and task.transitions.dtype == torch.float64
             and torch.allclose(task.transitions.sum(-1), torch.ones(kw["vocab_size"],
                                                                     dtype=torch.float64))
             and task.num_tokens == kw["vocab_size"] + 1 == task.bos_token + 1),
         bad=[Case("num_triggers>vocab_size", lambda kw: kw.update(num_triggers=6),
                   r"num_triggers must be at most vocab_size=5, got 6")],
         edge=[Case("seeded", lambda kw: None, lambda task, kw: torch.equal(
             task.transitions, BackcopyTask(5, 2, 0.3, seed=1).transitions))]),
    Spec("helpers.streaming.BackcopyTask.sample",
         call=lambda task=None, **kw: (task or BackcopyTask(5, 2, 0.3, seed=1)).sample(**kw),
         good=lambda: dict(batch_size=3, length=9, generator=_gen(2)),
         rules={"batch_size": "size", "length": "size", "generator": _generator_ok},
         check=lambda out, kw: _backcopy_right(out, kw, kw.get("task")
                                                or BackcopyTask(5, 2, 0.3, seed=1)),
         edge=[Case("bos=False", lambda kw: kw.update(task=BackcopyTask(5, 2, seed=3, bos=False)),
                    lambda out, kw: _backcopy_right(out, kw, kw["task"])),
               Case("every token a trigger", lambda kw: kw.update(task=BackcopyTask(4, 4)),
                    lambda out, kw: _backcopy_right(out, kw, kw["task"])),
               Case("one-token", lambda kw: kw.update(length=1),
                    lambda out, kw: out[0].tolist() == [[5]] * 3)]),
    Spec("helpers.streaming.offsets_sample", call=streaming.offsets_sample,
         good=lambda: dict(batch_size=2, length=5, vocab_size=4, max_offset=3, generator=None),
         rules={"batch_size": "size", "length": "size", "vocab_size": "size",
                "max_offset": "size", "generator": _generator_ok},
         check=_offsets_right,
         edge=[Case("max_offset>length", lambda kw: kw.update(max_offset=7), _offsets_right),
               Case("seeded", lambda kw: kw.update(generator=_gen(3)), lambda out, kw: all(
                   torch.equal(a, b) for a, b in zip(out, streaming.offsets_sample(
                       2, 5, vocab_size=4, max_offset=3, generator=_gen(3)))))]),
    Spec("helpers.streaming.TinyDecoder", call=TinyDecoder,
         good=lambda: dict(vocab_size=5, num_hiddens=8, num_heads=2, num_layers=1,
                           num_outputs=None, window=3, sink=True, sink_init=0.5,
                           latent_size=None, rope_size=None, ffn=False, num_kv_heads=None,
                           gate=False),
         rules={"vocab_size": "size", "num_hiddens": "size", "num_heads": "size",
                "num_layers": "size", "num_outputs": "size or None", "window": "size or None",
                "sink": "flag", "sink_init": "finite", "latent_size": "size or None",
                "rope_size": "count or None", "ffn": "flag", "num_kv_heads": "size or None",
                "gate": "flag"},
         valid=_decoder_valid, check=_decoder_right,
         bad=[Case("num_heads=3", lambda kw: kw.update(num_heads=3),
                   r"num_hiddens must be divisible by num_heads"),
              Case("MLA rope_size=3", lambda kw: kw.update(latent_size=2, rope_size=3, window=None,
                                                           sink=False, sink_init=0.0),
                   r"rope_size must be an even int >= 0 or None, got 3"),
              Case("MLA with a window", lambda kw: kw.update(latent_size=2, sink=False,
                                                             sink_init=0.0),
                   r"latent_size must be None with window, sink, num_kv_heads or gate"),
              Case("num_kv_heads=3", lambda kw: kw.update(num_kv_heads=3),
                   r"num_kv_heads must divide num_heads=2, got 3")],
         edge=[Case("MLA", lambda kw: kw.update(latent_size=3, window=None, sink=False,
                                                sink_init=0.0, ffn=True), _decoder_right),
               Case("MLA rope_size=0", lambda kw: kw.update(latent_size=3, rope_size=0,
                                                            window=None, sink=False, sink_init=0.0),
                    _decoder_right),
               Case("num_outputs=21 L=3", lambda kw: kw.update(num_outputs=21, num_layers=3),
                    _decoder_right),
               Case("MQA gate", lambda kw: kw.update(num_kv_heads=1, gate=True), _decoder_right)]),
    Spec("helpers.streaming.TinyDecoder.forward",
         call=lambda model=None, **kw: (model or _model())(**kw),
         good=lambda: dict(tokens=_tokens(), cache=None),
         rules={"tokens": T(rank=2, dtype="long"), "cache": lambda v: v is None},
         check=_forward_right,
         bad=[Case("tokens=7", lambda kw: kw.update(tokens=kw["tokens"] * 0 + VOCAB),
                   r"tokens must be ids in \[0, vocab_size\) = \[0, 7\), got values from 7"),
              Case("tokens T=0", lambda kw: kw.update(tokens=kw["tokens"][:, :0]),
                   r"tokens must hold at least one token per sequence, got shape \(2, 0\)"),
              Case("cache of 1", lambda kw: kw.update(cache=[KVCache()]),
                   r"cache must be None or a list of 2 KVCache"),
              Case("LatentCache for MHA", lambda kw: kw.update(cache=[LatentCache()] * 2),
                   r"cache must be None or a list of 2 KVCache"),
              Case("KVCache for MLA", lambda kw: kw.update(model=_model(latent_size=2),
                                                           cache=[KVCache(), KVCache()]),
                   r"cache must be None or a list of 2 LatentCache")],
         edge=[Case(f"{name}", lambda kw, extra=extra: kw.update(model=_model(**extra)),
                    _forward_right)
               for name, extra in (("window=2 sink", dict(window=2, sink=True, sink_init=0.3)),
                                   ("MQA gate", dict(num_kv_heads=1, gate=True, sink=True)),
                                   ("ffn num_outputs", dict(ffn=True, num_outputs=3)))]
         + [Case("full cache", lambda kw: kw.update(cache=_model().new_cache()), _forward_right),
            Case("MLA full cache", lambda kw: kw.update(model=_model(latent_size=3),
                                                        cache=_model(latent_size=3).new_cache()),
                 lambda out, kw: _close(out, _model(latent_size=3)(kw["tokens"]))),
            Case("B=1 T=1", lambda kw: kw.update(tokens=_tokens(1, 1)), _forward_right)]),
    Spec("helpers.streaming.TinyDecoder.new_cache",
         call=lambda model=None, **kw: (model or _model()).new_cache(**kw),
         good=lambda: dict(window=3, sinks=1, rope_positions="cache"),
         rules={"window": "size or None", "sinks": "count", "rope_positions": OneOf(ROPE_POSITIONS)},
         valid=lambda kw: kw["window"] is not None or kw["sinks"] == 0,
         check=lambda out, kw: len(out) == 2 and all(
             isinstance(c, KVCache) and c.window == kw["window"] and c.sinks == kw["sinks"]
             and c.rope_positions == kw["rope_positions"] for c in out) and out[0] is not out[1],
         bad=[Case("MLA window", lambda kw: kw.update(model=_model(latent_size=2), sinks=0,
                                                      rope_positions="original"),
                   r"window must be None \(and sinks 0, rope_positions 'original'\) for MLA")],
         edge=[Case("MLA", lambda kw: kw.update(model=_model(latent_size=2), window=None, sinks=0,
                                                rope_positions="original"),
                    lambda out, kw: len(out) == 2 and all(isinstance(c, LatentCache) for c in out)),
               Case("no policy", lambda kw: kw.update(window=None, sinks=0),
                    lambda out, kw: all(c.window is None and c.length == 0 for c in out))]),
    Spec("helpers.streaming.TinyDecoder.kv_numbers_per_token",
         call=lambda model=None: (model or _model()).kv_numbers_per_token(),
         good=lambda: dict(),
         check=lambda out, kw: out == 2 * 8 and type(out) is int,
         edge=[Case("MLA d_c=3", lambda kw: kw.update(model=_model(latent_size=3)),
                    lambda out, kw: out == 3 + 4),
               Case("MLA d_c=3 d_r=2", lambda kw: kw.update(model=_model(latent_size=3, rope_size=2)),
                    lambda out, kw: out == 3 + 2)]),
    Spec("helpers.streaming.from_pool", call=streaming.from_pool,
         good=lambda: dict(pool=(torch.arange(10).view(5, 2), torch.arange(5)), batch_size=2),
         rules={"batch_size": "size", "pool": lambda v: isinstance(v, (tuple, list)) and len(v) >= 2
                and all(isinstance(x, torch.Tensor) and x.dim() >= 1 for x in v)},
         valid=lambda kw: kw["batch_size"] <= kw["pool"][0].shape[0],
         check=lambda f, kw: (lambda a, b: torch.equal(a[0], kw["pool"][0][:kw["batch_size"]])
                              and torch.equal(b[1], kw["pool"][1][kw["batch_size"]:
                                                                   2 * kw["batch_size"]]))(
             f(None), f(_gen(0))),
         bad=[Case("batch_size>rows", lambda kw: kw.update(batch_size=6),
                   r"batch_size must be at most the pool's 5 rows, got 6"),
              Case("rows disagree", lambda kw: kw.update(pool=(torch.zeros(5, 2), torch.zeros(4))),
                   r"pool must hold tensors with one number of rows")],
         edge=[Case("exhausted", lambda kw: kw.update(batch_size=3), lambda f, kw: (
             f(None) is not None and _raises(lambda: f(None), r"pool must hold a batch for every "
                                             r"step: 5 rows give 1 batches of 3, got a call for "
                                             r"batch 2")))]),
    Spec("helpers.streaming.train", call=streaming.train,
         good=lambda: dict(model=_model(torch.float32, num_outputs=VOCAB), sample=_sample, steps=2,
                           lr=0.01, seed=0),
         rules={"model": lambda v: isinstance(v, TinyDecoder), "sample": callable, "steps": "size",
                "lr": _lr_ok, "seed": "seed"},
         check=_train_right,
         bad=[Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a TinyDecoder, got Linear"),
              Case("model=float16", lambda kw: kw.update(model=_model(torch.float16)),
                   r"model must have float32 or float64 parameters"),
              Case("model=meta", lambda kw: kw.update(model=_model().to("meta")),
                   r"model's parameters must be on a device that holds data"),
              Case("sample returns None", lambda kw: kw.update(sample=lambda g: None),
                   r"sample must return \(tokens, targets, \.\.\.\), got NoneType"),
              Case("sample's targets float", lambda kw: kw.update(
                  sample=lambda g: (_tokens(), torch.zeros(2, 6))),
                   r"sample's targets must be a long tensor"),
              Case("sample's targets B=1", lambda kw: kw.update(
                  sample=lambda g: (_tokens(), torch.zeros(1, 6).long())),
                   r"sample's targets must have the \(B, T\)"),
              Case("sample's targets out of range", lambda kw: kw.update(
                  sample=lambda g: (_tokens(), torch.full((2, 6), VOCAB))),
                   r"sample's targets must be ids in \[0, 7\) or IGNORE"),
              Case("lr=1e30 diverges", lambda kw: kw.update(lr=1e30, steps=3),
                   r"training diverged at step \d with lr=1e\+30: the (loss|parameters) must "
                   r"stay finite")],
         edge=[Case("model=float64", lambda kw: kw.update(model=_model(num_outputs=VOCAB)),
                    _train_right),
               Case("offsets targets (B, T, O)", lambda kw: kw.update(
                   model=_model(torch.float32, num_outputs=2 * VOCAB), sample=lambda g: (
                       streaming.offsets_sample(3, 5, vocab_size=VOCAB, max_offset=2, generator=g))),
                    lambda out, kw: len(out) == 2 and abs(out[0] - _first_loss(
                        _model(torch.float32, num_outputs=2 * VOCAB), kw["sample"](_gen(0)))) < 1e-4)]),
    Spec("helpers.streaming.stream", call=streaming.stream,
         good=lambda: dict(model=_model(), tokens=_tokens(), cache=_model().new_cache()),
         rules={"model": lambda v: isinstance(v, TinyDecoder), "tokens": T(rank=2, dtype="long"),
                "cache": lambda v: isinstance(v, list) and len(v) == 2
                and all(isinstance(c, KVCache) for c in v)},
         check=_stream_right,
         bad=[Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a TinyDecoder, got Linear"),
              Case("tokens=-1", lambda kw: kw.update(tokens=kw["tokens"] * 0 - 1),
                   r"tokens must be ids in \[0, vocab_size\)"),
              Case("cache of 3", lambda kw: kw.update(cache=_model(num_layers=3).new_cache()),
                   r"cache must be None or a list of 2 KVCache")],
         edge=[Case("MLA", lambda kw: kw.update(model=_model(latent_size=3),
                                                cache=_model(latent_size=3).new_cache()),
                    _stream_right),
               Case("window cache = windowed model", lambda kw: kw.update(
                   cache=_model().new_cache(window=2)),
                    lambda out, kw: _close(out, _model(window=2)(kw["tokens"]))),
               Case("sink model", lambda kw: kw.update(model=_model(sink=True, sink_init=1.0)),
                    _stream_right)]),
    Spec("helpers.streaming.recompute", call=streaming.recompute,
         good=lambda: dict(model=_model(), tokens=_tokens(2, 7), window=3),
         rules={"model": lambda v: isinstance(v, TinyDecoder), "tokens": T(rank=2, dtype="long"),
                "window": "size"},
         check=_recompute_right,
         bad=[Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a TinyDecoder, got Linear")],
         edge=[Case("window > T", lambda kw: kw.update(window=9), _recompute_right),
               Case("window = T", lambda kw: kw.update(window=7), _recompute_right),
               Case("MLA", lambda kw: kw.update(model=_model(latent_size=2)), _recompute_right)]),
    Spec("helpers.streaming.position_loss", call=streaming.position_loss,
         good=lambda: dict(logits=torch.randn(3, 4, 5, generator=_gen(1)),
                           targets=torch.tensor([[1, 2, IGNORE, 0], [4, IGNORE, IGNORE, 3],
                                                 [0, 0, IGNORE, IGNORE]])),
         rules={"logits": T(rank=3, same_dtype=False), "targets": T(min_rank=2, dtype="long")},
         check=_position_loss_right,
         bad=[Case("targets T=3", lambda kw: kw.update(targets=kw["targets"][:, :3]),
                   r"targets must have the \(B, T\) = \(3, 4\) of the logits, got \(3, 3\)"),
              Case("targets=5", lambda kw: kw.update(targets=kw["targets"].clamp(min=0) * 0 + 5),
                   r"targets must be ids in \[0, 5\) or IGNORE"),
              Case("O=2 of 5 outputs", lambda kw: kw.update(targets=torch.zeros(3, 4, 2).long()),
                   r"targets must have O offsets dividing the 5 outputs")],
         edge=[Case("offsets (B, T, O)", lambda kw: kw.update(
             logits=torch.randn(2, 5, 6, generator=_gen(2)),
             targets=streaming.offsets_sample(2, 5, vocab_size=3, max_offset=2,
                                              generator=_gen(2))[1]), _position_loss_right),
               Case("float64", lambda kw: kw.update(logits=kw["logits"].double()),
                    _position_loss_right)]),
    Spec("helpers.streaming.accuracy_by_offset",
         call=lambda model=None, **kw: streaming.accuracy_by_offset(model or _acc_model(), **kw),
         good=lambda: dict(zip(("tokens", "targets"), streaming.offsets_sample(
             3, 6, vocab_size=VOCAB, max_offset=3, generator=_gen(4)))),
         rules={"tokens": T(rank=2, dtype="long"), "targets": T(rank=3, dtype="long")},
         unfuzzed={"model": "passed by the call (the spec's model); a bad model: the hand-"
                            "written case model=Linear"},
         check=_accuracy_right,
         bad=[Case("model=Linear", lambda kw: kw.update(model=nn.Linear(2, 2)),
                   r"model must be a TinyDecoder, got Linear"),
              Case("targets B=2", lambda kw: kw.update(targets=kw["targets"][:2]),
                   r"targets must have the \(B, T\) = \(3, 6\) of the logits"),
              Case("O=2 of 21 outputs", lambda kw: kw.update(targets=kw["targets"][..., :2]),
                   r"targets must have O offsets dividing the 21 outputs")],
         edge=[Case("O=7 (offsets past T: NaN)", lambda kw: kw.update(
             model=_model(num_outputs=7 * VOCAB), targets=streaming.offsets_sample(
                 3, 6, vocab_size=VOCAB, max_offset=7, generator=_gen(4))[1]), _accuracy_right)]),
]
