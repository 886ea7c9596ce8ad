package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startGarbageCollector runs kube-controller-manager's garbage collector against the test
// apiserver, so ownerReferences behave as in a cluster: cascade deletion and orphaning
// (`kubectl delete --cascade=orphan`) really happen. The binary comes from KUBEBUILDER_ASSETS.
// It returns a function that stops the process and waits for it.
func startGarbageCollector(te *envtest.Environment) (func(), error) {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("garbage collector: %w (build it with hack/kube-binaries.sh kube-controller-manager)", err)
	}
	user, err := te.AddUser(envtest.User{Name: "gc", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("garbage collector user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("garbage collector kubeconfig: %w", err)
	}
	dir, err := os.MkdirTemp("", "podvirt-gc-")
	if err != nil {
		return nil, fmt.Errorf("garbage collector dir: %w", err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("garbage collector kubeconfig: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--kubeconfig="+path,
		"--controllers=garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
	)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	logFile, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("garbage collector log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start garbage collector: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cmd.Wait()
	}()
	return func() {
		cancel()
		<-done
		logFile.Close()
		os.RemoveAll(dir)
	}, nil
}
