# Podvirt — see README.md. Every tool is pinned and fetched from the Go module proxy.
SHELL := /bin/bash
.DEFAULT_GOAL := build

CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
PODVIRT_CACHE ?= /var/cache/podvirt
export PODVIRT_CACHE
BIN := bin

.PHONY: generate
generate: ## Generate deepcopy code and the CRDs in install/crds from api/
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	rm -f install/crds/kubevirt.io_*.yaml
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./api/v1/... output:crd:artifacts:config=install/crds
	go run ./hack/crdversions install/crds

.PHONY: build
build: deps ## Build every binary into bin/
	go build -o $(BIN)/ ./cmd/...

.PHONY: deps
deps: ## Install the Debian packages the build needs (cgo for the launcher: libvirt-dev, pkg-config)
	@if [ "$$(dpkg-query -W -f='$${Status}\n' libvirt-dev pkg-config gcc 2>/dev/null | grep -c 'ok installed')" != 3 ]; then \
	  flock /var/lib/podvirt-apt.lock sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libvirt-dev pkg-config gcc'; fi

.PHONY: lint
lint: deps ## go vet and gofmt check
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

.PHONY: unit
unit: ## Unit tests (no cluster, no apiserver)
	go test -short ./...

.PHONY: integration
integration: ## Integration tests against a real kube-apiserver + etcd (built and cached on first use)
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh kube-apiserver etcd kube-controller-manager) go test -count=1 ./...

.PHONY: verify-generate
verify-generate: generate ## Fail if generated files are out of date
	@test -z "$$(git status --porcelain -- api install/crds)" || { git status --porcelain -- api install/crds; echo "generated files changed: run make generate and commit"; exit 1; }

.PHONY: test
test: lint verify-generate integration launcher-test guest-test e2e-ci ## Everything CI runs: lint, generated files, unit, integration, launcher and guest boots, e2e on the local cluster

# e2e-ci runs the e2e tests on the local cluster, bringing it up when absent; a cluster it brought up
# it also takes down (even when the tests fail) and checks that nothing is left on the machine.
.PHONY: e2e-ci
e2e-ci:
	@was_up=0; [ -f $(CLUSTER_KUBECONFIG) ] && $(PODVIRT_CLUSTER) status >/dev/null 2>&1 && was_up=1; \
	rc=0; $(MAKE) --no-print-directory e2e || rc=$$?; \
	if [ $$was_up = 0 ]; then \
	  $(MAKE) --no-print-directory cluster-down && $(MAKE) --no-print-directory cluster-verify-clean || rc=1; \
	fi; exit $$rc

# Each area keeps its targets in its own file under mk/.
-include mk/*.mk
