// The reading edition's small behaviours (loaded deferred on every page, tools/site/conf.py):
// a copy button on each code block, folded solutions printed open, wide equations reachable
// by keyboard. Nothing here is needed to read a page; nothing is fetched.

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

// A display equation wider than its column scrolls in its own box (book.css); such a box takes
// keyboard focus so it can be scrolled without a mouse. Checked once MathJax has typeset the
// page (MathJax.js loads async: it has run by the load event), and after the window resizes.
function markWideEquations() {
  for (const box of document.querySelectorAll("div.math")) {
    const wide = box.scrollWidth > box.clientWidth + 1;
    if (wide && !box.hasAttribute("tabindex")) {
      box.tabIndex = 0;
      box.setAttribute("role", "group");
      box.setAttribute("aria-label", "Equation (scrolls sideways)");
    } else if (!wide && box.hasAttribute("tabindex")) {
      for (const name of ["tabindex", "role", "aria-label"]) box.removeAttribute(name);
    }
  }
}
if (document.querySelector("div.math")) {
  const afterTypeset = () => window.MathJax?.Hub?.Queue(markWideEquations) ?? markWideEquations();
  if (document.readyState === "complete") afterTypeset();
  else addEventListener("load", afterTypeset);
  let pending = 0;
  addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(markWideEquations, 200);
  });
}
