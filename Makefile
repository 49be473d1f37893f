# Two commands from a fresh clone: `make run` trains the main job, `make test` runs the tests.
#
# Both first set up .venv, a virtualenv made with --system-site-packages: packages the interpreter
# already has are used as they are and only what is missing is installed into .venv (the CPU torch
# pin first, then this checkout, editable, with its dev tools), so `lightning-rl` and `python -m
# lightning_rl` in .venv always run this checkout. The setup runs again only when pyproject.toml
# changes (the .venv/.installed stamp); otherwise both commands start at once.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extra pytest arguments, e.g. make test PYTEST_ARGS="tests/test_cli.py -x"
PYTEST_ARGS ?=

.PHONY: setup run test check docs docs-serve docs-check

setup: $(STAMP)

# torch: the CPU build where the machine's index offers it; pyproject's range installs a build otherwise.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0 || true
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/lightning-rl fit --config configs/ppo/cartpole.yaml

# -q once: a second one from PYTEST_ARGS would hide pytest's summary line.
test: $(STAMP)
	$(BIN)/python -m pytest $(if $(filter -q,$(PYTEST_ARGS)),,-q) $(PYTEST_ARGS)

check: $(STAMP)
	$(BIN)/python -m ruff check lightning_rl tests
	$(BIN)/python -m mypy

# The documentation site: `make docs` builds it into site/ in strict mode (a broken link, a missing
# reference, a docstring warning or a public name without an API entry fails the build);
# `make docs-serve` previews it on http://127.0.0.1:8000 and rebuilds on changes; `make docs-check`
# loads the built pages in headless Chromium (Debian's chromium package), offline, and saves
# screenshots to site-screenshots/.
DOCS_ENV := DISABLE_MKDOCS_2_WARNING=true NO_MKDOCS_2_WARNING=1

docs: $(STAMP)
	$(DOCS_ENV) $(BIN)/python -m mkdocs build --strict

docs-serve: $(STAMP)
	$(DOCS_ENV) $(BIN)/python -m mkdocs serve --dev-addr 127.0.0.1:8000

docs-check: docs
	$(BIN)/python docs/_scripts/check_browser.py
