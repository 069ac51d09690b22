// Live views' runtime (concatenated after view.js, before the view's engine files: one module).
// A live scene (helpers/widgets/live/__init__.py) carries a model's weights, the layouts of its
// input-dependent parts and the frame recorded from matplotlib; the engine (LIVE_ENGINE, defined
// by the view's own file) parses the reader's input, runs the forward pass and draws with a
// LivePicture, which turns results into the ops view.js draws: heatmap cells through the
// recorded colour table and norm, tick labels and marks as recorded stamps moved to their ticks,
// texts in their recorded style, lines and points through the Axes' data-to-pixel map.
// A bad input leaves the last picture and says in the page what is accepted.

/** {"shape", "f32": base64} anywhere in `value` → {shape, data: Float32Array} (little-endian). */
function liveTensors(value) {
  if (Array.isArray(value)) return value.map(liveTensors);
  if (value && typeof value === "object") {
    if (typeof value.f32 === "string" && Array.isArray(value.shape)) {
      const bytes = unbase64(value.f32);
      const view = new DataView(bytes.buffer);
      const data = new Float32Array(bytes.length / 4);
      for (let i = 0; i < data.length; i++) data[i] = view.getFloat32(4 * i, true);
      const size = value.shape.reduce((a, b) => a * b, 1);
      if (size !== data.length) {
        throw new Error(`live model: ${data.length} values for shape [${value.shape}]`);
      }
      return { shape: value.shape, data };
    }
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = liveTensors(v);
    return out;
  }
  return value;
}

/** W x (+ b), in float64: W {shape: [out, in], data} (row-major, as torch's Linear weight),
 * x of length in, b {shape: [out], data} or null/undefined. The engines' dense layer. */
function liveLinear(W, x, b) {
  const [out, inn] = W.shape;
  const w = W.data;
  const y = new Float64Array(out);
  for (let o = 0; o < out; o++) {
    let s = 0;
    const row = o * inn;
    for (let i = 0; i < inn; i++) s += w[row + i] * x[i];
    y[o] = b ? s + b.data[o] : s;
  }
  return y;
}

/** Matplotlib's colour of `v` under a layout's norm and colour table (Colormap.__call__). */
function liveColourIndex(v, layout) {
  const { norm } = layout;
  const n = layout.lut.length;
  if (Number.isNaN(v)) return -3; // bad
  let x;
  if (norm.vmin === norm.vmax) x = 0;
  else {
    if (norm.clip) v = Math.min(Math.max(v, norm.vmin), norm.vmax);
    x = (v - norm.vmin) / (norm.vmax - norm.vmin);
    if (norm.kind === "power" && x > 0) x = Math.pow(x, norm.gamma);
  }
  let xa = x * n;
  if (xa === n) xa = n - 1;
  if (xa < 0) return -1; // under
  if (xa >= n) return -2; // over
  return Math.trunc(xa);
}

/** What an engine draws with: each call makes the prepared ops of one marked part. */
class LivePicture {
  constructor(layouts) {
    this.layouts = layouts;
    this.ops = new Map(); // part name → prepared ops
    this.sizes = new Map(); // heatmap name → [rows, cols] (ticks follow them)
  }

  layout(name, type) {
    const l = this.layouts[name];
    if (!l) throw new Error(`live view: no part named ${JSON.stringify(name)}`);
    if (l.type !== type) throw new Error(`live view: part ${name} is a ${l.type}, not a ${type}`);
    return l;
  }

  heatmap(name, rows, cols, values) {
    const l = this.layout(name, "heatmap");
    if (!(rows > 0 && cols > 0) || values.length !== rows * cols) {
      throw new Error(`live view: heatmap ${name}: ${values.length} values for ${rows} × ${cols}`);
    }
    l.colours ||= { lut: l.lut.map(rgba), under: rgba(l.under), over: rgba(l.over), bad: rgba(l.bad) };
    const image = new ImageData(cols, rows);
    const c = l.colours;
    for (let i = 0; i < rows * cols; i++) {
      const k = liveColourIndex(Number(values[i]), l);
      image.data.set(k >= 0 ? c.lut[k] : k === -1 ? c.under : k === -2 ? c.over : c.bad, 4 * i);
    }
    const bitmap = document.createElement("canvas");
    bitmap.width = cols;
    bitmap.height = rows;
    bitmap.getContext("2d").putImageData(image, 0, 0);
    const [x, y, w, h] = l.rect;
    this.ops.set(name, [{ kind: "i", x, y, w, h, bitmap, clip: prepareClip(l.clip) }]);
  }

