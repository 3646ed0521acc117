# The two commands a newcomer runs: `make demo` and `make test`. Each installs what it needs
# into a local virtualenv (.venv) first: the demo only flask-solidq and its dependencies, the
# tests also the database drivers, the test tools and the linters (the `dev` extra).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
TEST_PROCESSES ?= 2
PORT ?= 5000

.PHONY: demo test bench lint install docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(BIN)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(BIN)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The example app on SQLite: take the port, migrate its database, then serve it on
# http://127.0.0.1:$(PORT) together with its worker (`flask solidq work`). Ctrl-C stops both.
# A port in use says so and exits non-zero: `make demo PORT=5001` picks another.
demo: $(BIN)/.installed-demo
	$(BIN)/python -m example_app.demo --port $(PORT)

# The whole suite: SQLite always; PostgreSQL and MariaDB/MySQL when SOLIDQ_TEST_POSTGRES_URL
# and SOLIDQ_TEST_MYSQL_URL are set (see .ci/run). In $(TEST_PROCESSES) pytest processes
# (pytest-xdist), a test module's tests together in one of them: most tests wait on worker
# processes and servers, and each session works in scratch databases of its own.
test: install
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

# The documentation site (docs/, Sphinx with MyST) into docs/_build/html; a warning fails the
# build, so a broken link, a heading it can't find or an undocumented config key stops CI.
$(BIN)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $@

docs: $(BIN)/.installed-docs
	$(BIN)/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html

bench: install
	$(BIN)/python bench/enqueue.py

# Ruff, mypy in strict mode on flask_solidq (its settings: [tool.mypy] in pyproject.toml), and
# import-linter on the package's layers ([tool.importlinter]).
lint: install
	$(BIN)/ruff check flask_solidq tests bench example_app
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build dist *.egg-info docs/_build
