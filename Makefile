# gclb-operator: the two commands that matter are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: demo demo-gateway test fuzz test-real-api record-real-api build native-deps deps crds iam-role iam-report bench bench-control-plane bench-scale bench-instructions lint fmt clean mutants image chaos

## Build every binary (operator, gce-emulator, fake-kube-apiserver).
build: native-deps
	$(CARGO) build --workspace --bins

## What the emulator links and loads (Debian packages): libmodsecurity 3 with its headers and
## pkg-config (the modsecurity-sys binding links it) and the OWASP Core Rule Set 3.3 (Cloud
## Armor's preconfigured WAF rules run it; docs/emulator-dataplane.md).
native-deps:
	@{ command -v pkg-config >/dev/null && pkg-config --exists modsecurity && [ -f /usr/share/modsecurity-crs/rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf ]; } \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkg-config libmodsecurity-dev modsecurity-crs; } \
	  || { echo "the emulator needs libmodsecurity and the OWASP CRS: apt-get install pkg-config libmodsecurity-dev modsecurity-crs"; exit 1; }

## Tools the tests drive as real clients: kubectl and gcloud (on the machine image), the Python
## Compute client (pip), openssl (the only client here that still offers TLS 1.0/1.1), umoci and
## skopeo (the image test builds and unpacks the OCI image with them), and the
## test runner cargo-nextest (its timeouts in .config/nextest.toml end hung tests). Installed here
## so a fresh machine can run `make test`.
deps: native-deps
	@command -v kubectl >/dev/null || { echo "kubectl is required (see README.md)"; exit 1; }
	@command -v gcloud >/dev/null || { echo "gcloud is required (see README.md)"; exit 1; }
	@python3 -c 'import google.cloud.compute_v1' 2>/dev/null || python3 -m pip install -q 'google-cloud-compute==1.57.0'
	@command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; } \
	  || { echo "openssl is required by the TLS tests: apt-get install openssl"; exit 1; }
	@$(CARGO) nextest --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-nextest
	@command -v umoci >/dev/null && command -v skopeo >/dev/null || { apt-get update -qq && apt-get install -y -qq umoci skopeo; } \
	  || { echo "umoci and skopeo are required by the image test: apt-get install umoci skopeo"; exit 1; }
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; } \
	  || { echo "chromium is required by the dashboard's browser test: apt-get install chromium"; exit 1; }
	@[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || { apt-get update -qq && apt-get install -y -qq fonts-dejavu-core; } \
	  || { echo "the benchmark's plot needs DejaVu Sans: apt-get install fonts-dejavu-core"; exit 1; }

## Bring up the local Kubernetes API, the Compute emulator and the operator, apply
## docs/examples/, and send real requests through the emulated load balancer.
demo: build
	bash tests/demo.sh

## The Gateway API demo: a Gateway with an HTTPRoute split and TLSRoute passthrough to two TLS
## backends (docs/examples/gateway/), requests and answers printed (docs/gateway-api.md).
demo-gateway: build
	bash tests/demo-gateway.sh

## Unit, integration and end-to-end tests (end-to-end tests need the binaries built first), with
## the timeouts of .config/nextest.toml. See docs/testing.md.
# The fuzz targets run 60 s each in the suite from a fixed seed (override with FUZZ_SEED), so a
# CI run is reproducible; `make fuzz` explores from random seeds for longer.
test: deps build
	FUZZ_SEED=$${FUZZ_SEED:-20261126} $(CARGO) nextest run --workspace --no-fail-fast

## Every fuzz target (issue 20; docs/testing.md, docs/reliability.md) for FUZZ_SECS seconds each
## (default 600; `make test` runs each for 60): the translate path, the emulator's request
## parsing and URL map matching, the local API's patch engines. FUZZ_SEED replays a run (each
## target prints its seed). cargo test, not nextest: nextest's unit-test deadline is 2 minutes.
FUZZ_SECS ?= 600
fuzz: native-deps
	FUZZ_SECS=$(FUZZ_SECS) $(CARGO) test -p gclb-translate --lib translate::fuzz_tests -- --nocapture
	FUZZ_SECS=$(FUZZ_SECS) $(CARGO) test -p gce-emulator --lib fuzz_tests -- --nocapture
	FUZZ_SECS=$(FUZZ_SECS) $(CARGO) test -p fake-kube-apiserver --lib patch::fuzz_tests -- --nocapture --include-ignored

## The real-API tier (docs/testing.md): the operator end to end and the differential fidelity
## table against a real kube-apiserver and etcd found the envtest way, in KUBEBUILDER_ASSETS
## (default /var/tmp/kubebuilder-assets, outside the clone). Skipped, with a message, without them.
KUBEBUILDER_ASSETS ?= /var/tmp/kubebuilder-assets
test-real-api: deps build
	@if [ -x "$(KUBEBUILDER_ASSETS)/kube-apiserver" ] && [ -x "$(KUBEBUILDER_ASSETS)/etcd" ]; then \
	  KUBEBUILDER_ASSETS="$(KUBEBUILDER_ASSETS)" $(CARGO) nextest run --no-fail-fast \
	    --test real_api_tier --test real_api_rollout --test api_fidelity; \
	else \
	  echo "test-real-api: SKIPPED: KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) holds no kube-apiserver and etcd (docs/testing.md says how to get them)"; \
	fi

## Re-record tests/real_api/answers.json from the real kube-apiserver in KUBEBUILDER_ASSETS.
record-real-api: build
	KUBEBUILDER_ASSETS="$(KUBEBUILDER_ASSETS)" REAL_API_RECORD=1 $(CARGO) nextest run \
	  --test api_fidelity real_api_matches_the_recorded_answers

## The operator's OCI image, offline (no container engine, no base image download): the release
## binary on a root filesystem assembled from Debian's files, written with umoci and skopeo
## (deploy/image/build.sh; the Dockerfile builds the equivalent with a container engine).
## IMAGE_DIR (default $(CARGO_TARGET_DIR)/image), IMAGE_TAG, IMAGE_BINARY override; the last
## line printed is the image size. Push: docs/install.md.
image:
	bash deploy/image/build.sh

## Regenerate crds/*.yaml from the Rust types (a test fails when they drift).
crds:
	$(CARGO) run -q --bin gclb-operator -- crds --out-dir crds

## Regenerate deploy/iam/gclb-operator-role.yaml (the Google IAM custom role) from the Compute
## methods the operator's source calls and deploy/iam/method-permissions.yaml (tests/iam_role.rs
## fails when they drift, naming a method the table lacks).
iam-role:
	IAM_ROLE_WRITE=1 $(CARGO) test -q --test iam_role -- role_is_generated_from_the_methods_the_operator_calls

## The role proven exact, permission by permission (issue 43; docs/install.md, docs/testing.md):
## every scenario of tests/support/iam_scenarios.rs with exactly deploy/iam's role, then each
## permission it exercised removed in turn; the table is compared with
## deploy/iam/permission-report.md (IAM_REPORT_WRITE=1 rewrites it). `make test` runs the
## scenarios and a few removals only; this runs them all (nextest profile iam-report: no
## 10-minute deadline). Each scenario is created, updated (tests/support/iam_updates.rs) and
## deleted. The run is split over IAM_REPORT_SHARDS processes side by side (default 2; each its
## own stack, removing the permissions at its positions modulo N: IAM_REPORT_SHARD=I/N), which
## share one fresh IAM_REPORT_SHARD_DIR; the last to finish writes the report. Each shard's
## output is printed when all are done.
IAM_REPORT_WRITE ?= 0
IAM_REPORT_SHARDS ?= 2
iam-report: build
	@d=$$(mktemp -d); pids=; \
	for i in $$(seq 0 $$(($(IAM_REPORT_SHARDS) - 1))); do \
	  IAM_REPORT=full IAM_REPORT_WRITE=$(IAM_REPORT_WRITE) IAM_REPORT_SHARD=$$i/$(IAM_REPORT_SHARDS) \
	  IAM_REPORT_SHARD_DIR=$$d/shards $(CARGO) nextest run --profile iam-report \
	    --no-capture --test iam_permission_report_e2e > $$d/shard-$$i.log 2>&1 & pids="$$pids $$!"; \
	done; \
	status=0; for p in $$pids; do wait $$p || status=1; done; \
	for i in $$(seq 0 $$(($(IAM_REPORT_SHARDS) - 1))); do echo "== shard $$i/$(IAM_REPORT_SHARDS)"; cat $$d/shard-$$i.log; done; \
	rm -rf $$d; exit $$status

## Benchmarks: emulator control plane throughput, the data plane against nginx and haproxy, and
## the operator's control plane (bench-control-plane) and its memory with many Pods and Secrets
## cached (BENCH_PODS, default 10000; BENCH_SECRETS, default 2000).
bench: build
	bash fakes/gce-emulator/benches/run.sh
	$(MAKE) bench-control-plane
	@if [ -n "$(BENCH_SCALE)" ]; then $(MAKE) bench-scale; else echo "the size sweep (issue 18, ~1 h on 2 busy cores): make bench-scale, or make bench BENCH_SCALE=1"; fi

## The operator: Ingress created -> first 200 (one at a time and at once) and convergence over
## BENCH_INGRESSES (default 100), with no added latency, then first 200 with 200 ms per call
## (issue 26's row (b)), then both on the slow cloud
## (BENCH_SLOW_CLOUD_PROFILE, default `realistic`; docs/performance.md).
BENCH_SLOW_CLOUD_PROFILE ?= realistic
bench-control-plane: build
	$(CARGO) bench --workspace --bench converge --profile dev
	BENCH_SLOW_CLOUD=uniform:200 BENCH_INGRESSES=0 $(CARGO) bench --workspace --bench converge --profile dev
	BENCH_SLOW_CLOUD=$(BENCH_SLOW_CLOUD_PROFILE) $(CARGO) bench --workspace --bench converge --profile dev
	$(CARGO) bench --workspace --bench memory --profile dev

## Issue 18's size sweep in one command: BENCH_SCALE_SIZES Ingresses (default 100,500,1000,2000)
## with 2 Services each over a pool of BENCH_SCALE_SERVICES, 10k Pods and 2k Secrets in the
## cluster; per size convergence, a restart's resync and deleting everything (calls, CPU, peak
## RSS). Prints the table and the paths of the report and its PNG plot. Then 500 and 2000 Ingresses on a
## slow cloud: 200 ms per call and a 20 writes/s quota (429 rateLimitExceeded).
## The operator measured is the release build the image ships (Dockerfile: same profile), whose
## resident code is a third of the dev build's; BENCH_SCALE_OPERATOR=dev measures the dev build.
BENCH_SCALE_OPERATOR ?= release
BENCH_SCALE_SIZES ?= 100,500,1000,2000
BENCH_SCALE_SERVICES ?= 20
BENCH_SCALE_SLOW_SIZES ?= 500,2000
BENCH_SCALE_ENV = BENCH_PATHS=2 BENCH_SERVICES=$(BENCH_SCALE_SERVICES) BENCH_FIRST200_SEQ=0 BENCH_FIRST200_BURST=0 \
	MALLOC_ARENA_MAX=2 BENCH_PHASE_DEADLINE_SECS=3000 \
	$(if $(filter release,$(BENCH_SCALE_OPERATOR)),BENCH_OPERATOR=$(abspath $(or $(CARGO_TARGET_DIR),target))/release/gclb-operator)
bench-scale: build
	$(if $(filter release,$(BENCH_SCALE_OPERATOR)),$(CARGO) build --release --locked --bin gclb-operator)
	$(BENCH_SCALE_ENV) BENCH_SIZES=$(BENCH_SCALE_SIZES) BENCH_PODS=10000 BENCH_SECRETS=2000 \
	  $(CARGO) bench --workspace --bench converge --profile dev
	$(BENCH_SCALE_ENV) BENCH_SIZES=$(BENCH_SCALE_SLOW_SIZES) \
	  BENCH_SLOW_CLOUD='{"preset":"uniform:200","quota":{"writesPerSecond":20,"code":429}}' \
	  $(CARGO) bench --workspace --bench converge --profile dev

## User-space instructions per proxied request, the emulator's and nginx's (valgrind's callgrind;
## INSTALL=1 installs valgrind, nginx and wrk): steady on a busy machine, where the wall-clock
## figures of `make bench` are not. Also one row per edge feature (FEATURES=0 skips them), each
## beside its figure in fakes/gce-emulator/benches/instructions-recorded.tsv, flagging an
## increase over 10 % (never failing); RECORD=1 records the run's figures there.
bench-instructions:
	bash fakes/gce-emulator/benches/instructions.sh

## A failing cloud at full size (tests/chaos_e2e.rs; `make test` runs it with 8 Ingresses and
## 10 kills): 100 Ingresses, 20 % failed Compute calls, 10 SIGKILLs of the operator per phase.
## CHAOS_SEED replays a run's kill points.
chaos: build
	CHAOS_INGRESSES=$${CHAOS_INGRESSES:-100} CHAOS_KILLS=$${CHAOS_KILLS:-10} CHAOS_DEADLINE_SECS=$${CHAOS_DEADLINE_SECS:-1200} \
	  $(CARGO) test --test chaos_e2e -- --nocapture failing_cloud

## Mutation testing (cargo-mutants) of the code that decides what users get, one module at a
## time, each judged by its own tests (report and reading: docs/testing.md). Hours long, so
## niced, one mutant at a time (the machine is shared). It mutates a copy of the working tree,
## $(MUTANTS_OUT)/src, in place (the copy keeps its path and its files their times, so its
## builds are reused from run to run), and builds in its own target directory,
## $(MUTANTS_OUT)/target, so it never rebuilds or locks the everyday one. Each module is its own
## small crate, and each mutant rebuilds only that crate's unit-test binary (--lib), incrementally
## (cargo's default for dev builds), without debug info (the dependencies have none already) and
## linked with mold when mold is installed (`apt-get install mold`; not in `make deps`: CI does
## not run mutants). mold goes through RUSTFLAGS, so that target builds its dependencies once
## itself: never point it at a hard-linked copy of another target directory (a dependency rebuilt
## there rewrites build-script outputs the other directories share). MUTANTS_MODULES picks
## modules; MUTANTS_ARGS adds arguments (e.g. `--in-diff changes.diff`; `--shard 0/8 --sharding
## round-robin --shuffle` for a spread sample; `--baseline=skip --timeout=240` once the baseline
## of the same tree is known green). Per-mutant cost: docs/testing.md.
MUTANTS_OUT ?= $(or $(CARGO_TARGET_DIR),target)/mutants
MUTANTS_MODULES ?= translate sync readiness url_map validate
MUTANTS_ARGS ?=
MUTANTS_ENV = CARGO_TARGET_DIR=$(abspath $(MUTANTS_OUT))/target CARGO_PROFILE_DEV_DEBUG=false \
  $(if $(shell command -v mold),RUSTFLAGS='-C link-arg=-fuse-ld=mold')
mutants_translate = -p gclb-translate -f 'crates/translate/src/translate/**' --cargo-arg=--lib \
  -- -E 'not test(/^translate::fuzz_tests::/)'
mutants_readiness = -p gclb-readiness -f 'crates/readiness/src/readiness/**' --cargo-arg=--lib
mutants_sync = -p gclb-sync -f 'crates/sync/src/sync/**' --cargo-arg=--lib -- -E 'test(/^sync::/)'
mutants_url_map = -p gce-url-map -f 'fakes/gce-emulator/crates/url-map/src/url_map/**' --cargo-arg=--lib
mutants_validate = -p gce-validate -f 'fakes/gce-emulator/crates/validate/src/validate.rs' --cargo-arg=--lib
mutants:
	@$(CARGO) mutants --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-mutants
	rm -rf $(MUTANTS_OUT)/src && mkdir -p $(MUTANTS_OUT)/src
	git ls-files -z --cached --others --exclude-standard \
	  | tar --null -T - --ignore-failed-read -cf - | tar -xf - -C $(MUTANTS_OUT)/src
	$(MAKE) -k $(addprefix mutants-,$(MUTANTS_MODULES))

mutants-%:
	$(MUTANTS_ENV) nice -n 15 $(CARGO) mutants --in-place -d $(MUTANTS_OUT)/src \
	  -o $(MUTANTS_OUT)/$* $(MUTANTS_ARGS) $(mutants_$*)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
