"""The Chinese edition (tools/i18n.py): messages cut from the English prose and put back exactly,
the translations kept in step with the English, and the Chinese notebooks the English ones with
only their prose changed."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import i18n  # noqa: E402
import site_text  # noqa: E402

NOTEBOOKS = i18n.notebook_paths()


def english_texts() -> list[tuple[str, str]]:
    """(where, markdown) of every English text the catalogues are cut from."""
    out = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        out += [(f"{path.name} cell {k}", cell.source) for k, cell in enumerate(nb.cells)
                if cell.cell_type == "markdown"]
    out += [(f"docs/{p.name}", p.read_text(encoding="utf-8")) for p in i18n.doc_paths()]
    out += [(f"site_text {name}", text) for name, text in site_text.TEXT.items()]
    return out


# ------------------------------------------------------------------------------ messages


def test_every_english_text_is_cut_into_pieces_that_give_it_back_exactly():
    texts = english_texts()
    assert len(texts) > 250
    for where, text in texts:
        assert "".join(p.render() for p in i18n.pieces(text)) == text, where


def test_a_cell_is_cut_into_its_blocks_and_its_maths_code_and_badge_are_not_messages():
    text = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            "(https://colab.research.google.com/github/o/r/blob/main/notebooks/01_x.ipynb)\n\n"
            "## Attention cues（注意力提示）\n\nA paragraph that wraps\nover two lines:\n\n"
            "$$\nf(x) = \\sum_i y_i .\n$$\n\n"
            "1. first item\n   continued\n2. second item\n\n"
            "> **Errata**: a quote\n>\n> that goes on.\n\n"
            "```python\nx = 1  # not prose\n```\n\n"
            "| a | b |\n|---|---|\n| 1 | 2 |\n\n</details>")
    assert i18n.messages(text) == [
        "Attention cues（注意力提示）", "A paragraph that wraps\nover two lines:",
        "first item\ncontinued", "second item", "**Errata**: a quote\n\nthat goes on.",
        "| a | b |\n|---|---|\n| 1 | 2 |"]


def test_translate_puts_each_translation_where_its_english_was_with_its_markers():
    text = "## Cues（提示）\n\nOne\nparagraph.\n\n- item one\n  wrapped\n- item two\n\n> a\n>\n> quote"
    table = {"Cues（提示）": "提示（cues）", "One\nparagraph.": "一段。",
             "item one\nwrapped": "第一项\n续行", "a\n\nquote": "一\n\n引用"}
    assert i18n.translate(text, table) == (
        "## 提示（cues）\n\n一段。\n\n- 第一项\n  续行\n- item two\n\n> 一\n>\n> 引用")
    # A message without a translation stays English; an empty table changes nothing.
    assert i18n.translate(text, {}) == text


@pytest.mark.parametrize("english, chinese, broken", [
    ("Let $x_i$ be `h.f(x)`: see [03](03_a.ipynb).", "设 $x_i$ 为 `h.f(x)`：见 [03](03_a.ipynb)。", None),
    ("Let $x_i$ be a key.", "设 $x_j$ 为一个键。", "maths"),
    ("Call `h.f(x)`.", "调用 `h.g(x)`。", "code"),
    ("See [03](03_a.ipynb).", "见 [03](03_b.ipynb)。", "links"),
    ("<summary>Note</summary>", "说明", "HTML tags"),
    ("| a | b |\n|---|---|", "| 甲 | 乙 | 丙 |\n|---|---|", "table shape"),
    ("One line.", "一行，\nand two", "one-line"),
    ("Two\nlines.", "两\n行", "line break between Chinese"),
    # Maths the English wraps over two lines may be one line in the Chinese.
    ("the sum $\\sum_i\nx_i$ here", "这里的和 $\\sum_i x_i$", None),
])
def test_problems_finds_what_a_translation_breaks(english, chinese, broken):
    found = i18n.problems(english, chinese)
    if broken is None:
        assert found == []
    else:
        assert len(found) == 1 and broken in found[0], found


# ------------------------------------------------------------------------------ in step


def test_every_message_is_translated_none_fuzzy_none_broken_and_the_catalogues_in_step():
    """An English edit without its Chinese fails here: `make translations` puts the new or
    changed message into its catalogue (empty or fuzzy), and this lists it until translated."""
    left = i18n.report()
    assert not left, (f"{len(left)} messages of the Chinese edition need work "
                      "(make translations, then translate them):\n  " + "\n  ".join(left[:30]))


def test_report_catches_an_english_edit_without_its_chinese(monkeypatch):
    sources = i18n.sources()
    domain = NOTEBOOKS[2].stem
    edited = [(m + " (edited)", where) if k == 0 else (m, where)  # (the title: short)
              for k, (m, where) in enumerate(sources[domain])]
    monkeypatch.setattr(i18n, "sources", lambda: {domain: edited})
    left = i18n.report()
    assert any("not in the catalogue" in line and "(edited)" in line for line in left), left
    assert any("no source has it any more" in line for line in left), left


def test_the_site_texts_translate_with_their_fields_kept():
    t_en, t_zh = site_text.translator("en"), site_text.translator("zh_CN")
    assert t_en("card", nn="03") == "The first figure of notebook 03"
    card = t_zh("card", nn="03")
    assert "03" in card and "{" not in card and card != t_en("card", nn="03")
    landing = t_zh("landing", first_html="01_queries_keys_values.html")
    assert 'href="01_queries_keys_values.html"' in landing and "注意力机制" in landing


# ------------------------------------------------------------------------------ notebooks


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_the_chinese_notebook_is_the_english_one_with_its_prose_translated(path):
    english = nbformat.read(path, as_version=4)
    chinese = nbformat.read(i18n.ZH_NOTEBOOKS / path.name, as_version=4)
    assert len(chinese.cells) == len(english.cells)
    table = i18n.load(path.stem)
    for k, (en, zh) in enumerate(zip(english.cells, chinese.cells)):
        assert (zh.cell_type, zh.get("id"), zh.metadata) == (en.cell_type, en.get("id"),
                                                            en.metadata), f"cell {k}"
        if en.cell_type == "code":
            # Code and stored outputs identical: one execution serves both editions.
            assert zh.source == en.source and zh.outputs == en.outputs, f"cell {k}"
            assert zh.execution_count == en.execution_count, f"cell {k}"
        else:
            assert zh.source == i18n.zh_badge(i18n.translate(en.source, table)), (
                f"cell {k} is not the catalogue's translation (run make translations)")
            if i18n.messages(en.source):
                assert zh.source != en.source, f"cell {k} is still English"
    meta = copy.deepcopy(chinese.metadata)
    assert meta.pop("language") == "zh-CN" and meta == english.metadata


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_the_chinese_notebooks_colab_badge_opens_the_chinese_notebook(path):
    first = nbformat.read(i18n.ZH_NOTEBOOKS / path.name, as_version=4).cells[0].source
    assert f"/blob/main/notebooks/zh/{path.name})" in first.splitlines()[0]


def test_there_is_a_chinese_notebook_for_each_english_one_and_no_other():
    assert sorted(p.name for p in i18n.ZH_NOTEBOOKS.glob("*.ipynb")) == [p.name for p in NOTEBOOKS]


def test_the_chinese_notebook_files_are_written_as_make_translations_writes_them():
    for path in NOTEBOOKS:
        text = (i18n.ZH_NOTEBOOKS / path.name).read_text(encoding="utf-8")
        assert text == nbformat.writes(i18n.zh_notebook(path)) + "\n", path.name
        json.loads(text)
