// Live view for notebook 12: the reader's key=value writes into the memories of helpers/recall.py
// (softmax attention, linear attention, the additive sum, the decaying sum, the delta rule: the
// notebook's RecallModel of each kind), every key read back. memory.py's forward is the oracle
// (RecallModel.forward and the helpers' recurrent_states / linear_attention /
// scaled_dot_product in PyTorch); this file computes the same in float64 from the float32
// weights, and draws what memory.py's draw draws.
// Legend: T writes, M distinct keys read (in the order of their first write), D the models'
// size (16), U distinct values written.

const MEMORY_KEYS = 64;  // the models' key tokens 0 … 63, and value tokens 0 … 63
const MEMORY_SIZE = 16;
const MEMORY_KINDS = ["softmax", "linear", "additive", "decay", "delta"];
const MEMORY_MAX_WRITES = 12;
const MEMORY_TINY = 1.1754943508222875e-38;  // torch.finfo(torch.float32).tiny

/** A word as a message quotes it: at most 12 characters (code points, as Python counts). */
function memory_shown(word) {
  const chars = Array.from(word);
  return chars.length <= 12 ? word : chars.slice(0, 12).join("") + "…";
}

/** text → {ok: true, input: [[key, value], …]} or {ok: false, message} (memory.py's parse). */
function memory_parse(text) {
  const last = MEMORY_KEYS - 1;
  const words = String(text).replace(/[ \t]*=[ \t]*/g, "=").split(/[ \t\n\r,;]+/)
    .filter((w) => w);
  if (!words.length) {
    return {ok: false, message: `Type at least one write key=value, e.g. 3=17: keys and values `
      + `are whole numbers 0–${last}.`};
  }
  const writes = [];
  for (const word of words) {
    const match = /^(0|[1-9][0-9]*)=(0|[1-9][0-9]*)$/.exec(word);
    if (!match) {
      return {ok: false, message: `'${memory_shown(word)}' is not a write: type key=value, two `
        + `whole numbers 0–${last} (no leading zeros) joined by = (e.g. 3=17), separated by `
        + "spaces or commas."};
    }
    const [, key, value] = match;
    // A digit string longer than 2 is ≥ 100 (no leading zeros): out of range, whatever its size.
    if (key.length > 2 || Number(key) >= MEMORY_KEYS) {
      return {ok: false, message: `'${memory_shown(word)}': the key ${memory_shown(key)} is not `
        + `one of the models' ${MEMORY_KEYS} keys, 0–${last}.`};
    }
    if (value.length > 2 || Number(value) >= MEMORY_KEYS) {
      return {ok: false, message: `'${memory_shown(word)}': the value ${memory_shown(value)} is `
        + `not one of the models' ${MEMORY_KEYS} values, 0–${last}.`};
    }
    writes.push([Number(key), Number(value)]);
  }
  if (writes.length > MEMORY_MAX_WRITES) {
    return {ok: false, message: `${writes.length} writes is too many: at most `
      + `${MEMORY_MAX_WRITES} (the middle panel keeps one column a write).`};
  }
  return {ok: true, input: writes};
}

/** The keys read back (each distinct key once, first-written first) and their latest values. */
function memory_reads(writes) {
  const latest = new Map();
  for (const [key, value] of writes) latest.set(key, value);
  const queries = [...new Set(writes.map(([key]) => key))];
  return {queries, targets: queries.map((k) => latest.get(k))};
}

function memory_kind(controls) {
  const kind = controls.memory;
  if (!MEMORY_KINDS.includes(kind)) throw new Error(`memory: no memory ${kind}`);
  return kind;
}

/** Row `i` of a (rows, cols) tensor, as float64 numbers. */
function memory_row(t, i) {
  const cols = t.shape[1];
  return Array.from(t.data.subarray(i * cols, (i + 1) * cols));
}

/** nn.Linear without bias: W (out, in) · x. */
function memory_linear(W, x) {
  const [rows, cols] = W.shape;
  const y = new Array(rows).fill(0);
  for (let o = 0; o < rows; o++) {
    let s = 0;
    for (let i = 0; i < cols; i++) s += W.data[o * cols + i] * x[i];
    y[o] = s;
  }
  return y;
}

