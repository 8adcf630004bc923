# The two commands the README opens with: `make run` and `make test`.
# Both create the virtualenv on first use, pinned by constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# A third-party controller plugin the tests load through its entry point.
SAMPLE_PLUGIN := tests/plugins/overseer-sample-plugin

.PHONY: run test lint typecheck unit venv clean bench e2e-kind chaos

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt $(SAMPLE_PLUGIN)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps -e $(SAMPLE_PLUGIN)
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/overseer run --embedded --demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy manager controllers

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

test: lint typecheck
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench all

# The e2e suite against a kind cluster running deploy/ (skips without docker or kind).
e2e-kind: $(STAMP)
	PYTHON=$(abspath $(BIN))/python bash e2e/kind.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info

# The chaos scenarios, three runs each, and their table (e2e/CHAOS.md).
chaos: $(STAMP)
	$(BIN)/python -m e2e.chaos --runs 3 --report e2e/CHAOS.md
