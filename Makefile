# Apiary — one entry point for building, testing and measuring.
#
#   make test    formatting, lints, the planner's purity check, the import-circle check, every test and every
#                example of the docs (what CI runs)
#   make dst     the whole-system simulation: SEEDS=N seeds from FROM (default 200 from 1) on every core, or SEED=S
#                replayed with its trace; DST_FLAGS=--deny-roles adds pools' roles denied and given back
#   make bench   the planner benchmark (figures go to BENCHMARKS.md)
#   make sim     compare running-count policies on the reference traces (ARGS=... passes options; ARGS=--help)
#   make bill    Apiary's own AWS bill a month for 1, 10 and 100 pools like each reference trace: writes docs/bill.md
#   make run     Apiary locally: the AWS emulator, the stack deployed into it, the four functions, a demo pool
#   make emulator  only the AWS emulator, in the foreground (for running system tests by hand)
#   make package the four functions as arm64 Lambda zips in target/lambda/<function>/bootstrap.zip
#   make deploy STACK=... REGION=... BUCKET=... [PARAMS="Name=Value ..."]  upload the zips, create or update the stack
#   make cli     the `apiary` command line, optimized, copied to target/bin/apiary
#   make burst N=200  N claims at once through the local API, with N Running spares and then with none
#   make fanout N=200  N claims at once through `make run`'s HTTP API from a Python client (with `make run` up)
#   make bench-emulator  what one DynamoDB request costs the emulator and moto as released
#   make upgrade-test  the previous release (fixtures/releases/previous) updated in place to this build, under load

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

# Builds live outside the clone so they stay warm between runs and fresh clones on the same machine.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/apiary/target
CARGO ?= cargo
PLANNER := apiary-planner

.PHONY: package-installer test fmt-check clippy purity cycles docs-check docs-examples api-fuzz conformance tests unit system bench bench-api burst fanout bench-emulator sim bill dst run emulator venv package deploy \
	lint-infra emulator-test deploy-test cold-start cli upgrade-test

# The AWS emulator (moto) and boto3 for the deploy scripts live in a project virtualenv, the template linters in
# another, the Lambda packager (cargo-lambda, zig) in a third (below); all pinned in infra/requirements*.txt.
VENV := .venv
PYTHON := $(VENV)/bin/python
LINT_VENV := .venv-lint
EMULATOR_PORT ?= 5055
# The emulator accepts any credentials; these are set only for the targets that talk to it (never for deploy).
EMULATOR_CREDENTIALS := AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1

venv: $(VENV)/.installed
$(VENV)/.installed: infra/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r infra/requirements.txt
	touch $@

CONFORMANCE_VENV := .venv-conformance
$(CONFORMANCE_VENV)/.installed: infra/requirements-conformance.txt
	python3 -m venv $(CONFORMANCE_VENV)
	$(CONFORMANCE_VENV)/bin/pip install --quiet -r infra/requirements-conformance.txt
	touch $@

# The AWS CLI the reference installer's buildspec runs (installer/tests/aws.rs runs the buildspec with it).
AWSCLI_VENV := .venv-awscli
$(AWSCLI_VENV)/.installed: infra/requirements-awscli.txt
	python3 -m venv $(AWSCLI_VENV)
	$(AWSCLI_VENV)/bin/pip install --quiet -r infra/requirements-awscli.txt
	touch $@

$(LINT_VENV)/.installed: infra/requirements-lint.txt
	python3 -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/pip install --quiet -r infra/requirements-lint.txt
	touch $@

test: fmt-check clippy purity cycles docs-check lint-infra emulator-test tests conformance docs-examples api-fuzz deploy-test

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

# No module of a crate imports, through others, one that imports it (tests/module_cycles.py).
cycles:
	@python3 tests/module_cycles.py

# Every link of the README, BENCHMARKS.md and docs/ leads to a file and heading that exist, and the layout
# docs/development.md draws names paths that exist and every crate (tests/doc_links.py); the house keeps its size:
# no source file over 800 lines, no function over 100, no paragraph over 800 characters (tests/house.py).
docs-check:
	@python3 tests/doc_links.py
	@python3 tests/bill_figures.py
	@cd tests && python3 -m unittest -q house_test
	@python3 tests/house.py

# Every example of the README and docs/ runs against make run's stack, or is checked where it cannot run here
# (tests/doc_examples.py); built as `make test` builds, so after `tests` nothing is compiled anew.
docs-examples: venv
	@$(CARGO) test --quiet --workspace --no-run
	@$(PYTHON) tests/doc_examples.py

# The claim API against its OpenAPI document: schemathesis's generated requests against make run's stack, no server
# error and no answer the document does not describe (tests/api_fuzz.py); built as `make test` builds.
api-fuzz: venv
	@$(CARGO) test --quiet --workspace --no-run
	@$(PYTHON) tests/api_fuzz.py

