// The site's renderer of the notebooks' page views, in place of the Jupyter widget renderer
// (html-manager's embed-amd.js, require.js and anywidget: 3.6 MB, render-blocking in <head>).
// Loaded as an async module on the pages that hold widgets only (tools/site/conf.py).
//
// Every view the site displays is an anywidget model (AnyModel) whose `_esm` is
// helpers/widgets/view.js: a module whose default export is {render}. This file reads the
// widget state MyST-NB saved for the page (the build moves it out of the page's <head> into a
// file the state's <script> names in data-src, fetched here, so that the text never waits for
// the figures' data; inline state is read as it is), imports each distinct `_esm` once (a Blob URL), gives
// it a model with what anywidget's model offers a render function (get, set, on, off,
// save_changes; "change:<name>" events), and renders it where the view's placeholder is, in a
// div.widget-subarea as html-manager did. No kernel: save_changes keeps the change in the page.
// A model it cannot draw (not an anywidget model with an ES module) is said so in the page.

const STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';
const VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';

const modules = new Map(); // _esm source → Promise of its module (one import per distinct source)
const models = new Map(); // model id → model (two views of one model share it, and its events)

function importSource(source) {
  if (!modules.has(source)) {
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    modules.set(source, import(url).finally(() => URL.revokeObjectURL(url)));
  }
  return modules.get(source);
}

/** What anywidget gives a render function as `model`, over one model's saved state. */
function createModel(state) {
  const attrs = { ...state };
  const listeners = new Map(); // event name → Set of callbacks
  const emit = (name, ...args) => listeners.get(name)?.forEach((cb) => cb(...args));
  return {
    get: (name) => attrs[name],
    set(name, value) {
      const old = attrs[name];
      attrs[name] = value;
      if (old !== value) {
        emit(`change:${name}`, value);
        emit("change");
      }
    },
    on(name, callback) {
      if (!listeners.has(name)) listeners.set(name, new Set());
      listeners.get(name).add(callback);
    },
    off(name, callback) {
      if (!name) listeners.clear();
      else if (!callback) listeners.delete(name);
      else listeners.get(name)?.delete(callback);
    },
    save_changes() {}, // no kernel to send the change to: it stays in the page
    send() {},
    widget_manager: null,
  };
}

/** Say in the page, where the view would be, why it is not there (never a blank). */
function refuse(el, message) {
  const p = document.createElement("p");
  p.className = "ahv-error";
  p.setAttribute("role", "alert");
  p.textContent = message;
  el.replaceChildren(p);
}

async function renderView(placeholder, savedState) {
  const el = document.createElement("div");
  el.className = "widget-subarea";
  placeholder.before(el);
  let id = "?";
  try {
    id = JSON.parse(placeholder.textContent).model_id;
    const saved = (await savedState)[id];
    if (!saved) throw new Error(`the page holds no state for widget ${id}`);
    const esm = saved.state?._esm;
    if (saved.model_name !== "AnyModel" || typeof esm !== "string") {
      refuse(el, `This figure cannot be shown on the site: it is a ${saved.model_name} widget ` +
                 `(${saved.model_module}), which needs a Jupyter kernel. Open the notebook to use it.`);
      return;
    }
    if (!models.has(id)) models.set(id, createModel(saved.state));
    const model = models.get(id);
    if (saved.state._css && !document.querySelector(`style[data-anywidget="${id}"]`)) {
      const style = Object.assign(document.createElement("style"), { textContent: saved.state._css });
      style.dataset.anywidget = id;
      document.head.append(style);
    }
    const module = await importSource(esm);
    let widget = module.default ?? module;
    if (typeof widget === "function") widget = await widget(); // anywidget's factory form
    await widget.initialize?.({ model });
    await widget.render({ model, el });
  } catch (e) {
    refuse(el, `This figure could not be drawn (widget ${id}): ${e?.message ?? e}`);
    console.error(e);
  }
}

/** The page's saved widget state: fetched from the file its <script> names, or read inline. */
async function loadState() {
  const script = document.querySelector(STATE);
  if (!script?.dataset.src) return JSON.parse(script?.textContent || "{}").state || {};
  const response = await fetch(script.dataset.src);
  if (!response.ok) throw new Error(`the figures' data (${script.dataset.src}) did not load: ` +
                                    `HTTP ${response.status}`);
  return (await response.json()).state || {};
}

// Loaded async: the state's fetch starts now; the views already parsed are drawn once it has
// arrived, the others once the page is parsed too.
const state = loadState();
state.catch(() => {}); // each view says why it is not drawn (renderView)
const done = new WeakSet();
// A placeholder the parser may still be filling (no node after it yet, the page still loading)
// waits for DOMContentLoaded: read early, its JSON was cut ("Unexpected end of JSON input", seen
// once on 09 in a loaded test run).
const parsed = (s) => document.readyState !== "loading" || s.nextSibling !== null;
const renderParsed = () => Promise.all([...document.querySelectorAll(VIEW)]
  .filter((s) => parsed(s) && !done.has(s) && done.add(s)).map((s) => renderView(s, state)));
// After the next frame: the page's text is painted first, the views' decoding comes after it.
requestAnimationFrame(() => setTimeout(() => {
  renderParsed();
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", renderParsed);
}));
