# virt-handler, the node agent: its image and tests. See docs/node-agent.md.
IMAGE_TARGETS += image-virt-handler

.PHONY: image-virt-handler node-agent-image
node-agent-image: image-virt-handler ## Build the node agent image (docker.io/podvirt/virt-handler:dev) into $(IMAGE_CACHE)

image-virt-handler:
	$(call go-static,./cmd/virt-handler,$(IMAGE_BUILD)/virt-handler)
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/virt-handler:dev --layer $(IMAGE_BUILD)/virt-handler=/virt-handler \
		--entrypoint /virt-handler --out $(IMAGE_CACHE)/virt-handler.tar

.PHONY: test-node-agent
test-node-agent: ## Node agent unit + integration tests (real apiserver, launcher double on a unix socket)
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh kube-apiserver etcd kube-controller-manager) go test -count=1 ./nodeagent/... ./cmd/virt-handler/
