package isoimage

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// keyName is the kind of name Kubernetes volumes give their files (ConfigMap, Secret and downward
// API keys, with directories), as far as the reader used here (go-diskfs) finds them: each must
// read back as is. go-diskfs's reader misses names ending in a dot, which real Rock Ridge readers
// (the kernel, libarchive) find, and stumbles over some images they read: only names of this kind
// are held to a read-back, and a reader panic on any other name is the reader's.
var keyName = regexp.MustCompile(`^[-_a-zA-Z0-9]([-._a-zA-Z0-9]{0,98}[-_a-zA-Z0-9])?(/[-_a-zA-Z0-9]([-._a-zA-Z0-9]{0,98}[-_a-zA-Z0-9])?)*$`)

// readImage opens the image at iso with an ISO reader (go-diskfs), failing t when it does not read;
// the file is closed when t ends.
func readImage(t testing.TB, iso string) *iso9660.FileSystem {
	t.Helper()
	f, err := os.Open(iso)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := iso9660.Read(file.New(f, true), st.Size(), 0, 2048)
	if err != nil {
		t.Fatalf("the image %s does not read back: %v", filepath.Base(iso), err)
	}
	return fs
}

// FuzzWrite builds images from any file name, content and label, as a ConfigMap's keys and values
// (or a user's cloud-init data) reach it: a name that is not local to the image is refused, nothing
// is written outside the image's directory, and an image written holds each file's bytes under its
// name (Rock Ridge), read back by an ISO reader.
func FuzzWrite(f *testing.F) {
	f.Add("user-data", []byte("#cloud-config\n"), "cidata")
	f.Add("openstack/latest/meta_data.json", []byte(`{"uuid":"x"}`), "config-2")
	f.Add("labels/app", []byte("web"), "cfgdata")
	f.Add("../escape", []byte("x"), "cidata")
	f.Add("/etc/passwd", []byte("x"), "cidata")
	f.Add("a/../../b", []byte{0, 1, 2}, "")
	f.Add("ünïcode name", []byte("x"), "a label longer than thirty-two characters")
	f.Fuzz(func(t *testing.T, name string, data []byte, label string) {
		root := t.TempDir()
		dir := filepath.Join(root, "dir")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		iso := filepath.Join(dir, "image.iso")
		err := Write(iso, label, []File{{Name: name, Data: data}})
		if entries, _ := os.ReadDir(root); len(entries) != 1 {
			t.Fatalf("Write(%q) left %d entries beside its directory", name, len(entries))
		}
		if err != nil {
			return
		}
		if !filepath.IsLocal(name) {
			t.Fatalf("Write accepted %q, not a name inside the image", name)
		}
		if !keyName.MatchString(name) {
			return
		}
		got, err := readImage(t, iso).OpenFile("/"+filepath.ToSlash(filepath.Clean(name)), os.O_RDONLY)
		if err != nil {
			t.Fatalf("%q, a ConfigMap key's kind of name, is not in the image: %v", name, err)
		}
		back, err := io.ReadAll(io.LimitReader(got, int64(len(data))+1))
		if err != nil {
			t.Fatalf("read %q back: %v", name, err)
		}
		if string(back) != string(data) {
			t.Fatalf("%q holds %d bytes, want the %d written", name, len(back), len(data))
		}
	})
}
