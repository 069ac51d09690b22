"""decoder.js's ``decoder_forward`` in headless Chromium against the series' own models in
PyTorch (``helpers/widgets/live/decoder.py``'s ``reference``: ``DecoderLM`` / ``TinyDecoder``
and their attention_weights, float32): every logit and every attention weight of >= 100 random
token sequences per configuration, rtol 1e-5, atol 1e-6.

Configurations: (a) notebook 08's model (``induction.make_model``, trained as the notebook
trains it), (b) a DecoderLM with a learnt sink logit per head, (c) DecoderLMs with a sliding
window (one for every layer, and one per layer), and the cache policies of notebook 11 (a window
that evicts the first token, a sink kept beside it, RoPE positions in the cache) on a DecoderLM
and on TinyDecoders. The page is about:blank with runtime.js and decoder.js as a script: no server,
no network.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import induction
from helpers.streaming import TinyDecoder
from helpers.transformer import DecoderLM
from helpers.widgets.live.decoder import export_decoder, reference

pytestmark = pytest.mark.browser

DECODER_JS = Path(__file__).resolve().parents[2] / "helpers" / "widgets" / "live" / "decoder.js"
RUNTIME_JS = DECODER_JS.with_name("runtime.js")
RTOL, ATOL = 1e-5, 1e-6
# The float32 model's logits are themselves off from the same model in float64 by up to 9.2e-6
# (measured: the trained 08 model, 100 sequences of 16 tokens; its weights by up to 1.1e-6,
# within ATOL + RTOL·w): page against float32 logits is held to this, page against float64
# to ATOL.
F32_LOGITS = 2e-5
COUNT = 100  # random sequences per configuration

# {"shape", "f32"} → {shape, data: Float32Array}, as runtime.js hands the model to an engine
REVIVE = """
window.revive = (o) => {
  if (Array.isArray(o)) return o.map(revive);
  if (o && typeof o === "object") {
    if ("f32" in o) {
      const bytes = Uint8Array.from(atob(o.f32), (c) => c.charCodeAt(0));
      return {shape: o.shape, data: new Float32Array(bytes.buffer)};
    }
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, revive(v)]));
  }
  return o;
};
"""


@pytest.fixture(scope="module")
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    pg.route("**/*", lambda route: route.abort())  # nothing leaves the page
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.add_script_tag(content=RUNTIME_JS.read_text(encoding="utf-8")  # liveLinear
                      + DECODER_JS.read_text(encoding="utf-8") + REVIVE)
    assert not errors, errors
    try:
        yield pg
    finally:
        context.close()


def run_js(page, model, sequences: list[list[int]], cache: dict | None) -> list[dict]:
    """decoder_forward(model, tokens, {cache}) in the page, for every sequence."""
    return page.evaluate(
        """([model, sequences, cache]) => {
             const m = revive(JSON.parse(model));
             return sequences.map((t) => decoder_forward(m, t, cache ? {cache} : {}));
           }""", [json.dumps(export_decoder(model)), sequences, cache])


def random_sequences(model, count: int, max_len: int, seed: int) -> list[list[int]]:
    """``count`` sequences of random ids, lengths 1 … max_len (max_len among them)."""
    rng = np.random.default_rng(seed)
    lengths = [max_len, 1, *rng.integers(1, max_len + 1, count - 2).tolist()]
    return [rng.integers(0, model.vocab_size, n).tolist() for n in lengths]


def in_float64(model):
    """A float64 copy of ``model`` computing from its float32 weights (the sinusoidal table too:
    the float32 one the page gets, widened), the same helper modules."""
    wide = copy.deepcopy(model).double()
    if getattr(model, "P", None) is not None and model.P.numel():
        wide.P = model.P.to(torch.float64)
    return wide


def compare(page, model, count: int, max_len: int, seed: int, cache: dict | None = None
            ) -> dict[str, float]:
    """Every logit and weight of ``count`` sequences, page against ``reference`` run on the
    float64 copy (rtol 1e-5, atol 1e-6: measured about 1e-13) and on the float32 model itself
    (weights at rtol 1e-5, atol 1e-6; logits at atol F32_LOGITS, the float32 model's own
    rounding). Returns the largest absolute differences."""
    sequences = random_sequences(model, count, max_len, seed)
    wide = in_float64(model)
    worst = {f"{key} {bits}": 0.0 for key in ("logits", "weights") for bits in ("f64", "f32")}
    for tokens, got in zip(sequences, run_js(page, model, sequences, cache)):
        for bits, oracle in (("f64", wide), ("f32", model)):
            want = reference(oracle, tokens, cache)
            for key in ("logits", "weights"):
                a, b = np.asarray(got[key], dtype=np.float64), want[key].astype(np.float64)
                assert a.shape == b.shape, (key, tokens)
                atol = F32_LOGITS if (bits, key) == ("f32", "logits") else ATOL
                np.testing.assert_allclose(a, b, rtol=RTOL, atol=atol, err_msg=(
                    f"{key} of tokens {tokens} (cache {cache}) against the {bits} model"))
                worst[f"{key} {bits}"] = max(worst[f"{key} {bits}"], float(np.abs(a - b).max()))
    return worst


@functools.lru_cache(maxsize=1)
def trained_08() -> DecoderLM:
    """Notebook 08's model, seed 0, trained as the notebook trains it (200 steps, ~2 s)."""
    return induction.train_with_checkpoints(induction.CopyTask(), steps=200, every=200).model


