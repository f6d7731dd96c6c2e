# ferro-ipam. A newcomer needs two commands: `make demo` and `make test`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
# Scenarios mostly wait on the API server, so more of them run at once than there are cores.
E2E_THREADS ?= 4
# Fault tests mostly wait out leases and outages; four of them start a control plane of their own.
FAULT_THREADS ?= 2

# $(call timed,NAME,COMMAND): runs COMMAND and says how long it took, and appends that to
# STAGE_TIMES (with the lane it ran in: e2e/tools/lanes.sh sets LANE; a failed stage too, marked
# so), which `make test` prints as a table at its end.
STAGE_TIMES := $(CURDIR)/target/stage-times.tsv
define timed
	@echo "==> $(1)"; s=$$(date +%s); rc=0; ( $(2) ) || rc=$$?; t=$$(( $$(date +%s) - s )); \
	  if [ $$rc = 0 ]; then outcome=done; else outcome=FAILED; fi; echo "==> $(1): $$outcome in $${t}s"; \
	  mkdir -p $(dir $(STAGE_TIMES)) && printf '%s\t%s\t%s\n' "$${LANE:-main}" "$(1)$$([ $$rc = 0 ] || echo ' (FAILED)')" "$$t" >>$(STAGE_TIMES); \
	  exit $$rc
endef

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: toolchains
toolchains:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
	@command -v go >/dev/null || { echo "go not found: install Go >= 1.26 (it builds the test control plane)"; exit 1; }

.PHONY: tools
tools: toolchains prometheus ## Build etcd, kube-apiserver and kubectl into ~/.cache/ferro-ipam (once per version)
	$(call timed,control-plane binaries,bash e2e/tools/build.sh >/dev/null)

.PHONY: install-tools
install-tools: toolchains ## Build crane, helm and clusterctl into ~/.cache/ferro-ipam (once per version)
	$(call timed,crane helm clusterctl,for tool in crane helm clusterctl; do bash e2e/tools/go-tool.sh $$tool >/dev/null; done)

# The metrics e2e test scrapes ferro-ipam with a real Prometheus: Debian's package, run as a plain
# process on loopback (on a machine with systemd, the package also enables a prometheus service).
.PHONY: prometheus
prometheus: ## Install prometheus and promtool with apt-get when they are missing
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  command -v apt-get >/dev/null || { echo "prometheus/promtool not found and no apt-get: install Prometheus 2.x"; exit 1; }; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  install="$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus"; \
	  echo "==> installing Debian's prometheus package"; \
	  $$install >/dev/null || { $$sudo apt-get update >/dev/null && $$install >/dev/null; }; \
	fi

# The fault suite runs a replica under a skewed clock with Debian's faketime (libfaketime).
.PHONY: faketime
faketime: ## Install faketime (libfaketime) with apt-get when it is missing
	@if ! command -v faketime >/dev/null; then \
	  command -v apt-get >/dev/null || { echo "faketime not found and no apt-get: install libfaketime"; exit 1; }; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  install="$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends faketime"; \
	  echo "==> installing Debian's faketime package"; \
	  $$install >/dev/null || { $$sudo apt-get update >/dev/null && $$install >/dev/null; }; \
	fi

# The e2e node: kubelet, containerd and runc need Debian's libseccomp headers to build runc,
# iptables and conntrack for kube-proxy, and the br_netfilter module for bridged Service traffic.
.PHONY: node-packages
node-packages: ## Install what the e2e node needs from Debian (libseccomp-dev, iptables, conntrack) when missing
	@missing=""; \
	  [ -f /usr/include/seccomp.h ] || missing="$$missing libseccomp-dev"; \
	  command -v iptables >/dev/null || missing="$$missing iptables"; \
	  command -v conntrack >/dev/null || missing="$$missing conntrack"; \
	  command -v nsenter >/dev/null || missing="$$missing util-linux"; \
	  if [ -n "$$missing" ]; then \
	    command -v apt-get >/dev/null || { echo "missing:$$missing (and no apt-get)"; exit 1; }; \
	    sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	    install="$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends$$missing"; \
	    echo "==> installing Debian's$$missing"; \
	    $$install >/dev/null || { $$sudo apt-get update >/dev/null && $$install >/dev/null; }; \
	  fi
	@[ -d /proc/sys/net/bridge ] || modprobe br_netfilter || { echo "the e2e node needs the br_netfilter kernel module"; exit 1; }

