"""Build site/, the course site: Sphinx + MyST-NB + sphinx-book-theme over the notebooks' STORED
outputs (nothing is executed), the page views still movable without a kernel.

Run by `make site` (after `npm ci` and `pip install -r requirements-site.txt`). Steps:
1. build/site-src/ gets tools/site/ (conf.py; _static/: site.css, site.js, book.css, book.js,
   pageviews.js, the page views' renderer, search-scorer.js, favicon.svg), KaTeX's style sheet
   and fonts from node_modules/ and each notebook prepared for readers: its widget state
   merged back (tools/widget_state.py), the Colab badge and Colab cell removed (the theme's
   launch button links to Colab), solutions tagged ``hide-cell`` and check cells ``hide-input`` (collapsed
   until clicked).
2. The references and glossary pages, and the links to them (tools/site_references.py); the
   landing page (index.ipynb: a live view, the series in order, a picture per notebook) and the
   documentation pages from docs/ (tools/site_landing.py).
3. A subset of Noto Sans SC (npm @fontsource/noto-sans-sc) holding only the CJK characters
   the pages use, so the Chinese terms render on a machine without a CJK font.
4. sphinx-build; the maths typeset with KaTeX (typeset_maths); then each page finished
   (finish_page: the theme's icons as inline SVG, nothing render-blocking in <head>, one
   viewport <meta>, accessible names; /favicon.ico), and every page and style sheet checked to
   load nothing from another host.
Options (developers): --notebooks DIR (default notebooks/), --out DIR (default site/).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import io
import itertools
import json
import posixpath
import re
import shutil
import subprocess
import sys
import time
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import nbformat

import i18n  # tools/i18n.py: the Chinese edition's catalogues
import site_references  # tools/site_references.py: references and glossary
import widget_state  # tools/widget_state.py (run as a script, tools/ is on sys.path)
from site_landing import landing  # tools/site_landing.py: the landing page and the docs pages
from site_text import translator  # tools/site_text.py: the site's own words

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / "node_modules"
SITE_SRC = ROOT / "tools" / "site"
# KaTeX's style sheet and fonts (woff2: every browser the site supports reads it), for the maths
# typeset at build time (typeset_maths); the pages load no maths script.
KATEX = NODE / "katex" / "dist"
FONTSOURCE = NODE / "@fontsource" / "noto-sans-sc"
CJK_FAMILY = "Noto Sans SC subset"
# Colab's badge line, first in each notebook (tools/sync_colab.py writes it).
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\s*\n+")
CHECK = re.compile(r"^def check_\d+\(", re.M)


# ------------------------------------------------------------------------------ sources


def copy_static(static: Path) -> None:
    """KaTeX's style sheet (its font-display: swap variant) and woff2 fonts from node_modules/
    into _static/katex/, the style sheet naming the woff2 files only. (The page views need
    nothing from npm: tools/site/_static/pageviews.js renders them; see conf.py.)"""
    if not (NODE / ".package-lock.json").is_file():
        sys.exit(f"error: no {NODE.name}/: run `npm ci` first (`make site` does)")
    css = KATEX / "katex-swap.min.css"
    if not css.is_file():
        sys.exit(f"error: node_modules/ lacks {css.relative_to(NODE)}: run `npm ci`")
    (static / "katex" / "fonts").mkdir(parents=True, exist_ok=True)
    text = re.sub(r',url\(fonts/[^)]+\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)', "",
                  css.read_text(encoding="utf-8"))
    if re.search(r"\.(?:woff|ttf)\)", text):
        sys.exit(f"error: {css.name}: a font other than woff2 is still named")
    (static / "katex" / "katex.css").write_text(text, encoding="utf-8")
    for font in sorted((KATEX / "fonts").glob("*.woff2")):
        shutil.copy2(font, static / "katex" / "fonts" / font.name)


def prepare(notebook: Path, language: str = "en") -> nbformat.NotebookNode:
    """The notebook as a reader of the site gets it (see the module docstring), its prose in
    ``language`` (zh_CN: translated from the catalogues, tools/i18n.py)."""
    nb = widget_state.merged(notebook)
    t = translator(language)
    if language != "en":
        nb = i18n.translated(nb, i18n.load(notebook.stem))
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "colab-badge" in tags:
            cell.source = BADGE.sub("", cell.source)
        if "colab-setup" in tags:
            tags.append("remove-cell")
        elif cell.cell_type == "code" and cell.metadata.get("jupyter", {}).get("source_hidden"):
            # A solution: its code and its printed answer, both behind one click.
            tags.append("hide-cell")
            cell.source = re.sub(r"^#@title [^\n]*\n", "", cell.source)
            cell.metadata["mystnb"] = {"code_prompt_show": t("solution:show"),
                                       "code_prompt_hide": t("solution:hide")}
        elif cell.cell_type == "code" and CHECK.search(cell.source):
            # An exercise's check: its code holds the answer; its output ("not answered yet")
            # stays in view.
            tags.append("hide-input")
            cell.metadata["mystnb"] = {"code_prompt_show": t("check:show"),
                                       "code_prompt_hide": t("check:hide")}
    return nb


# ------------------------------------------------------------------------------ CJK font


def cjk_characters(text: str) -> set[str]:
    """The characters a Latin-only machine may lack: CJK, and their full-width punctuation."""
    return {c for c in text if ord(c) >= 0x2E80}


def ranges(spec: str) -> set[int]:
    """The code points of a CSS unicode-range such as ``U+4e00-4e2f,U+ff01``."""
    points: set[int] = set()
    for part in spec.split(","):
        part = part.strip().removeprefix("U+").removeprefix("u+")
        low, _, high = part.partition("-")
        points.update(range(int(low, 16), int(high or low, 16) + 1))
    return points


def cjk_font(chars: set[str], static: Path) -> tuple[int, int]:
    """Write _static/cjk.css and _static/fonts/: Noto Sans SC (400) cut to ``chars``, one
    woff2 per fontsource chunk that holds any of them. Returns (files, bytes)."""
    from fontTools import subset

    css = (FONTSOURCE / "400.css").read_text(encoding="utf-8")
    faces = re.findall(r"url\(\./files/([^)]+\.woff2)\)[^;]*;\s*unicode-range:\s*([^;]+);", css)
    if not faces:
        sys.exit(f"error: no @font-face in {FONTSOURCE / '400.css'}: run `npm ci`")
    wanted = {ord(c) for c in chars}
    (static / "fonts").mkdir(parents=True, exist_ok=True)
    rules, covered, size = [], set(), 0
    for name, spec in faces:
        points = sorted((wanted & ranges(spec)) - covered)
        if not points:
            continue
        options = subset.Options()
        options.flavor = "woff2"
        options.layout_features = ["*"]
        font = subset.load_font(str(FONTSOURCE / "files" / name), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=points)
        subsetter.subset(font)
        buffer = io.BytesIO()
        subset.save_font(font, buffer, options)
        (static / "fonts" / name).write_bytes(buffer.getvalue())
        size += len(buffer.getvalue())
        covered.update(points)
        unicode_range = ",".join(f"U+{p:x}" for p in points)
        rules.append(f'@font-face {{ font-family: "{CJK_FAMILY}"; font-style: normal; '
                     f"font-weight: 400; font-display: swap; "
                     f'src: url("fonts/{name}") format("woff2"); unicode-range: {unicode_range}; }}')
    lacking = wanted - covered
    if lacking:
        sys.exit("error: Noto Sans SC has no glyph for " + "".join(sorted(map(chr, lacking))))
    (static / "cjk.css").write_text(
        "/* Noto Sans SC (SIL Open Font License 1.1, npm @fontsource/noto-sans-sc), cut by\n"
        "   tools/build_site.py to the CJK characters these pages use. */\n"
        + "\n".join(rules) + "\n", encoding="utf-8")
    return len(rules), size


# ------------------------------------------------------------------------------ pages


FA_SCRIPT = "_static/scripts/fontawesome.js"  # the theme's icon script, written out by finish()
FA_PACKS = {"fa-solid": "fas", "fas": "fas", "fa-brands": "fab", "fab": "fab",
            "fa-regular": "far", "far": "far"}
# An icon of the theme: an empty <i> or <span> whose classes name a Font Awesome style and icon.
FA_ELEMENT = re.compile(r'<(i|span) class="((?:[\w-]+ )*(?:fa-solid|fas|fa-brands|fab|fa-regular|far)'
                        r'(?: [\w-]+)*)"([^>]*)></\1>')
HEAD_SCRIPT = re.compile(r"<script\b([^>]*)\bsrc=\"([^\"]+)\"([^>]*)></script>")
SEARCH_SCRIPTS = re.compile(r'\s*<script src="(?:_static/searchtools\.js|_static/language_data\.js|'
                            r'searchindex\.js)"></script>')
VIEWPORT = re.compile(r'\s*<meta name="viewport"[^>]*>')


def theme_icons(script: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """(pack, name) → (width, height, SVG path) of every icon in the theme's fontawesome.js, a
    bundle of Font Awesome Free's packs, each an object ``var b={name:[w,h,aliases,unicode,
    path],...}`` registered by ``p("fas",b)``."""
    icons = {}
    for pack in ("fab", "far", "fas"):
        end = script.find(f'p("{pack}",b)')
        start = script.rfind("var b={", 0, end)
        if end < 0 or start < 0:
            sys.exit(f"error: no {pack} icons found in the theme's {FA_SCRIPT}: its format changed")
        for name, w, h, path in re.findall(r'"?([\w-]+)"?:\[(\d+),(\d+),\[[^\]]*\],"[^"]*","([^"]+)"\]',
                                           script[start:end]):
            icons[(pack, name)] = (int(w), int(h), path)
    return icons


def inline_icons(page: str, icons: dict) -> str:
    """Each icon element → the inline <svg> fontawesome.js would have made of it at run time
    (same classes, less the style's; other attributes kept; hidden from screen readers: the
    buttons around them carry the names)."""
    def svg(m: re.Match) -> str:
        classes = m.group(2).split()
        pack = next(FA_PACKS[c] for c in classes if c in FA_PACKS)
        name = next((c[3:] for c in classes if (pack, c[3:]) in icons), None)
        if name is None:
            sys.exit(f"error: the theme's {FA_SCRIPT} has no icon for {m.group(0)}")
        w, h, path = icons[(pack, name)]
        kept = " ".join(c for c in classes if c not in FA_PACKS)
        return (f'<svg class="svg-inline--fa {kept}"{m.group(3)} data-icon="{name}" '
                f'viewBox="0 0 {w} {h}" aria-hidden="true" focusable="false">'
                f'<path fill="currentColor" d="{path}"/></svg>')
    return FA_ELEMENT.sub(svg, page)


def opening(page: str, chars: int = 4000) -> str:
    """The start of the page's body up to its first ``chars`` characters of text (the title,
    the first paragraphs, the contents: a phone's first screens)."""
    body = page.split("<body", 1)[-1]
    count = 0
    for m in re.finditer(r"<script\b.*?</script>|<[^>]+>|[^<]+", body, flags=re.S):
        if not m.group(0).startswith("<"):
            count += len(" ".join(m.group(0).split()))
            if count >= chars:
                return body[:m.end()]
    return body


