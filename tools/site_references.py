"""The course site's references and glossary pages (issue 43, item 5), and the links to them.

The notebooks cite papers the way a reader in JupyterLab, Colab or GitHub can follow: the first
mention of a work in a notebook links to the work itself (arXiv abstract page, DOI or the
publisher's page). docs/references.bib holds every such work, one entry per URL. On the site:

* every link to a work of the bib becomes a link to its entry on references.html; the first one
  in a notebook also gets an id (``cite-KEY``) that the entry links back to;
* references.md lists every entry (authors, year, title, venue, link to the work, the notebooks
  that cite it), one anchor per key, and how to cite the course;
* glossary.md lists every term the notebooks gloss as ``English（中文）``: the table at the end of
  notebook 01 (one term a row) says which English goes with which Chinese; the first gloss of a
  term in each notebook gets an id (``gl-SLUG``) and links to the term's row, whose links go back
  to those first uses.

Links are raw ``<a href>`` to the built pages (``references.html#KEY``), not MyST cross-references:
the anchors sit inside paragraphs, where MyST has no target syntax, and Sphinx leaves raw HTML
alone. Nothing is loaded from another host: the works are plain links a reader may click.
"""

from __future__ import annotations

import html
import re
import tomllib
from pathlib import Path

from site_text import translator  # tools/site_text.py: the site's own words

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "docs" / "references.bib"
PYPROJECT = ROOT / "pyproject.toml"

ENTRY = re.compile(r"^@(\w+)\{([\w-]+),\n(.*?)^\}", re.M | re.S)
FIELD = re.compile(r"^\s+(\w+) = \{(.*)\},$", re.M)
VENUE_FIELDS = ("journal", "booktitle", "publisher", "institution", "howpublished")
REQUIRED = ("author", "title", "year", "url")
# A markdown link [text](url); the text may span lines but holds no bracket.
LINK = re.compile(r"\[([^\[\]]+)\]\((https?://[^)\s]+)\)")
# A gloss: the Chinese term in full-width brackets, maybe followed by ", [notebook NN](...)".
GLOSS = re.compile(r"（([^（）]+)）")
CJK = re.compile(r"[\u2e80-\u9fff]")
ROW = re.compile(r"^\| (.+?) \| (.+?) \| (?:\[(\d\d)\]\(\S+\)|(\d\d)) \|$", re.M)


# ------------------------------------------------------------------------------ bibliography


def parse_bib(text: str) -> dict[str, dict[str, str]]:
    """{key: {"type": ..., field: value}} of docs/references.bib (its own simple format: one
    field a line, values in braces). Raises ValueError on an entry that lacks a required field
    or on a key or URL used twice."""
    entries: dict[str, dict[str, str]] = {}
    urls: set[str] = set()
    for kind, key, body in ENTRY.findall(text):
        fields = {"type": kind, **dict(FIELD.findall(body))}
        missing = [f for f in REQUIRED if not fields.get(f)]
        if missing:
            raise ValueError(f"{key}: no {', '.join(missing)}")
        if not re.fullmatch(r"\d{4}", fields["year"]):
            raise ValueError(f"{key}: year {fields['year']!r}")
        if key in entries or fields["url"] in urls:
            raise ValueError(f"{key}: key or URL used twice")
        entries[key] = fields
        urls.add(fields["url"])
    if len(re.findall(r"^@", text, re.M)) != len(entries):
        raise ValueError("an entry does not parse (one field a line, `}` alone closes it)")
    return entries


def load_bib(path: Path = BIB) -> dict[str, dict[str, str]]:
    return parse_bib(path.read_text(encoding="utf-8"))


def names(author: str) -> list[str]:
    """'Vaswani, Ashish and others' -> ['Ashish Vaswani', 'others']; '{Gemma Team}' stays."""
    out = []
    for name in author.split(" and "):
        name = name.strip()
        if name.startswith("{") and name.endswith("}"):
            out.append(name[1:-1])
        elif "," in name:
            last, first = (part.strip() for part in name.split(",", 1))
            out.append(f"{first} {last}")
        else:
            out.append(name)
    return out


def surname(entry: dict[str, str]) -> str:
    """The first author's surname (or the group's name), as the notebooks cite it."""
    first = entry["author"].split(" and ")[0].strip()
    return first.strip("{}") if first.startswith("{") else first.split(",")[0].strip()


