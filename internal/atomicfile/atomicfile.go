// Package atomicfile replaces a file whole: a reader sees the old file or the new one, never half of
// either. It is the one way the project writes a file another process reads (certificates,
// capability caches, copied disks, ISOs, exit files, cached binaries, image layouts).
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Option changes how Write writes.
type Option int

// Volatile skips flushing to disk: for files that do not outlive their Pod or are rebuilt after a
// crash (copied disks, ISOs, caches), where a flush of gigabytes on a VM's start is pure cost. The
// replacement is still atomic for readers.
const Volatile Option = 1

// Write creates path's new content with fill in a temporary file of its own (a unique name in the
// same directory, so two writers never share one), gives it mode, flushes it to disk (unless
// Volatile), renames it over path and flushes the directory. Until the rename, any error leaves
// path untouched and removes the temporary file.
func Write(path string, mode os.FileMode, fill func(f *os.File) error, opts ...Option) (err error) {
	durable := true
	for _, o := range opts {
		durable = durable && o != Volatile
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w", path, err)
	}
	renamed := false
	defer func() { // also on a panic in fill
		if !renamed {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", f.Name(), err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	renamed = true
	if !durable {
		return nil
	}
	return syncDir(dir)
}

// WriteFile is Write of data.
func WriteFile(path string, data []byte, mode os.FileMode, opts ...Option) error {
	return Write(path, mode, func(f *os.File) error {
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
		return nil
	}, opts...)
}

// syncDir flushes dir, so the rename survives a crash; a file system that cannot flush a directory
// (EINVAL, unsupported) is not an error: the file is in place.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