# The cloud adapters against what the vendors publish, each adapter's requests and the fake's answers to them held
# to the vendor's description: Google's compute v1 discovery document, with Google's own client driving the fake
# (tests/conformance_gcp.py); the Azure mgmt SDKs' operations and models, with Azure's SDKs driving the fake over
# HTTPS (tests/conformance_azure.py); the vSphere Automation SDK's interfaces and types, its converter reading every
# answer (tests/conformance_vsphere.py); the Kubernetes client's operations and models, with that client reading the
# fake cluster API (tests/conformance_kubernetes.py); the reference installer's CodeBuild requests against
# botocore's model of the service, recorded against the emulator (tests/conformance_codebuild.py).
conformance: $(CONFORMANCE_VENV)/.installed venv
	@$(CONFORMANCE_VENV)/bin/python tests/conformance_gcp.py
	@$(CONFORMANCE_VENV)/bin/python tests/conformance_azure.py
	@$(CONFORMANCE_VENV)/bin/python tests/conformance_vsphere.py
	@$(CONFORMANCE_VENV)/bin/python tests/conformance_kubernetes.py
	@$(WITH_EMULATOR) $(PYTHON) tests/conformance_codebuild.py

# Every test in one cargo invocation, with the emulator up for the system tests: one feature resolution for the
# whole workspace, so `make test`, `make run` and `make system` share every compiled crate.
# The emulator holds every call a function makes to that function's role (infra/role_enforcement.py) and logs the
# statements used and the calls refused; after the tests, infra/role_check.py fails on a refused call, on a
# statement of the templates' roles that no call needed and no `# Unrecorded:` comment explains, and on calls that
# differ from infra/function-calls.json (the list `apiary stack check` asks IAM about); after failed tests (some not
# run), on refused calls only.
ROLE_CALLS = $${TMPDIR:-/tmp}/apiary-role-calls-$$port.jsonl
ROLE_TEMPLATES = --template=infra/template.yaml --template=infra/member-account.yaml --template=infra/installer.yaml \
  --calls-list=infra/function-calls.json
#
# Every secret the tests make is a canary (shared/fakeclouds/src/canary.rs); the system and installer tests keep
# what they captured (log lines at debug, error bodies, notifications, trails, job output) in CANARY_DIR, and
# tests/canary_scan.py fails on any secret found there, naming where; after failed tests, on a secret found only.
CANARY_DIR = $${TMPDIR:-/tmp}/apiary-canaries-$$port
CANARY_SCAN = --require logs,errors,notifications,trail,jobs \
  --minted signing-key,gcp-key-id,azure-client-secret,vsphere-password,cluster-api-token,pull-secret,kubeadmin-password
tests: venv $(AWSCLI_VENV)/.installed
	@$(WITH_EMULATOR) APIARY_CANARY_DIR=$(CANARY_DIR) $(CARGO) test --workspace -- --test-threads=$${TEST_THREADS:-3} \
	  || failed=$$?; \
	$(PYTHON) infra/role_check.py $(ROLE_CALLS) $${failed:+--refusals-only} $(ROLE_TEMPLATES); \
	if [ -n "$${failed:-}" ]; then $(PYTHON) tests/canary_scan.py $(CANARY_DIR); exit $$failed; fi; \
	$(PYTHON) tests/canary_scan.py $(CANARY_DIR) $(CANARY_SCAN) && rm -rf $(CANARY_DIR)

# While iterating: the tests that need no emulator (the planner, the handlers on in-memory ports, the simulation,
# the command line's outputs); the command line's tests against the local stack are skipped by name.
unit:
	$(CARGO) test --workspace --exclude apiary-system-tests -- --skip against_stack::

# Only the system tests: the emulator on a free port for the duration, stopped however the tests end. Selected by
# target over the whole workspace, so features resolve as for `make test` and nothing is compiled anew.
system: venv
	@$(CARGO) build --quiet -p apiary-installer --bin fake-openshift-install
	@$(WITH_EMULATOR) $(CARGO) test --workspace --test system --test store --test cli -- --test-threads=$${TEST_THREADS:-3} \
	  || failed=$$?; $(PYTHON) infra/role_check.py $(ROLE_CALLS); exit $${failed:-0}

# AWS calls per operation and claim latency through the local API (figures go to BENCHMARKS.md). A debug build:
# the latencies are the emulator's, and a release build of the AWS SDK would take a quarter of an hour here.
bench-api: venv
	@$(WITH_EMULATOR) $(CARGO) test --workspace --bench api

# A CI fan-out through the local API: N claims at once on a pool of N Running spares, then N on a pool with none
# (BENCHMARKS.md, "Claims at CI scale"). Built optimized (the simulators' profile), as Lambda runs the functions: a
# debug build's SDK spends more on signing and parsing a request than the emulator spends answering it.
N ?= 60
burst: venv
	@$(WITH_EMULATOR) N=$(N) $(CARGO) test --profile tool --workspace --bench burst

