"""The Chinese edition (issue 46): gettext catalogues of the English prose, and the Chinese
notebooks made from them.

The English notebooks are the source. Their prose (markdown cells), the documentation pages
(docs/*.md) and the site's own strings (tools/site_text.py) are cut into messages, one per
block a translator can translate whole: a paragraph, a heading, a list item, a table, a quote,
a summary line. Maths blocks ($$ … $$), fenced code and the Colab badge are not messages: they
are copied as they are. The catalogues follow sphinx-intl's layout, one per page:

    build/gettext/<domain>.pot                       (made here; not committed)
    locales/zh_CN/LC_MESSAGES/<domain>.po            (committed: the translations)

with domains ``NN_name`` (a notebook), ``docs/<page>`` and ``site``. From them:

* ``notebooks/zh/NN_name.ipynb``: the English notebook with each message of its markdown cells
  replaced by its translation; code cells and stored outputs identical (tests/test_i18n.py
  checks both);
* ``site/zh/`` (tools/build_site.py): the same, built by Sphinx with ``language = "zh_CN"``.

One command updates everything after an English edit (``make translations``):

    python tools/i18n.py update   # .pot from the sources; sphinx-intl update (new messages
                                  # empty, changed ones fuzzy); notebooks/zh/ rewritten
    python tools/i18n.py check    # what is untranslated, fuzzy or broken; exit 1 if anything

A translation keeps the message's maths, code, links and HTML tags exactly (``problems``), and
a paragraph stays one paragraph (Chinese wraps itself: a line break inside Chinese text would
show as a space).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ZH_NOTEBOOKS = NOTEBOOKS / "zh"
DOCS = ROOT / "docs"
LOCALES = ROOT / "locales"
LANGUAGE = "zh_CN"
CATALOGUES = LOCALES / LANGUAGE / "LC_MESSAGES"
POT = ROOT / "build" / "gettext"

# Colab's badge line (tools/sync_colab.py); in a Chinese notebook it opens the Chinese one.
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*/notebooks/(?:zh/)?[^)/]+\.ipynb\)$")
FENCE = re.compile(r"^(```+|~~~+)")
LIST_ITEM = re.compile(r"^((?:[-*+]|\d+\.) )")
HEADING = re.compile(r"^(#{1,6} )")
ONLY_TAGS = re.compile(r"^\s*(?:</?[a-zA-Z][^>]*>\s*)+$")


# ------------------------------------------------------------------------------ messages


@dataclass(frozen=True)
class Piece:
    """A piece of a text: copied as it is (``message`` False), or a message. A message is
    written back as ``first`` + its first line, then ``rest`` + each further line (a line
    left empty gets ``rest`` without its trailing space): a heading's "## ", a list item's
    "1. " and its indent, a quote's "> "."""
    text: str
    message: bool = False
    first: str = ""
    rest: str = ""

    def render(self, text: str | None = None) -> str:
        text = self.text if text is None else text
        if not self.message:
            return text
        lines = text.split("\n")
        return "\n".join([self.first + lines[0]] + [
            (self.rest + line) if line else self.rest.rstrip() for line in lines[1:]])


def _prefixed(lines: list[str], first: str, rest: str) -> Piece | None:
    """The lines as one message without their prefixes, or None where that would not give
    the lines back exactly."""
    out = []
    for i, line in enumerate(lines):
        prefix = first if i == 0 else rest
        if line.startswith(prefix):
            out.append(line[len(prefix):])
        elif i and line == prefix.rstrip():
            out.append("")
        else:
            return None
    piece = Piece("\n".join(out), True, first, rest)
    return piece if piece.render() == "\n".join(lines) else None


