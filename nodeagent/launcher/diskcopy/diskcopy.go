// Package diskcopy is the container-disk helper's job: copy a disk image (or kernel, initrd) out of a
// containerDisk or kernelBoot image into the launcher Pod's private directory, keeping it sparse, and
// install the helper itself into a shared volume so images without any binaries can run it. Pure Go,
// built static (CGO_ENABLED=0).
package diskcopy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/podvirt/podvirt/internal/atomicfile"
)

// blockSize is the unit in which all-zero data becomes a hole.
const blockSize = 64 << 10

// Copy copies src to dst and returns the path written. src may be a directory holding exactly one
// regular file (a containerDisk's /disk). When dst ends in "/" or is an existing directory the file keeps
// its base name inside it. All-zero blocks become holes; the result is written under a temporary name,
// made read-only and renamed into place, so a reader never sees half a file.
func Copy(src, dst string) (string, error) {
	src, err := singleFile(src)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(dst); strings.HasSuffix(dst, "/") || (err == nil && st.IsDir()) {
		dst = filepath.Join(dst, filepath.Base(src))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("open source: %w", err)
	}
	defer in.Close()
	err = atomicfile.Write(dst, 0o444, func(tmp *os.File) error {
		size, err := sparseCopy(tmp, in)
		if err == nil {
			err = tmp.Truncate(size)
		}
		return err
	}, atomicfile.Volatile) // lives as long as its Pod
	if err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return dst, nil
}

// singleFile is path itself for a file, or the one regular file in path for a directory.
func singleFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("source: %w", err)
	}
	if !st.IsDir() {
		return path, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return "", fmt.Errorf("source: %w", err)
	}
	var files []string
	for _, e := range entries {
		if info, err := os.Stat(filepath.Join(path, e.Name())); err == nil && info.Mode().IsRegular() {
			files = append(files, e.Name())
		}
	}
	if len(files) != 1 {
		return "", fmt.Errorf("source: %s holds %d files (%s), want exactly one disk image", path, len(files), strings.Join(files, ", "))
	}
	return filepath.Join(path, files[0]), nil
}

// sparseCopy writes r to w block by block, seeking over all-zero blocks; it returns the bytes read.
func sparseCopy(w *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, blockSize)
	zero := make([]byte, blockSize)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				if _, serr := w.Seek(int64(n), io.SeekCurrent); serr != nil {
					return off, serr
				}
			} else if _, werr := w.Write(buf[:n]); werr != nil {
				return off, werr
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// Install copies the running executable into dir (as dir/container-disk, mode 0755).
func Install(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	dst := filepath.Join(dir, "container-disk")
	if _, err := Copy(self, dst); err != nil {
		return "", err
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return "", fmt.Errorf("make %s executable: %w", dst, err)
	}
	return dst, nil
}

// failureSuffix names the file beside a copy's destination that says why the copy failed: the
// launcher waits for the destination and reports this instead when it appears.
const failureSuffix = ".failed"

// RecordFailure leaves cause beside dst, for the launcher (written whole, then renamed into place).
func RecordFailure(dst string, cause error) error {
	path := strings.TrimSuffix(dst, "/") + failureSuffix
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := atomicfile.WriteFile(path, []byte(cause.Error()), 0o444); err != nil {
		return fmt.Errorf("record the failure: %w", err)
	}
	return nil
}

// Failure is why the copy to dst failed, if RecordFailure said so.
func Failure(dst string) (string, bool) {
	data, err := os.ReadFile(strings.TrimSuffix(dst, "/") + failureSuffix)
	if err != nil {
		return "", false
	}
	return string(data), true
}
