"""Re-run the seed claims of notebooks 08 and 10 over many seeds, and print the spreads (min–max)
that the notebooks quote as "over seeds 0–17 (`tools/seed_spreads.py`)".

    .venv/bin/python tools/seed_spreads.py --notebook 08 --seeds 0-17
    .venv/bin/python tools/seed_spreads.py --notebook 10 --seeds 0-17   # also: --seeds 0,3,5-7

It trains with the notebook's own code: the functions and settings are taken from the stored
notebook (its imports and the top-level definitions named below, via tests/notebook_code.py), and
the trainings are the notebook cells' calls with the seed changed (08: ``train_with_checkpoints``,
200 steps, a checkpoint every 10; 10: ``train_relative``, 120 steps at length 16, tested at 128).
Side by side, one per core (``run_all``). One line per seed, then the spreads; the numbers are
rounded as the notebooks quote them.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tests.notebook_code import notebook_namespace  # noqa: E402

NOTEBOOKS = {"08": "08_causal_attention_and_the_transformer_block.ipynb",
             "10": "10_rotary_position_embedding.ipynb"}


def parse_seeds(text: str) -> list[int]:
    """'0-17' → 0 … 17; '0,3,5-7' → 0, 3, 5, 6, 7."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"--seeds must name seeds ≥ 0, like 0-17 or 0,3; got {text!r}")
    return seeds


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
    print(f"\nspreads over seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} seeds):")
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
    print(f"\nspreads over seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} seeds):")
    print(f"  (c55) rope + PI names the token 6 back at L = 32: {spread([100 * x for x in v('pi32')], '.0f')} %")
    print(f"  (c56) length 128: t5 {spread(v('t5_128'))}, rope {spread(v('rope128'))}, t5 above rope in every "
          f"seed: {all(d['t5_128'] > d['rope128'] for d in rows.values())}")
    print(f"  (c56) rope ≥ 0.9 at every position up to 27 in every seed: {min(v('rope_min27')) >= 0.9} (lowest "
          f"{min(v('rope_min27')):.3f}) | mean on length 32: {spread(v('rope32'))} | first position below 0.9: "
          f"{spread(v('rope_first'), 'd')}")
    print(f"  (c43/c56) first position below 0.9: sinusoidal {spread(v('sin_first'), 'd')}, t5 {spread(v('t5_first'), 'd')}"
          f" (t5 at position 19: at most {max(d['t5_at'][1] for d in rows.values()):.3f}) | t5 at length 16 ≥ "
          f"{min(v('t5_16')):.3f}, at 128 ≥ {min(v('t5_128')):.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", choices=sorted(NOTEBOOKS), required=True)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-17"), help="like 0-17 or 0,3,5-7")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    (notebook_08 if args.notebook == "08" else notebook_10)(args.seeds)


if __name__ == "__main__":
    main()