def katex_fonts(css: str) -> list[tuple[frozenset[str], str]]:
    """From KaTeX's style sheet: for each rule that sets a KaTeX font family, the classes an
    element carries to get it and the woff2 file of that face (KaTeX_Main-Regular, the face of
    .katex itself, is every piece's)."""
    files = {}
    for block in re.findall(r"@font-face\{([^}]*)\}", css):
        d = dict(re.findall(r"([\w-]+):([^;]+)", block))
        files[(d["font-family"].strip('"'), d.get("font-style", "normal"),
               d.get("font-weight", "400"))] = \
            re.search(r"url\(fonts/([^)]+\.woff2)\)", block).group(1)
    rules = []
    for selectors, declarations in re.findall(r"([^{}@]+)\{([^{}]*font-family:KaTeX_[^{}]*)\}",
                                              css):
        d = dict(re.findall(r"([\w-]+):([^;]+)", declarations))
        weight = {"bold": "700", "normal": "400"}.get(d.get("font-weight"), d.get("font-weight", "400"))
        face = files[(d["font-family"].strip('"'), d.get("font-style", "normal"), weight)]
        for selector in selectors.split(","):
            classes = frozenset(re.findall(r"\.([\w-]+)", re.split(r"[\s>]+", selector.strip())[-1]))
            if classes:  # (`.delim-size1>span`: a rule for a span, met with its class rules)
                rules.append((classes, face))
    return rules


