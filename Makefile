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
IMAGE_BIN := $(TARGET_DIR)/image/x86_64-unknown-linux-gnu/dist/kumaco

.PHONY: demo demo-node test lint bench smoke chaos diff-long testenv image prometheusrule

# Prerequisites first: before any recipe runs, hack/check-prereqs.sh checks what the goals
# given (`make` alone: demo) need on this machine, and stops with one message naming each
# missing program and the command that installs it. KUMACO_SKIP_PREREQS=1 skips it.
CHECKED_GOALS := $(filter demo demo-node test lint bench smoke chaos diff-long testenv image,$(or $(MAKECMDGOALS),demo))
ifneq ($(CHECKED_GOALS),)
ifneq ($(KUMACO_SKIP_PREREQS),1)
PREREQS_OK := $(shell ENGINE='$(ENGINE)' bash hack/check-prereqs.sh $(CHECKED_GOALS) >&2 && echo yes)
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
test: image
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) check -q --manifest-path fuzz/Cargo.toml

bench:
	$(CARGO) bench --bench schedule --bench selector --bench windows --bench pass

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
# built here (glibc with crt-static; kube uses rustls + ring, so nothing else is linked)
# and stripped, the host's CA bundle, `FROM scratch`. Its own target dir keeps the debug
# build intact.
image:
	RUSTFLAGS='-C target-feature=+crt-static' $(CARGO) build -q --profile dist --locked \
		--target x86_64-unknown-linux-gnu --target-dir $(TARGET_DIR)/image --bin kumaco
	@if readelf -l $(IMAGE_BIN) | grep -q 'program interpreter'; then \
		echo "$(IMAGE_BIN) is dynamically linked: it cannot run FROM scratch" >&2; exit 1; fi
	rm -rf $(TARGET_DIR)/image/context && mkdir -p $(TARGET_DIR)/image/context
	# Symbols are a fifth of the binary and useless in the image (panics still name
	# their source location).
	strip -o $(TARGET_DIR)/image/context/kumaco $(IMAGE_BIN)
	cp /etc/ssl/certs/ca-certificates.crt $(TARGET_DIR)/image/context/
	# --no-cache: two COPY layers cost nothing, and the image's creation time then says
	# when it was last built, which tests/deploy_image.rs compares with the sources.
	$(ENGINE) build -q --no-cache --build-arg BINARY=prebuilt --build-arg BASE=scratch \
		-f Dockerfile -t $(IMAGE) $(TARGET_DIR)/image/context
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
