# gclb-operator: the two commands that matter are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: demo test test-real-api record-real-api build deps crds bench bench-control-plane bench-instructions lint fmt clean mutants

## Build every binary (operator, gce-emulator, fake-kube-apiserver).
build:
	$(CARGO) build --workspace --bins

## Tools the tests drive as real clients: kubectl and gcloud (on the machine image), the Python
## Compute client (pip), openssl (the only client here that still offers TLS 1.0/1.1), and the
## test runner cargo-nextest (its timeouts in .config/nextest.toml end hung tests). Installed here
## so a fresh machine can run `make test`.
deps:
	@command -v kubectl >/dev/null || { echo "kubectl is required (see README.md)"; exit 1; }
	@command -v gcloud >/dev/null || { echo "gcloud is required (see README.md)"; exit 1; }
	@python3 -c 'import google.cloud.compute_v1' 2>/dev/null || python3 -m pip install -q 'google-cloud-compute==1.57.0'
	@command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; } \
	  || { echo "openssl is required by the TLS tests: apt-get install openssl"; exit 1; }
	@$(CARGO) nextest --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-nextest

## Bring up the local Kubernetes API, the Compute emulator and the operator, apply
## docs/examples/, and send real requests through the emulated load balancer.
demo: build
	bash tests/demo.sh

## Unit, integration and end-to-end tests (end-to-end tests need the binaries built first), with
## the timeouts of .config/nextest.toml. See docs/testing.md.
test: deps build
	$(CARGO) nextest run --workspace --no-fail-fast

## The real-API tier (docs/testing.md): the operator end to end and the differential fidelity
## table against a real kube-apiserver and etcd found the envtest way, in KUBEBUILDER_ASSETS
## (default /var/tmp/kubebuilder-assets, outside the clone). Skipped, with a message, without them.
KUBEBUILDER_ASSETS ?= /var/tmp/kubebuilder-assets
test-real-api: deps build
	@if [ -x "$(KUBEBUILDER_ASSETS)/kube-apiserver" ] && [ -x "$(KUBEBUILDER_ASSETS)/etcd" ]; then \
	  KUBEBUILDER_ASSETS="$(KUBEBUILDER_ASSETS)" $(CARGO) nextest run --no-fail-fast \
	    --test real_api_tier --test api_fidelity; \
	else \
	  echo "test-real-api: SKIPPED: KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) holds no kube-apiserver and etcd (docs/testing.md says how to get them)"; \
	fi

## Re-record tests/real_api/answers.json from the real kube-apiserver in KUBEBUILDER_ASSETS.
record-real-api: build
	KUBEBUILDER_ASSETS="$(KUBEBUILDER_ASSETS)" REAL_API_RECORD=1 $(CARGO) nextest run \
	  --test api_fidelity real_api_matches_the_recorded_answers

## Regenerate crds/*.yaml from the Rust types (a test fails when they drift).
crds:
	$(CARGO) run -q --bin gclb-operator -- crds --out-dir crds

## Benchmarks: emulator control plane throughput, the data plane against nginx and haproxy, and
## the operator's control plane (bench-control-plane).
bench: build
	bash fakes/gce-emulator/benches/run.sh
	$(MAKE) bench-control-plane

## The operator: Ingress created -> first 200 (one at a time and at once) and convergence over
## BENCH_INGRESSES (default 100), with no added latency, then on the slow cloud
## (BENCH_SLOW_CLOUD_PROFILE, default `realistic`; docs/performance.md).
BENCH_SLOW_CLOUD_PROFILE ?= realistic
bench-control-plane: build
	$(CARGO) bench --workspace --bench converge --profile dev
	BENCH_SLOW_CLOUD=$(BENCH_SLOW_CLOUD_PROFILE) $(CARGO) bench --workspace --bench converge --profile dev

## User-space instructions per proxied request, the emulator's and nginx's (valgrind's callgrind;
## INSTALL=1 installs valgrind, nginx and wrk): steady on a busy machine, where the wall-clock
## figures of `make bench` are not.
bench-instructions:
	bash fakes/gce-emulator/benches/instructions.sh

## Mutation testing (cargo-mutants) of the code that decides what users get; hours long, so
## niced and one job at a time (the machine is shared). Report and reading: docs/testing.md.
## MUTANTS_ARGS adds arguments (e.g. `--in-diff changes.diff`, `--file src/sync/gc.rs`).
MUTANTS_OUT ?= $(or $(CARGO_TARGET_DIR),target)/mutants
mutants:
	@$(CARGO) mutants --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-mutants
	nice -n 15 $(CARGO) mutants -j 1 -p gclb-operator --output $(MUTANTS_OUT)/operator \
	  --file 'src/translate/**' --file 'src/sync/**' --file 'src/readiness/**' $(MUTANTS_ARGS) -- --lib
	nice -n 15 $(CARGO) mutants -j 1 -p gce-emulator --output $(MUTANTS_OUT)/emulator \
	  --file 'fakes/gce-emulator/src/dataplane/url_map.rs' --file 'fakes/gce-emulator/src/dataplane/url_map/**' --file 'fakes/gce-emulator/src/validate.rs' \
	  $(MUTANTS_ARGS) -- --lib --test dataplane_http --test control_invalid_input

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