def font_preloads(page: str, faces: list[tuple[str, set[int]]],
                  maths: list[tuple[frozenset[str], str]]) -> str:
    """<link rel=preload> for the font files the page's opening (opening()) is drawn in: the CJK
    subset's files (cjk.css) holding its Chinese characters, and KaTeX's faces its maths uses
    (katex_fonts()). Both are font-display: swap (the text never waits for a font), so a face
    that arrived late would redraw the text in it and move what follows (Lighthouse counted a
    layout shift of 0.08 on 12 from KaTeX's fonts, 0.15 on 02 and 11 without the CJK
    preloads); preloaded, they are there for the first paint."""
    start = opening(page)
    text = re.sub(r"<script\b.*?</script>|<[^>]+>", "", start, flags=re.S)
    chars = {ord(c) for c in text if ord(c) >= 0x2E80}
    links = [f"fonts/{name}" for name, points in faces if points & chars]
    if 'class="katex"' in start:
        used = {"KaTeX_Main-Regular.woff2"}
        for attribute in set(re.findall(r'class="([^"]*)"', start)):
            classes = set(attribute.split())
            used.update(face for needs, face in maths if needs <= classes)
        links += [f"katex/fonts/{face}" for face in sorted(used)]
    return "".join(f'\n<link rel="preload" href="_static/{link}" as="font" type="font/woff2" '
                   f'crossorigin />' for link in links)


# The CJK font's style sheet as Sphinx links it: the font preloads (finish_page) and KaTeX's style
# sheet (typeset_maths) go before it.
CJK_LINK = '<link rel="stylesheet" type="text/css" href="_static/cjk.css'


def finish_page(page: str, name: str, icons: dict, doc_options: str,
                faces: list[tuple[str, set[int]]], maths: list[tuple[frozenset[str], str]]) -> str:
    """What the theme's templates leave that a reader pays for, fixed in the built page:
    - its icons drawn by fontawesome.js (1.56 MB, every page) → inline SVG, the script dropped;
    - nothing render-blocking in <head>: documentation_options.js (a few lines the inline
      scripts after it read) inlined, every other script deferred (they wait for the DOM
      anyway); Sphinx's search scripts and index (80 kB) only on search.html (the theme loads
      them everywhere for a search-as-you-type that is off);
    - one viewport <meta> (the templates write three);
    - the font files of the page's opening preloaded: CJK and KaTeX (font_preloads);
    - the accessible names of controls contain their visible text: the search field is named
      by its text ("Search Ctrl+K", not "Search"), a folded cell's toggle by its label ("Show
      the solution", not "Toggle hidden content")."""
    head, sep, body = page.partition("</head>")
    head = re.sub(r'\s*<!-- So that users can add custom icons -->\s*<script defer src="[^"]*'
                  + re.escape(FA_SCRIPT) + r'[^"]*"></script>', "", head)
    head = re.sub(r'<script src="[^"]*_static/documentation_options\.js[^"]*"></script>',
                  lambda m: f"<script>{doc_options}</script>", head)
    if name != "search.html":
        head = SEARCH_SCRIPTS.sub("", head)

    def deferred(m: re.Match) -> str:
        attributes = m.group(1) + m.group(3)
        if re.search(r"\b(?:defer|async)\b|type=\"module\"", attributes):
            return m.group(0)
        return f'<script defer{m.group(1)[:-1] if m.group(1).endswith(" ") else m.group(1)} ' \
               f'src="{m.group(2)}"{m.group(3)}></script>'
    head = HEAD_SCRIPT.sub(deferred, head)
    viewports = itertools.count()
    head = VIEWPORT.sub(lambda m: m.group(0) if next(viewports) == 0 else "", head)
    head = head.replace(CJK_LINK, font_preloads(page, faces, maths).lstrip("\n") + "\n    "
                        + CJK_LINK, 1)
    body = body.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    page = head + sep + body
    page = re.sub(r'(<button class="btn search-button-field search-button__button[^"]*"[^>]*?)'
                  r' aria-label="[^"]*"', r"\1", page)  # ("Search", "搜索")
    return inline_icons(page, icons)


