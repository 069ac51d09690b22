"""Build site/, the course site: Sphinx + MyST-NB + sphinx-book-theme over the notebooks' STORED
outputs (nothing is executed), the page views still movable without a kernel.

Run by `make site` (after `npm ci` and `pip install -r requirements-site.txt`). Steps:
1. build/site-src/ gets tools/site/ (conf.py; _static/: site.css, site.js, book.css, book.js,
   pageviews.js, the page views' renderer, search-scorer.js, favicon.svg), MathJax 2 from
   node_modules/ and each notebook prepared for readers: its widget state merged back
   (tools/widget_state.py), the Colab badge and Colab cell removed (the theme's launch button
   links to Colab), solutions tagged ``hide-cell`` and check cells ``hide-input`` (collapsed
   until clicked).
2. The references and glossary pages, and the links to them (tools/site_references.py); the
   landing page (index.ipynb: a live view, the series in order, a picture per notebook) and the
   documentation pages from docs/ (tools/site_landing.py).
3. A subset of Noto Sans SC (npm @fontsource/noto-sans-sc) holding only the CJK characters
   the pages use, so the Chinese terms render on a machine without a CJK font.
4. sphinx-build; then each page finished (finish_page: the theme's icons as inline SVG, nothing
   render-blocking in <head>, one viewport <meta>, accessible names; /favicon.ico), and every
   page and style sheet checked to load nothing from another host.
Options (developers): --notebooks DIR (default notebooks/), --out DIR (default site/).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import nbformat

import site_references  # tools/site_references.py: references and glossary
import widget_state  # tools/widget_state.py (run as a script, tools/ is on sys.path)
from site_landing import landing  # tools/site_landing.py: the landing page and the docs pages

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / "node_modules"
SITE_SRC = ROOT / "tools" / "site"
# MathJax 2 (one combined file: TeX input, CommonHTML output, menus) plus what that loads on
# demand: the Safe extension, TeX extensions, glyph data, MathML operator tables, web fonts.
# Left out: other output renderers, menu translations, the a11y explorer (3.7 MB).
MATHJAX = [
    "MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js", "extensions/*.js",
    "extensions/TeX/*.js", "jax/element/mml/optable/*.js", "jax/output/CommonHTML/autoload/*.js",
    "jax/output/CommonHTML/fonts/TeX/*.js", "fonts/HTML-CSS/TeX/woff/*.woff",
]
FONTSOURCE = NODE / "@fontsource" / "noto-sans-sc"
CJK_FAMILY = "Noto Sans SC subset"
# Colab's badge line, first in each notebook (tools/sync_colab.py writes it).
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\s*\n+")
CHECK = re.compile(r"^def check_\d+\(", re.M)


# ------------------------------------------------------------------------------ sources


def copy_static(static: Path) -> None:
    """MathJax 2 from node_modules/ into _static/mathjax/. (The page views need nothing from
    npm: tools/site/_static/pageviews.js renders them; see conf.py.)"""
    if not (NODE / ".package-lock.json").is_file():
        sys.exit(f"error: no {NODE.name}/: run `npm ci` first (`make site` does)")
    mathjax = NODE / "mathjax"
    files = [(src, static / "mathjax" / src.relative_to(mathjax))
             for pattern in MATHJAX for src in sorted(mathjax.glob(pattern))]
    missing = [f"mathjax/{p}" for p in MATHJAX if not any(mathjax.glob(p))]
    if missing:
        sys.exit(f"error: node_modules/ lacks {', '.join(missing)}: run `npm ci`")
    for src, target in files:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def prepare(notebook: Path) -> nbformat.NotebookNode:
    """The notebook as a reader of the site gets it (see the module docstring)."""
    nb = widget_state.merged(notebook)
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
            cell.metadata["mystnb"] = {"code_prompt_show": "Show the solution",
                                       "code_prompt_hide": "Hide the solution"}
        elif cell.cell_type == "code" and CHECK.search(cell.source):
            # An exercise's check: its code holds the answer; its output ("not answered yet")
            # stays in view.
            tags.append("hide-input")
            cell.metadata["mystnb"] = {"code_prompt_show": "Show the check's code",
                                       "code_prompt_hide": "Hide the check's code"}
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


def font_preloads(page: str, faces: list[tuple[str, set[int]]]) -> str:
    """<link rel=preload> for the CJK font files (cjk.css) holding the characters of the page's
    opening (its first 4,000 characters of text: the title, the first paragraph, the contents),
    so that the Chinese terms are drawn in it from the first paint (font-display: swap: the text
    never waits for the font; it would show in a fallback face until then)."""
    body = page.split("<body", 1)[-1]
    text = re.sub(r"<script\b.*?</script>|<[^>]+>", "", body, flags=re.S)
    opening = {ord(c) for c in " ".join(text.split())[:4000] if ord(c) >= 0x2E80}
    return "".join(f'\n<link rel="preload" href="_static/fonts/{name}" as="font" type="font/woff2" '
                   f'crossorigin />' for name, points in faces if points & opening)


def finish_page(page: str, name: str, icons: dict, doc_options: str,
                faces: list[tuple[str, set[int]]]) -> str:
    """What the theme's templates leave that a reader pays for, fixed in the built page:
    - its icons drawn by fontawesome.js (1.56 MB, every page) → inline SVG, the script dropped;
    - nothing render-blocking in <head>: documentation_options.js (a few lines the inline
      scripts after it read) inlined, every other script deferred (they wait for the DOM
      anyway); Sphinx's search scripts and index (80 kB) only on search.html (the theme loads
      them everywhere for a search-as-you-type that is off);
    - one viewport <meta> (the templates write three);
    - the CJK font files of the page's opening preloaded (font_preloads);
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
    head = head.replace('<link rel="stylesheet" type="text/css" href="_static/cjk.css',
                        font_preloads(page, faces).lstrip("\n") + "\n    "
                        '<link rel="stylesheet" type="text/css" href="_static/cjk.css', 1)
    body = body.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    page = head + sep + body
    page = re.sub(r'(<button class="btn search-button-field search-button__button[^"]*"[^>]*?)'
                  r' aria-label="Search"', r"\1", page)
    return inline_icons(page, icons)


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


