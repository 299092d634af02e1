# The two commands of the README:
#   make demo   a local API server with sample nodes, kumaco working on them
#   make test   every test (unit, differential against Go, integration against a real API
#               server, the image run as a Pod would run it)

CARGO ?= cargo
# The container engine for `make image` (Debian: apt-get install podman runc).
ENGINE ?= podman
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# The full name of the manifests' `image: kumaco:VERSION` (podman would otherwise store it
# as localhost/kumaco), so that an image loaded into kind is the one they ask for.
IMAGE ?= docker.io/library/kumaco:$(VERSION)
# Where cargo builds: CARGO_TARGET_DIR when set (.ci/run keeps it in the tool cache).
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# This machine's Rust target triple: `make image` builds for it.
HOST_TARGET := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
CONTEXT := $(TARGET_DIR)/image/context
# The platforms kumaco ships for (`make dist`): OCI architecture and Rust target triple.
PLATFORMS := amd64:x86_64-unknown-linux-gnu arm64:aarch64-unknown-linux-gnu
# Release files' timestamps: the last commit's, so that two builds of one commit match.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# cargo-cyclonedx (the SBOM of `make dist`), built once per machine into the tool cache.
CYCLONEDX_VERSION := 0.5.9
CYCLONEDX_ROOT := $(or $(KUMACO_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kumaco)/cargo-cyclonedx-$(CYCLONEDX_VERSION)
CYCLONEDX = PATH="$(CYCLONEDX_ROOT)/bin:$$PATH" $(CARGO)

.PHONY: demo demo-node test lint bench smoke chaos chaos-budgets diff-long testenv image dist prometheusrule

# Prerequisites first: before any recipe runs, hack/check-prereqs.sh checks what the goals
# given (`make` alone: demo) need on this machine. As root with apt-get it installs the
# missing Debian packages (saying which) and goes on; otherwise, or if something else is
# missing (Rust, Go), it stops with one message naming each missing program and the
# command that installs it. KUMACO_SKIP_PREREQS=1 skips it.
CHECKED_GOALS := $(filter demo demo-node test lint bench smoke chaos chaos-budgets diff-long testenv image dist,$(or $(MAKECMDGOALS),demo))
ifneq ($(CHECKED_GOALS),)
ifneq ($(KUMACO_SKIP_PREREQS),1)
PREREQS_OK := $(shell ENGINE='$(ENGINE)' bash hack/check-prereqs.sh --install $(CHECKED_GOALS) >&2 && echo yes)
ifneq ($(PREREQS_OK),yes)
$(error prerequisites missing (see above))
endif
endif
endif

demo:
	$(CARGO) build -q --bin kumaco
	KUMACO_BIN=$(TARGET_DIR)/debug/kumaco $(CARGO) run -q -p testkit --bin kumaco-demo

# The demo on a real cluster (testkit::realcluster: a controller-manager, a scheduler and
# a kubelet on containerd; needs root, runc and Debian's CNI plugins): kumaco installed by
# its chart, as two Pods from `make image`'s image.
demo-node: image
	$(CARGO) run -q -p testkit --bin kumaco-demo -- --real-node

# tests/deploy_image.rs runs the image `make image` builds, so it is built first.
# testkit's run-tests builds what `cargo test --workspace --all-targets` builds, then runs
# the test binaries three at a time, longest first (most wait on API servers, not the
# CPU); docs/development.md, "Running tests".
test: image
	$(CARGO) build -q -p testkit --bin run-tests
	$(TARGET_DIR)/debug/run-tests --workspace --all-targets
	$(CARGO) test -q --workspace --doc

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) check -q --manifest-path fuzz/Cargo.toml

bench:
	$(CARGO) bench --bench schedule --bench selector --bench windows --bench pass --bench receive

