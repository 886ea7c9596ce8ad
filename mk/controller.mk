# virt-controller: its image for the local cluster and real clusters.
IMAGE_TARGETS += image-virt-controller

.PHONY: image-virt-controller
image-virt-controller:
	$(call go-static,./cmd/virt-controller,$(IMAGE_BUILD)/virt-controller)
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/virt-controller:dev --layer $(IMAGE_BUILD)/virt-controller=/virt-controller \
		--entrypoint /virt-controller --user 65532:65532 --out $(IMAGE_CACHE)/virt-controller.tar

.PHONY: bench-controllers
bench-controllers: ## Count controller and node-agent apiserver writes (and conflicts) per whole VM start (20 VMs); prints figures
	set -o pipefail; KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh kube-apiserver etcd kube-controller-manager) \
		go test -count=1 -run '^$$' -bench BenchmarkControllerWritesPerVMStart -benchtime 1x -v ./controllers/ | grep -v '^\s*>'

# virt-operator: reports the KubeVirt object's status (controllers/kubevirt).
IMAGE_TARGETS += image-virt-operator

.PHONY: image-virt-operator
image-virt-operator:
	$(call go-static,./cmd/virt-operator,$(IMAGE_BUILD)/virt-operator)
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/virt-operator:dev --layer $(IMAGE_BUILD)/virt-operator=/virt-operator \
		--entrypoint /virt-operator --user 65532:65532 --out $(IMAGE_CACHE)/virt-operator.tar