def output_images(page: str, webp: set[str]) -> str:
    """The outputs' figures: WebP where webp_images() made one; fetched when they come near
    the screen (loading="lazy"; their width and height keep the layout from moving) and
    decoded off the main thread; named for a screen reader by their place, not their file."""
    count = itertools.count(1)

    def img(m: re.Match) -> str:
        tag = m.group(0)
        # MyST-NB's alt text is the file's path: a screen reader would spell out a hash.
        tag = re.sub(r'alt="_images/[^"]*"', f'alt="Figure {next(count)}: the output of the code '
                     'cell above"', tag)
        if "loading=" not in tag:
            tag = tag.replace("<img ", '<img loading="lazy" decoding="async" ', 1)
        return tag
    page = re.sub(r'<img [^>]*\bsrc="_images/[^"/]+\.png"[^>]*>', img, page)
    # Every reference to a converted file (the <img> and the link around a figure shown
    # smaller than its file) names its WebP.
    return re.sub(r'"_images/([^"/]+)\.png"',
                  lambda m: f'"_images/{m.group(1)}.webp"' if f"{m.group(1)}.png" in webp
                  else m.group(0), page)


def finish(out: Path) -> None:
    """Every page through finish_page() and output_images() (the figures as lossless WebP,
    webp_images()); the theme's icon script removed (its licence kept); /favicon.ico written."""
    script = out / FA_SCRIPT
    icons = theme_icons(script.read_text(encoding="utf-8"))
    doc_options = (out / "_static" / "documentation_options.js").read_text(encoding="utf-8")
    css = (out / "_static" / "cjk.css").read_text(encoding="utf-8")
    faces = [(name, ranges(spec)) for name, spec in
             re.findall(r'url\("fonts/([^"]+)"\)[^;]*;\s*unicode-range:\s*([^;]+);', css)]
    images = webp_images(out / "_images")
    for page in sorted(out.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        text = finish_page(text, page.name, icons, doc_options, faces)
        page.write_text(output_images(text, images), encoding="utf-8")
    for leftover in (script, script.with_name(script.name + ".map")):
        leftover.unlink(missing_ok=True)
    favicon_ico(out / "_static" / "favicon.svg", out / "favicon.ico")


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
    if problems:
        sys.exit("error: the site would load from another host when opened:\n  "
                 + "\n  ".join(problems))


# ------------------------------------------------------------------------------ main


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

    src = ROOT / "build" / "site-src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(SITE_SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    static = src / "_static"
    copy_static(static)
    with open(ROOT / "pyproject.toml", "rb") as f:
        repository = tomllib.load(f)["project"]["urls"]["Repository"]
    (src / "site_info.json").write_text(json.dumps({"repository_url": repository}))

    nbs = [prepare(path) for path in notebooks]
    # The paper links and first glosses of nbs rewritten in place; references.md, glossary.md.
    for name, page in site_references.apply(notebooks, nbs).items():
        (src / name).write_text(page, encoding="utf-8")
    text = []
    for path, nb in zip(notebooks, nbs):
        nbformat.write(nb, src / path.name)
        text.append(json.dumps(nb, ensure_ascii=False))
    # index.ipynb (with its live view) and the docs pages, written by landing(); their text.
    index = landing(notebooks, nbs, static)
    fonts, font_bytes = cjk_font(cjk_characters("".join(text) + index), static)

    # Built in build/ (MyST-NB writes its jupyter_execute/ beside the output), then moved.
    html_dir = ROOT / "build" / "site-html"
    shutil.rmtree(html_dir, ignore_errors=True)
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                          "--keep-going", "-j", "auto", str(src), str(html_dir)], cwd=ROOT)
    if run.returncode:
        sys.exit(f"error: sphinx-build failed ({run.returncode}); sources in {src}")
    shutil.rmtree(html_dir / ".doctrees", ignore_errors=True)
    (html_dir / ".buildinfo").unlink(missing_ok=True)
    for path in notebooks:  # the download button gives the notebook as committed
        shutil.copy2(path, html_dir / "_sources" / path.name)
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(html_dir, out)
    finish(out)
    check_offline(out)

    pages = sorted(out.glob("*.html"))
    files = [f for f in out.rglob("*") if f.is_file()]
    total = sum(f.stat().st_size for f in files)
    for page in pages:
        print(f"{page.stat().st_size / 1e3:8.0f} kB  {page.relative_to(out.parent)}")
    print(f"{font_bytes / 1e3:8.0f} kB  CJK font subset ({fonts} woff2 files)")
    print(f"{total / 1e6:8.1f} MB  total, {len(files)} files, {len(pages)} pages, in {out}, "
          f"built in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
