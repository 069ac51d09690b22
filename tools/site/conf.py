"""Sphinx configuration of the course site. tools/build_site.py copies this folder, the
notebooks (prepared for readers) and the npm assets into build/site-src/ and runs Sphinx there;
see that file. Every script, style sheet and font is served from _static/: nothing remote."""

import json
from pathlib import Path

_info = json.loads((Path(__file__).parent / "site_info.json").read_text(encoding="utf-8"))

project = "Attention, hands-on"
author = "the Attention, hands-on authors"
copyright = "2026, the Attention, hands-on authors"
# The edition: "en", or "zh_CN" (site/zh/: the prose translated by tools/build_site.py from the
# catalogues in locales/; Sphinx's and the theme's own words from their zh_CN catalogues).
language = _info.get("language", "en")
if "search_dict" in _info:  # Chinese search: jieba cuts the text, with the glossary's terms
    html_search_options = {"dict": str(Path(__file__).parent / _info["search_dict"])}
    # Sphinx 9.0.4's Chinese search ships the English stemmer (for the Latin words) but its
    # language_data.js says `window.Stemmer = ChineseStemmer`, which nothing defines: every
    # search stopped there ("ChineseStemmer is not defined"). Named after the stemmer it ships.
    from sphinx.search import zh as _zh

    _zh.SearchChinese.language_name = "English"

extensions = ["myst_nb"]
# The notebooks' stored outputs, as committed: nothing is executed.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
# No "¶" beside output images, no warning for the .ipynb a notebook links to in its own folder.
suppress_warnings = ["mystnb.unknown_mime_type"]
exclude_patterns = ["_build"]

# The page views' renderer: every view the site displays is an anywidget model drawn by
# helpers/widgets/view.js, and pageviews.js (4 kB, an async module: it blocks nothing and draws
# the views parsed by the time it runs, the rest once the page is parsed) renders them from the
# saved widget state, in place of html-manager + require.js + anywidget (3.6 MB, render-blocking).
# MyST-NB adds it to the pages that hold widgets only. (Async rather than deferred: the first
# figure drawn ~0.3 s sooner, measured on 02, 08, 10, 11; it waits one frame, so the text is
# painted first: Lighthouse mobile LCP on 02 8.2 s -> 4.7 s.)
nb_ipywidgets_js = {"pageviews.js": {"type": "module", "async": "async"}}

# Maths: Sphinx writes each piece as MathJax would read it (\(…\) in span.math, \[…\] in
# div.math) and loads no script for it ("prerendered", registered in setup() below): the build
# typesets every piece with KaTeX afterwards (tools/build_site.py, tools/render_maths.mjs), so the
# reader's browser has no maths to typeset.
html_math_renderer = "prerendered"

html_theme = "sphinx_book_theme"
html_title = _info.get("title", project)
# One search box: the header's (at every width); the theme would add a second in the sidebar.
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"]}
html_static_path = ["_static"]
html_css_files = ["cjk.css", "site.css", "book.css"]
html_favicon = "_static/favicon.svg"  # tools/build_site.py also writes /favicon.ico
# No general index: the notebooks define no index entries, so genindex.html would be empty.
html_use_index = False
# Search: the landing page repeats each notebook's opening, so it would outrank the notebook a
# reader looks for; this scorer ranks it below the notebooks (search-scorer.js).
html_search_scorer = str(Path(__file__).parent / "_static" / "search-scorer.js")
html_show_sourcelink = False
html_copy_source = True  # the .ipynb behind the download button
html_last_updated_fmt = None

html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": True,
    "repository_url": _info["repository_url"],
    "repository_branch": "main",
    "path_to_docs": "notebooks" if language == "en" else "notebooks/zh",
    # A plain link to Colab (nothing loads from there until a reader clicks).
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "navigation_with_keys": False,
    # Accessible code colours (accessible-pygments): every token >= 4.5:1 on its background.
    "pygments_light_style": "a11y-light",
    "pygments_dark_style": "a11y-dark",
}
# Light or dark as the reader's system says, until the reader picks one with the theme's switch.
html_context = {"default_mode": "auto"}

# The site's own script (tools/site/_static/site.js): what the pages do beyond the theme.
html_js_files = [("site.js", {"defer": "defer"}), ("book.js", {"defer": "defer"})]


# ------------------------------------------------------------------------------ descriptions
# Every page gets a <meta name="description">: the opening of its text (its first paragraph of
# some length), as plain text of at most 160 characters: whole sentences where they fill most of it, else cut at a word. TeX
# becomes plain text (\(\mathbf M(\delta)\) → M(δ)); the Chinese terms in full-width brackets
# are left out (the description is the English opening).
import html as _html  # noqa: E402
import re as _re  # noqa: E402

DESCRIPTION_MAX = 160
_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "theta": "θ",
          "lambda": "λ", "mu": "μ", "pi": "π", "sigma": "σ", "tau": "τ", "phi": "φ",
          "omega": "ω", "Delta": "Δ", "Sigma": "Σ", "cdot": "·", "times": "×", "le": "≤",
          "ge": "≥", "to": "→", "approx": "≈", "infty": "∞", "ldots": "…", "dots": "…"}


def _plain_tex(tex: str) -> str:
    tex = _re.sub(r"\\(?:mathbf|mathrm|mathit|operatorname|text|boldsymbol)\s*", "", tex)
    tex = _re.sub(r"\\([A-Za-z]+)", lambda m: _GREEK.get(m.group(1), m.group(1)), tex)
    return _re.sub(r"[{}]|\\[,;! ]", "", tex).replace("^", "").replace("_", "")


def description(body: str) -> str:
    for paragraph in _re.findall(r"<p>(.*?)</p>", body, _re.S):
        text = _re.sub(r"<[^>]+>", "", paragraph)
        text = _re.sub(r"\\\((.*?)\\\)", lambda m: _plain_tex(m.group(1)), _html.unescape(text))
        text = _re.sub(r"（[^）]*）", " ", text)  # the Chinese terms
        text = _re.sub(r"\s+([,.;:)])", r"\1", " ".join(text.split()))
        if len(text) >= 60:
            break
    else:
        return ""
    if len(text) <= DESCRIPTION_MAX:
        return text
    sentences = _re.split(r"(?<=[.!?])\s+|(?<=[。！？])", text)
    kept = ""
    for sentence in sentences:
        if len(kept) + len(sentence) + 1 > DESCRIPTION_MAX:
            break
        kept = f"{kept} {sentence}".strip()
    if len(kept) >= 100:  # else a sentence cut at a word says more
        return kept
    cut = text[:DESCRIPTION_MAX - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


SITE_DESCRIPTION = ("Attention mechanisms in PyTorch, one idea per notebook: built from scratch, "
                    "checked against a tested helper, drawn as figures you can move.")


def _add_description(app, pagename, templatename, context, doctree):
    text = description(context.get("body") or "") if pagename != "search" else ""
    text = text or SITE_DESCRIPTION
    context["metatags"] = (context.get("metatags") or "") + (
        f'\n<meta name="description" content="{_html.escape(text, quote=True)}" />')


def setup(app):
    from sphinx.ext import mathjax

    app.add_html_math_renderer("prerendered", (mathjax.html_visit_math, None),
                               (mathjax.html_visit_displaymath, None))
    app.connect("html-page-context", _add_description)
