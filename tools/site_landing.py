"""The course site's landing page and its sidebar, written by tools/build_site.py.

The landing page is a notebook, index.ipynb, so that its live view goes through the same
renderer as the notebook pages: one code cell (input removed) holds the stored output of one
page view of notebook 01 (its widget view and its PNG fallback), and the notebook's metadata
holds only that view's models of 01's widget state. Around it: what the series is, a "Start
with 01" button, the series' order at a glance, a card per notebook (its first figure and its
opening) and the sidebar's toctrees: the notebooks, then "Reference" (glossary and references,
where the build has them) and "Documentation" (docs/*.md, copied beside the notebooks: every
page of the site sits in one folder, as the build's page-by-page steps expect).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
from base64 import b64decode
from pathlib import Path

import nbformat

import i18n  # tools/i18n.py: the Chinese edition's catalogues
from site_text import translator  # tools/site_text.py: the site's own words
from widget_state import WIDGET_STATE  # tools/widget_state.py

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# The live view: notebook 01's temperature view (softmax weights of 3 queries over 4 keys and
# their entropy, one slider): what every later notebook builds on, and the lightest view with a
# heatmap (28 KiB of widget state with its module, a 34 kB PNG fallback).
VIEW_NOTEBOOK, VIEW_TEXT = "01", "[temperature:"
# The series in three parts, by the notebooks' numbers (true to their titles).
PARTS = [("part:foundations", "01", "05"), ("part:transformer", "06", "08"),
         ("part:today", "09", "12")]  # (their names: tools/site_text.py)


def title_of(nb) -> str:
    """The notebook's first markdown heading, without the #s."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line.lstrip("#").strip()
    return "(untitled)"


def introduction(nb) -> str:
    """The notebook's opening paragraph (markdown), and the list it leads into if it ends with
    a colon: what the notebook teaches, in its own words. (``nb`` as build_site.prepare() gives
    it: the Colab badge already removed.)"""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        blocks = [b.strip() for b in re.split(r"\n\s*\n", cell.source)
                  if b.strip() and not b.lstrip().startswith("#")]
        taken = []
        for block in blocks:
            taken.append(block)
            if not block.endswith((":", "：")):
                break
        return "\n\n".join(taken)
    return ""


def first_figure(nb) -> bytes | None:
    """The PNG of the notebook's first view, else its first figure."""
    pngs = [(WIDGET_VIEW not in out.get("data", {}), b64decode(out["data"]["image/png"]))
            for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})]
    return min(pngs, key=lambda p: p[0])[1] if pngs else None


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR: the card's <img> reserves its box before it loads."""
    return struct.unpack(">II", png[16:24])


def live_view(nb) -> tuple[dict, dict]:
    """(output, widget state): the stored output of the notebook's view whose text starts with
    VIEW_TEXT, and the models of the notebook's widget state that view needs (its model and
    every model it names as ``IPY_MODEL_<id>``, e.g. its layout)."""
    state = nb.metadata["widgets"][WIDGET_STATE]
    output = next(out for cell in nb.cells if cell.cell_type == "code"
                  for out in cell.get("outputs", [])
                  if WIDGET_VIEW in out.get("data", {})
                  and out["data"].get("text/plain", "").startswith(VIEW_TEXT))
    wanted, todo = {}, [output["data"][WIDGET_VIEW]["model_id"]]
    while todo:
        model_id = todo.pop()
        if model_id in wanted:
            continue
        wanted[model_id] = state["state"][model_id]
        todo += re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(wanted[model_id]))
    return output, {**state, "state": wanted}


def order_at_a_glance(notebooks: list[Path], nbs: list, t=translator()) -> str:
    """The series' parts side by side, each a numbered list of its notebooks' short titles
    (the title up to its colon), linked to their pages."""
    parts = []
    for part, first, last in PARTS:
        items = [f'<li><span class="ahv-number">{path.stem[:2]}</span> <a href="{path.stem}.html">'
                 f'{html.escape(re.split("[:：]", title_of(nb).split("·", 1)[-1])[0].strip())}</a></li>'
                 for path, nb in zip(notebooks, nbs) if first <= path.stem[:2] <= last]
        if items:
            parts.append(f'<div><p class="ahv-part">{t(part)} · {first}–{last}</p>\n<ol>\n'
                         + "\n".join(items) + "\n</ol></div>")
    return (f'<nav class="ahv-order" aria-label="{html.escape(t("order"))}">\n'
            + "\n".join(parts) + "\n</nav>")


