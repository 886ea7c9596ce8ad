# KubeVirt's own conformance suite against the local cluster (hack/conformance, docs/conformance.md):
# built once per source snapshot from ../shared/kubevirt, run like KubeVirt's hack/conformance.sh.
CONFORMANCE_OUT ?= $(PODVIRT_CACHE)/conformance/last
# The short subset make test runs: fast specs of what Podvirt ships (a ginkgo label expression ANDed
# with the conformance filter; see docs/conformance.md).
CONFORMANCE_SHORT ?= conformance

.PHONY: conformance conformance-build conformance-short
conformance-build: ## Build KubeVirt's functional test binary from the source snapshot (once per snapshot, about 7 minutes)
	hack/conformance/build.sh

conformance: NODES = $(E2E_NODES)
conformance: cluster-ensure-up images virtctl conformance-build ## Run KubeVirt's conformance specs on the two-node local cluster; writes the table into docs/conformance.md
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(IMAGE_TARGETS))
	$(MAKE) --no-print-directory deploy
	rc=0; KUBECONFIG=$(CLUSTER_KUBECONFIG) KUBECTL=$$(hack/kube-binaries.sh kubectl)/kubectl VIRTCTL=$(abspath $(VIRTCTL)) \
	  $(HEAVY) hack/conformance/run.sh $(CONFORMANCE_OUT) || rc=$$?; \
	go run ./hack/conformance/report --junit $(CONFORMANCE_OUT)/junit.xml --doc docs/conformance.md || rc=1; exit $$rc
