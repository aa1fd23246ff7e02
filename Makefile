# Apiary — one entry point for building, testing and measuring.
#
#   make test    formatting, lints, the planner's purity check and every test (what CI runs)
#   make bench   the planner benchmark (figures go to BENCHMARKS.md)
#   make sim     compare running-count policies on the reference traces (ARGS=... passes options; ARGS=--help)
#   make run     Apiary locally: the AWS emulator, the stack deployed into it, the four functions, a demo pool
#   make emulator  only the AWS emulator, in the foreground (for running system tests by hand)

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

# Builds live outside the clone so they stay warm between runs and fresh clones on the same machine.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/apiary/target
CARGO ?= cargo
PLANNER := apiary-planner

.PHONY: test fmt-check clippy purity unit system bench bench-api sim run emulator venv

# The AWS emulator (moto) and the deploy script's boto3 live in a project virtualenv, pinned.
VENV := .venv
PYTHON := $(VENV)/bin/python
MOTO_VERSION := 5.2.5
EMULATOR_PORT ?= 5055
export AWS_ACCESS_KEY_ID ?= test
export AWS_SECRET_ACCESS_KEY ?= test
export AWS_REGION ?= us-east-1

venv: $(VENV)/.installed
$(VENV)/.installed:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet 'moto[server]==$(MOTO_VERSION)'
	touch $@

test: fmt-check clippy purity unit system

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The planner must not be able to do I/O, read the clock or run async code: check its dependency tree.
purity:
	@deps=$$($(CARGO) tree -p $(PLANNER) -e normal --prefix none); \
	if grep -iE '^(tokio|aws-|futures|hyper|reqwest|async-|rand )' <<<"$$deps"; then \
	  echo "purity: $(PLANNER) depends on the crates above; the planner must stay pure" >&2; exit 1; fi; \
	if $(CARGO) tree -p $(PLANNER) -e features -i chrono | grep -q 'chrono feature "clock"'; then \
	  echo "purity: chrono's clock feature is enabled for $(PLANNER); time must be an argument" >&2; exit 1; fi; \
	echo "purity: $(PLANNER) has no async, AWS, randomness or clock dependency"

unit:
	$(CARGO) test --workspace --exclude apiary-system-tests

# System tests: the emulator on a free port for the duration, stopped however the tests end.
system: venv
	@$(WITH_EMULATOR) $(CARGO) test -p apiary-system-tests -- --test-threads=$${SYSTEM_TEST_THREADS:-3}

# AWS calls per operation and claim latency through the local API (figures go to BENCHMARKS.md). A debug build:
# the latencies are the emulator's, and a release build of the AWS SDK would take a quarter of an hour here.
bench-api: venv
	@$(WITH_EMULATOR) $(CARGO) test -p apiary-system-tests --bench api

WITH_EMULATOR = port=$$($(PYTHON) -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'); \
	$(PYTHON) infra/emulator.py --port $$port > $${TMPDIR:-/tmp}/apiary-emulator-$$port.log 2>&1 & emu=$$!; \
	trap "kill $$emu 2>/dev/null" EXIT; \
	for i in $$(seq 50); do (echo > /dev/tcp/127.0.0.1/$$port) 2>/dev/null && break; sleep 0.2; done; \
	AWS_ENDPOINT_URL=http://127.0.0.1:$$port APIARY_PYTHON=$(CURDIR)/$(PYTHON) RUST_LOG=$${RUST_LOG:-warn}

emulator: venv
	$(PYTHON) infra/emulator.py --port $(EMULATOR_PORT)

# Apiary locally: Ctrl-C stops the functions and the emulator.
run: venv
	$(CARGO) build --quiet -p apiary-local
	@bash infra/run-local.sh

bench:
	$(CARGO) bench -p $(PLANNER) --bench plan

ARGS ?=
sim:
	$(CARGO) run --quiet --release -p apiary-sim -- $(ARGS)
