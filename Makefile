# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint clean fuzz fuzz-atheris

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

# Long fuzzing, outside `make test` (where tests/fuzz runs a few seconds' worth):
# the hypothesis tests with FUZZ_EXAMPLES examples each, and coverage-guided
# fuzzing with atheris for FUZZ_SECONDS per target; corpora and crashes are kept
# in test-artefacts/fuzz/.
FUZZ_EXAMPLES ?= 20000
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := reader payloads membership seeds robots html urls

fuzz: setup
	UBIPY_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest tests/fuzz -q

fuzz-atheris: setup
	$(BIN)/pip install --quiet 'atheris>=2.3'
	for t in $(FUZZ_TARGETS); do \
		mkdir -p test-artefacts/fuzz/$$t && \
		$(BIN)/python -m tests.fuzz.atheris_targets $$t -max_total_time=$(FUZZ_SECONDS) \
			-rss_limit_mb=2048 -artifact_prefix=test-artefacts/fuzz/$$t- \
			test-artefacts/fuzz/$$t || exit 1; \
	done
