# `make run` and `make test` are the two commands of the README; both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test fast lint pytest regression baseline history

# The plugins under plugins/ too, as a user installs a third-party plugin: `make pytest` runs
# their conformance tests. plugins/tinygrad compiles its CPU kernels with clang (apt-get install
# clang; .ci/run installs it), plugins/pytensor its C backend with g++ (likewise). setuptools'
# warning about editable installs, once per package, is silenced: it says nothing about this
# project; pip prints errors only (-qq), not the warnings of a machine's own pip configuration
# (such as local index folders it lacks).
PLUGINS := plugins/template plugins/c-dense plugins/autograd plugins/tinygrad plugins/tensorflow \
	plugins/pytensor
$(BIN)/.installed: pyproject.toml constraints.txt $(addsuffix /pyproject.toml,$(PLUGINS))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip
	@echo "installing autodiff-harness and its plugins into $(VENV) (a few minutes the first time)"
	PYTHONWARNINGS="ignore:Editable installation" \
		$(BIN)/python -m pip install -qq -c constraints.txt -e '.[test,jax]' $(addprefix -e ,$(PLUGINS))
	touch $@

run: $(BIN)/.installed
	$(BIN)/adh run quick

# The linters, the tests, then the regression check against the baseline commit.
test: lint pytest regression

# ruff and mypy as pyproject.toml configures them (pre-commit runs the same).
lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# Two workers (pytest-xdist), a test file each at a time: the Slurm tests' one cluster stays in
# one worker, and a file's module fixtures are built once. Then the tests that measure the
# machine's idleness (marked alone), with nothing beside them.
pytest: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not alone"
	$(BIN)/python -m pytest -q -m alone

# The loop to run while working: every module's tests but the slow ones (end-to-end runs, the
# plugins' conformance kits, measurements), about two minutes on 2 cores.
fast: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m "not slow and not alone" -n 2 --dist loadfile
	$(BIN)/python -m pytest -q -m "alone and not slow"

# The `ci` suite measured at this machine's baseline commit (adh baseline: its entry in
# benchmarks/ci-baselines.toml, else the parent commit) and in the working tree, side by side,
# round by round, on this machine: a baseline measured earlier or elsewhere would carry another
# machine's speed (or another minute's) into the verdict. The baseline's memory and instructions,
# deterministic, as adh baseline --set measured them (benchmarks/ci-baseline-passes.json), where
# this machine and its CPU flags and library versions are those they were measured with.
# Instructions per step (valgrind) within 1 %, memory within 2 % and test accuracy within 0.5
# points, strictly; step time only beyond 1.5x with a paired 95 % interval that excludes 1, so
# that a shared 2-core machine does not raise false alarms. A finer time verdict: adh compare --against REF --rounds 10 --min-factor 1.1
regression: $(BIN)/.installed
	base=$$($(BIN)/adh baseline) && $(BIN)/adh compare --against "$$base" --suite ci --rounds 3 \
		--min-factor 1.5 --count-instructions

# After an intended change (slower, hungrier, less accurate): commit it, then make HEAD this
# machine's baseline (and measure its memory and instructions once), then commit
# benchmarks/ci-baselines.toml and benchmarks/ci-baseline-passes.json.
baseline: $(BIN)/.installed
	$(BIN)/adh baseline --set

# The ci suite at the last 12 commits of main (a worktree each), into results/history.sqlite;
# then the dashboard in site/ (45-70 s a commit on 2 cores, measured over 17 commits).
history: $(BIN)/.installed
	$(BIN)/python scripts/backfill_history.py --commits 12
