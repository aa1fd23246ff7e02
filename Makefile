# Apiary — one entry point for building, testing and measuring.
#
#   make test    formatting, lints, the planner's purity check and every test (what CI runs)
#   make bench   the planner benchmark (figures go to BENCHMARKS.md)
#   make sim     compare running-count policies on the reference traces (ARGS=... passes options; ARGS=--help)

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

# Builds live outside the clone so they stay warm between runs and fresh clones on the same machine.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/apiary/target
CARGO ?= cargo
PLANNER := apiary-planner

.PHONY: test fmt-check clippy purity unit bench sim

test: fmt-check clippy purity unit

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
	$(CARGO) test --workspace

bench:
	$(CARGO) bench -p $(PLANNER) --bench plan

ARGS ?=
sim:
	$(CARGO) run --quiet --release -p apiary-sim -- $(ARGS)
