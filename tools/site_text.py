"""The course site's own words: what tools/build_site.py, tools/site_landing.py and
tools/site_references.py write around the notebooks (the landing page, the references and
glossary pages, the sidebar's captions, the folded cells' buttons, the language switch).

English here is the source; the Chinese is in locales/zh_CN/LC_MESSAGES/site.po, a catalogue
like the notebooks' (tools/i18n.py: ``make translations`` extracts these texts into it). A text
is markdown or a label; ``{name}`` fields are filled after translation and stay as they are in
a translation (tools/i18n.py checks links and tags; the fields are checked here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

TEXT = {
    "landing": """\
# Attention, hands-on

Attention mechanisms（注意力机制）in PyTorch, one idea per notebook: each is built from
scratch, checked against a small tested helper, and drawn as a figure you can move. Go in order:
each notebook uses what the ones before it built.

<a class="ahv-start" href="{first_html}">Start with 01 →</a>
""",
    "caption": """\
<p class="ahv-caption">A live figure, from <a href="{first_html}">{first_title}</a>: move the
temperature τ and the softmax weights of three queries over four keys, and their entropy,
redraw in this page, with no Python and no network.</p>

## The series at a glance

{order}

## Where to read it

- **This site**: read it here; the figures redraw when you move their controls, with no Python
  and no network (everything the pages use is served with them). The code is what ran and the
  outputs are the stored ones. Solutions, and the code of the checks, stay folded until you click.
- **JupyterLab**: clone the repository, then `make lab` (it creates the virtual environment,
  installs the pinned packages and opens JupyterLab on 127.0.0.1).
- **Colab**: the rocket button at the top of each notebook page opens that notebook in Colab;
  its first cell fetches the repository's `helpers` there and installs nothing.

More in the [documentation](reading.md): installing, the views, the helpers, the tests and
what the series costs to run.
""",
    "part:foundations": "Foundations",
    "part:transformer": "The Transformer",
    "part:today": "Attention in today's models",
    "order": "The series in order",
    "card": "The first figure of notebook {nn}",
    "toc:notebooks": "Notebooks",
    "toc:reference": "Reference",
    "toc:documentation": "Documentation",
    "solution:show": "Show the solution",
    "solution:hide": "Hide the solution",
    "check:show": "Show the check's code",
    "check:hide": "Hide the check's code",
    "references:title": "References",
    "references:intro": "The {n} papers, books, talks and posts the notebooks cite. Each entry "
                        "links to the work and back to the notebooks that cite it (to the first "
                        "citation in each). The same list as BibTeX: "
                        "[docs/references.bib]({repo}/blob/main/docs/references.bib).",
    "references:cited": "Cited in notebook {back}.",
    "references:cited-many": "Cited in notebooks {back}.",
    "references:cite": "Cite this course",
    "references:cite-intro": "The repository's [CITATION.cff]({repo}/blob/main/CITATION.cff) "
                             "gives the same data to GitHub's “Cite this repository”. As BibTeX:",
    "glossary:title": "Glossary（术语表）",
    "glossary:intro": "The {n} terms the notebooks name in English and Chinese, in alphabetical "
                      "order. A term links to where it is introduced (the notebook in bold); the "
                      "other notebooks that write its Chinese beside it follow, each linked to "
                      "its first use there. Notebook 01 ends with the same table in the course's "
                      "order.",
    "glossary:header": "| English | 中文 | notebooks |",
    # The language switch on every page: its label names the other edition, in its language.
    "switch": "中文",
    "switch:title": "This page in Chinese (简体中文)",
    "figure": "Figure {n}: the output of the code cell above",
    "title": "Attention, hands-on",
}

FIELD = re.compile(r"\{(\w+)\}")


def messages() -> list[str]:
    """Every message of the texts, for the catalogue (tools/i18n.py)."""
    import i18n  # noqa: PLC0415 (tools/i18n.py: it imports this module)

    out: list[str] = []
    for text in TEXT.values():
        out += [m for m in i18n.messages(text) if m not in out]
    return out


@cache  # (one catalogue read a language: the build asks for it page by page)
def translator(language: str = "en") -> Callable[..., str]:
    """``t(name, **fields)``: the text ``name`` in ``language`` ("en" or "zh_CN"), its fields
    filled. A translation that drops or adds a field is an error."""
    import i18n  # noqa: PLC0415

    table = {} if language == "en" else i18n.load("site")

    def t(name: str, **fields: str) -> str:
        text = TEXT[name]
        if table:  # (a message not translated yet stays English: tools/i18n.py check fails)
            translated = i18n.translate(text, table)
            if sorted(FIELD.findall(translated)) != sorted(FIELD.findall(text)):
                raise SystemExit(f"error: site.po: the translation of {name!r} changes its "
                                 f"fields {sorted(set(FIELD.findall(text)))}")
            text = translated
        return FIELD.sub(lambda m: str(fields[m[1]]) if m[1] in fields else m[0], text)

    return t
