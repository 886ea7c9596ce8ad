# Node-side performance figures on the local cluster (docs/performance.md): VMI vs Pod create →
# Running, time to the guest's first console line, launcher Pod memory. Prints figures, asserts none.
# Needs Podvirt deployed with its images imported (`make e2e` or `make cluster-sync` once).
# BENCH_SAMPLES (default 20) of each kind one at a time, then BENCH_BURST (default BENCH_SAMPLES)
# created at once (0 skips that). Runs under the heavy lock so other builds do not distort it.
BENCH_TIMEOUT ?= 30m

.PHONY: bench-vms
bench-vms: cluster-ensure-up ## Measure VM start, first console line and per-VM memory on the local cluster; prints figures
	KUBECONFIG=$(CLUSTER_KUBECONFIG) $(HEAVY) go test -tags bench -count=1 -timeout $(BENCH_TIMEOUT) \
		-run '^$$' -bench BenchmarkNodeSide -benchtime 1x ./tests/bench/

.PHONY: bench-console
bench-console: cluster-ensure-up ## Measure the serial console through virt-api vs kubectl exec (round trip, throughput, memory with 20 consoles); prints figures
	KUBECONFIG=$(CLUSTER_KUBECONFIG) $(HEAVY) go test -tags bench -count=1 -timeout $(BENCH_TIMEOUT) \
		-run '^$$' -bench BenchmarkConsole -benchtime 1x ./tests/bench/

.PHONY: bench-virtctl
bench-virtctl: cluster-ensure-up virtctl ## Measure virtctl start --wait vs kubectl apply+wait of a Pod, time to the console's first byte, binary size; prints figures
	KUBECONFIG=$(CLUSTER_KUBECONFIG) PODVIRT_VIRTCTL=$(VIRTCTL) PODVIRT_KUBECTL=$$(hack/kube-binaries.sh kubectl)/kubectl $(HEAVY) \
		go test -tags bench -count=1 -timeout $(BENCH_TIMEOUT) -run '^$$' -bench BenchmarkVirtctl -benchtime 1x ./tests/bench/

.PHONY: bench-dashboard
bench-dashboard: ## Dashboard at 1,000 VMs: render, watch event and keypress (fake source), then over a real apiserver watch (first snapshot, heap, CPU per event); prints figures
	go test -short -count=1 -run '^$$' -bench 'FirstRender|WatchEvent|Keypress' -benchmem ./cli/dashboard/
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh kube-apiserver etcd kube-controller-manager) \
		go test -count=1 -run '^$$' -bench WatchAt1000 -benchtime 1x ./cli/dashboard/

# The control plane at scale on simulated nodes: the real virt-controller (built here) against a real
# kube-apiserver + etcd, with kube-controller-manager (replica sets), kube-scheduler and kwok
# (sigs.k8s.io/kwok, built from the Go module proxy and cached by version) playing the nodes' kubelets.
# BENCH_SCALE_SIZES (default 100,1000) VMs created at once on BENCH_SCALE_NODES (default 100) nodes,
# side by side with as many plain Pods through a ReplicaSet. Needs no cluster.
KWOK_VERSION ?= v0.8.0
KWOK_DIR     := $(PODVIRT_CACHE)/bin/kwok-$(KWOK_VERSION)

.PHONY: bench-scale
bench-scale: ## 1,000 VMs vs 1,000 Pods on 100 kwok nodes against the real virt-controller: times, writes per object, controller CPU and RSS; prints figures
	@[ -x $(KWOK_DIR)/kwok ] || { echo "building kwok $(KWOK_VERSION) (once)"; GOBIN=$(KWOK_DIR) $(HEAVY) go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION); }
	$(HEAVY) go build -o $(BIN)/virt-controller ./cmd/virt-controller
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh kube-apiserver etcd kube-controller-manager kube-scheduler) \
	PODVIRT_KWOK=$(KWOK_DIR)/kwok \
	PODVIRT_KWOK_STAGES=$$(go mod download -json sigs.k8s.io/kwok@$(KWOK_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/kustomize/stage \
	PODVIRT_VIRT_CONTROLLER=$(CURDIR)/$(BIN)/virt-controller \
		$(HEAVY) go test -tags bench -count=1 -timeout 60m -run '^$$' -bench BenchmarkScale -benchtime 1x ./tests/bench/
