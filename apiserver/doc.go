// Package apiserver is virt-api's role: the aggregated API server of subresources.kubevirt.io (start,
// stop, restart, pause, console … on VirtualMachines and their instances). Done so far: package
// lifecycle, the pure decisions of the start, stop and restart calls, and Handlers, which serve
// those calls with KubeVirt's wire behaviour (202, Status errors naming object and cause, 409 where
// KubeVirt answers 409, dryRun, a grace period patched into the instance first). Still to come: the
// aggregated server in front of them (delegated authentication and authorization, discovery),
// streaming, admission and certificates.
package apiserver