# The scale and soak harnesses, small and with debug builds: CI runs them so that they
# keep working. Their real runs (release, 1,000-10,000 nodes) are in docs/benchmarks.md.
smoke:
	$(CARGO) build -q --bin kumaco
	$(CARGO) run -q -p testkit --bin kumaco-bench -- --nodes 200 --edge-nodes 100 --idle 5 \
		--churn-rate 20 --churn-seconds 5 \
		--kumaco $(TARGET_DIR)/debug/kumaco --json $(TARGET_DIR)/smoke-bench.json
	$(CARGO) run -q -p testkit --bin kumaco-soak -- --nodes 100 --minutes 1 --churn-rate 20 \
		--kumaco $(TARGET_DIR)/debug/kumaco --json $(TARGET_DIR)/smoke-soak.json
	$(CARGO) run -q -p testkit --bin kumaco-chaos -- --nodes 100 --minutes 2 --settle 12 --tail 20 \
		--kinds leader-mid-edge,api-crash,proxy,clock-jump,partition,replica \
		--kumaco $(TARGET_DIR)/debug/kumaco --json $(TARGET_DIR)/smoke-chaos.json

# The long chaos run of docs/benchmarks.md ("Reliability"): an hour of faults, release
# builds. A failing run prints its seed and the command that replays it.
chaos:
	$(CARGO) build --release --bin kumaco -p kumaco
	$(CARGO) run --release -p testkit --bin kumaco-chaos -- --minutes 60 --json $(TARGET_DIR)/kumaco-chaos.json

# The PodDisruptionBudget mode's short runs of docs/benchmarks.md ("Reliability"), debug
# builds: with kumaco's gate off the checker must find a refused drain (the run exits 1
# with that violation, which this target expects), with it on the run must pass. Not in `make smoke`:
# see docs/benchmarks.md for why.
CHAOS_BUDGETS_SEED ?= 4242
chaos-budgets:
	$(CARGO) build -q --bin kumaco
	! $(CARGO) run -q -p testkit --bin kumaco-chaos -- --seed $(CHAOS_BUDGETS_SEED) --budgets --minutes 3 --nodes 60 \
		--kumaco-arg=--pod-disruption-budgets=false \
		--kumaco $(TARGET_DIR)/debug/kumaco --json $(TARGET_DIR)/chaos-budgets-off.json \
		> $(TARGET_DIR)/chaos-budgets-off.log 2>&1
	grep -F 'a start whose drain a PodDisruptionBudget refuses' $(TARGET_DIR)/chaos-budgets-off.log
	$(CARGO) run -q -p testkit --bin kumaco-chaos -- --seed $(CHAOS_BUDGETS_SEED) --budgets --minutes 3 --nodes 60 \
		--kumaco $(TARGET_DIR)/debug/kumaco --json $(TARGET_DIR)/chaos-budgets.json

# The documented long differential run: 10^6 generated cases per parser.
diff-long:
	KUMACO_DIFF_CASES=1000000 $(CARGO) test --release --test diff_duration --test diff_selector --test diff_label_selector \
		--test diff_schedule -- --nocapture

# Builds (or finds in the cache) the test API server, the Go oracle, helm, kubectl
# and promtool, and the real node's kubelet, controller-manager, scheduler, containerd and
# pause image (testkit::nodebins).
testenv:
	$(CARGO) run -q -p testkit --bin testenv-path

# The image, with the Dockerfile's no-registry path (see its header): a static binary
# built here for this machine's architecture (hack/build-static.sh), the host's CA bundle,
# `FROM scratch`. Its own target dir keeps the debug build intact.
image:
	rm -rf $(CONTEXT) && mkdir -p $(CONTEXT)
	bash hack/build-static.sh $(HOST_TARGET) $(TARGET_DIR)/image $(CONTEXT)/kumaco
	cp /etc/ssl/certs/ca-certificates.crt $(CONTEXT)/
	# --no-cache: two COPY layers cost nothing, and the image's creation time then says
	# when it was last built, which tests/deploy_image.rs compares with the sources.
	$(ENGINE) build -q --no-cache --build-arg BINARY=prebuilt --build-arg BASE=scratch \
		-f Dockerfile -t $(IMAGE) $(CONTEXT)

