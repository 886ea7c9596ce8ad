# Demo guest images (hack/guest/build.sh): a tiny kernel from linux-source-6.1 (committed in
# hack/guest/prebuilt, reproducible with guest-kernel-verify), a busybox initramfs, a bootable
# containerDisk qcow2 and the OCI image tarballs, cached under $(PODVIRT_CACHE)/guest/<version-key>/.
# See docs/guest-images.md.

.PHONY: guest-images
guest-images: ## Build (or reuse) the demo guest and its image tarballs; prints the output directory
	hack/guest/build.sh

.PHONY: guest-kernel guest-kernel-verify guest-kernel-update
guest-kernel: ## Print the demo guest's kernel: the committed one, or built from source if kernel.config changed
	hack/guest/build.sh kernel

guest-kernel-verify: ## Rebuild the committed guest kernel from its recorded linux-source and compare (cached)
	hack/guest/build.sh verify-kernel

guest-kernel-update: ## Build the guest kernel from today's linux-source-6.1 into hack/guest/prebuilt, to commit
	hack/guest/build.sh update-kernel

.PHONY: guest-images-import
guest-images-import: ## Import the demo guest images into the local cluster's containerd (cluster must be up)
	hack/guest/build.sh import

.PHONY: guest-test
guest-test: guest-images ## Boot the demo guest images (TCG, 62 MiB) and the Fedora-like one (544 MiB) under qemu: banner or login, user-data, HTTP, ssh, agent, disk, ACPI power-off
	flock /tmp/podvirt-heavy.lock go test -tags guestboot -count=1 -v ./tests/guest/

# The demo guests as cluster images: make images / cluster-sync / e2e build and import them with the rest.
IMAGE_TARGETS += image-demo-kernelboot image-demo-containerdisk image-demo-alpine

.PHONY: image-demo-kernelboot image-demo-containerdisk image-demo-alpine
image-demo-kernelboot image-demo-containerdisk image-demo-alpine: image-demo-%:
	@dir=$$(hack/guest/build.sh | tail -n 1) && mkdir -p $(IMAGE_CACHE) && \
	  cp --reflink=auto $$dir/$*.tar $(IMAGE_CACHE)/demo-$*.tar && echo "wrote $(IMAGE_CACHE)/demo-$*.tar"

# The Fedora-like test guest (hack/guest/fedora-like.sh): systemd, sshd, cloud-init, qemu-guest-agent.
.PHONY: image-fedora-like
image-fedora-like:
	@dir=$$(hack/guest/fedora-like.sh | tail -n 1) && mkdir -p $(IMAGE_CACHE) && \
	  cp --reflink=auto $$dir/fedora-like.tar $(IMAGE_CACHE)/fedora-like.tar && echo "wrote $(IMAGE_CACHE)/fedora-like.tar"
