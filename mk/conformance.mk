# KubeVirt's own conformance suite against the local cluster (hack/conformance, docs/conformance.md):
# built once per source snapshot from ../shared/kubevirt, run like KubeVirt's hack/conformance.sh.
CONFORMANCE_OUT   ?= $(PODVIRT_CACHE)/conformance/last
CONFORMANCE_SHORT_OUT ?= $(PODVIRT_CACHE)/conformance/short
# The short subset make test runs on the e2e cluster: fast specs of features Podvirt ships, by
# KubeVirt's test ids (docs/conformance.md lists them). Every one must pass.
CONFORMANCE_SHORT ?= test_id:(3161|1523|1526|4645|3196|4118|3110|3111|3112|4641)\]|EvictionStratgy: External
CONFORMANCE_SHORT_COUNT ?= 11
CONFORMANCE_ENV    = KUBECONFIG=$(CLUSTER_KUBECONFIG) KUBECTL=$$(hack/kube-binaries.sh kubectl)/kubectl VIRTCTL=$(VIRTCTL)

.PHONY: conformance conformance-build conformance-short
conformance-build: ## Build KubeVirt's functional test binary from the source snapshot (once per snapshot, about 7 minutes)
	hack/conformance/build.sh >/dev/null

conformance: NODES = $(E2E_NODES)
conformance: cluster-ensure-up images virtctl conformance-build ## Run KubeVirt's conformance specs on the two-node local cluster (left up); writes the table into docs/conformance.md
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(IMAGE_TARGETS))
	$(MAKE) --no-print-directory deploy
	rc=0; CONFORMANCE_SKIP_FILES="$$(grep -v '^#' hack/conformance/left-out.txt)" $(CONFORMANCE_ENV) hack/conformance/run.sh $(CONFORMANCE_OUT) || rc=$$?; \
	go run ./hack/conformance/report --junit $(CONFORMANCE_OUT)/junit.xml --doc docs/conformance.md || rc=1; exit $$rc

# conformance-short runs on a cluster that is up and deployed (make test runs it after the e2e tests).
conformance-short: virtctl conformance-build ## Run the short conformance subset on the running local cluster (every spec must pass)
	@test -n '$(CONFORMANCE_SHORT)' || { echo "conformance-short: CONFORMANCE_SHORT is empty"; exit 2; }
	$(CONFORMANCE_ENV) hack/conformance/run.sh $(CONFORMANCE_SHORT_OUT) '$(CONFORMANCE_SHORT)'
	@n=$$(grep -c '<testcase name="\[It\][^"]*"[^>]*status="passed"' $(CONFORMANCE_SHORT_OUT)/junit.xml); \
	  [ "$$n" -ge $(CONFORMANCE_SHORT_COUNT) ] || { echo "conformance-short: $$n specs passed, want $(CONFORMANCE_SHORT_COUNT)"; exit 1; }; \
	  echo "conformance-short: $$n of KubeVirt's conformance specs passed"