# A release in dist/ (docs/releasing.md): for linux/amd64 and linux/arm64, a tarball with
# the static binary, LICENSE and README.md; the multi-arch image as an OCI archive (one
# manifest list, both platforms; COPY-only layers, so nothing runs under emulation); the
# chart (`helm package`); a CycloneDX SBOM of the binary's crates from Cargo.lock
# (cargo-cyclonedx); SHA256SUMS. hack/check-dist.sh then checks all of it, running the
# arm64 binary under qemu user emulation.
dist:
	rm -rf dist $(TARGET_DIR)/dist-stage && mkdir -p dist $(TARGET_DIR)/dist-stage
	for platform in $(PLATFORMS); do \
	  arch=$${platform%%:*}; triple=$${platform#*:}; \
	  name=kumaco-$(VERSION)-linux-$$arch; stage=$(TARGET_DIR)/dist-stage/$$name; \
	  bash hack/build-static.sh $$triple $(TARGET_DIR)/image $$stage/kumaco || exit 1; \
	  cp LICENSE README.md $$stage/; \
	  tar -C $(TARGET_DIR)/dist-stage --sort=name --owner=0 --group=0 --numeric-owner \
	    --mtime=@$(SOURCE_DATE_EPOCH) -czf dist/$$name.tar.gz $$name || exit 1; \
	  mkdir -p $(TARGET_DIR)/dist-stage/context-$$arch; \
	  cp $$stage/kumaco /etc/ssl/certs/ca-certificates.crt $(TARGET_DIR)/dist-stage/context-$$arch/; \
	done
	-$(ENGINE) manifest rm kumaco-dist:$(VERSION) >/dev/null 2>&1
	$(ENGINE) manifest create kumaco-dist:$(VERSION) >/dev/null
	for platform in $(PLATFORMS); do \
	  arch=$${platform%%:*}; \
	  $(ENGINE) build -q --no-cache --platform linux/$$arch --manifest kumaco-dist:$(VERSION) \
	    --build-arg BINARY=prebuilt --build-arg BASE=scratch -f Dockerfile \
	    $(TARGET_DIR)/dist-stage/context-$$arch >/dev/null || exit 1; \
	done
	$(ENGINE) manifest push -q --all kumaco-dist:$(VERSION) \
	  oci-archive:dist/kumaco-$(VERSION)-image.oci.tar:$(IMAGE)
	$(ENGINE) manifest rm kumaco-dist:$(VERSION) >/dev/null
	"$$($(CARGO) run -q -p testkit --bin testenv-path -- helm)" package charts/kumaco -d dist >/dev/null
	test -x $(CYCLONEDX_ROOT)/bin/cargo-cyclonedx || $(CARGO) install -q --locked \
	  cargo-cyclonedx --version $(CYCLONEDX_VERSION) --root $(CYCLONEDX_ROOT)
	$(CYCLONEDX) cyclonedx -q --manifest-path Cargo.toml --format json --spec-version 1.5 \
	  --no-build-deps --target all --override-filename kumaco-sbom
	# It writes one per workspace member, next to its Cargo.toml: the binary's is the root's.
	mv kumaco-sbom.json dist/kumaco-$(VERSION).cdx.json && rm -f */kumaco-sbom.json
	cd dist && sha256sum -- * > SHA256SUMS
	bash hack/check-dist.sh dist $(VERSION)
# deploy/components/prometheusrule/prometheusrule.yaml wraps the chart's rules file, the
# one source of kumaco's alerts (tests/alerts.rs checks that the two agree).
prometheusrule:
	@{ printf '%s\n' \
		'# Generated by `make prometheusrule` from charts/kumaco/files/prometheus-rules.yaml,' \
		'# the one source of the rules: edit that file, not this one.' \
		'apiVersion: monitoring.coreos.com/v1' \
		'kind: PrometheusRule' \
		'metadata:' \
		'  name: kumaco' \
		'  namespace: kumaco' \
		'  labels:' \
		'    app.kubernetes.io/name: kumaco' \
		'spec:'; \
	  grep -v '^#' charts/kumaco/files/prometheus-rules.yaml | sed 's/^/  /'; \
	} > deploy/components/prometheusrule/prometheusrule.yaml