# The end of the theme's script (pydata-sphinx-theme 0.20.0, minified): its last step, on load,
# addTabStopsToScrollableElements ("I"), which sets tabindex on every code block and output
# that scrolls, reading and writing each in turn.
THEME_TAB_STOPS = ',"complete"===document.readyState?I():window.addEventListener("load",I)})();'


def drop_theme_tab_stops(script: Path) -> None:
    """The theme's scroll-box step taken out of its script: on load it read each code block's
    and output's size and set its tabindex in turn, each read laying the page out again (a
    240 ms task on a phone for 11, and every section skipped by book.css laid out by it). book.js
    applies the same rule (tabindex 0 where a block scrolls) from a ResizeObserver, reading all
    and then writing all. Fails loudly if the theme's script is not the one expected."""
    text = script.read_text(encoding="utf-8")
    if text.count(THEME_TAB_STOPS) != 1:
        sys.exit(f"error: {script.name} does not end as pydata-sphinx-theme 0.20.0's does: "
                 "update THEME_TAB_STOPS in tools/build_site.py (and book.js's scroll boxes)")
    script.write_text(text.replace(THEME_TAB_STOPS, "})();"), encoding="utf-8")
    script.with_name(script.name + ".map").unlink(missing_ok=True)  # it maps the original


def favicon_ico(svg: Path, ico: Path) -> None:
    """/favicon.ico (browsers ask for it whatever the page links), drawn from favicon.svg's
    rectangles (the icon is a 4 × 4 causal attention mask) at 16, 32 and 48 px."""
    from PIL import Image, ImageDraw

    text = svg.read_text(encoding="utf-8")
    size = 32 * 8
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    for attrs in re.findall(r"<rect ([^>]*)/>", text):
        a = dict(re.findall(r'(\w+)="([^"]*)"', attrs))
        x, y = float(a.get("x", 0)) * 8, float(a.get("y", 0)) * 8
        box = (x, y, x + float(a["width"]) * 8 - 1, y + float(a["height"]) * 8 - 1)
        fill = a["fill"].lstrip("#")
        colour = tuple(int(fill[i:i + 2], 16) for i in range(0, len(fill), 2))
        draw.rounded_rectangle(box, radius=float(a.get("rx", 0)) * 8, fill=colour)
    image.save(ico, sizes=[(16, 16), (32, 32), (48, 48)])


def webp_images(folder: Path) -> set[str]:
    """The outputs' PNGs (stored at twice their shown size: sharp on a 2x screen) as lossless
    WebP, pixel for pixel the same (checked: each is decoded again and compared), where that is
    smaller (about 0.4x the bytes here); the PNG is then removed. Returns the names converted."""
    from PIL import Image

    converted = set()
    for png in sorted(folder.glob("*.png")):
        with Image.open(png) as image:
            image.load()
            buffer = io.BytesIO()
            image.save(buffer, "WEBP", lossless=True, exact=True, method=4)
            with Image.open(io.BytesIO(buffer.getvalue())) as again:
                mode = "RGBA" if "A" in image.getbands() else "RGB"
                if again.convert(mode).tobytes() != image.convert(mode).tobytes():
                    sys.exit(f"error: {png.name}: its lossless WebP has other pixels")
        if len(buffer.getvalue()) < png.stat().st_size:
            png.with_suffix(".webp").write_bytes(buffer.getvalue())
            png.unlink()
            converted.add(png.name)
    return converted


def output_images(page: str, webp: set[str], t=translator()) -> str:
    """The outputs' figures: WebP where webp_images() made one; fetched when they come near
    the screen (loading="lazy"; their width and height keep the layout from moving) and
    decoded off the main thread; named for a screen reader by their place, not their file."""
    count = itertools.count(1)

    def img(m: re.Match) -> str:
        tag = m.group(0)
        # MyST-NB's alt text is the file's path: a screen reader would spell out a hash.
        tag = re.sub(r'alt="_images/[^"]*"', f'alt="{html.escape(t("figure", n=next(count)))}"',
                     tag)
        if "loading=" not in tag:
            tag = tag.replace("<img ", '<img loading="lazy" decoding="async" ', 1)
        return tag
    page = re.sub(r'<img [^>]*\bsrc="_images/[^"/]+\.png"[^>]*>', img, page)
    # Every reference to a converted file (the <img> and the link around a figure shown
    # smaller than its file) names its WebP.
    return re.sub(r'"_images/([^"/]+)\.png"',
                  lambda m: f'"_images/{m.group(1)}.webp"' if f"{m.group(1)}.png" in webp
                  else m.group(0), page)


