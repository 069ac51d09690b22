"""Specs for the KV cache economy views of notebook 11: ``helpers.widgets.kv_economy`` (see
``tests/fuzz/__init__.py`` for the format). Each ``check`` compares the Figure's artists with
what is written out in ``tests/test_widgets_kv_economy.py``: the running mean over 8 positions
(NaN skipped), the title's means past the training length, MLA's seeds and means, the bars.
Draws cost tens of milliseconds (a fresh figure about 0.3 s)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from helpers.widgets import kv_economy as kv
from helpers.widgets import windows as ww
from tests.fuzz import Case, Int, Spec
from tests.fuzz.specs_widgets_a import _control, _foreign, _is_view  # the same helpers
from tests.fuzz.specs_widgets_c import Choice
from tests.test_widgets_kv_economy import (latent_title_by_hand, running_mean_by_hand,
                                           streaming_title_by_hand)

MODELS = ("softmax", "sink logit")  # kv.MODELS, written out
POLICIES = ("dense", "window", "sinks + window")
RECENT = (2, 4, 8, 16)
LATENT_SIZES = (4, 8, 12)
SHARED = ("mqa", "gqa", "mha")  # one accuracy per seed, one cache size
P = len(LATENT_SIZES)
T = 30  # the spec's positions: train_length 1 … 29 is valid (NaN only at position 0)
FIG = lambda v: v is None or isinstance(v, Figure)  # noqa: E731  a draw function's ``fig``


# ------------------------------------------------------------------ the streaming view
def _losses(length: int = T, dtype: torch.dtype = torch.float64) -> dict:
    t = torch.arange(length, dtype=torch.float64)
    out = {}
    for m, model in enumerate(MODELS):
        out[model] = {}
        for p, policy in enumerate(POLICIES):
            out[model][policy] = {}
            for r in RECENT:
                x = 0.4 + 0.3 * p + 0.2 * m + 0.01 * r + 0.1 * torch.cos(t * (p + 2) + r)
                x[0] = math.nan  # no target at position 0
                out[model][policy][r] = x.to(dtype)
    return out


def _curve(v: object) -> bool:
    return (isinstance(v, torch.Tensor) and v.dtype.is_floating_point
            and v.device.type != "meta" and v.dim() == 1 and v.shape[0] >= 2
            and not bool(torch.isinf(v).any()) and not bool((v < 0).any()))


def _replace(good: dict, model: str, policy: str, r: int, x: object) -> dict:
    out = {m: {p: dict(by_r) for p, by_r in by_p.items()} for m, by_p in good.items()}
    out[model][policy][r] = x
    return out


@dataclass(frozen=True)
class Losses:
    """{model: {policy: {R: (T,) floating tensor}}}, keys exactly MODELS, POLICIES and RECENT,
    one T, values ≥ 0 or NaN (the training length's part of the rule: ``_streaming_valid``)."""

    def __call__(self, v: object) -> bool:
        if not (isinstance(v, dict) and set(v) == set(MODELS) and len(v) == len(MODELS)):
            return False
        curves = []
        for by_p in v.values():
            if not (isinstance(by_p, dict) and set(by_p) == set(POLICIES)
                    and len(by_p) == len(POLICIES)):
                return False
            for by_r in by_p.values():
                if not (isinstance(by_r, dict) and set(by_r) == set(RECENT)
                        and len(by_r) == len(RECENT)):
                    return False
                curves += list(by_r.values())
        return all(_curve(x) for x in curves) and len({x.shape[0] for x in curves}) == 1

    def extra_values(self) -> list[tuple[str, object]]:
        good = _losses()
        x = good["softmax"]["window"][4]
        return [
            ("good", good), ("float32", _losses(dtype=torch.float32)), ("long-T", _losses(97)),
            ("[]", []), ("missing-model", {"softmax": good["softmax"]}),
            ("extra-model", {**good, "gated": good["softmax"]}),
            ("missing-policy", {**good, "softmax": {p: good["softmax"][p] for p in POLICIES[:2]}}),
            ("missing-R", {**good, "softmax": {**good["softmax"],
                                               "dense": {r: x for r in RECENT[1:]}}}),
            ("extra-R", {**good, "softmax": {**good["softmax"],
                                             "dense": {**good["softmax"]["dense"], 32: x}}}),
            ("numpy", _replace(good, "softmax", "window", 4, x.numpy())),
            ("list", _replace(good, "softmax", "window", 4, x.tolist())),
            ("long", _replace(good, "softmax", "window", 4, x.nan_to_num().long())),
            ("complex", _replace(good, "softmax", "window", 4, x.to(torch.complex64))),
            ("meta", _replace(good, "softmax", "window", 4, torch.empty(T, device="meta"))),
            ("one-short", _replace(good, "sink logit", "dense", 16, x[:-1])),
            ("2-d", _replace(good, "sink logit", "dense", 16, x[None])),
            ("0-d", _replace(good, "sink logit", "dense", 16, x[1])),
            ("inf", _replace(good, "softmax", "dense", 8, torch.where(x > 0.5, math.inf, x))),
            ("negative", _replace(good, "softmax", "dense", 8, -x)),
            ("all-nan", _replace(good, "softmax", "dense", 8, x * math.nan)),
            ("nan-past-20", _replace(good, "softmax", "dense", 8,
                                     torch.cat([x[:20], torch.full((T - 20,), math.nan)]))),
        ]


def _streaming_valid(kw: dict) -> bool:
    """train_length in [1, T − 1], and every curve has a value at some position past it."""
    losses, length = kw["losses"], int(kw["train_length"])
    curves = [x for by_p in losses.values() for by_r in by_p.values() for x in by_r.values()]
    n = curves[0].shape[0]
    return 1 <= length <= n - 1 and all(bool(torch.isfinite(x[length:]).any()) for x in curves)


def _streaming_right(fig: Figure, kw: dict) -> bool:
    r, losses, length = int(kw["recent"]), kw["losses"], int(kw["train_length"])
    if not (isinstance(fig, Figure) and fig.get_label() == "kv_economy.streaming"
            and len(fig.axes) == 2):
        return False
    for ax, model in zip(fig.axes, MODELS):
        lines = {line.get_gid(): line for line in ax.lines}
        for policy in POLICIES:
            x, y = running_mean_by_hand(losses[model][policy][r].double().numpy())
            if not (np.array_equal(lines[policy].get_xdata(), x)
                    and np.allclose(lines[policy].get_ydata(), y, rtol=1e-12)):
                return False
        if list(lines["train"].get_xdata()) != [length, length]:
            return False
    double = {m: {p: {q: c.double() for q, c in by_r.items()} for p, by_r in by_p.items()}
              for m, by_p in losses.items()}
    return fig._suptitle.get_text() == streaming_title_by_hand(r, double, length)


STREAMING_RULES = {"recent": Choice(RECENT), "losses": Losses(), "train_length": Int(1, T - 1)}
STREAMING = [
    Spec("helpers.widgets.kv_economy.draw_streaming", call=kv.draw_streaming,
         good=lambda: dict(recent=4, losses=_losses(), train_length=12, fig=None),
         rules={**STREAMING_RULES, "fig": FIG}, valid=_streaming_valid, check=_streaming_right,
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _streaming_right),
               Case("other-view-fig", lambda kw: kw.update(fig=ww.draw_reach(3, 2)),
                    _streaming_right),
               Case("own-fig-new-data", lambda kw: kw.update(
                   fig=kv.draw_streaming(16, _losses(97), 48)), _streaming_right),
               Case("numpy-ints", lambda kw: kw.update(recent=np.int64(8),
                                                       train_length=np.int32(20)),
                    _streaming_right)]),
    Spec("helpers.widgets.kv_economy.streaming_view", call=kv.streaming_view,
         good=lambda: dict(losses=_losses(), train_length=12, recent=8), rules=STREAMING_RULES,
         valid=_streaming_valid,
         check=lambda out, kw: _is_view(out)
         and _control(out, "cache window R").value == kw["recent"]
         and _streaming_right(out.result, kw)),
]


