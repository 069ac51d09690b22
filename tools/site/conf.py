"""Sphinx configuration of the course site. tools/build_site.py copies this folder, the
notebooks (prepared for readers) and the npm assets into build/site-src/ and runs Sphinx there;
see that file. Every script, style sheet and font is served from _static/: nothing remote."""

import json
from pathlib import Path

project = "Attention, hands-on"
author = "the Attention, hands-on authors"
copyright = "2026, the Attention, hands-on authors"
language = "en"

extensions = ["myst_nb"]
# The notebooks' stored outputs, as committed: nothing is executed.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
# No "¶" beside output images, no warning for the .ipynb a notebook links to in its own folder.
suppress_warnings = ["mystnb.unknown_mime_type"]
exclude_patterns = ["_build"]

# The widget renderer and anywidget's module, served locally; require.js is told where anywidget
# is (require-config.js), and html-manager where to look for any module it does not bundle.
nb_ipywidgets_js = {
    "require.js": {},
    "require-config.js": {},
    "html-manager/embed-amd.js": {"data-jupyter-widgets-cdn": "_static/html-manager/"},
}

# MathJax 2 from npm (as nbconvert and html-manager expect it), configured the MathJax 2 way;
# MyST's own MathJax settings are for MathJax 3+ and would stop MathJax 2 typesetting anything.
myst_update_mathjax = False
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
mathjax2_config = {
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                "processEscapes": True, "processEnvironments": True},
    "showMathMenu": False,
    "messageStyle": "none",
}

html_theme = "sphinx_book_theme"
html_title = "Attention, hands-on"
html_static_path = ["_static"]
html_css_files = ["cjk.css", "site.css"]
html_show_sourcelink = False
html_copy_source = True  # the .ipynb behind the download button
html_last_updated_fmt = None

_info = json.loads((Path(__file__).parent / "site_info.json").read_text(encoding="utf-8"))
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": True,
    "repository_url": _info["repository_url"],
    "repository_branch": "main",
    "path_to_docs": "notebooks",
    # A plain link to Colab (nothing loads from there until a reader clicks).
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "navigation_with_keys": False,
    "pygments_light_style": "tango",
    "pygments_dark_style": "monokai",
}
# Light or dark as the reader's system says, until the reader picks one with the theme's switch.
html_context = {"default_mode": "auto"}

# The site's own script (tools/site/_static/site.js): what the pages do beyond the theme.
html_js_files = [("site.js", {"defer": "defer"})]