# What one DynamoDB request costs the emulator, and moto as released, on its own.
bench-emulator: venv
	@cd tests && ../$(PYTHON) bench_emulator.py

WITH_EMULATOR = port=$$($(PYTHON) -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'); \
	rm -f $(ROLE_CALLS); rm -rf $(CANARY_DIR); \
	$(PYTHON) infra/emulator.py --port $$port --calls $(ROLE_CALLS) > $${TMPDIR:-/tmp}/apiary-emulator-$$port.log 2>&1 & emu=$$!; \
	trap "kill $$emu 2>/dev/null" EXIT; \
	for i in $$(seq 50); do (echo > /dev/tcp/127.0.0.1/$$port) 2>/dev/null && break; sleep 0.2; done; \
	$(EMULATOR_CREDENTIALS) AWS_ENDPOINT_URL=http://127.0.0.1:$$port APIARY_PYTHON=$(CURDIR)/$(PYTHON) RUST_LOG=$${RUST_LOG:-warn}

# The templates (the stack's, the member account's role, the reference installer's): cfn-lint clean, and checkov
# clean but for the checks infra/checkov.yaml skips and the two infra/installer.yaml skips on a resource, each with
# its reason.
lint-infra: $(LINT_VENV)/.installed
	$(LINT_VENV)/bin/cfn-lint infra/template.yaml infra/member-account.yaml infra/installer.yaml
	$(LINT_VENV)/bin/checkov -f infra/template.yaml -f infra/member-account.yaml -f infra/installer.yaml \
	  --config-file infra/checkov.yaml

# The functions as Lambda zips for arm64 (provided.al2023), built with the release profile (LTO, one codegen unit,
# stripped). cargo-lambda cross-compiles with zig, both from the virtualenv; rustup adds the arm64 standard library.
LAMBDA_TARGET := aarch64-unknown-linux-gnu
FUNCTIONS := claim-api reconcile power timeouts
# The packager's virtualenv lives beside the build cache, outside the clone: zig's wrappers are named after its
# path, and a path that changed with every clone would rebuild the whole release tree each time.
LAMBDA_VENV := $(dir $(CARGO_TARGET_DIR))lambda-venv
$(LAMBDA_VENV)/.installed: infra/requirements-lambda.txt
	@cmp -s $< $@ || { python3 -m venv $(LAMBDA_VENV) && $(LAMBDA_VENV)/bin/pip install --quiet -r $< && cp $< $@; }
	@touch $@
LAMBDA_BUILD = PATH="$(LAMBDA_VENV)/bin:$$PATH" $(CARGO) lambda build --release --output-format zip \
	$(addprefix -p ,$(FUNCTIONS))
package: $(LAMBDA_VENV)/.installed
	@rustup target list --installed | grep -qx $(LAMBDA_TARGET) || rustup target add $(LAMBDA_TARGET)
	$(LAMBDA_BUILD) --arm64 --lambda-dir target/lambda
	@for f in $(FUNCTIONS); do printf '%-10s %s bytes\n' $$f $$(stat -c %s target/lambda/$$f/bootstrap.zip); done

# The reference installer's function (infra/installer.yaml, optional) as an arm64 Lambda zip, built as the
# functions are: target/lambda/apiary-installer/bootstrap.zip (docs/clouds.md, "OpenShift pools with the reference
# installer").
package-installer: $(LAMBDA_VENV)/.installed
	@rustup target list --installed | grep -qx $(LAMBDA_TARGET) || rustup target add $(LAMBDA_TARGET)
	PATH="$(LAMBDA_VENV)/bin:$$PATH" $(CARGO) lambda build --release --output-format zip -p apiary-installer \
	  --bin apiary-installer --arm64 --lambda-dir target/lambda
	@printf 'apiary-installer %s bytes\n' $$(stat -c %s target/lambda/apiary-installer/bootstrap.zip)

# Uploads the zips and creates or updates the stack (see docs/operations.md).
PARAMS ?=
deploy: venv
	@test -n "$(STACK)" -a -n "$(REGION)" -a -n "$(BUCKET)" || \
	  { echo "usage: make deploy STACK=name REGION=region BUCKET=bucket [PARAMS=\"Name=Value ...\"] [ALLOW_REPLACING=Table,...]" >&2; exit 2; }
	$(PYTHON) infra/deploy.py --stack $(STACK) --region $(REGION) --bucket $(BUCKET) \
	  $(if $(ALLOW_REPLACING),--allow-replacing $(ALLOW_REPLACING)) $(PARAMS)

# The emulator's own promises (its lighter transaction backup undoes what moto's did), through boto3.
emulator-test: venv
	$(PYTHON) tests/emulator_test.py
	$(PYTHON) tests/role_check_test.py
	$(PYTHON) tests/canary_scan_test.py

# make package + make deploy against the emulator's S3, CloudFormation and Lambda: create, then update in place.
deploy-test: venv
	$(PYTHON) tests/deploy_test.py

# Each release bootstrap's time from exec to its first request to a local Lambda runtime API (BENCHMARKS.md):
# the arm64 zips under qemu user emulation (an upper bound; needs qemu-user-static and libc6-arm64-cross), and the
# same code and profile built for this machine, run natively.
cold-start: package
	$(LAMBDA_BUILD) --x86-64 --lambda-dir target/lambda-x86_64
	$(PYTHON) infra/cold_start.py --lambda-dir target/lambda-x86_64 $(FUNCTIONS)
	$(PYTHON) infra/cold_start.py --lambda-dir target/lambda $(FUNCTIONS)

# The previous release (fixtures/releases/previous: VERSION COMMIT) on the local stack, updated in place to this
# build while claims keep coming, and held to losing nothing (tests/upgrade_test.py). The previous release's source
# is taken from git beside the build cache and built there, debug as `make test` builds this one; run before each
# release (docs/development.md says why it is not in `make test`).
PREVIOUS_COMMIT = $(word 2,$(file < fixtures/releases/previous))
PREVIOUS_SRC = $(dir $(CARGO_TARGET_DIR))previous/$(PREVIOUS_COMMIT)
PREVIOUS_TARGET = $(dir $(CARGO_TARGET_DIR))previous-target
upgrade-test: venv
	@test -d $(PREVIOUS_SRC) || { mkdir -p $(PREVIOUS_SRC).partial && git archive $(PREVIOUS_COMMIT) | tar -x -C $(PREVIOUS_SRC).partial && mv $(PREVIOUS_SRC).partial $(PREVIOUS_SRC); }
	cd $(PREVIOUS_SRC) && CARGO_TARGET_DIR=$(PREVIOUS_TARGET) $(CARGO) build --quiet -p apiary-local --bin apiary-local
	$(CARGO) build --quiet -p apiary-local --bin apiary-local --bin apiary-demo-clouds
	$(PYTHON) tests/upgrade_test.py --previous-src $(PREVIOUS_SRC) --previous-bin $(PREVIOUS_TARGET)/debug/apiary-local \
	  --current-bin $(CARGO_TARGET_DIR)/debug/apiary-local --clouds-bin $(CARGO_TARGET_DIR)/debug/apiary-demo-clouds

emulator: venv
	$(EMULATOR_CREDENTIALS) $(PYTHON) infra/emulator.py --port $(EMULATOR_PORT)

# Apiary locally: Ctrl-C stops the functions and the emulator. The functions run optimized, as Lambda runs them
# (the simulators' profile, without the bootstraps' slow fat LTO): the first run compiles it, some ten minutes on
# two cores, and later ones only what changed.
run: venv
	$(CARGO) build --profile tool --workspace --bin apiary-local --bin fake-openshift-install
	@$(EMULATOR_CREDENTIALS) bash infra/run-local.sh

# A CI fan-out through `make run`'s HTTP API, from a plain Python client: N parallel claims on a pool of N Running
# spares, with a second pool's hibernateAfter and claim lifetime falling due during the burst (BENCHMARKS.md,
# "Claims at CI scale"). Needs `make run` running (its address from .run/api.address).
fanout:
	@python3 infra/fanout.py --claims $(N)

bench:
	$(CARGO) bench -p $(PLANNER) --bench plan

# The command line, built with the simulators' profile (optimized, without the bootstraps' slow fat LTO).
cli:
	$(CARGO) build --profile tool -p apiary-cli
	@mkdir -p target/bin && cp $(CARGO_TARGET_DIR)/tool/apiary target/bin/apiary
	@echo "target/bin/apiary ($$(target/bin/apiary --version)); completions: target/bin/apiary completions bash|zsh|fish"

ARGS ?=
sim:
	$(CARGO) run --quiet --profile tool -p apiary-sim -- $(ARGS)

bill:
	$(CARGO) build --quiet --profile tool -p apiary-sim
	$(CARGO_TARGET_DIR)/tool/apiary-sim bill $(ARGS) > docs/bill.md.new && mv docs/bill.md.new docs/bill.md
	@cat docs/bill.md

# The whole-system simulation (shared/dst): each failing seed prints the command that replays it.
SEEDS ?= 200
SEED ?=
FROM ?= 1
HOURS ?= 2
DST_FLAGS ?=
dst:
	$(CARGO) run --quiet --profile tool -p apiary-dst -- --hours $(HOURS) $(DST_FLAGS) $(if $(SEED),--seed $(SEED) --trace,--from $(FROM) --seeds $(SEEDS))