def documentation(src: Path, repository: str, table: dict[str, str] | None = None) -> list[str]:
    """Copy docs/*.md (and the pictures they show) beside the notebooks, their links made to
    work on the site: a notebook's file becomes its page, any other file of the repository its
    GitHub page. Returns the pages' names for the toctree, in the order of DOC_ORDER, then the
    rest. A page whose name another page of the site has already taken is an error. With
    ``table`` ({English: translation}, tools/i18n.py), each page's prose is translated."""
    for picture in DOCS.glob("*.png"):
        shutil.copy2(picture, src / picture.name)
    names = []
    pages = sorted(DOCS.glob("*.md"), key=lambda p: (DOC_ORDER + [p.stem]).index(p.stem))
    texts = {page: page.read_text(encoding="utf-8") for page in pages}
    anchors = {} if table is None else {
        page.stem: translated_anchors(texts[page], table.get(page.stem, {})) for page in pages}
    for page in pages:
        if (src / page.name).exists() or (src / f"{page.stem}.ipynb").exists():
            raise ValueError(f"docs/{page.name}: the site already has a page {page.stem}")
        text = texts[page]
        if table is not None:
            text = i18n.translate(text, table.get(page.stem, {}))
            # A link to a heading names the heading's anchor, made from its words: translated.
            text = re.sub(r"\]\(([\w-]+\.md)?#([\w-]+)\)", lambda m: "]({}#{})".format(
                m[1] or "", anchors.get(m[1][:-3] if m[1] else page.stem, {}).get(m[2], m[2])), text)
        text = re.sub(r"\]\(\.\./([^)#\s]+)", lambda m: "](" + site_link(m[1], repository), text)
        (src / page.name).write_text(text, encoding="utf-8")
        names.append(page.stem)
    return names


def translated_anchors(text: str, table: dict[str, str]) -> dict[str, str]:
    """{anchor of an English heading: anchor of its translation} of a page (MyST's anchors,
    made from the heading's words)."""
    from myst_parser.mdit_to_docutils.base import default_slugify  # noqa: PLC0415

    headings = [p.text for p in i18n.pieces(text) if p.message and p.first.startswith("#")]
    return {default_slugify(h): default_slugify(table.get(h, h)) for h in headings}


def site_link(path: str, repository: str) -> str:
    """Where a docs page's link to ``../path`` (a file of the repository) points on the site: a
    notebook's page (``NN_name.ipynb`` beside it, a document Sphinx resolves), else the file on
    GitHub."""
    notebook = re.fullmatch(r"notebooks/(\d\d_\w+\.ipynb)", path)
    return notebook[1] if notebook else f"{repository}/blob/main/{path}"


# The documentation pages in the sidebar's order (a page not named here comes after them).
DOC_ORDER = ["install", "reading", "notebooks", "views", "helpers", "testing", "performance",
             "site-speed"]

STYLE = """\
<style>
/* The landing page's own rules (it is the only page that has these elements). */
a.ahv-start { display: inline-block; padding: 0.55rem 1.3rem; margin: 0.2rem 0 0.6rem;
  border-radius: 0.4rem; font-weight: 600; text-decoration: none;
  background: var(--pst-color-primary); color: var(--pst-color-background); }
a.ahv-start:hover, a.ahv-start:focus-visible { text-decoration: underline;
  color: var(--pst-color-background); }
/* The live view's place kept while it is drawn (after the text's first paint), so the page below
   it does not jump (Lighthouse, phone: a layout shift of 0.14 without this). Its height as
   drawn, measured at 320-1920 px: 297-324 px below 440 px wide (its controls on two lines or
   three), 248-271 px up to 523 px, then growing with the column (222 px at 524, 315 px at 767),
   297-324 px from 768 px (beside the sidebars). Kept: a little under each, never over (no gap
   under the figure); tests/browser/test_site_landing.py checks it at 390 and 1440 px. */
div.cell.tag_remove-input div.cell_output { min-height: 296px; }
@media (min-width: 440px) and (max-width: 523px) {
  div.cell.tag_remove-input div.cell_output { min-height: 247px; }
}
@media (min-width: 524px) and (max-width: 767px) {
  div.cell.tag_remove-input div.cell_output { min-height: calc((100vw - 32px) * 0.38 + 33px); }
}
p.ahv-caption { font-size: 0.9rem; color: var(--pst-color-text-muted); margin-top: 0.2rem; }
nav.ahv-order { display: grid; grid-template-columns: repeat(auto-fit, minmax(13rem, 1fr));
  gap: 0.4rem 1.5rem; margin-bottom: 1rem; }
nav.ahv-order p.ahv-part { font-weight: 600; margin: 0 0 0.3rem; }
nav.ahv-order ol { list-style: none; padding: 0; margin: 0; }
nav.ahv-order li { margin: 0 0 0.25rem; }
nav.ahv-order span.ahv-number { display: inline-block; min-width: 1.6rem;
  font-variant-numeric: tabular-nums; color: var(--pst-color-text-muted); }
img.series-card { height: auto; }  /* its width and height attributes give the ratio only */
/* The landing page is a notebook only to hold its live view: nothing to launch in Colab. */
.bd-header-article div.dropdown-launch-buttons { display: none; }
</style>"""

