# Both front-door commands bootstrap .venv themselves: a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test chromium bench bench-harvest bench-trends bench-forecast bench-concurrency bench-shards lint clean

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

test: $(VENV)/.dev chromium
	.ci/test-deps
	$(BIN)/python -m pytest -q

# The report's tests open it in Debian's chromium; installed once (apt-get, as root) if missing.
chromium:
	.ci/chromium

bench: bench-harvest bench-trends bench-forecast bench-concurrency bench-shards

bench-harvest: $(VENV)/.bench
	$(BIN)/python bench/harvest.py

bench-trends: $(VENV)/.bench
	$(BIN)/python bench/trends.py

bench-forecast: $(VENV)/.bench
	$(BIN)/python bench/forecast.py

bench-concurrency: $(VENV)/.dev
	$(BIN)/python bench/concurrency.py

# Needs Debian's postgresql-15 (.ci/test-deps installs it): the bench starts a throwaway cluster.
bench-shards: $(VENV)/.dev
	.ci/test-deps
	$(BIN)/python bench/shards.py

lint: $(VENV)/.dev
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) data .pytest_cache
