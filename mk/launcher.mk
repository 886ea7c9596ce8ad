# The launcher: virt-launcher (cgo, libvirt embedded) + container-disk (static), the launcher image
# docker.io/podvirt/virt-launcher:dev and its tests. See docs/launcher.md.
#
#   make launcher-image   build the image into $(IMAGE_CACHE)/virt-launcher.tar (cached by its inputs)
#   make launcher-test    unit tests + the real integration tests (root, qemu, libvirt) + image smoke test

LAUNCHER_IMAGE ?= docker.io/podvirt/virt-launcher:dev
# qemu + libvirt's QEMU driver, SeaBIOS and OVMF, swtpm (TPM) and what the cgo build needs; curl for the image smoke test.
LAUNCHER_PKGS  := qemu-system-x86 qemu-utils ipxe-qemu seabios ovmf swtpm swtpm-tools gnutls-bin libvirt-daemon libvirt-daemon-driver-qemu \
	libvirt-clients libvirt-dev pkg-config gcc libc6-dev curl util-linux
LAUNCHER_ROOTFS = $(IMAGE_BUILD)/virt-launcher-rootfs
# The launcher's user is defined once, in the launcher contract (launcherv1.LauncherUID).
LAUNCHER_UID   := $(shell sed -n 's/^\tLauncherUID = \([0-9][0-9]*\)$$/\1/p' api/launcher/v1/layout.go)
export LAUNCHER_UID
IMAGE_TARGETS  += image-virt-launcher

.PHONY: launcher-deps
launcher-deps: ## Install qemu and libvirt from Debian (quick when already installed)
	@missing=$$(for p in $(LAUNCHER_PKGS); do dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null | grep -qx installed || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing:" $$missing; \
	  flock /var/lib/podvirt-apt.lock sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$(echo $$missing)"; fi

.PHONY: launcher-bins
launcher-bins: launcher-deps
	mkdir -p $(IMAGE_BUILD)
	go build -trimpath -ldflags='-s -w -buildid= $(VERSION_LDFLAGS)' -o $(IMAGE_BUILD)/virt-launcher ./cmd/virt-launcher
	$(call go-static,./cmd/container-disk,$(IMAGE_BUILD)/container-disk)

# The image is rebuilt only when its inputs change: both binaries, the rootfs script and the exact
# Debian package versions it copies from.
.PHONY: image-virt-launcher
image-virt-launcher: launcher-bins
	@test -n "$(LAUNCHER_UID)" || { echo "LauncherUID not found in api/launcher/v1/layout.go"; exit 1; }
	@key=$$( { echo "uid $(LAUNCHER_UID)"; sha256sum $(IMAGE_BUILD)/virt-launcher $(IMAGE_BUILD)/container-disk nodeagent/launcher/image/rootfs.sh | cut -d' ' -f1; \
	  dpkg-query -W qemu-system-x86 qemu-utils ipxe-qemu seabios ovmf swtpm swtpm-tools gnutls-bin libvirt0 libvirt-daemon-driver-qemu libc6; } | sha256sum | cut -c1-16); \
	if [ -f $(IMAGE_CACHE)/virt-launcher.tar ] && [ "$$(cat $(IMAGE_BUILD)/virt-launcher.key 2>/dev/null)" = "$$key" ]; then \
	  echo "virt-launcher image up to date ($$key)"; exit 0; fi; \
	set -e; nodeagent/launcher/image/rootfs.sh $(LAUNCHER_ROOTFS) $(IMAGE_BUILD)/virt-launcher $(IMAGE_BUILD)/container-disk; \
	$(PODVIRT_IMAGE) build --name $(LAUNCHER_IMAGE) --layer $(LAUNCHER_ROOTFS)=/ \
	  --entrypoint /usr/bin/virt-launcher --user $(LAUNCHER_UID):$(LAUNCHER_UID) --env PATH=/usr/bin --out $(IMAGE_CACHE)/virt-launcher.tar; \
	echo "$$key" > $(IMAGE_BUILD)/virt-launcher.key; \
	echo "virt-launcher image: $(IMAGE_CACHE)/virt-launcher.tar $$(du -h $(IMAGE_CACHE)/virt-launcher.tar | cut -f1) (rootfs $$(du -sh $(LAUNCHER_ROOTFS) | cut -f1))"

.PHONY: launcher-image
launcher-image: ## Build the launcher image into $(IMAGE_CACHE)/virt-launcher.tar (cached by its inputs)
	$(HEAVY) $(MAKE) --no-print-directory image-virt-launcher

.PHONY: launcher-test
launcher-test: launcher-deps guest-images ## Launcher tests: unit, real integration (root: qemu + libvirt) incl. real demo-guest boots, image smoke boot
	go test -count=1 ./nodeagent/launcher/... ./cmd/container-disk/ ./cmd/virt-launcher/
	PODVIRT_DEMO_GUEST=$$(hack/guest/build.sh dir) $(HEAVY) go test -tags launcher -count=1 -timeout 15m -v ./nodeagent/launcher/
	$(MAKE) --no-print-directory launcher-image
	$(HEAVY) nodeagent/launcher/image/smoke.sh $(LAUNCHER_ROOTFS)