def _block_pieces(lines: list[str]) -> list[Piece]:
    """One block (no blank line inside) as pieces."""
    text = "\n".join(lines)
    if len(lines) == 1 and BADGE.match(lines[0]):
        return [Piece(text)]
    if ONLY_TAGS.match(text) or not re.search(r"[A-Za-z\u4e00-\u9fff]", re.sub(r"<[^>]*>", "", text)):
        return [Piece(text)]
    m = HEADING.match(lines[0])
    if m and len(lines) == 1:
        return [Piece(lines[0][len(m[1]):], True, m[1])]
    if all(line.startswith(">") for line in lines):
        quote = _prefixed(lines, "> ", "> ")
        if quote:
            return [quote]
    if LIST_ITEM.match(lines[0]):
        starts = [i for i, line in enumerate(lines) if LIST_ITEM.match(line)]
        out: list[Piece] = []
        for a, b in zip(starts, starts[1:] + [len(lines)]):
            marker = LIST_ITEM.match(lines[a])[1]
            if out:
                out.append(Piece("\n"))
            out.append(_prefixed(lines[a:b], marker, " " * len(marker))
                       or Piece("\n".join(lines[a:b]), True))
        return out
    return [Piece(text, True)]


def pieces(text: str) -> list[Piece]:
    """``text`` (markdown) as pieces; ``"".join(p.render() for p in pieces(text)) == text``.
    Blocks are separated by blank lines; a fenced block or a $$ block is one piece, copied."""
    lines = text.split("\n")
    units: list[list[Piece]] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            units.append(_block_pieces(block))
            block.clear()

    i = 0
    while i < len(lines):
        line, bare = lines[i], lines[i].strip()
        fence = FENCE.match(line.lstrip())
        if fence or bare.startswith("$$"):
            flush()
            end = i
            if fence:
                end += 1
                while end < len(lines) and not lines[end].lstrip().startswith(fence[1]):
                    end += 1
            elif bare == "$$" or not bare.endswith("$$") or len(bare) < 4:
                end += 1
                while end < len(lines) and not lines[end].rstrip().endswith("$$"):
                    end += 1
            units.append([Piece("\n".join(lines[i:end + 1]))])
            i = end + 1
        elif not bare:
            flush()
            units.append([Piece(line)])
            i += 1
        else:
            block.append(line)
            i += 1
    flush()
    out: list[Piece] = []
    for k, unit in enumerate(units):
        if k:
            out.append(Piece("\n"))
        out += unit
    return out


def messages(text: str) -> list[str]:
    return [p.text for p in pieces(text) if p.message]


def translate(text: str, table: dict[str, str]) -> str:
    """``text`` with each message replaced by ``table``'s translation (kept where it has none)."""
    return "".join(p.render(table.get(p.text) or p.text) if p.message else p.text
                   for p in pieces(text))


# ------------------------------------------------------------------------------ sources


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def doc_paths() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def site_strings() -> list[str]:
    """The site's own prose: the landing page, the references and glossary pages, the labels
    the build adds (tools/site_text.py)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import site_text  # noqa: PLC0415 (it imports this module)

    return site_text.messages()


def sources() -> dict[str, list[tuple[str, str]]]:
    """{domain: [(message, where)]} in order of first appearance."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path in notebook_paths():
        nb = nbformat.read(path, as_version=4)
        found = out.setdefault(path.stem, [])
        for k, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                found += [(m, f"notebooks/{path.name}:cell {k}") for m in messages(cell.source)]
    for path in doc_paths():
        out[f"docs/{path.stem}"] = [(m, f"docs/{path.name}")
                                    for m in messages(path.read_text(encoding="utf-8"))]
    out["site"] = [(m, "tools/site_text.py") for m in site_strings()]
    return out


# ------------------------------------------------------------------------------ catalogues


def po_path(domain: str) -> Path:
    return CATALOGUES / f"{domain}.po"


def load(domain: str) -> dict[str, str]:
    """{English: Chinese} of a catalogue: its translated, not fuzzy, messages."""
    path = po_path(domain)
    if not path.is_file():
        return {}
    with open(path, "rb") as f:
        catalog = read_po(f)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}


