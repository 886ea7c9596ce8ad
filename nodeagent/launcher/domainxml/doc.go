// Package domainxml turns a VirtualMachineInstance spec into the libvirt domain XML the launcher
// defines. It is pure Go (no cgo, no I/O): the launcher resolves what lives on disk (the images the init
// containers copied, the kernel for kernelBoot) into Inputs, calls Build, and gets back the domain plus
// the list of files it must create before starting the guest (overlays, sparse disks, cloud-init seeds)
// and the ports it must forward. Unsupported input is an error naming the offending field.
package domainxml