def toctree(caption: str, names: list[str]) -> str:
    return f"```{{toctree}}\n:hidden:\n:maxdepth: 1\n:caption: {caption}\n\n" + "\n".join(names) + "\n```"


def landing(notebooks: list[Path], nbs: list, static: Path, language: str = "en") -> str:
    """Write index.ipynb (and the docs pages) beside the notebooks in the Sphinx source folder (the parent
    of ``static``), in ``language`` ("en", or "zh_CN": from the catalogues); return the text of
    the pages written, for the CJK font subset."""
    t = translator(language)
    docs_table = None if language == "en" else {
        page.stem: i18n.load(f"docs/{page.stem}") for page in DOCS.glob("*.md")}
    src = static.parent
    (static / "cards").mkdir(parents=True, exist_ok=True)
    cards = []
    for path, nb in zip(notebooks, nbs):
        card = [f"## [{title_of(nb)}]({path.name})", ""]
        picture = first_figure(nb)
        if picture:
            (static / "cards" / f"{path.stem}.png").write_bytes(picture)
            width, height = png_size(picture)
            card += [f'<img class="series-card" src="_static/cards/{path.stem}.png" '
                     f'width="{width}" height="{height}" '
                     f'alt="{html.escape(t("card", nn=path.stem[:2]))}" loading="lazy">', ""]
        card.append(introduction(nb))
        cards.append("\n".join(card))

    site_info = json.loads((src / "site_info.json").read_text(encoding="utf-8"))
    docs = documentation(src, site_info["repository_url"], docs_table)
    reference = [name for name in ("glossary", "references") if (src / f"{name}.md").is_file()]
    sidebar = [toctree(t("toc:notebooks"), [p.stem for p in notebooks])]
    if reference:
        sidebar.append(toctree(t("toc:reference"), reference))
    sidebar.append(toctree(t("toc:documentation"), docs))

    k = next(i for i, p in enumerate(notebooks) if p.stem.startswith(VIEW_NOTEBOOK))
    output, state = live_view(nbs[k])
    first_html = notebooks[0].stem + ".html"
    index = nbformat.v4.new_notebook()
    index.metadata = {"kernelspec": nbs[k].metadata.get("kernelspec", {}),
                      "language_info": nbs[k].metadata.get("language_info", {}),
                      "widgets": {WIDGET_STATE: state}}
    index.cells = [
        nbformat.v4.new_markdown_cell(STYLE + "\n\n" + t("landing", first_html=first_html)),
        nbformat.v4.new_code_cell(
            "# notebook 01's view, as stored", metadata={"tags": ["remove-input"]},
            outputs=[nbformat.from_dict(output)]),
        nbformat.v4.new_markdown_cell(t(
            "caption", first_html=notebooks[k].stem + ".html", first_title=title_of(nbs[k]),
            order=order_at_a_glance(notebooks, nbs, t))),
        nbformat.v4.new_markdown_cell("\n\n".join(cards)),
        nbformat.v4.new_markdown_cell("\n\n".join(sidebar)),
    ]
    nbformat.write(index, src / "index.ipynb")
    pages = [cell.source for cell in index.cells]
    pages += [(src / f"{name}.md").read_text(encoding="utf-8") for name in docs]
    return "\n".join(pages)
