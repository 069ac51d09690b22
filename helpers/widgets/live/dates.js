// Notebook 05 live: the encoder-decoder with Bahdanau attention of helpers/seq2seq.py rewrites
// the reader's date in the page, and the figure draws where each output step looked.
// The model is the JSON helpers/widgets/live/dates.py's export writes: state_dict's weights by
// name ({shape, data: Float32Array}, row-major; nn.Linear's weight is (out, in)), the two
// vocabularies, the month names and the view's limits. Computed in float64 from the float32
// weights, formula for formula as PyTorch computes them: nn.GRU / nn.GRUCell with the gates in
// the order r, z, n (n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))), the sigmoid as
// 1 / (1 + e^−x), the additive score w_vᵀ tanh(W_q s + W_k h_j), softmaxes with the row's
// largest value subtracted, greedy decoding from <bos> for max_steps steps, each feeding back
// its own argmax (the first largest logit, as torch.argmax), like seq2seq.greedy_decode.
// Legend: T source tokens, S decoding steps, N hidden units, E embedding size, C target
// vocabulary size. Vectors are Float64Arrays; a (rows, cols) result is an array of rows.

// Python's \s and str.split() (str.isspace): JavaScript's \s differs (it has U+FEFF, lacks
// U+001C-U+001F and U+0085), so the class is spelt out to tokenize exactly as
// seq2seq.tokenize_source does.
const DATES_SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a"
  + "\\u2028\\u2029\\u202f\\u205f\\u3000";
const DATES_TOKEN = new RegExp(`[A-Za-z]+|\\d|[^${DATES_SPACE}A-Za-z\\d]`, "gu");
const DATES_SPACES = new RegExp(`[${DATES_SPACE}]+`, "u");
const DATES_SHOWN_CHARS = 36; // the title shows at most this much of the input (then "...")

/** '3 May, 1998' → ['3', 'May', ',', '1', '9', '9', '8'] (seq2seq.tokenize_source). */
function dates_tokenize(text) {
  return text.match(DATES_TOKEN) || [];
}

/** Whether `tokens` are all ASCII digits and there are one of `counts` of them. */
function dates_digits(tokens, counts) {
  return counts.includes(tokens.length) && tokens.every((t) => /^[0-9]$/.test(t));
}

/** dates.py's read_date: [target 'YYYY-MM-DD' or null, note]. */
function dates_read(tokens, model) {
  const months = new Map();
  model.months.forEach((m, i) => months.set(m, i + 1));
  model.months_abbr.forEach((m, i) => months.set(m, i + 1));
  const notTask = [null, "not written in one of the task's five formats, so no target"];
  const n = tokens.length;
  let day, month, year;
  if (n >= 6 && months.has(tokens.at(-5)) && dates_digits(tokens.slice(0, -5), [1, 2])
      && dates_digits(tokens.slice(-4), [4])) { // 3 May 1998, 3 September 1998
    [day, month, year] = [tokens.slice(0, -5), months.get(tokens.at(-5)), tokens.slice(-4)];
  } else if (n >= 7 && months.has(tokens[0]) && tokens.at(-5) === ","
             && dates_digits(tokens.slice(1, -5), [1, 2]) && dates_digits(tokens.slice(-4), [4])) {
    [day, month, year] = [tokens.slice(1, -5), months.get(tokens[0]), tokens.slice(-4)];
  } else if (n === 10 && tokens[2] === "." && tokens[5] === "."
             && dates_digits([...tokens.slice(0, 2), ...tokens.slice(3, 5), ...tokens.slice(6)],
                             [8])) {
    [day, year] = [tokens.slice(0, 2), tokens.slice(6)]; // 03.05.1998
    month = Number(tokens.slice(3, 5).join(""));
    if (!(month >= 1 && month <= 12)) {
      return [null, `no such date: there is no month ${month}, so no right answer`];
    }
  } else {
    return notTask;
  }
  if (year[0] === "0" || (n !== 10 && day.length === 2 && day[0] === "0")) return notTask; // 03 May
  const d = Number(day.join("")), y = Number(year.join(""));
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  if (!(d >= 1 && d <= days)) {
    const why = d === 0 ? "days start at 1" : `${model.months[month - 1]} ${y} has ${days} days`;
    return [null, `no such date: ${why}, so no right answer`];
  }
  const [lo, hi] = model.years;
  const note = y >= lo && y <= hi ? "" : `${y} lies outside the training years ${lo}-${hi}`;
  const pad = (v) => String(v).padStart(2, "0");
  return [`${String(y).padStart(4, "0")}-${pad(month)}-${pad(d)}`, note];
}


