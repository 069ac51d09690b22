"""README.md as the front page, and docs/*.md, the documentation pages it links (no kernel, no
browser).

* README.md holds at most 1,500 words (``len(text.split())``), the two commands (``make lab``,
  ``make test``: targets of the Makefile), one table row per notebook of notebooks/, in order,
  each linking its notebook, and a link to every page of docs/.
* Every relative link of README.md and docs/*.md resolves to a file or folder of the
  repository, and a ``#fragment`` into a Markdown file names one of its headings (as GitHub
  writes heading anchors).
* A docs page's notebook links point into notebooks/ (tools/site_landing.py turns them into the
  site's page links).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# [text](target) and ![alt](target); targets have no spaces here.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    """Every link target of a Markdown file, code blocks and code spans left out."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped, spaces
    as hyphens (MyST's heading anchors, which the site uses, follow the same rule)."""
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_readme_is_a_front_page_of_at_most_1500_words():
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= 1500, f"README.md has {words} words; move details to docs/"


def test_readme_gives_the_two_commands_and_the_makefile_has_them():
    readme = README.read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("lab", "test"):
        assert re.search(rf"^make {target}\s+#", readme, re.M), f"no `make {target}  # ...` line"
        assert re.search(rf"^{target}:", makefile, re.M), f"the Makefile has no {target} target"
    for variable in re.findall(r"make \w+ ([A-Z_]+)=", readme):
        assert re.search(rf"^{variable} \?=", makefile, re.M), f"the Makefile reads no {variable}"


def test_readme_has_one_row_per_notebook_in_order_linking_it():
    rows = [line for line in README.read_text(encoding="utf-8").splitlines()
            if re.match(r"\| \d\d \|", line)]
    linked = [re.search(r"\]\((notebooks/[^)]+\.ipynb)\)", row) for row in rows]
    assert [m and m[1] for m in linked] == [f"notebooks/{p.name}" for p in NOTEBOOKS]
    assert [row[2:4] for row in rows] == [p.name[:2] for p in NOTEBOOKS]


def test_readme_links_every_documentation_page():
    targets = {t.split("#")[0] for t in links(README)}
    missing = [f"docs/{page.name}" for page in DOCS if f"docs/{page.name}" not in targets
               and page.stem != "site-speed"]  # site-speed: linked from performance.md
    assert DOCS and not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists() or ROOT not in resolved.parents and resolved != ROOT:
            broken.append(target)
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{path.name}: links that resolve to nothing: {broken}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_link_notebooks_in_their_folder(path):
    wrong = [t for t in links(path) if t.endswith(".ipynb") and not t.startswith("../notebooks/")]
    assert not wrong, f"{path.name}: notebook links outside ../notebooks/: {wrong}"