.PHONY: node-tools
node-tools: toolchains node-packages install-tools ## Build kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd, runc and the CNI plugins (once per version)
	$(call timed,node binaries,bash e2e/tools/node/build.sh >/dev/null)

.PHONY: build
build: toolchains ## Build the ferro-ipam binary (debug, as the tests and demo use it)
	$(call timed,cargo build,$(CARGO) build --locked --workspace --bins)

.PHONY: release
release: toolchains ## Build the ferro-ipam binary optimised, its bytes independent of the directory it is built in
	$(call timed,release build,CARGO=$(CARGO) bash deploy/dist/release-build.sh --bin ferro-ipam)

.PHONY: image
image: release ## Build the OCI image target/image/ferro-ipam-<version>.tar with crane (no container engine)
	$(call timed,image,bash deploy/image/build.sh >/dev/null)

# The files of a release in dist/ (deploy/dist/dist.sh; RELEASING.md publishes them). VERSION
# defaults to Cargo.toml's; DIST_DIR and DIST_ALLOW_DIRTY=1 are for tests.
VERSION ?=
.PHONY: dist
dist: release ## Release files in dist/: image tarball and digest, install.yaml, clusterctl files, chart, binary, SBOM, SHA256SUMS
	$(call timed,dist,VERSION=$(VERSION) bash deploy/dist/dist.sh)

# Two runs of dist.sh from this tree, which need not be committed; check.sh compares them.
.PHONY: docs
docs: ## The user book and the contributor guide (mdBook) into target/book, its links checked
	$(call timed,mdbook,bash deploy/dist/cargo-tool.sh mdbook >/dev/null)
	$(call timed,book,$$(bash deploy/dist/cargo-tool.sh mdbook 2>/dev/null | tail -1)/bin/mdbook build docs >/dev/null \
	  && python3 e2e/tools/check-book.py target/book docs)

.PHONY: test-dist
test-dist: release ## make dist twice: the runs byte-identical, SHA256SUMS verified, the image digest in the chart and manifests; the Dockerfile gives the same image
	@rm -rf target/dist-check
	$(call timed,dist (first run),DIST_ALLOW_DIRTY=1 DIST_DIR=target/dist-check/first bash deploy/dist/dist.sh)
	$(call timed,dist (second run),DIST_ALLOW_DIRTY=1 DIST_DIR=target/dist-check/second bash deploy/dist/dist.sh)
	$(call timed,dist checks,bash deploy/dist/check.sh target/dist-check/first target/dist-check/second \
	  && python3 deploy/image/check-dockerfile.py target/dist-check/first/ferro-ipam-image-v*.tar)

# The release binary built once more from a copy of the tree in another directory, with nothing
# shared: the same bytes, so dist/ is the same wherever it is made (deploy/dist/rebuild-check.sh).
.PHONY: test-rebuild
test-rebuild: release ## Build the release binary a second time elsewhere and compare the bytes
	$(call timed,second release build,nice -n 10 bash deploy/dist/rebuild-check.sh)

.PHONY: crds
crds: toolchains ## Regenerate crds/ from the Rust types (and ipam-components.yaml, which holds them)
	$(CARGO) run --locked --quiet --bin ferro-ipam -- crds --output-dir crds
	@$(MAKE) --no-print-directory release-manifests

.PHONY: release-manifests
release-manifests: toolchains ## Regenerate ipam-components.yaml and the Helm chart's manifests from deploy/ (kustomize)
	@dir=$$(bash e2e/tools/build.sh | tail -1); \
	  "$$dir/bin/kubectl" kustomize deploy/clusterctl > deploy/clusterctl/ipam-components.yaml; \
	  "$$dir/bin/kubectl" kustomize deploy/with-monitoring > deploy/chart/files/manifests.yaml; \
	  cp deploy/network-policy/networkpolicy.yaml deploy/chart/files/networkpolicy.yaml; \
	  cp deploy/cert-manager/certificate.yaml deploy/chart/files/cert-manager.yaml; \
	  echo "==> deploy/clusterctl/ipam-components.yaml and deploy/chart/files/ regenerated"

