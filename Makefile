# `make run` and `make test` are the two commands of the README; both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CI_STORE := build/ci.sqlite
BASELINE := benchmarks/ci-baseline

.PHONY: run test pytest regression baseline

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/adh run quick

# The tests, then the regression check against the committed baseline.
test: pytest regression

pytest: $(BIN)/.installed
	$(BIN)/python -m pytest -q

# The `ci` suite against benchmarks/ci-baseline: memory within 2 % and test accuracy within
# 0.5 points, strictly; step time only beyond 1.5x and significant (Mann-Whitney U), contended
# runs left out, so that a shared 2-core machine does not raise false alarms. For a precise
# time verdict, measure A/B in one job: adh compare --against main
regression: $(BIN)/.installed
	rm -f $(CI_STORE)
	$(BIN)/adh run ci --store $(CI_STORE) --no-progress
	$(BIN)/adh compare $(BASELINE) '$(CI_STORE)#ci' --min-factor 1.5

# Refresh the committed baseline after an intended change (then commit benchmarks/ci-baseline).
baseline: $(BIN)/.installed
	rm -rf $(CI_STORE) $(BASELINE)
	$(BIN)/adh run ci --store $(CI_STORE) --no-progress
	$(BIN)/adh results --store $(CI_STORE) --export $(BASELINE)
