"""The Makefile's set-up and test plumbing, run on a copy with a fake Python (fast, offline).

The fake (``fake_python`` below) stands in for ``python3`` and for the ``.venv/bin/python`` it
"creates": it logs every call (arguments and the simulated-machine variables) and fakes
``-m venv``, ``-m pip`` (a requirement named ``made-up-...`` is not found, as on a real index),
``-m pytest`` (fails when its arguments contain ``$FAKE_PYTEST_FAIL``) and the version query.
So these tests check what make does with those results: a failed pip stops the install and
shows pip's error, an unsupported Python is named before any venv exists, every test stage
runs and is summarised, and plain ``make`` lists the targets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COPIED = ["Makefile", "requirements.txt", "requirements-colab-widgets.txt", "requirements-site.txt",
          "pyproject.toml",
          "package.json", "package-lock.json"]
STAGES = ["test-unit", "test-colab-widgets", "test-notebooks", "test-notebooks-simulated",
          "test-browser"]
MACHINE_VARS = ["ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS",
                "PYTHONPATH", "EXPECT_IPYWIDGETS"]

FAKE_PYTHON = f"""#!{sys.executable}
import json, os, shutil, sys
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_PY_LOG"], "a") as log:
    env = {{k: os.environ[k] for k in {MACHINE_VARS!r} if k in os.environ}}
    log.write(json.dumps({{"exe": sys.argv[0], "args": args, "env": env}}) + "\\n")
if args[:1] == ["-c"]:
    if "version_info" in args[1]:
        print(os.environ.get("FAKE_PY_VERSION", "3.12"))
    else:
        print("installed: (fake)")
elif args[:2] == ["-m", "venv"]:
    (Path(args[2]) / "bin").mkdir(parents=True)
    shutil.copy(__file__, Path(args[2]) / "bin" / "python")
elif args[:3] == ["-m", "pip", "--version"]:
    print("pip (fake)")
elif args[:3] == ["-m", "pip", "install"]:
    if "--target" in args:
        Path(args[args.index("--target") + 1]).mkdir(parents=True, exist_ok=True)
    if "-r" in args:
        for line in Path(args[args.index("-r") + 1]).read_text().splitlines():
            if line.startswith("made-up-"):
                print(f"ERROR: Could not find a version that satisfies the requirement {{line}} "
                      "(from versions: none)", file=sys.stderr)
                print(f"ERROR: No matching distribution found for {{line}}", file=sys.stderr)
                sys.exit(1)
elif args[:1] == ["tools/build_site.py"]:
    print("site (fake)")
elif args[:2] == ["-m", "pytest"]:
    fail = os.environ.get("FAKE_PYTEST_FAIL")
    if fail and fail in " ".join(args):
        print("1 failed")
        sys.exit(1)
    print("1 passed")
else:
    sys.exit(f"fake python: unexpected call {{args}}")
