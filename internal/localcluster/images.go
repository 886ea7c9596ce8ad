package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/podvirt/podvirt/internal/ociimage"
)

// BuildStaticBinary compiles a Go main package of the repository as a static binary.
func (c Config) BuildStaticBinary(ctx context.Context, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := execIn(ctx, c.RepoDir, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// buildPauseImage builds the sandbox image into the image cache.
func (c Config) buildPauseImage(ctx context.Context) (string, error) {
	bin := filepath.Join(c.ImageDir(), "build", "pause")
	if err := c.BuildStaticBinary(ctx, "./internal/localcluster/pause", bin); err != nil {
		return "", err
	}
	tarball := filepath.Join(c.ImageDir(), "pause.tar")
	spec := ociimage.Spec{
		Names:      []string{PauseImage},
		Layers:     []ociimage.Layer{{Src: bin, Dest: "/pause"}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	}
	if err := ociimage.BuildTarball(spec, tarball); err != nil {
		return "", fmt.Errorf("pause image: %w", err)
	}
	return tarball, nil
}

// importCachedImages imports every image tarball of the image cache into the containerd at socket:
// images survive a down/up cycle this way, while containerd's own store does not.
func (c Config) importCachedImages(ctx context.Context, socket string, out io.Writer) error {
	files, err := filepath.Glob(filepath.Join(c.ImageDir(), "*.tar"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	return ociimage.Import(ctx, "ctr", socket, files, out)
}
