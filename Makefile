# VoiceIDE conductor — the commands a developer and CI use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One install stamp per need: running the stack needs the package alone; lint adds the dev tools;
# tests and synth add the CDK toolchain (hundreds of MB). Each re-runs when pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
ALL_STAMP := $(VENV)/.installed-all
PORT ?= 8080
HOST ?= 127.0.0.1

.PHONY: run test lint format schema openapi synth lock bench bench-deployed capacity load eval-identifiers clean

$(BIN)/python:
	@echo "==> creating the virtualenv in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --progress-bar off pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@echo "==> installing the conductor, the local stack and the client stub"
	$(BIN)/pip install --progress-bar off -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	@echo "==> installing the conductor with the test and lint tools"
	$(BIN)/pip install --progress-bar off -e '.[dev]'
	touch $@ $(RUN_STAMP)

$(ALL_STAMP): pyproject.toml | $(BIN)/python
	@echo "==> installing the conductor with the test tools and the CDK toolchain (a few hundred MB)"
	$(BIN)/pip install --progress-bar off -e '.[dev,cdk]'
	touch $@ $(DEV_STAMP) $(RUN_STAMP)

## Run the whole conductor locally (DynamoDB, Bedrock and API Gateway on loopback; no AWS account).
run: $(RUN_STAMP)
	$(BIN)/voiceide-conductor local --host $(HOST) --port $(PORT)

## The test suite (core, handlers, local stack, client stub, end-to-end, infrastructure), on every
## core: each worker runs whole files, so a module's stack or browser is started once, by one worker.
## PYTEST_WORKERS=0 runs it in this process alone.
PYTEST_WORKERS ?= auto
test: $(ALL_STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

## Style, types (mypy, strict on the shared library: pyproject.toml [tool.mypy]) and dead code
## (vulture: [tool.vulture], its reviewed exceptions in .ci/vulture_allowlist.py).
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/vulture

format: $(DEV_STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## Regenerate the protocol's JSON Schema (schema/voiceide-event.schema.json).
schema: $(RUN_STAMP)
	$(BIN)/python -m shared.wire.schema_export

## Regenerate the sessions API's OpenAPI 3.1 document (docs/openapi.json) from the sessions Lambda.
openapi: $(RUN_STAMP)
	$(BIN)/python -m lambdas.openapi_export

## Synthesize the CloudFormation templates of every stage into cdk.out/ (no AWS account needed).
## prod keeps data, so it synthesizes only with someone to alarm and a verified SES sender, which cdk.json
## leaves to the deploying operator: to inspect, these example.com placeholders (docs/deploying.md).
SYNTH_PROD_ALARM_EMAIL ?= alarms@example.com
SYNTH_PROD_SES_FROM_EMAIL ?= no-reply@example.com
synth: $(ALL_STAMP)
	npx --yes aws-cdk@2 synth -c stage=dev --quiet
	npx --yes aws-cdk@2 synth -c stage=prod --quiet -c stages.prod.alarm_email=$(SYNTH_PROD_ALARM_EMAIL) \
		-c stages.prod.cognito.ses_from_email=$(SYNTH_PROD_SES_FROM_EMAIL)

## Lock the Lambda layer's dependencies: lambdas/requirements.txt (ranges) -> lambdas/requirements.lock
## (exact versions with hashes, resolved for the Lambda's platform: CPython 3.13 on Linux/aarch64).
## Takes the newest versions the ranges allow; LOCK_UPGRADE= keeps the current pins where they still fit.
LOCK_UPGRADE ?= --upgrade
lock: $(DEV_STAMP)
	$(BIN)/uv pip compile lambdas/requirements.txt $(LOCK_UPGRADE) --generate-hashes --only-binary :all: \
		--python-platform aarch64-manylinux_2_28 --python-version 3.13 --no-python-downloads \
		--output-file lambdas/requirements.lock >/dev/null

## Benchmarks: figures printed, nothing asserted (about 13 minutes). BENCH_ARGS=--quick for a short run;
## CONDUCTOR_LOCAL_MODEL_PACE sets the paced model (e.g. 250:120 = first token ms : tokens per s).
BENCH_ARGS ?=
bench: $(RUN_STAMP)
	$(BIN)/python benchmarks/turn_latency.py $(BENCH_ARGS)

## What a person on a phone would feel per stage, as deployed: the local stack with AWS's latencies
## (benchmarks/aws_latencies.py) put in, speculation off and on (about 5 minutes; BENCH_ARGS=--quick: 2).
bench-deployed: $(RUN_STAMP)
	$(BIN)/python benchmarks/turn_latency.py --as-deployed $(BENCH_ARGS)

## How many people speaking at once each stage holds, which limit binds first, what holding the
## target takes and the cost per active user-hour, from one speaker measured on the local stack
## (about 1.5 minutes). CAPACITY_ARGS="--figures FILE" reuses figures saved with --save FILE.
CAPACITY_ARGS ?=
capacity: $(RUN_STAMP)
	$(BIN)/python benchmarks/capacity_report.py $(CAPACITY_ARGS)

## A bounded load run: 200 sessions talking as people do on the local stack (at most 10 minutes),
## with turns answered and lost, first partial and first tts.speak p50/p99, CPU per turn, and the
## capacity model's figures beside the measured ones. LOAD_ARGS="--sessions N" for another count.
LOAD_ARGS ?=
load: $(RUN_STAMP)
	$(BIN)/python benchmarks/load_run.py $(LOAD_ARGS)

## How well spoken phrases are heard as a code base's identifiers (shared/core/identifiers.py): top-1
## accuracy, wrong candidates on plain sentences, index build and match time against 5,000 names
## (a few seconds; benchmarks/identifier_corpus/). EVAL_ARGS=--misses lists the phrases heard wrong.
EVAL_ARGS ?=
eval-identifiers: $(RUN_STAMP)
	$(BIN)/python benchmarks/eval_identifiers.py $(EVAL_ARGS)

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .ruff_cache .hypothesis
