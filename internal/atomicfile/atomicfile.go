// Package atomicfile replaces a file whole: a reader sees the old file or the new one, never half of
// either, and a crash leaves one of the two. It is the one way the project writes a file another
// process reads (certificates, capability caches, copied disks, ISOs, exit files, cached binaries).
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Write creates path's new content with fill in a temporary file of its own (a unique name in the
// same directory, so two writers never share one), gives it mode, flushes it to disk, renames it over
// path and flushes the directory. On any error the temporary file is removed and path is untouched.
func Write(path string, mode os.FileMode, fill func(f *os.File) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
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
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return syncDir(dir)
}

// WriteFile is Write of data.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	return Write(path, mode, func(f *os.File) error {
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
		return nil
	})
}

// syncDir flushes dir, so the rename survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
