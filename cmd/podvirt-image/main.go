// Command podvirt-image builds reproducible OCI image tarballs without a container engine and loads
// them into the local cluster's containerd (import) or a registry (push).
//
//	podvirt-image build --name docker.io/podvirt/probe:dev --layer bin/probe=/probe --entrypoint /probe --out probe.tar
//	podvirt-image import probe.tar
//	podvirt-image push --registry registry.example:5000 probe.tar
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/podvirt/podvirt/internal/localcluster"
	"github.com/podvirt/podvirt/internal/ociimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podvirt-image:", err)
		os.Exit(1)
	}
}

func newRootCmd(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "podvirt-image",
		Short:         "Build OCI image tarballs without Docker and load them into the local cluster or a registry",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newBuildCmd(out), newImportCmd(out), newPushCmd(out))
	return root
}

// buildOptions are the flags of `build`.
type buildOptions struct {
	names, layers, args, env []string
	entrypoint, workdir      string
	user, out                string
}

func newBuildCmd(out io.Writer) *cobra.Command {
	o := &buildOptions{}
	cmd := &cobra.Command{
		Use:   "build --name REF [--name REF2 ...] --layer SRC[=DEST]... [--entrypoint PATH] [--arg A]... [--env K=V]... [--workdir DIR] [--user UID[:GID]] --out FILE.tar",
		Short: "Build a reproducible OCI image tarball from local files",
		Long: "Each --layer is one image layer. SRC is a file or directory; DEST its absolute path in the image\n" +
			"(default: /<base name> for a file, / for a directory's contents). Directories are copied\n" +
			"recursively, keeping modes and symlinks. Entries are sorted and dated 1970-01-01, owned by root.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := o.spec()
			if err != nil {
				return err
			}
			if err := ociimage.BuildTarball(spec, o.out); err != nil {
				return err
			}
			fmt.Fprintf(out, "wrote %s\n", o.out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.names, "name", nil, "image reference, e.g. docker.io/podvirt/NAME:dev (repeatable)")
	f.StringArrayVar(&o.layers, "layer", nil, "SRC[=DEST]: a file or directory to add as a layer (repeatable)")
	f.StringVar(&o.entrypoint, "entrypoint", "", "absolute path of the program the container runs")
	f.StringArrayVar(&o.args, "arg", nil, "default argument (repeatable)")
	f.StringArrayVar(&o.env, "env", nil, "K=V environment variable (repeatable)")
	f.StringVar(&o.workdir, "workdir", "", "working directory")
	f.StringVar(&o.user, "user", "", "UID[:GID] to run as")
	f.StringVar(&o.out, "out", "", "output tarball (OCI image layout)")
	return cmd
}

func (o *buildOptions) spec() (ociimage.Spec, error) {
	if o.out == "" {
		return ociimage.Spec{}, fmt.Errorf("--out: required")
	}
	s := ociimage.Spec{Names: o.names, Args: o.args, Env: o.env, WorkingDir: o.workdir, User: o.user}
	if o.entrypoint != "" {
		s.Entrypoint = []string{o.entrypoint}
	}
	for _, l := range o.layers {
		layer, err := ociimage.ParseLayer(l)
		if err != nil {
			return ociimage.Spec{}, err
		}
		s.Layers = append(s.Layers, layer)
	}
	return s, s.Validate()
}

func newImportCmd(out io.Writer) *cobra.Command {
	var address, ctr string
	cmd := &cobra.Command{
		Use:   "import FILE.tar...",
		Short: "Import image tarballs into the local cluster's containerd (namespace k8s.io)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return ociimage.Import(cmd.Context(), ctr, address, files, out)
		},
	}
	cmd.Flags().StringVar(&address, "address", localcluster.DefaultConfig().ContainerdSocket(), "containerd socket of the local cluster")
	cmd.Flags().StringVar(&ctr, "ctr", "ctr", "ctr binary")
	return cmd
}

func newPushCmd(out io.Writer) *cobra.Command {
	var registry string
	cmd := &cobra.Command{
		Use:   "push --registry HOST[:PORT][/PREFIX] FILE.tar...",
		Short: "Push the images of tarballs to a registry, keeping repository path and tag",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return ociimage.Push(cmd.Context(), registry, files, out)
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "", "registry to push to (required)")
	return cmd
}