const dates_sigmoid = (x) => 1 / (1 + Math.exp(-x));

/** One GRU step (torch.nn.GRU / GRUCell): input x, state h → the new state. */
function dates_gru(x, h, w_ih, w_hh, b_ih, b_hh) {
  const N = h.length;
  const gi = liveLinear(w_ih, x, b_ih), gh = liveLinear(w_hh, h, b_hh); // (3N,) r, z, n
  const out = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    const r = dates_sigmoid(gi[i] + gh[i]);
    const z = dates_sigmoid(gi[N + i] + gh[N + i]);
    const n = Math.tanh(gi[2 * N + i] + r * gh[2 * N + i]);
    out[i] = (1 - z) * n + z * h[i];
  }
  return out;
}

/** Softmax with the largest value subtracted. */
function dates_softmax(x) {
  let m = -Infinity;
  for (const v of x) m = Math.max(m, v);
  const e = Float64Array.from(x, (v) => Math.exp(v - m));
  let s = 0;
  for (const v of e) s += v;
  return e.map((v) => v / s);
}

/** Row `i` of an embedding table {shape: [V, E]} as a Float64Array. */
function dates_row(table, i) {
  const E = table.shape[1];
  return Float64Array.from(table.data.subarray(i * E, (i + 1) * E));
}

/** Encoder: embedding + bidirectional GRU; outputs (T, 2N) [forward; backward] and
 * s_0 = tanh(W [→h_T; ←h_1] + b) (N,). */
function dates_encode(W, ids) {
  const T = ids.length, N = W["encoder.rnn.weight_hh_l0"].shape[1];
  const x = ids.map((i) => dates_row(W["encoder.embedding.weight"], i)); // (T, E)
  const run = (suffix, order) => {
    const states = new Array(T);
    let h = new Float64Array(N);
    for (const t of order) {
      const w = (name) => W[`encoder.rnn.${name}_l0${suffix}`];
      h = dates_gru(x[t], h, w("weight_ih"), w("weight_hh"), w("bias_ih"), w("bias_hh"));
      states[t] = h;
    }
    return states;
  };
  const ahead = [...Array(T).keys()];
  const fwd = run("", ahead), bwd = run("_reverse", ahead.slice().reverse());
  const outputs = fwd.map((f, t) => Float64Array.from([...f, ...bwd[t]])); // (T, 2N)
  const last = Float64Array.from([...fwd[T - 1], ...bwd[0]]);
  const state = liveLinear(W["encoder.init_state.weight"], last, W["encoder.init_state.bias"])
    .map(Math.tanh); // (N,)
  return { outputs, state };
}

/** What the model wrote: the tokens up to the first <eos>, <pad> and <bos> dropped. */
function dates_output(tokens) {
  const out = [];
  for (const t of tokens) {
    if (t === "<eos>") break;
    if (t !== "<pad>" && t !== "<bos>") out.push(t);
  }
  return out.join("");
}

