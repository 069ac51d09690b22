// Live view of notebook 08 (helpers/widgets/live/induction.py): the trained copy-task model on
// the reader's letters, through decoder.js's decoder_forward; the previous-token head's and the
// induction head's weights (the heads the notebook's scores picked, in model.heads), the
// next-letter probabilities, and each head's mean weight where its kind of head looks.

const induction_SPACES = " \t\r\n"; // ignored between letters, as induction.py's SPACES

/** The letters' token ids, or throw the message induction.py's parse gives. */
function induction_parse(text, model) {
  const letters = model.letters, V = letters.length, lower = letters.toLowerCase();
  const tokens = [];
  for (const ch of Array.from(text)) { // code points, as Python iterates a str
    if (induction_SPACES.includes(ch)) continue;
    const upper = lower.includes(ch) ? ch.toUpperCase() : ch;
    const id = upper.length === 1 ? letters.indexOf(upper) : -1;
    if (id < 0) {
      throw new Error(`'${ch}' is not a token: the model's tokens are the ${V} letters A–P, ` +
                      "one letter a token (spaces are ignored).");
    }
    tokens.push(id);
  }
  if (!tokens.length) {
    throw new Error(`Type at least one letter: the model's tokens are the ${V} letters A–P ` +
                    "(spaces are ignored).");
  }
  if (tokens.length > model.max_len) {
    throw new Error(`${tokens.length} letters is too many: at most ${model.max_len}, the ` +
                    "length of the sequences the model was trained on.");
  }
  return tokens;
}

/** For each query i: the key after the latest earlier occurrence of its letter, or −1
 * (induction.induction_targets). */
function induction_targets(tokens) {
  return tokens.map((t, i) => {
    for (let j = i - 1; j >= 0; j--) if (tokens[j] === t) return j + 1;
    return -1;
  });
}

/** Mean of weights[i][keys[i]] over the queries with keys[i] >= 0, or null (none). */
function induction_mean(weights, keys) {
  let sum = 0, n = 0;
  keys.forEach((k, i) => { if (k >= 0) { sum += weights[i][k]; n++; } });
  return n ? sum / n : null;
}

const induction_fmt = (x) => x.toFixed(2);
const induction_queries = (n) => `${n} quer${n === 1 ? "y" : "ies"}`;

/** The four live lines, as induction.py's _texts. */
function induction_texts(model, tokens, result) {
  const L = model.letters, V = L.length, T = tokens.length;
  const order = Array.from({ length: V }, (_, v) => v)
    .sort((a, b) => result.probs[b] - result.probs[a] || a - b).slice(0, 3);
  const last = L[tokens[T - 1]];
  const guesses = order.map((v) => `${L[v]} ${induction_fmt(result.probs[v])}`).join(" · ");
  let j = -1;
  for (let k = T - 2; k >= 0; k--) if (tokens[k] === tokens[T - 1]) { j = k; break; }
  const copy = j >= 0
    ? `${last} came before at position ${j} (counting from 0), followed by ${L[tokens[j + 1]]}: the letter an ` +
      "induction head reads there, and copies."
    : `${last} has not come before: nothing to copy (and training never scored a guess after ` +
      "a new letter).";
  const p = result.previous_score;
  const previous = p === null ? "here: no query has a letter before it"
    : `here: ${induction_fmt(p)} on the letter just before (mean of ${induction_queries(T - 1)})`;
  const targets = induction_targets(tokens).filter((k) => k >= 0).length;
  const s = result.induction_score;
  const inducing = s === null ? "here: no letter repeats, so no query has a letter to copy"
    : `here: ${induction_fmt(s)} on the letter after the earlier one (mean of ` +
      `${induction_queries(targets)})`;
  return { prediction: `Next letter after the last one (${last}): ${guesses}`, copy,
           previous_text: previous, induction_text: inducing };
}

const LIVE_ENGINE = {
  kind: "induction",
  parse(text, model) {
    try {
      return { ok: true, input: induction_parse(text, model) };
    } catch (e) {
      return { ok: false, message: e.message };
    }
  },
  forward(model, tokens) {
    const { logits, weights } = decoder_forward(model.decoder, tokens);
    const at = (kind) => weights[model.heads[kind].layer - 1][model.heads[kind].head - 1];
    const previous = at("previous"), inducing = at("induction");
    return {
      previous, induction: inducing, probs: decoder_softmax(logits[tokens.length - 1]),
      previous_score: induction_mean(previous, tokens.map((_, i) => i - 1)),
      induction_score: induction_mean(inducing, induction_targets(tokens)),
    };
  },
  draw(pic, model, tokens, result) {
    const T = tokens.length;
    const labels = tokens.map((t) => model.letters[t]);
    for (const kind of ["previous", "induction"]) {
      const cells = new Float64Array(T * T);
      for (let i = 0; i < T; i++) {
        for (let k = 0; k < T; k++) cells[i * T + k] = k > i ? NaN : result[kind][i][k];
      }
      pic.heatmap(kind, T, T, cells);
      pic.ticks(`${kind}_keys`, labels);
      pic.ticks(`${kind}_queries`, labels);
    }
    const texts = induction_texts(model, tokens, result);
    for (const [name, text] of Object.entries(texts)) pic.text(name, text);
  },
  summary(model, tokens, result) {
    const head = model.heads.induction;
    const s = result.induction_score;
    const where = s === null ? "has no repeated letter to look up"
      : `puts ${induction_fmt(s)} of its weight on the letter after the earlier occurrence`;
    return `Layer ${head.layer} head ${head.head} (the induction head) ${where}; ` +
           induction_texts(model, tokens, result).prediction + ".";
  },
};
