"""References, glossary, citation and license (issue 43, item 5); no kernel, no browser.

* docs/references.bib parses (tools/site_references.py's parser): every entry has author,
  title, year, url; no key or URL twice; an arXiv URL is an abstract page, a DOI a doi.org URL.
* Every link in the notebooks' markdown to a host the bib uses (arXiv, doi.org, ...) is an entry
  of the bib, and every entry is linked from some notebook.
* Citations in prose: every "Surname et al. YEAR" or "Surname and Surname YEAR" names a bib entry
  (first author, year as cited); the link that follows such a mention, if any before the next
  mention, is to that entry; a mention without its link is of a work the same notebook linked
  earlier. So the first mention of each cited work in a notebook carries the link.
* The site's rewriting (site_references.link_citations / link_glosses) on a small notebook
  gives the expected links and anchors, and the pages list what they should.
* The glossary (notebook 01's table, one term a row) has every term of ZH_TERMS and every gloss
  "（中文）" of every notebook, and says which notebook glosses each one first.
* CITATION.cff's license, version and repository are pyproject.toml's; LICENSE is the MIT text
  with conf.py's copyright line.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(ROOT / "tools"))  # (site_references imports site_text from there)
refs = _load(ROOT / "tools" / "site_references.py", "site_references")
ZH_TERMS = _load(ROOT / "tests" / "test_notebooks_meta.py", "notebooks_meta").ZH_TERMS
BIB = refs.load_bib()
BY_URL = {e["url"]: key for key, e in BIB.items()}
HOSTS = {re.match(r"https?://([^/]+)", e["url"]).group(1) for e in BIB.values()}
with open(ROOT / "pyproject.toml", "rb") as f:
    PROJECT = tomllib.load(f)["project"]
REPO = PROJECT["urls"]["Repository"]

# "Vaswani et al., 2017", "Xiong et al. (2020", "Dao and Gu 2024", "Liu et\nal. (2023"
CITATION = re.compile(
    r"\b([A-Z][\w-]+)(?:\s+et\s+al\.|\s+and\s+[A-Z][\w-]+(?:'s)?)(?:,?\s*\(?\s*(\d{4})\b)?")


def _markdown(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


MARKDOWN = {p.name[:2]: _markdown(p) for p in NOTEBOOKS}


def _paper_links(text: str) -> list[tuple[int, str]]:
    """(position, url) of every markdown link to a host the bib uses, but not to this
    repository (its own Colab and GitHub links)."""
    return [(m.start(), m.group(2)) for m in refs.LINK.finditer(text)
            if re.match(r"https?://([^/]+)", m.group(2)).group(1) in HOSTS
            and not m.group(2).startswith(REPO)]


def test_there_are_notebooks_and_entries():
    assert len(NOTEBOOKS) == 12
    assert len(BIB) >= 60


def test_bib_parses_and_has_the_required_fields():
    for key, e in BIB.items():
        for field in ("author", "title", "year", "url"):
            assert e.get(field), f"{key}: no {field}"
        assert re.fullmatch(r"[a-z][a-z0-9]*\d{4}[a-z0-9]+", key), f"{key}: keys are like vaswani2017attention"
        assert e["year"] in key, f"{key}: the key's year is not {e['year']}"
        assert e["url"].startswith("https://"), key
        if "arxiv.org" in e["url"]:
            assert re.fullmatch(r"https://arxiv\.org/abs/\d{4}\.\d{4,5}", e["url"]), key
        if e.get("doi"):
            assert e["url"] == f"https://doi.org/{e['doi']}", key
        assert refs.venue(e), f"{key}: no journal, booktitle, publisher or howpublished"


def test_bib_parser_rejects_a_broken_entry():
    good = "@misc{a2020b,\n  author = {A, B},\n  title = {T},\n  year = {2020},\n  url = {https://x.org/1},\n}\n"
    assert list(refs.parse_bib(good)) == ["a2020b"]
    with pytest.raises(ValueError, match="no url"):
        refs.parse_bib(good.replace("  url = {https://x.org/1},\n", ""))
    with pytest.raises(ValueError, match="twice"):
        refs.parse_bib(good + "\n" + good.replace("a2020b", "c2020d"))
    with pytest.raises(ValueError, match="does not parse"):
        refs.parse_bib(good + "\n@misc{x2020y, author = {A}}\n")


@pytest.mark.parametrize("nn", sorted(MARKDOWN))
def test_every_paper_link_is_an_entry(nn):
    missing = [url for _, url in _paper_links(MARKDOWN[nn]) if url not in BY_URL]
    assert not missing, f"notebook {nn} links to works not in docs/references.bib: {missing}"


def test_every_entry_is_linked_from_a_notebook():
    linked = {url for text in MARKDOWN.values() for _, url in _paper_links(text)}
    unlinked = [key for key, e in BIB.items() if e["url"] not in linked]
    assert not unlinked, f"entries no notebook links to: {unlinked}"


def _matches(key: str, name: str, year: str | None) -> bool:
    e = BIB[key]
    return refs.surname(e) == name and (year is None or e["year"] == year)


@pytest.mark.parametrize("nn", sorted(MARKDOWN))
def test_each_citation_is_linked_at_its_first_mention(nn):
    text = MARKDOWN[nn]
    links = _paper_links(text)
    mentions = [m for m in CITATION.finditer(text)
                if m.group(2) or "et" in m.group(0)]  # "A and B" alone is prose, not a citation
    linked: set[str] = set()  # keys linked so far in this notebook
    problems = []
    for i, m in enumerate(mentions):
        name, year = m.group(1), m.group(2)
        if year and not any(_matches(k, name, year) for k in BIB):
            problems.append(f"{m.group(0)!r}: no entry by {name} from {year}")
            continue
        end = mentions[i + 1].start() if i + 1 < len(mentions) else len(text)
        following = [url for pos, url in links if m.end() <= pos < min(end, m.end() + 300)]
        # links between the previous mention and this one count as linked before it
        linked |= {BY_URL[url] for pos, url in links if pos < m.start() and url in BY_URL}
        if following and year:
            key = BY_URL.get(following[0])
            if key is None or not _matches(key, name, year):
                problems.append(f"{m.group(0)!r} is followed by a link to {following[0]}")
            else:
                linked.add(key)
        elif not any(_matches(k, name, year) for k in linked):
            problems.append(f"{m.group(0)!r}: not linked here nor earlier in the notebook")
    assert not problems, f"notebook {nn}:\n  " + "\n  ".join(problems)


def test_citation_check_fails_without_the_link():
    # The check above, on a notebook whose first mention lost its link, must complain.
    text = "Vaswani et al. (2017) wrote it. Later Vaswani et al. (2017, [AIAYN](https://arxiv.org/abs/1706.03762))."
    first = next(CITATION.finditer(text))
    assert first.group(1, 2) == ("Vaswani", "2017")
    links = _paper_links(text)
    assert links and links[0][0] > text.index("Later"), "the link follows the second mention only"


# ------------------------------------------------------------------------------ site rewriting


def _small_notebook():
    glossary = ("## Glossary（术语表）\n\n| English | 中文 | introduced in |\n|---|---|---|\n"
                "| query | 查询 | 01 |\n| temperature | 温度 | [02](02_x.ipynb) |\n")
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("A **query**（查询）and another **query**（查询）. As in "
                                      "Vaswani et al. (2017, [AIAYN](https://arxiv.org/abs/1706.03762)), "
                                      "again [AIAYN](https://arxiv.org/abs/1706.03762), and [docs](https://pytorch.org)."),
        nbformat.v4.new_code_cell("x = '[AIAYN](https://arxiv.org/abs/1706.03762)（查询）'"),
        nbformat.v4.new_markdown_cell("## Temperature（温度）\n\nText."),
        nbformat.v4.new_markdown_cell(glossary),
    ])


def test_rewriting_a_small_notebook():
    nb = _small_notebook()
    code = nb.cells[1].source
    assert refs.link_citations(nb, BY_URL) == ["vaswani2017attention"]
    rows = refs.glossary_rows(nb)
    assert rows == [("query", "查询", "01"), ("temperature", "温度", "02")]
    assert refs.link_glosses(nb, {zh: refs.slug(en) for en, zh, _ in rows}) == ["query", "temperature"]
    first = nb.cells[0].source
    assert first.startswith('A **query**（<a id="gl-query" class="glossary-link" '
                            'href="glossary.html#query" title="glossary">查询</a>）and another **query**（查询）.')
    assert ('(2017, <a id="cite-vaswani2017attention" class="citation-link" '
            'href="references.html#vaswani2017attention">AIAYN</a>)') in first
    assert ', again <a class="citation-link" href="references.html#vaswani2017attention">AIAYN</a>' in first
    assert "[docs](https://pytorch.org)" in first  # not a work of the bib: left alone
    assert nb.cells[1].source == code  # code cells untouched
    assert nb.cells[2].source == '<a id="gl-temperature"></a>\n\n## Temperature（温度）\n\nText.'
    assert "<a" not in nb.cells[3].source  # the glossary table itself is not a first use


def test_pages():
    citing = {key: [("08", "08_x.html")] for key in BIB}
    page = refs.references_page(BIB, citing)
    assert page.startswith("---\norphan: true\n---\n")
    for key, e in BIB.items():
        assert f'<span id="{key}"></span>' in page and f"({e['url']})" in page, key
    assert page.count('href="08_x.html#cite-') == len(BIB)
    assert REPO in page and "Cite this course" in page
    entry = page[page.index('<span id="vaswani2017attention">'):].split("\n")[0]
    assert "**Vaswani et al. (2017)**" in entry and "“Attention Is All You Need”" in entry
    assert "[arXiv:1706.03762](https://arxiv.org/abs/1706.03762)" in entry

    rows = [("query", "查询", "01"), ("warp", "线程束", "09")]
    pages = {"01": "01_a.html", "09": "09_b.html", "11": "11_c.html"}
    gloss = refs.glossary_page(rows, pages, {"01": ["query"], "09": ["warp"], "11": ["query"]})
    assert ('| <span id="query"></span><a href="01_a.html#gl-query">query</a> | 查询 | '
            '**<a href="01_a.html#gl-query">01</a>**, <a href="11_c.html#gl-query">11</a> |') in gloss
    assert '| 线程束 | **<a href="09_b.html#gl-warp">09</a>** |' in gloss
    assert "et al.." not in page and "Simran Arora, Sabri Eyuboglu et al. “Zoology" in page


# ------------------------------------------------------------------------------ glossary


def _glosses() -> dict[str, list[str]]:
    """{Chinese term: notebooks that gloss it, in order} over every markdown cell but 01's
    glossary table."""
    found: dict[str, list[str]] = {}
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "markdown" or cell.source.startswith("## Glossary"):
                continue
            for m in refs.GLOSS.finditer(cell.source):
                term = refs.gloss_term(m.group(1))
                if term and path.name[:2] not in found.setdefault(term, []):
                    found[term].append(path.name[:2])
    return found


ROWS = refs.glossary_rows(nbformat.read(NOTEBOOKS[0], as_version=4))


def test_glossary_has_every_term_of_every_notebook():
    chinese = [zh for _, zh, _ in ROWS]
    assert len(chinese) == len(set(chinese)), "a Chinese term has two rows"
    english = [refs.slug(en) for en, _, _ in ROWS]
    assert len(english) == len(set(english)), "two English terms share an anchor"
    # As test_notebooks_meta does, a term inside a longer gloss counts ("注意力" in
    # "Bahdanau 注意力").
    missing = {nn: [t for t in terms if not any(t in zh for zh in chinese)]
               for nn, terms in ZH_TERMS.items()}
    assert not any(missing.values()), f"ZH_TERMS without a glossary row: {missing}"
    glossed = _glosses()
    assert not set(glossed) - set(chinese), f"glosses without a row: {set(glossed) - set(chinese)}"
    for en, zh, nn in ROWS:
        assert zh in glossed, f"{en} / {zh}: no notebook writes it in brackets"
        assert glossed[zh][0] == nn, f"{en} / {zh}: first glossed in {glossed[zh][0]}, not {nn}"


# ------------------------------------------------------------------------------ citation, license


def test_citation_cff_matches_pyproject():
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    field = lambda name: re.search(rf"^{name}: \"?([^\"\n]+)\"?$", cff, re.M).group(1)  # noqa: E731
    assert field("cff-version") == "1.2.0"
    assert field("license") == PROJECT["license"]["text"] == "MIT"
    assert field("repository-code") == REPO
    assert field("version") == PROJECT["version"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", field("date-released"))
    assert field("title").startswith("Attention, hands-on")
    assert re.search(r"^authors:\n  - name: \"the Attention, hands-on authors\"$", cff, re.M)


def test_license_is_mit_with_the_sites_copyright():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    conf = (ROOT / "tools" / "site" / "conf.py").read_text(encoding="utf-8")
    copyright_ = re.search(r'^copyright = "([^"]+)"', conf, re.M).group(1)
    assert text.startswith("MIT License\n\n")
    assert f"Copyright (c) {copyright_}\n" in text
    assert "Permission is hereby granted, free of charge, to any person obtaining a copy" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_references_page_tells_equal_labels_apart():
    """Two works with the same first author and year get 2024a / 2024b on the references page."""
    bib = {"x2024one": {"author": "DeepSeek-AI", "title": "One", "year": "2024", "url": "u1"},
           "x2024two": {"author": "DeepSeek-AI", "title": "Two", "year": "2024", "url": "u2"},
           "y2017": {"author": "Vaswani, Ashish and others", "title": "Three", "year": "2017",
                     "url": "u3"}}
    citing = {key: [("01", "01_x.html")] for key in bib}
    page = refs.references_page(bib, citing)
    assert "**DeepSeek-AI (2024a)**" in page and "**DeepSeek-AI (2024b)**" in page
    assert page.index("(2024a)") < page.index("“One”") < page.index("(2024b)") < page.index("“Two”")
    assert "**Vaswani et al. (2017)**" in page
