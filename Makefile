# The two commands a new machine needs: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SRC    := mignurse tests benchmarks scripts whitelist.py

.PHONY: demo test deep lint style checks unit faults bench screenshots venv clean mutants

# uv fetches and installs the ~110 packages in parallel: a minute faster than pip on a fresh
# machine. Where uv cannot be installed or cannot install, pip does the same install. uv does
# not byte-compile them all (45 CPU-s): each module is compiled when it is first imported, and
# the commands below let Python keep that bytecode even where PYTHONDONTWRITEBYTECODE is set.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	($(PIP) uv && $(BIN)/uv pip install --quiet --python $(BIN)/python \
	  -e '.[test,lint]') \
	  || ($(PIP) --upgrade pip && $(PIP) -e '.[test,lint]')
	touch $(STAMP)

venv: $(STAMP)

## The app on the built-in simulated cluster (SCENARIO=name SPEED=x to change it; CLUSTERS=4:
## several simulated clusters in one view).
demo: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/mignurse demo $(if $(CLUSTERS),--clusters $(CLUSTERS),--scenario $(or $(SCENARIO),dcgm-repair-loop)) --speed $(or $(SPEED),10)

## Lint, types, layer contracts, dead code and the whole test suite on every core
## (WORKERS=n to choose the number of pytest workers). The type, layer and dead-code checks
## keep one core busy for a minute: they run beside the tests, and print when the tests end.
test: style
	@echo "types, layer contracts and dead code: checked beside the tests, reported after them"
	@$(MAKE) --no-print-directory checks > $(VENV)/checks.log 2>&1 & checks=$$!; \
	  $(MAKE) --no-print-directory unit; tests=$$?; \
	  wait $$checks; checked=$$?; cat $(VENV)/checks.log; \
	  test $$tests -eq 0 -a $$checked -eq 0

lint: style checks

style: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

checks: $(STAMP)
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture

# Three workers per core: many tests wait on a simulated cluster, a subprocess or a stand-in
# server rather than compute; with two per core the cores stood idle 14% of the run, with
# three 7% (make test on 2 cores: 9:27 and 8:59).
WORKERS ?= $(shell $(PYTHON) -c "import os; print(3 * len(os.sched_getaffinity(0)))")

# The tests start the CLI, the node stand-ins and the workers as new Python processes by the
# hundred: byte-compile the package once, and let each process keep what it compiles (an
# environment that sets PYTHONDONTWRITEBYTECODE would make every one of them compile again).
# One collection first compiles the dependencies the tests import and pytest's rewritten test
# modules, so the workers do not all compile the same files at once; its errors, if any, are
# the test run's own and reported there.
unit: $(STAMP)
	$(BIN)/python -m compileall -q mignurse
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest $(TIER) --collect-only -q --snapshot-warn-unused > /dev/null || true
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest $(TIER) -n $(WORKERS) --dist loadgroup

## The deep tier: checks at full size that take minutes of CPU each (the secrets corpus masked
## both ways and twice, the 5,000-node cluster read by kubectl, every screen scanned for
## escapes, every runbook interrupted); CI runs it after `make test`.
deep:
	@$(MAKE) --no-print-directory unit TIER="-m deep"

## Mutation testing of mignurse/runner/, or PACKAGE=diagnose (not part of `make test`;
## MUTANTS="--module lock.py" to narrow it, MUTANTS=--again for the last survivors,
## MUTANTS=--summary for the kept results). coverage.py maps lines to tests.
mutants: $(STAMP)
	$(BIN)/python -c "import coverage" 2>/dev/null || $(PIP) "coverage>=7.6"
	nice -n 10 $(BIN)/python scripts/mutants.py --package $(or $(PACKAGE),runner) $(MUTANTS)

## The runbook fault trials, the whole matrix (300 trials, about half an hour on two cores;
## not part of `make test`): every trial must end known-good or instruction-works. Prints the
## table of runbook × fault → trials per class and writes it, with the failing trials' logs,
## to build/fault-trials.md (tests/hostile/faulttable.py prints it again).
faults: $(STAMP)  # FAULT_WORKERS=n to choose the number of workers (2)
	PYTHONDONTWRITEBYTECODE= nice -n 10 $(BIN)/pytest -m slow -n $(or $(FAULT_WORKERS),2) \
	  -p no:cacheprovider -q tests/hostile/fault_trials_test.py

## Performance figures (not part of `make test`): every benchmark in turn, then one table of
## each figure beside its target and the peer measured in the same run (also build/bench.md).
## BENCH=bench_app,bench_cli for some of them.
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py --markdown build/bench.md $(if $(BENCH),--only $(BENCH))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info

## Screens of the app on the demo scenarios, into screenshots/ (SVG and PNG: rsvg-convert).
screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

## The real control plane from its Go modules (not part of `make test`; needs Go and the Go
## module proxy): kube-apiserver, kube-controller-manager, kube-scheduler, etcd, Karpenter
## with its kwok provider and kwok, into ~/.cache/mignurse-upstream (MIGNURSE_UPSTREAM_CACHE
## to move it). A second run finds the binaries and builds nothing. docs/upstream.md.
.PHONY: upstream
upstream:
	scripts/upstream-build.sh

## The real control plane tier (not part of `make test`; needs `make upstream` first, and is
## skipped with that reason without it): etcd, kube-apiserver and kube-controller-manager on
## 127.0.0.1 beside the simulator, the same requests to both (docs/simulator-fidelity.md);
## then the runbooks and diagnose through the CLI against Karpenter v1.9.0 with kwok, on a
## control plane of their own with kube-scheduler (docs/upstream.md).
.PHONY: upstream-test
upstream-test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= nice -n 19 $(BIN)/pytest -p no:cacheprovider -q tests/upstream
