# ferro-ipam. A newcomer needs two commands: `make demo` and `make test`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
# Scenarios mostly wait on the API server, so more of them run at once than there are cores.
E2E_THREADS ?= 4

# $(call timed,NAME,COMMAND): runs COMMAND and says how long it took.
define timed
	@echo "==> $(1)"; s=$$(date +%s); $(2); echo "==> $(1): done in $$(( $$(date +%s) - s ))s"
endef

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: toolchains
toolchains:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
	@command -v go >/dev/null || { echo "go not found: install Go >= 1.26 (it builds the test control plane)"; exit 1; }

.PHONY: tools
tools: toolchains ## Build etcd, kube-apiserver and kubectl into ~/.cache/ferro-ipam (once per version)
	$(call timed,control-plane binaries,bash e2e/tools/build.sh >/dev/null)

.PHONY: build
build: toolchains ## Build the ferro-ipam binary (debug, as the tests and demo use it)
	$(call timed,cargo build,$(CARGO) build --workspace --bins)

.PHONY: release
release: toolchains ## Build the ferro-ipam binary optimised
	$(CARGO) build --release --bin ferro-ipam

.PHONY: crds
crds: toolchains ## Regenerate crds/ from the Rust types
	$(CARGO) run --quiet --bin ferro-ipam -- crds --output-dir crds

.PHONY: lint
lint: toolchains ## cargo fmt --check and clippy -D warnings
	$(call timed,fmt,$(CARGO) fmt --all -- --check)
	$(call timed,clippy,$(CARGO) clippy --workspace --all-targets -- -D warnings)

.PHONY: unit
unit: toolchains ## Unit, property and CRD tests (no API server)
	$(call timed,unit and property tests,$(CARGO) test -p ferro-ipam --lib --bins --tests)

.PHONY: e2e
e2e: tools build ## The end-to-end suite against a real kube-apiserver and etcd
	$(call timed,e2e scenarios,$(CARGO) test -p ferro-ipam-e2e --test scenarios -- --test-threads $(E2E_THREADS))

.PHONY: test
test: ## Everything CI runs: lint, unit and property tests, e2e
	$(call timed,make test,$(MAKE) --no-print-directory lint unit e2e)

.PHONY: demo
demo: tools build ## Start a local control plane, run ferro-ipam, allocate from the example pools
	./target/debug/ferro-ipam-demo

.PHONY: bench-allocator
bench-allocator: toolchains ## Criterion benchmarks of the allocator
	$(CARGO) bench --bench allocator