function memory_dot(a, b) {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** F.normalize: x / max(|x|, 1e-12). */
function memory_unit(x) {
  const n = Math.max(Math.sqrt(memory_dot(x, x)), 1e-12);
  return x.map((v) => v / n);
}

/** elu_feature_map: x + 1 where x > 0, else eˣ (never below float32's smallest normal). */
function memory_phi(x) {
  return x.map((v) => (v > 0 ? v + 1 : Math.max(Math.exp(v), MEMORY_TINY)));
}

function memory_softmax(row) {
  const top = Math.max(...row);
  const e = row.map((v) => Math.exp(v - top));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

function memory_sigmoid(logit) {
  return 1 / (1 + Math.exp(-logit));
}

function memory_argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** A (rows, cols) matrix of zeros. */
function memory_zeros(rows, cols) {
  return Array.from({length: rows}, () => new Array(cols).fill(0));
}

/** After every write, S ← α S, then S += k (β (v − Sᵀk) or v)ᵀ: recurrent_states of unit keys
 * ``keys`` [T][D] and values [T][V] (α = 1 and no β: the additive sum). */
function memory_states(keys, values, beta, decay) {
  const D = keys[0].length, V = values[0].length;
  const S = memory_zeros(D, V);
  keys.forEach((k, t) => {
    if (decay !== null) for (const row of S) for (let c = 0; c < V; c++) row[c] *= decay;
    let write = values[t];
    if (beta !== null) {
      write = write.map((v, c) => {
        let retrieved = 0;
        for (let d = 0; d < D; d++) retrieved += k[d] * S[d][c];
        return beta * (v - retrieved);
      });
    }
    for (let d = 0; d < D; d++) for (let c = 0; c < V; c++) S[d][c] += k[d] * write[c];
  });
  return S;
}

/** qᵀS for each query: [M][V]. */
function memory_read(queries, S) {
  return queries.map((q) => S[0].map((_, c) => {
    let s = 0;
    for (let d = 0; d < q.length; d++) s += q[d] * S[d][c];
    return s;
  }));
}

/** The sentences of the figure (memory.py's _texts). */
function memory_texts(m, kind, writes, result) {
  const {queries, targets} = memory_reads(writes);
  const recalled = result.recalled;
  const right = recalled.filter((r, i) => r === targets[i]).length;
  const M = queries.length, T = writes.length, D = MEMORY_SIZE;
  const name = {
    softmax: "Softmax attention (a cache of every write)",
    linear: "Linear attention (φ = elu + 1, a fixed state)",
    additive: "Additive memory S ← S + k̂ vᵀ",
  }[kind] ?? (kind === "decay"
    ? `Decaying memory S ← γ S + k̂ vᵀ (γ = ${memory_sigmoid(m.decay_logit.data[0]).toFixed(3)} `
      + "learnt)"
    : `Delta rule S ← S + β k̂ (v − Sᵀk̂)ᵀ (β = ${memory_sigmoid(m.beta_logit.data[0]).toFixed(2)} `
      + "learnt)");
  const title = `${name}: ${right} of ${M} keys read back their latest value`;
  const again = queries.filter((k) => writes.filter(([w]) => w === k).length > 1);
  let rewrite;
  if (!again.length) {
    const [k, v] = writes[0];
    rewrite = `No key written twice: write one again (e.g. add ${k}=${(v + 1) % MEMORY_KEYS}) `
      + "to see whether this memory replaces its value or adds the new one to it.";
  } else {
    const k = again[0];
    const i = queries.indexOf(k);
    const cols = [];
    writes.forEach(([w], j) => { if (w === k) cols.push(j); });
    const values = cols.map((j) => String(writes[j][1])).join(", ");
    const said = cols.map((j) => result.weights[i][j].toFixed(2)).join(", ");
    const p = result.probs[i][recalled[i]];
    const verdict = recalled[i] === targets[i] ? "its latest ✓"
      : `not its latest (${targets[i]}) ✗`;
    const more = again.length - 1;
    rewrite = `Key ${k} written ${cols.length} times (${values}): its read weighs those writes `
      + `${said} and recalls ${recalled[i]} (p ${p.toFixed(2)}), ${verdict}`
      + (more ? `; ${more} more key${more > 1 ? "s" : ""} written again.` : ".");
  }
  let top = 0;
  for (const row of result.state) for (const v of row) top = Math.max(top, Math.abs(v));
  let state, rows;
  if (kind === "softmax") {
    state = `Cache K, V: ${T} × ${2 * D} = ${T * 2 * D} numbers, grows`;
    rows = `rows: writes (key); columns: k, then v; ÷ ${top.toFixed(2)}`;
  } else if (kind === "linear") {
    state = `State S, z: ${D} × ${D} + ${D} = ${D * D + D} numbers, fixed`;
    rows = `S; rows: key dim.; columns: value dim.; ÷ ${top.toFixed(2)}`;
  } else {
    state = `State S: ${D} × ${D} = ${D * D} numbers, fixed`;
    rows = `rows: key dim.; columns: value dim.; ÷ ${top.toFixed(2)}`;
  }
  const formula = {
    softmax: "w = softmax(q·k / √16) over the writes",
    linear: "w = φ(q)·φ(k) / Σ φ(q)·φ(k)",
    additive: "w = q̂·k̂",
    decay: "w = γ^(writes after it) q̂·k̂",
    delta: "w = q̂ᵀS for one-hot values v = e_j",
  }[kind];
  return {title, rewrite, state_title: state, state_rows: rows, formula};
}

const LIVE_ENGINE = {
  kind: "memory",

  parse(text, model, controls) {
    return memory_parse(text);
  },

  /** {logits [M][64], probs [M][64], weights [M][T], state ([T][2D] softmax's cache, else
   * [D][D]), z [D] (linear only), recalled [M]}: as memory.py's forward. */
  forward(model, input, controls) {
    const kind = memory_kind(controls);
    const m = model.models[kind];
    const writes = input;
    const T = writes.length;
    const {queries} = memory_reads(writes);
    let k = writes.map(([key]) => memory_linear(m.W_k, memory_row(m.key_embedding, key)));
    const v = writes.map(([, value]) => memory_linear(m.W_v, memory_row(m.value_embedding, value)));
    let q = queries.map((key) => memory_linear(m.W_q, memory_row(m.key_embedding, key)));
    const out = {};
    let weights, read, state;
    if (kind === "softmax") {
      const scale = 1 / Math.sqrt(MEMORY_SIZE);
      weights = q.map((qi) => memory_softmax(k.map((kj) => memory_dot(qi, kj) * scale)));
      read = weights.map((w) => v[0].map((_, c) => w.reduce((s, wj, j) => s + wj * v[j][c], 0)));
      state = k.map((kj, j) => kj.concat(v[j]));
    } else if (kind === "linear") {
      const pk = k.map(memory_phi), pq = q.map(memory_phi);
      weights = pq.map((qi) => {
        const kernel = pk.map((kj) => memory_dot(qi, kj));
        const total = kernel.reduce((a, b) => a + b, 0);
        return kernel.map((x) => x / total);
      });
      read = weights.map((w) => v[0].map((_, c) => w.reduce((s, wj, j) => s + wj * v[j][c], 0)));
      state = memory_states(pk, v, null, null);
      out.z = pk[0].map((_, d) => pk.reduce((s, kj) => s + kj[d], 0));
    } else {
      k = k.map(memory_unit);
      q = q.map(memory_unit);
      const beta = kind === "delta" ? memory_sigmoid(m.beta_logit.data[0]) : null;
      const decay = kind === "decay" ? memory_sigmoid(m.decay_logit.data[0]) : null;
      const oneHot = writes.map((_, j) => writes.map((__, c) => (c === j ? 1 : 0)));
      weights = memory_read(q, memory_states(k, oneHot, beta, decay));
      state = memory_states(k, v, beta, decay);
      read = memory_read(q, state);
    }
    const W = m.readout_weight, b = m.readout_bias.data;
    const logits = read.map((r) => memory_linear(W, r).map((x, o) => x + b[o]));
    return {...out, logits, probs: logits.map(memory_softmax), weights, state,
            recalled: logits.map(memory_argmax)};
  },

  draw(pic, model, input, result, controls) {
    const kind = memory_kind(controls);
    const writes = input;
    const {queries, targets} = memory_reads(writes);
    const names = (ids) => ids.map(String);
    let top = 0;
    for (const row of result.state) for (const x of row) top = Math.max(top, Math.abs(x));
    top = Math.max(top, 1e-30);
    const state = result.state;
    pic.heatmap("state", state.length, state[0].length, state.flat().map((x) => x / top));
    pic.ticks("state_ticks", kind === "softmax" ? names(writes.map(([k]) => k))
      : names([...Array(MEMORY_SIZE).keys()]));
    pic.heatmap("weights", queries.length, writes.length, result.weights.flat());
    pic.ticks("write_keys", names(writes.map(([k]) => k)));
    pic.ticks("write_values", names(writes.map(([, v]) => v)));
    pic.ticks("weight_reads", names(queries));
    const written = [...new Set(writes.map(([, v]) => v))];
    const table = result.probs.map((row) => {
      const p = written.map((v) => row[v]);
      return p.concat([1 - p.reduce((a, b) => a + b, 0)]);
    });
    pic.heatmap("probs", queries.length, written.length + 1, table.flat());
    pic.ticks("values", names(written).concat(["rest"]));
    pic.ticks("prob_reads", names(queries));
    pic.ticks("recalled",
              result.recalled.map((r, i) => `→ ${r} ${r === targets[i] ? "✓" : "✗"}`));
    const texts = memory_texts(model.models[kind], kind, writes, result);
    for (const [name, line] of Object.entries(texts)) pic.text(name, line);
  },

  summary(model, input, result, controls) {
    const kind = memory_kind(controls);
    const {queries, targets} = memory_reads(input);
    const right = result.recalled.filter((r, i) => r === targets[i]).length;
    let said = `${kind} memory: ${right} of ${queries.length} keys read back their latest value`;
    const again = queries.findIndex((k) => input.filter(([w]) => w === k).length > 1);
    if (again >= 0) {
      const r = result.recalled[again];
      said += `; key ${queries[again]}, written again, recalls ${r} with probability `
        + `${result.probs[again][r].toFixed(2)} (its latest value: ${targets[again]})`;
    }
    return said + ".";
  },
};