"""


@pytest.fixture
def project(tmp_path):
    """A copy of the Makefile and what it reads, one notebook file, and a fake python3."""
    for name in COPIED:
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_x.ipynb").write_text("{}")
    # npm packages already installed (newer than the lockfile): make site runs no npm here
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / ".package-lock.json").write_text("{}")
    fake = tmp_path / "fake-python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    return tmp_path


def make(project: Path, *args: str, python: str = "", **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "FAKE_PYTEST_FAIL", "CI")}
    clean.update(FAKE_PY_LOG=str(project / "calls.jsonl"), **env)
    return subprocess.run(
        ["make", "--no-print-directory", f"PYTHON={python or project / 'fake-python3'}", *args],
        cwd=project, env=clean, capture_output=True, text=True, timeout=120,
    )


def calls(project: Path) -> list[dict]:
    log = project / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def pip_installs(project: Path) -> list[list[str]]:
    return [c["args"][3:] for c in calls(project) if c["args"][:3] == ["-m", "pip", "install"]]


def test_plain_make_and_make_help_list_every_target_on_one_screen():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    for args in ([], ["help"]):
        out = subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert len(lines) <= 24 and max(map(len, lines)) <= 100, out.stdout
        for target in ["lab", "test", "install", "notebooks", "bench", "clean", *STAGES]:
            assert any(line.split()[:2] == ["make", target] for line in lines), (
                f"`make {' '.join(args)}` does not list {target}:\n{out.stdout}"
            )
        assert "3.11-3.13" in out.stdout  # the supported Python versions


def test_install_creates_venv_installs_pins_first_then_helpers_and_writes_marker(project):
    out = make(project, "install")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (project / ".venv" / ".installed").exists()
    assert pip_installs(project) == [
        ["--quiet", "--disable-pip-version-check", "-r", "requirements.txt"],
        ["--quiet", "--disable-pip-version-check", "--no-deps", "--no-build-isolation", "-e", "."],
    ]


def test_failed_pip_install_fails_make_shows_pip_error_and_writes_no_marker(project):
    with open(project / "requirements.txt", "a") as f:
        f.write("made-up-requirement==1.0\n")
    out = make(project, "install")
    assert out.returncode != 0, f"make install succeeded although pip failed:\n{out.stdout}"
    shown = out.stdout + out.stderr
    assert "No matching distribution found for made-up-requirement==1.0" in shown
    assert not (project / ".venv" / ".installed").exists()
    # It stopped at the failing pip: helpers was not installed over a half-installed venv.
    assert len(pip_installs(project)) == 1


@pytest.mark.parametrize("version", ["3.10", "3.14", "2.7"])
def test_unsupported_python_is_named_before_any_venv_exists(project, version):
    out = make(project, "install", FAKE_PY_VERSION=version)
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert f"is Python {version};" in errors[0] and "Python 3.11-3.13" in errors[0], errors[0]
    assert not (project / ".venv").exists()
    assert [c["args"][0] for c in calls(project)] == ["-c"]  # only the version query ran


def test_existing_venv_of_an_unsupported_python_is_named_with_the_way_out(project):
    assert make(project, "install").returncode == 0
    stamp = (project / ".venv" / ".installed").stat().st_mtime
    os.utime(project / "requirements.txt", (stamp + 10, stamp + 10))  # out of date: runs again
    out = make(project, "install", FAKE_PY_VERSION="3.10")
    assert out.returncode != 0
    assert ".venv/bin/python is Python 3.10;" in out.stderr and "make clean" in out.stderr


def test_missing_python_is_named(project):
    out = make(project, "install", python=str(project / "no-such-python"))
    assert out.returncode != 0
    assert "cannot run" in out.stderr and "no-such-python" in out.stderr, out.stderr


def test_torch_index_installs_the_pinned_torch_from_that_index_first(project):
    out = make(project, "install", "TORCH_INDEX=https://download.pytorch.org/whl/cpu")
    assert out.returncode == 0, out.stdout + out.stderr
    pin = next(line for line in (project / "requirements.txt").read_text().splitlines()
               if line.startswith("torch=="))
    first, second = pip_installs(project)[:2]
    assert first[-3:] == [pin, "--index-url", "https://download.pytorch.org/whl/cpu"]
    assert second[-2:] == ["-r", "requirements.txt"]


def _stage_calls(project):
    """The pytest calls of `make test`, by stage."""
    runs = [c for c in calls(project) if c["args"][:2] == ["-m", "pytest"]]
    by_stage = {
        "test-unit": [c for c in runs if "--ignore=tests/browser" in c["args"]],
        "test-colab-widgets": [c for c in runs if c["env"].get("EXPECT_IPYWIDGETS") == "7"],
        "test-notebooks": [c for c in runs if "--nbval" in c["args"]
                           and "ATEN_CPU_CAPABILITY" not in c["env"]],
        "test-notebooks-simulated": [c for c in runs if "--nbval" in c["args"]
                                     and "ATEN_CPU_CAPABILITY" in c["env"]],
        "test-browser": [c for c in runs if "tests/browser" in c["args"]],
    }
    return runs, by_stage


def test_make_test_runs_every_stage_even_after_failures_and_summarises(project):
    out = make(project, "test", FAKE_PYTEST_FAIL="--nbval")  # both nbval stages fail
    assert out.returncode != 0
    runs, by_stage = _stage_calls(project)
    assert len(runs) == len(STAGES) and all(len(c) == 1 for c in by_stage.values()), runs
    simulated = by_stage["test-notebooks-simulated"][0]["env"]
    assert simulated == {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                         "OMP_NUM_THREADS": "1"}
    assert "notebooks/01_x.ipynb" in by_stage["test-notebooks"][0]["args"]
    summary = out.stdout[out.stdout.index("==> make test: summary"):].splitlines()
    for stage in STAGES:
        status = "FAILED" if "notebooks" in stage else "passed"
        line = next((s for s in summary if s.endswith(f"make {stage}")), "")
        assert line.split()[:1] == [status], f"{stage}: {line!r} in\n{out.stdout}"
    assert summary[-1] == "stages: 3 passed, 2 failed"


def test_make_test_passes_when_every_stage_passes(project):
    out = make(project, "test")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[-1] == "stages: 5 passed, 0 failed"
    _, by_stage = _stage_calls(project)
    assert all(len(c) == 1 for c in by_stage.values())


def test_lab_listens_on_localhost_with_token_auth_on(project):
    out = make(project, "-n", "lab")
    assert out.returncode == 0, out.stderr
    lab = next(line for line in out.stdout.splitlines() if "jupyter lab" in line)
    assert "--ip=127.0.0.1" in lab and "token" not in lab.lower(), lab


def test_site_installs_the_site_pins_then_builds_and_install_alone_does_not(project):
    out = make(project, "install")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not any("requirements-site.txt" in args for args in pip_installs(project))
    out = make(project, "site")
    assert out.returncode == 0, out.stdout + out.stderr
    assert pip_installs(project)[-1] == [
        "--quiet", "--disable-pip-version-check", "-r", "requirements-site.txt"]
    assert calls(project)[-1]["args"] == ["tools/build_site.py"]
    # A second make site installs nothing more (the stamp), and builds again.
    before = len(pip_installs(project))
    assert make(project, "site").returncode == 0
    assert len(pip_installs(project)) == before
