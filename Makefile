# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint clean

$(BIN)/ubipy: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(BIN)/ubipy

demo: setup
	$(BIN)/ubipy demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n 2 --dist loadgroup --cov --cov-report=term:skip-covered -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
