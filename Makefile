# gclb-operator: the two commands that matter are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: demo test build deps crds bench bench-instructions lint fmt clean mutants chaos

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

## A failing cloud at full size (tests/chaos_e2e.rs; `make test` runs it with 8 Ingresses and
## 10 kills): 100 Ingresses, 20 % failed Compute calls, 10 SIGKILLs of the operator per phase.
## CHAOS_SEED replays a run's kill points.
chaos: build
	CHAOS_INGRESSES=$${CHAOS_INGRESSES:-100} CHAOS_KILLS=$${CHAOS_KILLS:-10} CHAOS_DEADLINE_SECS=$${CHAOS_DEADLINE_SECS:-1200} \
	  $(CARGO) test --test chaos_e2e -- --nocapture failing_cloud

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