.PHONY: metrics-plot
metrics-plot: tools build ## Redraw docs/metrics-dashboard.png from a real scrape (needs python3 with matplotlib)
	rm -rf target/metrics-plot
	FERRO_IPAM_METRICS_DUMP=$(CURDIR)/target/metrics-plot $(CARGO) test -p ferro-ipam-e2e --test scenarios \
	  operations::prometheus -- --nocapture
	python3 docs/tools/plot-dashboard.py target/metrics-plot docs/metrics-dashboard.png

# The dependency policy (deny.toml) with cargo-deny, built once from crates.io into the cache.
# Advisories need the network (the RustSec database): `make deny-advisories` where there is one.
CARGO_DENY = $$(bash deploy/dist/cargo-tool.sh cargo-deny 2>/dev/null | tail -1)/bin/cargo-deny

.PHONY: lint
lint: toolchains ## cargo fmt --check, clippy -D warnings, and cargo deny's licences, bans and sources
	$(call timed,fmt,$(CARGO) fmt --all -- --check)
	$(call timed,clippy,$(CARGO) clippy --workspace --all-targets -- -D warnings)
	$(call timed,cargo-deny,bash deploy/dist/cargo-tool.sh cargo-deny >/dev/null)
	$(call timed,cargo deny,$(CARGO_DENY) --locked check licenses bans sources)

.PHONY: deny-advisories
deny-advisories: toolchains ## cargo deny's advisories (needs the network: it fetches the RustSec database). Not in `make test`
	$(CARGO_DENY) --locked check advisories