def write_pots() -> list[Path]:
    """build/gettext/<domain>.pot for every domain."""
    shutil.rmtree(POT, ignore_errors=True)
    written = []
    for domain, found in sources().items():
        catalog = Catalog(project="Attention, hands-on", charset="utf-8", fuzzy=False)
        for message, where in found:
            file, _, line = where.partition(":")
            catalog.add(message, locations=[(file, 0)], auto_comments=[line] if line else [])
        path = POT / f"{domain}.pot"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            write_po(f, catalog, width=0, omit_header=False, include_lineno=False)
        written.append(path)
    return written


def update() -> None:
    """Extract, merge into the catalogues (sphinx-intl), drop what no source has any more,
    rewrite the Chinese notebooks."""
    write_pots()
    run = subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "-p", str(POT),
                          "-d", str(LOCALES), "-l", LANGUAGE, "-w", "0"], cwd=ROOT,
                         capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"error: sphinx-intl update failed:\n{run.stdout}{run.stderr}")
    domains = {p.relative_to(POT).with_suffix("").as_posix() for p in POT.rglob("*.pot")}
    for po in CATALOGUES.rglob("*.po"):
        if po.relative_to(CATALOGUES).with_suffix("").as_posix() not in domains:
            po.unlink()
            print(f"removed {po.relative_to(ROOT)} (its source is gone)")
    write_notebooks()


# ------------------------------------------------------------------------------ notebooks


def zh_badge(text: str) -> str:
    """The Colab badge line made to open the Chinese notebook."""
    return re.sub(r"^(\[!\[Open In Colab\]\([^)]*\)\]\([^)]*/notebooks/)([^)/]+\.ipynb\))",
                  r"\1zh/\2", text, flags=re.M)


