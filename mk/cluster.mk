# The local cluster (one node, or NODES on this machine), its images and the e2e tests. See
# docs/local-cluster.md.
#
# Images: every image is an OCI tarball in $(IMAGE_CACHE) named docker.io/podvirt/<name>:dev, built by
# `go run ./cmd/podvirt-image build` (reproducible: same inputs, same digest). To add one, in your own
# mk/<area>.mk:
#
#   IMAGE_TARGETS += image-foo
#   .PHONY: image-foo
#   image-foo:
#   	$(call go-static,./cmd/foo,$(IMAGE_BUILD)/foo)
#   	$(PODVIRT_IMAGE) build --name docker.io/podvirt/foo:dev --layer $(IMAGE_BUILD)/foo=/foo --entrypoint /foo --out $(IMAGE_CACHE)/foo.tar
#
# `make cluster-sync` (and `make e2e`) then rebuild it, import it when its digest changed and restart
# the workloads that use it; `make cluster-up` re-imports every cached tarball into a fresh cluster.

CLUSTER_STATE      ?= /var/lib/podvirt-cluster
CLUSTER_KUBECONFIG ?= $(CLUSTER_STATE)/kubeconfig
IMAGE_CACHE        ?= $(PODVIRT_CACHE)/images
IMAGE_BUILD        ?= $(IMAGE_CACHE)/build
# -o: the lock is not inherited by what the command spawns (cluster-up leaves daemons running).
HEAVY              ?= flock -o /tmp/podvirt-heavy.lock
# The tools run with the flags the images and the Kubernetes binaries are built with (no cgo,
# -trimpath), so a cold build compiles client-go and the rest once for all of them (it took 72 s
# more on a fresh machine with go run's default flags).
GO_RUN             ?= env CGO_ENABLED=0 go run -trimpath
PODVIRT_CLUSTER    ?= $(GO_RUN) ./cmd/podvirt-cluster
PODVIRT_IMAGE      ?= $(GO_RUN) ./cmd/podvirt-image
KUBECTL            ?= $(firstword $(wildcard $(PODVIRT_CACHE)/bin/kubernetes-*/kubectl) $(shell command -v kubectl))
# The e2e tests take about 35 minutes on this machine (2,110 s on 2026-11-28, the short chaos run included).
E2E_TIMEOUT        ?= 60m
# How many nodes cluster-up brings up: one for the demo, two for the e2e tests (migration, node loss).
NODES              ?= 1
E2E_NODES          ?= 2
# What `make deploy` applies: the local-cluster variant of install/ when there is one.
DEPLOY_KUSTOMIZATION ?= $(if $(wildcard install/local/kustomization.yaml),install/local,install)
# The KubeVirt object, applied once the components run (its CRD is in the kustomization above).
DEPLOY_CR            ?= $(if $(wildcard install/local/cr/kustomization.yaml),install/local/cr,install/kubevirt-cr)
# How long make deploy waits for each component's rollout and for the KubeVirt object's Available.
DEPLOY_TIMEOUT       ?= 5m

# $(call go-static,PACKAGE,OUTPUT): a static, reproducible build of a main package.
go-static = mkdir -p $(dir $(2)) && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -buildid= $(VERSION_LDFLAGS)' -o $(2) $(1)

# Test-only images: built and imported like the rest, never pushed (the Fedora-like guest: mk/guest.mk).
E2E_IMAGE_TARGETS := image-e2e-probe image-e2e-backing-disk image-fedora-like
IMAGE_TARGETS += $(E2E_IMAGE_TARGETS)

.PHONY: cluster-up cluster-down cluster-status cluster-logs cluster-verify-clean
cluster-up: coredns ## Start the local cluster with NODES nodes (default 1; idempotent, adds nodes to a running one); prints how to use its kubeconfig
	$(HEAVY) $(PODVIRT_CLUSTER) up --nodes $(NODES) --coredns $(COREDNS)

cluster-down: ## Stop the local cluster and remove everything it created (the image cache stays)
	$(PODVIRT_CLUSTER) down

cluster-status: ## Show the local cluster's processes and node
	$(PODVIRT_CLUSTER) status

cluster-logs: ## Print a component's log (COMPONENT=kubelet), or the tail of all
	$(PODVIRT_CLUSTER) logs $(COMPONENT)

cluster-verify-clean: ## Fail if anything of the local cluster is left on the machine
	$(PODVIRT_CLUSTER) verify-clean

.PHONY: images-base image-e2e-probe image-e2e-backing-disk images
images-base: image-e2e-probe ## Build the pause and e2e probe images and import them (cluster must be up)
	$(PODVIRT_CLUSTER) build-pause
	$(PODVIRT_CLUSTER) sync-images $(IMAGE_CACHE)/pause.tar $(IMAGE_CACHE)/e2e-probe.tar

