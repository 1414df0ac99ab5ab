# `make test` builds .venv, installs everything and runs the whole suite.
PYTHON ?= python3
NPM ?= npm
VENV := .venv
PY := $(VENV)/bin/python
LINT_VENV := .venv-lint

.PHONY: install lint test unit integration e2e infra layer synth dev bench bench-quick fuzz clean lint-templates localstack localstack-down

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,infra,local]'
	touch $@

# The CDK CLI (npm package aws-cdk), for `npx cdk synth` and its test.
node_modules/.installed: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund
	touch $@

install: $(VENV)/.installed node_modules/.installed

# The suite includes the template linters (tests/infra/test_infra_lint.py), from their own venv.
test: install $(LINT_VENV)/.installed lint
	$(PY) -m pytest -q -p no:cacheprovider

# ruff (configured in pyproject.toml): lint, complexity and format check; mypy: the type checker
# (functions/ and infra/, configured in pyproject.toml).
lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

unit: install
	$(PY) -m pytest -q tests/unit

integration: install
	$(PY) -m pytest -q tests/integration

e2e: install
	$(PY) -m pytest -q tests/e2e

infra: install
	$(PY) -m pytest -q -p no:cacheprovider tests/infra

# cfn-lint and checkov on the synthesized templates, against infra/lint_baseline.json. The linters
# get a virtualenv of their own: checkov pins boto3 and packaging, which would drag .venv back.
$(LINT_VENV)/.installed: infra/lint-requirements.txt
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install -q --upgrade pip
	$(LINT_VENV)/bin/python -m pip install -q -r infra/lint-requirements.txt
	touch $@

lint-templates: install $(LINT_VENV)/.installed
	$(PY) -m infra.lint --tools-python $(LINT_VENV)/bin/python

# The Lambda dependency layer, built without Docker (pip --platform ... --only-binary).
layer: install
	$(PY) layers/build.py

synth: install
	npx cdk synth --quiet

# The stack deployed on LocalStack, without Docker (README.md, "LocalStack"): LocalStack in a
# virtualenv of a Python >= 3.12 under .localstack/, functions as host processes, this machine's
# PostgreSQL and RabbitMQ. The last line printed is `api: <URL>`.
localstack: install
	@$(PY) -m tests.localstack up

# Destroys the stack, stops LocalStack and every process it started.
localstack-down:
	@$(PY) -m tests.localstack down

# From a fresh clone to a running local scheduler (API on http://127.0.0.1:8080/v1): the light
# install (the `local` extra only; no CDK, no test tools, no npm), as the README's quickstart.
$(VENV)/.installed-local: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[local]'
	touch $@

dev: $(VENV)/.installed-local
	$(VENV)/bin/scheduler local

# Every benchmark side by side (bench-10m's apart); rewrites docs/benchmarks.md (about 30 minutes here).
bench: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/run_all.py

bench-quick: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/run_all.py --quick

# The deployed path simulated here (fan-outs, Lambda's async queue, executor processes) beside
# pgbench running the per-job path's own SQL (a few minutes).
# Ten million stored jobs against ten thousand (bench/ten_million.py): the claim, GET /v1/jobs, a
# job's executions page, the storage per job. Separate from `make bench`: about 10 minutes here, the load most of it.
.PHONY: bench-10m
bench-10m: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/run_all.py --only ten_million

.PHONY: bench-deploy
bench-deploy: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/run_all.py --only deploy

# Schemathesis against the API (1,200 examples): fails on any 5xx.
fuzz: install
	$(PY) bench/fuzz_api.py --examples 1200

clean:
	rm -rf $(VENV) $(LINT_VENV) .scheduler .localstack layers/build cdk.out node_modules
