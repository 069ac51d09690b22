"""Write the Colab badge and the Colab set-up cell into notebooks, and the Colab badge of
README.md, from the one repository URL.

The URL lives in pyproject.toml ([project.urls] Repository). Run after changing it, or on a
new notebook:  .venv/bin/python tools/sync_colab.py notebooks/*.ipynb   (README.md is always
synced; the venv's Python, since it needs nbformat).
``tests/test_notebooks_meta.py`` fails when a notebook or README.md is out of date with this
script.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BADGE_TAG = "colab-badge"
SETUP_TAG = "colab-setup"
# README's badge line; the notebook it opens is kept, the repository is rewritten.
README_BADGE = re.compile(
    r"^\[!\[Open In Colab\]\([^)]*\)\]"
    r"\(https://colab\.research\.google\.com/github/[^)]*?/notebooks/(?P<nb>[^)/]+\.ipynb)\)$",
    re.M,
)


def repo_url() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"]


def badge_line(nb_name: str, url: str = "") -> str:
    url = url or repo_url()
    path = url.removeprefix("https://github.com/")
    return (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"(https://colab.research.google.com/github/{path}/blob/main/notebooks/{nb_name})"
    )


def setup_source(url: str = "") -> str:
    url = url or repo_url()
    name = url.rstrip("/").rsplit("/", 1)[-1]
    return f'''# Colab only: fetch this repository's main branch (where the Colab badge opened this
# notebook from) so that `helpers` imports and matches the notebook, and turn on Colab's widget
# manager. A clone left from an earlier run is reset to the latest main (edits in it are lost).
# Installs nothing. Anywhere else (JupyterLab, CI) this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import pathlib
    import subprocess

    REPO_URL = "{url}"
    repo = pathlib.Path("/content/{name}")
    if repo.exists():
        subprocess.run(["git", "-C", str(repo), "fetch", "--depth", "1", "origin", "main"], check=True)
        subprocess.run(["git", "-C", str(repo), "reset", "--hard", "FETCH_HEAD"], check=True)
    else:
        subprocess.run(["git", "clone", "--depth", "1", "--branch", "main", REPO_URL, str(repo)], check=True)
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    from google.colab import output

    output.enable_custom_widget_manager()'''


def _tagged(nb, tag: str):
    return next((c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])), None)


def sync(path: Path) -> bool:
    """Bring one notebook up to date; return True if it changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    badge = badge_line(path.name)
    cell = _tagged(nb, BADGE_TAG)
    if cell is None:
        first = nb.cells[0] if nb.cells and nb.cells[0].cell_type == "markdown" else None
        if first is None:
            first = nbformat.v4.new_markdown_cell("")
            nb.cells.insert(0, first)
        first.metadata.setdefault("tags", []).append(BADGE_TAG)
        first.source = badge + "\n\n" + first.source
    else:
        cell.source = re.sub(r"^\[!\[Open In Colab\].*$", badge, cell.source, count=1, flags=re.M)
    setup = _tagged(nb, SETUP_TAG)
    if setup is None:
        setup = nbformat.v4.new_code_cell(setup_source(), metadata={"tags": [SETUP_TAG]})
        nb.cells.insert(1, setup)
    else:
        setup.source = setup_source()
    setup.outputs = []
    changed = nbformat.writes(nb) != before
    if changed:
        nbformat.write(nb, path)
    return changed


def sync_readme(path: Path = README) -> bool:
    """Rewrite README.md's Colab badge from the pyproject URL; return True if it changed."""
    text = path.read_text(encoding="utf-8")
    m = README_BADGE.search(text)
    if m is None:
        raise ValueError(f"{path}: no line [![Open In Colab](...)](.../notebooks/NN_name.ipynb)")
    new = text[: m.start()] + badge_line(m["nb"]) + text[m.end():]
    changed = new != text
    if changed:
        path.write_text(new, encoding="utf-8")
    return changed


if __name__ == "__main__":
    print(("updated " if sync_readme() else "up to date ") + str(README.relative_to(ROOT)))
    for arg in sys.argv[1:]:
        print(("updated " if sync(Path(arg)) else "up to date ") + arg)
