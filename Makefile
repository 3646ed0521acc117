# The two commands a newcomer runs: `make demo` and `make test`. Each installs what it needs
# into a local virtualenv (.venv) first.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test bench lint install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The example app on SQLite: migrate its database, then serve it on http://127.0.0.1:5000
# together with its worker (`flask solidq work`). Ctrl-C stops both.
demo: install
	$(BIN)/python -m example_app.demo

# The whole suite: SQLite always; PostgreSQL and MariaDB/MySQL when SOLIDQ_TEST_POSTGRES_URL
# and SOLIDQ_TEST_MYSQL_URL are set (see .ci/run).
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/enqueue.py

lint: install
	$(BIN)/ruff check flask_solidq tests bench example_app

clean:
	rm -rf $(VENV) build dist *.egg-info
