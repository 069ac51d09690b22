# Two commands do all set-up: `make lab` and `make test`. Each creates .venv if missing and
# installs requirements.txt (exact pins) plus `helpers` in editable mode.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
PORT ?= 8888

.PHONY: install lab test test-unit test-colab-widgets test-notebooks test-browser bench notebooks clean
COLAB_WIDGETS := $(VENV)/ipywidgets7

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	$(PY) -c "import torch, ipywidgets, jupyterlab, nbval, helpers; print('installed: torch', torch.__version__, '| ipywidgets', ipywidgets.__version__, '| jupyterlab', jupyterlab.__version__)"
	@touch $@

# JupyterLab on 127.0.0.1 only, in notebooks/, token authentication left on (Jupyter prints
# the URL with its token).
lab: install
	cd notebooks && ../$(PY) -m jupyter lab --ip=127.0.0.1 --port=$(PORT) --no-browser \
		$(if $(filter 0,$(shell id -u)),--allow-root,)

# Everything: unit tests, the widget tests again under Colab's ipywidgets 7, strict nbval over
# every notebook, then the browser test.
test: install
	$(PY) -m pytest tests --ignore=tests/browser -q
	$(MAKE) --no-print-directory test-colab-widgets
	$(MAKE) --no-print-directory test-notebooks
	$(MAKE) --no-print-directory test-browser

test-unit: install
	$(PY) -m pytest tests --ignore=tests/browser -q

$(COLAB_WIDGETS)/.installed: requirements-colab-widgets.txt $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --target $(COLAB_WIDGETS) -r requirements-colab-widgets.txt 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	@touch $@

test-colab-widgets: $(COLAB_WIDGETS)/.installed
	PYTHONPATH=$(COLAB_WIDGETS) EXPECT_IPYWIDGETS=7 $(PY) -m pytest tests/test_widgets_*.py -q -p no:cacheprovider -W ignore::DeprecationWarning

test-notebooks: install
	$(PY) -m pytest --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider $(NOTEBOOKS) -q

test-browser: install
	$(PY) -m pytest tests/browser -q -rs

# Benchmarks print tables of medians and ratios; `make bench BENCH_ARGS=--write-results` also
# writes them to benchmarks/RESULTS.md (see `python -m benchmarks --help` for the options).
BENCH_ARGS ?=
bench: install
	$(PY) -m benchmarks $(BENCH_ARGS)

# Re-execute every notebook in place, storing outputs and widget state (run after editing).
notebooks: install
	$(PY) -m jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=300 $(NOTEBOOKS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
