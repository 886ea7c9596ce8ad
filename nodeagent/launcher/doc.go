// Package launcher is the compute side of a launcher Pod: it runs libvirt's QEMU driver embedded in
// its own process (qemu:///embed, no libvirtd), serves the command protocol of api/launcher/v1 on a unix
// socket in the Pod's private directory, turns the VMI it is sent into a domain (package domainxml),
// prepares the disks, starts the guest and exits when the guest is gone, with an exit code that says
// how it ended.
//
// It runs in the launcher Pod, not in the node agent: it is its own binary (cmd/virt-launcher) and its
// own package tree (domainxml, cloudinit, diskcopy, consolelog, pid1 beside it). It is the only package
// that links libvirt (cgo); nothing else imports it but cmd/virt-launcher. The node agent talks to it
// only through the wire contract in api/launcher/v1.
package launcher