def short_label(entry: dict[str, str]) -> str:
    """'Vaswani et al. (2017)', 'Dao and Gu (2024)', 'Shazeer (2019)'."""
    authors = entry["author"].split(" and ")
    if len(authors) == 1:
        who = surname(entry)
    elif len(authors) == 2 and authors[1].strip() != "others":
        who = f"{surname(entry)} and {authors[1].split(',')[0].strip()}"
    else:
        who = f"{surname(entry)} et al."
    return f"{who} ({entry['year']})"


def venue(entry: dict[str, str]) -> str:
    return next((entry[f] for f in VENUE_FIELDS if entry.get(f)), "")


def link_label(url: str) -> str:
    """What the entry's link reads: arXiv:ID, doi:ID, or the host."""
    if m := re.match(r"https://arxiv\.org/abs/(.+)", url):
        return f"arXiv:{m.group(1)}"
    if m := re.match(r"https://doi\.org/(.+)", url):
        return f"doi:{m.group(1)}"
    return re.sub(r"^https?://(www\.)?([^/]+).*", r"\2", url)


# ------------------------------------------------------------------------------ glossary


def slug(english: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", english.lower()).strip("-")


def gloss_term(content: str, language: str = "en") -> str | None:
    """The term of a gloss's bracket content: in English pages the Chinese term, or None if it
    is not a gloss (no CJK: an English word such as "errata", or a bare link); in Chinese pages
    (the mirror, ``注意力汇聚（attention pooling）``) the English term, None if it has CJK."""
    term = re.split(r"[,，]", content)[0].strip()
    if language != "en":
        return None if CJK.search(term) or "<" in term else term
    return term if CJK.search(term) else None


def glossary_rows(nb01) -> list[tuple[str, str, str]]:
    """(English, 中文, NN of the notebook that introduces it) of the table in notebook 01's
    "Glossary" cell."""
    cell = next(c for c in nb01.cells if c.cell_type == "markdown" and _is_glossary_cell(c))
    return [(en, zh, a or b) for en, zh, a, b in ROW.findall(cell.source)
            if en != "English" and not en.startswith("---")]


def _is_glossary_cell(cell) -> bool:
    return cell.source.lstrip().startswith("#") and "| English | 中文 |" in cell.source


# ------------------------------------------------------------------------------ rewriting


def link_citations(nb, by_url: dict[str, str]) -> list[str]:
    """Point every link to a bib entry at references.html#KEY (the first per key also gets the
    id cite-KEY). Returns the keys cited, in order of first citation."""
    cited: list[str] = []

    def cite(m: re.Match) -> str:
        key = by_url.get(m.group(2))
        if key is None:
            return m.group(0)
        anchor = "" if key in cited else f' id="cite-{key}"'
        if key not in cited:
            cited.append(key)
        return f'<a{anchor} class="citation-link" href="references.html#{key}">{m.group(1)}</a>'

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = LINK.sub(cite, cell.source)
    return cited


def link_glosses(nb, slugs: dict[str, str], language: str = "en") -> list[str]:
    """Give the first gloss of each glossary term in the notebook the id gl-SLUG and make its
    Chinese a link to the glossary's row. A gloss in a heading gets the id on an empty anchor
    just above the heading instead (HTML inside a heading would show in the page's contents).
    Returns the slugs anchored."""
    done: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "markdown" or _is_glossary_cell(cell):
            continue
        out, pos = [], 0
        for m in GLOSS.finditer(cell.source):
            term = gloss_term(m.group(1), language)
            key = slugs.get((term or "") if language == "en" else (term or "").lower())
            if key is None or key in done:
                continue
            done.append(key)
            line_start = cell.source.rfind("\n", 0, m.start()) + 1
            if cell.source.startswith("#", line_start):
                out.append(cell.source[pos:line_start] + f'<a id="gl-{key}"></a>\n\n')
                pos = line_start
                continue
            at = m.start() + 1  # just after "（"
            out.append(cell.source[pos:at])
            out.append(f'<a id="gl-{key}" class="glossary-link" href="glossary.html#{key}" '
                       f'title="glossary">{term}</a>')
            pos = at + len(term)
        cell.source = "".join(out) + cell.source[pos:]
    return done


# ------------------------------------------------------------------------------ pages


def references_page(bib: dict, citing: dict[str, list[tuple[str, str]]], t=translator()) -> str:
    """references.md: every entry, sorted by first author and year. ``citing`` maps a key to
    the (NN, page name) of each notebook citing it."""
    with open(PYPROJECT, "rb") as f:
        project = tomllib.load(f)["project"]
    repo = project["urls"]["Repository"]
    lines = ["---", "orphan: true", "---", "", f"# {t('references:title')}", "",
             t("references:intro", n=len(bib), repo=repo), ""]
    order = sorted(bib, key=lambda k: (surname(bib[k]).lower(), bib[k]["year"], k))
    # Equal labels (DeepSeek-AI (2024): V2 and V3) told apart as 2024a, 2024b, in this order.
    labels = {key: short_label(bib[key]) for key in order}
    for label in {lab for lab in labels.values() if list(labels.values()).count(lab) > 1}:
        same = [key for key in order if labels[key] == label]
        for letter, key in zip("abcdefgh", same):
            labels[key] = f"{label[:-1]}{letter})"
    for key in order:
        e = bib[key]
        who = ", ".join(names(e["author"])).replace(", others", " et al").rstrip(".")
        where = f" *{html.escape(venue(e))}*." if venue(e) else ""
        back = ", ".join(f'<a href="{page}#cite-{key}">{nn}</a>' for nn, page in citing[key])
        lines += [f'<span id="{key}"></span>**{labels[key]}** {who}. '
                  f"“{e['title']}”.{where} [{link_label(e['url'])}]({e['url']}). "
                  + t("references:cited-many" if len(citing[key]) > 1 else "references:cited",
                      back=back), ""]
    lines += [f"## {t('references:cite')}", "", t("references:cite-intro", repo=repo), "",
              "```bibtex",
              "@misc{attention_hands_on,",
              "  author = {{the Attention, hands-on authors}},",
              "  title = {Attention, hands-on: interactive notebooks that teach attention "
              "mechanisms with PyTorch},",
              f"  version = {{{project['version']}}},",
              "  year = {2026},",
              f"  url = {{{repo}}},",
              "}", "```", ""]
    return "\n".join(lines)


def glossary_page(rows, pages: dict[str, str], anchored: dict[str, list[str]],
                  t=translator()) -> str:
    """glossary.md: one row per term, alphabetical; ``anchored`` maps NN to the slugs whose
    first gloss in that notebook carries an id. Three columns, so that it fits a phone."""
    lines = ["---", "orphan: true", "---", "", f"# {t('glossary:title')}", "",
             t("glossary:intro", n=len(rows)), "", t("glossary:header"), "|---|---|---|"]
    for english, zh, nn in sorted(rows, key=lambda r: r[0].lower()):
        key = slug(english)
        where = [n for n in sorted(pages) if key in anchored.get(n, [])]
        home = nn if nn in where else (where[0] if where else nn)
        first = f'<a href="{pages[home]}#gl-{key}">{html.escape(english)}</a>'
        links = [f'**<a href="{pages[home]}#gl-{key}">{home}</a>**']
        links += [f'<a href="{pages[n]}#gl-{key}">{n}</a>' for n in where if n != home]
        lines.append(f'| <span id="{key}"></span>{first} | {zh} | {", ".join(links)} |')
    return "\n".join(lines) + "\n"


def apply(notebooks: list[Path], nbs: list, language: str = "en") -> dict[str, str]:
    """Rewrite the prepared notebooks ``nbs`` (of the files ``notebooks``) in place; return
    {file name: text} of the pages to write beside them, in ``language`` ("en" or "zh_CN")."""
    t = translator(language)
    bib = load_bib()
    by_url = {e["url"]: key for key, e in bib.items()}
    pages = {path.name[:2]: path.with_suffix(".html").name for path in notebooks}
    citing: dict[str, list[tuple[str, str]]] = {key: [] for key in bib}
    nb01 = next(nb for path, nb in zip(notebooks, nbs) if path.name.startswith("01_"))
    rows = glossary_rows(nb01)
    slugs = ({zh: slug(en) for en, zh, _ in rows} if language == "en"
             else {en.lower(): slug(en) for en, zh, _ in rows})
    anchored: dict[str, list[str]] = {}
    for path, nb in zip(notebooks, nbs):
        nn = path.name[:2]
        for key in link_citations(nb, by_url):
            citing[key].append((nn, pages[nn]))
        anchored[nn] = link_glosses(nb, slugs, language)
    uncited = [key for key, found in citing.items() if not found]
    if uncited:
        raise SystemExit(f"error: docs/references.bib entries no notebook cites: {uncited}")
    return {"references.md": references_page(bib, citing, t),
            "glossary.md": glossary_page(rows, pages, anchored, t)}
