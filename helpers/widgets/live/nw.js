// Live view of notebook 02 (helpers/widgets/live/nw.py): Nadaraya-Watson regression on the
// reader's points, weights softmax(-((x_q - x_i) w)² / 2), as NWKernelRegression computes them
// in float32: every elementwise step rounded to float32 (Math.fround), sums in float64.

const nw_NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
const nw_PAIR = /^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s+([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$/;

/** A number of the input in [low, high], or throw the message Python's parse gives. */
function nw_number(word, what, low, high, accepted) {
  const w = word.trim();
  if (!nw_NUMBER.test(w)) throw new Error(`${what} must be a number, got '${w}'. ${accepted}`);
  const v = Number(w);
  if (!(v >= low && v <= high) || !Number.isFinite(v)) {
    throw new Error(`${what} must lie in [${low}, ${high}], got ${w}. ${accepted}`);
  }
  return v;
}

/** "q | x y, x y, ..." → {query, x, y}, as nw.parse. */
function nw_parse(text, model) {
  const acc = model.accepted;
  const [x0, x1] = model.x_range;
  const [y0, y1] = model.y_range;
  if (!text.trim()) throw new Error(`The input is empty. ${acc}`);
  if (text.split("|").length !== 2) throw new Error(`Write the query, one bar |, then the points. ${acc}`);
  const [q, rest] = text.split("|");
  const query = nw_number(q, "The query", x0, x1, acc);
  const items = rest.split(",");
  if (!rest.trim()) throw new Error(`Give at least one training point. ${acc}`);
  if (items.length > model.max_points) {
    throw new Error(`${items.length} points: at most ${model.max_points}. ${acc}`);
  }
  const xs = [];
  const ys = [];
  items.forEach((item, i) => {
    const m = nw_PAIR.exec(item);
    if (!m) throw new Error(`Point ${i + 1} must be two numbers x y, got '${item.trim()}'. ${acc}`);
    xs.push(nw_number(m[1], `Point ${i + 1}'s x`, x0, x1, acc));
    ys.push(nw_number(m[2], `Point ${i + 1}'s y`, y0, y1, acc));
  });
  return { query, x: xs, y: ys };
}

/** One query's weights over the points and its prediction (float32 steps). */
function nw_row(q, xs, ys, w) {
  const f = Math.fround;
  const k = xs.length;
  const s = new Float64Array(k);
  let max = -Infinity;
  for (let i = 0; i < k; i++) {
    const u = f(f(f(q) - xs[i]) * w);
    s[i] = f(-f(u * u) / 2);
    if (s[i] > max) max = s[i];
  }
  let sum = 0;
  for (let i = 0; i < k; i++) {
    s[i] = f(Math.exp(f(s[i] - max)));
    sum += s[i];
  }
  const inv = f(1 / f(sum));
  let yhat = 0;
  for (let i = 0; i < k; i++) {
    s[i] = f(s[i] * inv);
    yhat += s[i] * ys[i];
  }
  return { weights: Array.from(s), yhat: f(yhat) };
}

/** Indices of xs sorted by value, ties in input order (NumPy's stable argsort). */
function nw_order(xs) {
  return xs.map((x, i) => [x, i]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((p) => p[1]);
}

const nw_fmt = (v) => (Math.round(v * 100) / 100).toFixed(2);

const LIVE_ENGINE = {
  kind: "nw",
  parse(text, model) {
    try {
      return { ok: true, input: nw_parse(text, model) };
    } catch (e) {
      return { ok: false, message: e.message };
    }
  },
  forward(model, input, controls) {
    const f = Math.fround;
    const xs = input.x.map(f);
    const ys = input.y.map(f);
    const w = controls.w === model.choices[0] ? 1 : model.w.data[0];
    const grid = Array.from(model.grid.data);
    const rows = grid.map((g) => nw_row(g, xs, ys, w));
    const at = nw_row(input.query, xs, ys, w);
    return { fit: rows.map((r) => r.yhat), weights: rows.map((r) => r.weights), answer: at.yhat,
             query_weights: at.weights, w };
  },
  draw(pic, model, input, result, controls) {
    const grid = Array.from(model.grid.data);
    pic.line("fit", grid, result.fit);
    pic.points("points", input.x, input.y);
    pic.line("query", [input.query, input.query], model.y_range);
    pic.points("answer", [input.query], [result.answer]);
    const which = controls.w === model.choices[0] ? "w = 1" : `trained w = ${nw_fmt(result.w)}`;
    pic.text("title", `${which}, ${input.x.length} points: \u0177(${nw_fmt(input.query)}) = ` +
                      `${nw_fmt(result.answer)}`);
    const order = nw_order(input.x);
    const k = order.length;
    const cells = new Float64Array(grid.length * k);
    let largest = -Infinity;
    result.weights.forEach((row, r) => order.forEach((i, c) => {
      cells[r * k + c] = row[i];
      largest = Math.max(largest, row[i]);
    }));
    pic.heatmap("weights", grid.length, k, cells);
    pic.text("map_title", `attention weights (largest ${nw_fmt(largest)})`);
  },
  summary(model, input, result) {
    let best = 0;
    result.query_weights.forEach((v, i) => { if (v > result.query_weights[best]) best = i; });
    return `The query x = ${nw_fmt(input.query)} gets \u0177 = ${nw_fmt(result.answer)}; it puts ` +
           `${nw_fmt(result.query_weights[best])} of its weight on the point at x = ` +
           `${nw_fmt(input.x[best])} (y = ${nw_fmt(input.y[best])}).`;
  },
  /** Drag a point (within 10 px of it) or the query (anywhere else in the left Axes). */
  pointer(event, model, layouts, input, drag) {
    const l = layouts.points;
    const [ax, ay, aw, ah] = l.rect;
    const [x0, x1] = l.xlim;
    const [y0, y1] = l.ylim;
    const dataX = Math.min(Math.max(x0 + ((event.x - ax) / aw) * (x1 - x0), model.x_range[0]), model.x_range[1]);
    const dataY = Math.min(Math.max(y0 + ((ay + ah - event.y) / ah) * (y1 - y0), model.y_range[0]), model.y_range[1]);
    if (event.type === "down") {
      if (event.x < ax || event.x > ax + aw || event.y < ay || event.y > ay + ah) return null;
      let near = -1;
      let best = 10;
      input.x.forEach((x, i) => {
        const [px, py] = LivePicture.pixel(l, x, input.y[i]);
        const d = Math.hypot(px - event.x, py - event.y);
        if (d <= best) [near, best] = [i, d];
      });
      drag.what = near >= 0 ? near : "query";
    }
    if (drag.what === undefined) return null;
    // What moves is written to 2 decimals; the rest keep their values (shortest form).
    const query = drag.what === "query" ? nw_fmt(dataX) : String(input.query);
    const pairs = input.x.map((x, i) => (i === drag.what ? `${nw_fmt(dataX)} ${nw_fmt(dataY)}`
                                                           : `${x} ${input.y[i]}`));
    if (event.type === "up") drag.what = undefined;
    return `${query} | ${pairs.join(", ")}`;
  },
};