# ------------------------------------------------------------------ the latent view
def _accuracy(seeds: int = 3, dtype: torch.dtype = torch.float64) -> dict:
    mean = torch.tensor([0.55, 0.85, 0.95], dtype=torch.float64)
    spread = torch.linspace(-0.03, 0.03, seeds, dtype=torch.float64)[:, None]
    return {"mla": (mean + spread).clamp(0, 1).to(dtype),
            "mqa": torch.linspace(0.6, 0.8, seeds, dtype=torch.float64).to(dtype),
            "gqa": torch.linspace(0.9, 0.94, seeds, dtype=torch.float64).to(dtype),
            "mha": torch.linspace(0.97, 1.0, seeds, dtype=torch.float64).to(dtype)}


def _numbers() -> dict:
    return {"mla": (8, 12, 16), "mqa": 8, "gqa": 16, "mha": 64}


def _fractions(v: object, shape: tuple[int, ...]) -> bool:
    return (isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.device.type != "meta"
            and tuple(v.shape) == shape and v.numel() > 0
            and bool(((v >= 0) & (v <= 1)).all()))


def _count(v: object) -> bool:
    return Int(1)(v)


@dataclass(frozen=True)
class Accuracy:
    """{"mla": (S, P) floating tensor, "mqa", "gqa", "mha": (S,) each}, S ≥ 1, values in [0, 1]."""

    def __call__(self, v: object) -> bool:
        if not (isinstance(v, dict) and set(v) == {"mla", *SHARED} and len(v) == 4):
            return False
        mla = v["mla"]
        return (isinstance(mla, torch.Tensor) and mla.dim() == 2 and mla.shape[0] >= 1
                and _fractions(mla, (mla.shape[0], P))
                and all(_fractions(v[arch], (mla.shape[0],)) for arch in SHARED))

    def extra_values(self) -> list[tuple[str, object]]:
        good = _accuracy()
        return [("good", good), ("one-seed", _accuracy(1)), ("float32", _accuracy(3, torch.float32)),
                ("[]", []), ("missing-mha", {k: v for k, v in good.items() if k != "mha"}),
                ("extra-key", {**good, "gqa4": good["mha"]}),
                ("one-d-short", {**good, "mla": good["mla"][:, 1:]}),
                ("no-seeds", {k: v[:0] for k, v in good.items()}),
                ("mha-seeds-differ", {**good, "mha": good["mha"][:2]}),
                ("gqa-seeds-differ", {**good, "gqa": good["gqa"][:1]}),
                ("mla-rank-1", {**good, "mla": good["mla"][0]}),
                ("mha-rank-2", {**good, "mha": good["mha"][None]}),
                ("numpy", {**good, "mla": good["mla"].numpy()}),
                ("long", {**good, "mha": good["mha"].long()}),
                ("bool", {**good, "mla": good["mla"] > 0.5}),
                ("meta", {**good, "mla": torch.empty(3, P, device="meta")}),
                ("nan", {**good, "mla": good["mla"] * math.nan}),
                ("mqa-nan", {**good, "mqa": good["mqa"] * math.nan}),
                ("above-1", {**good, "mha": good["mha"] + 0.5}),
                ("negative", {**good, "mla": -good["mla"]})]


