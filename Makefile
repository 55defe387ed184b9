# Baton: `make serve` runs it locally, `make test` runs every check. Both set themselves up on a fresh clone.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: help serve test lint types unit integration e2e bench openapi clean

help:
	@echo "make serve    run Baton on http://127.0.0.1:8787 against embedded moto (prints a dev key)"
	@echo "make test     lint, types and every test suite, offline"
	@echo "make bench    cold-start benchmark (ratio to a boto3 baseline), writes bench/report.md"
	@echo "make openapi  regenerate docs/openapi.json"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/baton serve $(ARGS)

test: lint types
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check functions tests bench
	$(BIN)/ruff format --check functions tests bench

types: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

integration: $(STAMP)
	$(BIN)/pytest tests/integration -q

e2e: $(STAMP)
	$(BIN)/pytest tests/e2e -q

bench: $(STAMP)
	$(BIN)/python bench/run.py

openapi: $(STAMP)
	$(BIN)/python -m baton.api.openapi_export docs/openapi.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache cdk.out
