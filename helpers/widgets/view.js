// Page view (anywidget ES module): draws a scene, format v1 (see helpers/widgets/page.py), on a
// canvas under native labelled controls. Every state is prepared once when a scene arrives, so a
// move only looks up which prepared ops to draw: no Path2D or ImageData is made per move.
// The controls take the page's font; the canvas is named for screen readers by the figure's
// titles and the controls' values; on a narrow page the figure shrinks to fit, but never its
// smallest text below MIN_TEXT_PX: past that, the figure scrolls sideways in its own box, which
// then takes keyboard focus (a named region) and says under it that it scrolls.

const FONT = '"DejaVu Sans", "Bitstream Vera Sans", Verdana, Arial, sans-serif';
const PROBE_FONT = "1px serif"; // cssFont's test: a font string the browser rejects leaves this
const NO_DASH = [];
const MIN_TEXT_PX = 9; // CSS px: the smallest text a narrow page may shrink the figure's text to
// The view and its controls in the page's own font (a browser gives inputs, selects and
// outputs a font of their own unless told to inherit); labels wrap between words on a narrow page
// (inside a word only if it alone is wider than its column: "temperatu/re" measured at 390 px); the
// figure scrolls sideways in its own box (.ahv-figure) when wider than the page, never the page.
// Controls are at least 24 px tall (a touch target); a select takes the field colours of the
// page's colour scheme (Field, FieldText) for its text and its ground together: its text
// inherited alone measured 2.77:1 on a dark-scheme select.
const CSS = `
.ahv-view { font: inherit; color: inherit; max-width: 100%; min-width: 0; }
.ahv-controls { display: grid; gap: 0.3em 0.8em; align-items: center; margin: 0 0 0.5em;
  grid-template-columns: fit-content(50%) minmax(6em, 24em) max-content; }
.ahv-controls > * { min-width: 0; }
.ahv-controls :is(label, input, select, output) { font: inherit; color: inherit; }
.ahv-controls label { overflow-wrap: break-word; }
.ahv-controls select { max-width: 100%; min-height: 24px; background-color: Field; color: FieldText; }
.ahv-controls input[type="range"] { width: 100%; height: 24px; margin: 0; }
.ahv-controls input[type="checkbox"] { justify-self: start; margin: 0; width: 24px; height: 24px; }
.ahv-controls output { font-variant-numeric: tabular-nums; min-width: 5ch; }
.ahv-controls :is(input, select):focus-visible, .ahv-figure:focus-visible {
  outline: 2px solid #1a73e8; outline-offset: 2px; }
.ahv-figure { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
.ahv-cue { display: none; margin: 0.2em 0 0; font-size: 0.875em; }
.ahv-view[data-overflow] .ahv-cue { display: block; }
canvas.ahv-canvas { display: block; }
img.ahv-canvas { display: block; max-width: 100%; height: auto; }
.ahv-error { color: #b00020; font: inherit; }
`;
// Element ids must be unique in the page: anywidget evaluates this module once per model, so
// a counter here would restart at 1 for each view; the count lives on the page instead.
const nextViewId = () => (globalThis.__ahvViews = (globalThis.__ahvViews || 0) + 1);

/** Add the stylesheet to the page once, however many views there are (its id names this
 * version: a page may hold views of an older module, with its own stylesheet). */
function injectStyle() {
  if (document.getElementById("ahv-style-4")) return;
  const style = document.createElement("style");
  style.id = "ahv-style-4";
  style.textContent = CSS;
  document.head.append(style);
}

/** base64 → bytes. */
const unbase64 = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

