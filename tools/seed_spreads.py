"""Re-run the seed claims of notebooks 08, 10, 11 and 12 over many seeds, and print the spreads
(min–max) that the notebooks quote with this command.

    .venv/bin/python tools/seed_spreads.py --notebook 08 --seeds 0-17
    .venv/bin/python tools/seed_spreads.py --notebook 10 --seeds 0-17   # also: --seeds 0,3,5-7
    .venv/bin/python tools/seed_spreads.py --notebook 11 --seeds 0-6    # --steps 600: the MLA models only
    .venv/bin/python tools/seed_spreads.py --notebook 12 --seeds 0-5 --steps 1000 [--rewrite-share 0.25]

It trains with the notebook's own code: the functions and settings are taken from the stored
notebook (its imports and the top-level definitions named below, via tests/notebook_code.py), and
the trainings are the notebook cells' calls with the seed changed (08: ``train_with_checkpoints``,
200 steps, a checkpoint every 10; 10: ``train_relative``, 120 steps at length 16, tested at 128;
11: ``train_offsets`` (its seed 0 replaced), ``train_backcopy`` and ``recall_attributes``, 150 steps;
12: ``train_recall``, 200 steps, the delta and additive memories). --steps and --rewrite-share
replace those arguments of the notebook's ``train`` call. Side by side, one per core
(``run_all``). One line per seed, then the spreads; the numbers are rounded as the notebooks quote
them.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from helpers.device import cpu_threads  # noqa: E402
from tests.notebook_code import notebook_namespace  # noqa: E402

NOTEBOOKS = {"08": "08_causal_attention_and_the_transformer_block.ipynb",
             "10": "10_rotary_position_embedding.ipynb",
             "11": "11_windows_sinks_and_latent_attention.ipynb",
             "12": "12_linear_attention.ipynb"}


class _Train:
    """A notebook's ``streaming`` or ``recall`` module with some of ``train``'s arguments replaced
    (--steps, --rewrite-share): the notebook's training function then trains that way."""

    def __init__(self, module, **replaced):
        self._module, self._replaced = module, replaced

    def __getattr__(self, name):
        return getattr(self._module, name)

    def train(self, *args, **kwargs):
        return self._module.train(*args, **(kwargs | self._replaced))


