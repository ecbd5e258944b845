# edgefleet — `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
GO ?= go
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
# `make test` runs two lanes side by side, each one package after another: two cores are
# shared by several kube-apiservers already (the main lane at -p 2 took make test from about
# 2,600 s to 2,844 s, the cores 95 % busy). The machines lane runs the packages that build
# clusters on real test hosts and boot qemu guests, one after the other: the end-to-end suite
# (REALHOSTS_SUITE, about 35 minutes), then REALHOSTS_AFTER, the site image's boot (HEAVY_PKGS)
# and the agent's VM test (QEMU_PKGS). Run beside each other, their hosts and guests starve:
# an SSH handshake of bpa/cluster timed out (15 s) at a load average of 24; the site image's
# guest, which starts the site stack under systemd's timeouts, did not reach ready in 35 minutes
# at nice 19 beside the two lanes, nor 23 minutes at nice 10; run at normal priority beside the
# real-hosts suite its guests took both cores and the application's requests timed out (2 s).
# The agent's VM test ran from the start at nice 19 in a lane of its own until it took 3,331 s
# and then 3,497 s (red) in make test, 8m35s alone: at nice 19 it got next to nothing until the
# other lanes ended, and then ran alone anyway. The main lane runs every other package
# (RACE_PKGS first, with -race), the simulated fleet (MAIN_AFTER) last. The timeouts only bound
# a hung run.
GO_TEST_FLAGS ?= -count=1 -p 1 -timeout 45m
# The unit and envtest packages the race detector checks in make test (the main lane runs them
# with -race, the rest without): those whose run it does not stretch several times over (it
# did pkg/artifacts' 13 s to 402 s and artifactapi's 21 s to 181 s: hashing and copying bytes).
RACE_PKGS := ./api/... ./pkg/... ./apiproxy/... ./kms/transit ./hack/testreport ./cli/cmd \
	./global-controller/reconcilers/campaign/plan ./global-controller/webhooks
RACE_EXCLUDE := .*/pkg/artifacts
REALHOSTS_TEST_FLAGS ?= -count=1 -timeout 70m
REALHOSTS_SUITE := ./e2e/realhosts
REALHOSTS_AFTER := ./bpa/cluster
HEAVY_PKGS := ./usb-image
QEMU_PKGS := ./test/ipa
# A simulated fleet (no guest, no test host), at the main lane's end.
MAIN_AFTER := ./e2e/scale
# Each lane's `go test -json` records and the ginkgo suites' JSON reports, read for the table of
# package, test and spec times that ends `make test`.
TEST_REPORT := $(BIN)/test-report
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/edgefleet/edgefleet/pkg/version.Version=$(VERSION)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## Build kube-apiserver, kubelet, kube-proxy, kube-controller-manager, kube-scheduler, kubectl (Kubernetes v1.36.3 and v1.35.8), etcd, controller-gen, golangci-lint, Metal3's baremetal-operator (bmo), Vault, CoreDNS from source, the test hosts' Debian rootfs, Ironic 29's Debian trixie tree the Ironic Python Agent's ramdisk (bin/ipa) and the OS disk image it writes (bin/osimage) (needs root) and the node runtime's Debian packages into bin/ (cached per user); install Debian's chromium (the web UI's browser tests) and qemu-system-x86 with ovmf (the site image's boot test) and xorriso (the small ISO images of tests), and Node.js (the web UI's CSR code test) when they are missing.
	hack/tools.sh

.PHONY: generate
generate: ## Generate deepcopy code for api/.
	hack/tools.sh controller-gen
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs into deploy/crds/{global,site}, the controllers' RBAC into deploy/rbac and the global controller's webhook configuration into deploy/webhook.
	hack/tools.sh controller-gen
	$(CONTROLLER_GEN) crd paths=./api/fleet/... output:crd:artifacts:config=deploy/crds/global
	$(CONTROLLER_GEN) crd paths=./api/site/... output:crd:artifacts:config=deploy/crds/site
	$(CONTROLLER_GEN) rbac:roleName=edgefleet-global-controller paths=./global-controller/... output:rbac:artifacts:config=deploy/rbac/global-controller
	$(CONTROLLER_GEN) webhook paths=./global-controller/... output:webhook:artifacts:config=deploy/webhook/global-controller
	$(CONTROLLER_GEN) rbac:roleName=edgefleet-local-controller paths=./local-controller/... output:rbac:artifacts:config=deploy/rbac/local-controller
	$(CONTROLLER_GEN) rbac:roleName=edgefleet-bpa paths=./bpa/... output:rbac:artifacts:config=deploy/rbac/bpa