def translated(nb: nbformat.NotebookNode, table: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of ``nb`` with its markdown cells translated (the Colab badge opening the Chinese
    notebook), its code cells and outputs untouched, and its language set."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = zh_badge(translate(cell.source, table))
    out.metadata["language"] = "zh-CN"  # (the prose's; kernelspec/language_info say Python)
    return out


def zh_notebook(path: Path) -> nbformat.NotebookNode:
    return translated(nbformat.read(path, as_version=4), load(path.stem))


def write_notebooks() -> list[Path]:
    ZH_NOTEBOOKS.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebook_paths():
        target = ZH_NOTEBOOKS / path.name
        text = nbformat.writes(zh_notebook(path)) + "\n"
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    for stale in set(ZH_NOTEBOOKS.glob("*.ipynb")) - {ZH_NOTEBOOKS / p.name for p in notebook_paths()}:
        stale.unlink()
    return written


# ------------------------------------------------------------------------------ checks

MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+?\$")
CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
URL = re.compile(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"")
TAG = re.compile(r"</?([a-zA-Z][a-zA-Z0-9]*)\b")


def problems(english: str, chinese: str) -> list[str]:
    """What a translation breaks: maths, code spans, link targets and HTML tags are kept
    exactly (as multisets); a one-line message stays one line; a table keeps its rows and
    columns; a list of lines stays as many lines."""
    found = []
    for name, pattern in (("maths", MATH), ("code", CODE)):
        a = sorted(" ".join(m[0].split()) for m in pattern.finditer(english))
        b = sorted(" ".join(m[0].split()) for m in pattern.finditer(chinese))
        if a != b:
            found.append(f"{name} differs: missing {sorted(set(a) - set(b))[:3]}, "
                         f"added {sorted(set(b) - set(a))[:3]}")
    a = sorted("".join(g) for g in URL.findall(english))
    b = sorted("".join(g) for g in URL.findall(chinese))
    if a != b:
        found.append(f"links differ: {sorted(set(a) ^ set(b))[:3]}")
    if sorted(TAG.findall(english)) != sorted(TAG.findall(chinese)):
        found.append("HTML tags differ")
    en_lines, zh_lines = english.split("\n"), chinese.split("\n")
    if english.lstrip().startswith("|"):
        shape = lambda ls: [line.count("|") for line in ls]  # noqa: E731
        if shape(en_lines) != shape(zh_lines):
            found.append("table shape differs (rows or columns)")
    elif "\n" not in english and "\n" in chinese:
        found.append("a one-line message became several lines")
    if re.search(r"[\u4e00-\u9fff]\n[\u4e00-\u9fff]", chinese):
        found.append("a line break between Chinese characters (it shows as a space)")
    return found


def report() -> list[str]:
    """Every untranslated, fuzzy, missing or broken message, and every catalogue out of step
    with the sources; empty when the Chinese edition is complete and in step."""
    out = []
    for domain, found in sources().items():
        path = po_path(domain)
        if not path.is_file():
            out.append(f"{domain}: no catalogue {path.relative_to(ROOT)}")
            continue
        with open(path, "rb") as f:
            catalog = read_po(f)
        wanted = {m for m, _ in found}
        have = {m.id: m for m in catalog if m.id}
        for message in sorted(wanted - set(have)):
            out.append(f"{domain}: not in the catalogue (run make translations): {message[:70]!r}")
        for message in sorted(set(have) - wanted):  # (obsolete ones, #~, are not in `have`)
            out.append(f"{domain}: no source has it any more (run make translations): "
                       f"{message[:70]!r}")
        for message in wanted & set(have):
            m = have[message]
            if not m.string:
                out.append(f"{domain}: untranslated: {message[:70]!r}")
            elif m.fuzzy:
                out.append(f"{domain}: fuzzy (the English changed): {message[:70]!r}")
            else:
                out += [f"{domain}: {p}: {message[:70]!r}" for p in problems(message, m.string)]
    return out


WORK = ROOT / "build" / "i18n-work"


def export(domain: str) -> Path:
    """build/i18n-work/<domain>.json: the catalogue's messages as [{"en", "zh", "where"}] (a
    translator's working copy; ``import`` puts it back)."""
    with open(po_path(domain), "rb") as f:
        catalog = read_po(f)
    items = [{"en": m.id, "zh": "" if m.fuzzy else m.string,
              "where": ", ".join(m.auto_comments)} for m in catalog if m.id]
    path = WORK / f"{domain}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def import_work(domain: str, work: Path) -> list[str]:
    """Put a working copy's translations into the catalogue (a filled "zh" replaces the
    message's translation and clears its fuzzy mark); returns its problems."""
    path = po_path(domain)
    with open(path, "rb") as f:
        catalog = read_po(f)
    out = []
    for item in json.loads(work.read_text(encoding="utf-8")):
        message = catalog.get(item["en"])
        if message is None:
            out.append(f"not in the catalogue: {item['en'][:60]!r}")
            continue
        if item.get("zh"):
            message.string = item["zh"]
            message.flags.discard("fuzzy")
            out += [f"{p}: {item['en'][:60]!r}" for p in problems(item["en"], item["zh"])]
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, include_lineno=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("update", "check", "pot", "notebooks", "export",
                                            "import"))
    parser.add_argument("domain", nargs="?", help="export/import: a catalogue, e.g. 03_masked_softmax")
    parser.add_argument("file", nargs="?", type=Path, help="import: the working copy")
    args = parser.parse_args()
    if args.command == "export":
        print(export(args.domain).relative_to(ROOT))
    elif args.command == "import":
        left = import_work(args.domain, args.file or WORK / f"{args.domain}.json")
        print("\n".join(left) or f"{args.domain}: imported, no problems")
        sys.exit(1 if left else 0)
    elif args.command == "pot":
        for path in write_pots():
            print(path.relative_to(ROOT))
    elif args.command == "update":
        update()
        left = report()
        print(f"catalogues in {CATALOGUES.relative_to(ROOT)}: {len(left)} messages to translate "
              f"or fix (python tools/i18n.py check lists them)")
    elif args.command == "notebooks":
        for path in write_notebooks():
            print(f"wrote {path.relative_to(ROOT)}")
    else:
        left = report()
        print("\n".join(left) or "every message translated, none fuzzy, none broken")
        sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()
