# virtctl (cli/, cmd/virtctl): one static binary, also the kubectl plugin kubectl-virt.
VIRTCTL := $(abspath $(BIN))/virtctl

.PHONY: virtctl
virtctl: ## Build virtctl (static, stripped) into bin/
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w $(VERSION_LDFLAGS)' -o $(VIRTCTL) ./cmd/virtctl

# Releases: kubectl-virt archives for krew (krew/, hack/krew/). VERSION must be semver (krew checks).
VERSION ?= v0.1.0-dev
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

.PHONY: release krew-test
release: deps ## Cross-compile kubectl-virt for every platform, archive it with sha256 sums and render the krew manifest into krew/out/
	hack/krew/release.sh krew/out $(VERSION) https://github.com/podvirt/podvirt/releases/download/$(VERSION) $(RELEASE_PLATFORMS)

krew-test: deps ## Install kubectl virt with the real krew CLI into a temporary KREW_ROOT and run it through kubectl
	VERSION=$(VERSION) hack/krew/test.sh