.PHONY: verify-gen
verify-gen: generate manifests ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api deploy)" ]; then \
		echo "generated files are stale; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api deploy; git --no-pager diff --stat -- api deploy; exit 1; fi

.PHONY: build
build: ## Build bin/global-controller, bin/local-controller, bin/bpa, bin/edgefleet-kms (the KMS v2 plugin), bin/edgefleet-apiproxy (a host's endpoint of its cluster's API servers) and bin/edgefleet (the CLI).
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/global-controller ./global-controller
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/local-controller ./local-controller
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/bpa ./bpa
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/edgefleet-kms ./kms
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/edgefleet-apiproxy ./apiproxy
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/edgefleet ./cli

.PHONY: test-bins
test-bins: ## Build the demo's test binaries, never shipped: bin/local-controller-simulated (the local controller with test/sitesim's node simulator: the demo's site-b, whose nodes are simulated).
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/local-controller-simulated ./test/sitesim/localcontroller

.PHONY: usb-image
usb-image: tools build ## Build the generic base image of a site's bootstrap machine (usb-image/build.sh, needs root; the site stack from bin/), cached per user, linked at bin/edgefleet-base.iso.
	@iso=$$(usb-image/build.sh "$${EDGEFLEET_TOOLS_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/edgefleet/tools}" $(BIN)) && ln -sfn "$$iso" $(BIN)/edgefleet-base.iso && echo "bin/edgefleet-base.iso -> $$iso"