def parse_seeds(text: str) -> list[int]:
    """'0-17' → 0 … 17; '0,3,5-7' → 0, 3, 5, 6, 7."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"--seeds must name seeds ≥ 0, like 0-17 or 0,3; got {text!r}")
    return seeds


def label(seeds: list[int]) -> str:
    """0–17 for a run of seeds, else the list: 0, 3, 5."""
    run = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}–{seeds[-1]}" if run and len(seeds) > 1 else ", ".join(map(str, seeds))


def spread(values, fmt=".2f") -> str:
    values = list(values)
    return f"{min(values):{fmt}} to {max(values):{fmt}}"


def notebook_08(seeds: list[int]) -> None:
    ns = notebook_namespace(NOTEBOOKS["08"], {"device", "task", "halfway", "head_kinds", "without_attention",
                                              "without_head", "copying_score", "alone_top1"})
    induction, run_all, cpu_threads, task = ns["induction"], ns["run_all"], ns["cpu_threads"], ns["task"]
    runs = run_all([partial(induction.train_with_checkpoints, task, steps=200, every=10, seed=s) for s in seeds])
    rows = {}
    for s, r in zip(seeds, runs):
        c = {k: r.steps.index(k) for k in (0, 10, 40, 50, 60, 90, 160)}
        loss = r.eval_loss
        ind2, prev1 = r.induction[:, 1].mean(-1), r.previous_token[:, 0].mean(-1)  # (C,) each
        marks = {n: ns["halfway"](v, r.steps) for n, v in (("loss", loss), ("prev", prev1), ("ind", ind2))}
        kinds, _ = ns["head_kinds"](r)
        ev = r.eval_batch
        with torch.no_grad(), cpu_threads(1):
            def acc(model):
                return induction.copy_accuracy(model(ev.tokens), ev)
            no_head = [[acc(ns["without_head"](r.model, l, hh)) for hh in (1, 2)] for l in (1, 2)]
            top = ns["alone_top1"](r.model, ev)
            copying = [ns["copying_score"](r.model, l, hh) for l in (1, 2) for hh in (1, 2)]
            rows[s] = dict(
                fell50=float(loss[0] - loss[c[50]]), loss60=float(loss[c[60]]),
                drop=next(st for st, v in zip(r.steps, loss) if v < 0.5),
                ind2=[float(ind2[c[k]]) for k in (0, 40, 90)], gain_ind=float(ind2[c[90]] - ind2[c[40]]),
                ratio=float(ind2[c[90]] / ind2[c[40]]), gain_prev=float(prev1[c[90]] - prev1[c[40]]),
                flat_prev=float(prev1[c[40]:c[90] + 1].max() - prev1[c[40]:c[90] + 1].min()),
                up_from_10=bool((ind2[c[10] + 1:c[90] + 1] > ind2[c[10]:c[90]]).all()),
                dip_0_10=float(ind2[c[10]] - ind2[c[0]]), marks=marks, kinds=kinds,
                final_ind=r.induction[-1].flatten().tolist(),
                acc=acc(r.model), no_l1=acc(ns["without_attention"](r.model, 1)),
                no_l2=acc(ns["without_attention"](r.model, 2)), no_head=no_head, top=top, copying=copying)
        d = rows[s]
        print(f"seed {s}: loss fell {d['fell50']:.2f} in 50 steps, {d['loss60']:.2f} at step 60, first < 0.5 at "
              f"step {d['drop']} | layer-2 induction at 0/40/90 {' / '.join(f'{v:.2f}' for v in d['ind2'])}, gain "
              f"{d['gain_ind']:.2f} (× {d['ratio']:.2f}), up at every checkpoint from step 10: {d['up_from_10']}, "
              f"step 0 → 10 {d['dip_0_10']:+.3f} | layer-1 previous-token gain 40 → 90 {d['gain_prev']:+.2f}, "
              f"range {d['flat_prev']:.3f} | halfway {marks}")
        print(f"  kinds {[k for k in kinds.values()]} | final induction {[round(v, 2) for v in d['final_ind']]} | "
              f"accuracy {d['acc']:.2f}, without layer 1 {d['no_l1']:.2f}, without layer 2 {d['no_l2']:.3f}, "
              f"without one head {[[round(v, 3) for v in row] for row in no_head]} | layer-2 alone top-1 "
              f"{[round(t, 3) for t in top]} | copying scores {[round(v, 2) for v in copying]}")
    induction_heads = {s: [hh for hh in (1, 2) if d["kinds"][2, hh] == "induction head"] for s, d in rows.items()}
    usual = {s for s, d in rows.items() if list(d["kinds"].values()) == ["previous-token head"] * 2 + ["induction head"] * 2}
    full = {s: [hh for hh in (1, 2)] == induction_heads[s] for s in rows}
    print(f"\nspreads over seeds {label(seeds)} ({len(seeds)} seeds):")
    print(f"  (c36) loss fell in the first 50 steps: {spread(d['fell50'] for d in rows.values())} | at step 60: "
          f"{spread(d['loss60'] for d in rows.values())} | first below 0.5: steps "
          f"{spread((d['drop'] for d in rows.values()), 'd')}")
    print(f"  (c42) layer-1 score moves by {spread((d['gain_prev'] for d in rows.values()), '+.2f')} from step 40 to 90; "
          f"stays within 0.03 in seeds {[s for s, d in rows.items() if d['flat_prev'] < 0.03]} | layer-2 gains "
          f"{spread(d['gain_ind'] for d in rows.values())}, ratio ≥ {min(d['ratio'] for d in rows.values()):.2f}, "
          f"more than twice layer 1's gain in every seed: "
          f"{all(d['gain_ind'] > 2 * d['gain_prev'] for d in rows.values())} | up at every checkpoint from step 10 in "
          f"every seed: {all(d['up_from_10'] for d in rows.values())}; dips from step 0 to 10 in seeds "
          f"{[s for s, d in rows.items() if d['dip_0_10'] < 0]} "
          f"({spread((d['dip_0_10'] for d in rows.values() if d['dip_0_10'] < 0), '.3f') if any(d['dip_0_10'] < 0 for d in rows.values()) else 'none'})")
    gaps = [abs(d["marks"]["prev"] - d["marks"]["ind"]) for d in rows.values()]
    leads = [min(d["marks"]["prev"], d["marks"]["ind"]) - d["marks"]["loss"] for d in rows.values()]
    print(f"  (c44) the two scores get halfway at most {max(gaps)} steps apart; the loss {spread(leads, 'd')} "
          f"steps before the earlier of them")
    print(f"  (c46) two previous-token heads in layer 1 and two induction heads in layer 2 in "
          f"{len(usual)} of {len(rows)} seeds; not in seeds {sorted(set(rows) - usual)}")
    ind_top = [d["top"][hh - 1] for s, d in rows.items() for hh in induction_heads[s]]
    ind_copy = [d["copying"][2 + hh - 1] for s, d in rows.items() for hh in induction_heads[s]]
    print(f"  (c52) alone top-1 of every layer-2 induction head: {spread([100 * t for t in ind_top], '.0f')} % | copying score of every "
          f"induction head above 0.9: {all(v > 0.9 for v in ind_copy)} (lowest {min(ind_copy):.2f})")
    heads_ok = [s for s in rows if full[s]]
    print(f"  (c64) accuracy without one head, seeds with two layer-2 induction heads {heads_ok}: "
          f"{spread(v for s in heads_ok for row in rows[s]['no_head'] for v in row)}")
    for s in sorted(set(rows) - set(heads_ok)):
        d = rows[s]
        print(f"        seed {s}: without each layer-2 head {[round(v, 3) for v in d['no_head'][1]]}, without "
              f"layer 2 {d['no_l2']:.3f}; layer-2 final induction scores {[round(v, 2) for v in d['final_ind'][2:]]}, "
              f"copying {[round(v, 2) for v in d['copying'][2:]]}, alone top-1 {[round(t, 2) for t in d['top']]}")


def notebook_10(seeds: list[int]) -> None:
    ns = notebook_namespace(NOTEBOOKS["10"], {"device", "train_length", "test_length", "train_relative", "lengths",
                                              "test_tokens", "first_below", "interpolated", "reads"})
    run_all, relative_task, cpu_threads = ns["run_all"], ns["relative_task"], ns["cpu_threads"]
    kinds = ["sinusoidal", "rope", "alibi", "t5"]
    models = run_all({(p, s): partial(ns["train_relative"], p, s) for p in kinds for s in seeds})
    accuracy = run_all({key: partial(relative_task.accuracy_by_position, model, ns["test_length"])
                        for key, model in models.items()})  # (125,) each: positions 3 … 127
    ns["accuracy"] = accuracy  # what the notebook's first_below reads
    first_below = ns["first_below"]

    def mean_up_to(key, length):  # the notebook's by_length
        return accuracy[key][: length - 3].mean().item()

    rows = {}
    with cpu_threads(1), torch.no_grad():
        for s in seeds:
            rope = accuracy["rope", s]
            reads = {}
            for L, back in ((32, 6), (128, 24)):
                tokens = ns["test_tokens"][:64, :L].to(ns["device"])
                predictions = ns["interpolated"](models["rope", s], L)(tokens).argmax(dim=-1)
                reads[L] = ns["reads"](predictions, tokens, back)
            rows[s] = dict(rope_first=first_below("rope", s, 0.9), rope_min27=rope[: 27 - 2].min().item(),
                           rope32=mean_up_to(("rope", s), 32), rope128=mean_up_to(("rope", s), 128),
                           rope_far=rope[61:].max().item(), sin_first=first_below("sinusoidal", s, 0.9),
                           sin128=mean_up_to(("sinusoidal", s), 128), t5_16=mean_up_to(("t5", s), 16),
                           t5_first=first_below("t5", s, 0.9), t5_at=accuracy["t5", s][15:17].tolist(),
                           t5_128=mean_up_to(("t5", s), 128), alibi128=mean_up_to(("alibi", s), 128),
                           pi32=reads[32], pi128=reads[128])
            d = rows[s]
            print(f"seed {s}: rope first below 0.9 at position {d['rope_first']}, lowest at positions 3 … 27 "
                  f"{d['rope_min27']:.3f}, length 32 {d['rope32']:.3f}, length 128 {d['rope128']:.2f}, highest at "
                  f"64 … 127 {d['rope_far']:.2f} | sinusoidal first below 0.9 at {d['sin_first']}, length 128 "
                  f"{d['sin128']:.2f} | t5 length 16 {d['t5_16']:.3f}, first below 0.9 at {d['t5_first']} (positions "
                  f"18, 19: {d['t5_at'][0]:.3f}, {d['t5_at'][1]:.3f}), length 128 {d['t5_128']:.2f} | alibi length 128 "
                  f"{d['alibi128']:.2f} | rope + PI: 6 back at L = 32 {d['pi32']:.2f}, 24 back at L = 128 {d['pi128']:.2f}")
    v = lambda name: [d[name] for d in rows.values()]  # noqa: E731
    print(f"\nspreads over seeds {label(seeds)} ({len(seeds)} seeds):")
    print(f"  (c55) rope + PI names the token 6 back at L = 32: {spread([100 * x for x in v('pi32')], '.0f')} %")
    print(f"  (c56) length 128: t5 {spread(v('t5_128'))}, rope {spread(v('rope128'))}, t5 above rope in every "
          f"seed: {all(d['t5_128'] > d['rope128'] for d in rows.values())}")
    print(f"  (c56) rope ≥ 0.9 at every position up to 27 in every seed: {min(v('rope_min27')) >= 0.9} (lowest "
          f"{min(v('rope_min27')):.3f}) | mean on length 32: {spread(v('rope32'))} | first position below 0.9: "
          f"{spread(v('rope_first'), 'd')}")
    print(f"  (c43/c56) first position below 0.9: sinusoidal {spread(v('sin_first'), 'd')}, t5 {spread(v('t5_first'), 'd')}"
          f" (t5 at position 19: at most {max(d['t5_at'][1] for d in rows.values()):.3f}) | t5 at length 16 ≥ "
          f"{min(v('t5_16')):.3f}, at 128 ≥ {min(v('t5_128')):.2f}")


def notebook_11(seeds: list[int], steps: int | None = None) -> None:
    """The sinks part (the backcopy models, 150 steps, as in the notebook) and the MLA part (150 steps);
    with ``steps``, only the MLA part, trained that many steps."""
    ns = notebook_namespace(NOTEBOOKS["11"], {
        "task", "TRAIN_LENGTH", "VARIANTS", "train_backcopy", "by_query", "probe", "uniform", "head_output_norms",
        "RECENT", "stream_tokens", "cache_losses", "stream_loss", "PAST", "cost", "signed", "INSIDE",
        "gate_by_query", "LATENT_SIZES", "attributes_sample", "mla_tokens", "ARCHITECTURES", "recall_attributes"})
    if steps is None:
        offsets_11(seeds)
        sinks_11(ns, seeds)
    mla_11(ns, seeds, steps)


class _Seeded:
    """``torch`` and ``streaming`` for the notebook's ``train_offsets``, which seeds with 0: the seed
    replaced by ``seed`` (torch.manual_seed(0) and streaming.train(..., seed=0))."""

    def __init__(self, module, seed):
        self._module, self._seed = module, seed

    def __getattr__(self, name):
        return getattr(self._module, name)

    def manual_seed(self, seed):
        return self._module.manual_seed(self._seed)

    def train(self, *args, **kwargs):
        return self._module.train(*args, **(kwargs | {"seed": self._seed}))


def offsets_11(seeds: list[int]) -> None:
    """The window-reach models (W = 3, L = 1 and 2 layers): accuracy by offset 1 … 7, one training per
    depth and seed (the notebook trains seed 0)."""
    ns = notebook_namespace(NOTEBOOKS["11"], {"W", "offsets_task", "test_tokens", "untrained_offsets", "train_offsets"})
    W, OFFSETS, VOCAB, LENGTH, streaming = ns["W"], ns["OFFSETS"], ns["VOCAB"], ns["LENGTH"], ns["streaming"]

    def seeded(L, seed):
        ns["torch"], ns["streaming"] = _Seeded(torch, seed), _Seeded(streaming, seed)
        try:
            model = ns["train_offsets"](L)
        finally:
            ns["torch"], ns["streaming"] = torch, streaming
        with torch.no_grad():  # the accuracy by offset, as the notebook's cell computes it
            guesses = model(ns["test_tokens"]).view(256, LENGTH, OFFSETS, VOCAB).argmax(dim=-1)  # (B, T, O)
        seen = ns["test_targets"] != streaming.IGNORE  # (B, T, O)
        return (((guesses == ns["test_targets"]) & seen).sum(dim=(0, 1)) / seen.sum(dim=(0, 1))).tolist()  # (O,)

    acc = ns["run_all"]({(L, s): partial(seeded, L, s) for L in (1, 2) for s in seeds})
    print("window reach (W = 3, 150 steps), accuracy by offset 1 … 7:")
    for s in seeds:
        print(f"seed {s}: " + " | ".join(f"L = {L}: " + " ".join(f"{a:.2f}" for a in acc[L, s]) for L in (1, 2)))
    within = [a for (L, s), row in acc.items() for a in row[:L * (W - 1)]]
    beyond = [a for (L, s), row in acc.items() for a in row[L * (W - 1):]]
    print(f"  (c14) over seeds {label(seeds)}: within reach (offsets ≤ L·(W − 1)) ≥ {min(within):.2f}; "
          f"beyond {spread(beyond)}\n")


def sinks_11(ns: dict, seeds: list[int]) -> None:
    run_all, task, RECENT, PAST = ns["run_all"], ns["task"], ns["RECENT"], ns["PAST"]
    cost, signed, INSIDE = ns["cost"], ns["signed"], ns["INSIDE"]
    models = run_all({(v, s): partial(ns["train_backcopy"], v, s) for v in ns["VARIANTS"] for s in seeds})
    computed = run_all({(v, s, R): partial(ns["cache_losses"], v, m, R) for (v, s), m in models.items() for R in RECENT})
    ns["computed"] = computed  # what the notebook's cost reads
    original = run_all({(s, R): partial(ns["stream_loss"], models["softmax", s],
                                        models["softmax", s].new_cache(window=R, sinks=1, rope_positions="original"))
                        for s in seeds for R in (4, 16)})
    rows = {}
    print(f"sinks (150 steps; even share of the weight on BOS {ns['uniform']:.3f}; costs of evicting BOS = window "
          f"only − sinks + window, mean loss, past position {ns['TRAIN_LENGTH']} unless said):")
    with cpu_threads(1), torch.no_grad():
        for s in seeds:
            split = {v: ns["by_query"](models[v, s], ns["probe"]) for v in ns["VARIANTS"]}
            head = int(split["softmax"]["bos"].argmax())
            norms = ns["head_output_norms"](models["softmax", s], head)
            idle = int(split["sink logit 3"]["sum"].argmin())
            c4 = computed["softmax", s, 4]
            d = dict(bos=split["softmax"]["bos"].tolist(),
                     ratio=(norms[task.bos_token] / norms[:task.vocab_size].mean()).item(),
                     inside=[cost("softmax", s, R, INSIDE(R)) for R in RECENT],
                     past=[cost("softmax", s, R, PAST) for R in RECENT],
                     dense=c4["dense"][PAST].nanmean().item(), kept=c4["sinks + window"][PAST].nanmean().item(),
                     orig=[abs(original[s, R][PAST].nanmean()
                               - computed["softmax", s, R]["sinks + window"][PAST].nanmean()).item() for R in (4, 16)],
                     sum3=split["sink logit 3"]["sum"][idle].item(),
                     rise3=(split["sink logit 3"]["sum after trigger"][idle] - split["sink logit 3"]["sum"][idle]).item(),
                     bos3=split["sink logit 3"]["bos"].max().item(),
                     cost3=[cost("sink logit 3", s, R, PAST) for R in RECENT],
                     gate=ns["gate_by_query"](models["gated", s], ns["probe"], int(split["gated"]["bos"].argmax())),
                     gated=[cost("gated", s, R, PAST) for R in RECENT], bos_gated=split["gated"]["bos"].max().item())
            rows[s] = d
            costs = lambda xs: ", ".join(f"R = {R} {signed(x)}" for R, x in zip(RECENT, xs))  # noqa: E731
            print(f"seed {s}: softmax BOS after an ordinary token {d['bos'][0]:.2f} / {d['bos'][1]:.2f}, BOS's value "
                  f"{d['ratio']:.2f}× the others' | cost inside ({costs(d['inside'])}), past ({costs(d['past'])}) | "
                  f"R = 4 past {ns['TRAIN_LENGTH']}: dense {d['dense']:.2f}, sinks + window {d['kept']:.2f}, original "
                  f"positions differ by {d['orig'][0]:.3f} (R = 16: {d['orig'][1]:.3f})")
            print(f"  sink logit 3: idle head's sum {d['sum3']:.2f}, {d['rise3']:+.2f} after a trigger, BOS ≤ "
                  f"{d['bos3']:.2f}, cost ({costs(d['cost3'])}) | gated: gate {d['gate'][0]:.2f} | {d['gate'][1]:.2f}, "
                  f"BOS ≤ {d['bos_gated']:.2f}, cost ({costs(d['gated'])})")
    v = lambda name, i=None: [d[name] if i is None else d[name][i] for d in rows.values()]  # noqa: E731
    at = {R: i for i, R in enumerate(RECENT)}
    print(f"\nspreads over seeds {label(seeds)} ({len(seeds)} seeds):")
    print(f"  (c17) softmax, weight on BOS of the head that parks most: {spread(max(b) for b in v('bos'))} | BOS's value: "
          f"{spread(v('ratio'))}, smaller than the others' in seeds {[s for s, d in rows.items() if d['ratio'] < 1]}")
    falls = {s: round(d["past"][0] / d["past"][-1], 1) if d["past"][-1] > 0 else None for s, d in rows.items()}
    print(f"  (c21) softmax cost past: R = 2 → 16 falls by the factor {falls} (seed: factor); "
          f"at R = 16 {spread(v('past', -1))} | at R = 4, inside {spread(v('inside', at[4]))}, past "
          f"{spread(v('past', at[4]))}; at R = 2 and 4 past {spread(v('past', 0) + v('past', at[4]))}")
    print(f"  (c21) R = 4 past {ns['TRAIN_LENGTH']}: dense {spread(v('dense'))}, sinks + window {spread(v('kept'))}, "
          f"dense worse in every seed: {all(d['dense'] > d['kept'] for d in rows.values())} | original positions "
          f"within 0.01 at R = 4 and 16 in every seed: {max(max(d['orig']) for d in rows.values()) < 0.01}")
    print(f"  (c26) sink logit 3: idle head's sum {spread(v('sum3'))}, rise after a trigger {spread(v('rise3'))}, "
          f"largest cost {max(max(c) for c in v('cost3')):.2f}, BOS ≤ {spread(v('bos3'))}")
    print(f"  (c28) gated: gate {spread(d['gate'][0] for d in rows.values())} | "
          f"{spread(d['gate'][1] for d in rows.values())}, largest cost {max(max(c) for c in v('gated')):.2f} "
          f"(softmax at R = 2 and 4: {spread(v('past', 0) + v('past', at[4]))})")


def mla_11(ns: dict, seeds: list[int], steps: int | None) -> None:
    run_all, mla_steps = ns["run_all"], steps or 150
    if steps:
        ns["streaming"] = _Train(ns["streaming"], steps=steps)  # what recall_attributes trains with
    runs = [("mla", d_c) for d_c in ns["LATENT_SIZES"]] + [("mqa", None), ("gqa", None), ("mha", None)]
    results = run_all({(arch, d_c, s): partial(ns["recall_attributes"], arch, d_c, s) for arch, d_c in runs for s in seeds})
    names = [f"MLA d_c = {d_c}" if arch == "mla" else arch.upper() for arch, d_c in runs]
    print(f"\nMLA ({mla_steps} steps), accuracy:")
    for s in seeds:
        print(f"seed {s}: " + ", ".join(f"{n} {results[(*run, s)][0]:.2f}" for n, run in zip(names, runs)))
    print(f"  (c46) over seeds {label(seeds)}: " + ", ".join(
        f"{n} {spread(results[(*run, s)][0] for s in seeds)}" for n, run in zip(names, runs)))


def notebook_12(seeds: list[int], steps: int | None = None, rewrite_share: float | None = None) -> None:
    """The delta and additive memories (with a quarter of the keys rewritten in training: also decay and
    softmax), trained by the notebook's ``train_recall``: 200 steps, or ``steps``."""
    ns = notebook_namespace(NOTEBOOKS["12"], {"size", "PAIR_COUNTS", "train_recall"})
    replaced = {k: v for k, v in (("steps", steps), ("rewrite_share", rewrite_share)) if v is not None}
    if replaced:
        ns["recall"] = _Train(ns["recall"], **replaced)  # what train_recall trains with
    kinds = ("delta", "additive") + (("decay", "softmax") if rewrite_share else ())
    results = ns["run_all"]({(k, s): partial(ns["train_recall"], k, s) for k in kinds for s in seeds})
    counts = ns["PAIR_COUNTS"]
    rows = {}
    print(f"recall ({steps or 200} steps, rewrite share {rewrite_share or 0}; rewritten keys: N = 16 with 4 rewritten):")
    for s in seeds:
        by_n = {k: torch.tensor([a.mean().item() for a in results[k, s][1]]) for k in ("delta", "additive")}
        diff = by_n["delta"] - by_n["additive"]  # (len(PAIR_COUNTS),)
        d = dict(beta=results["delta", s][0].beta.item(), mean=diff.mean().item(), most=diff.max().item(),
                 at64=diff[counts.index(64)].item(), **{f"{k} {w}": results[k, s][2][w] for k in kinds
                                                         for w in ("rewritten", "once")})
        rows[s] = d
        print(f"seed {s}: delta's β {d['beta']:.3f} | delta − additive, mean over N {d['mean']:+.4f}, largest "
              f"{d['most']:+.3f}, at N = 64 {d['at64']:+.3f} | rewritten keys " + ", ".join(
                  f"{k} {d[k + ' rewritten']:.2f}" for k in kinds) + f"; keys written once: delta {d['delta once']:.2f}")
    v = lambda name: [d[name] for d in rows.values()]  # noqa: E731
    print(f"\nspreads over seeds {label(seeds)} ({len(seeds)} seeds):")
    print(f"  (c36) β {spread(v('beta'), '.3f')} | delta − additive, mean over N {spread(v('mean'), '.4f')}, at any N at "
          f"most {max(v('most')):.3f}; at N = 64 below in {sum(x < 0 for x in v('at64'))} of {len(seeds)} seeds")
    print(f"  (c39) rewritten keys: " + ", ".join(f"{k} {spread(v(k + ' rewritten'))}" for k in kinds)
          + f" | keys written once: delta {spread(v('delta once'))}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", choices=sorted(NOTEBOOKS), required=True)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-17"), help="like 0-17 or 0,3,5-7")
    parser.add_argument("--steps", type=int, default=None,
                        help="notebook 11: only the MLA part, trained this many steps instead of the notebook's 150; "
                             "notebook 12: this many steps instead of 200")
    parser.add_argument("--rewrite-share", type=float, default=None,
                        help="notebook 12: train with this share of the keys written again (recall.train's rewrite_share)")
    args = parser.parse_args(argv)
    if args.notebook in ("08", "10") and (args.steps, args.rewrite_share) != (None, None):
        parser.error(f"--steps and --rewrite-share are for notebooks 11 and 12, not {args.notebook}")
    if args.notebook == "11" and args.rewrite_share is not None:
        parser.error("--rewrite-share is for notebook 12")
    torch.set_num_threads(1)
    if args.notebook == "11":
        notebook_11(args.seeds, args.steps)
    elif args.notebook == "12":
        notebook_12(args.seeds, args.steps, args.rewrite_share)
    else:
        (notebook_08 if args.notebook == "08" else notebook_10)(args.seeds)


if __name__ == "__main__":
    main()