SAVED_STATE = re.compile(r'<script type="application/vnd\.jupyter\.widget-state\+json">'
                         r"(.*?)</script>", re.S)


def external_state(page: str, stem: str, views: Path) -> str:
    """The views' saved state (the widget state MyST-NB writes into the page's <head>: scenes,
    the views' module; 190 kB on 02) moved to views/<stem>.<hash>.json, which pageviews.js
    fetches: the page's text no longer waits for it to arrive. The <script> stays, empty, naming
    the file (data-src). Not on the landing page (index): its one view is in the first screen,
    where a view drawn after the text would push the text down (Lighthouse's layout shift 0.13
    on a phone, measured); its state is 31 kB."""
    found = SAVED_STATE.search(page)
    if not found or stem == "index":
        return page
    data = found.group(1).strip().encode("utf-8")
    json.loads(data)  # a page whose state does not parse is not shipped
    name = f"{stem}.{hashlib.sha256(data).hexdigest()[:10]}.json"
    views.mkdir(parents=True, exist_ok=True)
    (views / name).write_bytes(data)
    return page[:found.start()] + ('<script type="application/vnd.jupyter.widget-state+json" '
                                   f'data-src="_static/views/{name}"></script>') + page[found.end():]


# The two editions: language → its folder in site/ ("" the top) and its html lang.
EDITIONS = {"en": ("", "en"), "zh_CN": ("zh", "zh-CN")}


def language_switch(page: str, name: str, language: str) -> str:
    """The link to the same page in the other edition, first of the article's header buttons
    (every page has them), its language in hreflang and lang. (No <link rel="alternate"
    hreflang> in <head>: those must name absolute URLs, and the site is a folder to copy to any
    host; Lighthouse's SEO audit fails relative ones.)"""
    other = next(lang for lang in EDITIONS if lang != language)
    here, there = EDITIONS[language][0], EDITIONS[other][0]
    up = "../" if here else ""
    href = f"{up}{there}/{name}" if there else f"{up}{name}"
    t = translator(language)
    link = (f'<a class="btn btn-sm ahv-lang" href="{href}" hreflang="{EDITIONS[other][1]}" '
            f'lang="{EDITIONS[other][1]}" title="{html.escape(t("switch:title"))}">'
            f'{html.escape(t("switch"))}</a>')
    page, found = re.subn(r'(<div class="article-header-buttons">)', lambda m: m[1] + link,
                          page, count=1)
    if not found:
        sys.exit(f"error: {name}: no article-header-buttons for the language switch")
    return page


