// Package v1 (imported as launcherv1) is the contract between the three parties around a launcher Pod:
//
//   - the VMI controller, which renders the launcher Pod (paths, volume and container names below);
//   - the launcher (cmd/virt-launcher), which runs libvirt/qemu inside the Pod and serves the command
//     protocol on a unix socket;
//   - the node agent (cmd/virt-handler), which finds that socket from the node and drives the guest.
//
// It is pure Go (no cgo, no libvirt) so every binary can import it. The protocol is versioned: HTTP/1.1
// over the unix socket, JSON bodies, every path under /v1/. A breaking change gets a new version prefix.
package v1
