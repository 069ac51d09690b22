// Live view for notebook 11: attention sinks on the reader's own backcopy sequence (after
// decoder.js, whose decoder_forward runs the models). The tokens the reader types follow BOS;
// the chosen model (softmax, or with a learnt sink logit) runs through the notebook's two caches
// of window R: "kept" = sinks + window (BOS and the last R tokens, positions in the cache),
// "evicted" = window only (BOS gone from the query at t = R on). The picture shows, for the
// cache the "evict BOS" checkbox picks, each head's weight on BOS, on the other keys and on no
// key, and the top guess for the next token; helpers/widgets/live/sinks.py draws the same.
// Legend: T tokens (BOS included), H heads, V outputs, R the cache's window.

const SINKS_VOCAB = 16;  // tokens 0 … 15; BOS is 16
const SINKS_TRIGGERS = 6;  // 0 … 5
const SINKS_BOS = 16;
const SINKS_MAX_TOKENS = 47;  // after BOS: the training length, 48
const SINKS_MODELS = ["softmax", "sink logit"];
const SINKS_RECENT = [2, 4, 8, 16];
const SINKS_NAMES = [...Array(SINKS_VOCAB).keys()].map(String).concat(["BOS"]);  // id → name
const SINKS_CACHES = {
  kept: {sinks: 1, rope_positions: "cache"},  // sinks + window
  evicted: {},  // window only
};

/** A token as a message quotes it: at most 12 characters (code points, as Python counts). */
function sinks_shown(word) {
  const chars = Array.from(word);
  return chars.length <= 12 ? word : chars.slice(0, 12).join("") + "…";
}

/** text → {ok: true, input: [16, t_1, …]} or {ok: false, message} (sinks.py's parse). */
function sinks_parse(text) {
  const V = SINKS_VOCAB, last = SINKS_TRIGGERS - 1;
  let words = String(text).split(/[ \t\n\r,]+/).filter((w) => w);
  if (words.length && words[0] === "BOS") words = words.slice(1);
  if (!words.length) {
    return {ok: false, message: `Type at least one token after BOS: the numbers 0–${V - 1} `
      + "separated by spaces or commas."};
  }
  for (const word of words) {
    if (word === "BOS") {
      return {ok: false, message: "BOS only once, first (the page puts it there): type the "
        + `numbers 0–${V - 1} after it.`};
    }
    if (!/^(0|[1-9][0-9]?)$/.test(word) || Number(word) >= V) {
      return {ok: false, message: `'${sinks_shown(word)}' is not a token: the tokens are the `
        + `numbers 0–${V - 1}, no leading zeros (0–${last} are triggers), separated by spaces or `
        + "commas."};
    }
  }
  if (words.length > SINKS_MAX_TOKENS) {
    return {ok: false, message: `${words.length} tokens is too many: at most ${SINKS_MAX_TOKENS} `
      + `after BOS (the models were trained on ${SINKS_MAX_TOKENS + 1} tokens).`};
  }
  return {ok: true, input: [SINKS_BOS, ...words.map(Number)]};
}

/** The controls as numbers and names: {variant, recent, evict}; throws for unknown values. */
function sinks_controls(controls) {
  const variant = controls.variant, recent = Number(controls.recent);
  if (!SINKS_MODELS.includes(variant)) throw new Error(`sinks: no model ${variant}`);
  if (!SINKS_RECENT.includes(recent)) throw new Error(`sinks: no window R = ${controls.recent}`);
  return {variant, recent, evict: controls.evict === true};
}

function sinks_sum(row) {
  let s = 0;
  for (const x of row) s += x;
  return s;
}

