// The site's maths, typeset once at build time (tools/build_site.py runs this with Node): KaTeX
// (npm, package-lock.json) turns each TeX piece into HTML for the eye and MathML for a screen
// reader, so a page needs KaTeX's style sheet and fonts but no script: nothing to typeset in the
// reader's browser (MathJax 2 did it there: long tasks of 0.2-0.6 s on a phone).
//
// stdin: JSON [[tex, display], ...]; stdout: JSON [html, ...] in the same order. A piece KaTeX
// cannot typeset exactly (unknown macro, or anything its strict mode reports) stops the build
// with the piece and KaTeX's message: the site never shows raw or half-typeset TeX.
import fs from "node:fs";
import katex from "katex";

const pieces = JSON.parse(fs.readFileSync(0, "utf8"));
const errors = [];
const html = pieces.map(([tex, display], i) => {
  try {
    return katex.renderToString(tex, {
      displayMode: display, output: "htmlAndMathml", throwOnError: true, strict: "error",
      trust: false,
    });
  } catch (e) {
    errors.push(`piece ${i} (${JSON.stringify(tex.slice(0, 120))}): ${e.message}`);
    return "";
  }
});
if (errors.length) {
  process.stderr.write(`KaTeX could not typeset ${errors.length} piece(s):\n${errors.join("\n")}\n`);
  process.exit(1);
}
process.stdout.write(JSON.stringify(html));