@dataclass(frozen=True)
class Numbers:
    """{"mla": a tuple (or list) of P ints ≥ 1, "mqa", "gqa", "mha": an int ≥ 1 each}."""

    def __call__(self, v: object) -> bool:
        if not (isinstance(v, dict) and set(v) == {"mla", *SHARED} and len(v) == 4):
            return False
        mla = v["mla"]
        return (all(_count(v[arch]) for arch in SHARED) and isinstance(mla, (tuple, list))
                and len(mla) == P and all(_count(n) for n in mla))

    def extra_values(self) -> list[tuple[str, object]]:
        good = _numbers()
        return [("good", good), ("list", {**good, "mla": list(good["mla"])}),
                ("numpy-ints", {**{k: np.int64(good[k]) for k in SHARED},
                                "mla": tuple(np.int32(n) for n in good["mla"])}),
                ("mla-more-than-mha", {**good, "mha": 4}),
                ("[]", []), ("missing-mla", {k: good[k] for k in SHARED}),
                ("extra-key", {**good, "gqa4": 32}),
                ("mha-0", {**good, "mha": 0}), ("mha-float", {**good, "mha": 64.0}),
                ("mqa-bool", {**good, "mqa": True}), ("gqa-tensor", {**good, "gqa": torch.tensor(16)}),
                ("mla-short", {**good, "mla": good["mla"][:-1]}),
                ("mla-tensor", {**good, "mla": torch.tensor(good["mla"])}),
                ("mla-zero", {**good, "mla": (0, 12, 16)}),
                ("mla-float", {**good, "mla": (8.0, 12, 16)}),
                ("mla-none", {**good, "mla": None})]


