"""tools/build_site.py's finishing of the built pages for a phone on a slow network: the maths
typeset at build time (KaTeX), the style sheets bundled and trimmed to the rules the pages can
use, the fonts of a page's opening preloaded, the views' saved state moved out of <head>, and the
theme's scroll-box step taken out of its script."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
build_site = pytest.importorskip("build_site")  # imports widget_state, site_landing from tools/
KATEX = ROOT / "node_modules" / "katex" / "dist"
needs_tinycss2 = pytest.mark.skipif(not __import__("importlib").util.find_spec("tinycss2"),
                                    reason="tinycss2 (requirements-site.txt) not installed")
needs_katex = pytest.mark.skipif(shutil.which("node") is None or not KATEX.is_dir(),
                                 reason="Node.js or node_modules/katex missing (npm ci)")


# ------------------------------------------------------------------------------ styles

@needs_tinycss2
def test_trim_rules_keeps_what_the_pages_can_match_and_drops_the_rest():
    css = """@charset "UTF-8";
    @font-face { font-family: X; src: url(x.woff2); }
    p, .used, .unused { color: red }
    .unused .used { color: blue }
    #used-id > a { color: green }
    #gone { color: black }
    a[href$=".pdf"] { color: navy }
    :is(.unused, .used) > b { margin: 0 }
    :not(.unused) { padding: 0 }
    @media (max-width: 600px) { .used { top: 0 } .unused { top: 1px } }
    @media print { .unused { display: none } }
    @keyframes spin { from { top: 0 } }
    .accent-body:not(.accent-full) { width: 0 }
    img:not(.only-dark, .dark-light) { filter: none }
    .bs-tooltip-auto .tooltip-arrow { bottom: 0 }
    """
    out = build_site.trim_rules(css, {"used", "used-id", "accent-body", "tooltip-arrow"})
    assert "@charset" not in out
    assert "@font-face" in out and "src: url(x.woff2)" in out
    assert "p,.used{ color: red }" in out  # the selector list trimmed to its parts that can match
    assert ".unused .used" not in out and "#gone" not in out
    assert "#used-id > a{" in out and 'a[href$=".pdf"]{' in out
    assert ":is(.unused, .used) > b{" in out  # kept whole: one of its parts can match
    assert ":not(.unused){" in out  # matches whatever is not .unused
    assert "@media (max-width: 600px) {.used{ top: 0 }}" in out
    assert "@media print" not in out  # nothing left inside
    assert "@keyframes spin" in out
    # What :not() names is what must be absent: not needed in the pages (KaTeX's accents, the
    # theme's dark-mode images lost these rules to that mistake).
    assert ".accent-body:not(.accent-full){" in out and "img:not(.only-dark, .dark-light){" in out
    # Classes Bootstrap builds at run time (`bs-${name}-auto`) are in no file: kept.
    assert ".bs-tooltip-auto .tooltip-arrow{" in out


def test_sheet_text_inlines_imports_and_rewrites_urls_from_static(tmp_path):
    static = tmp_path / "_static"
    (static / "styles").mkdir(parents=True)
    (static / "basic.css").write_text("div { background: url('img/a.png') }")
    (static / "styles" / "theme.css").write_text(
        '@import "../basic.css";\n.x { background: url(../fonts/f.woff2) } '
        '.y { background: url("data:image/png;base64,AA==") } .z { background: url(#m) }')
    read: set[Path] = set()
    text = build_site.sheet_text(static / "styles" / "theme.css", static, read)
    assert read == {(static / "styles" / "theme.css"), (static / "basic.css").resolve()}
    assert "@import" not in text
    assert "url('img/a.png')" in text  # basic.css's url, now read from _static/
    assert "url(fonts/f.woff2)" in text
    assert 'url("data:image/png;base64,AA==")' in text and "url(#m)" in text


@needs_tinycss2
def test_bundle_styles_gives_each_page_one_sheet_and_removes_those_bundled(tmp_path):
    static = tmp_path / "_static"
    (static / "styles").mkdir(parents=True)
    (static / "styles" / "theme.css").write_text('@import "../basic.css";')
    (static / "basic.css").write_text(".kept { color: red } .dropped { color: blue }")
    (static / "site.css").write_text(".mine { margin: 0 }")
    (static / "katex").mkdir()
    (static / "katex" / "katex.css").write_text(".katex { font: 1em KaTeX_Main }")
    head = ('<link href="_static/styles/theme.css?digest=1" rel="stylesheet" />\n'
            '<link rel="stylesheet" type="text/css" href="_static/site.css?v=2" />\n')
    maths = '<link rel="stylesheet" type="text/css" href="_static/katex/katex.css" />\n'
    (tmp_path / "a.html").write_text(f"<html><head>{head}</head><body class='kept mine'></body></html>")
    (tmp_path / "b.html").write_text(
        f"<html><head>{head}{maths}</head><body class='kept katex'></body></html>")
    before, after, bundles = build_site.bundle_styles(tmp_path)
    assert bundles == 2 and 0 < after < before
    for page in ("a.html", "b.html"):
        text = (tmp_path / page).read_text()
        links = [line for line in text.split("<link")[1:]]
        assert len(links) == 1 and 'href="_static/styles.' in links[0], text
        css = (tmp_path / links[0].split('href="')[1].split('"')[0]).read_text()
        assert ".kept{" in css and ".mine{" in css and ".dropped" not in css
        assert (".katex{" in css) == (page == "b.html")
    assert not (static / "basic.css").exists() and not (static / "site.css").exists()
    assert not (static / "styles" / "theme.css").exists()


# ------------------------------------------------------------------------------ fonts

KATEX_CSS = """@font-face{font-display:swap;font-family:KaTeX_Main;font-style:normal;font-weight:400;src:url(fonts/KaTeX_Main-Regular.woff2) format("woff2")}
@font-face{font-display:swap;font-family:"KaTeX_Math";font-style:italic;font-weight:400;src:url(fonts/KaTeX_Math-Italic.woff2) format("woff2")}
@font-face{font-display:swap;font-family:KaTeX_Size2;font-style:normal;font-weight:400;src:url(fonts/KaTeX_Size2-Regular.woff2) format("woff2")}
.katex{font:normal 1.21em KaTeX_Main,Times New Roman,serif}.katex .mathnormal{font-family:KaTeX_Math;font-style:italic}
.katex .delimsizing.size2{font-family:KaTeX_Size2}.katex .delimsizing.mult .delim-size1>span{font-family:KaTeX_Main}"""


def test_katex_fonts_maps_classes_to_font_files():
    rules = build_site.katex_fonts(KATEX_CSS)
    assert (frozenset({"mathnormal"}), "KaTeX_Math-Italic.woff2") in rules
    assert (frozenset({"delimsizing", "size2"}), "KaTeX_Size2-Regular.woff2") in rules
    assert all(classes for classes, _ in rules)  # `... > span` (no class) is not a rule here


@pytest.mark.skipif(not (KATEX / "katex.min.css").is_file(), reason="node_modules/katex missing")
def test_katex_fonts_reads_katexs_own_style_sheet():
    rules = dict(build_site.katex_fonts((KATEX / "katex-swap.min.css").read_text()))
    assert rules[frozenset({"mathnormal"})] == "KaTeX_Math-Italic.woff2"
    assert rules[frozenset({"mathbf"})] == "KaTeX_Main-Bold.woff2"
    assert rules[frozenset({"delimsizing", "size1"})] == "KaTeX_Size1-Regular.woff2"


def test_font_preloads_name_the_fonts_of_the_opening_only():
    maths = build_site.katex_fonts(KATEX_CSS)
    faces = [("cjk-1.woff2", {ord("键")}), ("cjk-2.woff2", {ord("值")})]
    opening = ('<p>The keys (键) and <span class="katex"><span class="mord mathnormal">q'
               '</span></span></p>')
    far = "<p>" + "x" * 5000 + '</p><p>值 <span class="delimsizing size2">(</span></p>'
    links = build_site.font_preloads(f"<html><head></head><body>{opening}{far}</body></html>",
                                     faces, maths)
    assert 'href="_static/fonts/cjk-1.woff2"' in links and "cjk-2" not in links
    assert 'href="_static/katex/fonts/KaTeX_Main-Regular.woff2"' in links
    assert 'href="_static/katex/fonts/KaTeX_Math-Italic.woff2"' in links
    assert "Size2" not in links  # beyond the opening
    assert build_site.font_preloads("<body><p>no maths, no 汉字</p></body>", faces, maths) == ""


# ------------------------------------------------------------------------------ views' state

def test_external_state_moves_the_views_state_out_of_the_page(tmp_path):
    state = {"version_major": 2, "state": {"m1": {"model_name": "AnyModel", "state": {"scene": "x"}}}}
    page = ('<head><script type="application/vnd.jupyter.widget-state+json">'
            f'{json.dumps(state)}</script></head><body>text</body>')
    out = build_site.external_state(page, "02_x", tmp_path / "views")
    files = list((tmp_path / "views").glob("02_x.*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == state
    assert (f'<script type="application/vnd.jupyter.widget-state+json" '
            f'data-src="_static/views/{files[0].name}"></script>') in out
    assert "AnyModel" not in out and out.endswith("<body>text</body>")
    # The landing page keeps its state (its one view is in the first screen); a page without
    # state is unchanged; a state that does not parse is refused.
    assert build_site.external_state(page, "index", tmp_path / "views") == page
    assert build_site.external_state("<head></head>", "03", tmp_path / "views") == "<head></head>"
    with pytest.raises(json.JSONDecodeError):
        build_site.external_state(page.replace('"state": {', '"state": {{'), "04", tmp_path / "v")


# ------------------------------------------------------------------------------ theme script

def test_drop_theme_tab_stops_takes_out_the_themes_last_step_or_fails(tmp_path):
    script = tmp_path / "pydata-sphinx-theme.js"
    script.write_text("(()=>{setUp()" + build_site.THEME_TAB_STOPS + "\n//# sourceMappingURL=x")
    (tmp_path / "pydata-sphinx-theme.js.map").write_text("{}")
    build_site.drop_theme_tab_stops(script)
    assert script.read_text() == "(()=>{setUp()})();\n//# sourceMappingURL=x"
    assert not (tmp_path / "pydata-sphinx-theme.js.map").exists()
    with pytest.raises(SystemExit, match="THEME_TAB_STOPS"):
        build_site.drop_theme_tab_stops(script)  # not the script expected (any more)


# ------------------------------------------------------------------------------ maths

@needs_katex
def test_typeset_maths_writes_katex_html_and_mathml_and_links_its_style_sheet(tmp_path):
    styles = build_site.CJK_LINK + '?v=1" />'
    (tmp_path / "a.html").write_text(
        f"<html><head>{styles}</head><body><p>Inline "
        r'<span class="math notranslate nohighlight">\(\alpha_i &lt; 1\)</span></p>'
        r'<div class="math notranslate nohighlight">\[\sum_{i=1}^m \mathbf v_i\]</div>'
        "</body></html>")
    (tmp_path / "b.html").write_text(f"<html><head>{styles}</head><body>none</body></html>")
    assert build_site.typeset_maths(tmp_path) == 2
    a = (tmp_path / "a.html").read_text()
    assert a.count('class="katex"') == 2 and a.count('<span class="katex-display">') == 1
    assert '<annotation encoding="application/x-tex">\\alpha_i &lt; 1</annotation>' in a
    assert "\\(" not in a.split("annotation")[0]  # no TeX left as text
    assert a.index("_static/katex/katex.css") < a.index("_static/cjk.css")
    assert "katex" not in (tmp_path / "b.html").read_text()


@needs_katex
def test_typeset_maths_stops_the_build_on_tex_katex_cannot_typeset(tmp_path):
    (tmp_path / "a.html").write_text(
        f"<head>{build_site.CJK_LINK}\" /></head>"
        r'<span class="math notranslate nohighlight">\(\notamacro{x}\)</span>')
    with pytest.raises(SystemExit, match="notamacro"):
        build_site.typeset_maths(tmp_path)
