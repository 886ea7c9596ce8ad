// Command container-disk is the static helper of the launcher Pod's disk containers:
//
//	container-disk install DIR                          copy itself into DIR (a shared emptyDir)
//	container-disk copy SRC DST                         copy a disk image, kernel or initrd sparsely
//	                                                    (SRC may be a directory holding one file; DST
//	                                                    may be a directory) and exit
//	container-disk serve PRIVATE_DIR SRC DST [SRC DST]… copy each SRC to DST, then stay until the
//	                                                    launcher whose private directory is PRIVATE_DIR
//	                                                    has ended (or SIGTERM): a running container
//	                                                    keeps the Pod Ready. A failed copy is recorded
//	                                                    beside its DST for the launcher, and exits 1.
//
// It runs inside containerDisk and kernelBoot images, which usually have no other binaries. Build it
// with CGO_ENABLED=0.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
	"github.com/podvirt/podvirt/nodeagent/launcher/lifetime"
)

// lookEvery is how often serve looks whether the launcher has ended.
const lookEvery = time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, terminated))
}

// terminated installs the SIGTERM handler when called: serve calls it after its copies, so a Pod
// deleted during a long copy ends it at once (the default action), as an init container did.
func terminated() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

func run(args []string, stdout, stderr io.Writer, terminated func() (context.Context, context.CancelFunc)) int {
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
	case len(args) >= 4 && len(args)%2 == 0 && args[0] == "serve":
		return serve(args[1], args[2:], stdout, stderr, terminated)
	}
	fmt.Fprintln(stderr, "usage: container-disk install DIR | container-disk copy SRC DST | container-disk serve PRIVATE_DIR SRC DST [SRC DST]...")
	return 2
}

// serve copies each SRC DST pair, then waits for the launcher to end (or termination).
func serve(privateDir string, pairs []string, stdout, stderr io.Writer, terminated func() (context.Context, context.CancelFunc)) int {
	for i := 0; i < len(pairs); i += 2 {
		src, dst := pairs[i], pairs[i+1]
		written, err := diskcopy.Copy(src, dst)
		if err != nil {
			fmt.Fprintln(stderr, "container-disk serve:", err)
			if rerr := diskcopy.RecordFailure(dst, fmt.Errorf("copying %s out of its image failed: %w", src, err)); rerr != nil {
				fmt.Fprintln(stderr, "container-disk serve:", rerr)
			}
			return 1
		}
		fmt.Fprintln(stdout, "copied", src, "to", written)
	}
	debug.FreeOSMemory() // what the copy used: this process stays as long as the guest runs
	ctx, stop := terminated()
	defer stop()
	launcher := lifetime.New(privateDir)
	tick := time.NewTicker(lookEvery)
	defer tick.Stop()
	for !launcher.Ended() {
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
		}
	}
	return 0
}
