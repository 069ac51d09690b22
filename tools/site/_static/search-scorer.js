// Sphinx's search scorer for the course site (conf.py: html_search_scorer; Sphinx puts this in
// language_data.js). Sphinx's default weights, plus one rule: the landing page repeats every
// notebook's opening and title, so a word of a notebook also matches the landing page, often
// as a section title; it ranks below the notebooks (a title match's worth lower), not above.
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    return docname === "index" ? score - 15 : score;
  },
  // Sphinx 9's defaults (searchtools.js), which a defined Scorer replaces.
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};

// The snippet under each result: the page's article only (Sphinx takes the whole [role=main],
// whose first words are the theme's buttons: "Light Dark …"), maths as short plain text (each
// piece from its TeX, which KaTeX keeps in the page's MathML: \sqrt d becomes "√d", not KaTeX's
// two renderings of it), without widget state or the solutions' toggles.
// Sphinx loads this file (in language_data.js) after searchtools.js, before the index.
if (typeof Search !== "undefined") {
  const GREEK = { alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", theta: "θ",
                  lambda: "λ", mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω",
                  cdot: "·", times: "×", le: "≤", ge: "≥", to: "→", approx: "≈", infty: "∞",
                  sqrt: "√", sum: "Σ", ldots: "…", dots: "…" };
  const plainTex = (tex) => tex
    .replace(/^\\[([]|\\[)\]]$/g, "")
    .replace(/\\(?:mathbf|mathrm|mathit|operatorname|text|boldsymbol|left|right)\s*/g, "")
    .replace(/\\([A-Za-z]+)/g, (_, name) => GREEK[name] ?? name)
    .replace(/[{}^_]|\\[,;! ]/g, "");
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".headerlink, script, style, summary, button, .widget-subarea")
      .forEach((el) => el.remove());
    doc.querySelectorAll(".math").forEach((el) => {
      const tex = el.querySelector('annotation[encoding="application/x-tex"]') ?? el;
      el.textContent = plainTex(tex.textContent.trim());
    });
    const article = doc.querySelector("article") ?? doc.querySelector('[role="main"]');
    if (!article) return "";
    const part = anchor ? article.querySelector(anchor) : null;
    return (part ?? article).textContent;
  };
}
