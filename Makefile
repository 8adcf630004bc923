# The two commands the README opens with: `make run` and `make test`.
# Both create the virtualenv on first use, pinned by constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit venv clean bench

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/overseer apiserver --demo

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

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
