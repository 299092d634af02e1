# The two commands of the README:
#   make demo   a local API server with sample nodes, kumaco working on them
#   make test   every test (unit, differential against Go, integration against a real API server)

CARGO ?= cargo

.PHONY: demo test lint bench smoke chaos diff-long testenv

demo:
	$(CARGO) build -q --bin kumaco
	$(CARGO) run -q -p testkit --bin kumaco-demo

test:
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) check -q --manifest-path fuzz/Cargo.toml

bench:
	$(CARGO) bench --bench schedule --bench selector --bench windows

# The scale and soak harnesses, small and with debug builds: CI runs them so that they
# keep working. Their real runs (release, 1,000-10,000 nodes) are in docs/benchmarks.md.
smoke:
	$(CARGO) build -q --bin kumaco
	$(CARGO) run -q -p testkit --bin kumaco-bench -- --nodes 200 --edge-nodes 100 --idle 5 \
		--churn-rate 20 --churn-seconds 5 \
		--kumaco target/debug/kumaco --json target/smoke-bench.json
	$(CARGO) run -q -p testkit --bin kumaco-soak -- --nodes 100 --minutes 1 --churn-rate 20 \
		--kumaco target/debug/kumaco --json target/smoke-soak.json
	$(CARGO) run -q -p testkit --bin kumaco-chaos -- --nodes 100 --minutes 2 --settle 12 --tail 20 \
		--kinds leader-mid-edge,api-crash,proxy,clock-jump,partition,replica \
		--kumaco target/debug/kumaco --json target/smoke-chaos.json

# The long chaos run of docs/benchmarks.md ("Reliability"): an hour of faults, release
# builds. A failing run prints its seed and the command that replays it.
chaos:
	$(CARGO) build --release --bin kumaco -p kumaco
	$(CARGO) run --release -p testkit --bin kumaco-chaos -- --minutes 60 --json target/kumaco-chaos.json

# The documented long differential run: 10^6 generated cases per parser.
diff-long:
	KUMACO_DIFF_CASES=1000000 $(CARGO) test --release --test diff_duration --test diff_selector --test diff_schedule -- --nocapture

# Builds (or finds in the cache) the test API server and the Go oracle.
testenv:
	$(CARGO) run -q -p testkit --bin testenv-path