/** The `scene` trait (base64 of zlib-compressed JSON) → the scene object. */
async function decodeScene(b64) {
  const stream = new Blob([unbase64(b64)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return JSON.parse(await new Response(stream).text());
}

/** Value index of control `i` in `index`, clamped: an index from before a new scene may not fit. */
function valueAt(controls, index, i) {
  const v = Math.trunc(Number(index?.[i]) || 0);
  return Math.min(Math.max(v, 0), controls[i].values.length - 1);
}

/** The state id that `slot` draws for the controls' value `index` (row-major, last dep fastest). */
export function stateIndex(slot, controls, index) {
  let k = 0;
  for (const d of slot.deps) k = k * controls[d].values.length + valueAt(controls, index, d);
  return slot.table[k];
}

/** "#rrggbbaa" (or "#rrggbb") → [r, g, b, a] bytes, for ImageData. */
function rgba(hex) {
  const n = (i) => parseInt(hex.slice(i, i + 2), 16);
  return [n(1), n(3), n(5), hex.length >= 9 ? n(7) : 255];
}

let probe = null; // a 2D context on no page, for cssFont
const accepted = new Set(); // fonts cssFont has checked: a scene has few, used many times

/** The CSS font of a text op (weight: a number 1..1000, or a CSS keyword such as "bold";
 * family: the face matplotlib drew, when not DejaVu Sans). Throws if the browser rejects it:
 * it would silently draw 10px sans-serif instead. */
export function cssFont(size, weight, style, family) {
  const face = family ? `"${String(family).replace(/["\\]/g, "")}", ${FONT}` : FONT;
  const font = `${style || "normal"} ${weight || "normal"} ${size}px ${face}`;
  if (accepted.has(font)) return font;
  probe ||= document.createElement("canvas").getContext("2d");
  probe.font = PROBE_FONT;
  probe.font = font;
  if (probe.font === PROBE_FONT) throw new Error(`page view: the browser rejects the font ${font}`);
  accepted.add(font);
  return font;
}

/** An op's clip: null, [x, y, w, h], or [x, y, w, h, svg path data] → null or {rect, path}. */
const prepareClip = (clip) =>
  clip ? { rect: clip.slice(0, 4), path: clip[4] ? new Path2D(clip[4]) : null } : null;

/** One op of the format → a prepared op holding what drawing it needs (Path2D, bitmap, font). */
function prepare(op) {
  const [kind, ...a] = op;
  if (kind === "p") {
    // cap, join (canvas names) and dashOffset are absent from older scenes: butt, round, 0.
    const [d, fill, stroke, lw, dash, clip, cap, join, dashOffset] = a;
    return { kind, path: new Path2D(d), fill, stroke, lw, dash: dash || NO_DASH,
             cap: cap || "butt", join: join || "round", dashOffset: dashOffset || 0,
             clip: prepareClip(clip) };
  }
  if (kind === "i") {
    const [x, y, w, h, cols, rows, palette, data, clip] = a;
    const colours = palette.map(rgba);
    const bytes = unbase64(data);
    const image = new ImageData(cols, rows);
    // Each cell a little-endian palette index: 1 byte, 2 above 256 colours, 3 above 65,536.
    const n = palette.length > 65536 ? 3 : palette.length > 256 ? 2 : 1;
    if (bytes.length !== n * cols * rows) {
      throw new Error(`page view: ${bytes.length} bytes for ${cols} × ${rows} cells of ${n} each`);
    }
    for (let i = 0; i < cols * rows; i++) {
      let k = 0;
      for (let b = n - 1; b >= 0; b--) k = k * 256 + bytes[n * i + b];
      image.data.set(colours[k], 4 * i);
    }
    const bitmap = document.createElement("canvas");
    bitmap.width = cols;
    bitmap.height = rows;
    bitmap.getContext("2d").putImageData(image, 0, 0);
    return { kind, x, y, w, h, bitmap, clip: prepareClip(clip) };
  }
  if (kind === "t") {
    // clip and family: optional (family only where matplotlib drew another face)
    const [x, y, text, size, color, angle, weight, style, width, clip, family] = a;
    const font = cssFont(size, weight, style, family);
    // maxWidth: a little above matplotlib's width, so a wider browser font is squeezed, not cut.
    const maxWidth = width > 0 ? width * 1.05 : undefined;
    const rad = (-(angle || 0) * Math.PI) / 180; // counter-clockwise on a y-down canvas
    return { kind, x, y, text: String(text), font, color, rad, maxWidth, clip: prepareClip(clip) };
  }
  if (kind === "d") { // a title as drawn: no ink, the canvas's description
    const [text, rank] = a;
    return { kind, text: String(text), rank: Number(rank) || 0 };
  }
  throw new Error(`page view: unknown op ${JSON.stringify(kind)}`);
}

/** The smallest font size (figure px) of the text ops of a scene, in any state; 0 if none. */
export function smallestText(scene) {
  let least = Infinity;
  for (const ops of [scene.frame, ...scene.states]) {
    for (const op of ops) {
      if (Array.isArray(op) && op[0] === "t" && op[4] > 0) least = Math.min(least, op[4]);
    }
  }
  return Number.isFinite(least) ? least : 0;
}

/** The scale of a figure `width` px wide in a box `room` px wide whose smallest text is `text`
 * px: fit the box, but never shrink that text below MIN_TEXT_PX, nor grow the figure. */
export function fitScale(width, room, text) {
  if (!(room > 0) || !(width > 0)) return 1; // not laid out (a hidden tab): as drawn
  return Math.min(1, Math.max(room / width, text > 0 ? MIN_TEXT_PX / text : 0));
}

/** What a screen reader says of the canvas: its titles as drawn (suptitles first), then each
 * control's "label = value"; the figure's label when it has no title. */
export function describe(titles, controls, current, fallback) {
  const said = titles.slice().sort((a, b) => a.rank - b.rank).map((d) => d.text).join("; ");
  const values = controls.map((c, i) => `${c.label} = ${c.values[current[i]]}`).join(", ");
  return [said || fallback, values].filter(Boolean).join(". ");
}

/** Draw one prepared op on `ctx` (its transform already maps figure CSS pixels). */
function draw(ctx, op) {
  if (op.kind === "d") return;
  ctx.save();
  if (op.clip) { // the rectangle, then the clip path if any: the clips intersect
    ctx.beginPath();
    ctx.rect(...op.clip.rect);
    ctx.clip();
    if (op.clip.path) ctx.clip(op.clip.path, "nonzero");
  }
  if (op.kind === "p") {
    if (op.fill) {
      ctx.fillStyle = op.fill;
      ctx.fill(op.path, "nonzero");
    }
    if (op.stroke && op.lw > 0) {
      ctx.strokeStyle = op.stroke;
      ctx.lineWidth = op.lw;
      ctx.lineJoin = op.join;
      ctx.lineCap = op.cap;
      // Matplotlib's Agg sets the miter limit (a ratio, as here) to the line width in pixels
      if (op.join === "miter") ctx.miterLimit = op.lw;
      ctx.setLineDash(op.dash);
      ctx.lineDashOffset = op.dashOffset;
      ctx.stroke(op.path);
    }
  } else if (op.kind === "i") {
    ctx.imageSmoothingEnabled = false; // nearest neighbour: each cell keeps its exact colour
    ctx.drawImage(op.bitmap, op.x, op.y, op.w, op.h);
  } else {
    ctx.translate(op.x, op.y);
    if (op.rad) ctx.rotate(op.rad);
    ctx.font = op.font;
    ctx.fillStyle = op.color; // textAlign "left", textBaseline "alphabetic": the defaults
    if (op.maxWidth === undefined) ctx.fillText(op.text, 0, 0);
    else ctx.fillText(op.text, 0, 0, op.maxWidth);
  }
  ctx.restore();
}

/** One row of the controls grid (label | input | value): its elements, the event a move fires,
 * show(v) to display value index v, read() for the index a move chose. */
function buildControl(c, id) {
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = c.label;
  let input;
  const output = document.createElement("output");
  if (c.kind === "range") {
    input = document.createElement("input");
    Object.assign(input, { type: "range", min: "0", max: String(c.values.length - 1), step: "1" });
    output.htmlFor = id;
  } else if (c.kind === "select") {
    input = document.createElement("select");
    for (const v of c.values) input.append(new Option(v, v));
  } else if (c.kind === "checkbox") {
    input = document.createElement("input");
    input.type = "checkbox";
  } else {
    throw new Error(`page view: unknown control kind ${JSON.stringify(c.kind)}`);
  }
  input.id = id;
  input.dataset.control = c.name;
  input.setAttribute("aria-label", c.label); // the full label, whatever the layout shows
  // JupyterLab's command-mode shortcuts (arrows move between cells) would take the keys a
  // focused control needs; this attribute, on the control itself, tells Lab to leave them.
  input.setAttribute("data-lm-suppress-shortcuts", "true");
  // Show value v (an index) in the input, and for a range in its <output> and aria-valuetext.
  const show = (v) => {
    if (c.kind === "range") {
      input.value = String(v);
      output.value = c.values[v];
      input.setAttribute("aria-valuetext", c.values[v]);
    } else if (c.kind === "select") input.selectedIndex = v;
    else input.checked = v === 1;
  };
  const read = () =>
    c.kind === "range" ? +input.value : c.kind === "select" ? input.selectedIndex : +input.checked;
  // "input" for a range: every step of a drag redraws; "change" for the others.
  const event = c.kind === "range" ? "input" : "change";
  return { row: [label, input, output], input, event, show, read };
}

async function render({ model, el }) {
  injectStyle();
  const uid = nextViewId();
  const root = document.createElement("div");
  root.className = "ahv-view";
  root.setAttribute("role", "group");
  el.replaceChildren(root);
  let redraws = 0;
  let generation = 0; // the latest scene; an older one that finishes decoding later is dropped
  let view = null; // the current scene, its canvas, controls and prepared ops; see build()
  let dom = null; // AbortController of the current controls' DOM listeners
  let resized = null; // ResizeObserver of the current figure's box

  /** Size the canvas for the figure's scale in its box; true if that changed anything. */
  function resize() {
    const { scene, canvas } = view;
    const scale = fitScale(scene.width, view.box.clientWidth, view.minText);
    // Device pixels per figure pixel: first draw, page zoom, another screen, another scale.
    const k = scale * (window.devicePixelRatio || 1);
    if (scale === view.scale && k === view.k) return false;
    Object.assign(view, { scale, k });
    // Its size is set here alone (an older module's stylesheet may say max-width: 100%).
    Object.assign(canvas.style, { width: `${scene.width * scale}px`,
                                  height: `${scene.height * scale}px`, maxWidth: "none" });
    canvas.width = Math.round(scene.width * k);
    canvas.height = Math.round(scene.height * k);
    root.dataset.scale = String(scale);
    return true;
  }

  /** Whether the figure is wider than its box (it scrolls sideways): then the box takes
   * keyboard focus (arrow keys scroll it), is a region named for the figure, and the cue under
   * it shows. Checked on every resize of the box, even when the figure's scale stays. */
  function markOverflow() {
    const { box, canvas, scene } = view;
    const over = canvas.getBoundingClientRect().width > box.clientWidth + 0.5;
    if (over === (root.dataset.overflow !== undefined)) return;
    if (over) {
      root.dataset.overflow = "";
      Object.assign(box, { tabIndex: 0 });
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", `${scene.title}: wider than the page, scrolls sideways`);
    } else {
      delete root.dataset.overflow;
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  }

  function redraw() {
    const t0 = performance.now();
    const { scene, canvas, ctx, states, current } = view;
    resize();
    const { k } = view;
    // White over every device pixel (a figure scaled to a fractional height leaves a partly
    // covered last row, which blended with the previous redraw's when filled in figure px).
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.setTransform(k, 0, 0, k, 0, 0);
    const titles = [];
    const drawAll = (op) => (op.kind === "d" ? titles.push(op) : draw(ctx, op));
    if (view.live) liveCompute();
    for (const item of view.frame) {
      if (item.live !== undefined) view.live.ops?.get(item.live)?.forEach(drawAll);
      else if (item.slot === undefined) drawAll(item);
      else states[stateIndex(scene.slots[item.slot], scene.controls, current)].forEach(drawAll);
    }
    const label = describe(titles, scene.controls, current, scene.title);
    if (canvas.getAttribute("aria-label") !== label) canvas.setAttribute("aria-label", label);
    root.dataset.redraws = String(++redraws);
    root.dataset.lastRedrawMs = (performance.now() - t0).toFixed(3); // how long this redraw took
  }

  /** A live view (helpers/widgets/live/runtime.js): the input under the controls' values →
   * the parts' ops; a bad input keeps the last picture and says why; an engine that fails says
   * so in the page (and the console) instead of drawing something else. */
  function liveCompute() {
    const { live, scene, current } = view;
    try {
      if (live.compute(liveControls(scene, current)) && live.text !== model.get("text")) {
        model.set("text", live.text);
        try {
          model.save_changes();
        } catch {}
      }
    } catch (e) {
      live.message.textContent = `This view could not compute its picture: ${e?.message ?? e}`;
      console.error(e);
    }
  }

  // Show the current index in every input (setting .value fires no event).
  const showIndex = () => view.controls.forEach((ctl, i) => ctl.show(view.current[i]));

  function build(scene) {
    if (scene.version !== 1) throw new Error(`page view: scene version ${scene.version}, not 1`);
    dom?.abort();
    dom = new AbortController();
    const canvas = document.createElement("canvas");
    canvas.className = "ahv-canvas";
    canvas.setAttribute("role", "img");
    const box = Object.assign(document.createElement("div"), { className: "ahv-figure" });
    box.append(canvas);
    const cue = Object.assign(document.createElement("p"), { className: "ahv-cue",
      textContent: "\u2194 Wider than the page: scroll the figure sideways to see all of it." });
    cue.setAttribute("aria-hidden", "true"); // the region's name says it to a screen reader
    const grid = document.createElement("div");
    grid.className = "ahv-controls";
    const controls = scene.controls.map((c, i) => buildControl(c, `ahv-${uid}-${i}`));
    view = {
      scene, canvas, box, controls, ctx: canvas.getContext("2d", { alpha: false }), scale: 0, k: 0,
      minText: smallestText(scene),
      // Every op prepared now, so a move only looks up ({slot} markers stay as they are).
      frame: scene.frame.map((item) => ("slot" in item || "live" in item ? item : prepare(item))),
      states: scene.states.map((ops) => ops.map(prepare)),
      current: scene.controls.map((_, i) => valueAt(scene.controls, model.get("index"), i)),
      live: null,
    };
    if (scene.live) {
      if (typeof liveBuild !== "function") throw new Error("a live view needs the live runtime");
      view.live = liveBuild(scene, model, uid, dom.signal, () => redraw(), canvas);
    }
    controls.forEach((ctl, i) => {
      grid.append(...ctl.row);
      ctl.input.addEventListener(ctl.event, () => {
        // Redraw first (synchronously), then sync: with no kernel save_changes may throw.
        const current = view.current.slice();
        current[i] = ctl.read();
        view.current = current;
        ctl.show(current[i]);
        redraw();
        model.set("index", current);
        try {
          model.save_changes();
        } catch {}
      }, { signal: dom.signal });
    });
    root.dataset.view = scene.title;
    // The figure's width as drawn and the least it may shrink to (its smallest text at
    // MIN_TEXT_PX), CSS px: a page may give a view more room than its column (the site does).
    root.dataset.width = String(scene.width);
    root.dataset.minWidth = String(scene.width * fitScale(scene.width, 1e-9, view.minText));
    delete root.dataset.overflow;
    root.removeAttribute("aria-label"); // the canvas says what the figure shows
    root.replaceChildren(...(controls.length ? [grid] : []), ...(view.live?.elements ?? []), box,
                         cue, ...(view.live?.after ?? []));
    showIndex();
    redraw();
    markOverflow();
    // The page got narrower or wider, or a hidden view was shown: rescale (and redraw) if need be.
    resized?.disconnect();
    resized = new ResizeObserver(() => {
      if (view?.box !== box) return;
      if (resize()) redraw();
      markOverflow();
    });
    resized.observe(box);
  }

  /** Say, in the page, why there is no view to move; `still`: a PNG (base64) to show under it. */
  function refuse(message, still = null, title = "") {
    view = null;
    for (const k of ["overflow", "width", "minWidth"]) delete root.dataset[k];
    resized?.disconnect();
    const p = Object.assign(document.createElement("p"), { className: "ahv-error" });
    p.setAttribute("role", "alert");
    p.textContent = message;
    const parts = [p];
    if (still) {
      parts.push(Object.assign(document.createElement("img"), {
        className: "ahv-canvas", src: `data:image/png;base64,${still}`, alt: title,
      }));
    }
    root.replaceChildren(...parts);
  }

  async function load() {
    const mine = ++generation;
    if (!model.get("scene")) { // recorded when its cell is displayed or finishes, in a kernel
      refuse("This view has no recordings yet: run its cell in a kernel to record them.");
      return;
    }
    try {
      const scene = await decodeScene(model.get("scene"));
      if (mine !== generation) return;
      // A figure the page cannot replay (page.py's UnsupportedDrawing): the reason, and a still.
      if (scene.error) refuse(scene.error, scene.png, scene.title);
      else build(scene);
    } catch (e) {
      if (mine !== generation) return;
      refuse(`This view could not be drawn: ${e?.message ?? e}`);
      console.error(e);
    }
  }

  // Another view of this model, or Python, moved a control. Our own set fires this too: the
  // comparison makes that a no-op, so a move redraws once.
  const onIndex = () => {
    if (!view) return;
    const index = model.get("index");
    const next = view.scene.controls.map((_, i) => valueAt(view.scene.controls, index, i));
    if (next.every((v, i) => v === view.current[i])) return;
    view.current = next;
    showIndex();
    redraw();
  };
  const onScene = () => void load();
  // Python set a live view's input (view.set_text): show it and draw it.
  const onText = () => {
    const text = model.get("text");
    if (!view?.live || typeof text !== "string" || text === view.live.input.value) return;
    view.live.input.value = text;
    redraw();
  };
  model.on("change:text", onText);
  model.on("change:index", onIndex);
  model.on("change:scene", onScene);
  await load();
  return () => {
    generation++; // a decode still under way is dropped
    dom?.abort();
    resized?.disconnect();
    model.off("change:index", onIndex);
    model.off("change:scene", onScene);
    model.off("change:text", onText);
  };
}

// Default export only: anywidget 0.9 warns in the console (deprecation) when a module exports
// `render` by name.
export default { render };