/** The index of a row's largest entry (the first of equal ones, as NumPy's argmax). */
function sinks_argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** The three lines of text (sinks.py's _texts): what is shown, the guesses and loss, the
 * triggers (or what to type to see BOS evicted). */
function sinks_texts(input, result, c) {
  const T = input.length, R = c.recent;
  const what = c.evict ? `window only: BOS evicted from t = ${R} on` : "sinks + window: BOS kept";
  const title = `${c.variant === "softmax" ? "Softmax model" : "Model with a sink logit"}, `
    + `a cache of the last R = ${R} tokens, ${what}`;
  if (T <= R) {
    return [title, `Nothing is evicted: your ${T} tokens (BOS included) fit in the window `
      + `R = ${R}, so every query sees BOS with either cache.`,
            `Type at least ${R} tokens after BOS to see the window evict it.`];
  }
  const guess = {kept: result.probs_kept.map(sinks_argmax),
                 evicted: result.probs_evicted.map(sinks_argmax)};
  let changed = 0;
  for (let t = R; t < T; t++) if (guess.kept[t] !== guess.evicted[t]) changed++;
  let effect = `Evicting BOS (t = ${R} … ${T - 1}) changes the top guess at ${changed} of `
    + `${T - R} positions`;
  if (T - 1 > R) {  // typed next tokens: the notebook's loss, in nats
    const loss = {};
    for (const name of ["kept", "evicted"]) {
      let total = 0;
      for (let t = R; t < T - 1; t++) total += -Math.log(result[`probs_${name}`][t][input[t + 1]]);
      loss[name] = total / (T - 1 - R);
    }
    effect += `; mean loss on your next tokens: ${loss.kept.toFixed(2)} → `
      + `${loss.evicted.toFixed(2)} nats`;
  }
  const copies = [];  // triggers after a regular token, from t = R on
  for (let t = Math.max(R, 2); t < T; t++) if (input[t] < SINKS_TRIGGERS) copies.push(t);
  if (!copies.length) {
    const last = SINKS_TRIGGERS - 1;
    const none = `No trigger at t ≥ ${R} (a token 0–${last} after another token).`;
    return [title, effect + ".", none];
  }
  const named = {};
  for (const name of ["kept", "evicted"]) {
    named[name] = copies.filter((t) => guess[name][t] === input[t - 1]).length;
  }
  const n = copies.length;
  return [title, effect + ".", `At the ${n} trigger${n > 1 ? "s" : ""} from t = ${R} on, the `
    + `top guess is the token before the trigger ${named.kept} time${named.kept !== 1 ? "s" : ""} `
    + `with BOS kept, ${named.evicted} with BOS evicted.`];
}

const LIVE_ENGINE = {
  kind: "sinks",

  parse(text, model, controls) {
    return sinks_parse(text);
  },

  /** For each cache c of SINKS_CACHES (window R): weights_c [H][T][T], bos_c [H][T],
   * others_c [H][T] (the weights on positions ≥ 1), nobody_c [H][T] (1 − the row's sum),
   * logits_c [T][V], probs_c [T][V]: as sinks.py's forward. */
  forward(model, input, controls) {
    const c = sinks_controls(controls);
    const out = {};
    for (const [name, cache] of Object.entries(SINKS_CACHES)) {
      const r = decoder_forward(model.models[c.variant], input,
                                {cache: {...cache, window: c.recent}});
      const w = r.weights[0];  // [H][T][T]: the one layer
      out[`weights_${name}`] = w;
      out[`bos_${name}`] = w.map((rows) => rows.map((row) => row[0]));
      out[`others_${name}`] = w.map((rows) => rows.map((row) => sinks_sum(row.slice(1))));
      out[`nobody_${name}`] = w.map((rows) => rows.map((row) => 1 - sinks_sum(row)));
      out[`logits_${name}`] = r.logits;
      out[`probs_${name}`] = r.logits.map(decoder_softmax);
    }
    return out;
  },

  draw(pic, model, input, result, controls) {
    const c = sinks_controls(controls);
    const T = input.length, shown = c.evict ? "evicted" : "kept";
    const bos = result[`bos_${shown}`], others = result[`others_${shown}`];
    const nobody = result[`nobody_${shown}`];
    const values = [];  // (3H, T), head by head: BOS, other keys, no key
    bos.forEach((row, h) => {
      values.push(...row.map((v, t) => (c.evict && t >= c.recent ? NaN : v)));
      values.push(...others[h], ...nobody[h]);
    });
    pic.heatmap("weights", 3 * bos.length, T, values);
    pic.ticks("tokens", input.map((t) => SINKS_NAMES[t]));
    const probs = result[`probs_${shown}`];
    const guess = probs.map(sinks_argmax);
    const kept = result.probs_kept.map(sinks_argmax);
    const evicted = result.probs_evicted.map(sinks_argmax);
    pic.heatmap("differs", 1, T, kept.map((g, t) => (g !== evicted[t] ? 1 : 0)));
    pic.heatmap("guesses", 1, T, guess.map((g, t) => probs[t][g]));
    pic.ticks("guessed", guess.map((g) => SINKS_NAMES[g]));
    const [title, effect, triggers] = sinks_texts(input, result, c);
    pic.text("title", title);
    pic.text("effect", effect);
    pic.text("triggers", triggers);
  },

  summary(model, input, result, controls) {
    const c = sinks_controls(controls);
    const T = input.length, R = c.recent;
    const head = `${c.variant === "softmax" ? "Softmax model" : "Model with a sink logit"}, `
      + `R = ${R}, BOS ${c.evict ? "evicted" : "kept"}: `;
    if (T <= R) return head + "nothing is evicted, every query sees BOS.";
    const mean = result.bos_kept.map((row) => row.slice(R).reduce((a, b) => a + b, 0) / (T - R));
    const kept = result.probs_kept.map(sinks_argmax);
    const evicted = result.probs_evicted.map(sinks_argmax);
    let changed = 0;
    for (let t = R; t < T; t++) if (kept[t] !== evicted[t]) changed++;
    return head + `with BOS kept the heads put ${mean.map((m) => m.toFixed(2)).join(" and ")} `
      + `on it on average from t = ${R} on; evicting it changes the top guess at ${changed} of `
      + `${T - R} positions.`;
  },
};
