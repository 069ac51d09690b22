# Two commands do all set-up: `make lab` and `make test`. Each creates .venv if missing and
# installs requirements.txt (exact pins) plus `helpers` in editable mode. `make` lists targets.

# bash, and a recipe fails when any command of a pipe fails (pip's status is not lost in a filter).
SHELL := bash
.SHELLFLAGS := -e -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

PYTHON ?= python3
# The Python versions the pins install on (Colab runs 3.13); pyproject's requires-python agrees.
PYTHON_VERSIONS := 3.11 3.12 3.13
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
PORT ?= 8888
# PyPI's Linux torch is the CUDA build (several GB); for the CPU-only one, on a fresh .venv:
#   make lab TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
COLAB_WIDGETS := $(VENV)/ipywidgets7

.PHONY: help install lab test test-unit test-colab-widgets test-notebooks \
	test-notebooks-simulated test-notebooks-machines test-browser bench notebooks site \
	translations clean

help: ## this list
	@echo "Set-up is two commands: make lab, make test (each creates .venv and installs first)."
	@awk -F ':.*## ' '/^[a-z-]+:.*## /{printf "  make %-26s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))
	@echo "Variables: PYTHON=python3.12  PORT=8890  TORCH_INDEX=<CPU wheel index>  NOTEBOOKS=<files>"
	@echo "Supported Python: $(firstword $(PYTHON_VERSIONS))-$(lastword $(PYTHON_VERSIONS)). More: README.md, tests/README.md"

# ------------------------------------------------------------------------------ install

# $(call check_python,INTERPRETER): fail, with one line naming the version found and the range,
# unless INTERPRETER is a supported Python.
define check_python
v=$$($(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
	|| { echo "error: cannot run '$(1)': install Python $(firstword $(PYTHON_VERSIONS))-$(lastword $(PYTHON_VERSIONS)) and pass PYTHON=/path/to/python3" >&2; exit 1; }; \
case " $(PYTHON_VERSIONS) " in *" $$v "*) ;; *) \
	echo "error: $(1) is Python $$v; this project needs Python $(firstword $(PYTHON_VERSIONS))-$(lastword $(PYTHON_VERSIONS)): run$(if $(filter $(PY),$(1)), make clean and then,) e.g. make $(or $(MAKECMDGOALS),install) PYTHON=python3.12" >&2; \
	exit 1;; esac
endef

# $(call pip,ARGS): pip install, showing pip's output less one harmless warning of some pip
# configurations; pipefail keeps pip's exit status, so a failed install stops make there.
pip = echo "pip install $(1)"; set -o pipefail; \
	$(PY) -m pip install --quiet --disable-pip-version-check $(1) 2>&1 \
	| { grep -v "is ignored: it is neither a file nor a directory" || true; }
TORCH_PIN := $(shell grep -E '^torch==' requirements.txt)

install: $(STAMP) ## create .venv if missing, install the pins and helpers

$(STAMP): requirements.txt pyproject.toml
	@if $(PY) -m pip --version >/dev/null 2>&1; then $(call check_python,$(PY)); \
	else $(call check_python,$(PYTHON)); rm -rf $(VENV); \
		echo "creating $(VENV) with $(PYTHON) (Python $$v)"; $(PYTHON) -m venv $(VENV); fi
	@$(if $(TORCH_INDEX),$(call pip,$(TORCH_PIN) --index-url $(TORCH_INDEX)))
	@$(call pip,-r requirements.txt)
	@$(call pip,--no-deps --no-build-isolation -e .)
	$(PY) -c "import torch, ipywidgets, jupyterlab, nbval, helpers; print('installed: torch', torch.__version__, '| ipywidgets', ipywidgets.__version__, '| jupyterlab', jupyterlab.__version__)"
	@touch $@

# ------------------------------------------------------------------------------ use

# JupyterLab on 127.0.0.1 only, in notebooks/, token authentication left on (Jupyter prints
# the URL with its token).
lab: install ## open JupyterLab on 127.0.0.1 (token auth on; PORT=8888)
	cd notebooks && ../$(PY) -m jupyter lab --ip=127.0.0.1 --port=$(PORT) --no-browser \
		$(if $(filter 0,$(shell id -u)),--allow-root,)

# Re-execute every notebook in place, storing outputs (run after editing); the widget state goes
# to notebooks/widget_state/ beside them (tools/widget_state.py says why), timestamps are dropped.
notebooks: install ## re-execute notebooks in place, storing outputs
	$(PY) -m jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=300 $(NOTEBOOKS)
	$(PY) tools/widget_state.py split $(NOTEBOOKS)

# Benchmarks print tables of medians and ratios; `make bench BENCH_ARGS=--write-results` also
# writes them to benchmarks/RESULTS.md (see `python -m benchmarks --help` for the options).
BENCH_ARGS ?=
bench: install ## benchmarks (BENCH_ARGS=--write-results)
	$(PY) -m benchmarks $(BENCH_ARGS)

