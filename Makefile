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
IMAGE_BIN := target/image/x86_64-unknown-linux-gnu/release/kumaco

.PHONY: demo test lint bench smoke diff-long testenv image

demo:
	$(CARGO) build -q --bin kumaco
	$(CARGO) run -q -p testkit --bin kumaco-demo

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
		--kumaco target/debug/kumaco --json target/smoke-bench.json
	$(CARGO) run -q -p testkit --bin kumaco-soak -- --nodes 100 --minutes 1 --churn-rate 20 \
		--kumaco target/debug/kumaco --json target/smoke-soak.json

# The documented long differential run: 10^6 generated cases per parser.
diff-long:
	KUMACO_DIFF_CASES=1000000 $(CARGO) test --release --test diff_duration --test diff_selector --test diff_schedule -- --nocapture

# Builds (or finds in the cache) the test API server and the Go oracle.
testenv:
	$(CARGO) run -q -p testkit --bin testenv-path

# The image, with the Dockerfile's no-registry path (see its header): a static binary
# built here (glibc with crt-static; kube uses rustls + ring, so nothing else is linked)
# and stripped, the host's CA bundle, `FROM scratch`. Its own target dir keeps the debug
# build intact.
image:
	RUSTFLAGS='-C target-feature=+crt-static' $(CARGO) build -q --release --locked \
		--target x86_64-unknown-linux-gnu --target-dir target/image --bin kumaco
	@if readelf -l $(IMAGE_BIN) | grep -q 'program interpreter'; then \
		echo "$(IMAGE_BIN) is dynamically linked: it cannot run FROM scratch" >&2; exit 1; fi
	rm -rf target/image/context && mkdir -p target/image/context
	# Symbols are a fifth of the binary and useless in the image (panics still name
	# their source location).
	strip -o target/image/context/kumaco $(IMAGE_BIN)
	cp /etc/ssl/certs/ca-certificates.crt target/image/context/
	# --no-cache: two COPY layers cost nothing, and the image's creation time then says
	# when it was last built, which tests/deploy_image.rs compares with the sources.
	$(ENGINE) build -q --no-cache --build-arg BINARY=prebuilt --build-arg BASE=scratch \
		-f Dockerfile -t $(IMAGE) target/image/context
