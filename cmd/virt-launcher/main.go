// Command virt-launcher runs one guest inside a launcher Pod.
//
//	virt-launcher run --vmi-name NAME --namespace NS   (the compute container)
//	virt-launcher console-log                         (the guest-console-log container)
//	virt-launcher probe-capabilities --out DIR --stay (a container of the node agent's Pod)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher"
	"github.com/podvirt/podvirt/nodeagent/launcher/consolelog"
	"github.com/podvirt/podvirt/nodeagent/launcher/pid1"
)

const usage = `usage:
  virt-launcher run --vmi-name NAME --namespace NS [flags]   run the guest (compute container)
  virt-launcher console-log [--private-dir DIR]             stream the guest's serial log to stdout
  virt-launcher probe-capabilities --out DIR [--stay]       probe qemu once, leave libvirt's cache files in DIR
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "run" && pid1.IsInit() {
		// PID 1 of the container: be its init (reap libvirt's orphaned qemus) and run the launcher
		// as a child.
		code, err := pid1.Run(args)
		if err != nil {
			fmt.Fprintln(stderr, "virt-launcher:", err)
		}
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stderr)
	case "console-log":
		return consoleLogCmd(ctx, args[1:], stdout, stderr)
	case "probe-capabilities":
		return probeCapabilitiesCmd(ctx, args[1:], stderr)
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func runCmd(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := launcher.Config{}
	fs.StringVar(&cfg.VMIName, "vmi-name", "", "name of the VirtualMachineInstance this launcher runs (required)")
	fs.StringVar(&cfg.Namespace, "namespace", "", "namespace of the VirtualMachineInstance (required)")
	fs.StringVar(&cfg.PrivateDir, "private-dir", launcherv1.PrivateDir, "the Pod's private directory (sockets, logs, disks)")
	fs.StringVar(&cfg.PVCRoot, "pvc-root", launcherv1.PVCMountRoot, "where PVC volumes are mounted")
	fs.StringVar(&cfg.SecretsDir, "secrets-dir", launcherv1.SecretMountRoot, "where cloud-init Secrets are mounted")
	fs.StringVar(&cfg.StateDir, "state-dir", launcherv1.PersistentStateDir, "where the VM's persistent state volume is mounted")
	fs.StringVar(&cfg.HugepagesDir, "hugepages-dir", launcherv1.HugepagesDir, "where a hugetlbfs is mounted when guest memory is in huge pages")
	fs.StringVar(&cfg.LibvirtRoot, "libvirt-root", "/var/lib/virt-launcher", "writable directory for the embedded libvirt driver")
	fs.StringVar(&cfg.QemuImg, "qemu-img", "qemu-img", "qemu-img binary")
	fs.DurationVar(&cfg.FenceAfter, "fence-after", launcherv1.AgentSilenceLimit, "destroy the running guest when the node agent has sent no request for this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case cfg.VMIName == "":
		fmt.Fprintln(stderr, "--vmi-name: required")
		return 2
	case cfg.Namespace == "":
		fmt.Fprintln(stderr, "--namespace: required")
		return 2
	case fs.NArg() != 0:
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	cfg.Log = slog.New(slog.NewJSONHandler(stderr, nil)).With("vmi", cfg.Namespace+"/"+cfg.VMIName)
	if err := launcher.PrepareLibvirtEnv(cfg.LibvirtRoot); err != nil {
		cfg.Log.Error("Preparing the libvirt directory", "err", err)
		return launcher.ExitError
	}
	code := launcher.Run(ctx, cfg)
	cfg.Log.Info("Launcher exiting", "code", code)
	return code
}

func consoleLogCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("console-log", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("private-dir", launcherv1.PrivateDir, "the Pod's private directory")
	interval := fs.Duration("interval", 250*time.Millisecond, "how often to look for more output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := consolelog.Follow(ctx, *dir, stdout, *interval); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "console-log:", err)
		return 1
	}
	return 0
}

// probeCapabilitiesCmd leaves libvirt's cache of qemu's capabilities in --out for the node agent,
// which reads it when it is there. With --stay it then waits for SIGTERM: it runs as a container of
// the agent's Pod beside the agent, so that nothing about it (its image, the probe) can keep the
// agent from starting. A failed or slow probe only means that launchers probe qemu themselves.
func probeCapabilitiesCmd(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe-capabilities", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory for the cache files (required)")
	root := fs.String("libvirt-root", "", "writable directory for the embedded libvirt driver, removed afterwards (default: a new one under $TMPDIR)")
	timeout := fs.Duration("timeout", time.Minute, "give up probing after this long")
	stay := fs.Bool("stay", false, "after probing, wait for SIGTERM (a container beside the node agent)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "--out: required, and no arguments")
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- probeInto(*root, *out) }() // libvirt's call cannot be interrupted: not joined on timeout
	select {
	case err := <-done:
		if err != nil {
			log.Error("Probing qemu's capabilities failed: every launcher probes them itself", "err", err)
		} else {
			log.Info("Probed qemu's capabilities", "out", *out, "took", time.Since(start).Round(time.Millisecond).String())
		}
	case <-time.After(*timeout):
		log.Error("Probing qemu's capabilities takes too long: every launcher probes them itself", "timeout", timeout.String())
	case <-ctx.Done():
		return 0
	}
	if *stay {
		<-ctx.Done()
	}
	return 0
}

// probeInto probes qemu with an embedded libvirt rooted at root (a temporary directory when empty)
// and leaves the cache files in out.
func probeInto(root, out string) error {
	if root == "" {
		dir, err := os.MkdirTemp("", "libvirt-probe-")
		if err != nil {
			return err
		}
		root = dir
	}
	defer func() { _ = os.RemoveAll(root) }()
	if err := launcher.PrepareLibvirtEnv(root); err != nil {
		return err
	}
	return launcher.ProbeCapabilities(root, out)
}