image-e2e-probe:
	$(call go-static,./tests/e2e/probe,$(IMAGE_BUILD)/e2e-probe)
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/e2e-probe:dev --layer $(IMAGE_BUILD)/e2e-probe=/probe \
		--entrypoint /probe --arg sleep --out $(IMAGE_CACHE)/e2e-probe.tar

# A containerDisk whose qcow2 names a backing file on the launcher's filesystem: launchers must refuse it.
image-e2e-backing-disk: launcher-deps
	mkdir -p $(IMAGE_BUILD)/e2e-backing-disk
	rm -f $(IMAGE_BUILD)/e2e-backing-disk/disk.qcow2
	qemu-img create -q -f qcow2 -u -b /etc/passwd -F raw $(IMAGE_BUILD)/e2e-backing-disk/disk.qcow2 1M
	chmod 0644 $(IMAGE_BUILD)/e2e-backing-disk/disk.qcow2
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/e2e-backing-disk:dev \
		--layer $(IMAGE_BUILD)/e2e-backing-disk/disk.qcow2=/disk/disk.qcow2 --out $(IMAGE_CACHE)/e2e-backing-disk.tar

images: ## Build every image of every area ($(IMAGE_TARGETS))
	$(HEAVY) $(MAKE) --no-print-directory $(IMAGE_TARGETS)

.PHONY: cluster-ensure-up
cluster-ensure-up:
	@if [ -f $(CLUSTER_KUBECONFIG) ] && $(PODVIRT_CLUSTER) status >/dev/null 2>&1 && \
	    [ "$$(KUBECONFIG=$(CLUSTER_KUBECONFIG) $(KUBECTL) get nodes --no-headers 2>/dev/null | grep -cw Ready)" -ge $(NODES) ]; then \
	  echo "cluster is up"; else $(MAKE) --no-print-directory cluster-up NODES=$(NODES); fi

.PHONY: deploy
deploy: ## Apply install/local (else install/) to the local cluster, server-side; returns when every component is rolled out and the KubeVirt object is Available
	KUBECONFIG=$(CLUSTER_KUBECONFIG) $(KUBECTL) apply --server-side --force-conflicts -k $(DEPLOY_KUSTOMIZATION)
	@for w in deployment/virt-api deployment/virt-controller deployment/virt-operator daemonset/virt-handler; do \
	  KUBECONFIG=$(CLUSTER_KUBECONFIG) $(KUBECTL) -n podvirt rollout status $$w --timeout=$(DEPLOY_TIMEOUT) >/dev/null || \
	    { echo "deploy: $$w is not rolled out after $(DEPLOY_TIMEOUT) (kubectl -n podvirt describe $$w)"; exit 1; }; done
	KUBECONFIG=$(CLUSTER_KUBECONFIG) $(KUBECTL) apply --server-side --force-conflicts -k $(DEPLOY_CR)
	@KUBECONFIG=$(CLUSTER_KUBECONFIG) $(KUBECTL) -n podvirt wait kubevirt/kubevirt --for=condition=Available --timeout=$(DEPLOY_TIMEOUT) >/dev/null || \
	  { echo "deploy: the KubeVirt object is not Available after $(DEPLOY_TIMEOUT):"; \
	    KUBECONFIG=$(CLUSTER_KUBECONFIG) $(KUBECTL) -n podvirt get kubevirt/kubevirt -o jsonpath='{range .status.conditions[*]}{.type}={.status}: {.message}{"\n"}{end}'; exit 1; }
	@echo "deploy: Podvirt is ready (kubectl -n podvirt get kubevirt)"

.PHONY: cluster-sync
cluster-sync: cluster-ensure-up images ## Rebuild images, import the changed ones, re-apply install/, restart what changed
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(IMAGE_TARGETS))
	$(MAKE) --no-print-directory deploy

# CoreDNS, the local cluster's DNS (github.com/coredns/coredns from the Go module proxy, with only the
# plugins its Corefile uses: hack/coredns/main.go), built once per version and plugin list (other
# builds pruned: podvirt-cluster up without --coredns takes the one cached):
# podvirt-cluster up runs it on the first node's address behind the Service kube-system/kube-dns, as
# every real cluster has one (internal/localcluster/dns.go).
COREDNS_VERSION := v1.14.7
COREDNS_KEY     := $(COREDNS_VERSION)-$(shell sha256sum hack/coredns/main.go | cut -c1-8)
COREDNS         := $(PODVIRT_CACHE)/bin/coredns-$(COREDNS_KEY)/coredns
COREDNS_SRC     := $(PODVIRT_CACHE)/src/coredns-$(COREDNS_KEY)