  ticks(name, labels) {
    const l = this.layout(name, "ticks");
    const [x0, y0, w, h] = l.rect;
    const n = labels.length;
    const ops = [];
    const marks = l.mark.map(prepare);
    labels.forEach((label, j) => {
      const stamp = l.stamps[label];
      if (!stamp) throw new Error(`live view: ${name} has no tick label ${JSON.stringify(label)}`);
      // The tick at cell j's centre; stamps were recorded at the first tick (l.anchor).
      const at = l.axis === "x" ? x0 + ((j + 0.5) * w) / n : y0 + ((j + 0.5) * h) / n;
      const dx = l.axis === "x" ? at - l.anchor : 0;
      const dy = l.axis === "x" ? 0 : at - l.anchor;
      for (const m of marks) ops.push(liveMoved(m, dx, dy));
      for (const op of stamp) {
        const p = prepare(op);
        ops.push(p.kind === "t" ? { ...p, x: p.x + (l.axis === "x" ? at : 0),
                                    y: p.y + (l.axis === "x" ? 0 : at) } : liveMoved(p, dx, dy));
      }
    });
    for (const op of l.fixed) ops.push(prepare(op));
    this.ops.set(name, ops);
  }

  text(name, string) {
    const l = this.layout(name, "text");
    const p = prepare(l.op);
    const op = { ...p, text: String(string), maxWidth: undefined };
    const ops = [];
    if (l.rank !== null && l.rank !== undefined) ops.push({ kind: "d", text: String(string), rank: l.rank });
    ops.push(op);
    this.ops.set(name, ops);
  }

  /** Data (x, y) → figure pixels (y down) in a line's or scatter's Axes. */
  static pixel(l, x, y) {
    const [x0, y0, w, h] = l.rect;
    const [a, b] = l.xlim;
    const [c, d] = l.ylim;
    return [x0 + ((x - a) / (b - a)) * w, y0 + h - ((y - c) / (d - c)) * h];
  }

  line(name, xs, ys) {
    const l = this.layout(name, "line");
    let d = "";
    let pen = "M";
    for (let i = 0; i < xs.length; i++) {
      if (!Number.isFinite(xs[i]) || !Number.isFinite(ys[i])) { pen = "M"; continue; }
      const [px, py] = LivePicture.pixel(l, xs[i], ys[i]);
      d += `${pen}${px} ${py}`;
      pen = "L";
    }
    this.ops.set(name, d ? [{ ...prepare(l.op), path: new Path2D(d) }] : []);
  }

  points(name, xs, ys) {
    const l = this.layout(name, "points");
    const marker = l.marker.map(prepare);
    const ops = [];
    for (let i = 0; i < xs.length; i++) {
      if (!Number.isFinite(xs[i]) || !Number.isFinite(ys[i])) continue;
      const [px, py] = LivePicture.pixel(l, xs[i], ys[i]);
      for (const m of marker) ops.push(liveMoved(m, px - l.anchor[0], py - l.anchor[1]));
    }
    this.ops.set(name, ops);
  }

  hide(name) {
    if (!this.layouts[name]) throw new Error(`live view: no part named ${JSON.stringify(name)}`);
    this.ops.set(name, []);
  }

  /** Every part drawn (or hidden): else the engine forgot one, which would leave it blank. */
  check() {
    const missing = Object.keys(this.layouts).filter((n) => !this.ops.has(n));
    if (missing.length) throw new Error(`live view: the engine drew no ${missing.join(", ")}`);
  }
}

/** A prepared path or text op moved by (dx, dy) (its clip stays where it is). */
function liveMoved(p, dx, dy) {
  if (p.kind === "t") return { ...p, x: p.x + dx, y: p.y + dy };
  if (p.kind === "p") {
    const path = new Path2D();
    path.addPath(p.path, new DOMMatrix([1, 0, 0, 1, dx, dy]));
    return { ...p, path };
  }
  throw new Error(`live view: cannot move a ${p.kind} op`);
}

const LIVE_CSS = `
.ahv-live { display: grid; gap: 0.25em; margin: 0 0 0.5em; }
.ahv-live :is(label, input, textarea) { font: inherit; color: inherit; }
.ahv-live :is(input, textarea) { width: 100%; box-sizing: border-box; min-height: 24px;
  background-color: Field; color: FieldText; font-family: ui-monospace, monospace; }
.ahv-live :is(input, textarea):focus-visible { outline: 2px solid #1a73e8; outline-offset: 2px; }
.ahv-live [aria-invalid="true"] { outline: 2px solid #b00020; }
.ahv-live .ahv-help { font-size: 0.875em; margin: 0; }
.ahv-live .ahv-message { margin: 0; min-height: 1.3em; }
.ahv-live .ahv-message:not(:empty) { color: #b00020; }
.ahv-summary { margin: 0.3em 0 0; font-size: 0.875em; }
`;

/** The live part of a view: the input box, its message, the summary, and compute(current)
 * which parses the input and draws the current picture's ops (or keeps the last ones). */
