"""Build site/, the static edition: one HTML page per notebook, from its STORED outputs.

Run by `make site` (after `npm ci`): nothing is executed. Widgets, page views included, render
from the widget state the notebooks saved, so their controls still move the figures without a
kernel. Every script, style and font comes from site/static/, copied from node_modules/; the
build fails if a page would still load anything from another host when opened.
Options (developers): --notebooks DIR (default notebooks/), --out DIR (default site/).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / "node_modules"
# What the pages load, as (glob under node_modules/, folder under site/static/).
STATIC = [
    ("requirejs/require.js", "."),
    # The widget renderer (reads the saved widget state); the woff2 files are Font Awesome,
    # fetched only if a widget shows an icon (browsers take woff2 before the other formats).
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "html-manager"),
    ("@jupyter-widgets/html-manager/dist/*.woff2", "html-manager"),
    # anywidget's npm build is itself an AMD module: define(["@jupyter-widgets/base"], ...).
    ("anywidget/dist/index.js", "anywidget"),
]
# MathJax 2 as nbconvert's template loads it (one combined file: TeX input, CommonHTML output,
# menus) plus what that loads on demand: the Safe extension, TeX extensions, glyph data, MathML
# operator tables, web fonts. Left out: other output renderers, menu translations, the a11y
# explorer (3.7 MB), each loaded only if a reader picks it in the maths menu.
MATHJAX = [
    "MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js", "extensions/*.js",
    "extensions/TeX/*.js", "jax/element/mml/optable/*.js", "jax/output/CommonHTML/autoload/*.js",
    "jax/output/CommonHTML/fonts/TeX/*.js", "fonts/HTML-CSS/TeX/woff/*.woff",
]
# nbconvert's lab page, with require.js told where anywidget is (else the widget renderer
# fetches it from a CDN) and without the mermaid loader (a CDN import; no notebook needs it).
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
{{ super() }}
<script>require.config({paths: {anywidget: "static/anywidget/index"}});</script>
{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
# A remote image in markdown (the Colab badge) becomes a plain link: nothing loads at open.
LINKED_IMAGE = re.compile(r"\[!\[([^\]]*)\]\((?:https?:)?//[^)]*\)\]\(([^)]*)\)")
REMOTE_IMAGE = re.compile(r"!\[([^\]]*)\]\(((?:https?:)?//[^)\s]*)[^)]*\)")


def copy_static(static: Path) -> None:
    if not (NODE / ".package-lock.json").is_file():
        sys.exit(f"error: no {NODE.name}/: run `npm ci` first (`make site` does)")
    files = [(src, static / dest / src.name) for pattern, dest in STATIC
             for src in sorted(NODE.glob(pattern))]
    mathjax = NODE / "mathjax"
    files += [(src, static / "mathjax" / src.relative_to(mathjax))
              for pattern in MATHJAX for src in sorted(mathjax.glob(pattern))]
    missing = [p for p, _ in STATIC if not any(NODE.glob(p))]
    missing += [f"mathjax/{p}" for p in MATHJAX if not any(mathjax.glob(p))]
    if missing:
        sys.exit(f"error: node_modules/ lacks {', '.join(missing)}: run `npm ci`")
    for src, target in files:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def title_of(nb) -> str:
    """The notebook's first markdown heading, without the #s."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return "(untitled)"


