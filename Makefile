# perftune: `make demo` and `make test` work on a fresh machine with Python 3.11.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-all lint bench-overhead clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# Tune the bundled C example (gcc): block size, unrolling and loop order of a matrix multiply,
# stored in the default SQLite store ./perftune.db.
demo: $(STAMP)
	$(BIN)/perftune run examples/c_matmul/task.toml --budget 40 --seed 1 --name demo-$$(date +%Y%m%d-%H%M%S)

# The whole suite except GPU tests. PostgreSQL tests start a throwaway server when its binaries exist.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not gpu" -q -p no:cacheprovider

# ruff and mypy come with the test extra; both read their settings from pyproject.toml (mypy: strict on
# space, search, drive and store, plain on the rest of src/perftune). tests/test_lint.py runs the same.
lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

bench-overhead: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
