# The two commands the README opens with: `make run` and `make test`.
# Both create the virtualenv on first use, pinned by constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# A third-party controller plugin the tests load through its entry point.
SAMPLE_PLUGIN := tests/plugins/overseer-sample-plugin
# The editable install is setuptools' strict mode (EDITABLE): a link tree
# (build/__editable__.*) named by a plain path in a .pth file. The default mode for this
# flat layout is an import hook mypy cannot follow (a plugin checked with mypy in another
# directory would not find `manager`), and the repository root on sys.path would make
# tests/, bench/ and e2e/ importable everywhere. Set here, not in pyproject.toml's
# [tool.distutils], which setuptools calls experimental on every install. The tree links
# each module: this list changes when a module is added or removed, and then the install
# is repeated.
EDITABLE := --config-settings editable_mode=strict
MODULES := $(VENV)/.modules
$(shell mkdir -p $(VENV) && find manager controllers apiserver -name '*.py' -o -name py.typed \
	| LC_ALL=C sort > $(MODULES).new \
	&& (cmp -s $(MODULES).new $(MODULES) || mv $(MODULES).new $(MODULES)); rm -f $(MODULES).new)

.PHONY: run test lint typecheck unit venv clean bench e2e-kind chaos test-tools

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt $(SAMPLE_PLUGIN)/pyproject.toml $(MODULES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	@# the distribution was called `overseer` before it became kube-overseer: its
	@# metadata (in the venv, and in the tree, where `python -m` finds it) must go
	$(BIN)/python -m pip uninstall --quiet --yes overseer
	rm -rf overseer.egg-info
	$(BIN)/python -m pip install --quiet -c constraints.txt $(EDITABLE) -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps -e $(SAMPLE_PLUGIN)
	touch $(STAMP)

# the sample plugin the tests install is off (tests/plugins/make-run.yaml)
RUN_CONFIG := tests/plugins/make-run.yaml

run: $(STAMP)
	$(BIN)/overseer run --embedded --demo --config $(RUN_CONFIG)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The second run is a plugin author's view: in the sample plugin's directory, with no
# MYPYPATH, mypy finds `manager` through the editable install alone.
typecheck: $(STAMP)
	$(BIN)/mypy manager controllers apiserver
	cd $(SAMPLE_PLUGIN) && env -u MYPYPATH $(abspath $(BIN))/mypy --strict \
		--cache-dir $(abspath .mypy_cache)/sample-plugin overseer_sample_plugin

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

test: lint typecheck test-tools
	$(BIN)/python -m pytest -q

# Some tests use real tools: Debian's `prometheus` package (prometheus, promtool: the
# alert unit tests and the dashboard queries) and `chromium` (the /statusz HTML page).
# Run as root where apt-get exists (CI containers), this installs the missing ones;
# anywhere else it installs nothing and says so, and those tests skip with the reason.
# A failed install does not fail `make test` either: the tests skip.
TOOLS := prometheus promtool chromium
test-tools:
	@missing=""; for tool in $(TOOLS); do command -v $$tool >/dev/null 2>&1 \
		|| missing="$$missing $$tool"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "test-tools: missing$$missing: apt-get install prometheus chromium"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			prometheus chromium >/dev/null) \
			|| echo "test-tools: apt-get failed: the tests needing$$missing will skip"; \
	else \
		echo "test-tools: missing$$missing (installing needs root and apt-get): those tests skip"; \
	fi

# The benchmarks' peers (kopf) are never a runtime or test dependency: installed here.
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt $(EDITABLE) -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench all

# The e2e suite against a kind cluster running deploy/ (skips without docker or kind).
e2e-kind: $(STAMP)
	PYTHON=$(abspath $(BIN))/python bash e2e/kind.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info build

# The chaos scenarios (leader and sharding), three runs each and one more with the write
# fence switched off (the proof that a scenario tests the fence), and their tables; then
# the webhook scenarios, three runs each and one more with their test-only switch.
chaos: $(STAMP)
	$(BIN)/python -m e2e.chaos --runs 3 --fence-off-runs 1 --report e2e/CHAOS.md
	$(BIN)/python -m e2e.webhookchaos --runs 3 --leader-only-runs 1 --one-shot-runs 1 --no-drain-runs 1
