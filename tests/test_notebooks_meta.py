"""Fast checks on every stored notebook (no kernel, no browser).

* Name ``NN_snake_case.ipynb``, title ``# NN · ...``.
* Colab badge and Colab set-up cell exactly as ``tools/sync_colab.py`` writes them, with the
  repository URL of pyproject.toml; the set-up cell does nothing outside Colab, and in a
  simulated Colab it clones that URL's main branch (the one the badge opens notebooks from) or
  resets an earlier clone to the latest main, makes ``helpers`` importable and installs nothing.
  README.md's Colab badge is what ``tools/sync_colab.py`` writes too, and every Colab or GitHub
  link of this repository in README.md uses the pyproject URL.
* Stored outputs from one clean top-to-bottom run: every code cell executed, in order, no
  errors; at least one PNG figure (GitHub and nbviewer show it).
* Widget cells: exactly the cells that display a widget carry the cell tag
  ``nbval-ignore-output`` (a tag, not nbval's ``# NBVAL_...`` comment, which readers would see);
  the widget state is stored beside the notebook (``notebooks/widget_state/NN_name.json``,
  tools/widget_state.py), not in its metadata, so that renderers without JavaScript pick each
  view's PNG; no cell keeps ``execution`` timestamps; every page view stores the PNG, text and
  scene of the state it showed.
* Every "notebook NN" in the prose links to that notebook.
* The first code cell after the Colab cell seeds (``h.set_seed(``) and sets the series' one
  theme (``h.set_theme()``); the notebook ends with an "Exercises" section of 3 or more
  exercises, then a "Solutions" section; from notebook 02 on, 3 or more exercises have a check
  cell (``answer_n = None``, ``def check_n(...)``, ``print(check_n(answer_n))``) whose stored
  output is only "not answered yet" — the stored notebook gives no answer away. An exercise
  without a check cell says "(no check)".
* Solutions: collapsed code cells (``jupyter.source_hidden`` in JupyterLab, a ``#@title`` form
  in Colab), one per checked exercise at least, each printing ``check_n(solution)``; nbval
  re-runs them, so the stored "correct" proves that every check accepts its own solution.

``ATTN_NOTEBOOKS_DIR=/some/dir`` (developers only) checks that directory's notebooks instead.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
VIEW_JS = (ROOT / "helpers" / "widgets" / "view.js").read_text(encoding="utf-8")


def _view_modules() -> set[str]:
    """The ES modules a stored view may carry: view.js, and each live view's (view.js, the live
    runtime and its engine: helpers/widgets/live)."""
    import importlib

    from helpers.widgets.live import KINDS, module_source

    live = {module_source(importlib.import_module(f"helpers.widgets.live.{kind}").JS)
            for kind in KINDS}
    return {VIEW_JS} | live


VIEW_MODULES = _view_modules()
NOTEBOOKS_DIR = Path(os.environ.get("ATTN_NOTEBOOKS_DIR") or ROOT / "notebooks").resolve()
NOTEBOOK_PATHS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
NAME = re.compile(r"^(\d\d)_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
IGNORE_TAG = "nbval-ignore-output"
COLAB_LINK = r"colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)"
GITHUB_LINK = r"github\.com/([\w.-]+/[\w.-]+)"

with open(ROOT / "pyproject.toml", "rb") as f:
    REPO_URL = tomllib.load(f)["project"]["urls"]["Repository"]
REPO_PATH = REPO_URL.removeprefix("https://github.com/").rstrip("/")  # owner/name


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sync_colab = _load_tool("sync_colab")
widget_state = _load_tool("widget_state")


@pytest.fixture(params=NOTEBOOK_PATHS, ids=[p.name for p in NOTEBOOK_PATHS])
def path(request) -> Path:
    return request.param


@pytest.fixture
def nb(path):
    return nbformat.read(path, as_version=4)


def _tagged(nb, tag):
    return [i for i, c in enumerate(nb.cells) if tag in c.get("metadata", {}).get("tags", [])]


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _displays_widget(cell) -> bool:
    return any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", []))


def _setup_index(nb) -> int:
    found = _tagged(nb, sync_colab.SETUP_TAG)
    assert len(found) == 1, (
        f"want one Colab set-up cell (tag {sync_colab.SETUP_TAG!r}), found {len(found)}: "
        "run tools/sync_colab.py on the notebook"
    )
    return found[0]


def _setup_source(nb) -> str:
    return nb.cells[_setup_index(nb)].source


def test_there_are_notebooks():
    assert NOTEBOOK_PATHS, f"no notebooks in {NOTEBOOKS_DIR}"


def test_numbers_are_unique():
    numbers = [p.name[:2] for p in NOTEBOOK_PATHS]
    assert len(numbers) == len(set(numbers)), f"two notebooks share a number: {numbers}"


def _repository_links(text: str) -> list[str]:
    """owner/name of every Colab link, and of every GitHub link to a repository of this name
    (an old owner, a fork); links to other projects (d2l, PyTorch) are not ours to check."""
    name = REPO_PATH.split("/")[1]
    return re.findall(COLAB_LINK, text) + [
        link for link in re.findall(GITHUB_LINK, text)
        if link.split("/")[1].removesuffix(".git") == name
    ]


def test_repository_url_is_written_only_in_pyproject(tmp_path):
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", REPO_URL), REPO_URL
    assert sync_colab.repo_url() == REPO_URL
    tool = (ROOT / "tools" / "sync_colab.py").read_text()
    assert REPO_PATH not in tool, "tools/sync_colab.py must read the URL from pyproject.toml"
    # README.md: its badge is what sync_colab writes, and it links to no other address.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    copy = tmp_path / "README.md"
    copy.write_text(readme, encoding="utf-8")
    assert not sync_colab.sync_readme(copy), (
        "README.md's Colab badge is out of date: run `python tools/sync_colab.py`"
    )
    links = _repository_links(readme)
    assert re.findall(COLAB_LINK, readme), "README.md has no Colab badge"
    wrong = [link for link in links if link != REPO_PATH]
    assert not wrong, f"README.md links to {wrong}, not {REPO_PATH} (pyproject.toml)"


# ------------------------------------------------------------------- Chinese terms

# The terms of the seed notes (shared/seeds) that each notebook introduces, written beside the
# English at first use as "attention pooling（注意力汇聚）".
ZH_TERMS = {
    "01": ["查询", "键", "值", "注意力提示", "自主性提示", "非自主性提示", "注意力汇聚", "注意力权重",
           "平均汇聚", "温度", "熵"],
    "02": ["注意力汇聚", "平均汇聚", "核回归", "核函数", "高斯核", "带宽", "偏差-方差权衡",
           "非参数注意力汇聚", "带参数注意力汇聚", "留一法", "过拟合"],
    "03": ["批量矩阵乘法", "掩蔽softmax操作", "有效长度", "填充"],
    "04": ["注意力评分函数", "注意力权重", "加性注意力", "缩放点积注意力", "隐藏单元", "多层感知机"],
    "05": ["编码器", "解码器", "门控循环单元", "双向", "注意力", "循环神经网络", "加性注意力",
           "注意力汇聚", "注意力权重", "有效长度", "平均汇聚"],
    "06": ["多头注意力", "线性投影", "连结", "头", "自注意力", "位置编码"],
    "07": ["自注意力", "位置编码", "卷积神经网络", "循环神经网络", "计算复杂度", "顺序操作",
           "最大路径长度", "位置嵌入矩阵", "频率", "绝对位置信息", "相对位置信息", "填充",
           "置换等变"],
    "08": ["因果掩码", "残差连接", "层规范化", "前馈网络", "归纳头", "学习率预热", "相变", "键组合",
           "复制", "直接对数几率归因", "复制分数", "QK 回路", "OV 回路", "键组合分数"],
    "09": ["在线softmax", "分块", "重计算", "键值缓存", "预填充", "解码", "算术强度", "分组查询注意力",
           "分页KV缓存", "工作划分", "线程块", "线程束"],
    "10": ["旋转位置编码", "相对位置", "外推", "键值缓存", "长程衰减", "线性偏置注意力", "相对位置偏置"],
    "11": ["键值缓存", "滑动窗口注意力", "感受野", "注意力汇点", "活跃", "休眠", "门控注意力",
           "多头潜在注意力"],
    "12": ["核回归", "特征映射", "线性注意力", "循环神经网络", "随机特征", "正交", "关联回忆", "串扰",
           "增量规则", "门控", "衰减", "遗忘门", "分块并行形式"],
}


def test_key_terms_carry_their_chinese_names(path, nb):
    number = path.name[:2]
    assert number in ZH_TERMS, f"{path.name}: add its key terms to ZH_TERMS"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    glossed = "".join(re.findall(r"（([^（）]+)）", markdown))  # text inside full-width brackets
    missing = [t for t in ZH_TERMS[number] if t not in glossed]
    assert not missing, f"{path.name}: no （term） beside the English for {missing}"
    assert "遮蔽" not in markdown, f"{path.name}: the seeds' term is 掩蔽, not 遮蔽"


# ---------------------------------------------------------------- name, title, Colab


def test_name_and_title(path, nb):
    m = NAME.match(path.name)
    assert m, f"{path.name}: name must be NN_snake_case.ipynb"
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    titles = [line for line in first.source.splitlines() if line.startswith("# ")]
    assert titles and titles[0].startswith(f"# {m.group(1)} · "), (
        f"{path.name}: first cell must have the title '# {m.group(1)} · Title', got {titles[:1]}"
    )


def test_colab_badge_and_cell_are_what_sync_colab_writes(path, nb, tmp_path):
    assert _tagged(nb, sync_colab.BADGE_TAG) == [0], "the Colab badge belongs in the first cell"
    assert _tagged(nb, sync_colab.SETUP_TAG) == [1], "the Colab set-up cell belongs second"
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    changed = sync_colab.sync(copy)
    assert not changed and copy.read_bytes() == path.read_bytes(), (
        f"{path.name} is out of date: run `python tools/sync_colab.py notebooks/{path.name}`"
    )
    assert sync_colab.badge_line(path.name) in nb.cells[0].source.splitlines()
    assert nb.cells[1].source == sync_colab.setup_source()
    assert not nb.cells[1].outputs


def test_every_repository_link_is_the_pyproject_one(path, nb):
    colab_link = f"colab.research.google.com/github/{REPO_PATH}/blob/main/notebooks/{path.name})"
    assert colab_link in nb.cells[0].source
    assert f'REPO_URL = "{REPO_URL}"' in _setup_source(nb)
    # Every Colab link, and every GitHub link to a repository of this name (an old owner, a
    # fork), must be the pyproject one; links to other projects (d2l, PyTorch) are fine.
    for cell in nb.cells:
        for link in _repository_links(cell.source):
            assert link == REPO_PATH, f"{path.name}: link to {link}, not {REPO_PATH}"


def test_colab_cell_does_nothing_outside_colab(nb, monkeypatch):
    source = _setup_source(nb)
    assert "google.colab" not in sys.modules
    calls = []
    for name in ("run", "Popen", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, lambda *a, _n=name, **k: calls.append((_n, a)))
    path_before, modules_before, cwd_before = list(sys.path), set(sys.modules), os.getcwd()
    env_before = dict(os.environ)
    namespace: dict = {}
    exec(compile(source, "<colab-setup>", "exec"), namespace)
    assert not calls, f"the Colab cell ran a process outside Colab: {calls}"
    assert sys.path == path_before, "the Colab cell changed sys.path outside Colab"
    assert set(sys.modules) == modules_before, "the Colab cell imported modules outside Colab"
    assert os.getcwd() == cwd_before and dict(os.environ) == env_before
    defined = set(namespace) - {"__builtins__", "sys"}
    assert not defined, f"the Colab cell defined {defined} outside Colab"


def _fake_colab(monkeypatch) -> list:
    """Put a fake ``google.colab`` in sys.modules; return the list that records each
    ``output.enable_custom_widget_manager()`` call."""
    enabled = []
    names = ("google", "google.colab", "google.colab.output")
    google, colab, output = (types.ModuleType(n) for n in names)
    output.enable_custom_widget_manager = lambda: enabled.append(True)
    colab.output, google.colab = output, colab
    for name, module in zip(names, (google, colab, output)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return enabled


def test_colab_cell_in_simulated_colab(nb, monkeypatch):
    """In Colab: clone the pyproject URL's main branch, or bring an earlier clone up to the
    latest main (so `helpers` matches the notebook the badge opened from main); put it first on
    sys.path once; enable the widget manager; install nothing (Colab's torch, matplotlib and
    ipywidgets 7 must stay)."""
    source = _setup_source(nb)
    installs = re.findall(r"\b(?:pip|conda|apt|apt-get)\b", source)
    assert not installs, f"the Colab cell must install nothing, found {installs}"
    enabled = _fake_colab(monkeypatch)
    name = REPO_URL.rstrip("/").rsplit("/", 1)[-1]
    clone_to = f"/content/{name}"
    calls, cloned = [], []  # a fake /content: the clone "exists" once git has cloned
    real_exists = Path.exists
    monkeypatch.setattr(
        Path, "exists", lambda p, **kw: bool(cloned) if str(p) == clone_to else real_exists(p, **kw)
    )

    def fake_run(args, **kw):
        calls.append((list(args), kw))
        cloned.append(True)

    monkeypatch.setattr(subprocess, "run", fake_run)
    exec(compile(source, "<colab-setup>", "exec"), {})
    assert calls == [
        (["git", "clone", "--depth", "1", "--branch", "main", REPO_URL, clone_to], {"check": True}),
    ]
    calls.clear()
    exec(compile(source, "<colab-setup>", "exec"), {})  # again: update, never a second clone
    assert calls == [
        (["git", "-C", clone_to, "fetch", "--depth", "1", "origin", "main"], {"check": True}),
        (["git", "-C", clone_to, "reset", "--hard", "FETCH_HEAD"], {"check": True}),
    ]
    assert sys.path[0] == clone_to and sys.path.count(clone_to) == 1
    assert enabled == [True, True]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_colab_cell_keeps_its_clone_on_the_latest_main_with_real_git(tmp_path, monkeypatch):
    """The set-up cell's git commands, run for real against a local repository standing in for
    the pyproject URL: the first run clones main; after main moves on (and the clone was
    edited), a second run makes the clone equal to the new main."""
    def git(*args, cwd=None):
        out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    origin = tmp_path / "origin"
    origin.mkdir()
    git("init", "-q", "-b", "main", cwd=origin)
    for key, value in (("user.name", "t"), ("user.email", "t@example.org")):
        git("config", key, value, cwd=origin)
    (origin / "helpers.py").write_text("VERSION = 1\n")
    git("add", ".", cwd=origin)
    git("commit", "-q", "-m", "one", cwd=origin)
    git("checkout", "-q", "-b", "other", cwd=origin)  # the origin's HEAD is not main
    (origin / "helpers.py").write_text("VERSION = 'other branch'\n")
    git("commit", "-qam", "other", cwd=origin)

    name = REPO_URL.rstrip("/").rsplit("/", 1)[-1]
    clone = tmp_path / "content" / name
    clone.parent.mkdir()
    source = sync_colab.setup_source()
    assert source.count(REPO_URL) == 1 and source.count(f'"/content/{name}"') == 1
    source = source.replace(REPO_URL, origin.as_uri()).replace(f'"/content/{name}"', f'"{clone}"')
    _fake_colab(monkeypatch)

    exec(compile(source, "<colab-setup>", "exec"), {})
    assert (clone / "helpers.py").read_text() == "VERSION = 1\n"
    assert sys.path[0] == str(clone)

    git("checkout", "-q", "main", cwd=origin)
    (origin / "helpers.py").write_text("VERSION = 2\n")
    git("commit", "-qam", "two", cwd=origin)
    (clone / "helpers.py").write_text("VERSION = 'edited in Colab'\n")
    exec(compile(source, "<colab-setup>", "exec"), {})
    assert (clone / "helpers.py").read_text() == "VERSION = 2\n"
    assert git("rev-parse", "HEAD", cwd=clone) == git("rev-parse", "main", cwd=origin)
    assert sys.path.count(str(clone)) == 1


# ---------------------------------------------------------------- stored outputs


def test_stored_run_is_complete_and_clean(path, nb):
    counts = [c.execution_count for c in _code_cells(nb)]
    assert None not in counts, (
        f"{path.name}: code cells without an execution count (not executed): "
        f"{[i for i, c in enumerate(nb.cells) if c.get('execution_count', 0) is None]}; "
        "run `make notebooks`"
    )
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts} are not one top-to-bottom run from a fresh kernel"
    )
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            assert out.output_type != "error", (
                f"{path.name}: cell {i} stores an error: {out.get('ename')}"
            )
            if out.output_type == "stream" and out.name == "stderr":
                assert "Traceback" not in out.text, f"{path.name}: cell {i} stores a traceback"


def test_stores_a_png_figure(path, nb):
    pngs = [o for c in _code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
    assert pngs, f"{path.name}: no stored image/png (GitHub and nbviewer would show no figure)"


def test_nbval_ignore_output_tags_exactly_the_widget_cells(path, nb):
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cell.execution_count is None:
            continue  # unexecuted cells: test_stored_run_is_complete_and_clean reports them
        assert "NBVAL" not in cell.source, (
            f"{path.name}: cell {i}: an nbval marker in the code, where readers see it: use the "
            "cell tag instead (nbval reads tags such as nbval-ignore-output)")
        marked = IGNORE_TAG in cell.metadata.get("tags", [])
        widget = _displays_widget(cell)
        assert marked == widget, (
            f"{path.name}: cell {i} "
            + ("displays a widget but lacks" if widget else "displays no widget but carries")
            + f" the tag {IGNORE_TAG!r}"
        )


def test_no_execution_timestamps(path, nb):
    stamped = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not stamped, (
        f"{path.name}: cells {stamped} keep execution timestamps: run `make notebooks` "
        "(tools/widget_state.py split drops them)")


def test_stream_outputs_joined(path, nb):
    split = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
        a.get("output_type") == b.get("output_type") == "stream" and a.get("name") == b.get("name")
        for a, b in zip(c.outputs, c.outputs[1:]))]
    assert not split, (
        f"{path.name}: cells {split} store one print cut into several stream outputs: run "
        "`make notebooks` (tools/widget_state.py split joins them)")


def test_split_joins_consecutive_streams(tmp_path):
    out = nbformat.v4.new_output
    outputs = [out("stream", name="stdout", text="a"), out("stream", name="stdout", text="b\n"),
               out("stream", name="stderr", text="w\n"), out("stream", name="stdout", text="c"),
               out("execute_result", data={"text/plain": "1"}, execution_count=1),
               out("stream", name="stdout", text="d"), out("stream", name="stdout", text="e")]
    path = tmp_path / "00_streams.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=outputs)]), path)
    widget_state.split(path)
    joined = nbformat.read(path, as_version=4).cells[0].outputs
    assert [(o.output_type, o.get("name"), o.get("text")) for o in joined] == [
        ("stream", "stdout", "ab\n"), ("stream", "stderr", "w\n"), ("stream", "stdout", "c"),
        ("execute_result", None, None), ("stream", "stdout", "de")]


NOTEBOOK_MENTION = re.compile(r"\b[Nn]otebooks? (?:\[)?(\d\d)\b")
LINKED_MENTION = re.compile(r"\[[Nn]otebook (\d\d)\]\(([^)]+)\)|\[(\d\d)\]\(([^)]+)\)")


def test_every_notebook_mention_links_to_it(path, nb):
    names = {p.name[:2]: p.name for p in NOTEBOOK_PATHS}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for match in LINKED_MENTION.finditer(cell.source):
            number, target = match.group(1) or match.group(3), match.group(2) or match.group(4)
            assert target == names.get(number), (
                f"{path.name}: cell {i}: notebook {number} links to {target!r}")
        bare = NOTEBOOK_MENTION.findall(LINKED_MENTION.sub("", cell.source))
        assert not bare, f"{path.name}: cell {i}: 'notebook {bare[0]}' is not a link to it"


def test_widget_state_is_stored(path, nb):
    shown = [
        o.data[WIDGET_VIEW]["model_id"]
        for c in _code_cells(nb) for o in c.outputs if WIDGET_VIEW in o.get("data", {})
    ]
    assert "widgets" not in nb.metadata, (
        f"{path.name}: widget state in the notebook's metadata, where GitHub's renderer picks the "
        "empty widget view over each view's PNG: run `make notebooks` (tools/widget_state.py)")
    if not shown:
        return  # no widgets, nothing to store
    store_path = widget_state.state_path(path)
    widgets = widget_state.load(path)
    assert widgets, f"{path.name}: displays widgets but {store_path} is missing: run make notebooks"
    store = widgets.get(WIDGET_STATE)
    assert store, f"{path.name}: {store_path.name} holds no {WIDGET_STATE!r}"
    assert store.get("version_major") == 2, f"widget state version {store.get('version_major')}"
    state = store["state"]
    missing = [m for m in shown if m not in state]
    assert not missing, f"{path.name}: displayed widgets missing from the stored state: {missing}"
    # Every view is a page view: its output carries the PNG of its state (what GitHub, VS Code
    # and an untrusted JupyterLab show), a plain text naming it, and its recorded scene.
    for cell in _code_cells(nb):
        for out in cell.outputs:
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            model = state[data[WIDGET_VIEW]["model_id"]]
            assert model["model_name"] == "AnyModel" and model["state"].get("scene"), (
                f"{path.name}: a displayed widget that is not a page view: {model['model_name']}")
            assert model["state"].get("_esm") in VIEW_MODULES, (
                f"{path.name}: a stored view carries an old view.js: run make notebooks")
            assert "image/png" in data and base64.b64decode(data["image/png"])[:4] == b"\x89PNG", (
                f"{path.name}: a page view's output has no PNG fallback")
            assert re.fullmatch(r"\[[\w.]+: .+\]", data["text/plain"]), data["text/plain"]
    size = len(json.dumps(store))
    assert size <= 1024 * 1024, f"{path.name}: {size / 1024:.0f} KiB of widget state (budget 1 MiB)"


# ---------------------------------------------------------------- structure


def test_first_code_cell_after_colab_cell_seeds(path, nb):
    setup = _setup_index(nb)
    first = next((c for c in nb.cells[setup + 1:] if c.cell_type == "code"), None)
    assert first is not None, f"{path.name}: no code cell after the Colab cell"
    for needed in ("%matplotlib inline", "import helpers as h", "h.set_seed(", "h.set_theme()"):
        assert needed in first.source, f"{path.name}: the first code cell lacks {needed!r}"


def _headings(nb) -> list[tuple[int, str]]:
    """(cell index, text) of every '## ' heading."""
    return [
        (i, line.strip()) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
        for line in c.source.splitlines() if re.match(r"^##\s", line)
    ]


def _exercises_text(nb) -> str:
    """The markdown of the Exercises section, up to the Solutions."""
    headings = _headings(nb)
    start = next(i for i, text in headings if text == "## Exercises")
    end = next((i for i, text in headings if text == "## Solutions"), len(nb.cells))
    text = "\n".join(c.source for c in nb.cells[start:end] if c.cell_type == "markdown")
    text = text[text.index("## Exercises"):]
    return text.split("## Solutions")[0]


def test_ends_with_exercises_then_solutions(path, nb):
    headings = [text for _, text in _headings(nb)]
    assert headings[-2:] == ["## Exercises", "## Solutions"], (
        f"{path.name}: the last two sections must be '## Exercises' and '## Solutions', "
        f"got {headings[-2:]}"
    )
    exercises = re.findall(r"^(?:\d+\.|###)\s", _exercises_text(nb), flags=re.M)
    assert len(exercises) >= 3, f"{path.name}: {len(exercises)} exercises, want 3 or more"


def _exercise_items(nb) -> dict[int, str]:
    """Exercise number → its text (numbered items '1. ...' of the Exercises section)."""
    text = _exercises_text(nb)
    parts = re.split(r"^(\d+)\.\s", text, flags=re.M)
    return {int(n): body for n, body in zip(parts[1::2], parts[2::2])}


def test_exercises_without_a_check_say_so(path, nb):
    checked = {int(check.split("_")[1]) for _, check, _ in _exercise_check_cells(nb)}
    silent = [n for n, body in _exercise_items(nb).items()
              if n not in checked and "(no check)" not in body]
    assert not silent, (
        f"{path.name}: exercises {silent} have no check cell and do not say '(no check)'"
    )


def _solution_cells(nb) -> list:
    start = next((i for i, text in _headings(nb) if text == "## Solutions"), len(nb.cells))
    return [c for c in nb.cells[start:] if c.cell_type == "code"]


def test_solutions_are_collapsed_and_pass_their_checks(path, nb):
    cells = _solution_cells(nb)
    assert cells, f"{path.name}: the Solutions section has no code cell"
    for cell in cells:
        first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
        assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, (
            f"{path.name}: solution cell {first!r} is not collapsed (metadata.jupyter.source_hidden)"
        )
        assert cell.metadata.get("cellView") == "form" and re.match(r"#\s?@title\s", first), (
            f"{path.name}: solution cell {first!r} needs a '#@title ...' first line and "
            "metadata.cellView = 'form' (collapsed in Colab)"
        )
    solved = set()
    for cell in cells:
        first = cell.source.lstrip().splitlines()[0]
        printed = re.findall(r"print\((?:.*,\s*)?(check_\d+)\(", cell.source)
        solved.update(printed)
        outputs = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert "not quite" not in outputs and "not answered" not in outputs, (
            f"{path.name}: a solution cell fails its own check: {outputs!r}"
        )
        assert outputs.count("correct") >= len(printed), (
            f"{path.name}: solution cell {first!r} prints {printed} but not 'correct': {outputs!r}"
        )
    checks = {check for _, check, _ in _exercise_check_cells(nb)}
    assert checks <= solved, f"{path.name}: no solution cell prints {sorted(checks - solved)}"


# A check cell: ``answer_2 = None`` (or ``nearest_neighbour = None``), ``def check_2(...)``,
# ``print(check_2(answer_2))`` (or ``print("exercise 2:", check_2(answer_2))``).
CHECK_DEF = re.compile(r"^def (check_\d+)\(", re.M)
NOT_ANSWERED = re.compile(r"(?:exercise \d+: )?not answered yet\n?")
MIN_CHECKS = 3


def _exercise_check_cells(nb) -> list[tuple[int, str, str]]:
    """(cell index, check function, answer name) of each check cell after '## Exercises'."""
    start = max(
        (i for i, c in enumerate(nb.cells)
         if c.cell_type == "markdown" and re.search(r"^## Exercises\s*$", c.source, re.M)),
        default=len(nb.cells),
    )
    found = []
    for i, cell in enumerate(nb.cells[start:], start):
        if cell.cell_type != "code":
            continue
        for check in CHECK_DEF.findall(cell.source):
            call = re.search(rf"^print\((?:.*,\s*)?{check}\((\w+)\)\)\s*$", cell.source, re.M)
            found.append((i, check, call[1] if call else ""))
    return found


def test_exercises_have_check_cells_that_give_no_answer_away(path, nb):
    checks = _exercise_check_cells(nb)
    want = MIN_CHECKS if int(path.name[:2]) >= 2 else 0  # 01, the overview: checks optional
    assert len({check for _, check, _ in checks}) >= want, (
        f"{path.name}: {len(checks)} exercise check cells (def check_n(...) after "
        f"'## Exercises'), want {want} or more"
    )
    for i, check, answer in checks:
        cell = nb.cells[i]
        where = f"{path.name}: cell {i} ({check})"
        assert answer, f"{where}: does not print({check}(answer)) — the reader sees no verdict"
        # The stored cell leaves the answer blank ...
        assert re.search(rf"^{answer} = None\b", cell.source, re.M), (
            f"{where}: the stored cell must leave {answer} = None for the reader to fill in"
        )
        # ... and its stored output is the blank verdict: no "correct", no expected value.
        texts = [
            o.get("text", "") if o.output_type == "stream" else repr(o.get("data", o))
            for o in cell.outputs
        ]
        assert len(texts) == 1 and NOT_ANSWERED.fullmatch(texts[0]), (
            f"{where}: stored output must be only 'not answered yet', got {texts}"
        )
