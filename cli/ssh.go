package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// SSHOptions are `ssh` and `scp`: the local OpenSSH client, reaching the guest through a
// ProxyCommand of this binary's `port-forward --stdio` (so no Service or node port is needed).
type SSHOptions struct {
	genericiooptions.IOStreams
	clientSource
	scp bool

	Username     string
	IdentityFile string
	Port         int
	Command      string
	LocalOpts    []string
	Recursive    bool

	args     []string // ssh's or scp's arguments, built by Complete
	flagArgs []string // the kubeconfig flags given, for the ProxyCommand
}

func newSSHCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &SSHOptions{IOStreams: streams, clientSource: clientSource{kube: kube}}
	cmd := &cobra.Command{
		Use:   "ssh [USER@]TYPE/NAME[.NAMESPACE]",
		Short: "Open an SSH session to a virtual machine with the local ssh client",
		Example: "  virtctl ssh fedora@vm/my-vm -i ~/.ssh/id_ed25519\n" +
			"  virtctl ssh vm/my-vm -l fedora --command 'uname -a'",
		Args: cobra.ExactArgs(1),
		RunE: o.runE,
	}
	o.addFlags(cmd)
	cmd.Flags().StringVarP(&o.Command, "command", "c", "", "Run this command instead of a shell")
	return cmd
}

func newSCPCommand(kube *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &SSHOptions{IOStreams: streams, clientSource: clientSource{kube: kube}, scp: true}
	cmd := &cobra.Command{
		Use:     "scp SOURCE DESTINATION",
		Short:   "Copy files to or from a virtual machine with the local scp (remote: [USER@]TYPE/NAME[.NAMESPACE]:PATH)",
		Example: "  virtctl scp ./notes.txt fedora@vm/my-vm:/tmp/\n  virtctl scp -r fedora@vm/my-vm:/etc/ ./etc-copy",
		Args:    cobra.ExactArgs(2),
		RunE:    o.runE,
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "r", false, "Copy directories recursively")
	return cmd
}

// runE is ssh's and scp's RunE: the kubeconfig flags for the ProxyCommand, Complete, Run.
func (o *SSHOptions) runE(cmd *cobra.Command, args []string) error {
	o.flagArgs = kubeFlagArgs(cmd)
	if err := o.Complete(cmd, args); err != nil {
		return err
	}
	return o.Run(cmd.Context())
}

func (o *SSHOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.Username, "username", "l", "", "User to log in as (default: USER@ in the target, else ssh's default)")
	f.StringVarP(&o.IdentityFile, "identity-file", "i", "", "Private key file")
	f.IntVarP(&o.Port, "port", "p", 22, "The guest's SSH port")
	f.StringArrayVarP(&o.LocalOpts, "local-ssh-opts", "t", nil, "An option passed on to the local ssh/scp (repeatable), e.g. -t '-o StrictHostKeyChecking=no'")
}

// remote is a parsed [USER@]TYPE/NAME[.NAMESPACE].
type remote struct {
	user string
	t    target
}

func parseRemote(s string) (remote, error) {
	var r remote
	if user, rest, ok := strings.Cut(s, "@"); ok {
		r.user, s = user, rest
	}
	if !strings.Contains(s, "/") {
		return r, fmt.Errorf("%q: name the VM as vm/NAME or vmi/NAME", s)
	}
	t, err := parseTarget(s)
	r.t = t
	return r, err
}

// host is the name ssh sees for the target (also its known_hosts key): TYPE.NAME.NAMESPACE.
func (r remote) host(namespace string) string {
	ns := r.t.namespace
	if ns == "" {
		ns = namespace
	}
	kind := "vmi"
	if r.t.resource == resourceVM {
		kind = "vm"
	}
	return kind + "." + r.t.name + "." + ns
}

// Complete parses the target(s) and builds ssh's (or scp's) arguments.
func (o *SSHOptions) Complete(cmd *cobra.Command, args []string) error {
	if o.Port < 1 || o.Port > 65535 {
		return usageError(cmd, "--port must be 1-65535, got %d", o.Port)
	}
	ns := ""
	if o.kube.Namespace != nil {
		ns = *o.kube.Namespace
	}
	if ns == "" {
		var err error
		if ns, _, err = o.kube.ToRawKubeConfigLoader().Namespace(); err != nil {
			return fmt.Errorf("kubeconfig namespace: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary for ssh's ProxyCommand: %w", err)
	}
	if !o.scp {
		r, err := parseRemote(args[0])
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		o.args = o.sshArgs(self, ns, r)
		return nil
	}
	var remoteSide *remote
	var paths [2]string
	for i, a := range args {
		paths[i] = a
		spec, path, ok := strings.Cut(a, ":")
		if !ok || !strings.Contains(spec, "/") {
			continue // a local path
		}
		if remoteSide != nil {
			return usageError(cmd, "copy between a VM and a local path, not between two VMs")
		}
		r, err := parseRemote(spec)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		remoteSide = &r
		paths[i] = o.login(r) + r.host(ns) + ":" + path
	}
	if remoteSide == nil {
		return usageError(cmd, "one of SOURCE and DESTINATION must be remote: [USER@]vm/NAME:PATH")
	}
	o.args = append(o.commonArgs(self, ns, *remoteSide, "-P"), paths[0], paths[1])
	if o.Recursive {
		o.args = append([]string{"-r"}, o.args...)
	}
	return nil
}

func (o *SSHOptions) login(r remote) string {
	switch {
	case r.user != "":
		return r.user + "@"
	case o.Username != "":
		return o.Username + "@"
	}
	return ""
}

// sshArgs: options, USER@HOST, then the command if any.
func (o *SSHOptions) sshArgs(self, ns string, r remote) []string {
	args := append(o.commonArgs(self, ns, r, "-p"), o.login(r)+r.host(ns))
	if o.Command != "" {
		args = append(args, o.Command)
	}
	return args
}

// commonArgs are the ProxyCommand, the host key alias, the identity and the user's own options.
func (o *SSHOptions) commonArgs(self, ns string, r remote, portFlag string) []string {
	proxy := []string{shellQuote(self), "port-forward", "--stdio"}
	for _, a := range o.flagArgs {
		proxy = append(proxy, shellQuote(a))
	}
	kind := "vmi"
	if r.t.resource == resourceVM {
		kind = "vm"
	}
	namespace := r.t.namespace
	if namespace == "" {
		namespace = ns
	}
	proxy = append(proxy, kind+"/"+r.t.name+"."+namespace, strconv.Itoa(o.Port))
	args := []string{"-o", "ProxyCommand=" + strings.Join(proxy, " "), "-o", "HostKeyAlias=" + r.host(ns), portFlag, strconv.Itoa(o.Port)}
	if o.IdentityFile != "" {
		args = append(args, "-i", o.IdentityFile)
	}
	for _, opt := range o.LocalOpts {
		args = append(args, strings.Fields(opt)...)
	}
	return args
}

// shellQuote quotes s for the shell ssh runs the ProxyCommand with.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(strings.ContainsRune("/.-_:=,@+", r) || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Run execs the local ssh or scp; its exit code becomes this command's.
func (o *SSHOptions) Run(ctx context.Context) error {
	binary := "ssh"
	if o.scp {
		binary = "scp"
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return fmt.Errorf("%s is not on the PATH: install the OpenSSH client (Debian/Ubuntu: apt install openssh-client)", binary)
	}
	cmd := exec.CommandContext(ctx, path, o.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.In, o.Out, o.ErrOut
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return &exitError{code: exit.ExitCode(), err: fmt.Errorf("%s exited with status %d", binary, exit.ExitCode())}
	}
	return err
}