const LIVE_ENGINE = {
  kind: "dates",

  parse(text, model) {
    const refuse = (problem) => ({ ok: false, message: `${problem}. ${model.accepted}` });
    const tokens = dates_tokenize(String(text));
    if (!tokens.length) return refuse("The date must hold at least one token, got none");
    const vocab = model.src_itos;
    const unknown = [...new Set(tokens.filter((t) => !vocab.includes(t)))];
    if (unknown.length) {
      const cap = (t) => t[0].toUpperCase() + t.slice(1).toLowerCase();
      const listed = unknown.slice(0, 3).map((t) => `'${t}'` + (/^[A-Za-z]+$/.test(t)
        && vocab.includes(cap(t)) ? ` (write ${cap(t)})` : ""));
      const shown = listed.length === 1 ? listed[0]
        : `${listed.slice(0, -1).join(", ")} and ${listed.at(-1)}`;
      return refuse(`The date must be made of source tokens, got ${shown}, outside the vocabulary`);
    }
    if (tokens.length > model.max_tokens) {
      return refuse(`The date must hold at most ${model.max_tokens} tokens, got ${tokens.length}`);
    }
    const [target, note] = dates_read(tokens, model);
    const shown = String(text).split(DATES_SPACES).filter((s) => s).join(" ");
    return { ok: true, input: { text: shown, tokens, ids: tokens.map((t) => vocab.indexOf(t)),
                                target, note } };
  },

  forward(model, input) {
    const W = model.weights;
    const { outputs, state: s0 } = dates_encode(W, input.ids);
    const keys = outputs.map((h) => liveLinear(W["decoder.attention.W_k.weight"], h)); // (T, N)
    const w_v = W["decoder.attention.w_v.weight"].data; // (1, N)
    const itos = model.tgt_itos;
    let state = s0, token = itos.indexOf("<bos>");
    const weights = [], logits = [], probs = [], ids = [];
    for (let t = 0; t < model.max_steps; t++) {
      const q = liveLinear(W["decoder.attention.W_q.weight"], state); // (N,)
      const scores = keys.map((k) => {
        let s = 0;
        for (let i = 0; i < q.length; i++) s += w_v[i] * Math.tanh(q[i] + k[i]);
        return s;
      }); // (T,)
      const alpha = dates_softmax(scores);
      const context = new Float64Array(outputs[0].length); // (2N,): Σ_j α_j h_j
      outputs.forEach((h, j) => {
        for (let i = 0; i < h.length; i++) context[i] += alpha[j] * h[i];
      });
      const x = Float64Array.from([...dates_row(W["decoder.embedding.weight"], token), ...context]);
      state = dates_gru(x, state, W["decoder.cell.weight_ih"], W["decoder.cell.weight_hh"],
                        W["decoder.cell.bias_ih"], W["decoder.cell.bias_hh"]);
      const out = liveLinear(W["decoder.dense.weight"], Float64Array.from([...state, ...context]),
                               W["decoder.dense.bias"]); // (C,)
      token = 0;
      for (let c = 1; c < out.length; c++) if (out[c] > out[token]) token = c;
      weights.push(Array.from(alpha));
      logits.push(Array.from(out));
      probs.push(Array.from(dates_softmax(out)));
      ids.push(token);
    }
    const tokens = ids.map((i) => itos[i]);
    const end = tokens.indexOf("<eos>");
    const steps = end >= 0 ? end + 1 : model.max_steps;
    const output = dates_output(tokens.slice(0, steps));
    const text = input.text.length <= DATES_SHOWN_CHARS ? input.text
      : `${input.text.slice(0, DATES_SHOWN_CHARS - 3)}...`;
    let title = `'${text}' → ${output || "(nothing)"}`;
    if (end < 0) title += ` (no <eos> in ${model.max_steps} steps)`;
    let verdict = input.note;
    if (input.target !== null) {
      verdict = `${output === input.target ? "right" : "wrong"}: the date is ${input.target}`;
      if (input.note) verdict += ` (${input.note})`;
    }
    return { encoder_outputs: outputs.map((h) => Array.from(h)), initial_state: Array.from(s0),
             weights, logits, probs, ids, tokens, steps, output, title, verdict };
  },

  draw(pic, model, input, result) {
    const S = result.steps, T = input.tokens.length;
    pic.heatmap("weights", S, T, result.weights.slice(0, S).flat());
    pic.ticks("source", input.tokens);
    pic.ticks("steps", result.tokens.slice(0, S).map((tok, t) => `${t + 1}: ${tok}`));
    pic.text("title", result.title);
    pic.text("verdict", result.verdict);
  },

  summary(model, input, result) {
    const looks = result.weights.slice(0, result.steps).map((row) => {
      let j = 0;
      for (let k = 1; k < row.length; k++) if (row[k] > row[j]) j = k;
      return `${j + 1}: ${input.tokens[j]}`;
    });
    return `${result.title}: ${result.verdict}. Steps 1 to ${result.steps} look most at the `
      + `source tokens (position: token) ${looks.join(", ")}.`;
  },
};