.PHONY: coredns
coredns: ## Build CoreDNS once per version (the local cluster's DNS)
	@[ -x $(COREDNS) ] || { echo "building coredns $(COREDNS_KEY) (once)"; \
		mkdir -p $(COREDNS_SRC) && sed '/^\/\/go:build ignore$$/d' hack/coredns/main.go >$(COREDNS_SRC)/main.go && cd $(COREDNS_SRC) && \
		printf 'module podvirt.local/corednsbuild\n\ngo 1.26\n\nrequire github.com/coredns/coredns $(COREDNS_VERSION)\n' >go.mod && \
		GOFLAGS=-mod=mod go mod tidy -e && \
		CGO_ENABLED=0 GOFLAGS=-mod=mod $(HEAVY) go build -trimpath -ldflags='-s -w' -o $(COREDNS).tmp . && \
		mv $(COREDNS).tmp $(COREDNS) && \
		find $(PODVIRT_CACHE)/bin $(PODVIRT_CACHE)/src -maxdepth 1 -name 'coredns-*' ! -name 'coredns-$(COREDNS_KEY)' -exec rm -rf {} +; }

# Multus' thin CNI plugin (gopkg.in/k8snetworkplumbingwg/multus-cni.v4, built from the Go module
# proxy and cached by version): the e2e tests install it on the local cluster for secondary networks
# (internal/localcluster EnableMultus), with the CRD from the same module's manifest. Not v4.2.x:
# it re-marshals a clusterNetwork conflist file without the plugins' own fields, so CNI DEL of every
# Pod fails ("no IP ranges specified") and Pods never finish terminating.
MULTUS_VERSION  := v4.1.4
MULTUS_MODULE   := gopkg.in/k8snetworkplumbingwg/multus-cni.v4
MULTUS          := $(PODVIRT_CACHE)/bin/multus-$(MULTUS_VERSION)/multus
MULTUS_SOURCE    = $$(go mod download -json $(MULTUS_MODULE)@$(MULTUS_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')

.PHONY: multus
multus: ## Build Multus' thin CNI plugin once per version (the e2e tests install it for secondary networks)
	@[ -x $(MULTUS) ] || { echo "building multus $(MULTUS_VERSION) (once)"; src=$(MULTUS_SOURCE) && \
		cd "$$src" && GOFLAGS=-mod=mod $(HEAVY) go build -o $(MULTUS).tmp ./cmd/multus && mv $(MULTUS).tmp $(MULTUS); }

.PHONY: cluster-multus cluster-multus-off
cluster-multus: multus ## Install Multus on the local cluster (secondary networks for VMs created afterwards; see docs/networking.md)
	$(PODVIRT_CLUSTER) multus on --binary $(MULTUS) --manifest $(MULTUS_SOURCE)/deployments/multus-daemonset.yml
cluster-multus-off: ## Remove Multus from the local cluster (delete the VMs using it first)
	$(PODVIRT_CLUSTER) multus off --manifest $(MULTUS_SOURCE)/deployments/multus-daemonset.yml

.PHONY: e2e
e2e: NODES = $(E2E_NODES)
e2e: cluster-ensure-up images virtctl multus ## Bring the cluster up if absent (left up), build+import images, deploy, run the e2e tests
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(IMAGE_TARGETS))
	$(MAKE) --no-print-directory deploy
	KUBECONFIG=$(CLUSTER_KUBECONFIG) PODVIRT_KUBECTL=$$(hack/kube-binaries.sh kubectl)/kubectl PODVIRT_VIRTCTL=$(VIRTCTL) \
	PODVIRT_MULTUS=$(MULTUS) PODVIRT_MULTUS_MANIFEST=$(MULTUS_SOURCE)/deployments/multus-daemonset.yml \
	$(HEAVY) go test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) ./tests/...

# chaos is TestChaos in full (tests/e2e/chaos_test.go): 20 VMs and every fault of docs/reliability.md,
# about 45 minutes; make test runs its short variant with the other e2e tests. CHAOS_SEED repeats a
# run's order of faults.
.PHONY: chaos
chaos: NODES = $(E2E_NODES)
chaos: cluster-ensure-up images virtctl ## Faults at random on the two-node cluster for 10 minutes and more (20 VMs): report what survived, what ran twice (never), time to converge
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(IMAGE_TARGETS))
	$(MAKE) --no-print-directory deploy
	KUBECONFIG=$(CLUSTER_KUBECONFIG) PODVIRT_KUBECTL=$$(hack/kube-binaries.sh kubectl)/kubectl PODVIRT_VIRTCTL=$(VIRTCTL) \
	PODVIRT_CHAOS=full PODVIRT_CHAOS_SEED=$(CHAOS_SEED) \
	$(HEAVY) go test -tags e2e -count=1 -timeout 120m -v -run '^TestChaos$$' ./tests/e2e/

.PHONY: push push-check
push-check:
	@test -n "$(REGISTRY)" || { echo "push: set REGISTRY, e.g. make push REGISTRY=registry.example.com/podvirt"; exit 2; }
push: push-check images ## Push every image to a registry for a real cluster: make push REGISTRY=registry.example.com/podvirt
	$(PODVIRT_IMAGE) push --registry $(REGISTRY) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(filter-out $(E2E_IMAGE_TARGETS),$(IMAGE_TARGETS)))