.PHONY: test
test: tools build ## Run every test: unit, envtest (real kube-apiserver + etcd) and end-to-end; ends with a table of each package's time, the slow tests and specs, and the CPU time by package (bin/test-report/).
	@pkgs=$$($(GO) list ./... | grep -v -x -e '.*/e2e/realhosts' -e '.*/bpa/cluster' -e '.*/usb-image' -e '.*/test/ipa' -e '.*/e2e/scale'); \
	rm -rf $(TEST_REPORT); mkdir -p $(TEST_REPORT); $(GO) build -o $(BIN)/testreport ./hack/testreport; start=$$SECONDS; \
	export EDGEFLEET_SPEC_REPORT_DIR=$(TEST_REPORT); \
	$(BIN)/testreport -sample-cpu $(TEST_REPORT)/run.cpu.json & sampler=$$!; \
	( lane=0; \
		$(GO) test -json $(REALHOSTS_TEST_FLAGS) $(REALHOSTS_SUITE) | $(BIN)/testreport -record $(TEST_REPORT)/machines.json -lane machines || lane=1; \
		$(GO) test -json $(REALHOSTS_TEST_FLAGS) $(REALHOSTS_AFTER) | $(BIN)/testreport -record $(TEST_REPORT)/machines.json -lane machines || lane=1; \
		$(GO) test -json $(GO_TEST_FLAGS) $(HEAVY_PKGS) | $(BIN)/testreport -record $(TEST_REPORT)/machines.json -lane machines || lane=1; \
		$(GO) test -json $(GO_TEST_FLAGS) $(QEMU_PKGS) | $(BIN)/testreport -record $(TEST_REPORT)/machines.json -lane machines || lane=1; \
		exit $$lane ) & machines=$$!; \
	status=0; race=$$($(GO) list $(RACE_PKGS) | grep -v -x -e '$(RACE_EXCLUDE)'); \
	$(GO) test -json -race $(GO_TEST_FLAGS) $$race | $(BIN)/testreport -record $(TEST_REPORT)/main.json -lane main || status=$$?; \
	$(GO) test -json $(GO_TEST_FLAGS) $$(grep -v -x -F -f <(echo "$$race") <<<"$$pkgs") | $(BIN)/testreport -record $(TEST_REPORT)/main.json -lane main || status=$$?; \
	$(GO) test -json $(GO_TEST_FLAGS) $(MAIN_AFTER) | $(BIN)/testreport -record $(TEST_REPORT)/main.json -lane main || status=$$?; \
	wait $$machines || status=$$?; \
	kill $$sampler 2>/dev/null || true; wait $$sampler || status=$$?; \
	echo; echo "make test: each package's time (go test -json), slowest first"; \
	shopt -s nullglob; $(BIN)/testreport -table $(TEST_REPORT)/main.json $(TEST_REPORT)/machines.json $(TEST_REPORT)/*.ginkgo.json $(TEST_REPORT)/run.cpu.json; \
	echo "make test: exit $$status after $$((SECONDS - start)) s"; exit $$status

.PHONY: test-e2e
test-e2e: tools build ## Run only the end-to-end ginkgo suites in e2e/.
	$(GO) test $(GO_TEST_FLAGS) ./e2e/... -ginkgo.v

# Go benchmarks run only in the packages that have some: `go test` runs every package's TestMain,
# and most of those start control planes.
BENCH_PKGS = $(shell grep -rl --include='*_test.go' '^func Benchmark' . | xargs -r -n1 dirname | sort -u)
# The Artifacts harness (hack/bench/artifacts): REST API vs raw GridFS, then the controller's peak RSS at
# 1, 10 and 50 concurrent 100 MiB transfers (-concurrency, -concurrent-sizes), see docs/benchmarks.md.
ARTIFACTS_BENCH_FLAGS ?= -sizes 256MiB,2GiB -timeout 20m
# The Campaign-10k harness (hack/bench/campaign): one campaign per size over simulated sites.
CAMPAIGN_BENCH_FLAGS ?= -sites 100,1000,10000 -timeout 30m
# The Site-10 harness (hack/bench/site10; needs root): a 3 control-plane + 7 worker site on real
# hosts installed from its Site's spec.cluster to the test application serving, and the anchor,
# the same install one call at a time (-anchor=false skips it).
SITE10_BENCH_FLAGS ?= -timeout 20m
# The web UI harness (hack/bench/ui): the overview and the site list over 10,000 sites, against
# one API server list of 50 sites measured in the same process.
UI_BENCH_FLAGS ?= -sites 10000

.PHONY: bench
bench: tools build ## Run the benchmarks: Go benchmarks, the Artifacts, Campaign-10k, Site-10 and web UI harnesses (results go to docs/benchmarks.md; Site-10 needs root).
	@pkgs="$(BENCH_PKGS)"; if [ -n "$$pkgs" ]; then $(GO) test -run '^$$' -bench . -benchmem $(GO_TEST_FLAGS) $$pkgs; else echo "no Go benchmarks (func Benchmark...) in any package"; fi
	$(GO) run ./hack/bench/artifacts $(ARTIFACTS_BENCH_FLAGS)
	$(GO) run ./hack/bench/campaign $(CAMPAIGN_BENCH_FLAGS)
	$(GO) run ./hack/bench/site10 $(SITE10_BENCH_FLAGS)
	$(GO) run ./hack/bench/ui $(UI_BENCH_FLAGS)

.PHONY: lint
lint: ## Run golangci-lint, with depguard enforcing api <- pkg <- components.
	hack/tools.sh golangci-lint
	$(GOLANGCI_LINT) run ./...

.PHONY: demo
demo: tools build test-bins ## Start a global and two site control planes, the controllers, two sites and three hosts; build site-a's application cluster (the real node stack, CoreDNS, the test application) on two real hosts with its BPA (needs root), ending with its nodes, pods and the test application answering.
	$(GO) run ./hack/demo

.PHONY: ui-demo
ui-demo: build ## Run the web UI over a simulated fleet (no root): a global and a site control plane, the global controller serving the UI over HTTPS, simulated stores, releases and a patch campaign; prints the URL and where the admin's and viewer's tokens are.
	hack/tools.sh etcd kube-apiserver kubectl
	$(GO) run ./hack/uidemo

.PHONY: clean
clean: ## Remove bin/ (the per-user tool cache stays).
	rm -rf $(BIN)