def _latent_right(fig: Figure, kw: dict) -> bool:
    d, accuracy, numbers = int(kw["latent_size"]), kw["accuracy"], kw["numbers"]
    if not (isinstance(fig, Figure) and fig.get_label() == "kv_economy.latent"
            and len(fig.axes) == 2):
        return False
    acc = {k: v.double() for k, v in accuracy.items()}
    nums = {k: int(numbers[k]) for k in SHARED} | {"mla": tuple(int(n) for n in numbers["mla"])}
    mla = acc["mla"].numpy()
    left, bars = fig.axes
    lines = {line.get_gid(): line for line in left.lines}
    i = LATENT_SIZES.index(d)
    seeds = len(mla)
    return ((seeds == 1 or all(np.allclose(lines[f"seed {s}"].get_ydata(), mla[s])
                               for s in range(seeds)))
            and f"seed {seeds if seeds > 1 else 0}" not in lines
            and np.allclose(lines["mla mean"].get_ydata(), mla.mean(0))
            and all(np.allclose(lines[f"{a} mean"].get_ydata(), acc[a].mean().item()) for a in SHARED)
            and list(lines["current"].get_xdata()) == [nums["mla"][i]]
            and [p.get_width() for p in bars.patches] == [nums["mha"], nums["gqa"], nums["mqa"],
                                                          nums["mla"][i]]
            and left.get_ylim() == (0.0, 1.02)
            and fig._suptitle.get_text() == latent_title_by_hand(d, acc, nums))


LATENT_RULES = {"latent_size": Choice(LATENT_SIZES), "accuracy": Accuracy(), "numbers": Numbers()}
LATENT = [
    Spec("helpers.widgets.kv_economy.draw_latent", call=kv.draw_latent,
         good=lambda: dict(latent_size=4, accuracy=_accuracy(), numbers=_numbers(), fig=None),
         rules={**LATENT_RULES, "fig": FIG},
         # MLA caching more than MHA reads "× more than MHA"; the title written out says "× less" only
         check=lambda out, kw: _latent_right(out, kw) if all(
             int(kw["numbers"]["mha"]) >= int(n) for n in kw["numbers"]["mla"])
         else "more than MHA)" in out._suptitle.get_text(),
         edge=[Case("foreign-fig", lambda kw: kw.update(fig=_foreign()), _latent_right),
               Case("other-view-fig", lambda kw: kw.update(fig=ww.draw_reach(3, 2)),
                    _latent_right),
               Case("own-fig-other-seeds", lambda kw: kw.update(
                   fig=kv.draw_latent(4, _accuracy(5), _numbers())), _latent_right),
               Case("numpy-int", lambda kw: kw.update(latent_size=np.int64(12)), _latent_right)]),
    Spec("helpers.widgets.kv_economy.latent_view", call=kv.latent_view,
         good=lambda: dict(accuracy=_accuracy(), numbers=_numbers(), latent_size=8),
         rules=LATENT_RULES,
         check=lambda out, kw: _is_view(out)
         and _control(out, "latent size d_c").value == kw["latent_size"]
         and (_latent_right(out.result, kw) if all(
             int(kw["numbers"]["mha"]) >= int(n) for n in kw["numbers"]["mla"])
             else "more than MHA)" in out.result._suptitle.get_text())),
]

SPECS: list[Spec] = STREAMING + LATENT + [
    Spec("helpers.widgets.kv_economy.demo_views", call=kv.demo_views, good=dict,
         check=lambda out, kw: list(out) == ["streaming", "latent"]
         and all(_is_view(v) for v in out.values())
         and _control(out["streaming"], "cache window R").value == 4
         and _control(out["latent"], "latent size d_c").value == 4),
]
