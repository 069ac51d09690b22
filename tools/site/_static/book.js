// The reading edition's small behaviours (loaded deferred on every page, tools/site/conf.py):
// a copy button on each code block, folded solutions printed open, wide equations and tables
// reachable by keyboard. Nothing here is needed to read a page; nothing is fetched.

// A "Copy" button on each code cell and code block: it copies the code only (never the cell's
// output, which lives in .cell_output), as the text a reader would type.
for (const pre of document.querySelectorAll("article div.highlight > pre")) {
  if (pre.closest(".cell_output, .output")) continue;
  const block = pre.parentElement;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy-code";
  button.textContent = "Copy";
  button.setAttribute("aria-label", "Copy code");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(pre.innerText.replace(/\n$/, ""));
      button.textContent = "Copied";
    } catch {
      button.textContent = "Select and copy"; // no clipboard (a page opened from file://)
    }
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
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

// A display equation wider than its column, or a table of the documentation wider than a phone,
// scrolls in its own box (book.css, site.css). While it does, the box takes keyboard focus (arrow
// keys scroll it: tabindex 0, else -1, as the theme does for its own scroll boxes, tables among
// them), is named, and carries data-overflow (site.css draws the tables' edge from it). Checked
// once MathJax has typeset the page (MathJax.js loads async: it has run by the load event), and
// after the window resizes.
const SCROLL_BOXES = [
  ["div.math", "group", "Equation (scrolls sideways)"],
  [".pst-scrollable-table-container", "region", "Table, wider than the page: scrolls sideways"],
];
function markScrollBoxes() {
  for (const [selector, role, label] of SCROLL_BOXES) {
    for (const box of document.querySelectorAll(selector)) {
      const wide = box.scrollWidth > box.clientWidth + 1;
      box.tabIndex = wide ? 0 : -1;
      box.toggleAttribute("data-overflow", wide);
      if (wide) {
        box.setAttribute("role", role);
        box.setAttribute("aria-label", label);
      } else {
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    }
  }
}
if (document.querySelector(SCROLL_BOXES.map(([selector]) => selector).join(", "))) {
  const afterTypeset = () => window.MathJax?.Hub?.Queue(markScrollBoxes) ?? markScrollBoxes();
  if (document.readyState === "complete") afterTypeset();
  else addEventListener("load", afterTypeset);
  let pending = 0;
  addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(markScrollBoxes, 200);
  });
}
