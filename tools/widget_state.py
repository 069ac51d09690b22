"""Keep each notebook's saved widget state in a file beside it, not in the notebook.

A renderer without JavaScript (GitHub, nbviewer, `jupyter nbconvert --to html` read with scripts
off) picks a widget output's widget view over its PNG whenever the view's model is in the
notebook's ``metadata.widgets`` (nbconvert's ``WidgetsDataTypeFilter``), and so shows an empty
box. Without that metadata it falls back to the PNG of the same output. So `make notebooks`
moves the state to ``notebooks/widget_state/NN_name.json`` (``split``), and `make site` puts it
back into its copy of each notebook (``merged``), where the views need it to move without a
kernel. ``split`` also drops the cells' ``execution`` timestamps, which change on every run, and
joins a cell's consecutive stream outputs of one name (stdout, stderr) into one: how a print's
text is cut into messages depends on timing, so a re-run would otherwise rewrite them.

    python tools/widget_state.py split notebooks/01_queries_keys_values.ipynb ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import nbformat

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def state_path(notebook: Path) -> Path:
    """Where the widget state of ``notebooks/NN_name.ipynb`` is kept."""
    notebook = Path(notebook)
    return notebook.parent / "widget_state" / f"{notebook.stem}.json"


def load(notebook: Path) -> dict | None:
    """The saved ``metadata.widgets`` of a notebook (from the file beside it), or None."""
    path = state_path(notebook)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def merged(notebook: Path) -> nbformat.NotebookNode:
    """The notebook as executed: its cells, with its widget state back in its metadata."""
    nb = nbformat.read(notebook, as_version=4)
    widgets = load(notebook)
    if widgets is not None:
        nb.metadata["widgets"] = widgets
    return nb


def split(notebook: Path) -> str:
    """Move ``metadata.widgets`` to the file beside the notebook (replacing an older one), drop
    the cells' execution timestamps and join consecutive stream outputs (nbconvert's
    ``CoalesceStreamsPreprocessor``, which also drops text a carriage return wrote over, as a
    front end shows it). A notebook without widget state keeps any older file: only
    a fresh run (`make notebooks`) writes one. Returns what it did, in a line."""
    # Imported here: nbconvert's preprocessors take a second or two to import, and `make site`
    # and the tests import this module for ``merged`` and ``state_path`` alone.
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    notebook = Path(notebook)
    text = notebook.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    widgets = nb.metadata.pop("widgets", None)
    coalesce = CoalesceStreamsPreprocessor()
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("execution", None)
        coalesce.preprocess_cell(cell, {}, index)
    if widgets is not None:
        path = state_path(notebook)
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(widgets, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    out = nbformat.writes(nb) + "\n"
    if out != text:
        notebook.write_text(out, encoding="utf-8")
    if widgets is None:
        return f"{notebook.name}: no widget state in the notebook"
    models = len(widgets.get(WIDGET_STATE, {}).get("state", {}))
    return f"{notebook.name}: {models} widget models -> {state_path(notebook).relative_to(notebook.parent.parent)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["split"])
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args()
    for notebook in args.notebooks:
        print(split(notebook))


if __name__ == "__main__":
    main()
