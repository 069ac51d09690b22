"""The course site's landing page (index.md), written by tools/build_site.py: what the series
teaches, in order, a picture per notebook (its first figure), how to run it."""

from __future__ import annotations

import re
from base64 import b64decode
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Colab's badge line, first in each notebook (tools/sync_colab.py writes it).
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\s*\n+")


def title_of(nb) -> str:
    """The notebook's first markdown heading, without the #s."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line.lstrip("#").strip()
    return "(untitled)"


def introduction(nb) -> str:
    """The notebook's opening paragraph (markdown), and the list it leads into if it ends with
    a colon: what the notebook teaches, in its own words."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        blocks = [b.strip() for b in re.split(r"\n\s*\n", BADGE.sub("", cell.source))
                  if b.strip() and not b.lstrip().startswith("#")]
        taken = []
        for block in blocks:
            taken.append(block)
            if not block.endswith(":"):
                break
        return "\n\n".join(taken)
    return ""


def first_figure(nb) -> bytes | None:
    """The PNG of the notebook's first view, else its first figure."""
    pngs = [(WIDGET_VIEW not in out.get("data", {}), b64decode(out["data"]["image/png"]))
            for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if "image/png" in out.get("data", {})]
    return min(pngs, key=lambda p: p[0])[1] if pngs else None


LANDING = """\
# Attention, hands-on

Attention mechanisms（注意力机制）in PyTorch, one idea per notebook: each is built from
scratch, checked against a small tested helper, and drawn as a figure you can move. Start at
[notebook 01]({first}) and go in order: each notebook uses what the ones before it built.

- **This site**: read it here; the figures redraw when you move their controls, with no Python
  and no network (everything the pages use is served with them). The code is what ran and the
  outputs are the stored ones. Solutions, and the code of the checks, stay folded until you click.
- **JupyterLab**: clone the repository, then `make lab` (it creates the virtual environment,
  installs the pinned packages and opens JupyterLab on 127.0.0.1).
- **Colab**: the rocket button at the top of each notebook page opens that notebook in Colab;
  its first cell fetches the repository's `helpers` there and installs nothing.

{cards}

```{{toctree}}
:hidden:
:maxdepth: 1

{toctree}
```
"""


def landing(notebooks: list[Path], nbs: list, static: Path) -> str:
    """index.md: the series in order, each notebook with its first figure and its opening."""
    (static / "cards").mkdir(parents=True, exist_ok=True)
    cards, names = [], []
    for path, nb in zip(notebooks, nbs):
        title = title_of(nb)
        card = [f"## [{title}]({path.name})", ""]
        picture = first_figure(nb)
        if picture:
            (static / "cards" / f"{path.stem}.png").write_bytes(picture)
            card += [f'<img class="series-card" src="_static/cards/{path.stem}.png" '
                     f'alt="The first figure of notebook {path.stem[:2]}" loading="lazy">', ""]
        card.append(introduction(nb))
        cards.append("\n".join(card))
        names.append(path.stem)
    return LANDING.format(first=notebooks[0].name, cards="\n\n".join(cards),
                          toctree="\n".join(names))