.PHONY: unit
unit: toolchains ## Unit, property and CRD tests; the e2e checker's and the benchmark's own tests (no API server)
	$(call timed,unit and property tests,$(CARGO) test -p ferro-ipam --lib --bins --tests)
	$(call timed,heap trim,$(CARGO) test -p heap-trim)
	$(call timed,invariant checker and benchmark tests,$(CARGO) test -p ferro-ipam-e2e --lib --bins)
	$(call timed,the soak's history checker and fault plan,$(CARGO) test -p ferro-ipam-e2e --test soak -- --skip a_seeded_nemesis)

.PHONY: e2e
e2e: tools install-tools build ## The end-to-end suite against a real kube-apiserver and etcd
	$(call timed,e2e scenarios,$(CARGO) test -p ferro-ipam-e2e --test scenarios -- --test-threads $(E2E_THREADS))
	$(call timed,e2e migration,$(CARGO) test -p ferro-ipam-e2e --test migration)

# The user pages' shell blocks (```sh, ```console) against the demo's plane: docs/development.md.
.PHONY: test-docs
test-docs: tools build ## Run every runnable command of the user pages against the demo plane, compare the output shown
	$(call timed,docs,$(CARGO) test -p ferro-ipam-e2e --test docs)

# The scenarios of the CAPI IPAM contract (claim lifecycle, pause rules, release, grace period,
# adoption, the consumers' claims) once more, against Cluster API 1.10's CRDs: IPAddressClaim,
# IPAddress and Cluster served and stored as v1beta1 only.
CONTRACT_V1BETA1_SCENARIOS := in_cluster:: lifecycle:: consumers::

.PHONY: test-contract-v1beta1
test-contract-v1beta1: tools build ## The v1beta1 contract (Cluster API 1.6 to 1.10): the contract scenarios on v1beta1-only CRDs
	$(call timed,e2e v1beta1 contract,FERRO_IPAM_E2E_CAPI=v1beta1 $(CARGO) test -p ferro-ipam-e2e --test scenarios -- \
	  --test-threads $(E2E_THREADS) $(CONTRACT_V1BETA1_SCENARIOS))

# Takeover times and other numbers of the run go to target/fault-report.txt, printed at the end.
.PHONY: test-faults
test-faults: tools build faketime ## Fault injection: API server, etcd, partitions, frozen leader, skewed clocks, SIGTERM
	@mkdir -p target && rm -f target/fault-report.txt
	$(call timed,e2e faults,$(CARGO) test -p ferro-ipam-e2e --lib --test faults -- --test-threads $(FAULT_THREADS) \
	  || { cat target/fault-report.txt 2>/dev/null; exit 1; })
	@cat target/fault-report.txt

# Pools shared through a hub: three control planes of the test's own (the hub, spoke-a, spoke-b),
# a ferro-ipam on each, set up with the plain kubectl of e2e/tests/hub/operator/; 1,000 claims per
# spoke checked across the three clusters, the blocks' return, the spokes' least-privilege Role.
.PHONY: test-hub
test-hub: tools build ## Shared pools through a hub: a hub and two spokes, 1,000 claims per spoke, no address twice across the clusters
	$(call timed,e2e hub,$(CARGO) test -p ferro-ipam-e2e --test hub)

# The soak: a seeded nemesis (faults alone and overlapping) under a changing workload, and a
# history checker of every IPAddress (docs/soak.md). SOAK_MINUTES is the whole run, start-up
# and final checks included; SOAK_SEED replays a run (a random one is printed when unset).
SOAK_MINUTES ?= 3
SOAK_SEED ?=
SOAK_REPLICAS ?= 3
# The seed of the short soak in `make test`, so that CI runs one plan every time.
TEST_SOAK_SEED ?= 2323

.PHONY: soak
soak: tools build faketime ## The soak: seeded random faults and pool edits, a history checker (SOAK_MINUTES, SOAK_SEED, SOAK_REPLICAS)
	$(call timed,soak,SOAK_MINUTES=$(SOAK_MINUTES) SOAK_SEED=$(SOAK_SEED) SOAK_REPLICAS=$(SOAK_REPLICAS) \
	  $(CARGO) test -p ferro-ipam-e2e --test soak -- --nocapture)

.PHONY: test-soak
test-soak: tools build faketime ## The short seeded soak of `make test` (about 3 minutes)
	$(call timed,soak (seed $(TEST_SOAK_SEED)),SOAK_MINUTES=3 SOAK_SEED=$(TEST_SOAK_SEED) SOAK_REPLICAS=3 \
	  $(CARGO) test -p ferro-ipam-e2e --test soak -- --nocapture)

# The shipped image as pods on a real node; each scenario's times go to target/node-report.txt.
# The node runs a release's files: NODE_DIST, made from this tree as `make dist` makes them
# (uncommitted changes allowed: it is not a release). Its image is loaded into the node from
# the archive; the kubectl, Helm and clusterctl installs use its files alone.
NODE_DIST ?= target/node-dist
.PHONY: test-node
test-node: tools node-tools release previous-dist ## A release's image and files as pods on a real node: installs, upgrades from the previous release, takeover, rollout, PDB, garbage collection, namespace deletion
	@mkdir -p target && rm -f target/node-report.txt
	$(call timed,dist for the node,DIST_ALLOW_DIRTY=1 DIST_DIR=$(NODE_DIST) bash deploy/dist/dist.sh)
	$(call timed,e2e node,FERRO_IPAM_DIST=$(abspath $(NODE_DIST)) \
	  FERRO_IPAM_PREVIOUS_DIST=$$(bash e2e/tools/previous-release.sh 2>/dev/null | tail -1) $(CARGO) test -p ferro-ipam-e2e --test node -- --test-threads 1 \
	  || { cat target/node-report.txt 2>/dev/null; exit 1; })
	@cat target/node-report.txt

# The previous release's files, which the node's upgrade scenario starts from: the commit and
# version in e2e/tools/previous-release/, built by that commit's own dist.sh once and kept in
# ~/.cache/ferro-ipam (e2e/tools/previous-release.sh). After `release`, whose dependencies seed it.
.PHONY: previous-dist
previous-dist: tools install-tools release ## The previous release's dist/ for the upgrade tests, built once into ~/.cache/ferro-ipam
	$(call timed,previous release,bash e2e/tools/previous-release.sh >/dev/null)

.PHONY: cluster
cluster: tools node-tools image ## A control plane and a node running ferro-ipam's image as pods, until Ctrl-C
	$(CARGO) build --locked --bin ferro-ipam-cluster -p ferro-ipam-e2e
	./target/debug/ferro-ipam-cluster target/image/ferro-ipam-v$$($(CARGO) pkgid -p ferro-ipam | sed 's/.*[#@]//').tar

# `make test` runs the linters and builds everything first, then two lanes side by side
# (e2e/tools/lanes.sh): the node, and everything else (what needs no API server, then the suites
# on bare control planes of their own: separate processes, ports and data directories).
# LANES_SERIAL=1 runs the two lanes one after the other. rustc runs behind sccache
# (e2e/tools/compile-cache.sh), so a clean clone compiles only what changed since the last run;
# FERRO_IPAM_COMPILE_CACHE=0 turns it off.
NODE_LANE := test-node
PLANE_LANE := unit docs test-dist e2e test-docs test-contract-v1beta1 test-faults test-hub test-soak test-rebuild

.PHONY: test
test: disk-space ## Everything CI runs: lint, unit and property tests, the book, reproducible dist/, e2e (both contracts), the docs' commands, fault injection, the soak, the node
	@mkdir -p target && rm -f $(STAGE_TIMES)
	@s=$$(date +%s); rc=0; \
	  cache=$$(bash e2e/tools/compile-cache.sh start); \
	  [ -z "$$cache" ] || export $$cache; \
	  $(MAKE) --no-print-directory lint test-prepare \
	    && bash e2e/tools/lanes.sh node="$(NODE_LANE)" plane="$(PLANE_LANE)" || rc=$$?; \
	  printf 'main\tmake test\t%s\n' $$(( $$(date +%s) - s )) >>$(STAGE_TIMES); \
	  bash e2e/tools/stage-table.sh $(STAGE_TIMES); \
	  [ -z "$$cache" ] || bash e2e/tools/compile-cache.sh stop; \
	  exit $$rc

# Everything both lanes build, built once before they start, so that they do not wait on each
# other's builds (Cargo builds one at a time in a target directory) or race to fill the tool
# cache. The test binaries are built as the lanes' own commands build them, so that they find
# them built.
.PHONY: test-prepare
test-prepare: tools install-tools node-tools faketime build release previous-dist
	$(call timed,test binaries,$(CARGO) test --locked -p ferro-ipam --lib --bins --tests --no-run \
	  && $(CARGO) test --locked -p heap-trim --no-run \
	  && $(CARGO) test --locked -p ferro-ipam-e2e --lib --bins --tests --no-run)

# A cold `make test` writes several GiB: the debug target alone is about 5 GiB without
# incremental caches, then the release target, etcd's data and the node's images. A disk that
# fills midway shows up as a linker's "Bus error" deep in a build, so check first and say what
# is missing.
TEST_MIN_FREE_GIB ?= 12
.PHONY: disk-space
disk-space:
	@for dir in . "$${TMPDIR:-/tmp}"; do \
	  free=$$(df -Pk "$$dir" | awk 'NR == 2 { print int($$4 / 1048576) }'); \
	  if [ "$$free" -lt $(TEST_MIN_FREE_GIB) ]; then \
	    echo "ERROR: $$(cd "$$dir" && pwd) has $$free GiB free; make test needs about $(TEST_MIN_FREE_GIB) GiB (TEST_MIN_FREE_GIB). Free some space (cargo clean in old checkouts) and run it again." >&2; \
	    exit 1; \
	  fi; \
	done

.PHONY: demo
demo: tools build ## Start a local control plane, run ferro-ipam, allocate from the example pools
	./target/debug/ferro-ipam-demo

.PHONY: bench-allocator
bench-allocator: toolchains ## Criterion benchmarks of the allocator
	$(CARGO) bench --bench allocator

.PHONY: bench
bench: tools ## End-to-end benchmark vs the in-cluster provider (hours; BENCH_QUICK=1: minutes). Not in `make test`
	CARGO=$(CARGO) bash deploy/dist/release-build.sh --bin ferro-ipam -p ferro-ipam
	CARGO=$(CARGO) bash deploy/dist/release-build.sh --bin ferro-ipam-bench -p ferro-ipam-e2e
	FERRO_IPAM_BIN=$${FERRO_IPAM_BIN:-$(CURDIR)/target/release/ferro-ipam} ./target/release/ferro-ipam-bench
	python3 e2e/tools/bench-plot.py target/bench/results.json target/bench/claims-per-second.png || \
	  echo "no plot: python3 with matplotlib is needed (pip install matplotlib)"
