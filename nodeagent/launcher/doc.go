// Package launcher is the compute side of a launcher Pod: it runs libvirt's QEMU driver embedded in
// its own process (qemu:///embed, no libvirtd), serves the command protocol of api/launcher/v1 on a unix
// socket in the Pod's private directory, turns the VMI it is sent into a domain (package domainxml),
// prepares the disks, starts the guest and exits when the guest is gone, with an exit code that says
// how it ended. It is the only package that links libvirt (cgo); nothing else imports it but
// cmd/virt-launcher.
package launcher