# The course site: site/ (rebuilt each time) is Sphinx + MyST-NB + sphinx-book-theme over the
# notebooks' stored outputs, nothing run, views still movable (tools/build_site.py). Its Python
# packages are requirements-site.txt's (installed here only); its maths typesetter (KaTeX, run
# at build time) and CJK font are package-lock.json's, from npm at build time only (npm ci, again
# only when the lockfile changes), as are the audits test-browser and bench run on it (axe-core, Lighthouse). The pages
# load nothing remote.
SITE_STAMP := $(VENV)/.site-installed
$(SITE_STAMP): requirements-site.txt $(STAMP)
	@$(call pip,-r requirements-site.txt)
	@touch $@

node_modules/.package-lock.json: package.json package-lock.json
	@command -v npm >/dev/null || { echo "error: make site needs Node.js and npm" >&2; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

site: install $(SITE_STAMP) node_modules/.package-lock.json ## course site in site/ (needs npm)
	$(PY) tools/build_site.py

# The Chinese edition (tools/i18n.py): after an English edit of a notebook's prose, docs/*.md or
# tools/site_text.py, one command puts the new or changed messages into their catalogues
# (locales/zh_CN/LC_MESSAGES/*.po: new ones empty, changed ones fuzzy, via sphinx-intl) and
# rewrites notebooks/zh/; `python tools/i18n.py check` then lists what to translate (make test fails
# until every message is).
translations: install $(SITE_STAMP) ## update the Chinese catalogues and notebooks/zh/
	$(PY) tools/i18n.py update

clean: ## remove .venv and caches
	rm -rf $(VENV) .pytest_cache .hypothesis

# ------------------------------------------------------------------------------ tests

# Every stage runs, even after one failed; a summary at the end lists each stage, passed or
# FAILED, its time and the command that re-runs it; make exits non-zero if any failed.
TEST_STAGES := test-unit test-colab-widgets test-notebooks test-notebooks-simulated test-browser
test: install ## every test stage (all run; summary at the end)
	@summary=""; failed=0; \
	for stage in $(TEST_STAGES); do \
		echo; echo "==> make $$stage"; start=$$SECONDS; \
		if $(MAKE) --no-print-directory $$stage; then result=passed; \
		else result=FAILED; failed=$$((failed + 1)); fi; \
		summary="$$summary$$(printf '  %-6s %5d s   make %s' $$result $$((SECONDS - start)) $$stage)"$$'\n'; \
	done; \
	echo; echo "==> make test: summary (re-run a stage with the command shown)"; \
	printf '%s' "$$summary"; \
	echo "stages: $$(( $(words $(TEST_STAGES)) - failed )) passed, $$failed failed"; \
	test $$failed -eq 0

test-unit: install ## helpers, widgets, notebook meta, Makefile
	$(PY) -m pytest tests --ignore=tests/browser -q

$(COLAB_WIDGETS)/.installed: requirements-colab-widgets.txt $(STAMP)
	@$(call pip,--no-deps --target $(COLAB_WIDGETS) -r requirements-colab-widgets.txt)
	@touch $@

test-colab-widgets: $(COLAB_WIDGETS)/.installed ## widget tests under Colab's ipywidgets 7
	PYTHONPATH=$(COLAB_WIDGETS) EXPECT_IPYWIDGETS=7 $(PY) -m pytest tests/test_widgets_*.py -q -p no:cacheprovider -W ignore::DeprecationWarning

# Strict nbval: every stored output must match a fresh run (tests/README.md: portable outputs).
NBVAL = $(PY) -m pytest --nbval --nbval-current-env \
	--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -q
# The simulated machines: baseline x86 kernels (no AVX) and one thread, as `make test` runs;
# then AVX2 with 4 threads, and AVX-512 (where the CPU has it; else PyTorch's best level).
SIMULATED_MACHINE := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 OMP_NUM_THREADS=1
OTHER_MACHINES := "ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 OMP_NUM_THREADS=4" \
	"ATEN_CPU_CAPABILITY=avx512"

test-notebooks: install ## strict nbval, this machine
	$(NBVAL) $(NOTEBOOKS)

test-notebooks-simulated: install ## strict nbval, simulated baseline CPU, 1 thread
	$(SIMULATED_MACHINE) $(NBVAL) $(NOTEBOOKS)

test-notebooks-machines: install ## strict nbval under all three simulated CPUs
	@failed=0; for machine in "$(SIMULATED_MACHINE)" $(OTHER_MACHINES); do \
		echo "==> $$machine"; env $$machine $(NBVAL) $(NOTEBOOKS) || failed=1; done; \
	test $$failed -eq 0

test-browser: install site ## Chromium: JupyterLab views, the static site, view.js
	$(PY) -m pytest tests/browser -q -rs
