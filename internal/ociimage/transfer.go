package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/podvirt/podvirt/internal/atomicfile"
)

// ContainerdNamespace is the containerd namespace the CRI plugin (and so the kubelet) uses.
const ContainerdNamespace = "k8s.io"

// Import loads image tarballs into containerd's k8s.io namespace through ctr, at the given socket.
func Import(ctx context.Context, ctr, address string, files []string, out io.Writer) error {
	if _, err := os.Stat(address); err != nil {
		return fmt.Errorf("containerd socket %s: %w (is the local cluster up? run `make cluster-up`)", address, err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("image tarball: %w", err)
		}
		cmd := exec.CommandContext(ctx, ctr, "-n", ContainerdNamespace, "--address", address, "images", "import", f)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ctr images import %s: %w", f, err)
		}
	}
	return nil
}

// NamedImage is one image of a tarball with the name the tarball gives it.
type NamedImage struct {
	Name  string
	Image v1.Image
}

// ReadTarball opens an OCI image layout tarball written by BuildTarball. Extracted blobs live in
// dir, which the caller removes when done with the images.
func ReadTarball(file, dir string) ([]NamedImage, error) {
	if err := untar(file, dir); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", file, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: index: %w", file, err)
	}
	var out []NamedImage
	for _, d := range im.Manifests {
		n := d.Annotations[annotationContainerdName]
		if n == "" {
			return nil, fmt.Errorf("%s: manifest %s has no %s annotation", file, d.Digest, annotationContainerdName)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: image %s: %w", file, n, err)
		}
		out = append(out, NamedImage{Name: n, Image: img})
	}
	return out, nil
}

// Push writes the images of each tarball to registry (host[:port][/prefix]), keeping each image's
// repository path and tag: docker.io/podvirt/x:dev goes to REGISTRY/podvirt/x:dev.
func Push(ctx context.Context, registry string, files []string, out io.Writer) error {
	if registry == "" {
		return errors.New("--registry: required")
	}
	for _, f := range files {
		if err := pushOne(ctx, registry, f, out); err != nil {
			return err
		}
	}
	return nil
}

func pushOne(ctx context.Context, registry, file string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "podvirt-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	imgs, err := ReadTarball(file, dir)
	if err != nil {
		return err
	}
	for _, ni := range imgs {
		src, err := name.NewTag(ni.Name)
		if err != nil {
			return fmt.Errorf("%s: image name %q: %w", file, ni.Name, err)
		}
		dst, err := name.NewTag(strings.TrimSuffix(registry, "/") + "/" + src.RepositoryStr() + ":" + src.TagStr())
		if err != nil {
			return fmt.Errorf("--registry %q: %w", registry, err)
		}
		if err := remote.Write(dst, ni.Image, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", dst, err)
		}
		fmt.Fprintf(out, "pushed %s\n", dst)
	}
	return nil
}

func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("image tarball: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := atomicfile.Write(p, 0o644, func(f *os.File) error { _, err := io.Copy(f, tr); return err }, atomicfile.Volatile); err != nil {
				return fmt.Errorf("%s: extract %s: %w", file, hdr.Name, err)
			}
		}
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// TarballImages returns the name → manifest digest pairs of an image tarball's index, reading only
// index.json.
func TarballImages(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("image tarball: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no index.json (not an OCI image layout)", file)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if filepath.Clean(hdr.Name) != "index.json" {
			continue
		}
		idx, err := v1.ParseIndexManifest(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: index.json: %w", file, err)
		}
		out := map[string]string{}
		for _, d := range idx.Manifests {
			if n := d.Annotations[annotationContainerdName]; n != "" {
				out[n] = d.Digest.String()
			}
		}
		return out, nil
	}
}
