package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// epoch is the fixed time of every tar entry and of the image config.
var epoch = time.Unix(0, 0).UTC()

// entry is one file, directory or symlink of a layer.
type entry struct {
	hdr tar.Header
	src string // regular files: where the content is read from
}

// collectLayer lists the entries of one layer, keyed by their path in the image (no leading slash).
func collectLayer(l Layer) (map[string]entry, error) {
	fi, err := os.Lstat(l.Src)
	if err != nil {
		return nil, fmt.Errorf("--layer %q: %w", l.Src, err)
	}
	dest := l.destFor(fi.IsDir())
	entries := map[string]entry{}
	addParents(entries, dest)
	if !fi.IsDir() {
		e, err := entryFor(l.Src, fi)
		if err != nil {
			return nil, err
		}
		return put(entries, dest, e), nil
	}
	err = filepath.WalkDir(l.Src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(l.Src, p)
		if err != nil {
			return err
		}
		e, err := entryFor(p, info)
		if err != nil {
			return err
		}
		put(entries, path.Join(dest, filepath.ToSlash(rel)), e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--layer %q: %w", l.Src, err)
	}
	return entries, nil
}

func put(entries map[string]entry, imagePath string, e entry) map[string]entry {
	p := strings.TrimPrefix(path.Clean(imagePath), "/")
	if p == "" {
		return entries // the root directory itself is not an entry
	}
	e.hdr.Name = p
	entries[p] = e
	return entries
}

// addParents adds 0755 directories for every parent of dest, so the layer is self-contained.
func addParents(entries map[string]entry, dest string) {
	for dir := path.Dir(path.Clean(dest)); dir != "/" && dir != "."; dir = path.Dir(dir) {
		put(entries, dir, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}})
	}
}

func entryFor(p string, fi fs.FileInfo) (entry, error) {
	mode := int64(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	switch {
	case fi.IsDir():
		return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: mode}}, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return entry{}, fmt.Errorf("read symlink: %w", err)
		}
		return entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}, nil
	case fi.Mode().IsRegular():
		return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: mode, Size: fi.Size()}, src: p}, nil
	default:
		return entry{}, fmt.Errorf("%s: unsupported file type %s (only files, directories and symlinks)", p, fi.Mode().Type())
	}
}

// writeLayerTar writes the entries as an uncompressed tar, sorted by path, with fixed times and
// root ownership.
func writeLayerTar(w io.Writer, entries map[string]entry) error {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := entries[n]
		hdr := e.hdr
		hdr.ModTime = epoch
		hdr.Uid, hdr.Gid = 0, 0
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("tar header %s: %w", n, err)
		}
		if e.src != "" {
			if err := copyFile(tw, e.src, hdr.Size); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open layer file: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if n != size {
		return fmt.Errorf("copy %s: file changed size during the build", src)
	}
	return nil
}