class RemoteLoads(HTMLParser):
    """What a page would fetch from another host when opened: src/href/... of any element but
    <a>, url()/@import in styles, quoted URLs in inline scripts and in anywidget modules."""

    ATTRS = {"src", "href", "srcset", "poster", "data", "xlink:href", "background"}
    SCRIPTS = {"", "text/javascript", "module", "text/x-mathjax-config"}
    CSS = re.compile(r"""(?:url\(\s*|@import\s+)['"]?((?:https?:)?//[^'")\s]*)""")
    JS = re.compile(r"""['"`](https?://[^'"`\s]*)""")

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self.type, self.text = "", []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            value = (value or "").strip()
            if name in self.ATTRS and tag != "a" and re.match(r"(?:https?:)?//", value):
                self.found.append(f"<{tag} {name}={value}>")
            if name == "style":
                self.css(value)
        self.type, self.text = dict(attrs).get("type") or "", []

    def handle_data(self, data):
        self.text.append(data)

    def handle_endtag(self, tag):
        text = "".join(self.text)
        if tag == "style":
            self.css(text)
        elif tag == "script" and self.type in self.SCRIPTS:
            self.found += [f"<script> {url}" for url in self.JS.findall(text)]
        elif tag == "script" and self.type == "application/vnd.jupyter.widget-state+json":
            for model_id, model in json.loads(text)["state"].items():
                esm = model.get("state", {}).get("_esm", "")
                if re.match(r"https?://", esm.strip()) or self.JS.search(esm):
                    self.found.append(f"anywidget _esm of model {model_id} imports from a URL")
                self.css(model.get("state", {}).get("_css", ""))
        self.type, self.text = "", []

    def css(self, text: str) -> None:
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # a commented-out @import loads nothing
        self.found += [f"CSS {url}" for url in self.CSS.findall(text)]


def write_offline(path: Path, text: str) -> None:
    """Write the page, unless it would load something from another host when opened."""
    parser = RemoteLoads()
    parser.feed(text)
    if parser.found:
        sys.exit(f"error: {path.name} would load from another host when opened:\n  "
                 + "\n  ".join(parser.found))
    path.write_text(text, encoding="utf-8")


def build_page(exporter: HTMLExporter, notebook: Path, out: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    title = title_of(nb)
    nb.metadata["title"] = title  # the page's <title>
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = REMOTE_IMAGE.sub(r"[\1](\2)", LINKED_IMAGE.sub(r"[\1](\2)", cell.source))
    body, _ = exporter.from_notebook_node(nb)
    write_offline(out / f"{notebook.stem}.html", body)
    return title


INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Attention, hands-on: the static edition</title>
<style>body {{ font: 17px/1.6 system-ui, sans-serif; max-width: 42em; margin: 2em auto;
padding: 0 1em; color: #222 }} li {{ margin: .3em 0 }}</style>
</head>
<body>
<h1>Attention, hands-on</h1>
<p>The static edition: the {n} notebooks as they were last run, to read in a browser without
Python or a kernel; their views still redraw when you move the controls.</p>
<ul>
{items}
</ul>
</body>
</html>
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT / "site")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    notebooks = sorted(args.notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        sys.exit(f"error: no NN_*.ipynb in {args.notebooks}")
    # Rebuilt from scratch; refuse to empty a folder that is not a previous build.
    if out.exists() and any(out.iterdir()) and not (out / "index.html").is_file():
        sys.exit(f"error: {out} is not empty and holds no index.html: not removing it")
    shutil.rmtree(out, ignore_errors=True)
    copy_static(out / "static")

    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"site.html.j2": TEMPLATE})],
        template_file="site.html.j2",
        require_js_url="static/require.js",
        widget_renderer_url="static/html-manager/embed-amd.js",
        mathjax_url="static/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
    )
    items = []
    for notebook in notebooks:
        title = build_page(exporter, notebook, out)
        items.append(f'<li><a href="{notebook.stem}.html">{html.escape(title)}</a></li>')
    write_offline(out / "index.html", INDEX.format(n=len(notebooks), items="\n".join(items)))

    pages = sorted(out.glob("*.html"))
    for page in pages:
        print(f"{page.stat().st_size / 1e3:8.0f} kB  {page.relative_to(out.parent)}")
    static = sum(f.stat().st_size for f in (out / "static").rglob("*") if f.is_file())
    total = static + sum(p.stat().st_size for p in pages)
    print(f"{static / 1e3:8.0f} kB  {out.name}/static/ (require.js, widget renderer, anywidget, "
          f"MathJax)\n{total / 1e3:8.0f} kB  total, {len(pages)} pages, in {out}")


if __name__ == "__main__":
    main()
