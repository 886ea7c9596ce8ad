# virtctl (cli/, cmd/virtctl): one static binary, also the kubectl plugin kubectl-virt.
VIRTCTL := $(abspath $(BIN))/virtctl

.PHONY: virtctl
virtctl: ## Build virtctl (static, stripped) into bin/
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(VIRTCTL) ./cmd/virtctl
