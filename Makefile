# `make run` and `make test` are the two commands of the README; both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/adh run quick

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q
