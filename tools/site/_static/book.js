// The reading edition's small behaviours (loaded deferred on every page, tools/site/conf.py):
// a copy button on each code block, folded solutions printed open, wide equations and tables
// reachable by keyboard. Nothing here is needed to read a page; nothing is fetched.

// The words this script writes into a page, in the page's language (the Chinese edition,
// site/zh/, has lang="zh-CN").
const WORDS = document.documentElement.lang.startsWith("zh")
  ? { copy: "复制", copyCode: "复制代码", copied: "已复制", selectAndCopy: "请选中后复制",
      equation: "公式（可横向滚动）", table: "表格，比页面宽：可横向滚动" }
  : { copy: "Copy", copyCode: "Copy code", copied: "Copied", selectAndCopy: "Select and copy",
      equation: "Equation (scrolls sideways)", table: "Table, wider than the page: scrolls sideways" };

// A "Copy" button on each code cell and code block: it copies the code only (never the cell's
// output, which lives in .cell_output), as the text a reader would type.
for (const pre of document.querySelectorAll("article div.highlight > pre")) {
  if (pre.closest(".cell_output, .output")) continue;
  const block = pre.parentElement;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy-code";
  button.textContent = WORDS.copy;
  button.setAttribute("aria-label", WORDS.copyCode);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(pre.innerText.replace(/\n$/, ""));
      button.textContent = WORDS.copied;
    } catch {
      button.textContent = WORDS.selectAndCopy; // no clipboard (a page opened from file://)
    }
    setTimeout(() => { button.textContent = WORDS.copy; }, 2000);
  });
  block.classList.add("has-copy");
  block.prepend(button);
}

// Printing: the folded solutions and notes print open (a closed <details> hides its content
// whatever the print style says, in Chromium before 131 and Firefox); closed again afterwards.
// The check cells' code stays folded: it is the exercise's test, not the lesson.
// (book.css opens them too, with ::details-content, for print previews that fire no event.)
let openedForPrint = [];
addEventListener("beforeprint", () => {
  openedForPrint = [...document.querySelectorAll("article details:not([open])")]
    .filter((d) => !d.closest(".tag_hide-input"));
  for (const d of openedForPrint) d.open = true;
});
addEventListener("afterprint", () => {
  for (const d of openedForPrint) d.open = false;
  openedForPrint = [];
});