def seeded(make, seed: int):
    """``make()`` under torch seed ``seed`` (the global state restored), in eval mode, its sink
    logits (if any) drawn from N(0, 1.5²) so that they matter."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make().eval()
        with torch.no_grad():
            for block in model.blocks:
                if block.attention.sink:
                    block.attention.sink_logits.normal_(0.0, 1.5)
    return model


CONFIGS = {
    "08 trained": trained_08,
    "08 untrained": lambda: induction.make_model(induction.CopyTask()).eval(),
    "sink": lambda: seeded(lambda: DecoderLM(16, 32, 4, 2, max_len=24, sink=True), 1),
    "window 3": lambda: seeded(lambda: DecoderLM(16, 32, 2, 2, max_len=24, window=3), 2),
    "windows [4, None, 2]": lambda: seeded(
        lambda: DecoderLM(12, 32, 2, 3, ffn_hiddens=48, max_len=20, window=[4, None, 2]), 3),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_forward_matches_pytorch(page, name):
    model = CONFIGS[name]()
    max_len = model.max_len
    worst = compare(page, model, COUNT, max_len, seed=len(name))
    print(f"{name}: largest |page − PyTorch|",
          ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))


def test_the_sink_takes_weight(page):
    """With a sink logit a row sums to less than 1 (the rest goes to nothing), as PyTorch's."""
    model = CONFIGS["sink"]()
    got = run_js(page, model, [[1, 2, 3, 4, 5]], None)[0]
    sums = np.asarray(got["weights"]).sum(-1)  # (L, H, T)
    assert (sums < 1 - 1e-3).all()
    np.testing.assert_allclose(sums, reference(model, [1, 2, 3, 4, 5])["weights"].sum(-1),
                               rtol=RTOL, atol=ATOL)


def test_the_window_hides_old_keys(page):
    """Layer windows [4, None, 2]: layer 1 gives no weight 4 or more positions back, layer 3
    none 2 or more back, layer 2 sees everything."""
    model = CONFIGS["windows [4, None, 2]"]()
    w = np.asarray(run_js(page, model, [list(range(12))], None)[0]["weights"])  # (L, H, T, T)
    back = np.arange(12)[:, None] - np.arange(12)[None, :]  # (Q, K): m − p
    assert (w[0][:, back >= 4] == 0).all() and (w[0][:, (back >= 0) & (back < 4)] > 0).all()
    assert (w[2][:, back >= 2] == 0).all()
    assert (w[1][:, back >= 0] > 0).all()


