"""Every committed notebook, rendered as a renderer without JavaScript shows it (GitHub and
nbviewer are built on nbconvert and run no script), shows each view's PNG.

nbconvert's HTML exporter renders the notebook as committed; every <script> is then removed.
In each cell that displays a view, an <img> must remain. nbconvert's WidgetsDataTypeFilter picks
the widget view over the PNG whenever the view's model is in ``metadata.widgets``, which is why
the widget state lives beside the notebooks (tools/widget_state.py): the last test puts it back
and checks that the same cells then show no image, so this test can fail.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from tests.test_notebooks_meta import widget_state  # tools/widget_state.py

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_PATHS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def view_cells(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and any(WIDGET_VIEW in o.get("data", {}) for o in c.get("outputs", []))]


def rendered_cells(nb) -> list:
    """The exported page with every <script> removed: one jp-Cell element per notebook cell."""
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    soup = BeautifulSoup(body, "html.parser")
    for script in soup.find_all("script"):
        script.decompose()
    cells = soup.select("div.jp-Cell")
    assert len(cells) == len(nb.cells), "one rendered cell per notebook cell"
    return cells


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=[p.stem for p in NOTEBOOK_PATHS])
def test_every_view_shows_its_png_without_javascript(path):
    nb = nbformat.read(path, as_version=4)
    views = view_cells(nb)
    assert views, f"{path.name}: no view to check"
    cells = rendered_cells(nb)
    for i in views:
        images = cells[i].select(".jp-OutputArea-output img")
        assert images, f"{path.name}: cell {i} (a view) shows no image with scripts off"
        assert all(img["src"].startswith("data:image/png;base64,") for img in images)


def test_with_the_widget_state_in_the_notebook_the_views_would_be_empty():
    # The negative control: the very state `make site` merges back hides the PNG from nbconvert.
    path = NOTEBOOK_PATHS[0]
    nb = widget_state.merged(path)
    assert "widgets" in nb.metadata
    cells = rendered_cells(nb)
    assert all(not cells[i].select("img") for i in view_cells(nb))
