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
