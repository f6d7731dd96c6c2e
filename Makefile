# ferro-ipam: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: rust
rust: ## Make sure a Rust toolchain is there
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }

.PHONY: build
build: rust ## Build the ferro-ipam binary (release)
	$(CARGO) build --release --bin ferro-ipam

.PHONY: crds
crds: rust ## Regenerate crds/ from the Rust types
	$(CARGO) run --quiet --bin ferro-ipam -- crds --output-dir crds

.PHONY: lint
lint: rust ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets --workspace -- -D warnings

.PHONY: unit
unit: rust ## Unit, property and CRD tests (no API server)
	$(CARGO) test --workspace --lib --bins --tests

.PHONY: test
test: lint unit ## Everything CI runs
	@echo "make test: all passed"

.PHONY: bench-allocator
bench-allocator: rust ## Criterion benchmarks of the allocator
	$(CARGO) bench --bench allocator

.PHONY: demo
demo: build ## Start a local control plane, run ferro-ipam, allocate from example pools
	@echo "make demo needs the local control plane, which is not built yet (issue 3)."; exit 1
