# virt-controller: its image for the local cluster and real clusters.
IMAGE_TARGETS += image-virt-controller

.PHONY: image-virt-controller
image-virt-controller:
	$(call go-static,./cmd/virt-controller,$(IMAGE_BUILD)/virt-controller)
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/virt-controller:dev --layer $(IMAGE_BUILD)/virt-controller=/virt-controller \
		--entrypoint /virt-controller --user 65532:65532 --out $(IMAGE_CACHE)/virt-controller.tar

.PHONY: bench-controllers
bench-controllers: ## Count the controllers' apiserver writes per VM start (20 VMs); prints figures
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh kube-apiserver etcd kube-controller-manager) \
		go test -run '^$$' -bench BenchmarkControllerWritesPerVMStart -benchtime 1x -v ./controllers/ | grep -v '^\s*>'
