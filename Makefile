# Both front-door commands bootstrap .venv themselves: a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The gates' commands (tests/test_gates.py swaps them to check that a failing gate fails make).
RUFF = $(BIN)/ruff
MYPY = $(BIN)/mypy
PYTEST = $(BIN)/python -m pytest

.PHONY: demo test chromium bench bench-harvest bench-trends bench-forecast bench-concurrency bench-directory bench-anomalies bench-pacing bench-scale bench-shards lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(VENV)/.base $@

$(VENV)/.bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $(VENV)/.base $(VENV)/.dev $@

demo: $(VENV)/.base
	$(BIN)/botstats demo

# The gates first (a failing gate stops make before the suite; `make -k test` runs both), then
# the suite. CI (.ci/run) runs exactly this.
test: $(VENV)/.dev lint chromium
	.ci/test-deps
	$(PYTEST) -q

# The report's tests open it in Debian's chromium; installed once (apt-get, as root) if missing.
chromium:
	.ci/chromium

bench: bench-harvest bench-trends bench-forecast bench-concurrency bench-anomalies bench-pacing bench-shards

bench-harvest: $(VENV)/.bench
	$(BIN)/python bench/harvest.py

bench-trends: $(VENV)/.bench
	$(BIN)/python bench/trends.py

bench-forecast: $(VENV)/.bench
	$(BIN)/python bench/forecast.py

bench-concurrency: $(VENV)/.dev
	$(BIN)/python bench/concurrency.py

bench-directory: $(VENV)/.dev
	$(BIN)/python bench/directory.py

bench-anomalies: $(VENV)/.dev
	$(BIN)/python bench/anomalies.py

bench-pacing: $(VENV)/.dev
	$(BIN)/python bench/pacing.py

bench-scale: $(VENV)/.dev
	$(BIN)/python bench/scale.py

# Needs Debian's postgresql-15 (.ci/test-deps installs it): the bench starts a throwaway cluster.
bench-shards: $(VENV)/.dev
	.ci/test-deps
	$(BIN)/python bench/shards.py

# ruff over the repository, mypy over the package (its settings: pyproject.toml). One command a
# line, so each one's exit code stops make. A function of the package takes at most five
# arguments (ruff's PLR0913): what travels together is one object. Tests (fixtures) and benches
# (their knobs) are not held to it.
lint: $(VENV)/.dev
	$(RUFF) check .
	$(RUFF) check --select PLR0913 pipeline
	$(MYPY)

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache .mypy_cache
