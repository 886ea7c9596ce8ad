# virt-api, the aggregated API server of subresources.kubevirt.io: its image. See apiserver/.
IMAGE_TARGETS += image-virt-api

.PHONY: image-virt-api
image-virt-api:
	$(call go-static,./cmd/virt-api,$(IMAGE_BUILD)/virt-api)
	$(PODVIRT_IMAGE) build --name docker.io/podvirt/virt-api:dev --layer $(IMAGE_BUILD)/virt-api=/virt-api \
		--entrypoint /virt-api --user 65532:65532 --out $(IMAGE_CACHE)/virt-api.tar