function liveBuild(scene, model, uid, signal, onChange, canvas) {
  if (typeof LIVE_ENGINE === "undefined") {
    throw new Error("this live view's module has no engine (LIVE_ENGINE)");
  }
  if (LIVE_ENGINE.kind !== scene.live.kind) {
    throw new Error(`live view: engine ${LIVE_ENGINE.kind}, scene ${scene.live.kind}`);
  }
  if (!document.getElementById("ahv-live-style-1")) {
    const style = Object.assign(document.createElement("style"), { id: "ahv-live-style-1", textContent: LIVE_CSS });
    document.head.append(style);
  }
  const weights = liveTensors(scene.live.model);
  const spec = scene.live.input;
  const box = document.createElement("div");
  box.className = "ahv-live";
  const id = `ahv-${uid}-input`;
  const label = Object.assign(document.createElement("label"), { htmlFor: id, textContent: spec.label });
  const input = document.createElement(spec.rows > 1 ? "textarea" : "input");
  Object.assign(input, { id, spellcheck: false, autocomplete: "off" });
  if (spec.rows > 1) input.rows = spec.rows;
  else input.type = "text";
  input.setAttribute("autocapitalize", "off");
  input.setAttribute("data-lm-suppress-shortcuts", "true");
  input.dataset.live = scene.live.kind;
  const help = Object.assign(document.createElement("p"), { className: "ahv-help", id: `${id}-help`, textContent: spec.accepted });
  const message = Object.assign(document.createElement("p"), { className: "ahv-message", id: `${id}-message` });
  message.setAttribute("role", "alert");
  input.setAttribute("aria-describedby", `${help.id} ${message.id}`);
  const summary = Object.assign(document.createElement("p"), { className: "ahv-summary" });
  summary.setAttribute("aria-live", "polite");
  box.append(label, input, help, message);
  const text = model.get("text");
  input.value = typeof text === "string" && text ? text : spec.text;

  const live = {
    elements: [box], after: [summary], input, message, summary, weights,
    ops: null, // the last valid picture's ops by part name
    parsed: null, result: null, text: null,
    /** Parse the input under the controls' values; draw if it is valid. true if drawn anew. */
    compute(controls) {
      const parsed = LIVE_ENGINE.parse(input.value, weights, controls);
      if (!parsed || !parsed.ok) {
        // The reason; what is accepted is said just above the box (the help), not twice.
        const said = parsed?.message || "This input is not accepted.";
        message.textContent = said.endsWith(spec.accepted) && said !== spec.accepted
          ? said.slice(0, -spec.accepted.length).trim() : said;
        input.setAttribute("aria-invalid", "true");
        return false;
      }
      const result = LIVE_ENGINE.forward(weights, parsed.input, controls);
      const pic = new LivePicture(scene.live.layouts);
      LIVE_ENGINE.draw(pic, weights, parsed.input, result, controls);
      pic.check();
      Object.assign(live, { ops: pic.ops, parsed: parsed.input, result, text: input.value });
      message.textContent = "";
      input.removeAttribute("aria-invalid");
      const said = LIVE_ENGINE.summary(weights, parsed.input, result, controls);
      if (summary.textContent !== said) summary.textContent = said;
      return true;
    },
  };
  input.addEventListener("input", () => onChange(true), { signal });
  // An engine with a pointer handler is driven on the figure too (a drag edits the input text,
  // which stays the one source of the picture: the keyboard reaches everything through it).
  if (typeof LIVE_ENGINE.pointer === "function") {
    const drag = {};
    canvas.style.touchAction = "none";
    canvas.style.cursor = "crosshair";
    const on = (type) => (e) => {
      if (type !== "down" && drag.what === undefined) return;
      if (!live.parsed) return;
      const r = canvas.getBoundingClientRect();
      const k = r.width / scene.width; // CSS px per figure px
      const event = { type, x: (e.clientX - r.left) / k, y: (e.clientY - r.top) / k };
      const text = LIVE_ENGINE.pointer(event, weights, scene.live.layouts, live.parsed, drag);
      if (type === "down" && drag.what !== undefined) canvas.setPointerCapture?.(e.pointerId);
      if (typeof text === "string" && text !== input.value) {
        input.value = text;
        onChange(true);
      }
      if (type !== "move") e.preventDefault();
    };
    canvas.addEventListener("pointerdown", on("down"), { signal });
    canvas.addEventListener("pointermove", on("move"), { signal });
    canvas.addEventListener("pointerup", on("up"), { signal });
    canvas.addEventListener("pointercancel", on("up"), { signal });
  }
  return live;
}

/** The controls' values by name, as the engine reads them (a checkbox true/false). */
function liveControls(scene, current) {
  const out = {};
  scene.controls.forEach((c, i) => {
    out[c.name] = c.kind === "checkbox" ? current[i] === 1 : c.values[current[i]];
  });
  return out;
}
