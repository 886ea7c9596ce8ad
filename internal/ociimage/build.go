package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/podvirt/podvirt/internal/atomicfile"
)

// Annotations containerd and the OCI image layout use to name the images of an index.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// BuildTarball builds the image described by spec and writes it to out as an OCI image layout
// tarball whose index names the image once per spec.Names entry.
func BuildTarball(spec Spec, out string) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	names := make([]string, 0, len(spec.Names))
	for _, n := range spec.Names {
		full, err := NormalizeName(n)
		if err != nil {
			return err
		}
		names = append(names, full)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".ociimage-")
	if err != nil {
		return fmt.Errorf("--out %q: %w", out, err)
	}
	defer os.RemoveAll(tmp)
	img, err := buildImage(spec, tmp)
	if err != nil {
		return err
	}
	return writeOCITarball(out, img, names)
}

// buildImage assembles the image; layer tars are staged in tmp.
func buildImage(spec Spec, tmp string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, l := range spec.Layers {
		entries, err := collectLayer(l)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(tmp, fmt.Sprintf("layer-%d.tar", i))
		if err := atomicfile.Write(p, 0o644, func(f *os.File) error { return writeLayerTar(f, entries) }, atomicfile.Volatile); err != nil {
			return nil, fmt.Errorf("--layer %q: %w", l.Src, err)
		}
		layer, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("--layer %q: %w", l.Src, err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, fmt.Errorf("append layer %q: %w", l.Src, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = spec.arch()
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Args,
		Env:        spec.Env,
		WorkingDir: spec.WorkingDir,
		User:       spec.User,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// writeOCITarball writes img as an OCI image layout in a tar, entries sorted, one index entry per name.
func writeOCITarball(out string, img v1.Image, names []string) error {
	blobs, err := imageBlobs(img)
	if err != nil {
		return err
	}
	mf, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("image manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image digest: %w", err)
	}
	size, err := img.Size()
	if err != nil {
		return fmt.Errorf("image size: %w", err)
	}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, n := range names {
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: mf.MediaType, Digest: digest, Size: size,
			Annotations: map[string]string{annotationContainerdName: n, annotationRefName: tagOf(n)},
		})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("encode index: %w", err)
	}
	return atomicfile.Write(out, 0o644, func(f *os.File) error {
		tw := tar.NewWriter(f)
		if err := writeTarBytes(tw, "index.json", indexJSON); err != nil {
			return err
		}
		if err := writeTarBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			return err
		}
		for _, dir := range []string{"blobs/", "blobs/sha256/"} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		for _, b := range blobs {
			if err := writeBlob(tw, b); err != nil {
				return err
			}
		}
		return tw.Close()
	})
}

// blob is one content-addressed file of the layout.
type blob struct {
	hash v1.Hash
	size int64
	open func() (io.ReadCloser, error)
}

// imageBlobs returns the manifest, config and compressed layers of img, sorted by digest.
func imageBlobs(img v1.Image) ([]blob, error) {
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("image manifest: %w", err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	mh, _, _ := v1.SHA256(bytesReader(rawManifest))
	ch, _, _ := v1.SHA256(bytesReader(rawConfig))
	byDigest := map[v1.Hash]blob{
		mh: {hash: mh, size: int64(len(rawManifest)), open: bytesOpener(rawManifest)},
		ch: {hash: ch, size: int64(len(rawConfig)), open: bytesOpener(rawConfig)},
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, fmt.Errorf("layer digest: %w", err)
		}
		s, err := l.Size()
		if err != nil {
			return nil, fmt.Errorf("layer size: %w", err)
		}
		byDigest[d] = blob{hash: d, size: s, open: l.Compressed}
	}
	out := make([]blob, 0, len(byDigest))
	for _, b := range byDigest {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hash.Hex < out[j].hash.Hex })
	return out, nil
}

func writeBlob(tw *tar.Writer, b blob) error {
	rc, err := b.open()
	if err != nil {
		return fmt.Errorf("open blob %s: %w", b.hash, err)
	}
	defer rc.Close()
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "blobs/sha256/" + b.hash.Hex, Mode: 0o644, Size: b.size, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write blob %s: %w", b.hash, err)
	}
	if n, err := io.Copy(tw, rc); err != nil || n != b.size {
		return fmt.Errorf("write blob %s (%d of %d bytes): %w", b.hash, n, b.size, err)
	}
	return nil
}

func writeTarBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err := tw.Write(data)
	return err
}

func tagOf(fullName string) string {
	for i := len(fullName) - 1; i >= 0 && fullName[i] != '/'; i-- {
		if fullName[i] == ':' {
			return fullName[i+1:]
		}
	}
	return "latest"
}
