# Two commands do everything on a fresh machine (see README.md):
#   make demo   - install into .venv, then generate, build, install and run the sample model
#   make test   - install into .venv with the test extras, then run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-unit test-all fuzz lint bench system-deps

demo: $(VENV)/.installed
	$(BIN)/relay2cmake demo --out relay2cmake-demo

# Two workers, one test module each at a time (module fixtures build once): 10 minutes
# instead of 18 on 2 cores, since most steps of a case use one core. Modules in the order
# tests/conftest.py gives (the long ones first), not xdist's (those with the most tests first).
PYTEST_WORKERS ?= -n 2 --dist loadfile --no-loadscope-reorder

test: $(VENV)/.installed-test system-deps
	$(BIN)/ruff check relay2cmake tests tools benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_WORKERS) --durations=25

# The quick loop while editing: naming, planning, arenas, weights, the import graph (seconds).
test-unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests/unit/test_units.py -q

test-all: $(VENV)/.installed-test system-deps
	$(BIN)/python -m pytest $(PYTEST_WORKERS)

# A long fuzzing campaign (CI runs a few fixed cases of each): `gen` on mutated model bytes
# and on random tensor names, the package's .npy reader on mutated files and its kernels on
# random indices (both under ASan + UBSan).
fuzz: $(VENV)/.installed-test
	R2C_FUZZ_EXAMPLES=1000 $(BIN)/python -m pytest -s tests/cli/test_fuzz.py
	R2C_FUZZ_EXAMPLES=1000 $(BIN)/python -m pytest tests/e2e/test_hostile_data.py tests/e2e/test_hostile_names.py -k fuzz

lint: $(VENV)/.installed-test
	$(BIN)/ruff check relay2cmake tests tools benchmarks
	$(BIN)/ruff format --check relay2cmake tests tools benchmarks
	$(BIN)/mypy

# ONNX Runtime, OpenVINO and the packages on the real-model zoo; writes docs/performance.md
# (about two hours on 2 cores; --resume skips the models already measured at this commit).
bench: $(VENV)/.installed-bench system-deps
	$(BIN)/python benchmarks/run.py --resume --report

system-deps:
	@bash tools/install_system_deps.sh

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(VENV)/.installed $@

$(VENV)/.installed-bench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(VENV)/.installed $(VENV)/.installed-test $@
