package diskcopy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/podvirt/podvirt/nodeagent/launcher/diskcopy"
)

// image writes a 16 MiB file with data only in its first and last 4 KiB.
func image(t *testing.T, path string) []byte {
	t.Helper()
	data := make([]byte, 16<<20)
	copy(data, bytes.Repeat([]byte("boot"), 1024))
	copy(data[len(data)-4096:], bytes.Repeat([]byte("tail"), 1024))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestCopyIsSparseAndExact(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "disk")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	want := image(t, filepath.Join(src, "cirros.qcow2"))
	// SRC is a directory with one file, DST a directory: the file keeps its name.
	got, err := diskcopy.Copy(src, filepath.Join(dir, "private", "disks", "containerdisk")+"/")
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dir, "private", "disks", "containerdisk", "cirros.qcow2") {
		t.Fatalf("copied to %s", got)
	}
	data, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatal("copy differs from the source")
	}
	if a := allocated(t, got); a > 1<<20 {
		t.Fatalf("copy allocates %d bytes of a 16 MiB image with 8 KiB of data: not sparse", a)
	}
	if st, _ := os.Stat(got); st.Mode().Perm()&0o222 != 0 {
		t.Fatalf("copy is writable (%v): the image must not be modified", st.Mode())
	}
	// A file to a file name.
	if got, err := diskcopy.Copy(filepath.Join(src, "cirros.qcow2"), filepath.Join(dir, "kernelboot", "kernel")); err != nil || filepath.Base(got) != "kernel" {
		t.Fatalf("copy to a file name: %s, %v", got, err)
	}
}

func TestCopyRefusesAmbiguousSource(t *testing.T) {
	dir := t.TempDir()
	image(t, filepath.Join(dir, "a.img"))
	image(t, filepath.Join(dir, "b.img"))
	_, err := diskcopy.Copy(dir, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "holds 2 files") {
		t.Fatalf("error = %v", err)
	}
	if _, err := diskcopy.Copy(filepath.Join(dir, "missing"), t.TempDir()); err == nil {
		t.Fatal("no error for a missing source")
	}
}

func TestInstallCopiesTheExecutable(t *testing.T) {
	dir := t.TempDir()
	dst, err := diskcopy.Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	a, _ := os.ReadFile(self)
	b, _ := os.ReadFile(dst)
	if !bytes.Equal(a, b) {
		t.Fatal("installed binary differs from the running one")
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", st.Mode())
	}
}
