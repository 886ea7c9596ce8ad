// Package isoimage writes small ISO9660 images from a few files: cloud-init seeds and the disks
// that present a ConfigMap, Secret, ServiceAccount or downward API fields to a guest. It is pure Go
// (github.com/diskfs/go-diskfs, with Rock Ridge names, so the guest sees "user-data", not
// ISO9660's mangled "USER_DAT.;1").
package isoimage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/podvirt/podvirt/internal/atomicfile"
)

// MinSize is the smallest image written (the rest is a sparse pad): busybox's volume_id, which small
// guests' findfs uses to find a label, cannot identify a device under 68 KiB.
const MinSize = 1 << 20

// File is one file of an image; Name may hold directories ("openstack/latest/user_data").
type File struct {
	Name string
	Data []byte
}

// MaxNameBytes bounds each element of a file's name on an image.
const MaxNameBytes = 100

// MaxDepth bounds how many elements a file's name has (its directories and itself): ISO 9660 allows
// eight levels of directories, the root one of them, and the ISO writer does not relocate deeper
// ones (a deeper image makes go-diskfs's own reader panic; found by FuzzWrite).
const MaxDepth = 8

// Write writes an image labelled label holding files to path (replacing it). The image is built in a
// temporary directory next to path.
func Write(path, label string, files []File) (err error) {
	work, err := os.MkdirTemp(filepath.Dir(path), ".iso-")
	if err != nil {
		return fmt.Errorf("create iso workspace: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(work); rerr != nil && err == nil {
			err = fmt.Errorf("remove iso workspace: %w", rerr)
		}
	}()
	staging := filepath.Join(work, "staging")
	if err := os.Mkdir(staging, 0o755); err != nil { // Rock Ridge records the mode: keep it readable
		return fmt.Errorf("create iso staging dir: %w", err)
	}
	for _, sf := range files {
		if !filepath.IsLocal(sf.Name) || strings.ContainsRune(sf.Name, 0) {
			return fmt.Errorf("file %.100q: not a name inside the image", sf.Name)
		}
		elems := strings.Split(filepath.ToSlash(filepath.Clean(sf.Name)), "/")
		if len(elems) > MaxDepth {
			return fmt.Errorf("file %.100q: %d levels deep, an ISO disk holds at most %d", sf.Name, len(elems), MaxDepth)
		}
		for _, elem := range elems {
			if len(elem) > MaxNameBytes {
				// The ISO writer has no continuation for longer Rock Ridge names: they come out
				// malformed or cut to 8 characters (found by FuzzWrite).
				return fmt.Errorf("file %.100q: %q is longer than %d bytes, the longest name an ISO disk holds here", sf.Name, elem[:16]+"…", MaxNameBytes)
			}
		}
		if dir := filepath.Dir(sf.Name); dir != "." && strings.Contains("/"+filepath.ToSlash(dir), "/.") {
			// The ISO writer makes a malformed image of a directory named so (found by FuzzWrite:
			// readers refuse its file identifiers); files named so are fine.
			return fmt.Errorf("file %.100q: a directory whose name begins with a dot cannot be put on an ISO disk", sf.Name)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(staging, sf.Name)), 0o755); err != nil {
			return fmt.Errorf("stage %s: %w", sf.Name, err)
		}
		if err := os.WriteFile(filepath.Join(staging, sf.Name), sf.Data, 0o644); err != nil {
			return fmt.Errorf("stage %s: %w", sf.Name, err)
		}
	}
	return atomicfile.Write(path, 0o644, func(f *os.File) error {
		fs, err := iso9660.Create(file.New(f, false), 0, 0, 2048, staging)
		if err != nil {
			return fmt.Errorf("create iso filesystem: %w", err)
		}
		if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: label}); err != nil {
			return fmt.Errorf("write iso: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("stat iso: %w", err)
		}
		if st.Size() < MinSize {
			if err := f.Truncate(MinSize); err != nil {
				return fmt.Errorf("pad iso: %w", err)
			}
		}
		return nil
	}, atomicfile.Volatile) // rebuilt by every start
}

// FromDir reads the files of a Kubernetes volume directory (a ConfigMap, Secret, projected or
// downward API volume): its visible entries, whose targets the kubelet swaps atomically behind
// "..data", following the kubelet's symlinks; a key with directories ("labels/app") keeps them.
func FromDir(dir string) ([]File, error) {
	return fromDir(dir, "")
}

func fromDir(dir, prefix string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var files []File
	for _, e := range entries {
		if len(e.Name()) >= 2 && e.Name()[:2] == ".." {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", prefix+e.Name(), err)
		}
		if fi.IsDir() {
			sub, err := fromDir(p, prefix+e.Name()+"/")
			if err != nil {
				return nil, err
			}
			files = append(files, sub...)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", prefix+e.Name(), err)
		}
		files = append(files, File{Name: prefix + e.Name(), Data: data})
	}
	return files, nil
}