# Notebook 11's caches: the tokens streamed one at a time through new_cache(window, sinks,
# rope_positions): "window only" evicts the first token once t >= W, "sinks + window" keeps it.
POLICIES = {
    "window only": {"window": 4},
    "sinks + window": {"window": 4, "sinks": 1},
    "sinks + window, positions in the cache": {"window": 4, "sinks": 1, "rope_positions": "cache"},
}
CACHED = {
    "DecoderLM sinusoidal": trained_08,
    "DecoderLM rope": lambda: seeded(
        lambda: DecoderLM(16, 32, 2, 2, max_len=24, positional="rope"), 4),
    "TinyDecoder sink": lambda: seeded(
        lambda: TinyDecoder(17, 32, 2, 1, sink=True, sink_init=3.0), 5),
    "TinyDecoder gate, GQA, FFN, window": lambda: seeded(
        lambda: TinyDecoder(17, 32, 4, 2, gate=True, ffn=True, num_kv_heads=2, window=6), 6),
}


@pytest.mark.parametrize(("name", "policy"), [
    (name, policy) for name in CACHED for policy in POLICIES
    if not (name.endswith("sinusoidal") and policy.endswith("in the cache"))])  # (RoPE only)
def test_cache_policies_match_streaming(page, name, policy):
    model = CACHED[name]()
    cache = POLICIES[policy]
    length = 16 if name.endswith("sinusoidal") else 30  # past the window: tokens are evicted
    worst = compare(page, model, 40, length, seed=len(name) + len(policy), cache=cache)
    print(f"{name}, {policy}: largest |page − PyTorch|",
          ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))


def test_evicting_the_first_token(page):
    """Window only: from t = W on no query gives the first token any weight, and the logits
    there differ from the dense model's; sinks + window: every query keeps weight on it."""
    model = CACHED["TinyDecoder sink"]()
    tokens = [16, *range(12)]  # BOS first, as in notebook 11
    dense, window, sinks = (run_js(page, model, [tokens], c)[0] for c in (
        None, POLICIES["window only"], POLICIES["sinks + window"]))
    w = np.asarray(window["weights"])  # (L, H, T, T)
    assert (w[..., 4:, 0] == 0).all() and (w[..., :4, 0] > 0).all()
    assert (np.asarray(sinks["weights"])[..., 0] > 0).all()
    np.testing.assert_allclose(window["logits"][:4], dense["logits"][:4], rtol=RTOL, atol=ATOL)
    assert not np.allclose(window["logits"][4:], dense["logits"][4:], rtol=RTOL, atol=ATOL)


def test_refusals(page):
    """Tokens out of the vocabulary, none, or past max_len, and a bad policy: an Error."""
    model = json.dumps(export_decoder(CONFIGS["08 untrained"]()))
    messages = page.evaluate(
        """(model) => {
             const m = revive(JSON.parse(model));
             const tries = [[[16], {}], [[], {}], [[-1], {}], [[1.5], {}], [Array(17).fill(1), {}],
                            [Array(17).fill(1), {cache: {window: 4}}], [[1], {cache: {window: 0}}],
                            [[1], {cache: {window: 2, rope_positions: "cache"}}]];
             return tries.map(([t, o]) => { try { decoder_forward(m, t, o); return "no error"; }
                                            catch (e) { return e.message; } });
           }""", model)
    assert messages == [
        "tokens must be ids in [0, 16), got 16", "tokens must hold at least one token",
        "tokens must be ids in [0, 16), got -1", "tokens must be ids in [0, 16), got 1.5",
        "sequence length must be at most max_len=16, got 17",
        "sequence length must be at most max_len=16, got 17",
        "cache.window must be an int >= 1, got 0",
        'cache.rope_positions "cache" needs a RoPE model, got positional sinusoidal']
