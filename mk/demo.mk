# The README's main job: from a fresh machine to a running demo VM and its console.
.PHONY: demo
demo: cluster-ensure-up images virtctl ## Build, bring up the local cluster, deploy Podvirt, start the seed's vm-cirros, show its console
	$(PODVIRT_CLUSTER) sync-images $(wildcard $(IMAGE_CACHE)/*.tar) $(patsubst image-%,$(IMAGE_CACHE)/%.tar,$(IMAGE_TARGETS))
	$(MAKE) --no-print-directory deploy
	KUBECTL=$(KUBECTL) KUBECONFIG=$(CLUSTER_KUBECONFIG) VIRTCTL=$(VIRTCTL) hack/demo.sh
