package localcluster

import "testing"

// A shell or make whose command line names the state dir is not the cluster's: down must not kill
// it and verify-clean must not report it.
func TestOursOnlyMatchesClusterPrograms(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/usr/bin/containerd-shim-runc-v2":                              true,
		"/usr/bin/containerd":                                           true,
		"/var/cache/podvirt/bin/kubernetes-v1.36.3-etcd-v3.6.8/kubelet": true,
		"/var/cache/podvirt/bin/kubernetes-v1.36.3-etcd-v3.6.8/etcd":    true,
		"/var/lib/podvirt-cluster/bin/podvirt-cluster":                  true,
		"/var/cache/podvirt/bin/coredns-v1.14.7/coredns":                true,
		"/bin/sh": false, "make": false, "/usr/bin/bash": false, "go": false,
	} {
		if got := ours(argv0); got != want {
			t.Errorf("ours(%q) = %v, want %v", argv0, got, want)
		}
	}
}