def finish(out: Path, language: str = "en") -> None:
    """Every page through finish_page(), external_state() and output_images() (the figures as
    lossless WebP, webp_images()); the theme's icon script removed (its licence kept);
    /favicon.ico written; the theme's scroll-box step taken out (drop_theme_tab_stops())."""
    script = out / FA_SCRIPT
    icons = theme_icons(script.read_text(encoding="utf-8"))
    doc_options = (out / "_static" / "documentation_options.js").read_text(encoding="utf-8")
    css = (out / "_static" / "cjk.css").read_text(encoding="utf-8")
    faces = [(name, ranges(spec)) for name, spec in
             re.findall(r'url\("fonts/([^"]+)"\)[^;]*;\s*unicode-range:\s*([^;]+);', css)]
    maths = katex_fonts((out / "_static" / "katex" / "katex.css").read_text(encoding="utf-8"))
    images = webp_images(out / "_images")
    t = translator(language)
    for page in sorted(out.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        text = finish_page(text, page.name, icons, doc_options, faces, maths)
        text = language_switch(text, page.name, language)
        text = external_state(text, page.stem, out / "_static" / "views")
        page.write_text(output_images(text, images, t), encoding="utf-8")
    for leftover in (script, script.with_name(script.name + ".map")):
        leftover.unlink(missing_ok=True)
    favicon_ico(out / "_static" / "favicon.svg", out / "favicon.ico")
    drop_theme_tab_stops(out / "_static" / "scripts" / "pydata-sphinx-theme.js")


# ------------------------------------------------------------------------------ maths

# Each piece of maths as Sphinx writes it (conf.py's "prerendered" renderer: MathJax's markup).
MATH = re.compile(r'<(span|div) class="math notranslate nohighlight"([^>]*)>(.*?)</\1>', re.S)


def typeset_maths(out: Path) -> int:
    """Every piece of maths on every page typeset by KaTeX, in one run of
    tools/render_maths.mjs (Node): HTML for the eye and MathML for a screen reader in place of
    the TeX, and KaTeX's style sheet linked from the pages that have maths. A piece KaTeX
    cannot typeset stops the build. Returns the number of pieces."""
    pages, pieces = {}, []
    for page in sorted(out.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        found = list(MATH.finditer(text))
        if found:
            pages[page] = text
        for m in found:
            tex, display = html.unescape(m.group(3)).strip(), m.group(1) == "div"
            start, end = (r"\[", r"\]") if display else (r"\(", r"\)")
            if not (tex.startswith(start) and tex.endswith(end)):
                sys.exit(f"error: {page.name}: maths not written as {start}…{end}: {tex[:80]!r}")
            pieces.append([tex[2:-2], display])
    if not pieces:
        return 0
    run = subprocess.run(["node", str(ROOT / "tools" / "render_maths.mjs")],
                         input=json.dumps(pieces), capture_output=True, text=True, cwd=ROOT)
    if run.returncode:
        sys.exit(f"error: tools/render_maths.mjs failed ({run.returncode}):\n{run.stderr}")
    typeset = iter(json.loads(run.stdout))
    for page, text in pages.items():
        text = MATH.sub(lambda m: f'<{m.group(1)} class="math notranslate nohighlight"'
                                  f'{m.group(2)}>{next(typeset)}</{m.group(1)}>', text)
        if CJK_LINK not in text:
            sys.exit(f"error: {page.name}: no cjk.css link to put KaTeX's style sheet before")
        text = text.replace(CJK_LINK, '<link rel="stylesheet" type="text/css" '
                            'href="_static/katex/katex.css" />\n    ' + CJK_LINK, 1)
        page.write_text(text, encoding="utf-8")
    return len(pieces)


# ------------------------------------------------------------------------------ styles

# A page's style sheets, as Sphinx links them (its own, the theme's, MyST-NB's, ours, KaTeX's).
STYLESHEET = re.compile(r'<link (?:href="(_static/[^"?]+\.css)(?:\?[^"]*)?" rel="stylesheet"'
                        r'|rel="stylesheet" type="text/css" href="(_static/[^"?]+\.css)(?:\?[^"]*)?")'
                        r' />\s*')
NAMES = re.compile(r"[.#]((?:[\w-]|\\.)+)")
# Classes Bootstrap builds at run time from parts (`bs-${name}-auto`, `bs-${name}-${placement}`):
# named in no file, so kept whatever the pages hold (the tooltips' arrows are drawn by them).
BUILT_AT_RUN_TIME = ("bs-tooltip-", "bs-popover-")


def used_names(texts: list[str]) -> set[str]:
    """Every word that could be a class or an id: the words of the pages (markup, inline
    scripts), of the views' saved state (their module) and of the site's scripts (the theme's
    scripts set classes such as "show" or "collapsing" at run time)."""
    return {word for text in texts for word in re.findall(r"[A-Za-z_][\w-]*", text)}


def trim_rules(css: str, names: set[str]) -> str:
    """``css`` less the rules none of whose selectors can match: a selector is kept if each
    class and id it names is in ``names`` (a word of the pages or scripts) or is one Bootstrap
    builds at run time (BUILT_AT_RUN_TIME); what it names inside :not() need not be there;
    attributes, elements and other pseudo-classes are not judged. @media, @supports, @layer and
    @container are trimmed inside; other at-rules (@font-face, @keyframes …) are kept whole. A rule with :is() or
    :where() in its selectors is kept whole if any part of it can match."""
    import tinycss2

    def keep(selector: str) -> bool:
        selector = re.sub(r"\[[^\]]*\]|\"[^\"]*\"|'[^']*'", "", selector)
        # What :not() names need not be there: its absence is what the rule asks for.
        while re.search(r":not\([^()]*\)", selector):
            selector = re.sub(r":not\([^()]*\)", "", selector)
        return all(name.replace("\\", "") in names or name.startswith(BUILT_AT_RUN_TIME)
                   for name in NAMES.findall(selector))

    def top_level(prelude: str) -> list[str]:
        """The selectors of a list: split at its commas, not at those inside parentheses."""
        parts, depth, start = [], 0, 0
        for i, c in enumerate(prelude):
            depth += (c == "(") - (c == ")")
            if c == "," and depth == 0:
                parts.append(prelude[start:i])
                start = i + 1
        return parts + [prelude[start:]]

    def rules(nodes) -> list[str]:
        kept = []
        for node in nodes:
            if node.type == "qualified-rule":
                prelude = tinycss2.serialize(node.prelude).strip()
                if re.search(r":(?:is|where|matches|any)\(", prelude):
                    # a part of the list inside :is() may match alone: kept whole if one can
                    selectors = [prelude] if any(keep(s) for s in prelude.split(",")) else []
                else:
                    selectors = [s.strip() for s in top_level(prelude) if keep(s)]
                if selectors:
                    kept.append(",".join(selectors) + "{" + tinycss2.serialize(node.content) + "}")
            elif node.type == "at-rule":
                if node.lower_at_keyword in {"media", "supports", "layer", "container"} \
                        and node.content is not None:
                    inner = rules(tinycss2.parse_blocks_contents(node.content, skip_comments=True,
                                                                 skip_whitespace=True))
                    if inner:
                        kept.append(f"@{node.at_keyword}{tinycss2.serialize(node.prelude)}"
                                    "{" + "".join(inner) + "}")
                elif node.lower_at_keyword != "charset":  # one per file, at its start only
                    kept.append(tinycss2.serialize([node]))
        return kept

    return "".join(rules(tinycss2.parse_stylesheet(css, skip_comments=True,
                                                   skip_whitespace=True)))


def sheet_text(path: Path, static: Path, read: set[Path]) -> str:
    """A style sheet as one text for a file in ``static``: its @imports inlined (they resolve
    from the sheet's folder), its url()s rewritten to resolve from ``static``. Every file read
    (the sheet and those it imports) is added to ``read``."""
    read.add(path)
    folder = path.parent.relative_to(static.resolve()).as_posix()

    def url(m: re.Match) -> str:
        quote, target = m.group(1), m.group(2).strip()
        if re.match(r"(?:[a-z]+:|/|#)", target):
            return m.group(0)
        return f"url({quote}{posixpath.normpath(posixpath.join(folder, target))}{quote})"
    # Its own url()s rewritten with each @import set aside, then each imported sheet put in its
    # @import's place, from a call of its own (which rewrote its url()s from its own folder).
    imports: list[Path] = []

    def aside(m: re.Match) -> str:
        imports.append((path.parent / m.group(1)).resolve())
        return f"\0{len(imports) - 1}\0"
    css = re.sub(r"""@import\s+(?:url\(\s*)?["']([^"')]+)["']\s*\)?[^;]*;""", aside,
                 path.read_text(encoding="utf-8"))
    css = re.sub(r"""url\(\s*(["']?)([^"')]+)\1\s*\)""", url, css)
    return re.sub(r"\0(\d+)\0", lambda m: sheet_text(imports[int(m.group(1))], static, read),
                  css)


def bundle_styles(out: Path) -> tuple[int, int, int]:
    """Each page's style sheets (nine or ten files, every one render-blocking: a phone on a slow
    network waits for them in turn) as one file, _static/styles.<hash>.css, in their order, the
    rules trimmed to those the pages can use (trim_rules: most of the theme's, Bootstrap's among
    them, style things these pages never hold, and every page matched them all). The sheets
    bundled are then removed. Returns the bytes of the sheets before, of the bundles, and the
    number of bundles."""
    static = (out / "_static").resolve()
    pages = {page: page.read_text(encoding="utf-8") for page in sorted(out.glob("*.html"))}
    texts = list(pages.values())
    texts += [p.read_text(encoding="utf-8") for p in sorted(static.rglob("*.js"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted((static / "views").glob("*.json"))]
    names = used_names(texts)
    bundles: dict[tuple[str, ...], str] = {}
    bundled: set[Path] = set()
    for page, text in pages.items():
        head, sep, body = text.partition("</head>")
        links = tuple(a or b for a, b in STYLESHEET.findall(head))
        if not links:
            continue
        if links not in bundles:
            sheets = [(out / link).resolve() for link in links]
            css = trim_rules("\n".join(sheet_text(sheet, static, bundled) for sheet in sheets),
                             names)
            name = f"styles.{hashlib.sha256(css.encode()).hexdigest()[:10]}.css"
            (static / name).write_text(css, encoding="utf-8")
            bundles[links] = name
        first = itertools.count()
        head = STYLESHEET.sub(lambda m: f'<link rel="stylesheet" href="_static/{bundles[links]}" />'
                              "\n    " if next(first) == 0 else "", head)
        page.write_text(head + sep + body, encoding="utf-8")
    before = sum(sheet.stat().st_size for sheet in bundled)
    after = sum((static / name).stat().st_size for name in bundles.values())
    for sheet in bundled:
        sheet.unlink()
        sheet.with_name(sheet.name + ".map").unlink(missing_ok=True)
    return before, after, len(bundles)


# ------------------------------------------------------------------------------ offline


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
        elif tag == "script" and self.type == "application/vnd.jupyter.widget-state+json" \
                and text.strip():
            self.state(text)
        self.type, self.text = "", []

    def state(self, text: str) -> None:
        """Saved widget state (in a page, or a file of _static/views/): anywidget modules and
        their style sheets."""
        for model_id, model in json.loads(text)["state"].items():
            esm = model.get("state", {}).get("_esm", "")
            if re.match(r"https?://", esm.strip()) or self.JS.search(esm):
                self.found.append(f"anywidget _esm of model {model_id} imports from a URL")
            self.css(model.get("state", {}).get("_css", ""))

    def css(self, text: str) -> None:
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # a commented-out @import loads nothing
        self.found += [f"CSS {url}" for url in self.CSS.findall(text)]


def check_offline(out: Path) -> None:
    """Fail if any page or style sheet would load something from another host when opened."""
    problems = []
    for page in sorted(out.rglob("*.html")):
        parser = RemoteLoads()
        parser.feed(page.read_text(encoding="utf-8"))
        problems += [f"{page.relative_to(out)}: {found}" for found in parser.found]
    for sheet in sorted(out.rglob("*.css")):
        parser = RemoteLoads()
        parser.css(sheet.read_text(encoding="utf-8"))
        problems += [f"{sheet.relative_to(out)}: {found}" for found in parser.found]
    for saved in sorted((out / "_static" / "views").glob("*.json")):
        parser = RemoteLoads()
        parser.state(saved.read_text(encoding="utf-8"))
        problems += [f"{saved.relative_to(out)}: {found}" for found in parser.found]
    if problems:
        sys.exit("error: the site would load from another host when opened:\n  "
                 + "\n  ".join(problems))


# ------------------------------------------------------------------------------ main


def build_edition(language: str, notebooks: list[Path]) -> dict:
    """One edition of the site, in build/site-html[-LANG]/ (moved into site/ by main()): its
    sources in build/site-src[-LANG]/, Sphinx, then each page finished. Returns where it is
    and what it holds."""
    folder = EDITIONS[language][0]
    suffix = f"-{folder}" if folder else ""
    src = ROOT / "build" / f"site-src{suffix}"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(SITE_SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    static = src / "_static"
    copy_static(static)
    with open(ROOT / "pyproject.toml", "rb") as f:
        repository = tomllib.load(f)["project"]["urls"]["Repository"]
    t = translator(language)
    info = {"repository_url": repository, "language": language, "title": t("title")}
    if language != "en":
        # Chinese search: the glossary's terms are words to jieba (else it may cut 注意力汇聚 in
        # two and a query for the whole term finds nothing).
        terms = sorted({zh for _, zh, _ in site_references.glossary_rows(
            nbformat.read(notebooks[0], as_version=4))} | set(SEARCH_WORDS))
        (src / "search_words.txt").write_text("".join(f"{w} 100000\n" for w in terms),
                                              encoding="utf-8")
        info["search_dict"] = "search_words.txt"
    (src / "site_info.json").write_text(json.dumps(info))

    nbs = [prepare(path, language) for path in notebooks]
    # The paper links and first glosses of nbs rewritten in place; references.md, glossary.md.
    for name, page in site_references.apply(notebooks, nbs, language).items():
        (src / name).write_text(page, encoding="utf-8")
    text = []
    for path, nb in zip(notebooks, nbs):
        nbformat.write(nb, src / path.name)
        text.append(json.dumps(nb, ensure_ascii=False))
    # index.ipynb (with its live view) and the docs pages, written by landing(); their text.
    index = landing(notebooks, nbs, static, language)
    chars = cjk_characters("".join(text) + index)
    fonts = cjk_font(chars, static)

    # Built in build/ (MyST-NB writes its jupyter_execute/ beside the output), then moved.
    html_dir = ROOT / "build" / f"site-html{suffix}"
    shutil.rmtree(html_dir, ignore_errors=True)
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                          "--keep-going", "-j", "auto", str(src), str(html_dir)], cwd=ROOT)
    if run.returncode:
        sys.exit(f"error: sphinx-build failed ({run.returncode}); sources in {src}")
    shutil.rmtree(html_dir / ".doctrees", ignore_errors=True)
    (html_dir / ".buildinfo").unlink(missing_ok=True)
    # What Sphinx and the theme wrote around the prose (in Chinese: "亮色", the search's
    # messages in translations.js) needs its characters in the subset too.
    built = cjk_characters("".join(
        p.read_text(encoding="utf-8") for p in [*html_dir.glob("*.html"),
                                                 *html_dir.glob("_static/translations.js")]))
    if built - chars:
        fonts = cjk_font(chars | built, html_dir / "_static")
    for path in notebooks:  # the download button gives the notebook as committed
        source = path if language == "en" else i18n.ZH_NOTEBOOKS / path.name
        shutil.copy2(source, html_dir / "_sources" / path.name)
    maths = typeset_maths(html_dir)
    finish(html_dir, language)
    styles = bundle_styles(html_dir)
    check_offline(html_dir)
    return {"html": html_dir, "fonts": fonts, "maths": maths, "styles": styles,
            "pages": len(list(html_dir.glob("*.html")))}


# Chinese words jieba should keep whole in the search index beyond the glossary's terms (the
# issue's examples among them).
SEARCH_WORDS = ["掩码", "键值缓存", "注意力", "注意力汇聚", "滑动窗口", "线性注意力", "旋转位置编码"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT / "site")
    args = parser.parse_args()
    start = time.perf_counter()
    out: Path = args.out.resolve()
    notebooks = sorted(args.notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        sys.exit(f"error: no NN_*.ipynb in {args.notebooks}")
    # Rebuilt from scratch; refuse to empty a folder that is not a previous build.
    if out.exists() and any(out.iterdir()) and not (out / "index.html").is_file():
        sys.exit(f"error: {out} is not empty and holds no index.html: not removing it")

    editions = {}
    for language in EDITIONS:
        editions[language] = build_edition(language, notebooks)
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(editions["en"]["html"], out)
    for language, (folder, _) in EDITIONS.items():
        if folder:
            shutil.move(editions[language]["html"], out / folder)

    pages = sorted(out.glob("*.html")) + sorted(out.glob("*/*.html"))
    files = [f for f in out.rglob("*") if f.is_file()]
    total = sum(f.stat().st_size for f in files)
    for page in pages:
        print(f"{page.stat().st_size / 1e3:8.0f} kB  {page.relative_to(out.parent)}")
    for language, e in editions.items():
        fonts, font_bytes = e["fonts"]
        styles = e["styles"]
        print(f"{language}: {e['pages']} pages; {font_bytes / 1e3:.0f} kB CJK font subset "
              f"({fonts} woff2 files); {e['maths']} pieces of maths typeset (KaTeX); "
              f"{styles[1] / 1e3:.0f} kB style sheets: {styles[2]} bundles, one a page, of the "
              f"rules the pages can use (from {styles[0] / 1e3:.0f} kB in the sheets bundled)")
    left = i18n.report()
    if left:
        print(f"warning: zh_CN: {len(left)} messages to translate or fix (shown in English "
              "where untranslated): python tools/i18n.py check lists them")
    print(f"{total / 1e6:8.1f} MB  total, {len(files)} files, {len(pages)} pages, in {out}, "
          f"built in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
