# `make test` builds .venv, installs everything and runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: install test unit integration bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,infra,local]'
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -q -p no:cacheprovider

unit: install
	$(PY) -m pytest -q tests/unit

integration: install
	$(PY) -m pytest -q tests/integration

bench: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/claim_throughput.py

clean:
	rm -rf $(VENV) .scheduler layers/build cdk.out node_modules
