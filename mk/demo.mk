# The README's main job: from a fresh machine to a running demo VM and its console. Each phase is
# timed (hack/timed.sh) and the table printed at the end (figures in docs/local-cluster.md). The
# guest kernel is committed (hack/guest/prebuilt): compiling it took 5 of a cold demo's 17 minutes.
DEMO_TIMES         ?= $(PODVIRT_CACHE)/demo-phases.tsv
DEMO_PHASE          = hack/timed.sh $(DEMO_TIMES)
# The demo needs every image but the e2e tests' own.
DEMO_IMAGE_TARGETS  = $(filter-out $(E2E_IMAGE_TARGETS),$(IMAGE_TARGETS))

.PHONY: demo demo-images kube-binaries
demo: ## Build, bring up the local cluster, deploy Podvirt, start the seed's vm-cirros, show its console; prints where the time went
	@mkdir -p $(PODVIRT_CACHE) && rm -f $(DEMO_TIMES)
	@$(DEMO_PHASE) "Kubernetes binaries" $(MAKE) --no-print-directory kube-binaries
	@$(DEMO_PHASE) "demo guest (disks, images)" $(MAKE) --no-print-directory guest-images
	@$(DEMO_PHASE) "CoreDNS" $(MAKE) --no-print-directory coredns
	@$(DEMO_PHASE) "local cluster" $(MAKE) --no-print-directory cluster-ensure-up
	@$(DEMO_PHASE) "Podvirt images + virtctl" $(MAKE) --no-print-directory demo-images virtctl
	@$(DEMO_PHASE) "image import" $(MAKE) --no-print-directory demo-import
	@$(DEMO_PHASE) "deploy (until Available)" $(MAKE) --no-print-directory deploy
	@$(DEMO_PHASE) "vm-cirros: start, console" $(MAKE) --no-print-directory demo-vm
	@echo "demo: where the time went"; hack/timed.sh --table $(DEMO_TIMES)

# Each phase is a make of its own: the variables naming files that earlier phases build (KUBECTL,
# the cached image tarballs) are read once those files exist.
.PHONY: demo-import demo-vm
demo-images:
	$(HEAVY) $(MAKE) --no-print-directory $(DEMO_IMAGE_TARGETS)

demo-import:
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(DEMO_IMAGE_TARGETS))

demo-vm:
	KUBECTL=$(KUBECTL) KUBECONFIG=$(CLUSTER_KUBECONFIG) VIRTCTL=$(VIRTCTL) hack/demo.sh

kube-binaries: ## Build (or reuse) the Kubernetes and etcd binaries the local cluster runs (hack/kube-binaries.sh)
	@hack/kube-binaries.sh >/dev/null
