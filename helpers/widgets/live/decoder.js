// The series' decoder-only transformer in the page: the forward pass of helpers/transformer.py's
// DecoderLM (and of helpers/streaming.py's TinyDecoder without latent attention), from the JSON
// that helpers/widgets/live/decoder.py's export_decoder writes. Computed in float64 from the
// float32 weights, formula for formula as PyTorch computes them: LayerNorm (biased variance,
// eps), the heads' scores scaled on the query side, the softmax with the row's largest visible
// score subtracted (sink_softmax: the sink logit too), GELU with erf.
// Legend: T tokens, N model width, H heads, G key-value heads, d = N/H, V outputs, L layers.
// A matrix is an array of rows, each a Float64Array; a weight {shape, data: Float32Array} is
// row-major as tensor.contiguous(): nn.Linear's weight is (out, in).

/** erf(x) in float64 (|error| < 1e-15): Taylor series below 3, erfc's continued fraction
 * above; JavaScript has no Math.erf. */
function decoder_erf(x) {
  const z = Math.abs(x);
  let r;
  if (z < 3) {
    let term = z, sum = z;  // Σ (−1)^n z^(2n+1) / (n! (2n+1))
    for (let n = 1; n < 200; n++) {
      term *= -z * z / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    r = sum * 2 / Math.sqrt(Math.PI);
  } else {  // erfc(z) = exp(−z²)/√π / (z + (1/2)/(z + 1/(z + (3/2)/(z + …)))), from the tail
    let f = z;
    for (let n = 60; n >= 1; n--) f = z + (n / 2) / f;
    r = 1 - Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
  }
  return x < 0 ? -r : r;
}

const DECODER_ACTIVATIONS = {
  gelu: (x) => 0.5 * x * (1 + decoder_erf(x / Math.SQRT2)),  // nn.GELU(): exact, not tanh
  relu: (x) => (x > 0 ? x : 0),
};

/** x W^T + b for each row of X: W {shape: [out, in]}, b {shape: [out]} or null. */
function decoder_linear(X, W, b) {
  return X.map((x) => liveLinear(W, x, b));
}

/** nn.LayerNorm over each row: (x − mean)/√(var + eps)·γ + β, var biased. */
function decoder_layer_norm(X, norm, eps) {
  return X.map((x) => {
    const n = x.length;
    let mean = 0;
    for (let i = 0; i < n; i++) mean += x[i];
    mean /= n;
    let v = 0;
    for (let i = 0; i < n; i++) v += (x[i] - mean) * (x[i] - mean);
    const inv = 1 / Math.sqrt(v / n + eps);
    const y = new Float64Array(n);
    const w = norm.weight.data, b = norm.bias.data;
    for (let i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * w[i] + b[i];
    return y;
  });
}

/** Rotate head slice [from, from + d) of vector x by position p (apply_rotary, half-split
 * layout: feature i pairs with i + d/2, angle p·scale·base^(−2i/d)); returns a new array. */
function decoder_rotate(x, from, d, p, base, scale) {
  const y = new Float64Array(d), half = d / 2;
  for (let i = 0; i < half; i++) {
    const angle = p * scale * Math.pow(base, -2 * i / d);
    const c = Math.cos(angle), s = Math.sin(angle);
    const x1 = x[from + i], x2 = x[from + half + i];
    y[i] = x1 * c - x2 * s;
    y[half + i] = x1 * s + x2 * c;
  }
  return y;
}

/** The cache policy of options.cache, checked: null, or {window, sinks, rope}. */
function decoder_policy(cfg, options) {
  const c = options && options.cache;
  if (c === undefined || c === null) return null;
  const W = c.window, S = c.sinks === undefined ? 0 : c.sinks;
  const rope = c.rope_positions === undefined ? "original" : c.rope_positions;
  if (!Number.isInteger(W) || W < 1) throw new Error(`cache.window must be an int >= 1, got ${W}`);
  if (!Number.isInteger(S) || S < 0) throw new Error(`cache.sinks must be an int >= 0, got ${S}`);
  if (rope !== "original" && rope !== "cache") {
    throw new Error(`cache.rope_positions must be "original" or "cache", got ${rope}`);
  }
  if (rope === "cache" && cfg.positional !== "rope") {
    throw new Error(`cache.rope_positions "cache" needs a RoPE model, got positional ` +
                    `${cfg.positional}`);
  }
  return {window: W, sinks: S, rope};
}

/** The forward pass: tokens (T ids in [0, V)) → {logits: [T][V], weights: [L][H][T][T]}
 * (rows = queries, 0 where a key is hidden), as model(tokens[None]) and its
 * attention_weights give. options.cache = {window: W, sinks: S = 0, rope_positions =
 * "original"}: what feeding the tokens one at a time through model.new_cache(window=W,
 * sinks=S, rope_positions=...) gives (KVCache's policy: query m sees key p ≤ m iff m − p < W
 * or p < S; a layer's own window also applies; "cache" rotates a RoPE layer's query and keys
 * by their index among the keys it sees). Throws an Error for tokens the model cannot take. */
function decoder_forward(model, tokens, options = {}) {
  const cfg = model.config;
  const T = tokens.length, N = cfg.num_hiddens, H = cfg.num_heads, G = cfg.num_kv_heads;
  const d = N / H, perGroup = H / G, scale = 1 / Math.sqrt(d), eps = cfg.eps;
  const policy = decoder_policy(cfg, options);
  if (T < 1) throw new Error("tokens must hold at least one token");
  for (const t of tokens) {
    if (!Number.isInteger(t) || t < 0 || t >= cfg.vocab_size) {
      throw new Error(`tokens must be ids in [0, ${cfg.vocab_size}), got ${t}`);
    }
  }
  if (cfg.max_len !== null && T > cfg.max_len && (!policy || cfg.positional === "sinusoidal")) {
    throw new Error(`sequence length must be at most max_len=${cfg.max_len}, got ${T}`);
  }
  const E = model.embedding;
  let X = tokens.map((t, i) => {  // (T, N): embedding (+ sinusoidal row i)
    const x = new Float64Array(N);
    for (let n = 0; n < N; n++) {
      x[n] = E.data[t * N + n] + (cfg.positional === "sinusoidal" ? model.P.data[i * N + n] : 0);
    }
    return x;
  });
  const act = DECODER_ACTIVATIONS[cfg.activation];
  const weights = [];
  model.blocks.forEach((block, layer) => {
    const Wl = cfg.windows[layer];
    // query m: the cache keeps key p ≤ m (all of them without a policy); the layer's window
    // hides what is W or more positions back; RoPE turns by position, or by index in the cache
    const inCache = (m, p) => !policy || m - p < policy.window || p < policy.sinks;
    const inWindow = (m, p) => Wl === null || m - p < Wl;
    const byIndex = policy !== null && policy.rope === "cache";
    const turn = (x, from, p) => decoder_rotate(x, from, d, p, cfg.rotary_base, cfg.rotary_scale);
    const Y = decoder_layer_norm(X, block.norm1, eps);
    const q = decoder_linear(Y, block.W_q.weight, block.W_q.bias);  // (T, N)
    const k = decoder_linear(Y, block.W_k.weight, block.W_k.bias);  // (T, G·d)
    const v = decoder_linear(Y, block.W_v.weight, block.W_v.bias);  // (T, G·d)
    const layerWeights = [];
    const heads = X.map(() => new Float64Array(N));  // (T, N): the heads side by side
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / perGroup), qf = h * d, kf = g * d;
      const rows = [];
      for (let m = 0; m < T; m++) {
        const keys = [];  // the positions the cache holds for query m, itself last
        for (let p = 0; p <= m; p++) if (inCache(m, p)) keys.push(p);
        let qm = q[m].subarray(qf, qf + d);
        if (cfg.positional === "rope") qm = turn(q[m], qf, byIndex ? keys.length - 1 : m);
        const sink = block.sink_logits ? block.sink_logits.data[h] : null;
        const s = new Float64Array(T).fill(-Infinity);
        let top = sink === null ? -Infinity : sink;
        keys.forEach((p, index) => {
          if (!inWindow(m, p)) return;
          let kp = k[p].subarray(kf, kf + d);
          if (cfg.positional === "rope") kp = turn(k[p], kf, byIndex ? index : p);
          let dot = 0;
          for (let i = 0; i < d; i++) dot += qm[i] * scale * kp[i];
          s[p] = dot;
          if (dot > top) top = dot;
        });
        const w = new Float64Array(T);
        let total = sink === null ? 0 : Math.exp(sink - top);
        for (let p = 0; p < T; p++) if (s[p] > -Infinity) total += (w[p] = Math.exp(s[p] - top));
        for (let p = 0; p < T; p++) w[p] /= total;
        const out = heads[m];
        for (let p = 0; p <= m; p++) {
          if (w[p] === 0) continue;
          for (let i = 0; i < d; i++) out[qf + i] += w[p] * v[p][kf + i];
        }
        rows.push(Array.from(w));
      }
      layerWeights.push(rows);
    }
    weights.push(layerWeights);
    let gated = heads;
    if (block.W_g) {  // gated attention: sigmoid(W_g Y) per output feature, before W_o
      const gate = decoder_linear(Y, block.W_g.weight, block.W_g.bias);
      gated = heads.map((x, m) => x.map((value, n) => value / (1 + Math.exp(-gate[m][n]))));
    }
    const attended = decoder_linear(gated, block.W_o.weight, block.W_o.bias);  // (T, N)
    X = X.map((x, m) => x.map((value, n) => value + attended[m][n]));
    if (block.ffn) {  // X + W2 act(W1 norm2(X) + b1) + b2
      const hidden = decoder_linear(decoder_layer_norm(X, block.norm2, eps), block.ffn.W1.weight,
                                    block.ffn.W1.bias).map((x) => x.map(act));
      const fed = decoder_linear(hidden, block.ffn.W2.weight, block.ffn.W2.bias);
      X = X.map((x, m) => x.map((value, n) => value + fed[m][n]));
    }
  });
  const logits = decoder_linear(decoder_layer_norm(X, model.norm, eps), model.head.weight,
                                model.head.bias).map((row) => Array.from(row));
  return {logits, weights};
}

/** softmax of one row of logits (max subtracted): the next-token probabilities. */
function decoder_softmax(row) {
  const top = Math.max(...row);
  const e = row.map((x) => Math.exp(x - top));
  const total = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / total);
}
