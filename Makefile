# gclb-operator: the two commands that matter are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
CARGO ?= cargo
# Test runner: nextest when installed (faster, per-test processes), else cargo test.
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)

.PHONY: demo test build deps crds bench bench-instructions lint fmt clean

## Build every binary (operator, gce-emulator, fake-kube-apiserver).
build:
	$(CARGO) build --workspace --bins

## Tools the tests drive as real clients: kubectl and gcloud (on the machine image), the Python
## Compute client (pip). Installed here so a fresh machine can run `make test`.
deps:
	@command -v kubectl >/dev/null || { echo "kubectl is required (see README.md)"; exit 1; }
	@command -v gcloud >/dev/null || { echo "gcloud is required (see README.md)"; exit 1; }
	@python3 -c 'import google.cloud.compute_v1' 2>/dev/null || python3 -m pip install -q 'google-cloud-compute==1.57.0'

## Bring up the local Kubernetes API, the Compute emulator and the operator, apply
## docs/examples/, and send real requests through the emulated load balancer.
demo: build
	bash tests/demo.sh

## Unit, integration and end-to-end tests (end-to-end tests need the binaries built first).
test: deps build
ifeq ($(NEXTEST),yes)
	$(CARGO) nextest run --workspace --no-fail-fast
else
	$(CARGO) test --workspace --no-fail-fast
endif

## Regenerate crds/*.yaml from the Rust types (a test fails when they drift).
crds:
	$(CARGO) run -q --bin gclb-operator -- crds --out-dir crds

## Benchmarks: emulator control plane throughput, the data plane against nginx and haproxy, and
## the operator's convergence over many Ingresses (BENCH_INGRESSES, default 100).
bench: build
	bash fakes/gce-emulator/benches/run.sh
	$(CARGO) bench --workspace --bench converge --profile dev

## User-space instructions per proxied request, the emulator's and nginx's (valgrind's callgrind;
## INSTALL=1 installs valgrind, nginx and wrk): steady on a busy machine, where the wall-clock
## figures of `make bench` are not.
bench-instructions:
	bash fakes/gce-emulator/benches/instructions.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
