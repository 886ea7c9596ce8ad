// Package ociimage builds reproducible OCI image tarballs from local files without a container
// engine, and moves them into a container runtime (containerd, through ctr) or a registry.
//
// A build is a pure function of its inputs: every tar entry has a fixed time and owner, entries are
// sorted, and the image config carries a fixed creation time, so the same files give the same digest.
package ociimage

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Layer copies Src (a file or a directory, on the build machine) to Dest (an absolute path in the
// image). Directories are copied recursively, keeping modes and symlinks.
type Layer struct {
	Src  string
	Dest string
}

// Spec describes one image.
type Spec struct {
	// Names are the references the image is known by, e.g. docker.io/podvirt/probe:dev.
	Names []string
	// Layers are applied in order, one image layer each.
	Layers []Layer
	// Entrypoint is the program run by the container, Args its default arguments.
	Entrypoint []string
	Args       []string
	// Env holds K=V pairs.
	Env        []string
	WorkingDir string
	// User is UID or UID:GID (numeric, as no /etc/passwd is assumed).
	User string
	// Arch is the image architecture; empty means the build machine's.
	Arch string
}

// ParseLayer parses the SRC[=DEST] form of --layer. Without DEST a file lands at /<its base name>
// and a directory's contents at /.
func ParseLayer(s string) (Layer, error) {
	src, dest, hasDest := strings.Cut(s, "=")
	if src == "" {
		return Layer{}, fmt.Errorf("--layer %q: empty source", s)
	}
	l := Layer{Src: src, Dest: dest}
	if hasDest && !path.IsAbs(dest) {
		return Layer{}, fmt.Errorf("--layer %q: destination %q is not an absolute path", s, dest)
	}
	return l, nil
}

// Validate checks the spec without touching the file system.
func (s Spec) Validate() error {
	var errs []error
	if len(s.Names) == 0 {
		errs = append(errs, errors.New("--name: at least one image name is required"))
	}
	for _, n := range s.Names {
		if _, err := NormalizeName(n); err != nil {
			errs = append(errs, err)
		}
	}
	if len(s.Layers) == 0 {
		errs = append(errs, errors.New("--layer: at least one layer is required"))
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("--env %q: want K=V", e))
		}
	}
	if s.WorkingDir != "" && !path.IsAbs(s.WorkingDir) {
		errs = append(errs, fmt.Errorf("--workdir %q: not an absolute path", s.WorkingDir))
	}
	if len(s.Entrypoint) > 0 && s.Entrypoint[0] == "" {
		errs = append(errs, errors.New("--entrypoint: empty path"))
	}
	if s.User != "" {
		if err := validateUser(s.User); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func validateUser(u string) error {
	uid, gid, hasGID := strings.Cut(u, ":")
	if _, err := strconv.ParseUint(uid, 10, 32); err != nil {
		return fmt.Errorf("--user %q: UID must be a number", u)
	}
	if hasGID {
		if _, err := strconv.ParseUint(gid, 10, 32); err != nil {
			return fmt.Errorf("--user %q: GID must be a number", u)
		}
	}
	return nil
}

// NormalizeName returns the fully qualified form of an image reference as containerd records it
// (docker.io/library/busybox:latest for busybox). Digest references are refused: a name is a tag.
func NormalizeName(ref string) (string, error) {
	t, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("--name %q: %w", ref, err)
	}
	reg := t.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + t.RepositoryStr() + ":" + t.TagStr(), nil
}

func (s Spec) arch() string {
	if s.Arch != "" {
		return s.Arch
	}
	return runtime.GOARCH
}

// destFor returns where a layer's source lands in the image: explicit Dest, else /<base> for a
// file and / for a directory.
func (l Layer) destFor(isDir bool) string {
	if l.Dest != "" {
		return path.Clean(l.Dest)
	}
	if isDir {
		return "/"
	}
	return "/" + filepath.Base(l.Src)
}