// Scroll boxes reachable by keyboard. A display equation wider than its column, or a table of
// the documentation wider than a phone, scrolls in its own box (book.css, site.css): while it
// does, the box takes keyboard focus (arrow keys scroll it: tabindex 0, else -1), is named, and
// carries data-overflow (site.css draws the tables' edge from it). Code blocks and outputs that
// scroll get tabindex 0 the same way: the theme's own rule (its addTabStopsToScrollableElements,
// which tools/build_site.py takes out of the theme's script: on load it read and set every
// block in turn, laying the whole page out again and again, 240 ms on a phone for 11). Checked
// when a box is first laid out (on a long page, when its section comes near the screen:
// book.css), when its size changes and when fonts arrive, by a ResizeObserver; all boxes read,
// then all written, so the page is laid out once a round.
const SCROLL_BOXES = [
  ["div.math", "group", WORDS.equation],
  [".pst-scrollable-table-container", "region", WORDS.table],
  ["pre, .cell_output > .output, .nboutput > .output_area, .jp-RenderedHTMLCommon", null, null],
];
const boxKinds = new Map(); // box → [role, label] (null: the theme's rule, tabindex only)
const laidOut = new Set(); // the boxes laid out so far
function markScrollBoxes(boxes) {
  const wide = [...boxes].map((box) => box.scrollWidth > box.clientWidth + 1
    || (!boxKinds.get(box)[0] && box.scrollHeight > box.clientHeight + 1));
  [...boxes].forEach((box, i) => {
    const [role, label] = boxKinds.get(box);
    const tabIndex = wide[i] ? 0 : -1;
    if (box.tabIndex !== tabIndex || !box.hasAttribute("tabindex")) box.tabIndex = tabIndex;
    if (!role || wide[i] === box.hasAttribute("data-overflow")) return;
    box.toggleAttribute("data-overflow", wide[i]);
    if (wide[i]) {
      box.setAttribute("role", role);
      box.setAttribute("aria-label", label);
    } else {
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  });
}
const sizes = new ResizeObserver((entries) => {
  const boxes = entries.map((e) => e.target);
  boxes.forEach((box) => laidOut.add(box));
  markScrollBoxes(boxes);
});
for (const [selector, role, label] of SCROLL_BOXES) {
  for (const box of document.querySelectorAll(selector)) {
    if (boxKinds.has(box)) continue;
    boxKinds.set(box, [role, label]);
    sizes.observe(box);
  }
}
// A font arriving (KaTeX's, the CJK subset) changes what a box holds, not the box's size.
document.fonts.addEventListener("loadingdone", () => markScrollBoxes(laidOut));

// The sections book.css lets the browser skip while the page loads: once it has loaded, they
// are laid out in order (a section before the sections in it) while the browser is idle, at
// most 8 ms at a time (a phone four times slower still answers within 50 ms). A section still
// skipped is laid out block by block: its blocks (paragraphs, cells, equations) each skipped
// first (.ahv-later), then the section (headings and placeholders: quick), then each block.
// A section already on the screen is only marked: its blocks are drawn already, and skipping
// them would move what the reader sees. What the reader sees stays where it is: a section laid
// out above it changes from its estimated height to its own, and each slice scrolls by what
// that moved (the browser's own scroll anchoring missed some: a match of the find bar, a
// glossary link's target, 10-12,000 px).
const sections = [...document.querySelectorAll("article.bd-article section section")];
const later = []; // blocks of the current section, not yet laid out
const whenIdle = window.requestIdleCallback ?? ((callback) => setTimeout(callback, 20));
const drawn = (el) => el.checkVisibility?.({ contentVisibilityAuto: true }) ?? true;
const article = document.querySelector("article.bd-article");

/** The first element of the article that starts on the reader's screen, and where it is. One
 * that starts above the screen would not do: a block still skipped there (its estimated height)
 * grows when it is laid out, moving what the reader sees and not its own top (measured: the
 * heading jumped to on 11 at 390 px moved 12,000 px). */
function placeOnScreen() {
  if (!article || scrollY <= 0) return null;
  const box = article.getBoundingClientRect();
  const x = box.left + box.width / 3; // inside the column's blocks, clear of its padding
  let first = null;
  for (let y = 8; y < innerHeight; y += 32) {
    const el = document.elementFromPoint(x, y);
    // A block's own element, not a section or the article around it (what grows above the
    // screen inside a section would move the content and not the section's top).
    if (el && article.contains(el) && !el.matches("section, article")) {
      const top = el.getBoundingClientRect().top;
      if (top >= 0) return { el, top };
      first ||= { el, top };
    }
  }
  return first;
}
function keepPlace(place) {
  const moved = place ? place.el.getBoundingClientRect().top - place.top : 0;
  // (instant: the theme's scroll-behavior is smooth, and an animated correction fights the next)
  if (Math.abs(moved) >= 1) scrollBy({ top: moved, behavior: "instant" });
}

function layOut() {
  const place = placeOnScreen();
  const end = performance.now() + 8;
  let done = false;
  while (performance.now() < end) {
    const block = later.shift();
    if (block) {
      block.classList.remove("ahv-later");
      void block.offsetHeight; // laid out now, within this slice
      continue;
    }
    const section = sections.shift();
    if (!section) {
      done = true;
      break;
    }
    const first = section.firstElementChild;
    if (first && !drawn(first)) {
      for (const child of section.children) {
        if (!/^(SECTION|H[1-6]|SCRIPT|STYLE)$/.test(child.tagName)) {
          child.classList.add("ahv-later");
          later.push(child);
        }
      }
    }
    section.dataset.shown = "";
    void section.offsetHeight;
  }
  keepPlace(place);
  if (!done) whenIdle(layOut, { timeout: 500 });
  else markLaidOut();
}
/** Says the page is whole (html[data-laid-out]): every section laid out, and the scroll boxes
 * marked (the ResizeObserver answers at the next frame's layout, so two frames later). What
 * looks the page over (the site's audits) waits for it. */
function markLaidOut() {
  requestAnimationFrame(() => requestAnimationFrame(() => {
    document.documentElement.dataset.laidOut = "";
  }));
}

// Reload and Back: the browser would restore the scroll offset, which with sections at their
// estimated heights points elsewhere (5,000-15,000 px off on 11). The page keeps the reader's
// place itself: the section at the top of the screen and where it was, saved as the reader
// scrolls (sessionStorage), scrolled back to when the page is opened again by a reload or Back.
const PLACE = `ahv-place:${location.pathname}`;
function restorePlace() {
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(PLACE) || "null");
  } catch {}
  const section = saved && document.getElementById(saved.id);
  if (!section) return;
  section.scrollIntoView({ behavior: "instant" }); // (under the theme's scroll-padding)
  scrollBy({ top: section.getBoundingClientRect().top - saved.top, behavior: "instant" });
}
if (sections.length) {
  history.scrollRestoration = "manual";
  let saving = 0;
  addEventListener("scroll", () => {
    clearTimeout(saving);
    saving = setTimeout(() => {
      const section = placeOnScreen()?.el.closest("article.bd-article section[id]");
      try {
        if (section) {
          sessionStorage.setItem(PLACE, JSON.stringify(
            { id: section.id, top: section.getBoundingClientRect().top }));
        } else sessionStorage.removeItem(PLACE);
      } catch {}
    }, 150);
  }, { passive: true });
  const how = performance.getEntriesByType?.("navigation")[0]?.type;
  if ((how === "reload" || how === "back_forward") && !location.hash) {
    restorePlace();
    addEventListener("load", restorePlace, { once: true }); // again, the page's height settled
  }
  if (document.readyState === "complete") whenIdle(layOut, { timeout: 1000 });
  else addEventListener("load", () => whenIdle(layOut, { timeout: 1000 }));
}
else markLaidOut();
