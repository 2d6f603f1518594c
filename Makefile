# VoiceIDE conductor — the commands a developer and CI use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8080
HOST ?= 127.0.0.1

.PHONY: run test lint format schema synth lock bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Run the whole conductor locally (DynamoDB, Bedrock and API Gateway on loopback; no AWS account).
run: $(STAMP)
	$(BIN)/voiceide-conductor local --host $(HOST) --port $(PORT)

## The test suite (core, handlers, local stack, client stub, end-to-end, infrastructure).
test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## Regenerate the protocol's JSON Schema (schema/voiceide-event.schema.json).
schema: $(STAMP)
	$(BIN)/python -m shared.schema_export

## Synthesize the CloudFormation templates of every stage into cdk.out/ (no AWS account needed).
synth: $(STAMP)
	npx --yes aws-cdk@2 synth -c stage=dev --quiet
	npx --yes aws-cdk@2 synth -c stage=prod --quiet

## Lock the Lambda layer's dependencies: lambdas/requirements.txt (ranges) -> lambdas/requirements.lock
## (exact versions with hashes, resolved for the Lambda's platform: CPython 3.13 on Linux/aarch64).
## Takes the newest versions the ranges allow; LOCK_UPGRADE= keeps the current pins where they still fit.
LOCK_UPGRADE ?= --upgrade
lock: $(STAMP)
	$(BIN)/uv pip compile lambdas/requirements.txt $(LOCK_UPGRADE) --generate-hashes --only-binary :all: \
		--python-platform aarch64-manylinux_2_28 --python-version 3.13 --no-python-downloads \
		--output-file lambdas/requirements.lock >/dev/null

## Benchmarks: figures printed, nothing asserted.
bench: $(STAMP)
	$(BIN)/python benchmarks/turn_latency.py

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .ruff_cache .hypothesis
