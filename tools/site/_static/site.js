// The course site's own script (loaded deferred on every page, tools/site/conf.py): what the
// pages do beyond the theme and the views.

// Wide page views. view.js writes on each view the figure's width as drawn (data-width) and the
// least it may shrink to with its text readable (data-min-width). On a desktop (the theme's
// 992 px, where its full-width cells widen), a view whose least width exceeds the column gets
// an output area as wide as the figure, up to the page's right edge less a gutter; the table of
// contents, in that margin, folds to its title while such a view is in sight (the theme's own
// "hide" class). Anything wider, or on a phone, scrolls in the view's own box (view.js).
(() => {
  const DESKTOP = matchMedia("(min-width: 992px)");
  const GUTTER = 24; // CSS px between a wide figure and the page's right edge
  const wide = new Set(); // outputs widened and in sight
  const toc = () => document.querySelector("div.bd-sidebar-secondary");
  const sight = new IntersectionObserver((entries) => {
    for (const e of entries) (e.isIntersecting ? wide.add(e.target) : wide.delete(e.target));
    toc()?.classList.toggle("hide", wide.size > 0);
    toc()?.classList.toggle("ahv-folded", wide.size > 0);
  });

  function widen() {
    for (const view of document.querySelectorAll(".ahv-view[data-min-width]")) {
      const out = view.closest("div.cell_output");
      if (!out) continue;
      const column = out.parentElement.clientWidth;
      let width = 0;
      if (DESKTOP.matches && Number(view.dataset.minWidth) > column) {
        const room = document.documentElement.clientWidth - out.getBoundingClientRect().left - GUTTER;
        width = Math.min(Number(view.dataset.width), room);
      }
      const was = out.classList.contains("ahv-wide");
      if (width > column) {
        out.classList.add("ahv-wide");
        out.style.width = `${Math.floor(width)}px`;
        if (!was) sight.observe(out);
      } else if (was) {
        out.classList.remove("ahv-wide");
        out.style.width = "";
        sight.unobserve(out);
        wide.delete(out);
        toc()?.classList.toggle("hide", wide.size > 0);
        toc()?.classList.toggle("ahv-folded", wide.size > 0);
      }
    }
  }

  let queued = false;
  const later = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; widen(); });
  };
  // A view drawn (or redrawn with another scene) sets data-min-width; the window resizes.
  new MutationObserver(later).observe(document.documentElement,
    { subtree: true, attributes: true, attributeFilter: ["data-min-width"] });
  addEventListener("resize", later);
  later();
})();

// The phone's menu and outline buttons. Below the theme's 992 px the sidebars open as dialogs,
// but the theme's script wires only the first button of each kind (document.querySelector), a
// hidden one in its header; the buttons a phone reader sees, in the article's header, did
// nothing (pydata-sphinx-theme issue 2451). Below 992 px a click on any of them is the first's.
(() => {
  const NARROW = matchMedia("(max-width: 991.98px)");
  for (const kind of ["primary", "secondary"]) {
    const [wired, ...others] = document.querySelectorAll(`button.${kind}-toggle`);
    for (const button of others) {
      button.addEventListener("click", (e) => {
        if (!NARROW.matches || !wired) return;
        e.preventDefault();
        e.stopImmediatePropagation();
        wired.click();
      }, { capture: true });
    }
  }
})();
