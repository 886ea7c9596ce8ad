// Command container-disk is the static helper the launcher Pod's init containers run:
//
//	container-disk install DIR    copy itself into DIR (a shared emptyDir)
//	container-disk copy SRC DST   copy a disk image, kernel or initrd sparsely (SRC may be a directory
//	                              holding one file; DST may be a directory) and exit
//
// It runs inside containerDisk and kernelBoot images, which usually have no other binaries. Build it
// with CGO_ENABLED=0.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 2 && args[0] == "install":
		dst, err := diskcopy.Install(args[1])
		if err != nil {
			fmt.Fprintln(stderr, "container-disk install:", err)
			return 1
		}
		fmt.Fprintln(stdout, "installed", dst)
		return 0
	case len(args) == 3 && args[0] == "copy":
		dst, err := diskcopy.Copy(args[1], args[2])
		if err != nil {
			fmt.Fprintln(stderr, "container-disk copy:", err)
			return 1
		}
		fmt.Fprintln(stdout, "copied", args[1], "to", dst)
		return 0
	}
	fmt.Fprintln(stderr, "usage: container-disk install DIR | container-disk copy SRC DST")
	return 2
}
